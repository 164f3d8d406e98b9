"""The stage of an upgrade: closed segments converted while the broker runs, swapped in during
the stop window (docs/operations.md, "Prestage and the stop window").

In Kafka a closed segment (every segment but a partition's active one) is never written again:
retention renames it to ``.deleted`` and removes it later, the log cleaner swaps in a new file
under the same name (a new inode), and a truncation below its base offset removes or shortens
it. So its conversion can be made while the broker runs, and kept with the original's
identity (device, inode, size, mtime, ctime): with the broker stopped, a segment whose files
all still have the identity they had when staged is the segment that was converted.

No place inside a log dir is safe for the stage (Kafka's ``LogManager`` refuses a directory
name it cannot parse and loads one it can as a partition), so it lives outside, on the log
dir's file system, and the window links its files in:

    <stage root>/<stage id>/files/<partition key>/<segment prefix>/<name>.cleaned
    <stage root>/<stage id>/manifests/<partition key>.<segment prefix>.json
    <stage root>/<stage id>/verified/<partition key>.<segment prefix>.json
    <stage root>/<stage id>/files/<partition key>/<segment prefix>.prefix/<name>.cleaned
    <stage root>/<stage id>/prefixes/<partition key>.<segment prefix>.json

A closed segment in the target format already is not converted, but the window would still
read it whole for the checks Kafka's recovery makes (CRCs, offsets, indexes): the prestage makes
those checks instead and, when they find nothing, records the segment's identity under
``verified/`` (:class:`VerifiedSegment`); the window skips an unchanged one unread, so the
downtime does not grow with the data already in the target format.

An active segment's bytes so far are staged too (:class:`StagedPrefix`, under ``prefixes/``):
the window converts only what follows them when the segment still begins with them.

Data first, manifest last (each durable in its directory): a segment is staged once its
manifest is; files without one are an interrupted staging, which the next pass removes.

A stop window that used its stage retires it (:meth:`Stage.retire`): one rename moves it to
``<stage root>/.deleted/<stage id>.<ns>`` and its files are unlinked (those swapped in are
linked in the log dir: nothing is freed, and nothing stays held once Kafka deletes them).
Its manifests and directories go later, once the broker runs again (:func:`sweep_deleted`:
the next prestage, a discard, the DAG's start step), as Kafka renames a segment to
``.deleted`` and removes it later: removing a file or a directory frees its blocks, which
costs about a millisecond on a file system mounted with online discard.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from migration import __version__
from migration.formats import names
from migration.formats.checkpoint_files import LeaderEpochCheckpointFile
from migration.formats.digest import RecordDigest
from migration.formats.fileio import (
    durable_mkdir,
    durable_move,
    durable_rmtree,
    durable_unlink,
    files_under,
    fsync_dir,
    remove_trees,
    unlink_files,
)
from migration.migrations.common.backup import BackupFile, partition_key
from migration.migrations.common.checksum import FileChecksumAlgorithm, prefix_matches
from migration.migrations.common.leader_epoch import plan_assignment
from migration.migrations.upgrade.options import UpgradeOptions
from migration.migrations.upgrade.rewrite import OutputSegment, PrefixState, RewriteSpec
from migration.runtime.documents import RunDocument
from migration.runtime.safety import Refused

FILES_DIR = "files"
MANIFESTS_DIR = "manifests"
PREFIXES_DIR = "prefixes"
PREFIX_FILES_SUFFIX = ".prefix"  # <segment prefix>.prefix: the files of a StagedPrefix
VERIFIED_DIR = "verified"
DELETED_DIR = ".deleted"  # retired stages (a run id never starts with a dot)
STAGE_VERSION = 1


class FileIdentity(BaseModel):
    """What says a file is still the one that was read: Kafka never writes a closed segment in
    place, and anything that replaces or shortens one changes its inode, size, mtime or ctime
    (ctime cannot be set back)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity:
        st = os.stat(path)
        return cls(name=path.name, dev=st.st_dev, ino=st.st_ino, size=st.st_size, mtime_ns=st.st_mtime_ns,
                   ctime_ns=st.st_ctime_ns)

    def same_except_ctime(self, other: FileIdentity) -> bool:
        """Same file, same bytes as far as Kafka could change them: all but the ctime, which a
        hard link (the run's backup, the window's link of a staged file) changes too."""
        return (self.name, self.dev, self.ino, self.size, self.mtime_ns) == \
            (other.name, other.dev, other.ino, other.size, other.mtime_ns)


def identities(directory: Path, file_names: list[str]) -> list[FileIdentity] | None:
    """The identities of ``file_names`` in ``directory``; None when one is gone."""
    try:
        return [FileIdentity.of(directory / n) for n in file_names]
    except FileNotFoundError:
        return None


class Conversion(BaseModel):
    """What a staged conversion was made with: the window uses it only when it would make the
    same (the same options, and the same kmigrate: a later one may convert differently)."""

    model_config = ConfigDict(extra="forbid")

    target_magic: int
    segment_bytes: int
    max_message_bytes: int
    index_interval_bytes: int
    stamp_v0_with_mtime: bool
    assign_leader_epoch: bool
    tool_version: str

    def rewrite_spec(self, *, stamp_v0_ms: int | None, epochs: list[tuple[int, int]],
                     next_base_offset: int | None) -> RewriteSpec:
        """The rewrite's spec for a segment converted with these options (``epochs``: the
        leader-epoch entries; used for v2 only)."""
        return RewriteSpec(target_magic=self.target_magic, segment_bytes=self.segment_bytes,
                           max_message_bytes=self.max_message_bytes, index_interval_bytes=self.index_interval_bytes,
                           stamp_v0_ms=stamp_v0_ms, leader_epochs=epochs if self.target_magic == 2 else (),
                           next_base_offset=next_base_offset)

    def differences(self, other: Conversion) -> list[str]:
        """``name: this -> other`` for every field that differs."""
        mine, theirs = self.model_dump(), other.model_dump()
        return [f"{k}: {mine[k]} -> {theirs[k]}" for k in mine if mine[k] != theirs[k]]


class _StageEntry(RunDocument):
    """What a stage says of one closed segment, and of what it was made with."""

    VERSION: ClassVar[int] = STAGE_VERSION

    stage_id: str
    partition_dir: str
    base_offset: int
    next_base_offset: int | None
    conversion: Conversion = Field(description="The run's options and kmigrate: another may convert or check "
                                   "otherwise")
    leader_epochs: list[tuple[int, int]] = Field(
        default_factory=list, description="(epoch, from offset) over the segment's offsets (epochs_in_range): the "
        "epochs its converted batches got, or those its batches were checked against")

    def made_as_now(self, next_base_offset: int | None, conversion: Conversion, epochs: list[tuple[int, int]]
                    ) -> bool:
        """Made as a run would make it now: the same options, the same next segment, the same
        leader epochs over its offsets (``epochs``: the entries the run would use)."""
        return self.conversion == conversion and self.next_base_offset == next_base_offset and \
            epochs_in_range(epochs, self.base_offset, next_base_offset) == [tuple(e) for e in self.leader_epochs]


class StagedSegment(_StageEntry):
    """One closed segment's staged conversion: what the stop window needs to swap it in without
    reading it again (the originals' fingerprints for the run's backup, the record digests the
    prestage compared, the outputs' files)."""

    NAME: ClassVar[str] = "stage manifest"

    originals: list[BackupFile] = Field(description="The segment's files as read (checksums for the backup)")
    original_ids: list[FileIdentity] = Field(description="Their identities, the same before and after the read")
    outputs: list[OutputSegment]
    staged_ids: list[FileIdentity] = Field(description="The staged .cleaned files as written and fsynced")
    bytes_before: int
    bytes_by_magic_before: dict[str, int] = Field(default_factory=dict)
    digest_before: RecordDigest
    digest_after: RecordDigest
    split_batches: int = 0
    warnings: list[str] = Field(default_factory=list)
    staged_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @property
    def output_names(self) -> list[str]:
        return [n for o in self.outputs for n in o.files]

    @property
    def bytes_after(self) -> int:
        return sum(i.size for i in self.staged_ids)


class StagedPrefix(_StageEntry):
    """The conversion of an active segment's first bytes, as the prestage read them: the window
    checks that the segment still begins with those bytes (their checksum), then converts only
    what the broker appended after them (rewrite.Resume). Kafka writes an active segment in
    place, so its identity says nothing: it appends, and truncates it on a leader change (the
    same inode, shorter), after which the bytes from the truncation point on may differ."""

    NAME: ClassVar[str] = "stage prefix manifest"

    log_file: str
    input_checksum: str = Field(description="Of the .log's first state.input_bytes, by checksum_algorithm")
    checksum_algorithm: FileChecksumAlgorithm
    state: PrefixState
    staged_ids: list[FileIdentity] = Field(description="The staged .cleaned files as written and fsynced")
    staged_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def epochs_as_now(self, epochs: list[tuple[int, int]]) -> bool:
        """Its batches got the epochs a conversion would give them now (none for v1)."""
        return epochs_in_range(epochs, self.base_offset, self.state.input_last_offset + 1) == \
            [tuple(e) for e in self.leader_epochs]


def prefix_current(entry: StagedPrefix, partition_dir: Path, conversion: Conversion, epochs: list[tuple[int, int]],
                   staged_dir: Path) -> bool:
    """The staged prefix is of the segment as it is now, and made as it would be now: the same
    options and leader epochs over its offsets, its staged files as written (stats), and the
    segment's first bytes the same (read and hashed: the one read of the window that grows with
    the bytes, at hashing speed)."""
    if entry.conversion != conversion or not entry.epochs_as_now(epochs):
        return False
    staged_now = identities(staged_dir, [i.name for i in entry.staged_ids])
    if staged_now != entry.staged_ids:
        return False
    try:
        return prefix_matches(partition_dir / entry.log_file, entry.state.input_bytes, entry.input_checksum,
                              entry.checksum_algorithm)
    except FileNotFoundError:
        return False


class VerifiedSegment(_StageEntry):
    """A closed segment the prestage read whole and found in the target format with nothing to
    report (what the window's plan checks: Kafka's recovery checks and the indexes); the window
    leaves it as it is without reading it while its files keep their identity."""

    NAME: ClassVar[str] = "stage verification"

    original_ids: list[FileIdentity] = Field(description="The segment's files, the same before and after the read")
    bytes: int
    bytes_by_magic: dict[str, int] = Field(default_factory=dict)
    records: int | None = None
    verified_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


def verified_current(entry: VerifiedSegment, partition_dir: Path, next_base_offset: int | None,
                     conversion: Conversion, epochs: list[tuple[int, int]]) -> bool:
    """The verification is of the segment as it is now (stats only; nothing links these
    files, so every field of their identity, ctime included, must be the same) and as this
    run would check it."""
    if not entry.made_as_now(next_base_offset, conversion, epochs):
        return False
    names_then = [i.name for i in entry.original_ids]
    return segment_files(partition_dir, entry.base_offset) == names_then and \
        identities(partition_dir, names_then) == entry.original_ids


def epochs_in_range(entries: list[tuple[int, int]], base_offset: int, next_base_offset: int | None
                    ) -> list[tuple[int, int]]:
    """The leader epochs a segment's batches get, as (epoch, from offset) over [base offset,
    next base offset): the entry covering the base offset (its start moved up to it), then the
    entries starting inside. Entries elsewhere do not matter: retention moves the first entry's
    start up (``LeaderEpochFileCache.truncateFromStart``), a new leader or a truncation changes
    entries above a closed segment."""
    out: list[tuple[int, int]] = []
    for epoch, start in entries:
        if start <= base_offset:
            out = [(epoch, base_offset)]
        elif next_base_offset is None or start < next_base_offset:
            out.append((epoch, start))
    return out


def conversion_of(options: UpgradeOptions) -> Conversion:
    return Conversion(target_magic=options.target_magic, segment_bytes=options.segment_bytes,
                      max_message_bytes=options.max_message_bytes, index_interval_bytes=options.index_interval_bytes,
                      stamp_v0_with_mtime=options.stamp_v0_with_mtime,
                      assign_leader_epoch=options.assign_leader_epoch, tool_version=__version__)


def segment_files(partition_dir: Path, base_offset: int) -> list[str]:
    prefix = names.filename_prefix_from_offset(base_offset)
    return [prefix + s for s in names.SEGMENT_FILE_SUFFIXES if (partition_dir / (prefix + s)).exists()]


def leader_epochs_after(partition_dir: Path, assign: bool) -> list[tuple[int, int]]:
    """The leader-epoch entries a rewrite of this partition's segments uses: the checkpoint's,
    with epoch 0 from the log start offset when ``--assign-leader-epoch`` will add it first
    (leader_epoch.py; ``assign=False`` once it has)."""
    if assign:
        plan = plan_assignment(partition_dir)
        if plan is not None:
            return list(plan.after)
    p = partition_dir / names.LEADER_EPOCH_CHECKPOINT_FILE
    return [(e.epoch, e.start_offset) for e in LeaderEpochCheckpointFile.read(p).entries] if p.exists() else []


def still_current(entry: StagedSegment, partition_dir: Path, next_base_offset: int | None, conversion: Conversion,
                  epochs: list[tuple[int, int]], *,
                  ctime_moved_by_us: Callable[[FileIdentity], bool] = lambda _: False) -> bool:
    """The staged conversion is of the segment as it is now (stats only), made as it would be
    now (``epochs``: the leader-epoch entries the conversion would use; none for v1). A file
    whose ctime alone moved is current only when ``ctime_moved_by_us`` says the run's own hard
    link moved it (its backup)."""
    if not entry.made_as_now(next_base_offset, conversion, epochs):
        return False
    files = segment_files(partition_dir, entry.base_offset)
    now = identities(partition_dir, files)
    if now is None or [i.name for i in entry.original_ids] != files:
        return False
    return all(was == cur or (was.same_except_ctime(cur) and ctime_moved_by_us(cur))
               for was, cur in zip(entry.original_ids, now, strict=True))


@dataclass(frozen=True)
class StageRead:
    """What one read of a stage found: the window's plan reads it, its close uses the same."""

    entries: list[StagedSegment]
    verified: list[VerifiedSegment]
    prefixes: list[StagedPrefix]


class Stage:
    """One stage id under a stage root: its segments' files and manifests."""

    def __init__(self, root: str | os.PathLike[str], stage_id: str) -> None:
        self.root = Path(root)
        self.stage_id = stage_id
        self.path = self.root / stage_id

    def files_dir(self, partition_dir: str | Path, base_offset: int) -> Path:
        return self.path / FILES_DIR / partition_key(Path(partition_dir)) / names.filename_prefix_from_offset(
            base_offset)

    def manifest_path(self, partition_dir: str | Path, base_offset: int) -> Path:
        return self._document(MANIFESTS_DIR, partition_dir, base_offset)

    def _document(self, kind: str, partition_dir: str | Path, base_offset: int) -> Path:
        """``<stage>/<kind>/<partition key>.<segment prefix>.json`` (orphans() parses the name back)."""
        key = f"{partition_key(Path(partition_dir))}.{names.filename_prefix_from_offset(base_offset)}"
        return self.path / kind / f"{key}.json"

    def exists(self) -> bool:
        return self.path.is_dir()

    def load(self, partition_dir: str | Path, base_offset: int) -> StagedSegment | None:
        p = self.manifest_path(partition_dir, base_offset)
        return StagedSegment.read(p) if p.exists() else None

    def entries(self) -> list[StagedSegment]:
        """Every staged segment; an unreadable manifest (damaged, or a newer kmigrate's) is
        :class:`Refused`, naming it and the way out."""
        mdir = self.path / MANIFESTS_DIR
        out = []
        for p in sorted(mdir.glob("*.json")) if mdir.is_dir() else []:
            try:
                out.append(StagedSegment.read(p))
            except (OSError, ValueError) as exc:
                where = str(exc) if str(p) in str(exc) else f"{p}: {exc}"
                raise Refused(f"stage {self.stage_id}: {where}; discard the stage (kmigrate upgrade LOG_DIR... "
                              f"--discard-stage {self.stage_id} --stage-root {self.root}) and prestage again"
                              ) from None
        return out

    def read(self) -> StageRead:
        """Every staged and every verified segment, every staged prefix (:meth:`entries`,
        :meth:`verified`, :meth:`prefixes`)."""
        return StageRead(entries=self.entries(), verified=self.verified(), prefixes=self.prefixes())

    def verified_path(self, partition_dir: str | Path, base_offset: int) -> Path:
        return self._document(VERIFIED_DIR, partition_dir, base_offset)

    def verified(self) -> list[VerifiedSegment]:
        """Every verified segment; one unreadable is of no use and read as absent (the window
        then reads the segment itself)."""
        return _readable(self.path / VERIFIED_DIR, VerifiedSegment)

    def save_verified(self, entry: VerifiedSegment) -> None:
        p = self.verified_path(entry.partition_dir, entry.base_offset)
        durable_mkdir(p.parent)
        entry.write(p)

    def forget_verified(self, entries: list[VerifiedSegment]) -> None:
        durable_unlink(*(self.verified_path(e.partition_dir, e.base_offset) for e in entries))

    def prefix_path(self, partition_dir: str | Path, base_offset: int) -> Path:
        return self._document(PREFIXES_DIR, partition_dir, base_offset)

    def prefix_files_dir(self, partition_dir: str | Path, base_offset: int) -> Path:
        d = self.files_dir(partition_dir, base_offset)
        return d.with_name(d.name + PREFIX_FILES_SUFFIX)

    def load_prefix(self, partition_dir: str | Path, base_offset: int) -> StagedPrefix | None:
        p = self.prefix_path(partition_dir, base_offset)
        return StagedPrefix.read(p) if p.exists() else None

    def prefixes(self) -> list[StagedPrefix]:
        """Every staged prefix; one unreadable is of no use and read as absent (the window then
        converts the whole segment)."""
        return _readable(self.path / PREFIXES_DIR, StagedPrefix)

    def new_prefix_dir(self, partition_dir: str | Path, base_offset: int) -> Path:
        """An empty directory for a prefix's staged files: the prefix staged before, if any,
        forgotten first (its manifest, then its files)."""
        p = self.prefix_path(partition_dir, base_offset)
        if p.exists():
            durable_unlink(p)
        return _empty_dir(self.prefix_files_dir(partition_dir, base_offset))

    def save_prefix(self, entry: StagedPrefix) -> None:
        """The prefix's manifest, durably, after the files it names are (the caller fsynced them)."""
        _save_after_files(entry, self.prefix_files_dir(entry.partition_dir, entry.base_offset),
                          self.prefix_path(entry.partition_dir, entry.base_offset))

    def forget_prefixes(self, entries: list[StagedPrefix]) -> None:
        """Manifests first, then files (as :meth:`forget`)."""
        _forget([(self.prefix_path(e.partition_dir, e.base_offset),
                  self.prefix_files_dir(e.partition_dir, e.base_offset)) for e in entries])

    def manifest_count(self) -> int:
        mdir = self.path / MANIFESTS_DIR
        return sum(1 for _ in mdir.glob("*.json")) if mdir.is_dir() else 0

    def new_files_dir(self, partition_dir: str | Path, base_offset: int) -> Path:
        """An empty directory for a segment's staged files (an interrupted staging's removed)."""
        return _empty_dir(self.files_dir(partition_dir, base_offset))

    def save(self, entry: StagedSegment) -> None:
        """The manifest, durably, after the files it names are (the caller fsynced them)."""
        _save_after_files(entry, self.files_dir(entry.partition_dir, entry.base_offset),
                          self.manifest_path(entry.partition_dir, entry.base_offset))

    def forget(self, entries: list[StagedSegment]) -> None:
        """Remove staged segments of no more use (stale, or the window is over): the manifests
        first (a crash then leaves files without one, which the next pass or a discard removes),
        then the files; one fsync per directory, not one per segment: a segment a crash brings
        back is found stale or unused and removed again."""
        _forget([(self.manifest_path(e.partition_dir, e.base_offset), self.files_dir(e.partition_dir, e.base_offset))
                 for e in entries])

    def discard(self) -> int:
        """Remove the whole stage (any time: the window links what it uses into the log dir,
        and a staged file linked there stays), and the stages retired under its root. Returns
        the bytes freed."""
        freed = _unlinked_bytes(self.path)
        durable_rmtree(self.path)
        sweep_deleted(self.root)
        return freed

    def retire(self) -> Path | None:
        """The end of a stop window that used the stage: moved aside under ``.deleted`` at
        once, and the staged files the window swapped in unlinked there (they live on in the
        log dir under one name, so none is held once Kafka deletes it; unlinking one frees
        nothing). Everything else, the unused staged files among it, is left to
        :func:`sweep_deleted`: a removal that frees blocks costs about a millisecond on a file
        system mounted with online discard. None when it is gone already (a window's close
        resumed). The move is durable; the unlinks need not be: a power cut that brings some
        back leaves them under ``.deleted`` for the sweep."""
        if not self.path.is_dir():
            return None
        try:
            aside = durable_move(self.path, durable_mkdir(self.root / DELETED_DIR) /
                                 f"{self.stage_id}.{time.time_ns()}")
        except FileNotFoundError:
            return None  # discarded meanwhile (--discard-stage beside the window)
        unlink_files(*(f for f in files_under(aside / FILES_DIR) if _links(f) > 1))
        return aside

    def retired(self) -> list[Path]:
        """What windows retired of this stage id and no sweep removed yet."""
        d = self.root / DELETED_DIR
        return sorted(d.glob(f"{self.stage_id}.*")) if d.is_dir() else []

    def orphans(self) -> list[Path]:
        """Segment file directories without a manifest: stagings a crash interrupted."""
        fdir = self.path / FILES_DIR
        if not fdir.is_dir():
            return []
        # a manifest is named <partition key>.<segment prefix>.json (manifest_path, prefix_path)
        keys = {tuple(m.stem.rsplit(".", 1)) for m in (self.path / MANIFESTS_DIR).glob("*.json")}
        keys |= {(k, s + PREFIX_FILES_SUFFIX) for k, s in (m.stem.rsplit(".", 1) for m in
                                                            (self.path / PREFIXES_DIR).glob("*.json"))}
        return sorted(seg for part in fdir.iterdir() for seg in part.iterdir() if (part.name, seg.name) not in keys)


_Entry = TypeVar("_Entry", bound=RunDocument)


def _readable(directory: Path, kind: type[_Entry]) -> list[_Entry]:
    """Every document of ``kind`` in ``directory``; one unreadable is of no use and read as
    absent (the window then reads or converts the segment itself)."""
    out = []
    for p in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            out.append(kind.read(p))
        except (OSError, ValueError):
            continue
    return out


def _empty_dir(path: Path) -> Path:
    """``path`` as a new, empty, durable directory (what an interrupted staging left removed)."""
    durable_rmtree(path)
    return durable_mkdir(path)


def _save_after_files(entry: RunDocument, files_dir: Path, path: Path) -> None:
    """Data first, manifest last: the files' directory fsynced, then the manifest durably."""
    fsync_dir(files_dir)
    durable_mkdir(path.parent)
    entry.write(path)


def _forget(places: list[tuple[Path, Path]]) -> None:
    """(manifest, files directory) pairs: every manifest removed first, then the files."""
    durable_unlink(*(m for m, _ in places))
    durable_rmtree(*(d for _, d in places))


def sweep_deleted(root: str | os.PathLike[str]) -> None:
    """Remove what retired stages left under ``root`` (manifests, unused staged files,
    directories); another sweep or a window's retirement may run beside it (brokers sharing
    a stage root), so what is gone meanwhile is no error."""
    remove_trees(Path(root) / DELETED_DIR)


def _links(path: Path) -> int:
    try:
        return path.lstat().st_nlink
    except FileNotFoundError:
        return 0


def _unlinked_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` that no other name holds (what removing them frees)."""
    if not path.exists():
        return 0
    return sum(st.st_size for p in path.rglob("*") if p.is_file() and (st := p.stat()).st_nlink == 1)
