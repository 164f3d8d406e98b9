"""The figures of a report page and its text summary for runs that rewrite nothing: a preflight,
a dry run, a rollback, a run with nothing to do. Durations are measured, not "0.00 s"; a unit
without a message format says so instead of "? → ?"; chart axes never repeat or invert labels,
whatever the bytes (none included)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from migration.audit.html import fmt_seconds, render_html
from migration.audit.model import RunReport, UnitResult, UnitStatus, UnitType
from migration.audit.text import render_text

T0 = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}


class _SvgText(HTMLParser):
    """(chart id, attributes, text) of every <text> inside an <svg>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[tuple[str, dict[str, str | None], str]] = []
        self._chart: str | None = None
        self._open: dict[str, str | None] | None = None
        self.cells: list[tuple[dict[str, str | None], str]] = []
        self._td = False
        self._row: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "svg":
            self._chart = a.get("id")
        elif tag == "text" and self._chart:
            self._open = a
            self.texts.append((self._chart, a, ""))
        elif tag == "tr":
            self._row = a
        elif tag == "td" and self._row is not None and "unit" in (self._row.get("class") or "").split():
            self._td = True
            self.cells.append((self._row, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._chart = None
        elif tag == "text":
            self._open = None
        elif tag == "td":
            self._td = False

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            chart, a, text = self.texts[-1]
            self.texts[-1] = (chart, a, text + data)
        if self._td:
            row, text = self.cells[-1]
            self.cells[-1] = (row, text + data)


def _parse(page: str) -> _SvgText:
    p = _SvgText()
    p.feed(page)
    p.close()
    return p


def y_labels(page: str, chart: str) -> list[str]:
    """The y-axis labels of a chart, bottom to top (right-aligned texts left of the plot)."""
    texts = [(float(a["y"] or 0), t) for c, a, t in _parse(page).texts
             if c == chart and a.get("text-anchor") == "end" and "axis" in (a.get("class") or "").split()]
    return [t for _, t in sorted(texts, key=lambda x: -x[0])]


def x_labels(page: str) -> list[str]:
    """The time-axis labels of the progress chart, left to right."""
    texts = [(float(a["x"] or 0), t) for c, a, t in _parse(page).texts
             if c == "chart-progress" and a.get("text-anchor") == "middle"]
    return [t for _, t in sorted(texts)]


def _bytes_of(label: str) -> float:
    number, unit = label.split()
    return float(number) * UNITS[unit]


def _seconds_of(label: str) -> float:
    if m := re.fullmatch(r"([\d.]+) (ms|s)", label):
        return float(m[1]) / (1000 if m[2] == "ms" else 1)
    m = re.fullmatch(r"(?:(\d+)h )?(\d+)m ([\d.]+)s", label)
    assert m, label
    return int(m[1] or 0) * 3600 + int(m[2]) * 60 + float(m[3])


def assert_axis(labels: list[str], value_of, top: float) -> None:
    assert labels, "no axis labels"
    assert len(set(labels)) == len(labels), f"repeated labels: {labels}"
    values = [value_of(label) for label in labels]
    assert values == sorted(values) and values[0] == 0, f"labels not increasing from 0: {labels}"
    # The axis reaches the highest value (labels are rounded to their step: within a tenth of it).
    step = values[1] - values[0] if len(values) > 1 else 0
    assert values[-1] >= top - step / 10, (labels, top)


def no_op_report() -> RunReport:
    """A scheduled tier run that found nothing dirty: no units, no bytes, a fraction of a second."""
    r = RunReport.start("tier-prepare", {}, run_id="tier-noop", now=T0)
    r.warn("broker 1: nothing changed since the last run (4 partitions clean): no Spark job submitted")
    r.finish(now=T0 + timedelta(microseconds=178))
    return r


def test_no_op_run_axes_show_zero_once_and_its_duration() -> None:
    page = render_html(no_op_report())
    # Was "1 B, 0 B, 0 B, 0 B, 0 B" (top to bottom) on both charts.
    assert y_labels(page, "chart-bytes-per-broker") == []  # no brokers: no chart
    assert y_labels(page, "chart-progress") == ["0 B"]
    assert x_labels(page) == ["0 s", "0.05 ms", "0.1 ms", "0.15 ms", "0.2 ms"]
    assert "0.00 s" not in page
    assert "<dd>0.178 ms</dd>" in page


def test_a_unit_with_no_bytes_keeps_a_sensible_axis() -> None:
    r = RunReport.start("tier-prepare", {}, run_id="tier-empty", now=T0)
    r.add_unit(1, "orders", 0, UnitResult(unit="orders-0", unit_type=UnitType.FILE, status=UnitStatus.SKIPPED,
                                          bytes_before=0, bytes_after=0), at=T0 + timedelta(seconds=3))
    r.finish(now=T0 + timedelta(seconds=4))
    page = render_html(r)
    assert y_labels(page, "chart-bytes-per-broker") == ["0 B"]
    assert y_labels(page, "chart-progress") == ["0 B"]
    assert_axis(x_labels(page), _seconds_of, 4.0)


def _report_with(sizes: list[tuple[int, int]], seconds: float) -> RunReport:
    r = RunReport.start("upgrade", {}, run_id="axis", now=T0)
    for i, (before, after) in enumerate(sizes):
        r.add_unit(i + 1, "orders", 0, UnitResult(unit=f"{i:020d}.log", status=UnitStatus.OK, input_format="v1",
                                                  output_format="v2", bytes_before=before, bytes_after=after),
                   at=T0 + timedelta(seconds=seconds * (i + 1) / len(sizes)))
    r.finish(now=T0 + timedelta(seconds=seconds))
    return r


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(0, 5 * 1024**4), st.integers(0, 5 * 1024**4)), min_size=1, max_size=3)
    | st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 3000)), min_size=1, max_size=3),
    seconds=st.floats(0.0, 50_000.0) | st.floats(0.0, 2.0),
)
def test_axes_never_repeat_or_invert_labels(sizes: list[tuple[int, int]], seconds: float) -> None:
    r = _report_with(sizes, seconds)
    page = render_html(r)
    assert_axis(y_labels(page, "chart-bytes-per-broker"), _bytes_of, max(max(p) for p in sizes))
    assert_axis(y_labels(page, "chart-progress"), _bytes_of, r.timeline[-1].bytes_done)
    last = max((p.at - r.started_at).total_seconds() for p in r.timeline)
    assert_axis(x_labels(page), _seconds_of, last)


def test_small_byte_counts_get_whole_byte_ticks() -> None:
    # 3 bytes used to read "0 B, 0 B, 1 B, 2 B, 3 B".
    page = render_html(_report_with([(3, 2)], 1.0))
    assert y_labels(page, "chart-bytes-per-broker") == ["0 B", "1 B", "2 B", "3 B"]


def test_format_column_of_units_that_convert_nothing() -> None:
    """A preflight's partitions, a rollback's untouched segment and restored checkpoint, a kept
    segment, a unit that failed before writing: no "?" anywhere in the column."""
    r = RunReport.start("validate", {}, run_id="formats", now=T0)
    rows = [
        (UnitResult(unit="orders-0", unit_type=UnitType.PARTITION, status=UnitStatus.OK, bytes_before=10), "–"),
        (UnitResult(unit="leader-epoch-checkpoint", unit_type=UnitType.FILE, status=UnitStatus.OK), "–"),
        (UnitResult(unit="1.log", status=UnitStatus.SKIPPED, input_format="v2", output_format="v2"),
         "v2 (unchanged)"),
        (UnitResult(unit="2.log", status=UnitStatus.FAILED, input_format="v2"), "v2"),
        (UnitResult(unit="3.log", status=UnitStatus.OK, output_format="v1"), "→ v1"),
        (UnitResult(unit="4.log", status=UnitStatus.PLANNED, input_format="v0,v1", output_format="v2"),
         "v0,v1 → v2"),
    ]
    for i, (u, _) in enumerate(rows):
        r.add_unit(1, "orders", i, u)
    r.finish(now=T0 + timedelta(seconds=1))
    cells = [(row["data-unit"], text) for row, text in _parse(render_html(r)).cells]
    formats = [text for _, text in cells[3::10]]  # the 4th of the 10 cells of each unit row
    assert formats == [expected for _, expected in rows]
    assert "?" not in "".join(text for _, text in cells)
    assert "formats v0, v1, v2 → v1, v2" in render_text(r)


def test_preflight_formats_and_durations_in_text() -> None:
    r = RunReport.start("validate", {}, run_id="pre", now=T0)
    r.add_unit(1, "orders", 0, UnitResult(unit="orders-0", unit_type=UnitType.PARTITION, status=UnitStatus.OK,
                                          duration_s=0.25, bytes_before=10))
    r.finish(now=T0 + timedelta(seconds=12, milliseconds=500))
    text = render_text(r)
    assert "duration 12.50 s, formats –" in text
    assert "? → ?" not in render_html(r)


def test_fmt_seconds() -> None:
    assert [fmt_seconds(s) for s in (None, 0, 0.000178, 0.0125, 0.25, 0.9999, 1.5, 61, 3725.5)] == [
        "–", "0 s", "0.178 ms", "12.5 ms", "250 ms", "1000 ms", "1.50 s", "1m 01.0s", "1h 02m 05.5s"]


def test_preflight_report_of_the_dag_lasts_from_prepare_to_check(tmp_path: Path, monkeypatch) -> None:
    """The upgrade DAG's preflight report was built after its Spark job and said 0.00 s: it
    starts when the prepare step did, and each partition takes the time its unit took."""
    from migration.migrations.upgrade.preflight import UNIT_KINDS
    from migration.orchestration.upgrade_rollout import (
        RolloutPlan,
        check_preflight_step,
        preflight_run_id,
        prepare_preflight_args,
    )
    from migration.runtime.engine import get_engine
    from migration.runtime.runs import RunDir

    monkeypatch.setenv("KMIGRATE_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("KMIGRATE_REPORT_ROOT", str(tmp_path / "reports"))
    log_dir = tmp_path / "kafka-logs"
    (log_dir / "orders-0").mkdir(parents=True)
    (log_dir / "orders-0" / "00000000000000000000.log").write_bytes(b"")
    from migration.migrations.upgrade.options import UpgradeOptions

    plan = RolloutPlan(cluster="", canary=1, rest=[], options=UpgradeOptions(target="v2", dry_run=True),
                       log_dirs={1: [str(log_dir)]})
    prepare_preflight_args(plan, 1, "manual__2026-11-23T03:00:00+00:00")
    rid = preflight_run_id("manual__2026-11-23T03:00:00+00:00", 1)
    time.sleep(0.3)  # the Spark job and the scheduler between the two tasks
    rd = RunDir(rid)
    units, options = rd.read_job()
    rd.write_results(get_engine("inline").run(units, options, kinds=UNIT_KINDS))
    check_preflight_step(plan, 1, "manual__2026-11-23T03:00:00+00:00")

    from migration.audit.store import ReportStore

    report = ReportStore().load(rid)
    assert report.totals.units == 1
    assert report.duration_s is not None and report.duration_s >= 0.3
    assert report.timeline[0].at == report.started_at
    (unit,) = report.iter_results()
    assert unit.duration_s is not None
    page = ReportStore().html_path(rid).read_text()
    assert f"<dd>{fmt_seconds(report.duration_s)}</dd>" in page and "? → ?" not in page
