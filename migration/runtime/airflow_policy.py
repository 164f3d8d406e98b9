"""The Airflow cluster policy that sends each broker's tasks to that broker's queue (the cluster
description's ``queue``; docs/operations.md, "One worker per broker host").

A task that must run on a broker's host (its prestage, stop, window and start read and write
that broker's log dirs) names its route in ``executor_config``: ``{"kmigrate_route": {"from":
<task id>, "key": <name>}}``. The task ``from`` returned a document whose ``routes[key]`` is one
queue per map index (None: the broker names no queue). Airflow takes a mapped task's ``queue``
once for all its instances, so this policy sets each instance's queue as the scheduler creates
it (Airflow calls ``task_instance_mutation_hook`` for every mapped instance it expands, and
again whenever it copies a task's attributes onto an instance). A route whose document does not
exist yet, or names no queue, leaves the task's own queue.

Registered through the ``airflow.policy`` entry point of this package (pyproject.toml), so every
Airflow process where kmigrate is installed loads it; nothing to copy into the deployment. The
scheduler creates and expands instances, the api-server and ``airflow tasks clear`` clear them
(which copies the task's queue back, then calls the hook): install kmigrate beside each. With a
custom XCom backend the ``plan`` row holds a reference, not the routes: the tasks keep their own
queue.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance

ROUTE = "kmigrate_route"
ROUTES = "routes"  # the key of the ``from`` task's returned document that holds the routes

hookimpl = pluggy.HookimplMarker("airflow.policy")  # the marker airflow.policies exports, by its project name


def _announce() -> None:
    """Airflow marks its mutation hook as set only for a hook of ``airflow_local_settings``, and
    skips it where it bulk-creates instances (a DAG run's tasks whose count is known, as after a
    change of the DAG mid-run): loaded as an entry point (while ``airflow.settings`` initialises),
    say so too."""
    settings = sys.modules.get("airflow.settings")
    hook = getattr(settings, "task_instance_mutation_hook", None)
    if hook is not None:
        hook.is_noop = False


_announce()


def route(key: str, *, source: str = "plan") -> dict[str, Any]:
    """The ``executor_config`` of a task routed by ``routes[key]`` of task ``source``'s result."""
    return {ROUTE: {"from": source, "key": key}}


def _spec(executor_config: Any) -> Mapping[str, Any] | None:
    spec = executor_config.get(ROUTE) if isinstance(executor_config, Mapping) else None
    return spec if isinstance(spec, Mapping) else None


def routed_queue(executor_config: Any, document: Any, map_index: int) -> str | None:
    """The queue of the instance ``map_index`` (-1: unmapped, the route's first) of a task with
    ``executor_config``, given the ``from`` task's result; None when it has no route there."""
    spec = _spec(executor_config)
    if spec is None or not isinstance(document, Mapping):
        return None
    queues = (document.get(ROUTES) or {}).get(spec.get("key"))
    index = max(map_index, 0)
    if not isinstance(queues, list) or index >= len(queues):
        return None
    queue = queues[index]
    return queue if isinstance(queue, str) and queue else None


def route_source(executor_config: Any) -> str | None:
    source = (_spec(executor_config) or {}).get("from")
    return source if isinstance(source, str) else None


@hookimpl
def task_instance_mutation_hook(task_instance: TaskInstance, dag_run: DagRun | None) -> None:
    source = route_source(task_instance.executor_config)
    if source is None or dag_run is None:
        return
    from airflow.models.xcom import XComModel
    from sqlalchemy import select
    from sqlalchemy.orm import object_session

    # The scheduler's own session, in its transaction: the policy must neither open one nor commit.
    session = object_session(dag_run)
    if session is None:
        return
    with session.no_autoflush:
        row = session.scalars(select(XComModel).where(
            XComModel.dag_id == task_instance.dag_id, XComModel.run_id == task_instance.run_id,
            XComModel.task_id == source, XComModel.map_index == -1, XComModel.key == "return_value",
        )).first()
    if row is None:
        return
    queue = routed_queue(task_instance.executor_config, XComModel.deserialize_value(row), task_instance.map_index)
    if queue is not None:
        task_instance.queue = queue
