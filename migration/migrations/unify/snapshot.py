"""The unified zero checkpoint: built from the inputs only, written as Kafka writes snapshots.

Kafka's ``FileRawSnapshotWriter`` writes ``<offset>-<epoch>-<random>.checkpoint.part``
(``Snapshots.createTempFile``), fsyncs it, makes it read-only and moves it over the final name;
at startup ``KafkaMetadataLog`` deletes every ``.checkpoint.part`` it finds (docs/formats.md
§6.1). So the zero checkpoint goes through ``durable_replace`` with that temporary name: one
that Kafka would not recognise would stay in the partition directory after a crash.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from migration.formats import names
from migration.formats.fileio import durable_replace, durable_unlink, write_all
from migration.formats.kraft_checkpoint import KRaftControlRecord, build_checkpoint
from migration.migrations.unify.state import CheckpointRead, record_values
from migration.runtime.faults import armed as faults_armed
from migration.runtime.faults import fault_point


def build_zero(boot: CheckpointRead, zero: CheckpointRead | None) -> bytes:
    """The unified zero checkpoint, derived from the inputs only (a re-run builds the same bytes)."""
    kraft: list[KRaftControlRecord] = list(zero.contents.kraft_records) if zero else []
    if zero is not None:
        header_ts = int(zero.contents.header.get("LastContainedLogTimestamp", 0))
        append_time = zero.append_time
    else:
        # kafka-storage stamps the header with the formatting time: the bootstrap file's write time.
        header_ts = append_time = boot.append_time
    return build_checkpoint(record_values(boot.contents.metadata_records), header_timestamp=header_ts,
                            append_time=append_time, kraft_records=kraft, epoch=0)


def remove_partial_zero(mdir: Path) -> list[str]:
    """Delete partial zero checkpoints (ours, from an interrupted run): Kafka deletes them at
    startup anyway, and none is ever a complete file."""
    if not mdir.is_dir():
        return []
    prefix = names.ZERO_CHECKPOINT_FILE[: -len(names.CHECKPOINT_FILE_SUFFIX)]
    return [p.name for p in durable_unlink(*(e.path for e in os.scandir(mdir) if e.name.startswith(prefix)
                                             and e.name.endswith(names.PARTIAL_CHECKPOINT_SUFFIX)))]


def write_zero(mdir: Path, data: bytes) -> Path:
    """As Kafka's FileRawSnapshotWriter: ``<id>-<random>.checkpoint.part``, fsync, read-only,
    atomic rename over the final name, fsync the dir (``fileio.durable_replace``)."""
    final = mdir / names.ZERO_CHECKPOINT_FILE
    part = mdir / (f"{names.ZERO_CHECKPOINT_FILE[: -len(names.CHECKPOINT_FILE_SUFFIX)]}-"
                   f"{random.randrange(10**18)}{names.PARTIAL_CHECKPOINT_SUFFIX}")

    def write(fd: int) -> None:
        half = len(data) // 2
        write_all(fd, memoryview(data)[:half])
        if faults_armed("zero-part-partial"):
            os.fsync(fd)  # the half-written file is what a kill mid-write leaves on disk
        fault_point("zero-part-partial")
        write_all(fd, memoryview(data)[half:])

    durable_replace(final, write, tmp_path=part, exclusive=True, read_only=True,
                    fault=lambda step: fault_point("zero-part-written") if step == "written" else None)
    fault_point("zero-renamed")
    return final
