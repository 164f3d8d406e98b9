"""``kmigrate report`` and ``kmigrate sessions``: read run reports and incremental sessions."""

from __future__ import annotations

# Imports of the migrations sit inside the commands: start-up cost, measured (migration/cli/__init__.py).
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from migration.audit.store import RunSummary


def report(
    run: Annotated[str, typer.Argument(help="Run id (see 'kmigrate report --list'), an Airflow DAG run id (its "
                                            "merged report; its step runs listed), or a report.json path.")] = "",
    fmt: Annotated[str, typer.Option("--format", help="text (a summary table), json or html.")] = "text",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")]
    = None,
    list_runs: Annotated[bool, typer.Option("--list", help="List the runs in the report store.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --list: the runs as a JSON array; with a run: "
                                                         "--format json.")] = False,
    report_root: Annotated[Path | None, typer.Option(
        "--report-root", help="Report store (default $KMIGRATE_REPORT_ROOT, else <home>/reports).")] = None,
    detail: Annotated[bool, typer.Option("--detail", help="With --format text: one row per partition (units, "
                                                          "bytes, records, why units were left as they were).")
                      ] = False,
) -> None:
    """Print or write a run's audit report: every unit's outcome, bytes, records and digests."""
    import json
    import os

    from migration.audit.html import render_html
    from migration.audit.model import RunReport
    from migration.audit.store import InvalidRunId, ReportNotFound, ReportStore
    from migration.audit.text import print_summary, render_text
    from migration.cli.common import (
        EXIT_PROBLEMS,
        console,
        dag_run_report_id,
        err_console,
        say_home,
        unknown_run,
        usage_error,
    )
    from migration.settings import ENV_REPORT_ROOT

    moved = ([f"reports: {report_root} (--report-root)"] if report_root is not None
             else [f"reports: {os.environ[ENV_REPORT_ROOT]} ({ENV_REPORT_ROOT})"] if os.environ.get(ENV_REPORT_ROOT)
             else [])
    say_home("report", *moved)
    store = ReportStore(report_root)
    if list_runs:
        runs = store.list_runs()
        if as_json:
            print(json.dumps([s.model_dump(mode="json") for s in runs], indent=1))
            raise typer.Exit(0)
        if not runs:
            err_console.print(f"no reports in {store.root}" + ("" if store.root.is_dir() or moved else
                              " (no run has used this home yet; earlier kmigrate versions kept runs in the "
                              "working directory's out/: pass --home DIR/out for those)"),
                              markup=False, highlight=False, soft_wrap=True)
        _print_runs(runs, console)
        raise typer.Exit(0)
    if not run:
        raise usage_error("report", "give a run id or --list")
    if as_json:
        fmt = "json"
    if fmt not in ("text", "json", "html"):
        raise usage_error("report", f"unknown format {fmt!r}: use text, json or html")
    if not run.endswith(".json"):
        run = dag_run_report_id(run, store) or run
    try:
        r = RunReport.from_json(Path(run).read_text()) if run.endswith(".json") and Path(run).is_file() \
            else store.load(run)
    except InvalidRunId:
        raise usage_error("report", f"{run!r} is neither a run id nor a report.json file") from None
    except ReportNotFound:
        raise unknown_run("report", run, store.run_ids(), str(store.root)) from None
    except (OSError, ValueError) as exc:
        err_console.print(f"kmigrate report: {run}: unreadable report: {exc}", markup=False, highlight=False,
                          soft_wrap=True)
        raise typer.Exit(EXIT_PROBLEMS) from None
    if fmt == "text" and output is None:
        from migration.audit.text import detail_lines, note_lines

        print_summary(r, console)
        for line in note_lines(r) + ([""] + detail_lines(r) if detail else []):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(r.exit_code())
    text = {"json": r.to_json, "html": lambda: render_html(r),
            "text": lambda: render_text(r, detail=detail)}[fmt]()
    if output is not None:
        try:
            output.write_text(text)
        except OSError as exc:
            raise usage_error("report", f"--output {output}: {exc.strerror or exc}") from None
        console.print(f"wrote {output}", highlight=False)
    else:
        sys.stdout.write(text)
    raise typer.Exit(r.exit_code())


def _print_runs(runs: list[RunSummary], console: Console) -> None:
    """``report --list``: the DAG runs' own reports, then the step and CLI runs, each under a
    header, newest first, with the time each started (UTC)."""
    dag_runs = [s for s in runs if s.steps]
    others = [s for s in runs if not s.steps]
    for title, group in (("DAG runs (their merged reports)", dag_runs), ("runs (DAG steps and commands)", others)):
        if not group:
            continue
        console.print(f"{title}:", markup=False, highlight=False)
        console.print(f"  {'started (UTC)':19}  {'run id':64} {'kind':16} {'status':8} exit",
                      markup=False, highlight=False)
        for s in sorted(group, key=lambda s: s.started_at, reverse=True):
            console.print(f"  {s.started_at:%Y-%m-%d %H:%M:%S}  {s.run_id:64} {s.kind:16} {s.status:8} "
                          f"{s.exit_code}", markup=False, highlight=False)


def sessions(
    evict_idle: Annotated[bool, typer.Option("--evict-idle", help="Evict sessions unused for too long.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="The sessions as a JSON array.")] = False,
) -> None:
    """List the incremental sessions (one per DAG or command and broker), their epochs and leases."""
    import json
    import os

    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from migration.cli.common import EXIT_PROBLEMS, console, err_console, say_home, usage_error
    from migration.sessions import SessionStore, default_store_url
    from migration.settings import ENV_SESSIONS_URL as STORE_URL_ENV

    url = default_store_url()
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise usage_error("sessions", f"{STORE_URL_ENV} is not a database URL") from None
    shown = parsed.render_as_string(hide_password=True)
    say_home("sessions", f"sessions: {shown} ({STORE_URL_ENV})" if os.environ.get(STORE_URL_ENV) else
             f"sessions: {parsed.database}")
    found = []
    if parsed.get_backend_name() == "sqlite" and parsed.database and not Path(parsed.database).exists():
        # Listing creates no store: an empty home stays empty.
        if not as_json:
            err_console.print(f"no session store at {parsed.database}: no incremental run has used this home",
                              markup=False, highlight=False, soft_wrap=True)
    else:
        try:
            with SessionStore(url) as store:
                if evict_idle:
                    for name, broker in store.evict_idle():
                        err_console.print(f"evicted {name} broker {broker}", markup=False, highlight=False)
                found = store.sessions()
        except ValueError as exc:
            raise usage_error("sessions", str(exc)) from None
        except SQLAlchemyError as exc:
            err_console.print(f"kmigrate sessions: session store {shown}: {type(exc).__name__}: "
                              f"{str(getattr(exc, 'orig', None) or exc).splitlines()[0]}",
                              markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_PROBLEMS) from None
    if as_json:
        print(json.dumps([s.model_dump(mode="json") for s in found], indent=1))
        raise typer.Exit(0)
    for s in found:
        console.print(f"{s.name:32} broker {s.broker_id:<6} session {s.session_id} epoch {s.epoch:<5} "
                      f"partitions {s.partitions}  last used {s.last_used_at:%Y-%m-%d %H:%M:%S}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
    app.command("sessions")(sessions)
