"""``kmigrate unify-bootstrap``: move bootstrap.checkpoint into the zero checkpoint (KIP-1170).

The outcome of each dir goes to stdout (or the report as JSON with ``--json``); warnings go to
stderr in both modes, among them the one KIP-1170 asks for when bootstrap.checkpoint and the
zero checkpoint both hold metadata records (the zero checkpoint is kept, the file retired).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from migration.audit.model import Finding, RunReport
from migration.cli.common import EXIT_USAGE, console, err_console
from migration.cli.progress import unit_progress
from migration.migrations.unify import UnifyOptions, execute_unify


def unify_bootstrap(
    metadata_log_dirs: Annotated[list[Path], typer.Argument(
        help="Controllers' metadata log dirs (holding bootstrap.checkpoint and __cluster_metadata-0).",
        exists=True, file_okay=False)],
    engine: Annotated[str, typer.Option("--engine", help="spark or inline.")] = "inline",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Detect and report; change nothing.")] = False,
    backup_root: Annotated[Path | None, typer.Option(
        "--backup-root", help="Where retired and replaced files go; outside every log dir.")] = None,
    retire_stray: Annotated[list[Path] | None, typer.Option(
        "--retire-stray", help="A broker-only log dir whose stray bootstrap.checkpoint copy to retire "
                               "(repeatable).", exists=True, file_okay=False)] = None,
    master: Annotated[str | None, typer.Option("--master", help="Spark master (default local[*]).")] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Run id (default: generated).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run report as JSON.")] = False,
) -> None:
    """Unify bootstrap.checkpoint into the zero checkpoint, crash-safely, with proof.
    Exit 0 when every dir is unified (or already was), 1 when one failed, 3 when refused."""
    if engine not in ("spark", "inline"):
        err_console.print(f"[red]unknown engine {engine!r}: use spark or inline[/red]")
        raise typer.Exit(EXIT_USAGE)
    eng: Literal["spark", "inline"] = "spark" if engine == "spark" else "inline"
    opts = UnifyOptions(backup_root=str(backup_root) if backup_root else None, dry_run=dry_run,
                        retire_stray=bool(retire_stray), stray_log_dirs=[str(p) for p in retire_stray or []])
    with unit_progress("unify-bootstrap", err_console if as_json else console) as progress:
        report = execute_unify(list(metadata_log_dirs), options=opts, engine=eng, run_id=run_id, master=master,
                               progress=progress)
    _print_warnings(report)
    if as_json:
        print(report.to_json(), end="")
        raise typer.Exit(report.exit_code())
    if report.refusal:
        err_console.print(f"[red]refused:[/red] {report.refusal}", highlight=False, soft_wrap=True)
    for broker_id, _topic, _partition, u in report.iter_units():
        style = {"ok": "green", "skipped": "cyan", "ineligible": "cyan", "planned": "cyan"}.get(u.status.value, "red")
        digest = ""
        if u.digest_before:
            same = "=" if u.digest_before == u.digest_after else "->"
            digest = f" digest {u.digest_before[:16]}" + (f" {same} {u.digest_after[:16]}" if u.digest_after else "")
        console.print(f"node {broker_id} {u.path}: [{style}]{u.status.value}[/{style}] "
                      f"{u.input_format or '-'} -> {u.output_format or '-'}, records {u.records_before} -> "
                      f"{u.records_after}{digest}", highlight=False, soft_wrap=True)
        for f in u.errors:
            console.print(f"  [red]error[/red] {_where(f.file, f.position)}{f.message}", highlight=False,
                          soft_wrap=True)
    console.print(f"run {report.run_id}: {report.status.value} (exit {report.exit_code()})", highlight=False)
    raise typer.Exit(report.exit_code())


def _print_warnings(report: RunReport) -> None:
    """Every warning of the run on stderr: the run's own, then each unit's with its node (a
    state's warning is both: the plan states it for the run as ``<log dir>: <warning>``)."""
    def line(prefix: str, f: Finding) -> None:
        err_console.print(f"[yellow]warning[/yellow] {prefix}{_where(f.file, f.position)}{f.message}",
                          highlight=False, soft_wrap=True)

    run_level = {w.message for w in report.warnings}
    for w in report.warnings:
        line("", w)
    for broker_id, _topic, _partition, u in report.iter_units():
        for w in u.warnings:
            if f"{u.path}: {w.message}" not in run_level:
                line(f"node {broker_id} {u.unit}: ", w)


def _where(file: str | None, position: int | None) -> str:
    if file is None:
        return ""
    return f"{file}" + (f" @ byte {position}" if position is not None else "") + ": "


def register(app: typer.Typer) -> None:
    app.command("unify-bootstrap")(unify_bootstrap)
