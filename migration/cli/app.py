"""``kmigrate``: the command line of the migration pipeline.

Exit codes: 0 success, 1 problems found or a unit failed, 2 usage error, 3 refused (for
example a live broker holds a log dir).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from migration import __version__
from migration.audit.text import print_inventory
from migration.cli import report, tier, unify, upgrade
from migration.cli.common import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, console, err_console

app = typer.Typer(
    name="kmigrate",
    help="Offline, crash-safe migrations of Apache Kafka on-disk data, with proof.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from migration.formats import core

        print(f"kmigrate {__version__}")
        print(core.describe())  # which record core runs: compiled, or pure Python and why
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    pass


@app.command()
def inspect(
    files: Annotated[list[Path], typer.Argument(help="Kafka files: .log, .checkpoint, .index, .timeindex, "
                                                     ".txnindex, .snapshot", exists=True, dir_okay=False)],
    deep: Annotated[bool, typer.Option("--deep", help="Iterate records inside batches (deep iteration).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    """Dump Kafka files like kafka-dump-log. SCRAM secrets are always shown redacted."""
    from migration.formats.errors import KafkaFormatError
    from migration.logdir.inspect import format_row, inspect_file

    out: dict[str, list] = {}
    failed = False
    for f in files:
        rows: list = []
        try:
            for row in inspect_file(f, deep=deep):
                rows.append(row)
                if not as_json:
                    for line in format_row(row):
                        print(line)
        except KafkaFormatError as exc:
            failed = True
            rows.append({"error": exc.to_dict()})
            err_console.print(f"[red]error[/red] {exc}")
        if not as_json:
            print(f"Dumping {f}" if not rows else "", end="")
        out[str(f)] = rows
    if as_json:
        json.dump(out, sys.stdout, indent=1, default=str)
        print()
    raise typer.Exit(EXIT_PROBLEMS if failed else EXIT_OK)


@app.command()
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Log dirs, partition dirs or files.", exists=True)],
    as_json: Annotated[bool, typer.Option("--json", help="Findings as JSON.")] = False,
    shallow: Annotated[bool, typer.Option("--shallow", help="Check batch CRCs and framing only, "
                                                            "not every record.")] = False,
) -> None:
    """Check CRCs, offsets, indexes, time indexes, snapshots, checkpoints and leftovers.
    Exit 1 with findings naming file and position, 0 when clean."""
    from migration.logdir.validation import validate_paths

    res = validate_paths(list(paths), deep=not shallow)
    if as_json:
        print(res.model_dump_json(indent=1))
    else:
        for f in res.findings:
            style = {"error": "red", "warning": "yellow", "info": "dim"}[f.severity]
            console.print(f"[{style}]{f}[/{style}]" if f.severity != "info" else str(f), highlight=False,
                          soft_wrap=True)
        console.print(f"checked {res.files_checked} files, {res.bytes_checked} bytes, {res.batches_checked} batches, "
                      f"{res.records_checked} records: "
                      + ("[green]clean[/green]" if res.ok else f"[red]{len(res.problems)} problem(s)[/red]"))
    raise typer.Exit(EXIT_OK if res.ok else EXIT_PROBLEMS)


@app.command()
def inventory(
    log_dirs: Annotated[list[Path], typer.Argument(help="Broker log dirs or a controller's metadata log dir.",
                                                   exists=True, file_okay=False)],
    deep: Annotated[bool, typer.Option("--deep", help="Decompress wrappers for exact record counts.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Scan log dirs into an inventory: brokers, partitions, segments, formats, codecs."""
    from migration.logdir.model import scan_inventory

    inv = scan_inventory(list(log_dirs), deep=deep)
    if as_json:
        print(inv.model_dump_json(indent=1))
        raise typer.Exit(EXIT_OK)
    print_inventory(inv, console)


@app.command("sample-cluster")
def sample_cluster(
    out: Annotated[Path, typer.Argument(help="Empty or new directory to build the cluster in.")],
    brokers: Annotated[int, typer.Option(min=1, max=50)] = 3,
    scale: Annotated[int, typer.Option(min=1, help="Multiply record counts (and segment sizes) for benchmarks.")] = 1,
    seed: Annotated[int, typer.Option()] = 7,
    segment_bytes: Annotated[int | None, typer.Option(help="Roll segments at this size.")] = None,
) -> None:
    """Build a realistic legacy cluster (0.9/0.10/2.x data, a KRaft controller) for demos."""
    from migration.demo.sample_cluster import build_sample_cluster

    try:
        sc = build_sample_cluster(out, brokers=brokers, scale=scale, seed=seed, segment_bytes=segment_bytes)
    except FileExistsError as exc:
        err_console.print(f"[red]{exc}[/red]")
        raise typer.Exit(EXIT_USAGE) from None
    console.print(f"sample cluster in {sc.root}: {len(sc.broker_log_dirs)} brokers, controller "
                  f"{sc.controller_dir}, {sum(sc.records.values())} records; description {sc.description_path}")


# Each migration's commands live in their own module of this package.
for _commands in (upgrade, tier, unify, report):
    _commands.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
