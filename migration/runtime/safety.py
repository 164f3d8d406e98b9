"""Safety gates every migration passes before it touches a log dir.

- A live broker or controller holds the log dir's ``.lock`` (POSIX record lock): refuse,
  change nothing, exit 3.
- No ``.kafka_cleanshutdown`` marker: the last shutdown was unclean, so segments above the
  recovery point may hold a truncated tail Kafka would cut at startup: refuse unless forced.
- The backup root must lie outside every log dir; on another file system than a log dir, the
  run says that its backups of that log dir are copies.
- A run that was killed while it held a log dir (its lock record is there, the lock is free)
  is named with the commands that resume it or roll it back; when it left work in flight
  (an upgrade), nothing but that resume or rollback may touch the log dir.
While a migration works it holds each log dir's ``.lock`` itself, for the whole run, so a
broker started by mistake fails to lock the dir and refuses to start instead of reading
half-done work, and a second kmigrate process (whatever its state directory) refuses too.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from migration.formats import names
from migration.formats.fileio import durable_unlink
from migration.logdir.model import LockHolder, LogDirLock, lock_status
from migration.runtime.runs import IN_FLIGHT_STATES, journal_states
from migration.settings import device_of, is_inside, runs_dir


class Refused(Exception):
    """The run must not act at all (exit code 3)."""


class RunLock(BaseModel):
    """What a run records with each log dir lock it holds (see :class:`LockHolder`)."""

    run_id: str
    run_kind: str
    resume: str | None = None
    rollback: str | None = None
    blocks_other_runs: bool = False


def interrupted_message(log_dir: str | os.PathLike[str], holder: LockHolder) -> str:
    what = [f"resume it with: {holder.resume}"] if holder.resume else []
    what += [f"roll it back with: {holder.rollback}"] if holder.rollback else []
    return (f"{log_dir}: run {holder.run_id} ({holder.run_kind}) was interrupted: its process {holder.pid} on "
            f"{holder.host} stopped while it held the log dir (started {holder.started_at:%Y-%m-%d %H:%M:%S} UTC)"
            + ("; " + " or ".join(what) if what else ""))


def _work_in_flight(holder: LockHolder) -> bool:
    """Whether a killed run may have left a replacement half done: a unit journal of its run
    that is not in an end state, or no run directory to tell (then assume so)."""
    states = journal_states(runs_dir() / holder.run_id) if holder.run_id else None
    return states is None or any(s in IN_FLIGHT_STATES for s in states)


def check_not_live(log_dirs: Sequence[str | os.PathLike[str]], *, run_id: str | None = None,
                   resolves: str | None = None) -> list[str]:
    """Refuse when a process holds a log dir's lock, or a killed run left work in flight that
    this run (``run_id`` resuming it, or ``resolves``: rolling it back) does not finish.
    Returns warnings naming killed runs that left nothing in flight."""
    problems: list[str] = []
    warnings: list[str] = []
    for d in log_dirs:
        st = lock_status(d)
        if st.live:
            problems.append(st.describe())
        elif (h := st.interrupted) is not None and h.run_id not in (run_id, resolves):
            blocks = h.blocks_other_runs and _work_in_flight(h)
            (problems if blocks else warnings).append(interrupted_message(d, h) + (
                "" if blocks else " (it left no replacement in flight)"))
    if problems:
        raise Refused("; ".join(problems))
    return warnings


def check_clean_shutdown(log_dirs: Sequence[str | os.PathLike[str]], *, force: bool = False) -> list[str]:
    """Return warnings (when forced) or raise Refused for dirs without a clean-shutdown marker."""
    unclean = [str(d) for d in log_dirs if not (Path(d) / names.CLEAN_SHUTDOWN_FILE).exists()]
    if unclean and not force:
        raise Refused(f"last shutdown was unclean (no {names.CLEAN_SHUTDOWN_FILE}) in: {', '.join(unclean)}; "
                      "start and stop the broker cleanly, or pass --force")
    return [f"{d}: unclean shutdown, proceeding because forced" for d in unclean]


def check_backup_root(backup_root: str | os.PathLike[str], log_dirs: Sequence[str | os.PathLike[str]]) -> list[str]:
    """Refuse a backup root inside a log dir (Kafka would refuse to start) or one that cannot be
    created. Returns a warning per log dir on another file system than the root: its originals
    are copied, not hard-linked (docs/operations.md, "Backups")."""
    for d in log_dirs:
        if is_inside(backup_root, d):
            raise Refused(f"backup root {backup_root} lies inside log dir {d}: Kafka would refuse to start")
    root = Path(backup_root)
    existing = next((p for p in (root, *root.parents) if p.exists()), None)
    if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise Refused(f"backup root {backup_root} cannot be created ({existing} is not a writable directory): "
                      "pass --backup-root")
    root_device = device_of(root)
    return [f"{d}: backups are copies, not hard links (slower, and as much space again): backup root "
            f"{backup_root} is on another file system; a --backup-root on the log dir's file system, outside it, "
            "links them" for d in log_dirs if device_of(d) != root_device]


# A job option: files Kafka's log loader removes at startup (a broker's pending deletes), which
# the process that holds the log dirs' locks removes before the job's first unit: never while
# a broker could start, and never before the run is sure to go ahead.
REMOVE_UNDER_LOCK = "remove_under_lock"


def remove_under_lock(options: dict[str, Any]) -> list[Path]:
    """Remove (durably) the job's ``REMOVE_UNDER_LOCK`` files that are still there; the caller
    holds the log dirs' locks. Returns those it removed."""
    return durable_unlink(*options.get(REMOVE_UNDER_LOCK, []))


@contextlib.contextmanager
def holding_locks(log_dirs: Sequence[str | os.PathLike[str]], run: RunLock | None = None) -> Iterator[None]:
    """Hold every log dir's lock for the duration, recording ``run`` with it; refuse if any is
    taken meanwhile."""
    held: list[LogDirLock] = []
    try:
        for d in log_dirs:
            lock = LogDirLock(d, holder=run.model_dump() if run is not None else None)
            if not lock.acquire():
                raise Refused(lock_status(d).describe() if lock_status(d).live
                              else f"{d}: the log dir lock was taken by another process")
            held.append(lock)
        yield
    finally:
        for lock in reversed(held):
            lock.release()
