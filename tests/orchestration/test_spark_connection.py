"""The DAGs' first task checks ``spark_default`` before any Spark job is submitted: a missing
connection (the Spark provider would fall back to YARN) or one whose master is YARN while the
cluster description does not ask for YARN is one line naming the connection and how to set it."""

from __future__ import annotations

import pytest

from migration.orchestration.cluster import ClusterDescription
from migration.orchestration.common import SparkConnectionError, check_spark_connection, spark_master
from migration.runtime.airflow_adapter import ConnectionInfo

DESC = ClusterDescription(nodes=[{"id": 1, "log_dirs": ["/data/kafka-logs"]}])
YARN_DESC = ClusterDescription(nodes=[{"id": 1, "log_dirs": ["/data/kafka-logs"]}], spark_on_yarn=True)


def _lookup(conn: ConnectionInfo | None):
    return lambda conn_id: conn


def test_a_missing_spark_default_is_one_line_naming_it_and_how_to_set_it():
    with pytest.raises(SparkConnectionError) as exc:
        check_spark_connection(DESC, lookup=_lookup(None))
    msg = str(exc.value)
    assert "\n" not in msg
    assert "spark_default is missing" in msg and "YARN" in msg
    assert "airflow connections add spark_default --conn-type spark --conn-host 'local[2]'" in msg
    assert "AIRFLOW_CONN_SPARK_DEFAULT" in msg


@pytest.mark.parametrize("conn", [ConnectionInfo(conn_id="spark_default", conn_type="spark", host="yarn"),
                                  ConnectionInfo(conn_id="spark_default", conn_type="yarn", host="rm.example")])
def test_a_yarn_master_is_refused_unless_the_cluster_description_asks_for_yarn(conn):
    with pytest.raises(SparkConnectionError) as exc:
        check_spark_connection(DESC, lookup=_lookup(conn))
    assert "\n" not in str(exc.value) and "spark_on_yarn" in str(exc.value) and "spark_default" in str(exc.value)
    assert check_spark_connection(YARN_DESC, lookup=_lookup(conn)).startswith("yarn")


@pytest.mark.parametrize(("conn", "master"), [
    (ConnectionInfo(conn_id="spark_default", conn_type="spark", host="local[2]"), "local[2]"),
    (ConnectionInfo(conn_id="spark_default", conn_type="spark", host="spark://m.example", port=7077),
     "spark://m.example:7077"),
    (ConnectionInfo(conn_id="spark_default", conn_type="spark", host="m.example", port=7077), "spark://m.example:7077"),
])
def test_other_masters_pass_as_the_spark_provider_resolves_them(conn, master):
    assert spark_master(conn) == master
    assert check_spark_connection(DESC, lookup=_lookup(conn)) == master


def test_the_tiered_dag_checks_spark_default_in_its_first_task_only(sample_cluster, monkeypatch):
    """The tiered DAG's first task checks the connection; the final report, which merges the
    brokers' reports, lists the same brokers without it (no Spark job is left to submit)."""
    from migration.orchestration import tiered_schedule
    from migration.runtime import airflow_adapter

    monkeypatch.setattr(airflow_adapter, "find_connection", lambda conn_id: None)
    raw = {"cluster": str(sample_cluster.description_path)}
    with pytest.raises(SparkConnectionError, match="spark_default is missing"):
        tiered_schedule.plan_step(raw)
    assert tiered_schedule.brokers(raw) == [b.id for b in ClusterDescription.load(sample_cluster.description_path)
                                            .brokers]
