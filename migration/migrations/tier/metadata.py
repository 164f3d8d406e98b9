"""Topic ids and cleanup policies from a KRaft metadata log (``__cluster_metadata-0``).

Partitions created before topic ids (or copied without ``partition.metadata``) still have an
id in the controller's metadata: the newest complete checkpoint (``<end>-<epoch>.checkpoint``)
holds the image at its end offset, and the log segments from there on hold the changes. Only
the records needed here are followed: TopicRecord, RemoveTopicRecord and topic ConfigRecords of
``cleanup.policy`` (compacted topics cannot be tiered).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from migration.formats import names
from migration.formats.errors import KafkaFormatError
from migration.formats.file_records import FileRecords
from migration.formats.kraft_checkpoint import read_checkpoint_file
from migration.formats.metadata_records import MetadataRecord, UnknownMetadataRecordError, decode_metadata_record
from migration.formats.record_batch import RecordBatch

TOPIC_RESOURCE_TYPE = 2  # ConfigResource.Type.TOPIC


@dataclass
class MetadataImage:
    topic_ids: dict[str, str] = field(default_factory=dict)  # topic name -> Uuid string
    cleanup_policies: dict[str, str] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def apply(self, rec: MetadataRecord) -> None:
        f = rec.fields
        if rec.name == "TopicRecord":
            self.topic_ids[f["Name"]] = str(f["TopicId"])
        elif rec.name == "RemoveTopicRecord":
            gone = [n for n, i in self.topic_ids.items() if i == str(f["TopicId"])]
            for n in gone:
                del self.topic_ids[n]
                self.cleanup_policies.pop(n, None)
        elif rec.name == "ConfigRecord" and f.get("ResourceType") == TOPIC_RESOURCE_TYPE \
                and f.get("Name") == "cleanup.policy":
            if f.get("Value") is None:
                self.cleanup_policies.pop(f["ResourceName"], None)
            else:
                self.cleanup_policies[f["ResourceName"]] = f["Value"]

    def is_compacted(self, topic: str) -> bool:
        return "compact" in self.cleanup_policies.get(topic, "")


def find_metadata_partition_dir(path: str | os.PathLike[str]) -> Path | None:
    """``path`` itself when it is ``__cluster_metadata-0``, else that child of it."""
    p = Path(path)
    if p.name == names.METADATA_PARTITION_DIR and p.is_dir():
        return p
    child = p / names.METADATA_PARTITION_DIR
    return child if child.is_dir() else None


def read_metadata_image(dirs: Sequence[str | os.PathLike[str]]) -> MetadataImage:
    """Merge what every given metadata log says (controllers and brokers replicate the same log;
    later dirs win on conflicts, which only arise from diverged copies)."""
    image = MetadataImage()
    for d in dirs:
        mdir = find_metadata_partition_dir(d)
        if mdir is None:
            continue
        try:
            _read_one(mdir, image)
            image.sources.append(str(mdir))
        except (KafkaFormatError, OSError) as exc:
            image.problems.append(f"{mdir}: {exc}")
    return image


def _read_one(mdir: Path, image: MetadataImage) -> None:
    start = 0
    checkpoints = []
    for e in os.scandir(mdir):
        if not e.name.endswith(".checkpoint"):
            continue
        try:
            cn = names.parse_checkpoint_file_name(e.name)
        except KafkaFormatError:
            continue
        if cn.state == names.CheckpointState.COMPLETE:
            checkpoints.append((cn.end_offset, cn.epoch, e.path))
    if checkpoints:
        end, _, path = max(checkpoints)
        for rec in read_checkpoint_file(path).metadata_records:
            image.apply(rec)
        start = end
    logs = sorted(names.offset_from_file_name(e.name) for e in os.scandir(mdir)
                  if e.name.endswith(names.LOG_FILE_SUFFIX))
    for base in logs:
        for b in FileRecords(mdir / names.log_file_name(base)).batches():
            if not isinstance(b, RecordBatch) or b.is_control or b.next_offset <= start:
                continue
            for r in b.records():
                if r.offset < start or r.value is None:
                    continue
                try:
                    image.apply(decode_metadata_record(r.value))
                except UnknownMetadataRecordError:
                    continue  # newer record types this reader does not need
