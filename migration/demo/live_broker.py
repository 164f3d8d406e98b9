"""A stand-in for a running broker: a process that holds a log dir's ``.lock`` as Kafka does
(a POSIX record lock; Kafka's ``FileLock`` takes it with ``FileChannel.tryLock``) until it is
stopped. ``make demo`` starts one per broker so that the upgrade's prestage runs beside "live"
brokers, and gives the cluster description its commands as each broker's ``stop`` / ``start``.

    python -m migration.demo.live_broker start LOG_DIR [LOG_DIR ...]   # returns once locked (0 when it is already)
    python -m migration.demo.live_broker stop LOG_DIR [LOG_DIR ...]    # returns once released (1: still held)
    python -m migration.demo.live_broker serve LOG_DIR [LOG_DIR ...]   # the holder itself
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from migration.logdir.model import lock_status

PID_FILE = ".demo-broker.pid"  # beside the log dirs, never inside one (Kafka refuses unknown files)
WAIT_S = 30.0


def _pid_file(log_dirs: list[str]) -> Path:
    first = Path(log_dirs[0]).resolve()
    return first.parent / f"{first.name}{PID_FILE}"


def serve(log_dirs: list[str]) -> None:
    # Before "locked" is said: a stop may follow at once, and a SIGTERM that came before the
    # handler would take the default action, or none where the parent ignored SIGTERM (an
    # ignored signal stays ignored across exec), leaving the lock held.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    fds = []
    for d in log_dirs:
        fd = os.open(Path(d) / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fds.append(fd)
    print("locked", flush=True)
    while True:
        time.sleep(3600)


def _running(log_dirs: list[str]) -> int | None:
    """The pid of the stand-in the pid file names when it is alive and holds every lock."""
    pf = _pid_file(log_dirs)
    try:
        pid = int(pf.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return pid if all(lock_status(d).pid == pid for d in log_dirs) else None


def start(log_dirs: list[str]) -> int:
    """Start a stand-in holding the locks; idempotent: a stand-in of this pid file that holds
    them already is left running (a retried start task succeeds)."""
    running = _running(log_dirs)
    if running is not None:
        print(f"broker stand-in {running} already holds the lock of {', '.join(log_dirs)}")
        return 0
    proc = subprocess.Popen([sys.executable, "-m", "migration.demo.live_broker", "serve", *log_dirs],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "locked":
        print(f"could not lock {', '.join(log_dirs)}", file=sys.stderr)
        return 1
    _pid_file(log_dirs).write_text(str(proc.pid))
    print(f"broker stand-in {proc.pid} holds the lock of {', '.join(log_dirs)}")
    return 0


def stop(log_dirs: list[str]) -> int:
    pf = _pid_file(log_dirs)
    if not pf.exists():
        print(f"no broker stand-in runs for {', '.join(log_dirs)}")
        return 0
    pid = int(pf.read_text())
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    # Released when the process is gone (even a zombie no parent reaps holds no lock).
    deadline = time.monotonic() + WAIT_S
    while (held := [d for d in log_dirs if lock_status(d).live]) and time.monotonic() < deadline:
        time.sleep(0.05)
    if held:
        print(f"broker stand-in {pid} was asked to stop, but the lock of {', '.join(held)} is still held after "
              f"{WAIT_S:g} s", file=sys.stderr)
        return 1
    pf.unlink(missing_ok=True)
    print(f"broker stand-in {pid} stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] not in ("start", "stop", "serve"):
        print(__doc__, file=sys.stderr)
        return 2
    command, log_dirs = args[0], args[1:]
    if command == "serve":
        serve(log_dirs)
        return 0
    return start(log_dirs) if command == "start" else stop(log_dirs)


if __name__ == "__main__":
    raise SystemExit(main())
