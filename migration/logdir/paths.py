"""What a path given to kmigrate is, told by Kafka's own markers, so that a command refuses a
wrong one before it writes anything (docs/operations.md, "Wrong paths are refused").

Kafka's markers (docs/formats.md §3, §4, §7): a log dir holds ``meta.properties`` (written by
``kafka-storage format`` and by ZooKeeper-era brokers since 0.9), the offset checkpoint files,
``.kafka_cleanshutdown`` and one directory per partition, named ``<topic>-<partition>``
(``UnifiedLog.parseTopicPartitionName``) and holding files named by a 20-digit offset. The
metadata log dir of a KRaft node holds ``__cluster_metadata-0`` and, before KIP-1170,
``bootstrap.checkpoint``. A name alone proves little (``broker-1`` parses as partition 1 of
topic ``broker``), so a partition directory is told by its files too.

Reads directory listings only; never opens a file for writing, never takes a lock.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from migration.formats import names
from migration.formats.errors import KafkaFormatError


class PathKind(StrEnum):
    MISSING = "missing"
    FILE = "file"
    EMPTY = "empty directory"
    BROKER_LOG_DIR = "broker log dir"
    METADATA_LOG_DIR = "metadata log dir"
    PARTITION_DIR = "partition directory"
    LOG_DIRS_PARENT = "directory of log dirs"
    OTHER = "directory without Kafka data"
    UNREADABLE = "unreadable"


class Need(StrEnum):
    """What a command takes."""

    BROKER_LOG_DIR = "broker log dir"  # upgrade, tier-prepare
    METADATA_LOG_DIR = "metadata log dir"  # unify-bootstrap, --metadata-log-dir
    STRAY_LOG_DIR = "broker log dir with a stray bootstrap.checkpoint"  # unify-bootstrap --retire-stray
    LOG_DIR = "log dir"  # inventory: a broker's or a controller's
    KAFKA_PATH = "log dir, partition directory or Kafka file"  # validate

    @property
    def plural(self) -> str:
        return {Need.BROKER_LOG_DIR: "broker log dirs", Need.METADATA_LOG_DIR: "metadata log dirs",
                Need.STRAY_LOG_DIR: "broker log dirs"}.get(self, "log dirs")


@dataclass(frozen=True)
class PathClass:
    path: Path
    kind: PathKind
    log_dir: Path | None = None  # the log dir holding this partition directory or file
    partition_dir: Path | None = None  # the partition directory holding this file
    partitions: int = 0  # topic-partition directories of a log dir (not the metadata partition)
    metadata_partition: bool = False  # a log dir holding __cluster_metadata-0
    bootstrap_checkpoint: bool = False
    found: tuple[PathClass, ...] = field(default=())  # the log dirs below a LOG_DIRS_PARENT
    error: str | None = None

    @property
    def is_log_dir(self) -> bool:
        return self.kind in (PathKind.BROKER_LOG_DIR, PathKind.METADATA_LOG_DIR)

    @property
    def is_metadata_partition(self) -> bool:
        return self.kind is PathKind.PARTITION_DIR and self.path.name == names.METADATA_PARTITION_DIR

    def satisfies(self, need: Need) -> bool:
        if need is Need.KAFKA_PATH:
            return self.is_log_dir or self.kind in (PathKind.PARTITION_DIR, PathKind.FILE)
        if need is Need.LOG_DIR:
            return self.is_log_dir
        if need is Need.BROKER_LOG_DIR:
            # a combined (broker and controller) node's log dir holds both
            return self.kind is PathKind.BROKER_LOG_DIR
        if need is Need.METADATA_LOG_DIR:
            return self.kind is PathKind.METADATA_LOG_DIR or (self.is_log_dir and self.metadata_partition)
        # A stray copy lives in a log dir that is not the metadata log dir (no __cluster_metadata-0).
        return self.is_log_dir and not self.metadata_partition

    def describe(self) -> str:
        """What this is, as a sentence fragment: "a broker log dir (4 partitions)"."""
        if self.kind is PathKind.BROKER_LOG_DIR:
            extra = ", and the metadata partition" if self.metadata_partition else ""
            return f"a broker log dir ({_count(self.partitions, 'partition')}{extra})"
        if self.kind is PathKind.METADATA_LOG_DIR:
            held = [n for n, there in ((names.METADATA_PARTITION_DIR, self.metadata_partition),
                                       (names.BOOTSTRAP_CHECKPOINT_FILE, self.bootstrap_checkpoint)) if there]
            return f"a metadata log dir (it holds {' and '.join(held)}, no topic partitions)"
        if self.kind is PathKind.PARTITION_DIR:
            what = "the metadata partition directory" if self.is_metadata_partition else "a partition directory"
            return what + (f" of log dir {self.log_dir}" if self.log_dir else "")
        if self.kind is PathKind.FILE:
            if self.partition_dir is not None:
                return f"a file of partition directory {self.partition_dir.name}" + (
                    f" of log dir {self.log_dir}" if self.log_dir else "")
            if self.log_dir is not None:
                return f"a file of log dir {self.log_dir}"
            return "a file"
        if self.kind is PathKind.LOG_DIRS_PARENT:
            return "a directory of log dirs, not a log dir" if len(self.found) > 1 else \
                "a directory holding a log dir, not a log dir"
        if self.kind is PathKind.EMPTY:
            return "an empty directory"
        if self.kind is PathKind.OTHER:
            return "a directory without Kafka data (no meta.properties, no partition directories)"
        if self.kind is PathKind.UNREADABLE:
            return f"unreadable ({self.error})"
        return "not there (no such file or directory)"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _listing(path: Path) -> list[os.DirEntry[str]]:
    with os.scandir(path) as it:
        return list(it)


def _is_partition_file(name: str) -> bool:
    if name in (names.LEADER_EPOCH_CHECKPOINT_FILE, names.PARTITION_METADATA_FILE):
        return True
    try:
        names.offset_from_file_name(name)  # segments, indexes, snapshots, KRaft checkpoints, leftovers
    except KafkaFormatError:
        return False
    return True


def _is_dir(e: os.DirEntry[str]) -> bool:
    try:
        return e.is_dir()
    except OSError:
        return False


def _partition_like(path: Path, entries: list[os.DirEntry[str]]) -> bool:
    """A topic-partition directory: its name parses as Kafka parses it, it is no log dir, and
    it holds a file only a partition holds."""
    try:
        names.parse_partition_dir_name(path.name)
    except KafkaFormatError:
        return False
    if any(e.name == names.META_PROPERTIES_FILE for e in entries):
        return False
    return any(_is_partition_file(e.name) for e in entries if not _is_dir(e))


_LOG_DIR_FILES = frozenset({names.META_PROPERTIES_FILE, names.CLEAN_SHUTDOWN_FILE, names.BOOTSTRAP_CHECKPOINT_FILE,
                            *names.OFFSET_CHECKPOINT_FILES})


def _as_log_dir(path: Path, entries: list[os.DirEntry[str]]) -> PathClass | None:
    """The class of ``path`` when it is a log dir, else None."""
    files = {e.name for e in entries if not _is_dir(e)}
    partitions = 0
    metadata = False
    for e in entries:
        if not _is_dir(e):
            continue
        if e.name == names.METADATA_PARTITION_DIR:
            metadata = True
            continue
        try:
            names.parse_partition_dir_name(e.name)
        except KafkaFormatError:
            continue
        try:
            child = _listing(Path(e.path))
        except OSError:
            continue
        if _partition_like(Path(e.path), child) or not child:
            partitions += 1  # Kafka may leave a partition's directory empty after a failed creation
    bootstrap = names.BOOTSTRAP_CHECKPOINT_FILE in files
    if not (files & _LOG_DIR_FILES) and not metadata and not partitions:
        return None
    # A bootstrap.checkpoint beside topic partitions is a stray copy (kafka-storage format wrote
    # one into every log dir before 3.8): the partitions make it a broker's.
    kind = PathKind.BROKER_LOG_DIR if partitions or not (metadata or bootstrap) else PathKind.METADATA_LOG_DIR
    return PathClass(path=path, kind=kind, partitions=partitions, metadata_partition=metadata,
                     bootstrap_checkpoint=bootstrap)


def _log_dir_of(path: Path) -> Path | None:
    try:
        entries = _listing(path)
    except OSError:
        return None
    return path if _as_log_dir(path, entries) is not None else None


# How far below a given directory log dirs are looked for: a cluster's root holds
# <node>/<log dir>; a bound on the directories read keeps a mistaken "/" quick.
_SEARCH_DEPTH = 3
_SEARCH_BUDGET = 400


def _find_log_dirs(root: Path) -> tuple[PathClass, ...]:
    found: list[PathClass] = []
    queue: deque[tuple[Path, int]] = deque([(root, 0)])
    budget = _SEARCH_BUDGET
    while queue and budget > 0:
        d, depth = queue.popleft()
        try:
            entries = sorted(_listing(d), key=lambda e: e.name)
        except OSError:
            continue
        budget -= 1
        if d != root:
            as_log_dir = _as_log_dir(d, entries)
            if as_log_dir is not None:
                found.append(as_log_dir)
                continue
            if _partition_like(d, entries):
                continue
        if depth < _SEARCH_DEPTH:
            queue.extend((Path(e.path), depth + 1) for e in entries if _is_dir(e) and not e.name.startswith("."))
    return tuple(sorted(found, key=lambda c: str(c.path)))


def classify_path(path: str | os.PathLike[str]) -> PathClass:
    """What ``path`` is: a broker or metadata log dir, a partition directory, a directory of
    log dirs, an empty directory, a file, or missing."""
    p = Path(path)
    if not p.exists():
        return PathClass(path=p, kind=PathKind.MISSING)
    if not p.is_dir():
        part_dir = p.parent
        try:
            siblings = _listing(part_dir)
        except OSError:
            return PathClass(path=p, kind=PathKind.FILE)
        if _partition_like(part_dir, siblings):
            return PathClass(path=p, kind=PathKind.FILE, partition_dir=part_dir, log_dir=_log_dir_of(part_dir.parent))
        return PathClass(path=p, kind=PathKind.FILE, log_dir=_log_dir_of(part_dir))
    try:
        entries = _listing(p)
    except OSError as exc:
        return PathClass(path=p, kind=PathKind.UNREADABLE, error=exc.strerror or str(exc))
    if not [e for e in entries if e.name != names.LOCK_FILE]:
        # .lock alone is what opening a lock leaves (kmigrate's own refusals included)
        return PathClass(path=p, kind=PathKind.EMPTY)
    if _partition_like(p, entries):
        return PathClass(path=p, kind=PathKind.PARTITION_DIR, log_dir=_log_dir_of(p.parent))
    as_log_dir = _as_log_dir(p, entries)
    if as_log_dir is not None:
        return as_log_dir
    found = _find_log_dirs(p)
    if found:
        return PathClass(path=p, kind=PathKind.LOG_DIRS_PARENT, found=found)
    return PathClass(path=p, kind=PathKind.OTHER)


def _rel(c: PathClass, root: Path) -> str:
    try:
        return str(c.path.relative_to(root))
    except ValueError:
        return str(c.path)


def path_problem(c: PathClass, need: Need, *, hints: Mapping[PathKind, str] | None = None) -> str | None:
    """None when ``c`` is what a command that takes ``need`` takes; else one line naming what
    it is and what to pass instead. ``hints``: a command's own advice per kind, appended."""
    if c.satisfies(need):
        return None
    hint = (hints or {}).get(c.kind)
    msg = f"{c.path} is {c.describe()}"
    if c.kind is PathKind.MISSING:
        msg = f"{c.path}: no such file or directory"
    elif c.kind is PathKind.UNREADABLE:
        msg = f"{c.path}: cannot read it ({c.error})"
    elif c.kind is PathKind.LOG_DIRS_PARENT:
        fit = [f for f in c.found if f.satisfies(need)]
        rest = ", ".join(f"the {f.kind.value} {_rel(f, c.path)}" for f in c.found if not f.satisfies(need))
        if len(fit) == 1:
            msg += f": it holds the {need.value} {_rel(fit[0], c.path)}" + (f" (and {rest})" if rest else "")
            msg += f": pass {fit[0].path}"
        elif fit:
            msg += (f": it holds the {need.plural} {', '.join(_rel(f, c.path) for f in fit)}"
                    + (f" (and {rest})" if rest else "") + ": pass them")
        else:
            msg += f": it holds only {rest}; pass a {need.value}"
    elif c.kind in (PathKind.PARTITION_DIR, PathKind.FILE) and c.log_dir is not None:
        holder = classify_path(c.log_dir)
        if holder.satisfies(need):
            msg += f": pass {c.log_dir}"
        else:
            msg += f", which is {holder.describe()}; pass a {need.value}"
    else:
        msg += f"; pass a {need.value}"
    return msg + (f"; {hint}" if hint else "")
