"""One verdict per run: the CLI's exit code, the report's ``status``/``exit_code`` and the Airflow
DAG run state agree, for (a) only ineligible partitions, (b) a partition that is not ready,
(c) one corrupt segment. Ineligible partitions (compacted, excluded by the operator) never fail
a run; not-ready and broken ones fail it, on every run, naming the fix."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.moto import MotoServer

from migration.orchestration.cluster import ClusterDescription, TopicExclusion

KMIGRATE = [str(Path(sys.executable).parent / "kmigrate")]
SECRET = "kmigrate-verdict-test-secret-Pw4x"
BUCKET = "verdicts"


@pytest.fixture
def env(airflow_base_env, tmp_path):
    server = MotoServer(tmp_path / "moto.log")
    server.start()
    import boto3

    boto3.client("s3", endpoint_url=server.url, region_name="us-east-1", aws_access_key_id="k",
                 aws_secret_access_key=SECRET).create_bucket(Bucket=BUCKET)
    yield {**airflow_base_env, "KMIGRATE_OUT": str(tmp_path / "out"), "AWS_ACCESS_KEY_ID": "k",
           "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1", "MOTO_URL": server.url,
           "AIRFLOW_CONN_KMIGRATE_S3": json.dumps({"conn_type": "aws", "login": "k", "password": SECRET,
                                                    "extra": {"endpoint_url": server.url,
                                                              "region_name": "us-east-1"}})}
    server.kill()


def _describe(sample, tmp_path: Path, excluded: list[str]) -> Path:
    desc = ClusterDescription.model_validate_json(sample.description_path.read_text())
    desc.excluded_topics = [TopicExclusion(topic=t, reason="kept out by this test") for t in excluded]
    path = tmp_path / "cluster-verdicts.json"
    desc.dump(path)
    return path


def _merged(out: Path, dag_id: str) -> dict:
    reports = [json.loads(p.read_text()) for p in (out / "reports").glob("*/report.json")]
    # the DAG run's own report, not a step's (…-tier-b1, …-upgrade-b1, …-preflight)
    merged = [r for r in reports if r["dag_id"] == dag_id and not re.search(r"-(b\d+|preflight)$", r["run_id"])]
    assert len(merged) == 1, [r["run_id"] for r in reports]
    return merged[0]


def _codes(report: dict, field: str) -> set[str]:
    return {f["code"] for b in report["brokers"] for p in b["partitions"] for u in p["units"] for f in u[field]}


def _corrupt_first_segment(pdir: Path) -> None:
    seg = sorted(pdir.glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[80] ^= 0x5A  # inside the first batch's CRC-covered bytes
    seg.write_bytes(bytes(data))


# (broker, topics excluded, partition to corrupt, expected (DAG state, status, exit code, codes))
TIER_CASES = {
    # broker 1: users-compacted (compacted) and three excluded topics: all ineligible
    "only-ineligible": (1, ["legacy-v0", "clicks-v1", "events-v2"], None,
                        ("success", "ok", 0), {"COMPACTED", "EXCLUDED"}, set()),
    # broker 3: audit-lat has no topic id anywhere: not ready
    "not-ready": (3, ["legacy-v0", "orders-upgraded", "payments-idempotent"], None,
                  ("failed", "failed", 1), {"EXCLUDED"}, {"NO_TOPIC_ID"}),
    # broker 1: events-v2-0 has a corrupt closed segment
    "corrupt": (1, ["legacy-v0", "clicks-v1"], "events-v2-0",
                ("failed", "failed", 1), {"COMPACTED", "EXCLUDED"}, {"SNAPSHOT_REBUILD_FAILED"}),
}


@pytest.mark.parametrize("case", list(TIER_CASES))
def test_tiered_dag_cli_and_report_agree(case, env, dags_test, sample_cluster, tmp_path):
    broker, excluded, corrupt, (dag_state, status, exit_code), warn_codes, error_codes = TIER_CASES[case]
    log_dir = sample_cluster.broker_log_dirs[broker]
    if corrupt:
        _corrupt_first_segment(log_dir / corrupt)
    cluster = _describe(sample_cluster, tmp_path, excluded)
    rc, state = dags_test(env, "tiered_storage_readiness",
                          {"cluster": str(cluster), "bucket": BUCKET, "brokers": [broker]}, tmp_path / "dag.log")
    log = (tmp_path / "dag.log").read_text()
    assert state == dag_state, log[-5000:]
    report = _merged(tmp_path / "out", "tiered_storage_readiness")
    assert (report["status"], report["exit_code"]) == (status, exit_code)
    assert _codes(report, "warnings") >= warn_codes and _codes(report, "errors") == error_codes
    ineligible = [u for b in report["brokers"] for p in b["partitions"] for u in p["units"]
                  if u["status"] == "ineligible"]
    assert ineligible and report["totals"]["units_ineligible"] == len(ineligible)
    if error_codes:
        failed = [u for b in report["brokers"] for p in b["partitions"] for u in p["units"] if u["errors"]]
        assert all("fix:" in u["errors"][0]["message"] for u in failed), failed

    cli_env = {**env, "KMIGRATE_OUT": str(tmp_path / "cli-out")}
    cli = subprocess.run([*KMIGRATE, "tier-prepare", str(log_dir), "--bucket", BUCKET, "--endpoint-url",
                          env["MOTO_URL"], "--cluster", str(cluster), "--engine", "inline"],
                         env=cli_env, capture_output=True, text=True, timeout=300)
    assert cli.returncode == exit_code, cli.stdout + cli.stderr
    assert "Traceback" not in cli.stderr
    if error_codes:  # the terminal names the partition and the fix
        assert "fix:" in cli.stdout, cli.stdout

    if case != "not-ready":
        return
    # A second scheduled run gives the same verdict: not ready stays failed until fixed or excluded.
    rc, state = dags_test(env, "tiered_storage_readiness",
                          {"cluster": str(cluster), "bucket": BUCKET, "brokers": [broker]}, tmp_path / "dag2.log")
    assert state == dag_state, (tmp_path / "dag2.log").read_text()[-5000:]


def test_upgrade_dag_with_only_ineligible_partitions_is_green(airflow_base_env, dags_test, sample_cluster, tmp_path):
    env = {**airflow_base_env, "KMIGRATE_OUT": str(tmp_path / "out")}
    log_dir = sample_cluster.broker_log_dirs[1]
    topics = sorted({p.name.rsplit("-", 1)[0] for p in log_dir.iterdir() if p.is_dir() and "-" in p.name})
    cluster = _describe(sample_cluster, tmp_path, topics)
    before = {p: p.read_bytes() for p in log_dir.rglob("*.log")}
    rc, state = dags_test(env, "message_format_upgrade",
                          {"cluster": str(cluster), "target_format": "v2", "canary_broker": 1, "brokers": [1],
                           "dry_run": False, "approval": "auto"}, tmp_path / "dag.log")
    assert (rc, state) == (0, "success"), (tmp_path / "dag.log").read_text()[-5000:]
    report = _merged(tmp_path / "out", "message_format_upgrade")
    assert (report["status"], report["exit_code"]) == ("ok", 0)
    assert report["totals"]["units_ineligible"] == len(topics) and report["totals"]["units_failed"] == 0
    assert {p: p.read_bytes() for p in log_dir.rglob("*.log")} == before

    cli = subprocess.run([*KMIGRATE, "upgrade", str(log_dir), "--to", "v2", "--engine", "inline",
                          *[a for t in topics for a in ("--exclude-topic", t)]],
                         env={**env, "KMIGRATE_OUT": str(tmp_path / "cli-out")}, capture_output=True, text=True,
                         timeout=300)
    assert cli.returncode == 0, cli.stdout + cli.stderr
