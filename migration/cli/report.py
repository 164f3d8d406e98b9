"""``kmigrate report`` and ``kmigrate sessions``: read run reports and incremental sessions."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer


def report(
    run: Annotated[str, typer.Argument(help="Run id (see 'kmigrate report --list'), or a report.json path.")] = "",
    fmt: Annotated[str, typer.Option("--format", help="text (a summary table), json or html.")] = "text",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")]
    = None,
    list_runs: Annotated[bool, typer.Option("--list", help="List the runs in the report store.")] = False,
    report_root: Annotated[Path | None, typer.Option(
        "--report-root", help="Report store (default $KMIGRATE_REPORT_ROOT or out/reports).")] = None,
) -> None:
    """Print or write a run's audit report: every unit's outcome, bytes, records and digests."""
    from migration.audit.html import render_html
    from migration.audit.model import RunReport
    from migration.audit.store import InvalidRunId, ReportNotFound, ReportStore
    from migration.audit.text import print_summary, render_text
    from migration.cli.common import EXIT_USAGE, console, err_console

    store = ReportStore(report_root)
    if list_runs:
        for s in store.list_runs():
            console.print(f"{s.run_id:64} {s.kind:16} {s.status:10} exit {s.exit_code}", highlight=False)
        raise typer.Exit(0)
    if not run:
        err_console.print("give a run id or --list")
        raise typer.Exit(EXIT_USAGE)
    if fmt not in ("text", "json", "html"):
        err_console.print(f"unknown format {fmt!r}: use text, json or html")
        raise typer.Exit(EXIT_USAGE)
    try:
        r = RunReport.from_json(Path(run).read_text()) if run.endswith(".json") and Path(run).exists() \
            else store.load(run)
    except (ReportNotFound, InvalidRunId) as exc:
        err_console.print(f"[red]{exc}[/red]")
        raise typer.Exit(EXIT_USAGE) from None
    if fmt == "text" and output is None:
        print_summary(r, console)
        raise typer.Exit(r.exit_code())
    text = {"json": r.to_json, "html": lambda: render_html(r), "text": lambda: render_text(r)}[fmt]()
    if output is not None:
        output.write_text(text)
        console.print(f"wrote {output}")
    else:
        sys.stdout.write(text)
    raise typer.Exit(r.exit_code())


def sessions(
    evict_idle: Annotated[bool, typer.Option("--evict-idle", help="Evict sessions unused for too long.")] = False,
) -> None:
    """List the incremental sessions (one per DAG or command and broker), their epochs and leases."""
    from migration.cli.common import console
    from migration.sessions import SessionStore

    store = SessionStore()
    if evict_idle:
        for name, broker in store.evict_idle():
            console.print(f"evicted {name} broker {broker}")
    for s in store.sessions():
        console.print(f"{s.name:32} broker {s.broker_id:<6} session {s.session_id} epoch {s.epoch:<5} "
                      f"partitions {s.partitions}  last used {s.last_used_at:%Y-%m-%d %H:%M:%S}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
    app.command("sessions")(sessions)
