"""``kmigrate unify-bootstrap``: move bootstrap.checkpoint into the zero checkpoint (KIP-1170).

The outcome of each dir goes to stdout (or the report as JSON with ``--json``); warnings go to
stderr in both modes, among them the one KIP-1170 asks for when bootstrap.checkpoint and the
zero checkpoint both hold metadata records (the zero checkpoint is kept, the file retired).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from migration.audit.model import Finding, RunKind, RunReport, UnitResult, new_run_id
from migration.cli.common import (
    ENGINE_HELP,
    EngineName,
    check_paths,
    check_run_id,
    console,
    err_console,
    show_report,
)
from migration.cli.progress import engine_progress
from migration.logdir.paths import Need, PathKind
from migration.migrations.unify import UnifyOptions, execute_unify

# A broker's log dir given where a metadata log dir belongs: its bootstrap.checkpoint, if any,
# is a stray copy (kafka-storage format wrote one into every log dir before Kafka 3.8).
_STRAY_HINT = {PathKind.BROKER_LOG_DIR: "a broker's stray bootstrap.checkpoint is retired with --retire-stray DIR"}


def unify_bootstrap(
    metadata_log_dirs: Annotated[list[Path], typer.Argument(
        help="Controllers' metadata log dirs (holding bootstrap.checkpoint and __cluster_metadata-0).",
        show_default=False)],
    engine: Annotated[EngineName, typer.Option("--engine", help=ENGINE_HELP)] = EngineName.SPARK,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Detect and report; change nothing.")] = False,
    backup_root: Annotated[Path | None, typer.Option(
        "--backup-root", help="Where retired and replaced files go; outside every log dir.")] = None,
    retire_stray: Annotated[list[Path] | None, typer.Option(
        "--retire-stray", help="A broker-only log dir whose stray bootstrap.checkpoint copy to retire "
                               "(repeatable).")] = None,
    master: Annotated[str | None, typer.Option("--master", help="Spark master (default local[*]).")] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Run id (default: generated).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run report as JSON.")] = False,
) -> None:
    """Unify bootstrap.checkpoint into the zero checkpoint, crash-safely, with proof.

    Exit 0 when every dir is unified (or already was), 1 when one failed, 2 when a path is not
    a metadata log dir, 3 when refused."""
    check_paths("unify-bootstrap", metadata_log_dirs, Need.METADATA_LOG_DIR, hints=_STRAY_HINT)
    check_paths("unify-bootstrap", retire_stray or [], Need.STRAY_LOG_DIR, option="--retire-stray")
    check_run_id("unify-bootstrap", run_id)
    run_id = run_id or new_run_id(RunKind.UNIFY_BOOTSTRAP)
    opts = UnifyOptions(backup_root=str(backup_root) if backup_root else None, dry_run=dry_run,
                        retire_stray=bool(retire_stray), stray_log_dirs=[str(p) for p in retire_stray or []])
    with engine_progress("unify-bootstrap", err_console if as_json else console, engine=engine.value,
                         run_id=run_id, notes=err_console) as progress:
        report = execute_unify(list(metadata_log_dirs), options=opts, engine=engine.value, run_id=run_id,
                               master=master, progress=progress)
    _print_warnings(report)
    if as_json:
        print(report.to_json(), end="")
        raise typer.Exit(report.exit_code())
    lines = []
    for broker_id, _topic, _partition, u in report.iter_units():
        lines.append(f"node {broker_id} {u.path or u.unit}: {u.status.value}{_outcome(u, report)}")
        lines.extend(f"  error {_where(f)}{f.message}" for f in u.errors)
    # its warnings are on stderr already (_print_warnings), never mixed into stdout
    raise typer.Exit(show_report(report, "unify-bootstrap", lines=lines, notes=False))


def _outcome(u: UnitResult, report: RunReport) -> str:
    """ " zero-checkpoint -> zero-checkpoint, records 3 -> 5, digest ab12… = ab12… (blake3-256)":
    only what the unit knows (a planned unit has no "after" yet; a retired file has no output)."""
    parts = []
    if u.input_format and u.output_format:
        parts.append(f"{u.input_format} -> {u.output_format}")
    elif u.input_format or u.output_format:
        parts.append(str(u.input_format or u.output_format))
    if u.records_before is not None and u.records_after is not None:
        parts.append(f"records {u.records_before} -> {u.records_after}")
    elif u.records_before is not None or u.records_after is not None:
        parts.append(f"records {u.records_before if u.records_before is not None else u.records_after}")
    if u.digest_before:
        same = "=" if u.digest_before == u.digest_after else "->"
        parts.append(f"digest {u.digest_before[:16]}" + (f" {same} {u.digest_after[:16]}" if u.digest_after else "")
                     + f" ({report.unit_digest_algorithm(u).value})")
    return (" " + ", ".join(parts)) if parts else ""


def _print_warnings(report: RunReport) -> None:
    """Every warning of the run on stderr: the run's own, then each unit's with its node (a
    state's warning is both: the plan states it for the run as ``<log dir>: <warning>``)."""
    def line(prefix: str, f: Finding) -> None:
        err_console.print(f"[yellow]warning[/yellow] {escape(prefix + _where(f) + f.message)}",
                          highlight=False, soft_wrap=True)

    run_level = {w.message for w in report.warnings}
    for w in report.warnings:
        line("", w)
    for broker_id, _topic, _partition, u in report.iter_units():
        for w in u.warnings:
            if f"{u.path}: {w.message}" not in run_level:
                line(f"node {broker_id} {u.unit}: ", w)


def _where(f: Finding) -> str:
    """``FILE @ byte N: `` (:func:`~migration.logdir.findings.locate`), empty for no place."""
    return f"{f.where}: " if f.where else ""


def register(app: typer.Typer) -> None:
    app.command("unify-bootstrap")(unify_bootstrap)
