"""tier-prepare checks the store before it writes anything (issue #13): a wrong bucket name,
endpoint URL or prefix and missing credentials exit 2, an unreachable store or a missing bucket
exits 1 with a run-level error in the report; each in one line, without a traceback, with every
log dir byte for byte as it was (no producer snapshot written) and nothing uploaded."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from migration.migrations.tier.driver import execute_tier
from migration.migrations.tier.options import TierOptions
from migration.migrations.tier.store import StoreArgumentError

from .conftest import FAKE_ACCESS_KEY, FAKE_SECRET_KEY

KMIGRATE = [sys.executable, "-m", "migration"]


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, read, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tree(dirs: list[Path]) -> dict[str, tuple[bytes, int] | None]:
    """Every file (bytes, mtime) and directory under the log dirs."""
    out: dict[str, tuple[bytes, int] | None] = {}
    for d in dirs:
        for p in sorted(d.rglob("*")):
            out[str(p)] = (p.read_bytes(), p.stat().st_mtime_ns) if p.is_file() else None
    return out


def _everything_on_the_server(s3) -> dict[str, list[str]]:
    c = s3.client()
    return {b["Name"]: [o["Key"] for o in c.list_objects_v2(Bucket=b["Name"]).get("Contents", [])]
            for b in c.list_buckets()["Buckets"]}


def _cli(sample, s3, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [*KMIGRATE, "tier-prepare", *map(str, sample.log_dirs), "--cluster", str(sample.description_path),
           "--engine", "inline", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env or {**os.environ})


def _no_credentials_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    # The fixture points the shared files at nothing; no instance metadata either (no 1 s wait for it).
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    return env


CASES = {
    # name: (extra arguments, no credentials?, exit code, what the one line says)
    "bad bucket name": (["--bucket", "Tier_Staging"], False, 2,
                        "--bucket: bucket name 'Tier_Staging' has characters S3 does not allow"),
    "malformed endpoint": (["--bucket", "tier-staging", "--endpoint-url", "localhost:{moto_port}"], False, 2,
                           "--endpoint-url: endpoint URL 'localhost:{moto_port}' has no scheme"),
    "credentials in the endpoint": (["--bucket", "tier-staging", "--endpoint-url",
                                     "http://{access}:{secret}@127.0.0.1:{moto_port}"], False, 2,
                                    "endpoint URL has credentials in it (not repeated here)"),
    "bad prefix": (["--bucket", "tier-staging", "--endpoint-url", "{moto}", "--prefix", "../up/"], False, 2,
                   "--prefix: key prefix '../up/'"),
    "missing credentials": (["--bucket", "tier-staging", "--endpoint-url", "{moto}"], True, 2,
                            "no AWS credentials (none found): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
    "closed port": (["--bucket", "tier-staging", "--endpoint-url", "http://127.0.0.1:{closed}"], False, 1,
                    "store not usable, nothing written or uploaded: bucket tier-staging at "
                    "http://127.0.0.1:{closed}: cannot connect"),
    "no such bucket": (["--bucket", "no-such-bucket", "--endpoint-url", "{moto}"], False, 1,
                       "bucket 'no-such-bucket' does not exist at {moto}"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_wrong_store_refused_before_anything_is_written(case, sample_cluster, s3):
    args, no_creds, code, message = CASES[case]
    subst = {"moto": s3.endpoint, "moto_port": str(s3.server.port), "closed": str(_closed_port()),
             "access": FAKE_ACCESS_KEY, "secret": FAKE_SECRET_KEY}
    args = [a.format(**subst) for a in args]
    message = message.format(**subst)
    before = _tree(sample_cluster.log_dirs)
    proc = _cli(sample_cluster, s3, *args, env=_no_credentials_env() if no_creds else None)
    output = proc.stdout + proc.stderr
    assert proc.returncode == code, output
    assert "Traceback" not in output
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kmigrate tier-prepare: "), proc.stderr
    assert message in lines[0], lines[0]
    assert proc.stdout.strip() == ""
    assert FAKE_SECRET_KEY not in output
    assert _tree(sample_cluster.log_dirs) == before  # no snapshot, no checkpoint, no lock file left
    assert all(keys == [] for keys in _everything_on_the_server(s3).values())
    reports = [json.loads(p.read_text()) for p in s3.out.rglob("report.json")]
    if code == 2:  # a usage error: no run happened
        assert reports == []
    else:  # the store is the problem: a run-level error, in the report too
        (report,) = reports
        assert (report["status"], report["exit_code"], report["totals"]["units"]) == ("failed", 1, 0)
        assert [e["message"] for e in report["errors"]] == [lines[0].removeprefix("kmigrate tier-prepare: ")
                                                            .rsplit(" (run ", 1)[0]]
        assert report["run_id"] in lines[0]
    for p in s3.out.rglob("*"):
        assert not p.is_file() or FAKE_SECRET_KEY.encode() not in p.read_bytes(), p


def test_unreachable_store_is_a_run_level_error_of_the_driver(sample_cluster, s3):
    """execute_tier itself (the inline and Spark paths share it) checks before its first write."""
    before = _tree(sample_cluster.log_dirs)
    opts = TierOptions(bucket=s3.bucket, endpoint_url=f"http://127.0.0.1:{_closed_port()}", max_attempts=1,
                       connect_timeout=1, metadata_log_dirs=[str(sample_cluster.controller_dir)])
    report = execute_tier(sample_cluster.log_dirs, options=opts)
    assert report.exit_code() == 1 and report.totals.units == 0 and not report.brokers
    assert "cannot connect" in report.errors[0].message and "\n" not in report.errors[0].message
    assert _tree(sample_cluster.log_dirs) == before


def test_missing_credentials_raise_before_anything_is_written(sample_cluster, s3, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    before = _tree(sample_cluster.log_dirs)
    opts = TierOptions(bucket=s3.bucket, endpoint_url=s3.endpoint,
                       metadata_log_dirs=[str(sample_cluster.controller_dir)])
    with pytest.raises(StoreArgumentError, match="no AWS credentials"):
        execute_tier(sample_cluster.log_dirs, options=opts)
    assert _tree(sample_cluster.log_dirs) == before
    # A dry run and a snapshots-only run use no store: they need no credentials.
    dry = execute_tier(sample_cluster.log_dirs, options=opts.model_copy(update={"dry_run": True}),
                       only_partitions=["events-v2-0"])
    assert dry.exit_code() == 0, [u.errors for *_, u in dry.problem_units()]
    assert _tree(sample_cluster.log_dirs) == before


def test_dag_discover_checks_the_store_before_the_session_and_the_plan(sample_cluster, s3, monkeypatch):
    """The DAG's discover step fails with one line before anything is leased, planned or
    written; finish turns it into the broker's report (a run-level error)."""
    from migration.orchestration import tiered_schedule

    monkeypatch.setenv("AIRFLOW_CONN_KMIGRATE_S3", json.dumps({
        "conn_type": "aws", "login": FAKE_ACCESS_KEY, "password": FAKE_SECRET_KEY,
        "extra": {"endpoint_url": f"http://127.0.0.1:{_closed_port()}", "region_name": "us-east-1"}}))
    raw = {"cluster": str(sample_cluster.description_path), "bucket": s3.bucket}
    before = _tree(sample_cluster.log_dirs)
    with pytest.raises(RuntimeError) as caught:
        tiered_schedule.discover(raw, 2, "manual__2026-01-01T00:00:00+00:00")
    message = str(caught.value)
    assert message.startswith("broker 2: ") and "cannot connect" in message and "\n" not in message
    assert FAKE_SECRET_KEY not in message
    assert _tree(sample_cluster.log_dirs) == before
    done = tiered_schedule.finish(raw, 2, "manual__2026-01-01T00:00:00+00:00")
    assert done["exit_code"] == 1 and done["session"]["committed"] is False
    (report,) = [json.loads(p.read_text()) for p in s3.out.rglob("report.json")]
    assert "cannot connect" in report["errors"][0]["message"]
    assert not list((s3.out / "runs" / done["run_id"]).glob("job*.json"))
    # A wrong bucket param is refused the same way, in TierOptions' words.
    with pytest.raises(RuntimeError, match="bucket: bucket name 'Bad_Bucket'"):
        tiered_schedule.discover({**raw, "bucket": "Bad_Bucket"}, 2, "manual__2")
    assert _tree(sample_cluster.log_dirs) == before
    for p in s3.out.rglob("*"):
        assert not p.is_file() or FAKE_SECRET_KEY.encode() not in p.read_bytes(), p
