"""The DAG-run report merges every step's report and keeps their progress over time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from migration.audit.merge import merge_reports
from migration.audit.model import RunReport, RunStatus, StepRef, UnitResult, UnitStatus
from migration.audit.store import ReportStore
from migration.audit.text import render_text


def test_merge_keeps_units_totals_and_the_steps_timelines(tmp_path, monkeypatch):
    monkeypatch.setenv("KMIGRATE_REPORT_ROOT", str(tmp_path / "reports"))
    t0 = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)
    store = ReportStore()
    for i, broker in enumerate((1, 2)):
        r = RunReport.start("upgrade", {}, run_id=f"step-b{broker}", now=t0 + timedelta(minutes=10 * i))
        for k in range(3):
            r.add_unit(broker, "orders", broker, UnitResult(unit=f"{k:020d}.log", status=UnitStatus.OK,
                                                            bytes_before=100, bytes_after=90, records_before=5,
                                                            records_after=5),
                       at=t0 + timedelta(minutes=10 * i + k + 1))
        r.finish(now=t0 + timedelta(minutes=10 * i + 5))
        store.save(r)
    merged = merge_reports("upgrade", ["step-b1", "step-b2", "step-b3"], run_id="dag-run", params={},
                           dag_id="d", dag_run_id="r")
    assert merged.totals.units == 6 and merged.totals.bytes_before == 600
    assert [e.message for e in merged.errors] == [
        "no report for step step-b3: the step failed before writing one, or did not run"]
    assert merged.exit_code() == 1
    points = [(p.at - t0, p.units_done) for p in merged.timeline]
    # broker 1's units in its minutes 1-3, broker 2's in minutes 11-13: not all at merge time
    assert (timedelta(minutes=1), 1) in points and (timedelta(minutes=13), 6) in points
    assert [u for _, u in points] == sorted(u for _, u in points)


def test_merged_report_names_its_steps_and_its_page_links_them(tmp_path, monkeypatch):
    """The DAG run's report records every step it merged (a missing one too); its stored page
    links each step's page in the store's layout, and the missing step is listed, unlinked."""
    monkeypatch.setenv("KMIGRATE_REPORT_ROOT", str(tmp_path / "reports"))
    t0 = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)
    store = ReportStore()
    for broker, status in ((1, UnitStatus.OK), (2, UnitStatus.FAILED)):
        r = RunReport.start("upgrade", {}, run_id=f"step-b{broker}", dag_id="d", dag_run_id="r",
                            task_id="rolling.finalize", now=t0 + timedelta(minutes=broker))
        r.add_unit(broker, "orders", 0, UnitResult(unit="00000000000000000000.log", status=status, bytes_before=10))
        r.finish(now=t0 + timedelta(minutes=broker, seconds=30))
        store.save(r)
    merged = merge_reports("upgrade", ["step-b1", "step-b2", "step-b3"], run_id="dag-run", params={},
                           dag_id="d", dag_run_id="r")
    assert [(s.run_id, s.broker_ids, s.status, s.exit_code, s.units, s.task_id) for s in merged.steps] == [
        ("step-b1", [1], RunStatus.OK, 0, 1, "rolling.finalize"),
        ("step-b2", [2], RunStatus.FAILED, 1, 1, "rolling.finalize"),
        ("step-b3", [], None, None, 0, None),
    ]
    assert merged.steps[0] == StepRef.of(store.load("step-b1"))
    loaded = store.load("dag-run")
    assert loaded.steps == merged.steps  # stored, and read back
    assert store.summary("dag-run").steps == ["step-b1", "step-b2", "step-b3"]
    page = store.html_path("dag-run").read_text()
    assert page.count('<a href="../step-b1/report.html"') == 2  # in the steps table and at broker 1
    assert '<a href="../step-b2/report.html"' in page
    assert 'data-run-id="step-b3" data-role="step" data-status="missing" data-href=""' in page
    assert "../step-b3/report.html" not in page
    # The links resolve to the steps' pages on disk.
    for step in ("step-b1", "step-b2"):
        assert (store.html_path("dag-run").parent / f"../{step}/report.html").resolve() == store.html_path(step)
    # The terminal summary (``make demo``, ``kmigrate report``) names the steps too.
    text = render_text(loaded)
    assert "step step-b1: ok (exit 0), 1 units, broker 1\nstep step-b2: failed (exit 1), 1 units, broker 2\n" \
        "step step-b3: no report\n" in text
    # The store finds it as the DAG run's report although broker 2's report is newer.
    assert store.find_by_dag_run("d", "r").run_id == "dag-run"


def test_a_step_without_units_says_why_in_the_merged_report(tmp_path, monkeypatch):
    """A scheduled step that found nothing to do reads '0 units' in the DAG run's report; it must
    say why (its refusal or first warning), and name its broker."""
    monkeypatch.setenv("KMIGRATE_REPORT_ROOT", str(tmp_path / "reports"))
    store = ReportStore()
    idle = RunReport.start("tier-prepare", {}, run_id="tier-b1")
    idle.broker(1)
    idle.warn("broker 1: nothing changed since the last run (12 partitions clean): no Spark job submitted")
    idle.finish()
    store.save(idle)
    merged = merge_reports("tier-prepare", ["tier-b1"], run_id="dag-run-idle", params={}, dag_id="d",
                           dag_run_id="r")
    step = merged.steps[0]
    assert step.units == 0 and step.broker_ids == [1]
    assert step.note is not None and "nothing changed since the last run" in step.note
    text = render_text(merged)
    line = next(li for li in text.splitlines() if "tier-b1" in li)
    assert "nothing changed since the last run" in line, text
