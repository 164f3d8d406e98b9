"""When a step's Spark job fails before a report is written (here preflight's spark-submit exits
1), the DAG run's report says why: the task, the command, its exit code, the Spark master and the
last lines of its log. The canary never started, so its rollback (canary.rollback) had nothing to roll back: it
is skipped, with that reason, not shown as a success."""

from __future__ import annotations

import json
import re
import sqlite3

FAKE_SPARK_SUBMIT = """#!/bin/sh
echo "fake spark-submit: starting"
echo "Exception in thread main: java.net.BindException: the failure this test wants to see"
exit 7
"""


def test_a_failed_spark_job_is_explained_on_the_dag_runs_report(airflow_base_env, private_airflow_home, dags_test,
                                                                 sample_cluster, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "spark-submit").write_text(FAKE_SPARK_SUBMIT)
    (bin_dir / "spark-submit").chmod(0o755)
    home = tmp_path / "home"
    env = {k: v for k, v in airflow_base_env.items() if k != "KMIGRATE_OUT"}
    env.update({"AIRFLOW_HOME": str(private_airflow_home), "KMIGRATE_HOME": str(home),
                "PATH": f"{bin_dir}:{airflow_base_env['PATH']}"})
    rc, state = dags_test(env, "message_format_upgrade",
                          {"cluster": str(sample_cluster.description_path), "dry_run": False, "approval": "auto"},
                          tmp_path / "dag.log")
    log = (tmp_path / "dag.log").read_text()
    assert state == "failed", log[-5000:]

    reports = [json.loads(p.read_text()) for p in (home / "reports").glob("*/report.json")]
    merged = [r for r in reports if r["dag_id"] == "message_format_upgrade" and r.get("steps")]
    assert len(merged) == 1, [r["run_id"] for r in reports]
    errors = [e["message"] for e in merged[0]["errors"]]
    why = [e for e in errors if re.search(r"-preflight-b1 failed before writing a report", e)]
    assert len(why) == 1, errors  # and so each broker's preflight (each its own Spark job, on its host)
    assert "task preflight.validate" in why[0]
    assert "spark-submit" in why[0] and "--master local[2]" in why[0]  # the command
    assert "exit code 7" in why[0] and "Spark master local[2]" in why[0]
    assert "the failure this test wants to see" in why[0]  # the last lines of its log

    with sqlite3.connect(private_airflow_home / "airflow.db") as db:
        states = dict(db.execute("SELECT task_id, state FROM task_instance").fetchall())
    assert states["canary.rollback"] == "skipped", states
    assert "nothing to roll back: broker 1's upgrade never started" in log, log[-5000:]
