"""Backups of the original segment files, kept OUTSIDE every log dir until commit or rollback.

Layout: ``<backup root>/<run id>/files/<unit id>/<file name>``, one manifest per unit in
``<backup root>/<run id>/manifests/<unit id>.json`` (units may run in parallel Spark tasks, so
there is no shared file to race on; a rollback lists the folder).
Files are hard links where the filesystem allows (instant, no extra space: the replace only
unlinks the log dir's name), copies otherwise; each entry records size, mtime, a checksum with
its algorithm (BLAKE3 since manifest version 2; SHA-256 in version 1, still verified:
``common.checksum``) and ``linked``. The default root is on the log dirs' file system for that reason
(``settings.default_backup_root``); a run whose root is on another one says its backups are
copies (``runtime.safety.check_backup_root``).
A unit's manifest also says where the unit lives (log dir, partition, offset range), so a
rollback needs nothing else: not the run's journal, not even its run directory. Files a
rollback finds in the way of the originals (data that is neither an original nor the run's
output) are kept in ``<backup root>/<run id>/displaced/<unit id>/`` before they are replaced.
Every document here is versioned and written durably (``fileio.durable_replace``), and every
directory and link is durable in its parent before the manifest that names it is written: a
power cut after the log dir's replacement must never lose the only copy of the originals.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

from migration.formats.fileio import durable_mkdir, durable_replace, fsync_dir, fsync_file
from migration.migrations.common.checksum import (
    CURRENT_FILE_CHECKSUM,
    FileChecksumAlgorithm,
    file_checksum,
    file_hasher,
    file_matches,
    from_version_1,
)
from migration.runtime.documents import RunDocument
from migration.runtime.faults import fault_point

MANIFESTS_DIR = "manifests"
FILES_DIR = "files"
DISPLACED_DIR = "displaced"
MANIFEST_VERSION = 2  # 2: checksums name their algorithm (BLAKE3); 1: ``sha256``; 0: no ``place``


class BackupFile(BaseModel):
    name: str
    size: int
    mtime_ns: int
    checksum: str
    checksum_algorithm: FileChecksumAlgorithm = Field(description="sha256 for a version-1 document's ``sha256``")
    linked: bool = False

    @model_validator(mode="before")
    @classmethod
    def _version_1(cls, data: Any) -> Any:
        return from_version_1(data, "sha256", "checksum")

    def matches(self, path: Path) -> bool:
        """``path`` is this file: same size and checksum."""
        return file_matches(path, self.size, self.checksum, self.checksum_algorithm)


class UnitPlace(BaseModel):
    """Where a unit works: enough to roll it back from its backup alone."""

    log_dir: str | None = None
    broker_id: int = -1
    topic: str | None = None
    partition: int | None = None
    base_offset: int | None = None
    next_base_offset: int | None = Field(default=None, description="End of the unit's offset range (the "
                                         "next segment's base offset); None: the last segment")


class UnitBackup(RunDocument):
    """A unit's backup manifest (version 0: written before versioning, without ``place``;
    version 1: SHA-256 checksums in ``sha256``)."""

    VERSION: ClassVar[int] = MANIFEST_VERSION
    NAME: ClassVar[str] = "backup manifest"

    unit_id: str
    partition_dir: str
    backup_dir: str
    place: UnitPlace | None = None
    files: list[BackupFile] = Field(default_factory=list)


def _read_manifest(path: Path) -> UnitBackup:
    return UnitBackup.read(path)  # a newer version is refused by name (runtime/documents.py)


def fingerprint(path: Path) -> BackupFile:
    st = path.stat()
    return BackupFile(name=path.name, size=st.st_size, mtime_ns=st.st_mtime_ns,
                      checksum=file_checksum(path, CURRENT_FILE_CHECKSUM), checksum_algorithm=CURRENT_FILE_CHECKSUM)


def run_backup_dir(backup_root: str | os.PathLike[str], run_id: str) -> Path:
    return Path(backup_root) / run_id


def unit_backup_files_dir(backup_root: str | os.PathLike[str], run_id: str, unit_id: str) -> Path:
    """Where a unit's backup keeps its files: known before its manifest is written."""
    return run_backup_dir(backup_root, run_id) / FILES_DIR / unit_id


def partition_key(partition_dir: Path) -> str:
    """A partition directory's name in a run's backups, ``<name>.<12 hex digits>``: one log dir
    holds a partition only once, but a run may span several log dirs (the digits name the path)."""
    return f"{partition_dir.name}.{hashlib.sha256(str(partition_dir).encode()).hexdigest()[:12]}"


def restore_original(target: Path, kept: Path, f: BackupFile, tmp_suffix: str) -> Literal["bytes", "mtime"] | None:
    """Put ``target`` back as it was before the run, from its original ``kept`` (checked against
    ``f`` first: a ``ValueError`` when it differs): the bytes, durably, with ``f``'s mtime set
    before the fsync, or only the mtime when the bytes are the original's already. Idempotent;
    returns what it put back ("bytes" with the mtime, or the "mtime"), None when ``target`` was
    as before the run already."""
    data = kept.read_bytes()
    h = file_hasher(f.checksum_algorithm)
    h.update(data)
    if len(data) != f.size or h.hexdigest() != f.checksum:
        raise ValueError(f"{kept}: content differs from its manifest")
    times = (f.mtime_ns, f.mtime_ns)
    if not target.exists() or target.read_bytes() != data:
        durable_replace(target, data, tmp_suffix=tmp_suffix, times_ns=times)
        return "bytes"
    if target.stat().st_mtime_ns != f.mtime_ns:
        os.utime(target, ns=times)
        fsync_file(target)
        return "mtime"
    return None


def link_or_copy(src: Path, dst: Path) -> bool:
    """Hard-link ``src`` to ``dst`` (True), or copy it with its times when linking is not
    possible, e.g. across filesystems (False; the copy's data fsynced). The caller fsyncs
    ``dst``'s directory once it has placed all its files."""
    try:
        os.link(src, dst)
        return True
    except OSError:
        shutil.copy2(src, dst)
        fsync_file(dst)
        return False


def backup_unit(
    backup_root: str | os.PathLike[str], run_id: str, unit_id: str, partition_dir: Path, file_names: list[str],
    place: UnitPlace | None = None, known: dict[str, BackupFile] | None = None,
) -> tuple[UnitBackup, bool]:
    """Keep the named files of ``partition_dir``; idempotent: a re-run finds its own backup.
    Returns the backup and whether it is an earlier attempt's, taken of the files as they were
    then (the caller checks they still are before relying on it). ``known``: fingerprints the
    caller has proved current (a prestage's, the file's identity unchanged since), not read
    again: the stop window's cost is then per file, not per byte."""
    root = run_backup_dir(backup_root, run_id)
    target = unit_backup_files_dir(backup_root, run_id, unit_id)
    manifest_path = root / MANIFESTS_DIR / f"{unit_id}.json"
    if manifest_path.exists():
        return _read_manifest(manifest_path), True
    durable_mkdir(target)
    durable_mkdir(manifest_path.parent)
    ub = UnitBackup(version=MANIFEST_VERSION, unit_id=unit_id, partition_dir=str(partition_dir),
                    backup_dir=str(target), place=place)
    for name in file_names:
        src = partition_dir / name
        dst = target / name
        if dst.exists():
            dst.unlink()  # a partial backup of an interrupted first attempt
        fp = known[name].model_copy() if known is not None and name in known else fingerprint(src)
        fp.linked = link_or_copy(src, dst)
        fault_point("backup-link")
        ub.files.append(fp)
    fsync_dir(target)
    durable_replace(manifest_path, ub.model_dump_json(indent=1).encode(), tmp_suffix=".tmp")
    return ub, False


def load_unit_backup(backup_root: str | os.PathLike[str], run_id: str, unit_id: str) -> UnitBackup | None:
    p = run_backup_dir(backup_root, run_id) / MANIFESTS_DIR / f"{unit_id}.json"
    return _read_manifest(p) if p.exists() else None


def unit_backups(backup_root: str | os.PathLike[str], run_id: str) -> list[UnitBackup]:
    """Every unit backup of a run, in unit id order."""
    mdir = run_backup_dir(backup_root, run_id) / MANIFESTS_DIR
    return [_read_manifest(p) for p in sorted(mdir.glob("*.json"))] if mdir.is_dir() else []


def keep_displaced(backup_root: str | os.PathLike[str], run_id: str, unit_id: str, partition_dir: Path,
                   file_names: list[str]) -> Path:
    """Link (or copy) files a rollback is about to replace into the run's backup, so that
    nothing found in a log dir is ever lost. Returns the directory."""
    target = durable_mkdir(run_backup_dir(backup_root, run_id) / DISPLACED_DIR / unit_id)
    for name in file_names:
        dst = target / name
        dst.unlink(missing_ok=True)
        link_or_copy(partition_dir / name, dst)
    fsync_dir(target)
    return target


def verify_backup(ub: UnitBackup) -> list[str]:
    """Problems with a unit's backup: missing files, sizes or checksums that changed."""
    problems = []
    for f in ub.files:
        p = Path(ub.backup_dir) / f.name
        if not p.exists():
            problems.append(f"{p}: missing")
        elif not f.matches(p):
            problems.append(f"{p}: content differs from the manifest")
    return problems


def drop_backups(backup_root: str | os.PathLike[str], run_id: str) -> int:
    """Delete a run's backups; returns the bytes freed (of files not linked elsewhere)."""
    root = run_backup_dir(backup_root, run_id)
    if not root.exists():
        return 0
    freed = 0
    for p in root.rglob("*"):
        if p.is_file():
            st = p.stat()
            if st.st_nlink == 1:
                freed += st.st_size
    shutil.rmtree(root)
    return freed
