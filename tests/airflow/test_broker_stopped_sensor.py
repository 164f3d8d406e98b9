"""The window's waits for its broker to stop and to run again (plugins/kmigrate_operators.py
``BrokerLockSensor``): a broker that does not stop fails the window, and the rolling gate stops
the rollout there instead of waiting for a broker that never comes back; a broker started by
the operator is seen running on its own host before the next window goes; the wait's trigger
runs on the broker's queue and refuses a host where the broker's log dirs are not."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))

from kmigrate_operators import BrokerLockSensor, LogDirLockTrigger  # noqa: E402

from migration.orchestration import upgrade_rollout as rollout  # noqa: E402

DAG_RUN = "manual__2026-11-28T06:00:00.000000+00:00"


def test_a_broker_that_does_not_stop_fails_its_window_and_stops_the_rollout(sample_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("KMIGRATE_HOME", str(tmp_path / "home"))
    for name in ("KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_STAGE_ROOT"):
        monkeypatch.delenv(name, raising=False)
    plan = rollout.plan_rollout({"cluster": str(sample_cluster.description_path), "dry_run": False,
                                 "prestage": True, "canary_broker": 1, "stop_timeout_s": 5})
    plan.control[1] = rollout.BrokerControl(stop=["true"])  # returns, and the broker goes on running
    stop = rollout.stop_broker(plan, 1, DAG_RUN)
    assert stop["window"] == str(rollout.window_dir(DAG_RUN, 1))
    sensor = BrokerLockSensor(task_id="wait_stopped", window=stop)
    held = str(sample_cluster.broker_log_dirs[1])
    with pytest.raises(RuntimeError, match="broker 1 did not stop within stop_timeout_s=5 s"):
        sensor.execute_complete({}, {"done": False, "live": [held]})
    failed = rollout.window_failure(DAG_RUN, 1)
    assert failed is not None and failed["step"] == "wait_stopped" and held in failed["why"]
    decision, why = rollout.rollout_gate(plan, 2, DAG_RUN)
    assert decision == "stop" and why.startswith("broker 1's window failed (wait_stopped)"), why


@pytest.fixture
def window_env(sample_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("KMIGRATE_HOME", str(tmp_path / "home"))
    for name in ("KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_STAGE_ROOT"):
        monkeypatch.delenv(name, raising=False)
    return rollout.plan_rollout({"cluster": str(sample_cluster.description_path), "dry_run": False,
                                 "prestage": True, "canary_broker": 1, "stop_timeout_s": 5})


def _window_ended(plan) -> None:
    """Broker 1's window went through up to its start: stopped, upgraded, verified."""
    from migration.audit.model import RunKind, RunReport
    from migration.audit.store import ReportStore
    from migration.runtime.runs import RunDir

    ReportStore().save(RunReport.start(RunKind.UPGRADE, {}, run_id=rollout.broker_run_id(DAG_RUN, 1)).finish())
    RunDir(rollout.broker_run_id(DAG_RUN, 1)).write(rollout.VERIFY_MARKER, {"ok": True})
    marks = rollout.window_dir(DAG_RUN, 1)
    RunDir(marks.name, root=marks).write(rollout.STOPPED_MARKER, {"at": "now"})


def test_a_broker_the_operator_starts_is_waited_for_on_its_host(window_env, sample_cluster, tmp_path):
    from airflow.sdk.exceptions import TaskDeferred
    from support.lock_holders import hold_lock

    plan = window_env
    _window_ended(plan)
    started = rollout.start_broker(plan, 1, DAG_RUN)  # no start command: the operator starts it
    assert not started["started"] and "start it now" in started["note"]
    sensor = BrokerLockSensor(task_id="wait_started", window=started, until="running")
    ti = type("TI", (), {"queue": "kafka-host-1"})()
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({"ti": ti})
    # the trigger follows this instance's queue, the broker's host's (not the operator's default)
    assert sensor.queue == "kafka-host-1"
    trigger = deferred.value.trigger
    assert isinstance(trigger, LogDirLockTrigger) and trigger.serialize()[1]["held"] is True
    assert rollout.rollout_gate(plan, 2, DAG_RUN)[0] == "wait"

    d = sample_cluster.broker_log_dirs[1]
    holder = hold_lock("python", d / ".lock", tmp_path)  # the operator started broker 1
    try:
        event = asyncio.run(_first(trigger))
        assert event == {"done": True, "live": [str(d)]}
        assert sensor.execute_complete({}, event) == {"broker_id": 1, "running": True}
        assert rollout.rollout_gate(plan, 2, DAG_RUN) == ("go", "")
    finally:
        holder.kill()
        holder.wait()


def test_the_trigger_refuses_a_host_without_the_brokers_log_dirs(window_env, sample_cluster):
    """A triggerer of another host (``[triggerer] queues_enabled`` off) must not report a lock
    it cannot see as released: it says where it runs, and the window fails."""
    wrong = LogDirLockTrigger([str(sample_cluster.broker_log_dirs[2])], time.time() + 5, 0.1, broker_id=1)
    event = asyncio.run(_first(wrong))
    assert not event["done"] and "belongs to node 2" in event["wrong_host"], event
    stop = {"broker_id": 1, "log_dirs": [str(sample_cluster.broker_log_dirs[1])], "timeout_s": 5, "managed": True,
            "window": str(rollout.window_dir(DAG_RUN, 1))}
    with pytest.raises(RuntimeError, match="set \\[triggerer\\] queues_enabled"):
        BrokerLockSensor(task_id="wait_stopped", window=stop).execute_complete({}, event)
    assert rollout.window_failure(DAG_RUN, 1)["step"] == "wait_stopped"


async def _first(trigger):
    async for event in trigger.run():
        return event.payload


def test_a_wait_no_triggerer_runs_fails_its_window_naming_the_queue(window_env):
    """Airflow's own deferral timeout (a wait whose queue has no triggerer) fails the window
    like a broker that does not stop, so the rollout stops instead of hanging."""
    from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason

    stop = {"broker_id": 1, "log_dirs": window_env.log_dirs[1], "timeout_s": 5, "managed": True,
            "window": str(rollout.window_dir(DAG_RUN, 1))}
    sensor = BrokerLockSensor(task_id="wait_stopped", window=stop)
    sensor.queue = "kafka-host-1"
    with pytest.raises(RuntimeError, match=r"is a triggerer running for queue 'kafka-host-1'"):
        sensor.resume_execution(TRIGGER_FAIL_REPR, {"error": TriggerFailureReason.TRIGGER_TIMEOUT}, {})
    assert rollout.window_failure(DAG_RUN, 1)["step"] == "wait_stopped"


def test_a_wait_on_another_brokers_host_fails_before_it_looks(window_env, sample_cluster):
    stop = {"broker_id": 1, "log_dirs": [str(sample_cluster.broker_log_dirs[2])], "timeout_s": 5, "managed": True,
            "window": str(rollout.window_dir(DAG_RUN, 1))}
    ti = type("TI", (), {"queue": "kafka-host-1"})()
    with pytest.raises(RuntimeError, match="belongs to node 2 .*queue \\('kafka-host-1'\\)"):
        BrokerLockSensor(task_id="wait_stopped", window=stop).execute({"ti": ti})
