"""Terminal renderings agree with the report totals and never truncate numbers."""

from __future__ import annotations

from rich.console import Console

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
