"""The log-directory model: what a broker (or controller) left on disk, as an inventory.

Scanning reads names, sizes and mtimes, the small text files (meta.properties,
partition.metadata, leader-epoch-checkpoint, offset checkpoints) and, per segment, the batch
headers (message formats, codecs, offsets, timestamps, producer batches). ``deep`` also
decompresses legacy wrappers for exact record counts. It never writes.

A live broker holds ``.lock`` with a POSIX record lock (Java's ``FileChannel.tryLock`` on
Linux is ``fcntl(F_SETLK)``); ``flock`` does not see it, so the check uses ``fcntl.lockf``.
kmigrate takes the same lock for a whole run, so one run per log dir excludes brokers and
other kmigrate processes alike, whatever their state directory.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import socket
import struct
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from migration.formats import names
from migration.formats.checkpoint_files import LeaderEpochCheckpointFile, OffsetCheckpointFile
from migration.formats.errors import KafkaFormatError
from migration.formats.file_records import FileRecords
from migration.formats.fileio import durable_mkdir, durable_replace, durable_unlink
from migration.formats.meta_properties import MetaProperties
from migration.formats.partition_metadata import PartitionMetadataFile
from migration.formats.record_batch import RecordBatch
from migration.settings import locks_dir


class SegmentStats(BaseModel):
    batches: int = 0
    records: int = 0
    records_exact: bool = True
    batches_by_magic: dict[str, int] = Field(default_factory=dict)
    bytes_by_magic: dict[str, int] = Field(default_factory=dict)
    codecs: dict[str, int] = Field(default_factory=dict)
    first_offset: int | None = None
    last_offset: int | None = None
    min_batch_timestamp: int | None = None
    max_timestamp: int = -1
    producer_batches: int = 0
    transactional_batches: int = 0
    control_batches: int = 0
    leader_epochs: list[int] = Field(default_factory=list)
    valid_bytes: int = 0
    trailing_bytes: int = 0
    error: dict[str, Any] | None = None

    @property
    def formats(self) -> list[str]:
        return sorted(self.batches_by_magic)


class Segment(BaseModel):
    base_offset: int
    log_file: str
    size: int
    mtime_ns: int
    index_size: int | None = None
    time_index_size: int | None = None
    txn_index_size: int | None = None
    stats: SegmentStats | None = None

    @property
    def has_index(self) -> bool:
        return self.index_size is not None

    @property
    def has_time_index(self) -> bool:
        return self.time_index_size is not None


class Partition(BaseModel):
    topic: str
    partition: int
    path: str
    kind: str = names.PartitionDirKind.LIVE.value
    topic_id: str | None = None
    topic_id_error: str | None = None
    segments: list[Segment] = Field(default_factory=list)
    producer_snapshots: list[int] = Field(default_factory=list)
    leader_epochs: list[tuple[int, int]] | None = None
    leftovers: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def active_segment(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    def formats(self) -> Counter[str]:
        c: Counter[str] = Counter()
        for s in self.segments:
            if s.stats:
                c.update(s.stats.bytes_by_magic)
        return c


class KRaftCheckpoint(BaseModel):
    file: str
    end_offset: int
    epoch: int
    state: str
    size: int


class MetadataLog(BaseModel):
    path: str
    checkpoints: list[KRaftCheckpoint] = Field(default_factory=list)
    segments: list[Segment] = Field(default_factory=list)

    @property
    def zero_checkpoint(self) -> KRaftCheckpoint | None:
        for c in self.checkpoints:
            if c.end_offset == 0 and c.epoch == 0 and c.state == names.CheckpointState.COMPLETE:
                return c
        return None


class LogDir(BaseModel):
    path: str
    meta: dict[str, str] | None = None
    meta_error: str | None = None
    locked: bool = False
    clean_shutdown: bool = False
    bootstrap_checkpoint: bool = False
    offset_checkpoints: dict[str, int] = Field(default_factory=dict)  # file name -> entries
    partitions: list[Partition] = Field(default_factory=list)
    metadata_log: MetadataLog | None = None
    other_dirs: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)

    @property
    def node_id(self) -> int | None:
        if not self.meta:
            return None
        value = self.meta.get("node.id", self.meta.get("broker.id"))
        return int(value) if value is not None and value.lstrip("-").isdigit() else None

    @property
    def cluster_id(self) -> str | None:
        return self.meta.get("cluster.id") if self.meta else None

    def partition(self, topic: str, partition: int) -> Partition | None:
        for p in self.partitions:
            if p.topic == topic and p.partition == partition:
                return p
        return None


class Inventory(BaseModel):
    log_dirs: list[LogDir] = Field(default_factory=list)

    def brokers(self) -> dict[int | None, list[LogDir]]:
        out: dict[int | None, list[LogDir]] = {}
        for d in self.log_dirs:
            out.setdefault(d.node_id, []).append(d)
        return out


# ---------------------------------------------------------------- the lock


_HELD_LOCKS: dict[str, int] = {}
_FLOCK = struct.Struct("hhqqi4x")  # struct flock on Linux: type, whence, start, len, pid
HOLDER_VERSION = 1


class LockHolder(BaseModel):
    """Who holds a log dir's ``.lock`` for kmigrate, and for which run: written (durably) when
    the lock is taken, removed when it is released. Found while the lock is free, it names a
    run that was killed. The lock itself (a POSIX record lock on the log dir's ``.lock``, as a
    broker takes) is what excludes other processes; this record only explains it."""

    version: int = HOLDER_VERSION
    log_dir: str
    pid: int
    pid_start: int | None = Field(default=None, description="Start time of the process (clock ticks "
                                  "since boot): a later process that reuses the pid has another")
    host: str
    run_id: str | None = None
    run_kind: str | None = None
    resume: str | None = Field(default=None, description="The command that resumes the run")
    rollback: str | None = Field(default=None, description="The command that rolls the run back")
    blocks_other_runs: bool = Field(default=False, description="A killed run of this kind leaves work in "
                                    "flight: only its resume or rollback may touch the log dir")
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class LockState(StrEnum):
    FREE = "free"
    OURS = "ours"  # this process holds it
    JOB = "job"  # the process driving this job (a Spark executor's driver) holds it
    KMIGRATE = "kmigrate"  # another kmigrate run holds it
    OTHER = "other"  # anything else: a live broker or controller


class LockStatus(BaseModel):
    log_dir: str
    state: LockState
    pid: int | None = None
    process: str | None = None  # the holder's executable name (never its arguments: they may hold secrets)
    holder: LockHolder | None = None  # kmigrate's record for this dir: live, or left by a killed run

    @property
    def live(self) -> bool:
        """Held by a process that is neither this one nor this job's driver."""
        return self.state in (LockState.KMIGRATE, LockState.OTHER)

    @property
    def interrupted(self) -> LockHolder | None:
        """The record of a run that was killed while it held the lock (the lock is free now)."""
        return self.holder if self.state is LockState.FREE else None

    def describe(self) -> str:
        if self.state is LockState.KMIGRATE and self.holder is not None:
            return (f"{self.log_dir}: kmigrate run {self.holder.run_id} ({self.holder.run_kind}, pid {self.pid} "
                    f"on {self.holder.host}) is working on it")
        if self.state is LockState.OTHER:
            return (f"{self.log_dir}: another process holds the lock (pid {self.pid}"
                    + (f", {self.process}" if self.process else "") + "): a live broker or controller, or a "
                    "kmigrate run with another state directory; stop it first")
        return f"{self.log_dir}: lock {self.state.value}"


def _lock_key(log_dir: str | os.PathLike[str]) -> str:
    return str((Path(log_dir) / names.LOCK_FILE).resolve())


def _holder_file(log_dir: str | os.PathLike[str], *, host: str | None = None) -> Path:
    """Where kmigrate records the run holding ``log_dir``'s lock: one record per host and lock,
    since a home shared by several hosts sees the same log dir path on each, another disk behind
    it (docs/operations.md, "One worker per broker host"). ``host=""``: the name records had
    before they were per host."""
    name = socket.gethostname() if host is None else host
    key = f"{name}:{_lock_key(log_dir)}" if name else _lock_key(log_dir)
    return locks_dir() / (hashlib.sha1(key.encode()).hexdigest() + ".json")


def process_start(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ")"
    return int(stat[stat.rindex(")") + 2:].split()[19])


def _process_name(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or None
    except OSError:
        return None


def _read_record(path: Path) -> LockHolder | None:
    """A lock record; None when there is none (FileNotFoundError is raised) or it is unreadable
    or of an unknown version."""
    try:
        holder = LockHolder.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise
    except (OSError, ValueError):
        return None
    return holder if holder.version == HOLDER_VERSION else None


def read_lock_holder(log_dir: str | os.PathLike[str]) -> LockHolder | None:
    """kmigrate's record for ``log_dir`` on this host; an unreadable or unknown-version one
    counts as none. A record of an earlier version, named by the path alone, counts when this
    host wrote it."""
    try:
        return _read_record(_holder_file(log_dir))
    except FileNotFoundError:
        pass
    try:
        holder = _read_record(_holder_file(log_dir, host=""))
    except FileNotFoundError:
        return None
    return holder if holder is not None and holder.host == socket.gethostname() else None


def lock_holder_pid(log_dir: str | os.PathLike[str]) -> int | None:
    """The pid of the process holding the log dir's ``.lock`` (F_GETLK), or None if free."""
    lock = Path(log_dir) / names.LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        res = fcntl.fcntl(fd, fcntl.F_GETLK, _FLOCK.pack(fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))
    finally:
        os.close(fd)
    l_type, _, _, _, pid = _FLOCK.unpack(res)
    return None if l_type == fcntl.F_UNLCK else pid


def lock_status(log_dir: str | os.PathLike[str], *, job_owner_pid: int | None = None) -> LockStatus:
    """Who holds ``log_dir``'s lock. ``job_owner_pid``: the process that took the lock for the
    job this process works for (passed down explicitly: a shared state directory proves
    nothing about who a holder is)."""
    ld = str(log_dir)
    holder = read_lock_holder(log_dir)
    if _lock_key(log_dir) in _HELD_LOCKS:
        return LockStatus(log_dir=ld, state=LockState.OURS, pid=os.getpid(), holder=holder)
    pid = lock_holder_pid(log_dir)
    if pid is None:
        return LockStatus(log_dir=ld, state=LockState.FREE, holder=holder)
    if job_owner_pid is not None and pid == job_owner_pid:
        return LockStatus(log_dir=ld, state=LockState.JOB, pid=pid, holder=holder)
    if holder is not None and holder.pid == pid and holder.pid_start == process_start(pid):
        return LockStatus(log_dir=ld, state=LockState.KMIGRATE, pid=pid, holder=holder)
    # a record whose process is not the holder is stale (a killed run; a reused pid): not shown
    return LockStatus(log_dir=ld, state=LockState.OTHER, pid=pid, process=_process_name(pid))


def is_locked(log_dir: str | os.PathLike[str], *, job_owner_pid: int | None = None) -> bool:
    """True when a process other than this one (or this job's driver) holds the lock."""
    return lock_status(log_dir, job_owner_pid=job_owner_pid).live


class LogDirLock:
    """Hold a log dir's ``.lock`` as Kafka does, so that no broker starts on it and no second
    kmigrate process works on it while we do; ``holder`` says for which run (see
    :class:`LockHolder`)."""

    def __init__(self, log_dir: str | os.PathLike[str], *, holder: dict[str, Any] | None = None,
                 job_owner_pid: int | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.path = self.log_dir / names.LOCK_FILE
        self.holder = holder or {}
        self.job_owner_pid = job_owner_pid
        self._fd: int | None = None
        self._shared = False

    def acquire(self) -> bool:
        key = _lock_key(self.log_dir)
        if key in _HELD_LOCKS:
            # POSIX record locks belong to the process: this process already holds it, and a
            # second descriptor closed later would silently drop the lock. Share the holder.
            self._fd = None
            self._shared = True
            return True
        self._shared = False
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                if self.job_owner_pid is not None and lock_holder_pid(self.log_dir) == self.job_owner_pid:
                    self._shared = True  # held by the driver of the job this executor works for
                    return True
                return False
            raise
        self._fd = fd
        _HELD_LOCKS[key] = fd
        record = LockHolder(log_dir=str(self.log_dir.resolve()), pid=os.getpid(),
                            pid_start=process_start(os.getpid()), host=socket.gethostname(), **self.holder)
        hf = _holder_file(self.log_dir)
        durable_mkdir(hf.parent)
        durable_replace(hf, record.model_dump_json(indent=1).encode(), tmp_suffix=".tmp")
        earlier = _holder_file(self.log_dir, host="")
        try:  # this host's record by its earlier name: this one replaces it, as it replaced it then
            if (found := _read_record(earlier)) is not None and found.host == record.host:
                durable_unlink(earlier)
        except FileNotFoundError:
            pass
        return True

    def release(self) -> None:
        if self._fd is not None:
            _HELD_LOCKS.pop(_lock_key(self.log_dir), None)
            # the record goes first: a kill between the two leaves a free lock and a record,
            # read as a killed run, which it then was
            holder = read_lock_holder(self.log_dir)
            if holder is not None and holder.pid == os.getpid():
                durable_unlink(_holder_file(self.log_dir))
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> LogDirLock:
        if not self.acquire():
            raise BlockingIOError(f"{self.path}: held by another process (a live broker?)")
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# ---------------------------------------------------------------- scanning


def scan_segment_stats(log_file: str | os.PathLike[str], *, deep: bool = False) -> SegmentStats:
    st = SegmentStats()
    by_magic: Counter[str] = Counter()
    bytes_by_magic: Counter[str] = Counter()
    codecs: Counter[str] = Counter()
    epochs: list[int] = []
    fr = FileRecords(log_file)
    try:
        for b in fr.batches():
            magic = f"v{b.magic}"
            by_magic[magic] += 1
            bytes_by_magic[magic] += b.size_in_bytes
            codecs[b.compression.label] += 1
            st.batches += 1
            if isinstance(b, RecordBatch):  # magic 2 (FileRecords reads v0/v1 entries as LegacyBatch)
                st.records += b.records_count
                first = b.base_offset
                if b.producer_id >= 0:
                    st.producer_batches += 1
                if b.is_transactional:
                    st.transactional_batches += 1
                if b.is_control:
                    st.control_batches += 1
                ple = b.partition_leader_epoch
                if ple >= 0 and (not epochs or ple > epochs[-1]):
                    epochs.append(ple)
            elif b.is_compressed:
                if deep:
                    inner = b.inner()
                    st.records += len(inner)
                    first = inner[0].offset
                else:
                    st.records_exact = False
                    first = None
            else:
                st.records += 1
                first = b.offset
            if st.first_offset is None:
                st.first_offset = first if first is not None else b.last_offset
            st.last_offset = b.last_offset
            ts = b.max_timestamp
            if ts > st.max_timestamp:
                st.max_timestamp = ts
            if ts >= 0 and (st.min_batch_timestamp is None or ts < st.min_batch_timestamp):
                st.min_batch_timestamp = ts
    except KafkaFormatError as exc:
        st.error = exc.to_dict()
    st.valid_bytes = fr.valid_bytes
    st.trailing_bytes = fr.size - fr.valid_bytes if st.error is None else 0
    st.batches_by_magic = dict(by_magic)
    st.bytes_by_magic = dict(bytes_by_magic)
    st.codecs = dict(codecs)
    st.leader_epochs = epochs
    return st


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def scan_partition_dir(path: str | os.PathLike[str], *, stats: bool = True, deep: bool = False) -> Partition:

    p = Path(path)
    tp = names.parse_partition_dir_name(p.name)
    part = Partition(topic=tp.topic, partition=tp.partition, path=str(p), kind=tp.kind.value)
    logs: dict[int, os.DirEntry[str]] = {}
    others: dict[str, os.DirEntry[str]] = {}
    with os.scandir(p) as it:
        for e in it:
            others[e.name] = e
    for name, e in sorted(others.items()):
        if name.endswith(names.LEFTOVER_SUFFIXES):
            part.leftovers.append(name)
        elif name.endswith(names.LOG_FILE_SUFFIX):
            try:
                logs[names.offset_from_file_name(name)] = e
            except KafkaFormatError:
                part.problems.append(f"{name}: not a segment file name")
        elif name.endswith(names.PRODUCER_SNAPSHOT_FILE_SUFFIX):
            try:
                part.producer_snapshots.append(names.offset_from_file_name(name))
            except KafkaFormatError:
                part.problems.append(f"{name}: not a snapshot file name")
    for base in sorted(logs):
        e = logs[base]
        st = e.stat()
        prefix = names.filename_prefix_from_offset(base)
        seg = Segment(
            base_offset=base,
            log_file=e.name,
            size=st.st_size,
            mtime_ns=st.st_mtime_ns,
            index_size=_size(p / (prefix + names.INDEX_FILE_SUFFIX)) if prefix + names.INDEX_FILE_SUFFIX in others
            else None,
            time_index_size=_size(p / (prefix + names.TIME_INDEX_FILE_SUFFIX))
            if prefix + names.TIME_INDEX_FILE_SUFFIX in others else None,
            txn_index_size=_size(p / (prefix + names.TXN_INDEX_FILE_SUFFIX))
            if prefix + names.TXN_INDEX_FILE_SUFFIX in others else None,
        )
        if stats:
            seg.stats = scan_segment_stats(p / e.name, deep=deep)
        part.segments.append(seg)
    part.producer_snapshots.sort()
    if names.PARTITION_METADATA_FILE in others:
        try:
            part.topic_id = PartitionMetadataFile.read(p / names.PARTITION_METADATA_FILE).topic_id.to_string()
        except KafkaFormatError as exc:
            part.topic_id_error = str(exc)
    if names.LEADER_EPOCH_CHECKPOINT_FILE in others:
        try:
            part.leader_epochs = [
                (e.epoch, e.start_offset)
                for e in LeaderEpochCheckpointFile.read(p / names.LEADER_EPOCH_CHECKPOINT_FILE).entries
            ]
        except KafkaFormatError as exc:
            part.problems.append(str(exc))
    return part


def scan_metadata_log(path: str | os.PathLike[str], *, stats: bool = True) -> MetadataLog:
    p = Path(path)
    part = scan_partition_dir(p, stats=stats)
    md = MetadataLog(path=str(p), segments=part.segments)
    with os.scandir(p) as it:
        for e in sorted(it, key=lambda e: e.name):
            if ".checkpoint" not in e.name:
                continue
            try:
                cn = names.parse_checkpoint_file_name(e.name)
            except KafkaFormatError:
                continue
            md.checkpoints.append(
                KRaftCheckpoint(file=e.name, end_offset=cn.end_offset, epoch=cn.epoch, state=cn.state.value,
                                size=e.stat().st_size)
            )
    return md


def scan_log_dir(path: str | os.PathLike[str], *, stats: bool = True, deep: bool = False) -> LogDir:

    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"{p}: not a directory")
    d = LogDir(path=str(p))
    d.locked = is_locked(p)
    d.clean_shutdown = (p / names.CLEAN_SHUTDOWN_FILE).exists()
    d.bootstrap_checkpoint = (p / names.BOOTSTRAP_CHECKPOINT_FILE).exists()
    if (p / names.META_PROPERTIES_FILE).exists():
        try:
            d.meta = MetaProperties.read(p / names.META_PROPERTIES_FILE).to_properties()
        except (KafkaFormatError, ValueError) as exc:
            d.meta_error = str(exc)
    for name in names.OFFSET_CHECKPOINT_FILES:
        if (p / name).exists():
            try:
                d.offset_checkpoints[name] = len(OffsetCheckpointFile.read(p / name).entries)
            except KafkaFormatError as exc:
                d.problems.append(str(exc))
    with os.scandir(p) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        if not e.is_dir():
            continue
        if e.name == names.METADATA_PARTITION_DIR:
            d.metadata_log = scan_metadata_log(e.path, stats=stats)
            continue
        try:
            d.partitions.append(scan_partition_dir(e.path, stats=stats, deep=deep))
        except KafkaFormatError:
            d.other_dirs.append(e.name)
    return d


def scan_inventory(paths: Sequence[str | os.PathLike[str]], *, stats: bool = True, deep: bool = False) -> Inventory:
    return Inventory(log_dirs=[scan_log_dir(p, stats=stats, deep=deep) for p in paths])
