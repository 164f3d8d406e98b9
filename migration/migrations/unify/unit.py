"""One unit of the unification: a controller's metadata log dir (or a broker-only log dir's stray
``bootstrap.checkpoint`` copy), unified under its log dir lock; idempotent, safe to re-run.

``bootstrap.checkpoint`` is retired (copied to the backup root outside every log dir, fsynced,
verified, then unlinked) only after the new zero checkpoint was written via ``.checkpoint.part``
+ fsync + atomic rename, re-read and validated. A replaced zero checkpoint is backed up first.
A kill at any instant leaves the old or the new complete zero checkpoint plus at most a
``.checkpoint.part`` that Kafka deletes at startup; a re-run completes the work (a re-run that
finds both files holding the same records is case 4 with matching records: it only retires).
The states and their cases: ``state.py``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from migration.audit.model import Finding, UnitResult, UnitStatus, UnitType
from migration.formats import names
from migration.formats.digest import CURRENT_ALGORITHM
from migration.formats.fileio import durable_mkdir, durable_unlink
from migration.formats.kraft_checkpoint import read_checkpoint
from migration.logdir.model import LogDirLock, is_locked
from migration.migrations.unify.backup import backup_dir, backup_file, retire
from migration.migrations.unify.options import UnifyOptions, UnifyUnitParams
from migration.migrations.unify.snapshot import build_zero, remove_partial_zero, write_zero
from migration.migrations.unify.state import (
    FORMAT_BOOTSTRAP,
    FORMAT_LOG,
    FORMAT_RETIRED,
    FORMAT_ZERO,
    Problem,
    UnifyState,
    detect_state,
    inspect_dir,
    metadata_log_dir_of,
    record_values,
    records_digest,
    stray_summary,
)
from migration.migrations.unify.verify import check_zero, validate_file
from migration.runtime.engine import Unit
from migration.runtime.faults import fault_point

log = logging.getLogger(__name__)

UNIT_KIND = "unify-metadata-dir"
# Fault-injection points (``KMIGRATE_FAULT_AT`` rules, runtime/faults.py), in the order run_unit
# passes them (tests SIGKILL the process there).
FAULT_POINTS = (
    "zero-backed-up",  # old zero checkpoint copied to the backup root
    "zero-part-partial",  # half of the new zero checkpoint written to its .checkpoint.part
    "zero-part-written",  # .checkpoint.part complete and fsynced, not yet renamed
    "zero-renamed",  # new zero checkpoint in place, bootstrap.checkpoint untouched
    "bootstrap-backed-up",  # bootstrap.checkpoint copied to the backup root, not yet unlinked
    "bootstrap-retired",  # bootstrap.checkpoint unlinked
)


def _unit_result(state: UnifyState, status: UnitStatus, *, duration: float, **kw: Any) -> UnitResult:
    if kw.get("digest_before") or kw.get("digest_after"):
        # Every digest a unit reports is of a file read now: this kmigrate's algorithm. The
        # finalize verifies the zero checkpoint against digest_after with it (results.json).
        kw.setdefault("digest_algorithm", CURRENT_ALGORITHM)
    return UnitResult(unit=names.METADATA_PARTITION_DIR, unit_type=UnitType.METADATA_LOG_DIR, path=state.log_dir,
                      status=status, duration_s=duration, **kw)


def _finding(p: Problem | str) -> Finding:
    if isinstance(p, Problem):
        return Finding(message=p.message, file=p.file, position=p.position)
    return Finding(message=p)


def run_unit(unit: Unit, options: dict[str, Any] | UnifyOptions) -> dict[str, Any]:
    """Unify one metadata log dir (or retire one stray copy); idempotent, safe to re-run."""
    opts = options if isinstance(options, UnifyOptions) else UnifyOptions.model_validate(options)
    if UnifyUnitParams.model_validate(unit.params).role == "stray":
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
    removed = remove_partial_zero(mdir)
    state, boot, zero = inspect_dir(log_dir)
    backup = backup_dir(opts.resolved_backup_root(), log_dir, state.node_id)
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
        expected, algorithm = boot.summary.digest, boot.summary.digest_algorithm
        kraft = list(zero.contents.kraft_records) if zero else []
        data = build_zero(boot, zero)
        problems = check_zero(data, zero_path, expected, kraft, algorithm=algorithm)
        if problems:
            return done(UnitStatus.FAILED, errors=[_finding(p) for p in problems], input_format=FORMAT_BOOTSTRAP)
        old_bytes = None
        if zero is not None:
            old_bytes = zero_path.read_bytes()
            kept = backup_file(zero_path, backup / names.METADATA_PARTITION_DIR / names.ZERO_CHECKPOINT_FILE)
            actions.append(f"kept the previous zero checkpoint as {kept}")
            fault_point("zero-backed-up")
        if not mdir.is_dir():
            # A static quorum that never started has no metadata partition yet; kafka-storage
            # format (KIP-1170) creates it with the zero checkpoint.
            durable_mkdir(mdir)
            actions.append(f"created {mdir}")
        write_zero(mdir, data)
        actions.append(f"wrote {zero_path} ({len(data)} bytes)")
        written = zero_path.read_bytes()
        problems = [] if written == data else [f"{zero_path}: does not read back as written"]
        problems += check_zero(written, zero_path, expected, kraft, algorithm=algorithm) + validate_file(zero_path)
        if problems:
            # Put the previous state back; bootstrap.checkpoint was never touched.
            if old_bytes is not None:
                write_zero(mdir, old_bytes)
                actions.append("restored the previous zero checkpoint")
            else:
                durable_unlink(zero_path)
                actions.append("removed the unverified zero checkpoint")
            return done(UnitStatus.FAILED, errors=[_finding(p) for p in problems], input_format=FORMAT_BOOTSTRAP)
        kept = retire(boot_path, backup / names.BOOTSTRAP_CHECKPOINT_FILE)
        actions.append(f"retired bootstrap.checkpoint to {kept}")
        return done(UnitStatus.OK, input_format=FORMAT_BOOTSTRAP, output_format=FORMAT_ZERO,
                    records_before=boot.summary.metadata_records, records_after=boot.summary.metadata_records,
                    bytes_before=boot.summary.size, bytes_after=len(data), digest_before=expected,
                    digest_after=records_digest(record_values(read_checkpoint(written, path=zero_path)
                                                              .metadata_records), algorithm),
                    digest_algorithm=algorithm)
    if state.case == 3:
        assert zero is not None
        return done(UnitStatus.SKIPPED, input_format=FORMAT_ZERO, output_format=FORMAT_ZERO,
                    records_before=zero.summary.metadata_records, records_after=zero.summary.metadata_records,
                    bytes_before=zero.summary.size, bytes_after=zero.summary.size, digest_before=zero.summary.digest,
                    digest_after=zero.summary.digest)
    if state.case == 4:
        # KIP-1170 "Compatibility", last state: the controller uses the zero checkpoint's records
        # and logs a WARN; a node deletes bootstrap.checkpoint once it loaded a snapshot holding
        # metadata records. So: keep the zero checkpoint as it is, retire the file, and say so.
        assert zero is not None and boot is not None
        kept = retire(boot_path, backup / names.BOOTSTRAP_CHECKPOINT_FILE)
        actions.append(f"retired bootstrap.checkpoint to {kept}")
        n = boot.summary.metadata_records
        held = f"the same {n}" if state.records_match else f"{n} other"
        warnings.append(Finding(
            message=f"kept the zero checkpoint ({zero.summary.metadata_records} metadata records, digest "
                    f"{zero.summary.digest}); retired bootstrap.checkpoint, which held {held} metadata records "
                    f"(digest {boot.summary.digest}), to {kept}",
            file=str(boot_path)))
        if state.records_match:
            # A re-run after a crash between the rename and the retirement: same records.
            return done(UnitStatus.OK, input_format=FORMAT_BOOTSTRAP, output_format=FORMAT_ZERO,
                        records_before=boot.summary.metadata_records, records_after=zero.summary.metadata_records,
                        bytes_before=boot.summary.size, bytes_after=zero.summary.size,
                        digest_before=boot.summary.digest, digest_after=zero.summary.digest)
        # The zero checkpoint is what the controller uses, before and after: its digest is the proof.
        return done(UnitStatus.OK, input_format=FORMAT_ZERO, output_format=FORMAT_ZERO,
                    records_before=zero.summary.metadata_records, records_after=zero.summary.metadata_records,
                    bytes_before=zero.summary.size, bytes_after=zero.summary.size, digest_before=zero.summary.digest,
                    digest_after=zero.summary.digest)
    # case 5
    if boot is None:
        return done(UnitStatus.SKIPPED, input_format=FORMAT_LOG, output_format=FORMAT_LOG)
    kept = retire(boot_path, backup / names.BOOTSTRAP_CHECKPOINT_FILE)
    actions.append(f"retired bootstrap.checkpoint to {kept}")
    return done(UnitStatus.OK, input_format=FORMAT_BOOTSTRAP, output_format=FORMAT_LOG,
                records_before=boot.summary.metadata_records, bytes_before=boot.summary.size,
                digest_before=boot.summary.digest)


def _run_stray(unit: Unit, opts: UnifyOptions) -> dict[str, Any]:
    """A broker-only log dir's copy of bootstrap.checkpoint: nothing reads it; retire it when asked."""
    started = time.monotonic()
    d = Path(unit.path).resolve()
    s = stray_summary(d)
    base: dict[str, Any] = {"broker_id": s.node_id if s.node_id is not None else -1, "log_dir": str(d),
                            "role": "stray", "stray": s.model_dump(mode="json")}

    def done(status: UnitStatus, **kw: Any) -> dict[str, Any]:
        ur = UnitResult(unit=names.BOOTSTRAP_CHECKPOINT_FILE, unit_type=UnitType.FILE,
                        path=str(d / names.BOOTSTRAP_CHECKPOINT_FILE), status=status,
                        duration_s=time.monotonic() - started, input_format=FORMAT_BOOTSTRAP,
                        records_before=s.metadata_records, bytes_before=s.size if s.present else None,
                        digest_before=s.digest, digest_algorithm=s.digest_algorithm if s.digest else None, **kw)
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
        kept = retire(d / names.BOOTSTRAP_CHECKPOINT_FILE,
                      backup_dir(opts.resolved_backup_root(), d, s.node_id) / names.BOOTSTRAP_CHECKPOINT_FILE)
    base["actions"] = [f"retired stray bootstrap.checkpoint to {kept}"]
    return done(UnitStatus.OK, output_format=FORMAT_RETIRED, warnings=warnings)
