"""A run under Spark killed at a fault point with its whole session, as a power cut of the
host would (``killsession``, migration/runtime/faults.py): the CLI driver, Spark's JVM and its
Python workers at once; no stray process may stay behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from migration.runtime.faults import session_pids


def wait_session_gone(sid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not session_pids(sid):
            return True
        time.sleep(0.1)
    return False


def killed_at_fault(cmd: list[str], env: dict[str, str], timeout: float = 240) -> str:
    """Run ``cmd`` in a session of its own until its fault point kills it; returns its output.
    Fails when the fault point was not reached or a process of the session outlives it."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    finally:
        for pid in session_pids(proc.pid):  # never leave a stray JVM behind
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL, f"fault point not reached: rc {proc.returncode}\n{output[-3000:]}"
    assert wait_session_gone(proc.pid), "a process of the killed tree is still alive"
    return output
