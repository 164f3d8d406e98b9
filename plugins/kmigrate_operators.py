"""Operators of the migration DAGs. Airflow puts the plugins folder on sys.path, so DAG files
import this module by name. Operators stay thin: the work is in the Spark job and in
migration.orchestration."""

from __future__ import annotations

import os
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from migration.orchestration.common import RUN_UNITS_APP, spark_conf, spark_env

DEFAULT_ARGS: dict[str, Any] = {"owner": "kafka-platform", "retries": 0}
CLUSTER_PARAM_DEFAULT = "{{ var.value.get('kmigrate_cluster', '') }}"


def default_cluster() -> str:
    """The cluster description path: ``$KMIGRATE_CLUSTER``, else the ``kmigrate_cluster``
    Variable (rendered at run time)."""
    return os.environ.get("KMIGRATE_CLUSTER") or CLUSTER_PARAM_DEFAULT


class MigrationSparkJobOperator(SparkSubmitOperator):
    """spark-submit of the project's unit runner (``migration/orchestration/spark_app.py``) with the
    job file a preceding task wrote; connection ``spark_default`` (a local master by default,
    a cluster master unchanged)."""

    def __init__(self, *, task_id: str, application_args: Any, conn_id: str = "spark_default", **kwargs: Any) -> None:
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
