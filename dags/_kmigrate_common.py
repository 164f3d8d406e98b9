"""Wiring shared by the migration DAGs: defaults and the Spark submit operator factory.
(Files starting with '_' hold no DAG; Airflow's processor still parses them, cheaply.)"""

from __future__ import annotations

import os
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from migration.orchestration.common import RUN_UNITS_APP, spark_conf, spark_env

DEFAULT_ARGS: dict[str, Any] = {"owner": "kafka-platform", "retries": 0}
CLUSTER_VARIABLE = "kmigrate_cluster"


def default_cluster() -> str:
    """The cluster description path: $KMIGRATE_CLUSTER, else the 'kmigrate_cluster' Variable
    resolved at run time by the templated param default."""
    return os.environ.get("KMIGRATE_CLUSTER", "")


def spark_job(task_id: str, application_args: Any, **kwargs: Any) -> SparkSubmitOperator:
    """A heavy step: spark-submit of the project's unit runner on connection spark_default
    (local master by default; a cluster master works unchanged)."""
    return SparkSubmitOperator(
        task_id=task_id,
        application=RUN_UNITS_APP,
        application_args=application_args,
        conn_id="spark_default",
        conf=spark_conf(),
        env_vars=spark_env(),
        name=f"kmigrate-{task_id}",
        verbose=False,
        **kwargs,
    )
