"""The upgrade DAG's per-broker windows at the level of their steps (orchestration/upgrade_rollout.py),
without Airflow: the rolling gate, the start of a broker, the stages a stopped rollout leaves, the
prestage's throttle. A live broker is a process holding its log dir's lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.lock_holders import hold_lock

from migration.audit.model import FindingCode, RunKind, RunReport, utcnow
from migration.audit.store import ReportStore
from migration.logdir.model import lock_status
from migration.migrations.upgrade.stage import Stage
from migration.orchestration import upgrade_rollout as rollout
from migration.orchestration.common import run_id_for
from migration.orchestration.upgrade_rollout import (
    ROLLBACK_MARKER,
    STARTED_MARKER,
    STOPPED_MARKER,
    VERIFY_MARKER,
    BrokerControl,
    RolloutPlan,
    broker_run_id,
    plan_rollout,
    rollout_gate,
    stage_id_for,
    window_dir,
)
from migration.runtime.runs import RunDir
from migration.runtime.safety import Refused
from migration.settings import default_stage_root

DAG_RUN = "manual__2026-11-28T05:00:00.000000+00:00"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """A private kmigrate home (runs, reports, stages) on the log dirs' file system."""
    h = tmp_path / "home"
    monkeypatch.setenv("KMIGRATE_HOME", str(h))
    for name in ("KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_STAGE_ROOT",
                 "KMIGRATE_SESSIONS_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(rollout, "START_POLL_S", 0.05, raising=False)
    return h


@pytest.fixture
def holders():
    """Lock holders (live brokers) started by a test, killed after it."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def _plan(sample_cluster, **params) -> RolloutPlan:
    plan = plan_rollout({"cluster": str(sample_cluster.description_path), "target_format": "v2", "dry_run": False,
                         "prestage": True, "canary_broker": 1, "stop_timeout_s": 1, **params})
    assert (plan.canary, plan.rest) == (1, [2, 3])
    return plan


def _run(sample_cluster, holders, broker_id: int, tmp_path: Path) -> None:
    """Broker ``broker_id`` runs: a process holds the lock of its log dir."""
    d = sample_cluster.broker_log_dirs[broker_id]
    holders.append(hold_lock("python", d / ".lock", tmp_path))
    assert lock_status(d).live


def _window_done(broker_id: int, *, started: bool = True) -> None:
    """Broker ``broker_id``'s window went through: stopped, upgraded (a clean report), verified,
    and (``started``) its start step ran."""
    rid = broker_run_id(DAG_RUN, broker_id)
    ReportStore().save(RunReport.start(RunKind.UPGRADE, {}, run_id=rid).finish())
    RunDir(rid).write(VERIFY_MARKER, {"ok": True})
    _mark(broker_id, STOPPED_MARKER)
    if started:
        _mark(broker_id, STARTED_MARKER)


def _mark(broker_id: int, name: str) -> None:
    wd = window_dir(DAG_RUN, broker_id)
    RunDir(wd.name).write(name, {"at": utcnow().isoformat(), "command": []})


# ---------------------------------------------------------------- 1. what stops the rollout comes first


def test_a_rolled_back_broker_stops_the_rollout_though_it_never_started_again(sample_cluster, holders, tmp_path):
    plan = _plan(sample_cluster)
    _window_done(1)
    _run(sample_cluster, holders, 1, tmp_path)
    _mark(2, STOPPED_MARKER)  # its window stopped it, failed, and rolled it back: it stays stopped
    RunDir(broker_run_id(DAG_RUN, 2)).write(ROLLBACK_MARKER, {"rollback_run_id": "x", "exit_code": 0})
    assert rollout_gate(plan, 3, DAG_RUN) == ("stop", "broker 2 was rolled back")


def test_a_failed_report_or_verification_stops_the_rollout_before_any_wait(sample_cluster, holders, tmp_path):
    plan = _plan(sample_cluster)
    _window_done(1)
    _run(sample_cluster, holders, 1, tmp_path)
    _window_done(2, started=False)
    RunDir(broker_run_id(DAG_RUN, 2)).write(VERIFY_MARKER, {"ok": False})
    assert rollout_gate(plan, 3, DAG_RUN) == ("stop", "broker 2 failed verification")
    failed = RunReport.start(RunKind.UPGRADE, {}, run_id=broker_run_id(DAG_RUN, 2))
    failed.error("a unit failed")
    ReportStore().save(failed.finish())
    assert rollout_gate(plan, 3, DAG_RUN) == ("stop", "broker 2 failed (exit code 1)")


def test_a_window_whose_stop_command_fails_stops_the_rollout(sample_cluster, holders, tmp_path):
    plan = _plan(sample_cluster)
    _window_done(1)
    _run(sample_cluster, holders, 1, tmp_path)
    plan.control[2] = BrokerControl(stop=["sh", "-c", "echo no such unit >&2; exit 5"])
    with pytest.raises(RuntimeError, match="stop command .* exited 5: no such unit"):
        rollout.stop_broker(plan, 2, DAG_RUN)
    assert not (window_dir(DAG_RUN, 2) / STOPPED_MARKER).exists()
    decision, why = rollout_gate(plan, 3, DAG_RUN)
    assert decision == "stop" and why.startswith("broker 2's window failed (stop): broker 2: stop command"), why
    # its rollback (one_failed) has nothing to roll back: it keeps what failed, and the rollout stays stopped
    from airflow.sdk.exceptions import AirflowSkipException

    with pytest.raises(AirflowSkipException, match="nothing to roll back"):
        rollout.rollback_broker(plan, 2, DAG_RUN)
    assert rollout.window_failure(DAG_RUN, 2)["step"] == "stop"
    assert rollout_gate(plan, 3, DAG_RUN)[0] == "stop"


def test_a_window_whose_prepare_fails_stops_the_rollout(sample_cluster, holders, tmp_path):
    """Broker 2 was stopped, but something holds its lock again when the upgrade is planned: the
    prepare refuses, no report is written, and the next gate must not wait for one."""
    plan = _plan(sample_cluster)
    _window_done(1)
    _run(sample_cluster, holders, 1, tmp_path)
    _mark(2, STOPPED_MARKER)
    _run(sample_cluster, holders, 2, tmp_path)
    with pytest.raises(Exception, match="lock"):
        rollout.prepare_broker(plan, 2, DAG_RUN)
    decision, why = rollout_gate(plan, 3, DAG_RUN)
    assert decision == "stop" and why.startswith("broker 2's window failed (prepare)"), why


def test_a_window_whose_upgrade_and_rollback_both_failed_stops_the_rollout(sample_cluster, holders, tmp_path,
                                                                          monkeypatch):
    """Broker 2's upgrade job failed before writing its report, and so did its rollback: no
    report, no rollback mark, yet the next gate must stop, not wait for a report."""
    plan = _plan(sample_cluster)
    _window_done(1)
    _run(sample_cluster, holders, 1, tmp_path)
    _mark(2, STOPPED_MARKER)
    RunDir(broker_run_id(DAG_RUN, 2)).job_path.write_text("{}")

    def broken(run_id: str) -> RunReport:
        raise OSError("disk gone")

    monkeypatch.setattr(rollout, "rollback_run", broken)
    with pytest.raises(OSError):
        rollout.rollback_broker(plan, 2, DAG_RUN)
    decision, why = rollout_gate(plan, 3, DAG_RUN)
    assert decision == "stop" and why.startswith("broker 2's window failed (rollback)"), why


def test_a_window_whose_start_command_fails_stops_the_rollout(sample_cluster):
    """Broker 1 is upgraded and verified, but does not start again: the rollout stops there
    rather than waiting for it."""
    plan = _plan(sample_cluster)
    _window_done(1, started=False)
    plan.control[1] = BrokerControl(start=["sh", "-c", "echo port in use >&2; exit 1"])
    with pytest.raises(RuntimeError, match="start command .* exited 1: port in use"):
        rollout.start_broker(plan, 1, DAG_RUN)
    decision, why = rollout_gate(plan, 2, DAG_RUN)
    assert decision == "stop" and why.startswith("broker 1's window failed (start)"), why


def test_a_retry_of_the_failed_step_takes_its_mark_back(sample_cluster):
    plan = _plan(sample_cluster)
    plan.control[1] = BrokerControl(stop=["false"])
    with pytest.raises(RuntimeError):
        rollout.stop_broker(plan, 1, DAG_RUN)
    assert rollout.window_failure(DAG_RUN, 1)["step"] == "stop"
    plan.control[1] = BrokerControl(stop=["true"])
    rollout.stop_broker(plan, 1, DAG_RUN)
    assert rollout.window_failure(DAG_RUN, 1) is None
    assert (window_dir(DAG_RUN, 1) / STOPPED_MARKER).exists()


def test_a_broker_still_in_its_window_keeps_the_next_one_waiting(sample_cluster):
    plan = _plan(sample_cluster)
    assert rollout_gate(plan, 2, DAG_RUN) == ("wait", "broker 1 has not finished its upgrade")
    ReportStore().save(RunReport.start(RunKind.UPGRADE, {}, run_id=broker_run_id(DAG_RUN, 1)).finish())
    assert rollout_gate(plan, 2, DAG_RUN) == ("wait", "broker 1 is not verified yet")
    RunDir(broker_run_id(DAG_RUN, 1)).write(VERIFY_MARKER, {"ok": True})
    assert rollout_gate(plan, 2, DAG_RUN) == ("wait", "broker 1 is not started again yet")


# ---------------------------------------------------------------- 2. started means running again


def test_the_next_window_waits_until_the_previous_broker_holds_its_lock_again(sample_cluster, holders, tmp_path):
    plan = _plan(sample_cluster)
    _window_done(1)  # its start step ran (the operator was told to start it), but it is not up yet
    decision, why = rollout_gate(plan, 2, DAG_RUN)
    assert decision == "wait" and why.startswith("broker 1 is not running yet"), why
    assert str(sample_cluster.broker_log_dirs[1]) in why
    _run(sample_cluster, holders, 1, tmp_path)
    # A lock is a process's on the broker's host: the gate, on the next broker's host, goes by what
    # broker 1's host saw (its wait_started, plugins/kmigrate_operators.py), not by a look of its own.
    assert rollout_gate(plan, 2, DAG_RUN)[0] == "wait"
    assert rollout.confirm_running(window_dir(DAG_RUN, 1), plan.log_dirs[1]) == []
    assert rollout_gate(plan, 2, DAG_RUN) == ("go", "")


def test_a_start_command_that_does_not_start_the_broker_fails_its_window_naming_the_timeout(sample_cluster):
    plan = _plan(sample_cluster)
    _window_done(1, started=False)
    plan.control[1] = BrokerControl(start=["true"])  # returns at once, and nothing takes the lock
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"broker 1 did not start within stop_timeout_s=1 s"):
        rollout.start_broker(plan, 1, DAG_RUN)
    assert time.monotonic() - t0 >= 1
    assert not (window_dir(DAG_RUN, 1) / STARTED_MARKER).exists()
    decision, why = rollout_gate(plan, 2, DAG_RUN)
    assert decision == "stop" and "window failed (start)" in why, why


HOLD_LATER = textwrap.dedent("""
    import fcntl, os, subprocess, sys
    holder = '''
    import fcntl, os, sys, time
    time.sleep(1)
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    time.sleep(120)
    '''
    p = subprocess.Popen([sys.executable, "-c", holder, sys.argv[1]], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    open(sys.argv[2], "w").write(str(p.pid))
""")


def test_a_start_command_returning_before_the_broker_is_up_is_waited_for(sample_cluster, tmp_path):
    """The start command returns at once; the broker takes its lock a second later: the start
    step ends only then, and the next window may go."""
    plan = _plan(sample_cluster, stop_timeout_s=30)
    _window_done(1, started=False)
    d = sample_cluster.broker_log_dirs[1]
    pid_file = tmp_path / "broker.pid"
    plan.control[1] = BrokerControl(start=[sys.executable, "-c", HOLD_LATER, str(d / ".lock"), str(pid_file)])
    retired = _stage(plan, 1, 10).retire()  # what the window left of its stage
    assert retired is not None and retired.is_dir()
    try:
        out = rollout.start_broker(plan, 1, DAG_RUN)
        assert lock_status(d).live, "start_broker returned before the broker held its lock"
        assert out["started"] and "holds its log dir lock again" in out["note"]
        assert not retired.parent.exists()  # removed once the broker runs
        assert (window_dir(DAG_RUN, 1) / STARTED_MARKER).exists()
        assert rollout_gate(plan, 2, DAG_RUN) == ("go", "")
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


# ---------------------------------------------------------------- 3. no stage outlives the rollout


def _stage(plan: RolloutPlan, broker_id: int, size: int) -> Stage:
    """A stage of ``size`` bytes for the broker, as its prestage leaves one."""
    stage = Stage(default_stage_root(plan.log_dirs[broker_id]), stage_id_for(DAG_RUN, broker_id))
    seg = stage.path / "files" / "orders-0.abc" / "00000000000000000000"
    seg.mkdir(parents=True)
    (seg / "00000000000000000000.log.cleaned").write_bytes(b"\0" * size)
    (stage.path / "manifests").mkdir()
    return stage


def test_the_rollback_of_a_failed_window_discards_the_broker_stage(sample_cluster, monkeypatch):
    plan = _plan(sample_cluster)
    stage = _stage(plan, 2, 4096)
    rid = broker_run_id(DAG_RUN, 2)
    RunDir(rid).job_path.write_text("{}")  # its upgrade began

    def rolled_back(run_id: str) -> RunReport:
        assert run_id == rid
        return RunReport.start(RunKind.ROLLBACK, {}, run_id=f"{rid}-rollback").finish()

    monkeypatch.setattr(rollout, "rollback_run", rolled_back)
    out = rollout.rollback_broker(plan, 2, DAG_RUN)
    assert not stage.exists()
    assert out["stage"] == f"stage {stage.stage_id} of broker 2 discarded ({stage.path}): 4,096 bytes freed"
    assert (RunDir.path_of(rid) / ROLLBACK_MARKER).exists()


def test_the_rollback_after_a_window_that_retired_the_stage_sweeps_what_it_left(sample_cluster, monkeypatch):
    """The window swapped the stage in and retired it; verification then failed and the broker
    is rolled back: what the retirement left under ``.deleted`` goes with the rollback."""
    plan = _plan(sample_cluster)
    retired = _stage(plan, 2, 4096).retire()
    assert retired is not None and [f for f in retired.rglob("*.cleaned")]  # unused: left for a sweep
    rid = broker_run_id(DAG_RUN, 2)
    RunDir(rid).job_path.write_text("{}")
    monkeypatch.setattr(rollout, "rollback_run",
                        lambda run_id: RunReport.start(RunKind.ROLLBACK, {}, run_id=f"{run_id}-rollback").finish())
    out = rollout.rollback_broker(plan, 2, DAG_RUN)
    assert "stage" not in out and not retired.parent.exists()


def test_a_rollback_with_nothing_to_roll_back_discards_the_stage_too(sample_cluster):
    from airflow.sdk.exceptions import AirflowSkipException

    plan = _plan(sample_cluster)
    stage = _stage(plan, 1, 1000)
    with pytest.raises(AirflowSkipException, match=f"stage {stage.stage_id} of broker 1 discarded .*1,000 bytes"):
        rollout.rollback_broker(plan, 1, DAG_RUN)
    assert not stage.exists()
    assert (window_dir(DAG_RUN, 1) / rollout.FAILED_MARKER).exists()


def test_the_stages_of_brokers_whose_window_never_ran_are_discarded_and_reported(sample_cluster):
    plan = _plan(sample_cluster)
    _window_done(1)
    ours = _stage(plan, 1, 100)  # its window began: its end (or its rollback) removes it, not this step
    unused = {2: _stage(plan, 2, 2048), 3: _stage(plan, 3, 3072)}
    said = [rollout.discard_unused_stage(plan, b, DAG_RUN) for b in (1, 2, 3)]
    assert said[0] is None and all(said[1:]), said
    report = rollout.final_report(plan, "message_format_upgrade", DAG_RUN, said)
    saved = ReportStore().load(run_id_for(DAG_RUN))
    for r in (report, saved):
        notes = [w.message for w in r.warnings]
        for b, stage in unused.items():
            said = [n for n in notes if stage.stage_id in n]
            assert len(said) == 1, notes
            assert f"{b * 1024:,} bytes freed" in said[0] and "its window never ran" in said[0], said
    assert not any(s.exists() for s in unused.values())
    assert ours.exists()


# ---------------------------------------------------------------- 4. the prestage's throttle


def test_the_prestage_is_throttled_as_the_dag_params_say(sample_cluster, monkeypatch):
    seen = []
    real = rollout.prestage_upgrade

    def spy(log_dirs, *, options, broker_id=None):
        seen.append(options)
        return real(log_dirs, options=options, broker_id=broker_id)

    monkeypatch.setattr(rollout, "prestage_upgrade", spy)
    plan = _plan(sample_cluster, prestage_io_rate=50_000_000, prestage_budget=1)
    assert (plan.prestage_io_rate, plan.prestage_budget) == (50_000_000, 1)
    out = rollout.prestage_broker(plan, 1, DAG_RUN)
    assert (seen[-1].io_rate, seen[-1].budget) == (50_000_000, 1)
    assert out["staged"] == 1  # the budget ends the pass after its first segment
    report = ReportStore().load(stage_id_for(DAG_RUN, 1))
    assert (report.params["io_rate"], report.params["budget"]) == (50_000_000, 1)
    later = [u for u in report.iter_results() if any(w.code == FindingCode.OUTSIDE_BUDGET for w in u.warnings)]
    assert later

    monkeypatch.setattr(rollout, "prestage_upgrade", lambda log_dirs, *, options, broker_id=None: seen.append(
        options) or report)
    rollout.prestage_broker(_plan(sample_cluster, prestage_io_rate=0), 2, DAG_RUN)
    assert (seen[-1].io_rate, seen[-1].budget) == (None, None)  # 0: no limit
    with pytest.raises(ValueError, match="DAG param prestage_budget"):
        _plan(sample_cluster, prestage_budget=-1)


def test_the_stop_step_stages_what_the_broker_wrote_since_the_prestage(sample_cluster, holders, tmp_path):
    """Hours may pass between the prestage and a broker's window. Meanwhile broker 1 appends to
    an active legacy segment and rolls it: the stop step's last pass (the broker still running)
    stages that segment whole and the new active segment's bytes, so the window converts none
    of it; what was staged before is kept."""
    from migration.formats import names
    from migration.formats.file_records import FileRecords
    from migration.formats.legacy import encode_message

    plan = _plan(sample_cluster)
    _run(sample_cluster, holders, 1, tmp_path)
    assert rollout.prestage_broker(plan, 1, DAG_RUN)["prestaged"]
    stage = rollout.broker_stage(plan, 1, DAG_RUN)
    staged_before = {(e.partition_dir, e.base_offset) for e in stage.entries()}
    prefixes = {(p.partition_dir, p.base_offset) for p in stage.prefixes()}
    assert prefixes
    pdir, active_base = sorted(prefixes)[0]
    active = Path(pdir) / names.log_file_name(active_base)
    magic = active.read_bytes()[16]
    nxt = max(b.last_offset for b in FileRecords(active).batches()) + 1
    with open(active, "ab") as f:  # the broker appends, then rolls: a new active segment with a record
        for o in range(nxt, nxt + 30):
            f.write(encode_message(o, magic, 0, 1_700_000_000_000 + o if magic else -1, b"k", b"v" * 40))
    rolled = Path(pdir) / names.log_file_name(nxt + 30)
    rolled.write_bytes(encode_message(nxt + 30, magic, 0, 1_700_000_000_100 if magic else -1, b"k", b"new"))
    plan.control[1] = BrokerControl(stop=["true"])

    out = rollout.stop_broker(plan, 1, DAG_RUN)

    assert out["note"].startswith("broker 1: a last prestage pass staged 1 more closed segment(s)"), out["note"]
    after = {(e.partition_dir, e.base_offset) for e in stage.entries()}
    assert after == staged_before | {(pdir, active_base)}
    (p,) = [p for p in stage.prefixes() if p.partition_dir == pdir]
    assert (p.base_offset, p.state.input_bytes) == (nxt + 30, rolled.stat().st_size)
    report = ReportStore().load(stage_id_for(DAG_RUN, 1))
    kept = [u for u in report.iter_results() if any(w.code == FindingCode.PRESTAGE_KEPT for w in u.warnings)]
    assert len(kept) == len(staged_before)


def test_a_routed_window_needs_the_triggerers_queues_before_it_stops_anything(sample_cluster, monkeypatch):
    """With a queue, the window's waits must run on the broker's host's triggerer: without
    ``[triggerer] queues_enabled`` the stop step refuses, and the broker is not stopped."""
    plan = _plan(sample_cluster)
    plan.queues[1] = "kafka-host-1"
    plan.control[1] = BrokerControl(stop=["sh", "-c", "echo stopped > /dev/null"])
    monkeypatch.setenv("AIRFLOW__TRIGGERER__QUEUES_ENABLED", "False")
    with pytest.raises(Refused, match="queues_enabled is off.*nothing was stopped"):
        rollout.stop_broker(plan, 1, DAG_RUN)
    assert not (window_dir(DAG_RUN, 1) / STOPPED_MARKER).exists()
    assert rollout.window_failure(DAG_RUN, 1)["step"] == "stop"
    monkeypatch.setenv("AIRFLOW__TRIGGERER__QUEUES_ENABLED", "True")
    rollout.stop_broker(plan, 1, DAG_RUN)
    assert (window_dir(DAG_RUN, 1) / STOPPED_MARKER).exists()


def test_a_window_run_again_forgets_that_the_broker_ran_again(sample_cluster):
    """Its tasks cleared and run again in the same DAG run: the next broker's gate must not go
    on the marks of the window before (one broker down at a time)."""
    plan = _plan(sample_cluster)
    _window_done(1)
    _mark(1, rollout.RUNNING_MARKER)
    plan.control[1] = BrokerControl(stop=["true"])
    rollout.stop_broker(plan, 1, DAG_RUN)
    for mark in (STARTED_MARKER, rollout.RUNNING_MARKER):
        assert not (window_dir(DAG_RUN, 1) / mark).exists(), mark
    assert rollout_gate(plan, 2, DAG_RUN) == ("wait", "broker 1 is not started again yet")
