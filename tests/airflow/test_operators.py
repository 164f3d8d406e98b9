"""The Spark job operator hands the connections a job resolves to the job's processes, which run
outside the task's context and cannot read Airflow's connections themselves."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator  # noqa: E402
from kmigrate_operators import MigrationSparkJobOperator  # noqa: E402

CONN = {"conn_type": "aws", "login": "AKIAOPERATORTEST", "password": "not-a-real-secret",
        "extra": {"region_name": "eu-west-1"}}


def _submitted_env(monkeypatch: pytest.MonkeyPatch, op: MigrationSparkJobOperator) -> dict[str, str]:
    seen: dict[str, str] = {}

    def submit(self: SparkSubmitOperator, context: Any) -> None:
        seen.update(self.env_vars or {})

    monkeypatch.setattr(SparkSubmitOperator, "execute", submit)
    op.execute({})
    return seen


def test_each_named_connection_reaches_the_job_as_the_task_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KMIGRATE_OP_S3", json.dumps(CONN))
    op = MigrationSparkJobOperator(task_id="upload", application_args=["job.json"], connections=["kmigrate_op_s3", ""])
    env = _submitted_env(monkeypatch, op)
    handed = json.loads(env["AIRFLOW_CONN_KMIGRATE_OP_S3"])
    assert (handed["login"], handed["password"], handed["extra"]) == (CONN["login"], CONN["password"], CONN["extra"])
    assert "PYSPARK_PYTHON" in env  # the job's own environment is kept


def test_no_connection_is_handed_unless_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KMIGRATE_OP_S3", json.dumps(CONN))
    env = _submitted_env(monkeypatch, MigrationSparkJobOperator(task_id="snapshots", application_args=["job.json"]))
    assert not [k for k in env if k.startswith("AIRFLOW_CONN_")]


def test_the_connections_are_templated() -> None:
    assert "connections" in MigrationSparkJobOperator.template_fields
