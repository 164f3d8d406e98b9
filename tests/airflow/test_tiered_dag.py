"""``airflow dags test tiered_storage_readiness`` against a moto server on loopback: a first
scheduled run stages what is ready, a second finds nothing dirty and submits no Spark job,
and budgeted runs serve every partition in turn."""

from __future__ import annotations

import json
import sqlite3

import pytest
from support.moto import MotoServer

SECRET = "kmigrate-dag-test-secret-Hq2rW9"


@pytest.fixture
def tier_env(airflow_base_env, tmp_path):
    server = MotoServer(tmp_path / "moto.log")
    server.start()
    import boto3

    boto3.client("s3", endpoint_url=server.url, region_name="us-east-1", aws_access_key_id="k",
                 aws_secret_access_key=SECRET).create_bucket(Bucket="tiered-dag-test")
    env = {**airflow_base_env, "KMIGRATE_OUT": str(tmp_path / "out"),
           "AIRFLOW_CONN_KMIGRATE_S3": json.dumps({"conn_type": "aws", "login": "k", "password": SECRET,
                                                    "extra": {"endpoint_url": server.url,
                                                              "region_name": "us-east-1"}})}
    yield env, server
    server.kill()


def _reports(tmp_path):
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "out" / "reports").glob("*/report.json"))]


def test_second_scheduled_run_finds_nothing_dirty_and_submits_no_spark(tier_env, dags_test, sample_cluster, tmp_path,
                                                                        private_airflow_home):
    env, server = tier_env
    env = {**env, "AIRFLOW_HOME": str(private_airflow_home)}
    desc = json.loads(sample_cluster.description_path.read_text())
    for node in desc["nodes"]:
        node["queue"] = f"kafka-host-{node['id']}"  # one worker per broker host
    sample_cluster.description_path.write_text(json.dumps(desc))
    # One broker keeps the test short; broker 2 holds a v2 partition and legacy ones, which get epoch 0.
    conf = {"cluster": str(sample_cluster.description_path), "bucket": "tiered-dag-test", "brokers": [2],
            "assign_leader_epoch": True}
    rc, state = dags_test(env, "tiered_storage_readiness", conf, tmp_path / "run1.log")
    log1 = (tmp_path / "run1.log").read_text()
    assert (rc, state) == (0, "success"), log1[-5000:]
    assert log1.count("Spark-Submit cmd") == 2  # snapshots, then upload
    # broker 2's tasks were queued on its host's queue (the cluster policy), the others on the default
    with sqlite3.connect(private_airflow_home / "airflow.db") as db:
        queues = dict(db.execute("SELECT task_id, queue FROM task_instance WHERE dag_id = ? AND map_index >= 0",
                                 ("tiered_storage_readiness",)).fetchall())
        others = {q for (q,) in db.execute("SELECT queue FROM task_instance WHERE dag_id = ? AND map_index < 0",
                                           ("tiered_storage_readiness",))}
    assert {t for t in queues if t.startswith("broker.")} >= {"broker.discover", "broker.upload", "broker.finish"}
    assert set(queues.values()) == {"kafka-host-2"} and others == {"default"}, (queues, others)
    rc, state = dags_test(env, "tiered_storage_readiness", conf, tmp_path / "run2.log")
    log2 = (tmp_path / "run2.log").read_text()
    assert (rc, state) == (0, "success"), log2[-5000:]
    assert "Spark-Submit cmd" not in log2
    merged = [r for r in _reports(tmp_path) if r["dag_id"] == "tiered_storage_readiness"
              and len(r["brokers"]) != 1 and any("nothing changed" in w["message"] for w in r["warnings"])]
    assert merged, "the second run's report must say nothing changed"
    import boto3

    keys = [o["Key"] for o in boto3.client("s3", endpoint_url=server.url, region_name="us-east-1",
                                           aws_access_key_id="k", aws_secret_access_key=SECRET)
            .list_objects_v2(Bucket="tiered-dag-test")["Contents"]]
    assert any(k.endswith(".rsm-manifest") for k in keys) and any("events-v2-" in k for k in keys)
    # each DAG run's report went to the bucket too
    assert sum(1 for k in keys if k.startswith("kmigrate-reports/") and k.endswith("/report.json")) == 2
    for p in [tmp_path / "run1.log", tmp_path / "run2.log", *(tmp_path / "out").rglob("*.json")]:
        assert SECRET not in p.read_text(errors="replace"), p


def test_budgeted_runs_serve_every_partition_in_turn(tier_env, dags_test, sample_cluster, tmp_path):
    env, _ = tier_env
    # Each partition has about three segments: seven per run serves two of broker 2's four.
    conf = {"cluster": str(sample_cluster.description_path), "bucket": "tiered-dag-test",
            "session_name": "budgeted", "budget_segments": 7, "brokers": [2], "assign_leader_epoch": True}
    served: list[set[tuple[int, str]]] = []
    for i in range(2):
        rc, state = dags_test(env, "tiered_storage_readiness", conf, tmp_path / f"run{i}.log")
        assert state == "success", (tmp_path / f"run{i}.log").read_text()[-4000:]
        runs = sorted((tmp_path / "out" / "runs").glob("*-tier-b2/session-plan.json"), key=lambda p: p.stat().st_mtime)
        plan = json.loads(runs[-1].read_text())
        served.append({(plan["broker_id"], f"{s['topic']}-{s['partition']}") for s in plan["selected"]})
        if i == 0:  # the partitions the budget left out are said, with the budget, not silently skipped
            report = json.loads((tmp_path / "out" / "reports" / runs[-1].parent.name / "report.json").read_text())
            left = [w["message"] for w in report["warnings"] if w.get("code") == "OUTSIDE_BUDGET"]
            assert len(left) == 1 and "outside this run's budget (budget_segments 7)" in left[0], report["warnings"]
    everyone = {(2, x.name) for x in sample_cluster.broker_log_dirs[2].iterdir() if x.is_dir()}
    assert served[0] and served[0] != everyone  # the budget cut the first run short
    assert not served[0] & served[1]  # the second run served the others first (rotation)
    assert served[0] | served[1] == everyone  # every partition served in turn
