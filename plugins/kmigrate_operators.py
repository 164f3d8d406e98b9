"""Operators of the migration DAGs. Airflow puts the plugins folder on sys.path, so DAG files
import this module by name. Operators stay thin: the work is in the Spark job and in
migration.orchestration."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
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
TRIGGER_GRACE_S = 300  # beyond a wait's own deadline, before Airflow fails a wait no triggerer ran
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


class LogDirLockTrigger(BaseTrigger):
    """Fires when no process holds the lock of any of ``log_dirs`` (``held`` false: the broker
    stopped) or when one holds every one of them (``held``: it runs again), or at ``deadline``
    (epoch seconds) without. Runs in a triggerer, so a window waiting for an operator holds no
    worker slot. A lock is a process's on one host: the trigger follows its task's queue
    (``[triggerer] queues_enabled``), and fires at once, saying so, where the broker's log dirs
    are not (a triggerer of another host)."""

    def __init__(self, log_dirs: list[str], deadline: float, poll_s: float = 2.0, *, broker_id: int,
                 held: bool = False, queue: str | None = None) -> None:
        super().__init__()
        self.log_dirs = list(log_dirs)
        self.deadline = deadline
        self.poll_s = poll_s
        self.broker_id = broker_id
        self.held = held
        self.queue = queue

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"log_dirs": self.log_dirs, "deadline": self.deadline, "poll_s": self.poll_s,
                 "broker_id": self.broker_id, "held": self.held, "queue": self.queue})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from migration.orchestration.cluster import NodeSpec, WrongHost
        from migration.orchestration.upgrade_rollout import live_log_dirs, locks_as_wanted

        try:
            NodeSpec(id=self.broker_id, log_dirs=self.log_dirs, queue=self.queue).check_on_this_host()
        except WrongHost as exc:
            yield TriggerEvent({"done": False, "wrong_host": f"triggerer: {exc}", "live": []})
            return
        while True:
            live = await asyncio.to_thread(live_log_dirs, self.log_dirs)
            if locks_as_wanted(self.log_dirs, live, held=self.held):
                yield TriggerEvent({"done": True, "live": live})
                return
            if time.time() >= self.deadline:
                yield TriggerEvent({"done": False, "live": live})
                return
            await asyncio.sleep(self.poll_s)


class BrokerLockSensor(BaseOperator):
    """Waits, deferred, until the broker a window stopped (or asked the operator to stop) has
    released its log dir locks (``until="stopped"``), or until the broker its window ended holds
    them again (``until="running"``: the operator starts it); fails with the timeout named when
    it does not in time, and marks the window failed (its ``window`` dir) so the rollout stops
    there. ``window`` is what the stop or start task returned (templated: an XComArg of the
    mapped group). Its instance runs on the broker's queue (the cluster policy), and its trigger
    on that queue's triggerer."""

    template_fields = ("window",)
    VERB = {"stopped": "stop", "running": "start"}
    STEP = {"stopped": "wait_stopped", "running": "wait_started"}

    def __init__(self, *, window: Any, until: str = "stopped", poll_s: float = 2.0, **kwargs: Any) -> None:
        if until not in ("stopped", "running"):
            raise ValueError(f"until must be 'stopped' or 'running', not {until!r}")
        super().__init__(**kwargs)
        self.window = window
        self.until = until
        self.poll_s = poll_s

    def execute(self, context: Any) -> Any:
        from migration.orchestration.cluster import NodeSpec, WrongHost
        from migration.orchestration.upgrade_rollout import live_log_dirs, take_back_failure

        w = self.window
        if "log_dirs" not in w:  # nothing to wait for: the DAG run did not stop this broker
            return {"broker_id": w["broker_id"], self.until: False, "why": w.get("why")}
        take_back_failure(Path(w["window"]), self.STEP[self.until])  # a retry of this wait
        # The queue this instance was routed to (the cluster policy): the trigger takes it too.
        self.queue = context["ti"].queue or self.queue
        try:  # a lock is seen only on its own host: never report one as released from elsewhere
            NodeSpec(id=w["broker_id"], log_dirs=w["log_dirs"], queue=self.queue).check_on_this_host()
        except WrongHost as exc:
            self._fail(str(exc))
        if self._done(live_log_dirs(w["log_dirs"])):
            return self._complete()
        if self.until == "stopped" and not w.get("managed"):
            self._fail(f"broker {w['broker_id']} is running (lock held: {', '.join(w['log_dirs'])}) and the rollout "
                       "was not asked to stop it: stop it, or trigger with prestage")
        self.log.info("%s", w.get("note") or f"waiting for broker {w['broker_id']} to {self.VERB[self.until]}")
        # Airflow hands the trigger the operator's queue, set above to this instance's. The
        # deferral's own timeout fails the wait (resume_execution) when no triggerer runs it.
        self.defer(trigger=LogDirLockTrigger(w["log_dirs"], time.time() + w["timeout_s"], self.poll_s,
                                             broker_id=w["broker_id"], held=self.until == "running",
                                             queue=self.queue),
                   method_name="execute_complete",
                   timeout=timedelta(seconds=w["timeout_s"] + TRIGGER_GRACE_S))

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Any) -> Any:
        from airflow.sdk.exceptions import TaskDeferralError, TaskDeferralTimeout

        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except (TaskDeferralTimeout, TaskDeferralError) as exc:
            self._fail(f"broker {self.window['broker_id']}: the wait's trigger did not answer ({exc}); is a "
                       f"triggerer running for queue {self.queue!r} (airflow triggerer --queues {self.queue})?")

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        from migration.orchestration.upgrade_rollout import live_log_dirs, unheld_log_dirs

        w = self.window
        if event.get("wrong_host"):
            self._fail(f"broker {w['broker_id']}: {event['wrong_host']}; set [triggerer] queues_enabled and run a "
                       "triggerer on each broker host for its queue (docs/operations.md, \"One worker per broker "
                       "host\")")
        if not event.get("done") or not self._done(live_log_dirs(w["log_dirs"])):
            live = event.get("live") or []
            if self.until == "stopped":
                state = f"still held ({', '.join(live or w['log_dirs'])})"
            else:
                state = f"not held ({', '.join(unheld_log_dirs(w['log_dirs'], live))})"
            self._fail(f"broker {w['broker_id']} did not {self.VERB[self.until]} within stop_timeout_s="
                       f"{w['timeout_s']} s: its log dir lock is {state}")
        return self._complete()

    def _done(self, live: list[str]) -> bool:
        from migration.orchestration.upgrade_rollout import locks_as_wanted

        return locks_as_wanted(self.window["log_dirs"], live, held=self.until == "running")

    def _complete(self) -> dict[str, Any]:
        if self.until == "running":
            from migration.orchestration.upgrade_rollout import confirm_running

            confirm_running(Path(self.window["window"]), self.window["log_dirs"])
        return {"broker_id": self.window["broker_id"], self.until: True}

    def _fail(self, why: str) -> NoReturn:
        from migration.orchestration.upgrade_rollout import mark_window_failed

        if self.window.get("window"):
            mark_window_failed(Path(self.window["window"]), self.STEP[self.until], why)
        raise RuntimeError(why)
