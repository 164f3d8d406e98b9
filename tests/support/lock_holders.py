"""Processes that hold a log dir's ``.lock`` as a live broker does: a POSIX record lock taken
from Python (``fcntl.lockf``) or from Java with ``FileChannel.tryLock``, the call Kafka makes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PY_HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("locked", flush=True)
    time.sleep(120)
""")

JAVA_HOLDER = textwrap.dedent("""
    import java.nio.channels.FileChannel;
    import java.nio.file.*;
    public class HoldLock {
        public static void main(String[] a) throws Exception {
            FileChannel ch = FileChannel.open(Paths.get(a[0]), StandardOpenOption.CREATE,
                StandardOpenOption.READ, StandardOpenOption.WRITE);
            if (ch.tryLock() == null) { System.exit(2); }
            System.out.println("locked"); System.out.flush();
            Thread.sleep(120000);
        }
    }
""")


def hold(cmd: list[str]) -> subprocess.Popen[str]:
    """Start a holder and wait until it has the lock."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "locked"
    return proc


def hold_lock(kind: str, lock: Path, work_dir: Path) -> subprocess.Popen[str]:
    """Hold ``lock`` from a ``python`` or ``java`` process (the Java one is compiled into
    ``work_dir``; skipped without a JDK). The caller kills it."""
    if kind == "python":
        return hold([sys.executable, "-c", PY_HOLDER, str(lock)])
    if shutil.which("javac") is None:
        pytest.skip("no JDK on this machine")
    src = work_dir / "HoldLock.java"
    src.write_text(JAVA_HOLDER)
    subprocess.run(["javac", "-d", str(work_dir), str(src)], check=True, timeout=120)
    return hold(["java", "-cp", str(work_dir), "HoldLock", str(lock)])
