"""The window's wait for its broker to stop (plugins/kmigrate_operators.py ``BrokerStoppedSensor``):
a broker that does not stop fails the window, and the rolling gate stops the rollout there
instead of waiting for a broker that never comes back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))

from kmigrate_operators import BrokerStoppedSensor  # noqa: E402

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
    sensor = BrokerStoppedSensor(task_id="wait_stopped", stop=stop)
    held = str(sample_cluster.broker_log_dirs[1])
    with pytest.raises(RuntimeError, match="broker 1 did not stop within stop_timeout_s=5 s"):
        sensor.execute_complete({}, {"stopped": False, "live": [held]})
    failed = rollout.window_failure(DAG_RUN, 1)
    assert failed is not None and failed["step"] == "wait_stopped" and held in failed["why"]
    decision, why = rollout.rollout_gate(plan, 2, DAG_RUN)
    assert decision == "stop" and why.startswith("broker 1's window failed (wait_stopped)"), why
