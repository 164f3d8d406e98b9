"""A real S3 endpoint for tests: ``moto_server`` in a subprocess on loopback, which tests can
kill, restart (moto keeps its state in memory: a restart starts empty) or reset."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoServer:
    def __init__(self, log_path: Path) -> None:
        self.port = _free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> None:
        exe = Path(sys.executable).with_name("moto_server")
        # Small multipart parts are legal here so tests exercise multipart with tiny segments.
        env = {**os.environ, "S3_UPLOAD_PART_MIN_SIZE": "256"}
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(self.port)], stdout=log,
                                     stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited: {self.log_path.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(self.url + "/moto-api/", timeout=1).read()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("moto_server did not come up")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGCONT)  # in case it was frozen
                self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def reset(self) -> None:
        req = urllib.request.Request(self.url + "/moto-api/reset", method="POST")
        urllib.request.urlopen(req, timeout=5).read()
