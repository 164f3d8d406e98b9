"""``kmigrate rollback`` and ``kmigrate report`` take an Airflow DAG run id (as the Airflow UI and
``airflow dags trigger`` show it): they list the DAG run's step runs and act on them. Rollback
restores every upgrade step of the DAG run, the last first; report prints the DAG run's merged
report."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from migration.audit.store import ReportStore
from migration.orchestration.common import merge_reports, run_id_for

KMIGRATE = Path(sys.executable).parent / "kmigrate"
DAG_RUN = "manual__2026-11-22T01:00:00+00:00"
STATE_VARS = ("KMIGRATE_HOME", "KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_SESSIONS_URL")


def _tree(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes() + str(p.stat().st_mtime_ns).encode())
    return h.hexdigest()


def _kmigrate(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KMIGRATE), *args], env=env, capture_output=True, text=True, timeout=300)


def test_rollback_and_report_take_a_dag_run_id(sample_cluster, tmp_path):
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in STATE_VARS} | {"KMIGRATE_HOME": str(home),
                                                                          "COLUMNS": "200"}
    dirs = sample_cluster.broker_log_dirs
    before = {b: _tree(dirs[b]) for b in (1, 2)}
    steps = [run_id_for(DAG_RUN, "upgrade", f"b{b}") for b in (1, 2)]
    for b, step in zip((1, 2), steps, strict=True):
        done = _kmigrate(env, "upgrade", str(dirs[b]), "--to", "v2", "--engine", "inline", "--run-id", step)
        assert done.returncode == 0, done.stderr + done.stdout
        assert _tree(dirs[b]) != before[b]
    os.environ["KMIGRATE_HOME"], saved = str(home), os.environ.get("KMIGRATE_HOME")
    try:
        merged = merge_reports("upgrade", steps, run_id=run_id_for(DAG_RUN), params={}, dag_id="message_format_upgrade",
                               dag_run_id=DAG_RUN, store=ReportStore(home / "reports"))
    finally:
        if saved is None:
            os.environ.pop("KMIGRATE_HOME")
        else:
            os.environ["KMIGRATE_HOME"] = saved

    shown = _kmigrate(env, "report", DAG_RUN, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert f'"run_id": "{merged.run_id}"' in shown.stdout
    assert f"DAG run {DAG_RUN}: its report {merged.run_id}, merging step runs: {', '.join(steps)}" in shown.stderr

    undone = _kmigrate(env, "rollback", DAG_RUN)
    assert undone.returncode == 0, undone.stderr + undone.stdout
    assert f"DAG run {DAG_RUN}: 2 upgrade step run(s); rolling back, the last first: {steps[1]}, {steps[0]}" \
        in undone.stderr, undone.stderr
    assert undone.stdout.index(f"rollback of {steps[1]}") < undone.stdout.index(f"rollback of {steps[0]}")
    assert {b: _tree(dirs[b]) for b in (1, 2)} == before

    unknown = _kmigrate(env, "rollback", "manual__2031-01-01T00:00:00+00:00")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr, unknown.stderr
