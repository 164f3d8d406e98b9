"""One run per log dir, provably: while a kmigrate run works on a log dir, a second kmigrate
process is refused whatever its state directory, and changes nothing; once the first is killed,
the next invocation names the killed run and the commands that resume or roll it back, and the
printed resume command finishes the job. Stale lock records (a reused pid) mislead nobody."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import tree_state
from kafka_loader import read_log_dir_records
from support.lock_holders import PY_HOLDER, hold

from migration.logdir.model import LockHolder, LockState, _holder_file, lock_status, process_start
from migration.runtime.safety import Refused, check_not_live


def _kmigrate(args: list[str], out: Path, **kw) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"KMIGRATE_OUT": str(out), "KMIGRATE_REPORT_ROOT": str(out / "reports"),
                        "KMIGRATE_BACKUP_ROOT": str(out / "backups"), "PYTHONPATH": str(Path.cwd()), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "migration", *args], env=env, capture_output=True, text=True,
                          timeout=180, **kw)


def _wait(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _cleaned_journal(out: Path, run_id: str) -> bool:
    for jf in (out / "runs" / run_id / "journal").glob("*.json"):
        try:
            if json.loads(jf.read_text())["state"] == "cleaned":
                return True
        except (ValueError, KeyError):  # being replaced
            continue
    return False


def test_second_process_refused_then_killed_run_named_and_resumed(sample_cluster_template, tmp_path, private_out):
    log_dir = tmp_path / "kafka-logs"
    shutil.copytree(sample_cluster_template.broker_log_dirs[1], log_dir, copy_function=shutil.copy2)
    expected = read_log_dir_records(log_dir)
    env = os.environ | {"KMIGRATE_OUT": str(private_out), "KMIGRATE_REPORT_ROOT": str(private_out / "reports"),
                        "KMIGRATE_BACKUP_ROOT": str(private_out / "backups"), "PYTHONPATH": str(Path.cwd()),
                        "KMIGRATE_FAULT_AT": "journal-cleaned:2:pause120", "KMIGRATE_FAULT_DIR": str(tmp_path)}
    first = subprocess.Popen([sys.executable, "-m", "migration", "upgrade", str(log_dir), "--to", "v2",
                              "--engine", "inline", "--run-id", "first"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        # the first run holds the lock, with a replacement staged (paused right after its journal)
        # (the fault rule's second hit is counted by the marker file rule0.2, made as it pauses)
        _wait(lambda: (tmp_path / "rule0.2").exists())
        assert _cleaned_journal(private_out, "first") and lock_status(log_dir).state is LockState.KMIGRATE
        before = tree_state(log_dir)
        same_home = _kmigrate(["upgrade", str(log_dir), "--to", "v2", "--engine", "inline"], private_out)
        assert same_home.returncode == 3, same_home.stdout + same_home.stderr
        # a refusal is one line on stderr (docs/operations.md), naming the holder and what to do
        assert "kmigrate run first" in same_home.stderr and f"pid {first.pid}" in same_home.stderr
        other_home = _kmigrate(["upgrade", str(log_dir), "--to", "v2", "--engine", "inline"], tmp_path / "other")
        assert other_home.returncode == 3, other_home.stdout + other_home.stderr
        assert f"another process holds the lock (pid {first.pid}" in other_home.stderr
        rollback_meanwhile = _kmigrate(["rollback", "first"], private_out)
        assert rollback_meanwhile.returncode == 3
        assert tree_state(log_dir) == before  # nothing changed by the refused processes
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()

    # the next invocation finds the killed run and says what to type
    nxt = _kmigrate(["upgrade", str(log_dir), "--to", "v2", "--engine", "inline"], private_out)
    assert nxt.returncode == 3, nxt.stdout + nxt.stderr
    text = " ".join((nxt.stdout + nxt.stderr).split())
    assert "run first (upgrade) was interrupted" in text and "kmigrate rollback first" in text
    assert "Traceback" not in nxt.stdout + nxt.stderr
    resume = re.search(r"resume it with: (kmigrate upgrade .*? --run-id first)", text)
    assert resume is not None, text
    done = _kmigrate(shlex.split(resume.group(1))[1:], private_out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert read_log_dir_records(log_dir) == expected
    assert lock_status(log_dir).holder is None  # released: no record left behind


def test_stale_records_never_block_or_mislead(tmp_path, private_out):
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / ".lock").touch()
    hf = _holder_file(log_dir)
    hf.parent.mkdir(parents=True, exist_ok=True)
    # a record whose pid now belongs to another process (a broker holding the lock): that
    # process is not our run, whatever the record says
    broker = hold([sys.executable, "-c", PY_HOLDER, str(log_dir / ".lock")])
    try:
        hf.write_text(LockHolder(log_dir=str(log_dir), pid=broker.pid, pid_start=(process_start(broker.pid) or 0) - 1,
                                 host="h", run_id="old", run_kind="upgrade").model_dump_json())
        st = lock_status(log_dir)
        assert st.state is LockState.OTHER and "run old" not in st.describe() and st.holder is None
    finally:
        broker.kill()
        broker.wait()
    # a killed upgrade whose journals show nothing in flight: named, but not blocking
    run = private_out / "runs" / "old"
    (run / "journal").mkdir(parents=True)
    (run / "job.json").write_text(json.dumps({"run_id": "old", "units": [], "options": {}}))
    hf.write_text(LockHolder(log_dir=str(log_dir), pid=broker.pid, pid_start=1, host="h", run_id="old",
                             run_kind="upgrade", resume="kmigrate upgrade X --to v2 --run-id old",
                             blocks_other_runs=True).model_dump_json())
    warnings = check_not_live([log_dir], run_id="new")
    assert len(warnings) == 1 and "run old (upgrade) was interrupted" in warnings[0]
    # with a unit in flight it blocks every other run, but not its own resume
    (run / "journal" / "u.json").write_text(json.dumps({
        "unit_id": "u", "partition_dir": str(log_dir / "t-0"), "log_file": "00000000000000000000.log",
        "base_offset": 0, "state": "cleaned"}))
    with pytest.raises(Refused, match="resume it with: kmigrate upgrade X --to v2 --run-id old"):
        check_not_live([log_dir], run_id="new")
    assert check_not_live([log_dir], run_id="old") == []
    assert check_not_live([log_dir], resolves="old") == []


def test_the_upgrade_journal_and_the_runtime_agree_on_what_is_in_flight():
    from migration.migrations.upgrade.journal import IN_FLIGHT
    from migration.runtime.runs import IN_FLIGHT_STATES

    assert {s.value for s in IN_FLIGHT} == IN_FLIGHT_STATES


def test_hosts_sharing_a_home_keep_their_own_lock_records(tmp_path, private_out, monkeypatch):
    """Every broker host has /data/kafka-logs, and the hosts share one home (docs/operations.md,
    "One worker per broker host"): a run killed on one host neither blocks nor names itself on
    another, and neither overwrites the other's record."""
    import socket

    from migration.logdir.model import LogDirLock, read_lock_holder

    log_dir = tmp_path / "kafka-logs"
    log_dir.mkdir()
    run = private_out / "runs" / "killed-on-a"
    (run / "journal").mkdir(parents=True)  # a unit in flight: it blocks every other run on that host
    (run / "journal" / "u.json").write_text(json.dumps({
        "unit_id": "u", "partition_dir": str(log_dir / "t-0"), "log_file": "00000000000000000000.log",
        "base_offset": 0, "state": "cleaned"}))
    monkeypatch.setattr(socket, "gethostname", lambda: "kafka-host-a")
    hf = _holder_file(log_dir)
    hf.parent.mkdir(parents=True, exist_ok=True)
    hf.write_text(LockHolder(log_dir=str(log_dir), pid=1, pid_start=1, host="kafka-host-a", run_id="killed-on-a",
                             run_kind="upgrade", blocks_other_runs=True).model_dump_json())
    with pytest.raises(Refused, match="killed-on-a"):
        check_not_live([log_dir], run_id="new")

    monkeypatch.setattr(socket, "gethostname", lambda: "kafka-host-b")
    assert read_lock_holder(log_dir) is None
    assert check_not_live([log_dir], run_id="on-b") == []
    with LogDirLock(log_dir, holder={"run_id": "on-b", "run_kind": "upgrade"}):
        assert read_lock_holder(log_dir).run_id == "on-b"
    monkeypatch.setattr(socket, "gethostname", lambda: "kafka-host-a")
    assert read_lock_holder(log_dir).run_id == "killed-on-a"  # host a's record is still its own


def test_a_record_by_its_earlier_name_counts_on_its_own_host_only(tmp_path, private_out, monkeypatch):
    """Records were named by the log dir's path alone before: one this host wrote still names a
    killed run here (and is replaced by the next run's), one another host wrote says nothing."""
    import socket

    from migration.logdir.model import LogDirLock, read_lock_holder

    log_dir = tmp_path / "kafka-logs"
    log_dir.mkdir()
    monkeypatch.setattr(socket, "gethostname", lambda: "kafka-host-a")
    earlier = _holder_file(log_dir, host="")
    earlier.parent.mkdir(parents=True, exist_ok=True)
    earlier.write_text(LockHolder(log_dir=str(log_dir), pid=1, pid_start=1, host="kafka-host-b", run_id="b's",
                                  run_kind="upgrade").model_dump_json())
    assert read_lock_holder(log_dir) is None
    earlier.write_text(LockHolder(log_dir=str(log_dir), pid=1, pid_start=1, host="kafka-host-a", run_id="a's",
                                  run_kind="upgrade").model_dump_json())
    assert read_lock_holder(log_dir).run_id == "a's"
    assert lock_status(log_dir).interrupted.run_id == "a's"
    with LogDirLock(log_dir, holder={"run_id": "next", "run_kind": "upgrade"}):
        assert not earlier.exists()
    assert read_lock_holder(log_dir) is None
