"""The cluster policy that sends a broker's tasks to its queue (migration/runtime/airflow_policy.py).
The whole path, the scheduler expanding the DAG's mapped tasks, is judged by
tests/airflow/test_upgrade_dag.py (each task instance's queue in Airflow's database)."""

from __future__ import annotations

from importlib.metadata import entry_points

from migration.runtime.airflow_policy import ROUTE, route, routed_queue

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
