"""A real PostgreSQL server for tests: ``initdb`` into a temporary directory and ``postgres`` in a
subprocess listening on a Unix socket only (no TCP port to race for), trust authentication and
fsync off (throwaway data), one fresh database per test.

PostgreSQL refuses to run as root: under root the server runs as the ``postgres`` system user
(Debian's packages create it). The server gets SIGINT (a fast shutdown) if the test process
dies, so a killed test run leaves no server behind; directories of earlier killed runs are
removed when the next one starts.
"""

from __future__ import annotations

import ctypes
import glob
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

DIR_PREFIX = "kmigrate-pg-"
PORT = 5432  # names the socket file only: nothing listens on TCP
_PR_SET_PDEATHSIG = 1


class PostgresUnavailable(Exception):
    """No PostgreSQL server binaries, or no user to run them as."""


def find_bin_dir() -> Path | None:
    """The directory holding ``initdb``, ``postgres`` and ``pg_ctl``: PATH first, else the
    newest of Debian's versioned directories."""
    candidates: list[Path] = []
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(os.path.realpath(found)).parent)

    def version(d: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", Path(d).parent.name))

    candidates += [Path(d) for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)]
    for d in candidates:
        if all((d / exe).exists() for exe in ("initdb", "postgres", "pg_ctl")):
            return d
    return None


def _die_with_parent() -> None:
    # Linux: the server gets SIGINT (fast shutdown) when the test process goes away.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGINT)


def remove_stale_dirs() -> None:
    """Directories of earlier runs whose server is gone (the run was killed)."""
    for d in Path(tempfile.gettempdir()).glob(DIR_PREFIX + "*"):
        pid_file = d / "pg" / "data" / "postmaster.pid"
        try:
            pid = int(pid_file.read_text().split()[0]) if pid_file.exists() else None
            if pid is not None:
                os.kill(pid, 0)
                continue  # still running: another test session's
        except (ProcessLookupError, ValueError, IndexError):
            pass
        except PermissionError:
            continue
        shutil.rmtree(d, ignore_errors=True)


class PostgresServer:
    """``root`` must be reachable by the ``postgres`` user when running as root (a fresh
    directory under /tmp is: pytest's own temporary root is private to root)."""

    def __init__(self, root: Path, bin_dir: Path) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.data = root / "data"
        self.log_path = root / "postgres.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._databases = 0
        self._as: dict[str, object] = {}
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise PostgresUnavailable("running as root and no 'postgres' user to run PostgreSQL as") from None
            self._as = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
            self._owner = (pw.pw_uid, pw.pw_gid)

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, capture_output=True, text=True, **self._as)  # type: ignore[call-overload]

    def start(self, timeout: float = 30.0) -> None:
        import psycopg

        self.root.mkdir(parents=True, exist_ok=True)
        if self._as:
            os.chown(self.root, *self._owner)
        init = self._run(str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                         "--encoding=UTF8", "--no-sync")
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed ({init.returncode}): {init.stderr[-2000:]}")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(self.bin_dir / "postgres"), "-D", str(self.data), "-p", str(PORT), "-c", "listen_addresses=",
                 "-c", f"unix_socket_directories={self.root}", "-c", "fsync=off", "-c", "full_page_writes=off"],
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent, **self._as)  # type: ignore[call-overload]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {self.log_path.read_text()[-2000:]}")
            try:
                psycopg.connect(self.dsn("postgres"), connect_timeout=1).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"postgres did not come up: {self.log_path.read_text()[-2000:]}")

    def dsn(self, database: str) -> str:
        return f"postgresql://postgres@/{database}?host={self.root}&port={PORT}"

    def new_database(self) -> str:
        """A fresh, empty database; its SQLAlchemy URL (psycopg 3 driver)."""
        import psycopg

        self._databases += 1
        name = f"t{self._databases}"
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"postgresql+psycopg://postgres@/{name}?host={self.root}&port={PORT}"

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown: clients disconnected
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
