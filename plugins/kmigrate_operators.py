"""Operators of the migration DAGs. Airflow puts the plugins folder on sys.path, so DAG files
import this module by name. Operators stay thin: the work is in the Spark job and in
migration.orchestration."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

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
