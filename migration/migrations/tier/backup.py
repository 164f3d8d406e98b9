"""What a tiered-storage readiness run changes in a log dir, kept so that it can be undone
(``kmigrate rollback RUN``, :func:`.driver.rollback_tier_run`).

tier-prepare changes three kinds of log-dir files: it creates missing ``N.snapshot`` files,
replaces a bad existing one (and rebuilds offset and time indexes that fail Kafka's rules),
and, with ``--assign-leader-epoch``, rewrites ``leader-epoch-checkpoint``. Everything it keeps
lives under ``<backup root>/<run id>/tier/`` (outside every log dir, on their file system by
default, as the upgrade's backups: ``settings.default_backup_root``):

- ``leader-epochs/``: the upgrade's mechanism (:mod:`..common.leader_epoch`): per partition a
  manifest and the original checkpoint's bytes (or the fact that there was none), written
  before the checkpoint is;
- ``partitions/<partition>.<key>.json``: per partition a manifest (:class:`PartitionBackup`):
  where the partition lives, the files the run creates (``created``: listed, durably, BEFORE
  the first of them is written, so a power cut at any point leaves no file of the run that the
  manifest does not name) and the files it replaces (``replaced``: name, size, mtime, checksum
  with its algorithm, as the upgrade's backups record them: :class:`..common.backup.BackupFile`;
  SHA-256 in a version-1 manifest, still verified);
- ``partitions/<partition>.<key>/``: the originals of the replaced files (hard links, copies
  across file systems), fsynced into their directory before the manifest names them, and the
  manifest made durable before the file is replaced.

A re-run with the same run id adds to the manifest and never drops an entry, and keeps the
first original of a file (the one before the run). The manifest is all a rollback needs: not
the run's directory, not its job.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from migration.formats.fileio import durable_mkdir, fsync_dir
from migration.migrations.common.backup import BackupFile, fingerprint, link_or_copy, partition_key, run_backup_dir
from migration.migrations.common.leader_epoch import EPOCH_BACKUP_DIR
from migration.runtime.documents import RunDocument
from migration.runtime.faults import fault_point

TIER_BACKUP_DIR = "tier"
PARTITIONS_DIR = "partitions"
PARTITION_BACKUP_VERSION = 2  # 2: checksums name their algorithm (BLAKE3); 1: ``sha256``


def tier_backup_dir(backup_root: str | os.PathLike[str], run_id: str) -> Path:
    """``<backup root>/<run id>/tier``: everything a tier-prepare run keeps."""
    return run_backup_dir(backup_root, run_id) / TIER_BACKUP_DIR


def epoch_backup_dir(tier_dir: str | os.PathLike[str]) -> Path:
    return Path(tier_dir) / EPOCH_BACKUP_DIR


class PartitionBackup(RunDocument):
    """One partition's manifest of a tier-prepare run (version 1: SHA-256 checksums in ``sha256``)."""

    VERSION: ClassVar[int] = PARTITION_BACKUP_VERSION
    NAME: ClassVar[str] = "tier-prepare backup manifest"

    partition_dir: str
    log_dir: str
    broker_id: int = -1
    topic: str
    partition: int
    created: list[str] = Field(default_factory=list, description="Files the run creates in the partition "
                               "directory (none existed before it), listed before the first is written")
    replaced: list[BackupFile] = Field(default_factory=list, description="Files the run replaces; their "
                                         "originals are in the directory beside this manifest")


def manifest_path(tier_dir: str | os.PathLike[str], partition_dir: Path) -> Path:
    return Path(tier_dir) / PARTITIONS_DIR / f"{partition_key(partition_dir)}.json"


def originals_dir(manifest: Path) -> Path:
    """Where the originals of a manifest's replaced files are kept."""
    return manifest.with_suffix("")


def partition_backups(tier_dir: str | os.PathLike[str]) -> list[tuple[Path, PartitionBackup]]:
    """Every partition manifest of a run, in partition directory order."""
    d = Path(tier_dir) / PARTITIONS_DIR
    if not d.is_dir():
        return []
    return sorted(((p, PartitionBackup.read(p)) for p in d.glob("*.json")), key=lambda t: t[1].partition_dir)


class PartitionBackups:
    """The run's keeper of one partition's files, used by the unit before each change."""

    def __init__(self, tier_dir: str | os.PathLike[str], partition_dir: Path, *, log_dir: str, broker_id: int,
                 topic: str, partition: int) -> None:
        self.partition_dir = partition_dir
        self.manifest = manifest_path(tier_dir, partition_dir)
        self.doc = PartitionBackup.read(self.manifest) if self.manifest.exists() else PartitionBackup(
            partition_dir=str(partition_dir), log_dir=log_dir, broker_id=broker_id, topic=topic, partition=partition)

    def _known(self, name: str) -> bool:
        return name in self.doc.created or any(r.name == name for r in self.doc.replaced)

    def _save(self) -> None:
        durable_mkdir(self.manifest.parent)
        self.doc.write(self.manifest)
        fault_point("tier-backup-manifest")

    def will_create(self, paths: list[Path]) -> None:
        """The run is about to create ``paths`` (none exists): named in the manifest first."""
        new = [p.name for p in paths if not self._known(p.name)]
        if new:
            self.doc.created.extend(new)
            self._save()

    def will_replace(self, path: Path) -> None:
        """The run is about to replace ``path``: its original kept (once per run: the first is the
        one before the run) and named in the manifest, durably, first. A file the run created
        itself needs nothing kept: the rollback removes it."""
        if self._known(path.name):
            return
        if not path.exists():
            self.will_create([path])
            return
        keep = durable_mkdir(originals_dir(self.manifest))
        dst = keep / path.name
        dst.unlink(missing_ok=True)  # an earlier attempt's, never named by the manifest
        linked = link_or_copy(path, dst)
        fsync_dir(keep)
        original = fingerprint(path)
        original.linked = linked
        self.doc.replaced.append(original)
        self._save()

    def will_rewrite(self, paths: list[Path]) -> None:
        """Files that may be rewritten or created (a rebuild of indexes): each kept or listed."""
        for p in paths:
            self.will_replace(p)
