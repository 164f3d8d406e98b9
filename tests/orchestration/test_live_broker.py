"""The stand-in broker of the demo and the window tests (migration/demo/live_broker.py), as the
upgrade DAG runs it for a broker's ``start`` and ``stop`` commands: a retried start succeeds,
and a stop says so when the lock is not released."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from migration.demo import live_broker
from migration.logdir.model import lock_status

STUBBORN = textwrap.dedent("""
    import fcntl, os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a broker that does not stop when asked
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("locked", flush=True)
    time.sleep(120)
""")


@pytest.fixture
def log_dir(tmp_path):
    d = tmp_path / "kafka-logs"
    d.mkdir()
    yield d
    live_broker.stop([str(d)])


def test_a_second_start_finds_its_stand_in_running_and_succeeds(log_dir, capsys):
    assert live_broker.start([str(log_dir)]) == 0
    pid = int(live_broker._pid_file([str(log_dir)]).read_text())
    assert lock_status(log_dir).pid == pid
    capsys.readouterr()
    assert live_broker.start([str(log_dir)]) == 0  # a retried start task
    assert f"broker stand-in {pid} already holds the lock of {log_dir}" in capsys.readouterr().out
    assert lock_status(log_dir).pid == pid
    assert live_broker.stop([str(log_dir)]) == 0
    assert not lock_status(log_dir).live


def test_a_start_after_its_stand_in_died_starts_another(log_dir):
    assert live_broker.start([str(log_dir)]) == 0
    pf = live_broker._pid_file([str(log_dir)])
    first = int(pf.read_text())
    subprocess.run(["kill", "-9", str(first)], check=True)
    deadline = time.monotonic() + 10
    while lock_status(log_dir).live and time.monotonic() < deadline:
        time.sleep(0.05)  # gone, its lock with it (a zombie holds none)
    assert live_broker.start([str(log_dir)]) == 0
    assert lock_status(log_dir).pid == int(pf.read_text()) != first


def test_a_stop_that_leaves_the_lock_held_fails(log_dir, capsys, monkeypatch):
    holder = subprocess.Popen([sys.executable, "-c", STUBBORN, str(log_dir / ".lock")], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        pf = live_broker._pid_file([str(log_dir)])
        pf.write_text(str(holder.pid))
        monkeypatch.setattr(live_broker, "WAIT_S", 0.5)
        assert live_broker.stop([str(log_dir)]) == 1
        err = capsys.readouterr().err
        assert f"broker stand-in {holder.pid} was asked to stop, but the lock of {log_dir} is still held" in err
        assert pf.exists()  # a later stop can try again
        assert lock_status(log_dir).live
    finally:
        holder.kill()
        holder.wait()
