"""The cluster policy that sends a broker's tasks to its queue (migration/runtime/airflow_policy.py).
The whole path, the scheduler expanding the DAG's mapped tasks, is judged by
tests/airflow/test_upgrade_dag.py (each task instance's queue in Airflow's database)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from migration.runtime.airflow_policy import ROUTE, route, routed_queue

ROOT = Path(__file__).resolve().parents[2]
ROUTES = {"routes": {"all": ["host-1", None, "host-3"], "canary": ["host-1"]}}


def test_an_instance_takes_the_queue_of_its_map_index():
    config = route("all")
    assert config == {ROUTE: {"from": "plan", "key": "all"}}
    assert [routed_queue(config, ROUTES, i) for i in range(3)] == ["host-1", None, "host-3"]
    assert routed_queue(route("canary"), ROUTES, -1) == "host-1"  # unmapped: the route's first


def test_no_route_leaves_the_tasks_own_queue():
    assert routed_queue({}, ROUTES, 0) is None  # a task without a route
    assert routed_queue(None, ROUTES, 0) is None
    assert routed_queue(route("rest"), ROUTES, 0) is None  # no such route
    assert routed_queue(route("all"), ROUTES, 7) is None  # more instances than brokers routed
    assert routed_queue(route("all"), None, 0) is None  # the plan has not run yet
    assert routed_queue(route("all"), {"canary": 1}, 0) is None  # a result without routes


def test_the_policy_is_registered_for_airflow():
    """Every Airflow process where kmigrate is installed loads it (Airflow loads the plugins of
    the ``airflow.policy`` entry point group at start)."""
    found = [e for e in entry_points(group="airflow.policy") if e.value == "migration.runtime.airflow_policy"]
    assert len(found) == 1, list(entry_points(group="airflow.policy"))


def test_airflow_calls_the_policy_wherever_it_creates_instances(tmp_path):
    """Airflow marks its hook as set only for ``airflow_local_settings``; without the mark it
    bulk-creates some instances without calling it (models/dagrun.py), and they would keep the
    default queue. An Airflow process as it starts: the policy is loaded, and marked."""
    probe = ("import airflow.settings as s\n"
             "impls = s.get_policy_plugin_manager().hook.task_instance_mutation_hook.get_hookimpls()\n"
             "print([i.plugin_name for i in impls], s.task_instance_mutation_hook.is_noop)\n")
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW_CONFIG": str(ROOT / "airflow.cfg")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "['kmigrate'] False", out.stdout
