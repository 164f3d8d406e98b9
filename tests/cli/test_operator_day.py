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


# ---------------------------------------------------------------- item 5


def test_a_refused_run_says_one_line_and_its_page_agrees(sample_cluster, home) -> None:
    log_dir = sample_cluster.broker_log_dirs[1]
    (log_dir / ".kafka_cleanshutdown").unlink()
    res = kmigrate("upgrade", log_dir, "--to", "v2", "--engine", "inline")
    assert res.exit_code == 3, res.output
    lines = [x for x in res.output.splitlines() if not x.startswith("home:")]
    assert len(lines) == 1, res.output
    assert lines[0].startswith("kmigrate upgrade: refused: ") and "--force" in lines[0]
    assert "resume it with" not in res.output and "roll it back" not in res.output
    from migration.audit.html import render_html
    from migration.audit.store import ReportStore

    (run_id,) = ReportStore().run_ids()
    page = render_html(_report(run_id))
    assert "REFUSED" in page and "Refused: nothing was changed" in page
    assert 'class="l">refused<' not in page  # no "0 refused" tile
    assert "Failures (0 units)" not in page


# ---------------------------------------------------------------- item 6


def test_report_text_has_the_notes_and_with_detail_the_partitions(sample_cluster, home) -> None:
    run_id = _upgrade(sample_cluster.broker_log_dirs[1])
    plain = kmigrate("report", run_id, "--format", "text")
    assert "note: originals kept in" in plain.output and f"kmigrate rollback {run_id}" in plain.output
    detail = kmigrate("report", run_id, "--format", "text", "--detail", "-o", home / "d.txt")
    assert detail.exit_code == 0
    text = (home / "d.txt").read_text()
    assert f"kmigrate commit {run_id}" in text
    rows = [x for x in text.split("partition", 1)[1].splitlines() if x.startswith("1 ")]
    assert any("events-v2-0" in x and "ALREADY_IN_TARGET" in x for x in rows), text
    assert len(rows) == len({p.name for b in _report(run_id).brokers for p in b.partitions})


# ---------------------------------------------------------------- item 8


def test_to_v3_is_one_line_naming_the_valid_values(tmp_path, home) -> None:
    res = kmigrate("upgrade", tmp_path, "--to", "v3")
    assert res.exit_code == 2
    assert res.output.strip() == "kmigrate upgrade: --to 'v3' is not a message format kmigrate writes: use v1 or v2"


def test_inventory_in_a_pipe_keeps_names_whole_and_shows_iso_time(sample_cluster, home) -> None:
    res = kmigrate("inventory", sample_cluster.broker_log_dirs[1])
    assert res.exit_code == 0, res.output
    row = next(x for x in res.output.splitlines() if x.startswith("events-v2-0 "))
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(\d{13}\)", row), row
    assert "snappy,zstd" in row or "zstd" in row  # the codecs cell is not folded onto a second line


def test_report_list_has_headers_times_and_dag_runs_apart(sample_cluster, home) -> None:
    from datetime import UTC, datetime

    from migration.audit.merge import merge_reports
    from migration.audit.model import RunKind

    step = _upgrade(sample_cluster.broker_log_dirs[1])
    merge_reports(RunKind.UPGRADE, [step], run_id="manual__2026-01-01T00-00-00-00-00",
                  params={}, dag_id="message_format_upgrade", dag_run_id="manual__2026-01-01T00:00:00+00:00")
    out = kmigrate("report", "--list").output.splitlines()
    dag_at = out.index("DAG runs (their merged reports):")
    runs_at = out.index("runs (DAG steps and commands):")
    assert "started (UTC)" in out[dag_at + 1] and "run id" in out[dag_at + 1]
    assert "manual__2026-01-01T00-00-00-00-00" in out[dag_at + 2]
    assert step in out[runs_at + 2] and str(datetime.now(UTC).year) in out[runs_at + 2]


def test_html_cells_stay_whole_and_params_are_rows(sample_cluster, home) -> None:
    from migration.audit.html import render_html

    run_id = _upgrade(sample_cluster.broker_log_dirs[1])
    page = render_html(_report(run_id))
    assert "td.nowrap" in page and "white-space: nowrap" in page
    assert re.search(r'<td class="mono nowrap" title="[^"]*">\d{20}\.log</td>', page)
    params = page.split('id="params"', 1)[1].split("</table>", 1)[0]
    assert "{" not in params and "[" not in params  # no raw JSON
    assert '<th class="mono">target</th><td class="mono">v2</td>' in params
