"""The DAG-run report merges every step's report and keeps their progress over time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from migration.audit.model import RunReport, UnitResult, UnitStatus
from migration.audit.store import ReportStore
from migration.orchestration.common import merge_reports


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
