"""A real PostgreSQL server for tests: ``initdb`` into a temporary directory and ``postgres`` in
a subprocess on loopback (trust authentication, fsync off: throwaway data), one fresh database
per test. PostgreSQL refuses to run as root, so under root the server runs as the ``postgres``
system user (Debian's packages create it)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_bin_dir() -> Path | None:
    """The directory of ``initdb`` and ``postgres``: on PATH, else Debian's versioned one."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(Path(d).parent.name))
    return Path(dirs[-1]) if dirs and (Path(dirs[-1]) / "initdb").exists() else None


class PostgresServer:
    """``root`` must be reachable by the ``postgres`` user when running as root (a fresh
    directory under /tmp is: pytest's own temporary root is private to root)."""

    def __init__(self, root: Path, bin_dir: Path) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.port = _free_port()
        self.data = root / "data"
        self.log_path = root / "postgres.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._databases = 0
        self._user: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self._user = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root and no 'postgres' user to run PostgreSQL as") from None

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *args] if self._user else list(args)

    def start(self, timeout: float = 30.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self._user:
            os.chown(self.root, self._user.pw_uid, self._user.pw_gid)
        init = subprocess.run(self._cmd(str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres",
                                        "--auth=trust", "--encoding=UTF8", "--no-sync"),
                              capture_output=True, text=True)
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed ({init.returncode}): {init.stderr[-2000:]}")
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            self._cmd(str(self.bin_dir / "postgres"), "-D", str(self.data), "-p", str(self.port),
                      "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.root}",
                      "-c", "fsync=off", "-c", "full_page_writes=off"),
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        import psycopg

        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {self.log_path.read_text()[-2000:]}")
            try:
                psycopg.connect(self.dsn("postgres"), connect_timeout=1).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise RuntimeError(f"postgres did not come up: {self.log_path.read_text()[-2000:]}")

    def dsn(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; its SQLAlchemy URL (psycopg 3 driver)."""
        import psycopg

        self._databases += 1
        name = f"t{self._databases}"
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                # A fast shutdown (clients disconnected); under runuser the child is not ours
                # to signal, pg_ctl finds it through the data directory.
                subprocess.run(self._cmd(str(self.bin_dir / "pg_ctl"), "stop", "-D", str(self.data), "-m", "fast",
                                         "-w", "-t", "20"), capture_output=True)
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
            self.proc = None
