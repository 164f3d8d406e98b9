"""The remote object layout and the documents staged with every segment (no I/O here).

Layout of the open-source tiered-storage plugin (Aiven), uncompressed and unencrypted
(docs/formats.md §10.2)::

    {prefix}{topic}-{topicId}/{partition}/{base offset, 20 digits}-{segment uuid}.log
                                                                              .indexes
                                                                              .rsm-manifest

``.indexes`` is the offset index, time index, producer snapshot ``N.snapshot``, leader-epoch
checkpoint text and (if any) transaction index, back to back; the manifest (JSON, version "1")
gives each one's position and size. Uuids print as Kafka prints them (URL-safe base64, no
padding). The segment uuid is derived from the topic id, partition, base offset and the SHA-256
of the ``.log``, so a re-run finds its own objects and a changed segment gets new keys.

kmigrate's own keys sit beside the partitions' prefixes: ``{prefix}kmigrate-probe/{token}``
(the write probe, removed again; a killed run's is removed by a later one) and
``{prefix}kmigrate-reports/{run id}/`` (run reports).
Every key of the package is spelled here; the object stores (:mod:`.store`) take them as given.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from migration.formats import names
from migration.formats.checkpoint_files import EpochEntry, to_checkpoint_text
from migration.formats.kafka_uuid import Uuid, uuid_from_name

MANIFEST_VERSION: Literal["1"] = "1"
LAYOUT_NAME = "aiven-tiered-storage-v1"
LOG_SUFFIX = ".log"
INDEXES_SUFFIX = ".indexes"
MANIFEST_SUFFIX = ".rsm-manifest"
OBJECT_SUFFIXES = (LOG_SUFFIX, INDEXES_SUFFIX, MANIFEST_SUFFIX)
COPY_SEGMENT_FINISHED = 1  # RemoteLogSegmentState
REMOTE_LOG_SEGMENT_METADATA_RECORD_API_KEY = 0  # RemoteLogSegmentMetadataRecord.json
JSONL_VERSION = 1
PROBE_DIR = "kmigrate-probe/"
REPORTS_DIR = "kmigrate-reports/"


def segment_uuid(topic_id: str, partition: int, base_offset: int, log_sha256: str) -> Uuid:
    return uuid_from_name(Uuid.from_string(topic_id), f"{partition}/{base_offset}/{log_sha256}")


def partition_prefix(prefix: str, topic: str, topic_id: str, partition: int) -> str:
    return f"{prefix}{topic}-{topic_id}/{partition}/"


def object_stem(prefix: str, topic: str, topic_id: str, partition: int, base_offset: int, seg_uuid: Uuid) -> str:
    """The key without its suffix."""
    return f"{partition_prefix(prefix, topic, topic_id, partition)}{names.filename_prefix_from_offset(base_offset)}" \
           f"-{seg_uuid.to_string()}"


def segment_stem_start(base_offset: int) -> str:
    """How the stems of a segment's objects begin within its partition's prefix (the part
    before the segment uuid, which depends on the segment's content)."""
    return f"{names.filename_prefix_from_offset(base_offset)}-"


def complete_stems(keys: Iterable[str], base_offset: int) -> dict[str, str]:
    """Of the keys under one partition's prefix (relative to it), the stems of ``base_offset``
    with every object of the layout (log, indexes, manifest), each with its ``.log`` key."""
    keys = set(keys)
    start = segment_stem_start(base_offset)
    stems = {k[: -len(suffix)] for k in keys if k.startswith(start) for suffix in OBJECT_SUFFIXES if k.endswith(suffix)}
    return {st: st + LOG_SUFFIX for st in sorted(stems) if all(st + s in keys for s in OBJECT_SUFFIXES)}


class SegmentKeys(NamedTuple):
    """The keys of one staged segment's objects."""

    log: str
    indexes: str
    manifest: str

    @classmethod
    def of(cls, stem: str) -> SegmentKeys:
        return cls(stem + LOG_SUFFIX, stem + INDEXES_SUFFIX, stem + MANIFEST_SUFFIX)

    def manifest_first(self) -> list[str]:
        """For deletion: the manifest goes first, so none is ever left pointing at missing data."""
        return [self.manifest, self.indexes, self.log]


# A probe object lives for the seconds of one check; one this old is a killed run's (a margin
# far beyond any retrying store and any clock skew between the hosts of concurrent runs).
PROBE_STALE_AFTER_MS = 3600 * 1000


def probe_token(run_id: str, created_ms: int, nonce: str) -> str:
    """``{created ms}-{run id}-{nonce}``: a later run can tell when, and by which run, a probe
    object was written, and so whether it is a leftover (:func:`probe_is_leftover`)."""
    return f"{created_ms}-{run_id}-{nonce}"


def probe_is_leftover(key: str, *, prefix: str, run_id: str, now_ms: int) -> bool:
    """Whether the probe object ``key`` (under ``{prefix}kmigrate-probe/``) is what a killed
    run left: its run is this very run (an earlier attempt of it), or it is older than
    :data:`PROBE_STALE_AFTER_MS`, or its name is of no probe this kmigrate writes (an earlier
    kmigrate's ``{run id}-{nonce}``). A young probe of another run may be in the middle of its
    check: never touched."""
    token = key.removeprefix(prefix + PROBE_DIR)
    created, _, rest = token.partition("-")
    owner = rest.rpartition("-")[0]
    if not created.isdigit() or not owner:
        return True
    return owner == run_id or now_ms - int(created) > PROBE_STALE_AFTER_MS


def probe_key(prefix: str, token: str) -> str:
    """The small object a run writes and removes before anything else, to prove the store is
    reachable and writable. Beside the partitions' prefixes, never inside one (a topic's prefix
    is ``{topic}-{topic id}/`` and ``probe`` is no topic id)."""
    return f"{prefix}{PROBE_DIR}{token}"


def report_key_prefix(prefix: str) -> str:
    """Where run reports are copied, beside the data they account for."""
    return f"{prefix}{REPORTS_DIR}"


def split_key(key: str) -> tuple[str, str] | None:
    """(stem, suffix) of a staged object's key, None for anything else."""
    for suffix in OBJECT_SUFFIXES:
        if key.endswith(suffix):
            return key[: -len(suffix)], suffix
    return None


class _Json(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class FixedChunkIndex(_Json):
    """One chunk covering the whole segment: the plugin's fixed chunk index, untransformed."""

    type: Literal["fixed"] = "fixed"
    original_chunk_size: int = Field(alias="originalChunkSize")
    original_file_size: int = Field(alias="originalFileSize")
    transformed_chunk_size: int = Field(alias="transformedChunkSize")
    final_transformed_chunk_size: int = Field(alias="finalTransformedChunkSize")

    @classmethod
    def untransformed(cls, file_size: int, chunk_size: int) -> FixedChunkIndex:
        chunk = max(1, chunk_size)
        last = file_size % chunk or (chunk if file_size else 0)
        return cls(originalChunkSize=chunk, originalFileSize=file_size, transformedChunkSize=chunk,
                   finalTransformedChunkSize=last)


class IndexSlice(_Json):
    position: int
    size: int


class SegmentIndexes(_Json):
    offset: IndexSlice
    timestamp: IndexSlice
    producer_snapshot: IndexSlice = Field(alias="producerSnapshot")
    leader_epoch: IndexSlice = Field(alias="leaderEpoch")
    transaction: IndexSlice | None


class TopicPartitionJson(_Json):
    topic: str
    partition: int


class TopicIdPartitionJson(_Json):
    topic_id: str = Field(alias="topicId")
    topic_partition: TopicPartitionJson = Field(alias="topicPartition")


class RemoteLogSegmentIdJson(_Json):
    topic_id_partition: TopicIdPartitionJson = Field(alias="topicIdPartition")
    id: str


class RemoteLogSegmentMetadataJson(_Json):
    """The manifest's informational copy of Kafka's RemoteLogSegmentMetadata."""

    remote_log_segment_id: RemoteLogSegmentIdJson = Field(alias="remoteLogSegmentId")
    start_offset: int = Field(alias="startOffset")
    end_offset: int = Field(alias="endOffset")
    max_timestamp_ms: int = Field(alias="maxTimestampMs")
    event_timestamp_ms: int = Field(alias="eventTimestampMs")
    segment_leader_epochs: dict[str, int] = Field(alias="segmentLeaderEpochs", min_length=1)
    segment_size_in_bytes: int = Field(alias="segmentSizeInBytes")
    broker_id: int = Field(alias="brokerId")


class SegmentManifest(_Json):
    version: Literal["1"] = MANIFEST_VERSION
    chunk_index: FixedChunkIndex = Field(alias="chunkIndex")
    segment_indexes: SegmentIndexes = Field(alias="segmentIndexes")
    compression: bool = False
    encryption: None = None
    remote_log_segment_metadata: RemoteLogSegmentMetadataJson = Field(alias="remoteLogSegmentMetadata")

    def to_bytes(self) -> bytes:
        return (json.dumps(self.model_dump(mode="json", by_alias=True), indent=1) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> SegmentManifest:
        return cls.model_validate_json(data)


class IndexesBlob(BaseModel):
    data: bytes
    indexes: SegmentIndexes


def build_indexes_blob(offset_index: bytes, time_index: bytes, producer_snapshot: bytes, leader_epoch: bytes,
                       transaction_index: bytes | None) -> IndexesBlob:
    parts: list[bytes] = []
    pos = 0

    def add(data: bytes) -> IndexSlice:
        nonlocal pos
        s = IndexSlice(position=pos, size=len(data))
        parts.append(data)
        pos += len(data)
        return s

    idx = SegmentIndexes(offset=add(offset_index), timestamp=add(time_index), producerSnapshot=add(producer_snapshot),
                         leaderEpoch=add(leader_epoch),
                         transaction=None if transaction_index is None else add(transaction_index))
    return IndexesBlob(data=b"".join(parts), indexes=idx)


def leader_epoch_index_text(entries: list[EpochEntry], next_offset: int) -> bytes:
    """The leader-epoch index RemoteLogManager uploads: entries starting below N (§5.5)."""
    return to_checkpoint_text([e for e in entries if e.start_offset < next_offset]).encode("utf-8")


def remote_log_segment_metadata_record(meta: RemoteLogSegmentMetadataJson, *, txn_index_empty: bool
                                       ) -> dict[str, Any]:
    """The payload of a ``RemoteLogSegmentMetadataRecord`` (field names of Kafka's
    RemoteLogSegmentMetadataRecord.json) in state COPY_SEGMENT_FINISHED."""
    sid = meta.remote_log_segment_id
    return {
        "RemoteLogSegmentId": {
            "TopicIdPartition": {"Name": sid.topic_id_partition.topic_partition.topic,
                                 "Id": sid.topic_id_partition.topic_id,
                                 "Partition": sid.topic_id_partition.topic_partition.partition},
            "Id": sid.id,
        },
        "StartOffset": meta.start_offset,
        "EndOffset": meta.end_offset,
        "BrokerId": meta.broker_id,
        "MaxTimestampMs": meta.max_timestamp_ms,
        "EventTimestampMs": meta.event_timestamp_ms,
        "SegmentLeaderEpochs": [{"LeaderEpoch": int(e), "Offset": o} for e, o in meta.segment_leader_epochs.items()],
        "SegmentSizeInBytes": meta.segment_size_in_bytes,
        "CustomMetadata": None,
        "RemoteLogSegmentState": COPY_SEGMENT_FINISHED,
        "TxnIndexEmpty": txn_index_empty,
    }
