"""Operators of the migration DAGs. Airflow puts the plugins folder on sys.path, so DAG files
import this module by name. Operators stay thin: the work is in the Spark job and in
migration.orchestration."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator
from airflow.triggers.base import BaseTrigger, TriggerEvent

from migration.orchestration.common import (
    RUN_UNITS_APP,
    SPARK_CONN_ID,
    StepFailure,
    record_step_failure,
    spark_conf,
    spark_env,
)
from migration.runtime.airflow_adapter import connection_env
from migration.settings import ENV_CLUSTER

DEFAULT_ARGS: dict[str, Any] = {"owner": "kafka-platform", "retries": 0}
CLUSTER_PARAM_DEFAULT = "{{ var.value.get('kmigrate_cluster', '') }}"


def default_cluster() -> str:
    """The cluster description path: ``$KMIGRATE_CLUSTER``, else the ``kmigrate_cluster``
    Variable (rendered at run time)."""
    return os.environ.get(ENV_CLUSTER) or CLUSTER_PARAM_DEFAULT


class MigrationSparkJobOperator(SparkSubmitOperator):
    """spark-submit of the project's unit runner (``migration/orchestration/spark_app.py``) with the
    job file a preceding task wrote; connection ``spark_default`` (a local master by default,
    a cluster master unchanged). ``connections`` (templated) are the Airflow connections the
    job itself resolves, such as the tiered job's ``aws`` connection: the job's processes run
    outside this task's context, so each reaches them in their environment, as the task reads
    it (an empty id is skipped)."""

    template_fields = (*SparkSubmitOperator.template_fields, "connections")

    def __init__(self, *, task_id: str, application_args: Any, conn_id: str = SPARK_CONN_ID,
                 connections: Sequence[str] = (), **kwargs: Any) -> None:
        self.connections = list(connections)
        super().__init__(
            task_id=task_id,
            application=RUN_UNITS_APP,
            application_args=application_args,
            conn_id=conn_id,
            conf={**spark_conf(), **kwargs.pop("conf", {})},
            env_vars={**spark_env(), **kwargs.pop("env_vars", {})},
            name=f"kmigrate-{task_id}",
            verbose=False,
            **kwargs,
        )

    def execute(self, context: Any) -> Any:
        for conn_id in filter(None, self.connections):
            self.env_vars = {**(self.env_vars or {}), **connection_env(conn_id)}
        try:
            return super().execute(context)
        except BaseException as exc:
            self._record_failure(exc)
            raise

    def _record_failure(self, exc: BaseException) -> None:
        """What the DAG run's report says about a job that failed before its step wrote a report:
        this task, the command (masked as the provider masks it), its exit code, the Spark master,
        the last lines of spark-submit's output (orchestration/common.py ``StepFailure``)."""
        try:
            hook = self._hook
            command = master = None
            code = None
            tail: list[str] = []
            if hook is not None:
                master = (getattr(hook, "_connection", None) or {}).get("master")
                command = hook._mask_cmd(hook._build_spark_submit_command(self.application))
                proc = getattr(hook, "_submit_sp", None)
                code = proc.returncode if proc is not None else None
                tail = [hook._mask_cmd([line]) for line in getattr(hook, "_last_submit_log_lines", [])]
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            error = None if first.startswith("Cannot execute:") else first[:500]
            record_step_failure(list(self.application_args or []),
                                StepFailure(task_id=self.task_id, command=command, exit_code=code, master=master,
                                            log_tail=tail, error=error))
        except Exception as recording:  # never hide the job's own failure behind this one
            self.log.warning("could not record the failure for the DAG run's report: %s", recording)


class LogDirLockReleasedTrigger(BaseTrigger):
    """Fires when no process holds the lock of any of ``log_dirs`` (the broker stopped), or at
    ``deadline`` (epoch seconds) with the log dirs still held. Runs in the triggerer, so a
    window waiting for an operator holds no worker slot."""

    def __init__(self, log_dirs: list[str], deadline: float, poll_s: float = 2.0) -> None:
        super().__init__()
        self.log_dirs = list(log_dirs)
        self.deadline = deadline
        self.poll_s = poll_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"log_dirs": self.log_dirs, "deadline": self.deadline, "poll_s": self.poll_s})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from migration.orchestration.upgrade_rollout import live_log_dirs

        while True:
            live = await asyncio.to_thread(live_log_dirs, self.log_dirs)
            if not live:
                yield TriggerEvent({"stopped": True, "live": []})
                return
            if time.time() >= self.deadline:
                yield TriggerEvent({"stopped": False, "live": live})
                return
            await asyncio.sleep(self.poll_s)


class BrokerStoppedSensor(BaseOperator):
    """Waits, deferred, until the broker a window stopped (or asked the operator to stop) has
    released its log dir locks; fails with the timeout named when it has not in time, and marks
    the window failed (its ``window`` dir) so the rollout stops there. ``stop`` is what the stop
    task returned (templated: an XComArg of the mapped group)."""

    template_fields = ("stop",)

    def __init__(self, *, stop: Any, poll_s: float = 2.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stop = stop
        self.poll_s = poll_s

    def execute(self, context: Any) -> Any:
        from migration.orchestration.upgrade_rollout import live_log_dirs

        live = live_log_dirs(self.stop["log_dirs"])
        if not live:
            return {"broker_id": self.stop["broker_id"], "stopped": True}
        if not self.stop.get("managed"):
            self._fail(f"broker {self.stop['broker_id']} is running (lock held: {', '.join(live)}) and the rollout "
                       "was not asked to stop it: stop it, or trigger with prestage")
        self.log.info("%s", self.stop.get("note") or f"waiting for broker {self.stop['broker_id']} to stop")
        self.defer(trigger=LogDirLockReleasedTrigger(self.stop["log_dirs"], time.time() + self.stop["timeout_s"],
                                                     self.poll_s),
                   method_name="execute_complete")

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        if not event.get("stopped"):
            held = ", ".join(event["live"])
            self._fail(f"broker {self.stop['broker_id']} did not stop within stop_timeout_s={self.stop['timeout_s']} "
                       f"s: its log dir lock is still held ({held})")
        return {"broker_id": self.stop["broker_id"], "stopped": True}

    def _fail(self, why: str) -> NoReturn:
        from migration.orchestration.upgrade_rollout import mark_window_failed

        if self.stop.get("window"):
            mark_window_failed(Path(self.stop["window"]), "wait_stopped", why)
        raise RuntimeError(why)
