"""Leader epoch 0 for data written before KIP-101 (``--assign-leader-epoch``).

Kafka's ``RemoteLogSegmentMetadata`` refuses an empty ``segmentLeaderEpochs`` map, and the map
comes from the partition's leader-epoch cache (``leader-epoch-checkpoint``). Data written as
message format v0/v1 has no leader epoch, so no entry covers it, and a broker can never tier
it, also once it is rewritten as v2. Assigning epoch 0 from the log start offset makes it
tierable; docs/formats.md §5.7 gives the reasoning (why truncation stays correct).

The rule, the same on every replica because it depends only on the epoch number 0 and the
replica's own log start offset:
- an entry at or below the log start offset exists: nothing to do;
- the first entry has epoch 0 (above the log start offset): its start offset moves down to the
  log start offset;
- otherwise ``(0, log start offset)`` goes in front.
Epochs and start offsets stay strictly increasing, as Kafka's ``LeaderEpochFileCache`` keeps
them. The file is written as Kafka's ``CheckpointFile`` writes it (temporary file, fsync,
rename, directory fsync).

Before the first change a run keeps the original (or the fact that there was none) under
``<backup root>/<run id>/leader-epochs/``: a versioned manifest per partition and the original
bytes; :func:`restore_leader_epochs` puts it back byte for byte (mtime too).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from migration.formats import names
from migration.formats.checkpoint_files import EpochEntry, LeaderEpochCheckpointFile, OffsetCheckpointFile
from migration.formats.fileio import durable_mkdir, durable_replace, durable_unlink
from migration.logdir.findings import FindingCode
from migration.migrations.common.backup import BackupFile, partition_key, restore_original
from migration.migrations.common.checksum import FileChecksumAlgorithm
from migration.runtime.documents import RunDocument
from migration.runtime.faults import fault_point

ASSIGNED_EPOCH = 0
EPOCH_BACKUP_DIR = "leader-epochs"
EPOCH_BACKUP_VERSION = 1
# The code the reports give an assignment; the report lists every partition that got one.
ASSIGNED_CODE = FindingCode.LEADER_EPOCH_ASSIGNED


class EpochAssignment(RunDocument):
    """One partition's assignment, as planned or done; the backup manifest of a real run."""

    VERSION: ClassVar[int] = EPOCH_BACKUP_VERSION
    NAME: ClassVar[str] = "leader-epoch backup manifest"

    partition_dir: str
    topic: str
    partition: int
    log_start_offset: int
    before: list[tuple[int, int]] | None = Field(description="(epoch, start offset) entries; None: no file")
    after: list[tuple[int, int]]
    original_mtime_ns: int | None = None
    original_sha256: str | None = None

    def describe(self) -> str:
        before = "no leader-epoch-checkpoint" if self.before is None else (
            "no entries" if not self.before else "entries " + ", ".join(f"{e} {o}" for e, o in self.before))
        return (f"leader epoch {ASSIGNED_EPOCH} assigned from the log start offset {self.log_start_offset} "
                f"({before} before; now " + ", ".join(f"{e} {o}" for e, o in self.after) + ")")


def log_start_offset(partition_dir: Path) -> int | None:
    """The log start offset Kafka's ``LogLoader`` arrives at: the larger of the log dir's
    ``log-start-offset-checkpoint`` entry and the first segment's base offset. None without
    segments."""
    bases = [names.offset_from_file_name(e.name) for e in os.scandir(partition_dir)
             if e.name.endswith(names.LOG_FILE_SUFFIX)]
    if not bases:
        return None
    start = min(bases)
    ckpt = partition_dir.parent / names.LOG_START_OFFSET_CHECKPOINT_FILE
    if ckpt.exists():
        tp = names.parse_partition_dir_name(partition_dir.name)
        start = max(start, OffsetCheckpointFile.read(ckpt).offsets().get((tp.topic, tp.partition), start))
    return start


def with_epoch_zero(entries: list[EpochEntry], start: int) -> list[EpochEntry] | None:
    """The entries with epoch 0 covering ``start``, or None when an entry already covers it."""
    if entries and entries[0].start_offset <= start:
        return None
    if entries and entries[0].epoch == ASSIGNED_EPOCH:
        return [EpochEntry(ASSIGNED_EPOCH, start), *entries[1:]]
    return [EpochEntry(ASSIGNED_EPOCH, start), *entries]


def plan_assignment(partition_dir: Path) -> EpochAssignment | None:
    """What an assignment would change in this partition (reads only); None: nothing.
    Raises ``KafkaFormatError`` for a checkpoint file Kafka could not load."""
    start = log_start_offset(partition_dir)
    if start is None:
        return None
    path = partition_dir / names.LEADER_EPOCH_CHECKPOINT_FILE
    current = LeaderEpochCheckpointFile.read(path) if path.exists() else None
    if current is not None:
        current.check_order()
    entries = list(current.entries) if current is not None else []
    after = with_epoch_zero(entries, start)
    if after is None:
        return None
    tp = names.parse_partition_dir_name(partition_dir.name)
    return EpochAssignment(partition_dir=str(partition_dir), topic=tp.topic, partition=tp.partition,
                           log_start_offset=start,
                           before=None if current is None else [(e.epoch, e.start_offset) for e in entries],
                           after=[(e.epoch, e.start_offset) for e in after])


def _manifest_path(backup_dir: Path, partition_dir: Path) -> Path:
    return backup_dir / f"{partition_key(partition_dir)}.json"


def assign_leader_epoch(partition_dir: Path, *, backup_dir: Path | None = None) -> EpochAssignment | None:
    """Write the epoch 0 entry if it is missing. With ``backup_dir`` the original is kept there
    first (once per run: a re-run finds its manifest and keeps the first original). Returns the
    assignment (also when a re-run finds it done already), or None when none was needed."""
    manifest = _manifest_path(backup_dir, partition_dir) if backup_dir is not None else None
    done = read_assignment(manifest) if manifest is not None and manifest.exists() else None
    plan = plan_assignment(partition_dir)
    if plan is None:
        return done
    path = partition_dir / names.LEADER_EPOCH_CHECKPOINT_FILE
    if manifest is not None and done is None:
        assert backup_dir is not None
        durable_mkdir(backup_dir)
        if path.exists():
            original = path.read_bytes()
            plan.original_mtime_ns = path.stat().st_mtime_ns
            plan.original_sha256 = hashlib.sha256(original).hexdigest()
            durable_replace(manifest.with_suffix(".original"), original, tmp_suffix=".tmp")
        durable_replace(manifest, plan.model_dump_json(indent=1).encode(), tmp_suffix=".tmp")
        done = plan
        fault_point("leader-epoch-backed-up")  # crash tests: the original kept, the checkpoint not yet written
    LeaderEpochCheckpointFile([EpochEntry(*e) for e in plan.after]).write(path, tmp_suffix=names.TMP_FILE_SUFFIX)
    return done or plan


def read_assignment(manifest: Path) -> EpochAssignment:
    return EpochAssignment.read(manifest)  # a newer version is refused by name (runtime/documents.py)


def assignments(backup_dir: Path) -> list[tuple[Path, EpochAssignment]]:
    """Every assignment a run recorded under ``backup_dir``, in partition order."""
    if not backup_dir.is_dir():
        return []
    return sorted(((p, read_assignment(p)) for p in backup_dir.glob("*.json")), key=lambda t: t[1].partition_dir)


def restore_leader_epoch(manifest: Path) -> bool:
    """Put the partition's leader-epoch-checkpoint back as it was before the run: the original
    bytes and mtime, or no file when there was none. Idempotent; returns whether it changed
    anything."""
    a = read_assignment(manifest)
    path = Path(a.partition_dir) / names.LEADER_EPOCH_CHECKPOINT_FILE
    if a.before is None:
        return bool(durable_unlink(path))
    kept = manifest.with_suffix(".original")
    if a.original_sha256 is None or a.original_mtime_ns is None:
        raise ValueError(f"{manifest}: names no checksum or mtime of the original")
    original = BackupFile(name=path.name, size=kept.stat().st_size, mtime_ns=a.original_mtime_ns,
                          checksum=a.original_sha256, checksum_algorithm=FileChecksumAlgorithm.SHA256)
    return restore_original(path, kept, original, names.TMP_FILE_SUFFIX) is not None
