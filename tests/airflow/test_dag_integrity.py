"""The DAG files import cleanly in Airflow and are shaped as the runbook says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

DAGS = {"message_format_upgrade", "zero_checkpoint_unification", "tiered_storage_readiness"}


def test_dags_import_without_errors(airflow_base_env):
    out = subprocess.run([str(BIN / "airflow"), "dags", "list-import-errors", "-o", "json"], env=airflow_base_env,
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "[]"
    assert last in ("[]", "No data found"), out.stdout[-3000:]


def test_dag_files_hold_wiring_not_logic():
    for f in (ROOT / "dags").glob("*.py"):
        text = f.read_text()
        # logic lives in migration.orchestration; a DAG file holds no loops over files
        assert "os.scandir" not in text and "open(" not in text, f
        assert len(text.splitlines()) < 200, f


def test_upgrade_dag_structure(airflow_base_env):
    out = subprocess.run([str(BIN / "airflow"), "tasks", "list", "message_format_upgrade"], env=airflow_base_env,
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    ids = {line.strip() for line in out.stdout.splitlines() if line.strip() and " " not in line.strip()}
    for expected in ("preflight.validate", "prestage", "canary.upgrade", "canary.verify", "canary.rollback",
                     "canary.start", "approve_human", "approve_auto", "rolling.prepare", "rolling.upgrade",
                     "rolling.rollback", "discard_unused_stage", "report"):
        assert expected in ids, (expected, ids)
    text = (ROOT / "dags" / "message_format_upgrade.py").read_text()
    for param in ("target_format", "canary_broker", "dry_run", "brokers", "stamp_v0_with_mtime"):
        assert f'"{param}": Param(' in text


def test_every_dag_ends_with_the_same_verdict_step():
    """The leaf of every DAG is its ``report`` task, run whatever happened before it, and it hands
    the DAG run's report to ``orchestration.common.dag_run_verdict``: one verdict per run."""
    import ast

    for name in DAGS:
        tree = ast.parse((ROOT / "dags" / f"{name}.py").read_text())
        reports = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "report"]
        assert len(reports) == 1, name
        decorator = ast.unparse(reports[0].decorator_list[0])
        assert "trigger_rule='all_done'" in decorator, (name, decorator)
        calls = [ast.unparse(c.func) for c in ast.walk(reports[0]) if isinstance(c, ast.Call)]
        assert "dag_run_verdict" in calls, (name, calls)


def test_the_verdict_fails_the_run_exactly_when_the_report_is_not_clean():
    import pytest

    from migration.audit.model import RunKind, RunReport
    from migration.orchestration.common import dag_run_verdict

    clean = RunReport.start(RunKind.UPGRADE, {}, run_id="upgrade-verdict-clean").finish()
    assert dag_run_verdict(clean, "upgrade")["exit_code"] == 0
    refused = RunReport.start(RunKind.UPGRADE, {}, run_id="upgrade-verdict-refused")
    refused.refuse("a live broker holds the lock")
    refused.finish()
    with pytest.raises(RuntimeError, match="upgrade report is not clean"):
        dag_run_verdict(refused, "upgrade")


UPSTREAM = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
dag = DagBag(sys.argv[1]).dags["message_format_upgrade"]
print(json.dumps({t: sorted(dag.get_task(t).upstream_task_ids) for t in sys.argv[2:]}))
"""


def test_nothing_touches_a_stage_while_a_prestage_or_window_may_write_it(airflow_base_env):
    """The stages of brokers whose window never ran are discarded after every prestage and every
    window ended, whatever failed: a prestage still running when the canary failed, a rollback.
    Its trigger rule (all_done) waits for its direct upstream tasks only."""
    env = {**airflow_base_env, "PYTHONPATH": str(ROOT / "plugins")}
    out = subprocess.run([sys.executable, "-c", UPSTREAM, str(ROOT / "dags"), "discard_unused_stage", "report"],
                         env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    upstream = json.loads(out.stdout.strip().splitlines()[-1])
    for task in ("prestage", "canary.rollback", "canary.wait_started", "rolling.rollback", "rolling.wait_started"):
        assert task in upstream["discard_unused_stage"], (task, upstream)
    assert "discard_unused_stage" in upstream["report"]
