"""Without ``spark_default`` (as on a machine where nobody created it), ``airflow dags test
message_format_upgrade`` fails its first task with one line naming the connection and how to set
it; no spark-submit, to YARN or anywhere, is ever run."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def test_missing_spark_default_fails_the_first_task_naming_the_connection(airflow_base_env, private_airflow_home,
                                                                          dags_test, sample_cluster, tmp_path):
    with sqlite3.connect(private_airflow_home / "airflow.db") as db:
        db.execute("DELETE FROM connection WHERE conn_id = 'spark_default'")
    env = {k: v for k, v in airflow_base_env.items() if k != "AIRFLOW_CONN_SPARK_DEFAULT"}
    env.update({"AIRFLOW_HOME": str(private_airflow_home), "KMIGRATE_HOME": str(tmp_path / "home")})
    env.pop("KMIGRATE_OUT", None)
    rc, state = dags_test(env, "message_format_upgrade",
                          {"cluster": str(sample_cluster.description_path), "dry_run": False, "approval": "auto"},
                          tmp_path / "dag.log")
    log = (tmp_path / "dag.log").read_text()
    assert state == "failed", log[-5000:]
    assert "Spark-Submit cmd" not in log and "--master yarn" not in log, log[-5000:]
    lines = [line for line in log.splitlines() if "Airflow connection spark_default is missing" in line]
    assert lines, log[-5000:]
    assert "airflow connections add spark_default --conn-type spark --conn-host 'local[2]'" in lines[0]
    # the first task failed; nothing after it ran
    assert not list(Path(tmp_path / "home").glob("runs/*/job.json"))
