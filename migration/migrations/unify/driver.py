"""Unify ``bootstrap.checkpoint`` into the zero checkpoint (KIP-1170), offline, with proof.

Per metadata log dir (the dir holding ``bootstrap.checkpoint`` and ``__cluster_metadata-0``)
the state decides the action (docs/formats.md §7, KIP-1170 "Compatibility"):
  1. bootstrap.checkpoint with metadata records, zero checkpoint with KRaft control records
     only (dynamic quorum): rewrite the zero checkpoint = header batch keeping the existing
     KRaftVersionRecord/VotersRecord byte for byte, the bootstrap records in order, footer;
  2. bootstrap.checkpoint and no zero checkpoint (static quorum): create the zero checkpoint
     with the header, the records and the footer;
  3. no bootstrap.checkpoint, zero checkpoint with metadata records: already unified;
  4. both hold metadata records: the zero checkpoint wins; warn, retire bootstrap.checkpoint;
  5. the metadata log moved on (later snapshots, no zero checkpoint): the bootstrap records are
     committed to the log; only retire bootstrap.checkpoint.
``bootstrap.checkpoint`` is retired (copied to the backup root outside every log dir, fsynced,
verified, then unlinked) only after the new zero checkpoint was written via ``.checkpoint.part``
+ fsync + atomic rename, re-read and validated. A replaced zero checkpoint is backed up first.
A kill at any instant leaves the old or the new complete zero checkpoint plus at most a
``.checkpoint.part`` that Kafka deletes at startup; a re-run completes the work (a re-run that
finds both files holding the same records is case 4 with matching records: it only retires).

Reports hold digests and counts of records, never record bytes: SCRAM salts and keys stay on
disk only.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from migration.audit.model import Finding, RunKind, RunReport, UnitResult, UnitStatus, UnitType, new_run_id, utcnow
from migration.formats import names
from migration.formats.digest import RecordDigester
from migration.formats.errors import KafkaFormatError
from migration.formats.file_records import iterate_batches
from migration.formats.fileio import atomic_write, fsync_dir
from migration.formats.kraft_checkpoint import (
    KRAFT_MAX_BATCH_BYTES,
    CheckpointContents,
    KRaftControlRecord,
    build_checkpoint,
    read_checkpoint,
)
from migration.formats.metadata_records import (
    METADATA_VERSION_FEATURE,
    MV_3_3_IV3,
    MetadataRecord,
    metadata_version_name,
)
from migration.formats.model import Record
from migration.formats.record_batch import RECORD_BATCH_OVERHEAD, encode_record
from migration.logdir.model import LogDirLock, is_locked
from migration.runtime.engine import Progress, Unit, get_engine
from migration.runtime.faults import armed as faults_armed
from migration.runtime.faults import fault_point
from migration.runtime.runs import RunDir
from migration.runtime.safety import Refused, check_backup_root, check_not_live
from migration.settings import default_backup_root

log = logging.getLogger(__name__)

UNIT_KIND = "unify-metadata-dir"
FORMAT_BOOTSTRAP = "bootstrap.checkpoint"
FORMAT_ZERO = "zero-checkpoint"
FORMAT_LOG = "metadata-log"
FORMAT_RETIRED = "retired"
BACKUP_SUBDIR = "unify-bootstrap"
# Fault-injection points, in the order run_unit passes them (tests SIGKILL the process there).
FAULT_POINTS = (
    "zero-backed-up",  # old zero checkpoint copied to the backup root
    "zero-part-partial",  # half of the new zero checkpoint written to its .checkpoint.part
    "zero-part-written",  # .checkpoint.part complete and fsynced, not yet renamed
    "zero-renamed",  # new zero checkpoint in place, bootstrap.checkpoint untouched
    "bootstrap-backed-up",  # bootstrap.checkpoint copied to the backup root, not yet unlinked
    "bootstrap-retired",  # bootstrap.checkpoint unlinked
)

Case = Literal[1, 2, 3, 4, 5, "error"]
CASE_DESCRIPTIONS: dict[int | str, str] = {
    1: "bootstrap.checkpoint + zero checkpoint with KRaft control records only: merge into the zero checkpoint",
    2: "bootstrap.checkpoint, no zero checkpoint: create the zero checkpoint",
    3: "zero checkpoint holds the metadata records, no bootstrap.checkpoint: already unified",
    4: "both hold metadata records: the zero checkpoint wins, retire bootstrap.checkpoint",
    5: "the metadata log moved on (later snapshots): retire bootstrap.checkpoint only",
    "error": "cannot unify",
}


# ---------------------------------------------------------------- models


class UnifyOptions(BaseModel):
    backup_root: str | None = Field(default=None, description="Outside every log dir; default "
                                    "migration.settings.default_backup_root()")
    dry_run: bool = False
    retire_stray: bool = Field(default=False, description="Retire stray bootstrap.checkpoint copies of "
                               "broker-only log dirs (stray_log_dirs)")
    stray_log_dirs: list[str] = Field(default_factory=list)
    run_id: str | None = None
    lock_owner_pid: int | None = Field(default=None, description="Set at run time by a job runner that "
                                       "holds the log dir locks for its executors (spark-submit's driver)")

    def resolved_backup_root(self) -> Path:
        return Path(self.backup_root).resolve() if self.backup_root else default_backup_root()


class Problem(BaseModel):
    message: str
    file: str | None = None
    position: int | None = None

    def __str__(self) -> str:
        where = "" if self.file is None else self.file + (f" @ byte {self.position}" if self.position is not None
                                                           else "") + ": "
        return where + self.message


class CheckpointSummary(BaseModel):
    """A checkpoint file as counts and digests: never record bytes."""

    path: str
    size: int
    batches: int
    records: int
    metadata_records: int
    record_types: dict[str, int] = Field(default_factory=dict)
    features: dict[str, int] = Field(default_factory=dict, description="FeatureLevelRecords, last one wins")
    kraft_records: list[str] = Field(default_factory=list, description="KRaft control records of the header")
    kraft_version: int = 0
    voters_present: bool = False
    header_timestamp: int | None = None
    digest: str = Field(description="Content digest of the metadata records (offset = position among them)")


class UnifyState(BaseModel):
    log_dir: str
    metadata_partition_dir: str
    node_id: int | None = None
    case: Case
    description: str
    bootstrap: CheckpointSummary | None = None
    zero_checkpoint: CheckpointSummary | None = None
    later_snapshots: list[str] = Field(default_factory=list)
    partial_snapshots: list[str] = Field(default_factory=list)
    metadata_version_level: int | None = None
    metadata_version: str | None = None
    bootstrap_records: int = 0
    zero_records: int = 0
    bootstrap_digest: str | None = None
    bootstrap_batch_bytes: int | None = Field(default=None, description="Size of the records as one KRaft batch")
    kraft_version: int = 0
    voters_present: bool = False
    records_match: bool | None = Field(default=None, description="Case 4: the zero checkpoint holds exactly the "
                                       "bootstrap records (a re-run after a crash)")
    log_segments: int = 0
    warnings: list[str] = Field(default_factory=list)
    errors: list[Problem] = Field(default_factory=list)


class StraySummary(BaseModel):
    log_dir: str
    node_id: int | None = None
    present: bool
    size: int = 0
    metadata_records: int | None = None
    digest: str | None = None
    problem: Problem | None = None


# ---------------------------------------------------------------- reading


@dataclass
class _Read:
    """A decoded checkpoint with what rebuilding it needs (kept out of UnifyState: raw bytes)."""

    summary: CheckpointSummary
    contents: CheckpointContents
    append_time: int


def _digest(values: list[bytes]) -> str:
    """Digest of framed metadata record values; offsets are their positions among the records,
    so the same records digest the same in bootstrap.checkpoint (offset 1..) and the zero
    checkpoint (offset 1.. or 3..)."""
    d = RecordDigester()
    d.update(Record(i, -1, None, v) for i, v in enumerate(values))
    return d.result().content


def _values(records: list[MetadataRecord]) -> list[bytes]:
    return [r.encode() for r in records]


def _read(path: Path) -> _Read:
    data = path.read_bytes()
    contents = read_checkpoint(data, path=path)
    first = next(iter(iterate_batches(data, path=str(path), strict=True)))
    types: dict[str, int] = {}
    features: dict[str, int] = {}
    for m in contents.metadata_records:
        types[m.name] = types.get(m.name, 0) + 1
        if m.api_key == 12:
            features[str(m.fields["Name"])] = int(m.fields["FeatureLevel"])
    summary = CheckpointSummary(
        path=str(path), size=len(data), batches=contents.batches, records=contents.records,
        metadata_records=len(contents.metadata_records), record_types=types, features=features,
        kraft_records=[r.type.name for r in contents.kraft_records], kraft_version=contents.kraft_version,
        voters_present=contents.voters_record is not None,
        header_timestamp=contents.header.get("LastContainedLogTimestamp"),
        digest=_digest(_values(contents.metadata_records)))
    return _Read(summary=summary, contents=contents, append_time=first.max_timestamp)


def _problem(exc: KafkaFormatError, path: Path) -> Problem:
    detail = ""
    if exc.expected is not None or exc.found is not None:
        detail = f" (expected {exc.expected}, found {exc.found})"
    return Problem(message=exc.message + detail, file=exc.path or str(path), position=exc.position)


def _node_id(log_dir: Path) -> int | None:
    from migration.formats.meta_properties import MetaProperties

    try:
        return MetaProperties.read(log_dir / names.META_PROPERTIES_FILE).node_id
    except (OSError, KafkaFormatError, ValueError):
        return None


def metadata_log_dir_of(path: str | os.PathLike[str]) -> Path:
    """The metadata log dir for a path naming it or its ``__cluster_metadata-0``."""
    p = Path(path).resolve()
    return p.parent if p.name == names.METADATA_PARTITION_DIR else p


def _single_batch_size(values: list[bytes]) -> int:
    # The controller commits the bootstrap records as one atomic batch (KIP-1170): their
    # encoded size in one batch must not exceed KRaft's maximum batch size.
    return RECORD_BATCH_OVERHEAD + sum(len(encode_record(i, 0, None, v)) for i, v in enumerate(values))


def _inspect(metadata_log_dir: str | os.PathLike[str]) -> tuple[UnifyState, _Read | None, _Read | None]:
    d = metadata_log_dir_of(metadata_log_dir)
    mdir = d / names.METADATA_PARTITION_DIR
    state = UnifyState(log_dir=str(d), metadata_partition_dir=str(mdir), node_id=_node_id(d), case="error",
                       description="")
    boot_path = d / names.BOOTSTRAP_CHECKPOINT_FILE
    zero_path = mdir / names.ZERO_CHECKPOINT_FILE
    boot: _Read | None = None
    zero: _Read | None = None
    if boot_path.is_file():
        try:
            boot = _read(boot_path)
        except KafkaFormatError as exc:
            state.errors.append(_problem(exc, boot_path))
        except OSError as exc:
            state.errors.append(Problem(message=str(exc), file=str(boot_path)))
    if zero_path.is_file():
        try:
            zero = _read(zero_path)
        except KafkaFormatError as exc:
            state.errors.append(_problem(exc, zero_path))
        except OSError as exc:
            state.errors.append(Problem(message=str(exc), file=str(zero_path)))
    if mdir.is_dir():
        for e in sorted(os.scandir(mdir), key=lambda e: e.name):
            if names.CHECKPOINT_FILE_SUFFIX not in e.name:
                if e.name.endswith(names.LOG_FILE_SUFFIX):
                    state.log_segments += 1
                continue
            try:
                cn = names.parse_checkpoint_file_name(e.name)
            except KafkaFormatError:
                continue
            if cn.state is names.CheckpointState.PARTIAL:
                state.partial_snapshots.append(e.name)
            elif cn.state is names.CheckpointState.COMPLETE and (cn.end_offset, cn.epoch) != (0, 0):
                state.later_snapshots.append(e.name)
    state.bootstrap = boot.summary if boot else None
    state.zero_checkpoint = zero.summary if zero else None
    if zero:
        state.zero_records = zero.summary.metadata_records
        state.kraft_version = zero.summary.kraft_version
        state.voters_present = zero.summary.voters_present
    if boot:
        state.bootstrap_records = boot.summary.metadata_records
        state.bootstrap_digest = boot.summary.digest
        mv = boot.summary.features.get(METADATA_VERSION_FEATURE)
        state.metadata_version_level = mv
        state.metadata_version = None if mv is None else metadata_version_name(mv)
        values = _values(boot.contents.metadata_records)
        state.bootstrap_batch_bytes = _single_batch_size(values)
        if boot.contents.kraft_records:
            state.errors.append(Problem(message="bootstrap.checkpoint holds KRaft control records "
                                        f"({', '.join(boot.summary.kraft_records)}): not a bootstrap file Kafka "
                                        "can read", file=str(boot_path)))
        if not values:
            state.errors.append(Problem(message="bootstrap.checkpoint holds no metadata records",
                                        file=str(boot_path)))
    _classify(state, boot, zero, boot_path, zero_path)
    if state.errors:
        state.case = "error"
    state.description = CASE_DESCRIPTIONS[state.case]
    return state, boot, zero


def _classify(state: UnifyState, boot: _Read | None, zero: _Read | None, boot_path: Path, zero_path: Path) -> None:
    boot_exists = boot_path.is_file()
    zero_exists = zero_path.is_file()
    zero_has_records = zero is not None and zero.summary.metadata_records > 0
    if boot_exists:
        if zero_has_records:
            state.case = 4
            assert boot is not None or state.errors
            state.records_match = boot is not None and zero is not None and boot.summary.digest == zero.summary.digest
            if not state.records_match:
                state.warnings.append("both bootstrap.checkpoint and the zero checkpoint hold metadata records and "
                                      "they differ: the zero checkpoint wins (KIP-1170)")
            return
        if zero_exists:
            state.case = 1
        elif state.later_snapshots:
            state.case = 5
            return
        else:
            state.case = 2
            if state.log_segments:
                state.warnings.append("no zero checkpoint but the metadata log has segments: the bootstrap records "
                                      "were presumably committed already; the zero checkpoint only restates them")
        _check_writable(state)
        return
    if zero_has_records:
        state.case = 3
    elif state.later_snapshots:
        state.case = 5  # nothing left to retire
    elif not state.errors:
        state.errors.append(Problem(message="no bootstrap.checkpoint and no zero checkpoint holding metadata "
                                    "records: no bootstrap metadata to unify", file=state.log_dir))


def _check_writable(state: UnifyState) -> None:
    """Gates before the bootstrap records are written into the zero checkpoint."""
    boot = state.bootstrap
    if boot is None:
        return
    mv = state.metadata_version_level
    if mv is None:
        state.errors.append(Problem(message="bootstrap.checkpoint has no metadata.version FeatureLevelRecord",
                                    file=boot.path))
    elif mv < MV_3_3_IV3:
        state.errors.append(Problem(message=f"metadata.version {metadata_version_name(mv)} (feature level {mv}) is "
                                    "below 3.3-IV3 (level 7): newer servers fail on such bootstrap metadata "
                                    "(KAFKA-19192); upgrade the cluster's metadata.version first", file=boot.path))
    size = state.bootstrap_batch_bytes or 0
    if size > KRAFT_MAX_BATCH_BYTES:
        state.errors.append(Problem(message=f"the bootstrap records need {size} bytes as one batch, above KRaft's "
                                    f"maximum batch size of {KRAFT_MAX_BATCH_BYTES} bytes (KIP-1170 8 MB limit)",
                                    file=boot.path))


def detect_state(metadata_log_dir: str | os.PathLike[str]) -> UnifyState:
    """What the dir holds and which case (1-5, or "error") applies; reads, never writes."""
    return _inspect(metadata_log_dir)[0]


# ---------------------------------------------------------------- writing


def _backup_dir(backup_root: Path, log_dir: Path, node_id: int | None) -> Path:
    key = hashlib.blake2b(str(log_dir).encode(), digest_size=6).hexdigest()
    return backup_root / BACKUP_SUBDIR / f"node-{node_id if node_id is not None else 'unknown'}-{key}"


def _mkdirs(path: Path) -> None:
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(parents=True, exist_ok=True)
    for p in reversed(missing):
        fsync_dir(p.parent)  # the new entry survives a crash


def _backup_file(src: Path, dest: Path) -> Path:
    """Copy ``src`` to ``dest`` durably and verify it; never overwrite a different backup."""
    data = src.read_bytes()
    if dest.exists() and dest.read_bytes() != data:
        dest = dest.with_name(f"{dest.name}.{hashlib.blake2b(data, digest_size=6).hexdigest()}")
    if not dest.exists() or dest.read_bytes() != data:
        _mkdirs(dest.parent)
        atomic_write(dest, data, tmp_suffix=".tmp")
    if dest.read_bytes() != data:
        raise OSError(f"backup {dest} does not read back as {src}")
    return dest


def _retire(path: Path, dest: Path) -> Path:
    """Move ``path`` to the backup root: durable verified copy first, then unlink."""
    kept = _backup_file(path, dest)
    fault_point("bootstrap-backed-up")
    path.unlink()
    fsync_dir(path.parent)
    fault_point("bootstrap-retired")
    return kept


def _remove_partial_zero(mdir: Path) -> list[str]:
    """Delete partial zero checkpoints (ours, from an interrupted run): Kafka deletes them at
    startup anyway, and none is ever a complete file."""
    removed = []
    if not mdir.is_dir():
        return removed
    prefix = names.ZERO_CHECKPOINT_FILE[: -len(names.CHECKPOINT_FILE_SUFFIX)]
    for e in os.scandir(mdir):
        if e.name.startswith(prefix) and e.name.endswith(names.PARTIAL_CHECKPOINT_SUFFIX):
            os.unlink(e.path)
            removed.append(e.name)
    if removed:
        fsync_dir(mdir)
    return removed


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view):]


def _write_zero(mdir: Path, data: bytes) -> Path:
    """As Kafka's FileRawSnapshotWriter: ``<id>-<random>.checkpoint.part``, fsync, read-only,
    atomic rename over the final name, fsync the dir."""
    final = mdir / names.ZERO_CHECKPOINT_FILE
    part = mdir / (f"{names.ZERO_CHECKPOINT_FILE[: -len(names.CHECKPOINT_FILE_SUFFIX)]}-"
                   f"{random.randrange(10**18)}{names.PARTIAL_CHECKPOINT_SUFFIX}")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            half = len(data) // 2
            _write_all(fd, memoryview(data)[:half])
            if faults_armed("zero-part-partial"):
                os.fsync(fd)  # the half-written file is what a kill mid-write leaves on disk
            fault_point("zero-part-partial")
            _write_all(fd, memoryview(data)[half:])
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(part, 0o444)
        fault_point("zero-part-written")
        os.replace(part, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)
        raise
    fsync_dir(mdir)
    fault_point("zero-renamed")
    return final


def _build_zero(boot: _Read, zero: _Read | None) -> bytes:
    """The unified zero checkpoint, derived from the inputs only (a re-run builds the same bytes)."""
    kraft: list[KRaftControlRecord] = list(zero.contents.kraft_records) if zero else []
    if zero is not None:
        header_ts = int(zero.contents.header.get("LastContainedLogTimestamp", 0))
        append_time = zero.append_time
    else:
        # kafka-storage stamps the header with the formatting time: the bootstrap file's write time.
        header_ts = append_time = boot.append_time
    return build_checkpoint(_values(boot.contents.metadata_records), header_timestamp=header_ts,
                            append_time=append_time, kraft_records=kraft, epoch=0)


def _check_zero(data: bytes, path: Path, expected_digest: str, kraft: list[KRaftControlRecord]) -> list[str]:
    """Problems of a unified zero checkpoint's bytes: decode, records, KRaft records, batches."""
    problems: list[str] = []
    try:
        contents = read_checkpoint(data, path=path)
    except KafkaFormatError as exc:
        return [str(exc)]
    digest = _digest(_values(contents.metadata_records))
    if digest != expected_digest:
        problems.append(f"{path}: metadata records digest {digest} differs from the bootstrap records' "
                        f"{expected_digest}")
    if [(r.type, r.value) for r in contents.kraft_records] != [(r.type, r.value) for r in kraft]:
        problems.append(f"{path}: KRaft control records differ from the previous zero checkpoint's")
    if contents.epochs != {0}:
        problems.append(f"{path}: batch epochs {sorted(contents.epochs)}, expected only 0")
    for b in iterate_batches(data, path=str(path), strict=True):
        if b.size_in_bytes > KRAFT_MAX_BATCH_BYTES:
            problems.append(f"{path} @ byte {b.position}: batch of {b.size_in_bytes} bytes above 8 MiB")
    return problems


def _validate_file(path: Path) -> list[str]:
    from migration.logdir.kraft_validate import validate_checkpoint_file
    from migration.logdir.validate import ValidationResult

    res = validate_checkpoint_file(path, result=ValidationResult())
    return [str(f) for f in res.problems]


# ---------------------------------------------------------------- units


def _unit_result(state: UnifyState, status: UnitStatus, *, duration: float, **kw: Any) -> UnitResult:
    return UnitResult(unit=names.METADATA_PARTITION_DIR, unit_type=UnitType.METADATA_LOG_DIR, path=state.log_dir,
                      status=status, duration_s=duration, **kw)


def _finding(p: Problem | str) -> Finding:
    if isinstance(p, Problem):
        return Finding(message=p.message, file=p.file, position=p.position)
    return Finding(message=p)


def run_unit(unit: Unit, options: dict[str, Any] | UnifyOptions) -> dict[str, Any]:
    """Unify one metadata log dir (or retire one stray copy); idempotent, safe to re-run."""
    opts = options if isinstance(options, UnifyOptions) else UnifyOptions.model_validate(options)
    if unit.params.get("role") == "stray":
        return _run_stray(unit, opts)
    started = time.monotonic()
    log_dir = metadata_log_dir_of(unit.path)
    if is_locked(log_dir, job_owner_pid=opts.lock_owner_pid):
        state = detect_state(log_dir)
        msg = f"{log_dir}: a live controller holds the log dir lock; nothing changed"
        return _result(state, _unit_result(state, UnitStatus.REFUSED, duration=time.monotonic() - started,
                                           errors=[Finding(message=msg, file=str(log_dir))]), error=msg)
    if opts.dry_run:
        state = detect_state(log_dir)
        return _planned(state, started)
    with _holding_lock(log_dir, opts) as held:
        if not held:
            state = detect_state(log_dir)
            msg = f"{log_dir}: the log dir lock was taken by another process; nothing changed"
            return _result(state, _unit_result(state, UnitStatus.REFUSED, duration=time.monotonic() - started,
                                               errors=[Finding(message=msg, file=str(log_dir))]), error=msg)
        return _unify_locked(log_dir, opts, started)


@contextlib.contextmanager
def _holding_lock(log_dir: Path, opts: UnifyOptions) -> Iterator[bool]:
    """Hold the log dir's ``.lock`` while working; when this process (a job runner holding it
    for its units) or this job's driver holds it already, the hold is shared and its release
    leaves their lock in place (see :class:`LogDirLock`)."""
    lock = LogDirLock(log_dir, job_owner_pid=opts.lock_owner_pid,
                      holder={"run_id": opts.run_id, "run_kind": "unify-bootstrap"})
    if not lock.acquire():
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def _result(state: UnifyState, ur: UnitResult, **extra: Any) -> dict[str, Any]:
    return {"status": ur.status.value, "broker_id": state.node_id if state.node_id is not None else -1,
            "log_dir": state.log_dir, "case": state.case, "state": state.model_dump(mode="json"),
            "unit_result": ur.model_dump(mode="json"), **extra}


def _planned(state: UnifyState, started: float) -> dict[str, Any]:
    dur = time.monotonic() - started
    if state.case == "error":
        return _result(state, _unit_result(state, UnitStatus.FAILED, duration=dur,
                                           errors=[_finding(p) for p in state.errors]),
                       error="; ".join(map(str, state.errors)))
    boot, zero = state.bootstrap, state.zero_checkpoint
    kw: dict[str, Any] = {"warnings": [_finding(w) for w in state.warnings]}
    if boot:
        kw.update(input_format=FORMAT_BOOTSTRAP, records_before=boot.metadata_records, bytes_before=boot.size,
                  digest_before=boot.digest)
    elif zero:
        kw.update(input_format=FORMAT_ZERO, records_before=zero.metadata_records, bytes_before=zero.size,
                  digest_before=zero.digest)
    return _result(state, _unit_result(state, UnitStatus.PLANNED, duration=dur, **kw), dry_run=True)


def _unify_locked(log_dir: Path, opts: UnifyOptions, started: float) -> dict[str, Any]:
    mdir = log_dir / names.METADATA_PARTITION_DIR
    removed = _remove_partial_zero(mdir)
    state, boot, zero = _inspect(log_dir)
    backup = _backup_dir(opts.resolved_backup_root(), log_dir, state.node_id)
    actions: list[str] = [f"deleted partial {n}" for n in removed]
    warnings = [_finding(w) for w in state.warnings]

    def done(status: UnitStatus, **kw: Any) -> dict[str, Any]:
        ur = _unit_result(state, status, duration=time.monotonic() - started, warnings=warnings, **kw)
        log.info("%s: case %s: %s (%s)", log_dir, state.case, status.value, "; ".join(actions) or "no change")
        return _result(state, ur, actions=actions, backup_dir=str(backup))

    if state.case == "error":
        return done(UnitStatus.FAILED, errors=[_finding(p) for p in state.errors],
                    input_format=FORMAT_BOOTSTRAP if state.bootstrap else None)
    boot_path = log_dir / names.BOOTSTRAP_CHECKPOINT_FILE
    zero_path = mdir / names.ZERO_CHECKPOINT_FILE
    if state.case in (1, 2):
        assert boot is not None
        expected = boot.summary.digest
        kraft = list(zero.contents.kraft_records) if zero else []
        data = _build_zero(boot, zero)
        problems = _check_zero(data, zero_path, expected, kraft)
        if problems:
            return done(UnitStatus.FAILED, errors=[_finding(p) for p in problems], input_format=FORMAT_BOOTSTRAP)
        old_bytes = None
        if zero is not None:
            old_bytes = zero_path.read_bytes()
            kept = _backup_file(zero_path, backup / names.METADATA_PARTITION_DIR / names.ZERO_CHECKPOINT_FILE)
            actions.append(f"kept the previous zero checkpoint as {kept}")
            fault_point("zero-backed-up")
        if not mdir.is_dir():
            # A static quorum that never started has no metadata partition yet; kafka-storage
            # format (KIP-1170) creates it with the zero checkpoint.
            _mkdirs(mdir)
            actions.append(f"created {mdir}")
        _write_zero(mdir, data)
        actions.append(f"wrote {zero_path} ({len(data)} bytes)")
        written = zero_path.read_bytes()
        problems = [] if written == data else [f"{zero_path}: does not read back as written"]
        problems += _check_zero(written, zero_path, expected, kraft) + _validate_file(zero_path)
        if problems:
            # Put the previous state back; bootstrap.checkpoint was never touched.
            if old_bytes is not None:
                _write_zero(mdir, old_bytes)
                actions.append("restored the previous zero checkpoint")
            else:
                zero_path.unlink()
                fsync_dir(mdir)
                actions.append("removed the unverified zero checkpoint")
            return done(UnitStatus.FAILED, errors=[_finding(p) for p in problems], input_format=FORMAT_BOOTSTRAP)
        kept = _retire(boot_path, backup / names.BOOTSTRAP_CHECKPOINT_FILE)
        actions.append(f"retired bootstrap.checkpoint to {kept}")
        return done(UnitStatus.OK, input_format=FORMAT_BOOTSTRAP, output_format=FORMAT_ZERO,
                    records_before=boot.summary.metadata_records, records_after=boot.summary.metadata_records,
                    bytes_before=boot.summary.size, bytes_after=len(data), digest_before=expected,
                    digest_after=_digest(_values(read_checkpoint(written, path=zero_path).metadata_records)))
    if state.case == 3:
        assert zero is not None
        return done(UnitStatus.SKIPPED, input_format=FORMAT_ZERO, output_format=FORMAT_ZERO,
                    records_before=zero.summary.metadata_records, records_after=zero.summary.metadata_records,
                    bytes_before=zero.summary.size, bytes_after=zero.summary.size, digest_before=zero.summary.digest,
                    digest_after=zero.summary.digest)
    if state.case == 4:
        assert zero is not None and boot is not None
        kept = _retire(boot_path, backup / names.BOOTSTRAP_CHECKPOINT_FILE)
        actions.append(f"retired bootstrap.checkpoint to {kept}")
        if state.records_match:
            # A re-run after a crash between the rename and the retirement: same records.
            return done(UnitStatus.OK, input_format=FORMAT_BOOTSTRAP, output_format=FORMAT_ZERO,
                        records_before=boot.summary.metadata_records, records_after=zero.summary.metadata_records,
                        bytes_before=boot.summary.size, bytes_after=zero.summary.size,
                        digest_before=boot.summary.digest, digest_after=zero.summary.digest)
        warnings.append(Finding(message=f"bootstrap.checkpoint held {boot.summary.metadata_records} other metadata "
                                f"records (digest {boot.summary.digest}); kept at {kept}", file=str(boot_path)))
        # The zero checkpoint is what the controller uses, before and after: its digest is the proof.
        return done(UnitStatus.OK, input_format=FORMAT_ZERO, output_format=FORMAT_ZERO,
                    records_before=zero.summary.metadata_records, records_after=zero.summary.metadata_records,
                    bytes_before=zero.summary.size, bytes_after=zero.summary.size, digest_before=zero.summary.digest,
                    digest_after=zero.summary.digest)
    # case 5
    if boot is None:
        return done(UnitStatus.SKIPPED, input_format=FORMAT_LOG, output_format=FORMAT_LOG)
    kept = _retire(boot_path, backup / names.BOOTSTRAP_CHECKPOINT_FILE)
    actions.append(f"retired bootstrap.checkpoint to {kept}")
    return done(UnitStatus.OK, input_format=FORMAT_BOOTSTRAP, output_format=FORMAT_LOG,
                records_before=boot.summary.metadata_records, bytes_before=boot.summary.size,
                digest_before=boot.summary.digest)


def stray_summary(log_dir: str | os.PathLike[str]) -> StraySummary:
    d = Path(log_dir).resolve()
    p = d / names.BOOTSTRAP_CHECKPOINT_FILE
    s = StraySummary(log_dir=str(d), node_id=_node_id(d), present=p.is_file())
    if s.present:
        s.size = p.stat().st_size
        try:
            r = _read(p)
            s.metadata_records, s.digest = r.summary.metadata_records, r.summary.digest
        except KafkaFormatError as exc:
            s.problem = _problem(exc, p)
    return s


def _run_stray(unit: Unit, opts: UnifyOptions) -> dict[str, Any]:
    """A broker-only log dir's copy of bootstrap.checkpoint: nothing reads it; retire it when asked."""
    started = time.monotonic()
    d = Path(unit.path).resolve()
    s = stray_summary(d)
    base = {"broker_id": s.node_id if s.node_id is not None else -1, "log_dir": str(d), "role": "stray",
            "stray": s.model_dump(mode="json")}

    def done(status: UnitStatus, **kw: Any) -> dict[str, Any]:
        ur = UnitResult(unit=names.BOOTSTRAP_CHECKPOINT_FILE, unit_type=UnitType.FILE,
                        path=str(d / names.BOOTSTRAP_CHECKPOINT_FILE), status=status,
                        duration_s=time.monotonic() - started, input_format=FORMAT_BOOTSTRAP,
                        records_before=s.metadata_records, bytes_before=s.size if s.present else None,
                        digest_before=s.digest, **kw)
        return {"status": status.value, **base, "unit_result": ur.model_dump(mode="json")}

    warnings = [] if s.problem is None else [_finding(s.problem)]
    if (d / names.METADATA_PARTITION_DIR).exists():
        return done(UnitStatus.FAILED, errors=[Finding(message="this log dir holds the metadata partition: its "
                                                       "bootstrap.checkpoint is not a stray; unify it instead",
                                                       file=str(d))])
    if not s.present:
        return done(UnitStatus.SKIPPED)
    if opts.dry_run or not opts.retire_stray:
        warnings.append(Finding(message="stray bootstrap.checkpoint copy of a broker-only node (pass "
                                "--retire-stray to retire it)", file=str(d / names.BOOTSTRAP_CHECKPOINT_FILE)))
        return done(UnitStatus.PLANNED if opts.dry_run else UnitStatus.SKIPPED, warnings=warnings)
    if is_locked(d, job_owner_pid=opts.lock_owner_pid):
        return done(UnitStatus.REFUSED, errors=[Finding(message="a live broker holds the log dir lock",
                                                        file=str(d))])
    with _holding_lock(d, opts) as held:
        if not held:
            return done(UnitStatus.REFUSED, errors=[Finding(message="the log dir lock was taken by another process",
                                                            file=str(d))])
        kept = _retire(d / names.BOOTSTRAP_CHECKPOINT_FILE,
                       _backup_dir(opts.resolved_backup_root(), d, s.node_id) / names.BOOTSTRAP_CHECKPOINT_FILE)
    base["actions"] = [f"retired stray bootstrap.checkpoint to {kept}"]
    return done(UnitStatus.OK, output_format=FORMAT_RETIRED, warnings=warnings)


# ---------------------------------------------------------------- verify


def verify_unified(metadata_log_dir: str | os.PathLike[str], expected_digest: str | None) -> list[str]:
    """Problems left after unification (empty when done): the zero checkpoint decodes and holds
    exactly the records digested as ``expected_digest`` (None: the log moved on, case 5), passes
    the KIP-630 checks, and bootstrap.checkpoint is gone from the dir."""
    d = metadata_log_dir_of(metadata_log_dir)
    mdir = d / names.METADATA_PARTITION_DIR
    zero_path = mdir / names.ZERO_CHECKPOINT_FILE
    problems: list[str] = []
    if (d / names.BOOTSTRAP_CHECKPOINT_FILE).exists():
        problems.append(f"{d / names.BOOTSTRAP_CHECKPOINT_FILE}: still present")
    if zero_path.is_file():
        data = zero_path.read_bytes()
        try:
            contents = read_checkpoint(data, path=zero_path)
        except KafkaFormatError as exc:
            return [*problems, str(exc)]
        if expected_digest is not None:
            digest = _digest(_values(contents.metadata_records))
            if digest != expected_digest:
                problems.append(f"{zero_path}: metadata records digest {digest}, expected {expected_digest}")
        for b in iterate_batches(data, path=str(zero_path), strict=True):
            if b.size_in_bytes > KRAFT_MAX_BATCH_BYTES:
                problems.append(f"{zero_path} @ byte {b.position}: batch above 8 MiB")
        problems += _validate_file(zero_path)
    elif expected_digest is not None:
        problems.append(f"{zero_path}: missing")
    partial = [e.name for e in os.scandir(mdir) if e.name.endswith(names.PARTIAL_CHECKPOINT_SUFFIX)] \
        if mdir.is_dir() else []
    if partial:
        problems.append(f"{mdir}: partial snapshot files left: {', '.join(sorted(partial))}")
    return problems


# ---------------------------------------------------------------- driver


def prepare_unify(metadata_log_dirs: list[str | os.PathLike[str]], *, run_id: str,
                  options: UnifyOptions | None = None) -> RunDir:
    """Safety gates (live lock, backup root), detected states, one unit per dir -> run dir.
    Raises :class:`Refused` (exit 3) and then writes nothing into any log dir."""
    opts = options or UnifyOptions()
    dirs = [metadata_log_dir_of(d) for d in metadata_log_dirs]
    strays = [Path(s).resolve() for s in opts.stray_log_dirs]
    backup_root = opts.resolved_backup_root()
    opts = opts.model_copy(update={"backup_root": str(backup_root), "run_id": run_id})
    all_dirs: list[str | os.PathLike[str]] = [*dirs, *strays]
    warnings: list[str] = check_not_live(all_dirs, run_id=run_id)
    check_backup_root(backup_root, all_dirs)
    units: list[Unit] = []
    states: list[dict[str, Any]] = []
    for d in dirs:
        st = detect_state(d)
        states.append(st.model_dump(mode="json"))
        warnings += [f"{d}: {w}" for w in st.warnings]
        units.append(Unit(kind=UNIT_KIND, id=f"{UNIT_KIND}:{d}", broker_id=st.node_id if st.node_id is not None
                          else -1, log_dir=str(d), path=str(d), topic=names.METADATA_TOPIC, partition=0,
                          size=st.bootstrap.size if st.bootstrap else 0, params={"role": "metadata"}))
    stray_states = []
    for s in strays:
        ss = stray_summary(s)
        stray_states.append(ss.model_dump(mode="json"))
        units.append(Unit(kind=UNIT_KIND, id=f"{UNIT_KIND}:stray:{s}", broker_id=ss.node_id if ss.node_id is not
                          None else -1, log_dir=str(s), path=str(s), size=ss.size, params={"role": "stray"}))
    rd = RunDir(run_id)
    rd.write_job(units, opts.model_dump(mode="json"))
    rd.write_prepare({"run_id": run_id, "kind": RunKind.UNIFY_BOOTSTRAP.value, "started_at": utcnow().isoformat(),
                      "options": opts.model_dump(mode="json"), "metadata_log_dirs": [str(d) for d in dirs],
                      "states": states, "strays": stray_states, "warnings": warnings})
    return rd


def _report_params(prepare: dict[str, Any]) -> dict[str, Any]:
    opts = prepare.get("options", {})
    return {"metadata_log_dirs": prepare.get("metadata_log_dirs", []), "engine": prepare.get("engine"),
            "dry_run": opts.get("dry_run", False), "backup_root": opts.get("backup_root"),
            "retire_stray": opts.get("retire_stray", False), "stray_log_dirs": opts.get("stray_log_dirs", [])}


def finalize_unify(run_id: str, *, save: bool = True) -> RunReport:
    """Results -> verified run report (saved in the report store)."""
    from datetime import datetime

    rd = RunDir(run_id)
    units, _ = rd.read_job()
    prepare = rd.read_prepare()
    by_id = {r.get("unit_id"): r for r in rd.read_results()}
    started = datetime.fromisoformat(prepare["started_at"]) if "started_at" in prepare else None
    report = RunReport.start(RunKind.UNIFY_BOOTSTRAP, _report_params(prepare), run_id=run_id, now=started)
    for w in prepare.get("warnings", []):
        report.warn(w)
    dry_run = bool(prepare.get("options", {}).get("dry_run"))
    for u in units:
        r = by_id.get(u.id)
        stray = u.params.get("role") == "stray"
        if r is None or "unit_result" not in r:
            msg = "no result" if r is None else str(r.get("error", "unit failed"))
            ur = UnitResult(unit=names.BOOTSTRAP_CHECKPOINT_FILE if stray else names.METADATA_PARTITION_DIR,
                            unit_type=UnitType.FILE if stray else UnitType.METADATA_LOG_DIR, path=u.path,
                            status=UnitStatus.FAILED, errors=[Finding(message=msg, file=u.path)])
            broker = u.broker_id
        else:
            ur = UnitResult.model_validate(r["unit_result"])
            broker = int(r.get("broker_id", u.broker_id))
            if not stray and not dry_run and ur.status is UnitStatus.OK:
                # The proof: decode what is on disk now and compare with the digest taken before.
                expected = ur.digest_after if ur.output_format == FORMAT_ZERO else None
                ur.errors = ur.errors + [Finding(message=p, file=u.path) for p in verify_unified(u.path, expected)]
        topic = names.BOOTSTRAP_CHECKPOINT_FILE if stray else names.METADATA_TOPIC
        report.add_unit(broker, topic, 0, ur)
    report.finish()
    if save:
        from migration.audit.store import ReportStore

        ReportStore().save(report)
    return report


def execute_unify(metadata_log_dirs: list[str | os.PathLike[str]], *, options: UnifyOptions | None = None,
                  engine: str = "inline", run_id: str | None = None, master: str | None = None,
                  spark: Any = None, progress: Progress | None = None) -> RunReport:
    """prepare -> run units on the engine -> finalize. A refusal gives a report with exit code 3."""
    opts = options or UnifyOptions()
    rid = run_id or new_run_id(RunKind.UNIFY_BOOTSTRAP)
    try:
        rd = prepare_unify(metadata_log_dirs, run_id=rid, options=opts)
    except Refused as exc:
        log.error("refused: %s", exc)
        report = RunReport.start(RunKind.UNIFY_BOOTSTRAP, {
            "metadata_log_dirs": [str(d) for d in metadata_log_dirs], "engine": engine, "dry_run": opts.dry_run,
            "backup_root": opts.backup_root, "retire_stray": opts.retire_stray,
            "stray_log_dirs": opts.stray_log_dirs}, run_id=rid)
        report.refuse(str(exc))
        report.finish()
        from migration.audit.store import ReportStore

        ReportStore().save(report)
        return report
    prep = rd.read_prepare()
    prep["engine"] = engine
    rd.write_prepare(prep)
    units, job_options = rd.read_job()
    results = get_engine(engine, master=master, spark=spark).run(units, job_options, progress,
                                                                 functions={UNIT_KIND: run_unit})
    rd.write_results(results)
    return finalize_unify(rid)
