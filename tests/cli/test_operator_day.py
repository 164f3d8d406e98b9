"""Issue 28 (an operator's day), items 4, 5, 6 and 8: counts that mean one thing everywhere,
refusals that do not contradict themselves, ``report --format text`` with the warnings and the
per-partition detail, and the smaller things (pipes, timestamps, ``report --list``, HTML cells,
parameters, ``--to v3``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from migration.cli.app import app


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    for var in ("KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_FAULT_AT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KMIGRATE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def kmigrate(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def _upgrade(log_dir: Path) -> str:
    res = kmigrate("upgrade", log_dir, "--to", "v2", "--engine", "inline")
    assert res.exit_code == 0, res.output
    return re.search(r"run (upgrade-\S+);", res.output)[1]


def _report(run_id: str):
    from migration.audit.store import ReportStore

    return ReportStore().load(run_id)


# ---------------------------------------------------------------- item 4


def test_rollback_counts_what_it_restored_and_a_second_one_is_a_no_op(sample_cluster, home) -> None:
    log_dir = sample_cluster.broker_log_dirs[1]
    run_id = _upgrade(log_dir)
    upgraded = _report(run_id)
    rewritten = [u for u in upgraded.iter_results() if u.status.value == "ok" and u.unit.endswith(".log")]

    first = kmigrate("rollback", run_id)
    assert first.exit_code == 0, first.output
    restored = sum(u.records_before for u in rewritten)
    assert f"restored {len(rewritten)} segment(s): {restored:,} records" in first.output
    rollback_id = re.search(r"(rollback-\S+)/report.json", first.output)[1]
    rb = _report(rollback_id)
    assert rb.totals.records_after == restored and rb.totals.records_before == restored
    assert rb.totals.bytes_after == sum(u.bytes_before for u in rewritten)

    second = kmigrate("rollback", run_id)
    assert second.exit_code == 0, second.output
    assert "already rolled back on" in second.output and rollback_id in second.output
    assert "restored" not in second.output

    commit = kmigrate("commit", run_id)
    assert commit.exit_code == 0, commit.output
    assert f"nothing to commit: run {run_id} was rolled back on" in commit.output
    assert "rollback is no longer possible" not in commit.output

    # the upgrade's own report tells what became of it, in JSON, text and HTML
    after = _report(run_id)
    assert [(e.kind.value, e.run_id) for e in after.events] == [("rollback", rollback_id)]
    text = kmigrate("report", run_id, "--format", "text", "-o", home / "r.txt")
    assert text.exit_code == 0
    assert f"rollback {rollback_id}: ok: restored {len(rewritten)} segment(s)" in (home / "r.txt").read_text()
    from migration.audit.html import render_html

    assert f"rollback {rollback_id}" in render_html(after) or rollback_id in render_html(after)


def test_commit_counts_what_it_dropped_and_a_second_one_says_so(sample_cluster, home) -> None:
    run_id = _upgrade(sample_cluster.broker_log_dirs[1])
    rewritten = [u for u in _report(run_id).iter_results() if u.status.value == "ok" and u.unit.endswith(".log")]
    first = kmigrate("commit", run_id)
    assert first.exit_code == 0, first.output
    records = sum(u.records_before for u in rewritten)
    assert f"dropped the originals of {len(rewritten)} segment(s): {records:,} records" in first.output
    second = kmigrate("commit", run_id)
    assert second.exit_code == 0, second.output
    assert f"run {run_id} already committed on" in second.output
    assert [e.kind.value for e in _report(run_id).events] == ["commit"]


def test_every_skipped_unit_says_why(sample_cluster, home) -> None:
    run_id = _upgrade(sample_cluster.broker_log_dirs[1])
    skipped = [u for u in _report(run_id).iter_results() if u.status.value == "skipped"]
    assert skipped
    for u in skipped:
        assert [w.code.value for w in u.warnings if w.code] == ["ALREADY_IN_TARGET"], u
