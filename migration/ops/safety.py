"""Safety gates every migration passes before it touches a log dir.

- A live broker or controller holds the log dir's ``.lock`` (POSIX record lock): refuse,
  change nothing, exit 3.
- No ``.kafka_cleanshutdown`` marker: the last shutdown was unclean, so segments above the
  recovery point may hold a truncated tail Kafka would cut at startup: refuse unless forced.
- The backup root must lie outside every log dir.
While a migration works it holds each log dir's ``.lock`` itself, so a broker started by
mistake fails to lock the dir and refuses to start instead of reading half-done work.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ..formats import names
from ..logdir import LogDirLock, is_locked
from ..paths import is_inside


class Refused(Exception):
    """The run must not act at all (exit code 3)."""


def check_not_live(log_dirs: list[str | os.PathLike[str]]) -> None:
    live = [str(d) for d in log_dirs if is_locked(d)]
    if live:
        raise Refused(f"a live broker or controller holds the lock of: {', '.join(live)}; stop it first")


def check_clean_shutdown(log_dirs: list[str | os.PathLike[str]], *, force: bool = False) -> list[str]:
    """Return warnings (when forced) or raise Refused for dirs without a clean-shutdown marker."""
    unclean = [str(d) for d in log_dirs if not (Path(d) / names.CLEAN_SHUTDOWN_FILE).exists()]
    if unclean and not force:
        raise Refused(f"last shutdown was unclean (no {names.CLEAN_SHUTDOWN_FILE}) in: {', '.join(unclean)}; "
                      "start and stop the broker cleanly, or pass --force")
    return [f"{d}: unclean shutdown, proceeding because forced" for d in unclean]


def check_backup_root(backup_root: str | os.PathLike[str], log_dirs: list[str | os.PathLike[str]]) -> None:
    for d in log_dirs:
        if is_inside(backup_root, d):
            raise Refused(f"backup root {backup_root} lies inside log dir {d}: Kafka would refuse to start")


@contextlib.contextmanager
def holding_locks(log_dirs: list[str | os.PathLike[str]]) -> Iterator[None]:
    """Hold every log dir's lock for the duration; refuse if any is taken meanwhile."""
    held: list[LogDirLock] = []
    try:
        for d in log_dirs:
            lock = LogDirLock(d)
            if not lock.acquire():
                raise Refused(f"{d}: the log dir lock was taken by another process")
            held.append(lock)
        yield
    finally:
        for lock in reversed(held):
            lock.release()
