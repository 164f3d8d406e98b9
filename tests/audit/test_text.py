"""Terminal renderings agree with the report totals and never truncate numbers."""

from __future__ import annotations

from rich.console import Console

from migration.audit.model import RunReport, UnitResult, UnitStatus
from migration.audit.text import print_summary, render_text, summary_table


def test_plain_text(make_report, hostile: str) -> None:
    report = make_report()
    text = render_text(report)
    t = report.totals
    assert f"status: failed (exit code {report.exit_code()})" in text
    assert f"bytes: {t.bytes_before} -> {t.bytes_after}" in text
    total_line = next(line for line in text.splitlines() if line.startswith("total"))
    assert total_line.split() == [
        "total",
        str(t.units),
        str(t.units_ok),
        str(t.units_failed),
        str(t.units_refused),
        str(t.units_skipped),
        f"{t.bytes_before:,}",
        f"{t.bytes_after:,}",
        f"{t.records_before:,}",
        f"{t.records_after:,}",
    ]
    assert f"FAILED broker 3 payments-0 {hostile}" in text
    assert "@ byte 1234: CRC mismatch" in text


def test_rich_table_fits_narrow_terminal(make_report) -> None:
    report = make_report()
    table = summary_table(report)
    assert table.row_count == len(report.brokers)
    console = Console(width=80, record=True, color_system=None)
    print_summary(report, console)
    out = console.export_text()
    assert "…" not in out
    for b in report.brokers:
        assert f"{b.totals.bytes_before:,}" in out and f"{b.totals.records_after:,}" in out
    assert f"{report.totals.bytes_after:,}" in out


def _fleet_report() -> RunReport:
    """A tier run over a large fleet: twelve-digit byte counts, ten-digit record counts and every
    kind of unit, the widest table the summary draws."""
    report = RunReport.start("tier-prepare", {}, run_id="tier-prepare-20250301T120000Z-0123abcd")
    statuses = [UnitStatus.OK, UnitStatus.SKIPPED, UnitStatus.INELIGIBLE, UnitStatus.REFUSED, UnitStatus.FAILED]
    for broker in (1001, 1002, 1003):
        for i, status in enumerate(statuses):
            size = 987_654_321_012 + broker * 1_000 + i
            records = 1_234_567_890 + broker + i if status is UnitStatus.OK else None
            report.add_unit(broker, f"topic-{i}", 0, UnitResult(
                unit=f"{i:020d}.log", status=status, bytes_before=size, records_before=1_234_567_890 + i,
                bytes_after=size if status is UnitStatus.OK else None, records_after=records))
    report.finish()
    return report


def test_summary_fits_80_columns_and_keeps_records_after() -> None:
    report = _fleet_report()
    console = Console(width=80, record=True, color_system=None)
    print_summary(report, console)
    out = console.export_text()
    table = out.split("(left out")[0]
    assert all(len(line) <= 80 for line in out.split("duration")[0].splitlines()), out
    assert "…" not in out
    header = "\n".join(table.splitlines()[:5])
    assert "records" in header and "after" in header and "failed" in header
    for b in report.brokers:
        assert f"{b.totals.records_after:,}" in table
    assert f"{report.totals.records_after:,}" in table
    assert "left out to fit 80 columns: bytes before" in out  # says what it left out, and where to see it
    wide = Console(width=200, record=True, color_system=None)
    print_summary(report, wide)
    everything = wide.export_text()
    assert "left out" not in everything and "ineligible" in everything


def test_inventory_prints_no_python_values(sample_cluster) -> None:
    from migration.audit.text import print_inventory
    from migration.logdir.model import scan_inventory

    broker = sample_cluster.broker_log_dirs[1]
    (broker / "meta.properties").unlink()  # a ZooKeeper-era log dir from before 0.9 has none
    console = Console(width=200, record=True, color_system=None)
    print_inventory(scan_inventory([broker, sample_cluster.controller_dir]), console)
    out = console.export_text()
    assert "None" not in out and "['" not in out
    assert f"{broker} no meta.properties" in out
    assert "snapshots 00000000000000000000-0000000000.checkpoint" in out


def test_plain_text_names_the_record_digest(make_report) -> None:
    report = make_report()
    assert "record digest: blake3-256, canonical records v1\n" in render_text(report)
    old = RunReport.model_validate({k: v for k, v in report.model_dump(mode="json").items() if k != "digest"})
    assert "record digest: blake2b-256, canonical records v1\n" in render_text(old)
    report.add_unit(1, "orders", 9, UnitResult(unit="x.log", status=UnitStatus.OK, digest_before="aa",
                                               digest_after="ab", digest_algorithm="blake2b-256"))
    text = render_text(report)
    assert "record digest: blake3-256, canonical records v1 (1 unit blake2b-256)\n" in text
    assert "(record digest changed: aa -> ab, blake2b-256)" in text
