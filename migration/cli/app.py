"""``kmigrate``: the command line of the migration pipeline.

Exit codes: 0 success, 1 problems found or a unit failed, 2 usage error, 3 refused (for
example a live broker holds a log dir).
"""

from __future__ import annotations

# Imports of the migrations sit inside the commands: start-up cost, measured (migration/cli/__init__.py).
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from migration import __version__
from migration.audit.text import print_inventory
from migration.cli import report, tier, unify, upgrade
from migration.cli.common import (
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    KmigrateGroup,
    check_paths,
    console,
    err_console,
    usage_error,
)
from migration.logdir.findings import FindingCode
from migration.logdir.paths import Need

app = typer.Typer(
    cls=KmigrateGroup,
    name="kmigrate",
    help="Offline, crash-safe migrations of Apache Kafka on-disk data, with proof.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from migration.formats import core
        from migration.formats.compression import codec_libraries

        print(f"kmigrate {__version__}")
        print(core.describe())  # which record core runs: compiled, or pure Python and why
        print("codecs: " + "; ".join(f"{k}: {v}" for k, v in codec_libraries().items()))
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    home: Annotated[Path | None, typer.Option(
        "--home", help="Where runs, journals, reports, lock records and the session store live (default: "
        "$KMIGRATE_HOME, else $XDG_STATE_HOME/kmigrate, i.e. ~/.local/state/kmigrate); see docs/operations.md.",
        show_default=False)] = None,
) -> None:
    from migration.settings import HomeError, resolve_home, use_home

    try:
        # --home is exported as KMIGRATE_HOME: Spark, spark-submit and airflow started from here see it.
        found = use_home(home, "--home") if home is not None else resolve_home()
    except HomeError:
        return  # told by the commands that need a home (cli/common.py say_home)
    if found.path.exists() and not found.path.is_dir():
        err_console.print(f"kmigrate: {found.describe()} is not a directory", markup=False, highlight=False,
                          soft_wrap=True)
        raise typer.Exit(EXIT_USAGE)


@app.command()
def inspect(
    files: Annotated[list[Path] | None, typer.Argument(
        help="Kafka files: .log, .checkpoint, .index, .timeindex, .txnindex, .snapshot.", show_default=False)] = None,
    files_opt: Annotated[str | None, typer.Option(
        "--files", help="Comma-separated files, as kafka-dump-log takes them.", show_default=False)] = None,
    deep_iteration: Annotated[bool, typer.Option(
        "--deep-iteration", "--deep", help="Print every record of every batch.")] = False,
    print_data_log: Annotated[bool, typer.Option(
        "--print-data-log", help="Print keys and payloads (implies --deep-iteration).")] = False,
    skip_record_metadata: Annotated[bool, typer.Option(
        "--skip-record-metadata", help="Print record keys and payloads without their metadata.")] = False,
    cluster_metadata_decoder: Annotated[bool, typer.Option(
        "--cluster-metadata-decoder", help="Decode payloads as KRaft metadata records (automatic for "
        ".checkpoint files and __cluster_metadata-0 segments).")] = False,
    offsets_decoder: Annotated[bool, typer.Option(
        "--offsets-decoder", help="Decode keys and payloads as __consumer_offsets records: committed offsets and "
        "group metadata (automatic for __consumer_offsets-N segments).")] = False,
    transaction_log_decoder: Annotated[bool, typer.Option(
        "--transaction-log-decoder", help="Decode keys and payloads as __transaction_state records (automatic "
        "for __transaction_state-N segments).")] = False,
    key_decoder: Annotated[str | None, typer.Option(
        "--key-decoder", help="Show keys as string (default), hex or json; implies --print-data-log.",
        show_default=False)] = None,
    value_decoder: Annotated[str | None, typer.Option(
        "--value-decoder", help="Show payloads as string (default), hex or json; implies --print-data-log.",
        show_default=False)] = None,
    max_bytes: Annotated[int | None, typer.Option(
        "--max-bytes", min=0, help="Read only the batches within the first N bytes of each .log.",
        show_default=False)] = None,
    max_message_size: Annotated[int, typer.Option(
        "--max-message-size", min=1, help="Largest batch read when checking an .index entry.")] = 5 * 1024 * 1024,
    verify_index_only: Annotated[bool, typer.Option(
        "--verify-index-only", help="Check .index/.timeindex entries against the log without printing them.")] = False,
    index_sanity_check: Annotated[bool, typer.Option(
        "--index-sanity-check", help="Only run the index sanity check.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line instead of text.")] = False,
) -> None:
    """Dump Kafka files as kafka-dump-log (DumpLogSegments) prints them. SCRAM secrets are always
    shown redacted. Exit 1 when a file holds bad bytes: a batch or wrapper whose CRC does not
    match (printed isvalid: false, as Kafka prints it), or bytes that stop the dump (the line
    names file and byte position)."""
    from migration.logdir.inspect import DumpOptions, LogDump, PayloadDecoder

    paths: list[str] = [str(f) for f in files or ()]
    paths += [f.strip() for f in (files_opt or "").split(",") if f.strip()]
    if not paths:
        sys.stderr.write("kmigrate inspect: no file given: pass FILE... or --files a.log,b.index\n")
        raise typer.Exit(EXIT_USAGE)
    for p in paths:
        path = Path(p)
        if path.is_dir():
            n = sum(1 for c in path.iterdir() if c.is_file() and c.suffix in (".log", ".checkpoint", ".index"))
            sys.stderr.write(f"kmigrate inspect: {p} is a directory: pass the files inside it"
                             + (f" ({n} segment, index or checkpoint files, e.g. {p}/*.log)" if n else "") + "\n")
            raise typer.Exit(EXIT_USAGE)
        if not path.exists():
            sys.stderr.write(f"kmigrate inspect: {p}: no such file\n")
            raise typer.Exit(EXIT_USAGE)
    record_decoders = [flag for flag, given in (("--offsets-decoder", offsets_decoder),
                                                ("--transaction-log-decoder", transaction_log_decoder),
                                                ("--cluster-metadata-decoder", cluster_metadata_decoder)) if given]
    if len(record_decoders) > 1:
        sys.stderr.write(f"kmigrate inspect: {' and '.join(record_decoders)} given: pass one of them\n")
        raise typer.Exit(EXIT_USAGE)
    if record_decoders and (key_decoder is not None or value_decoder is not None):
        sys.stderr.write(f"kmigrate inspect: {record_decoders[0]} decodes the records itself: "
                         "leave out --key-decoder and --value-decoder\n")
        raise typer.Exit(EXIT_USAGE)
    decoders: list[PayloadDecoder | None] = []
    for flag, given in (("--key-decoder", key_decoder), ("--value-decoder", value_decoder)):
        try:
            decoders.append(None if given is None else PayloadDecoder(given))
        except ValueError:
            sys.stderr.write(f"kmigrate inspect: {flag} {given}: pass string, hex or json\n")
            raise typer.Exit(EXIT_USAGE) from None
    options = DumpOptions(
        deep_iteration=deep_iteration,
        print_data_log=print_data_log or key_decoder is not None or value_decoder is not None,
        skip_record_metadata=skip_record_metadata,
        cluster_metadata_decoder=cluster_metadata_decoder,
        offsets_decoder=offsets_decoder,
        transaction_log_decoder=transaction_log_decoder,
        key_decoder=decoders[0],
        value_decoder=decoders[1],
        max_bytes=max_bytes,
        max_message_size=max_message_size,
        verify_index_only=verify_index_only,
        index_sanity_check=index_sanity_check,
    )
    dump = LogDump(options)
    out, err = sys.stdout, sys.stderr
    try:
        for line in dump.dump(paths):
            if line.err and line.text is not None:
                out.flush()
                err.write(line.text + "\n")
                err.flush()
            if as_json:
                if line.data is not None:
                    out.write(json.dumps(line.data) + "\n")
            elif not line.err and line.text is not None:
                out.write(line.text + "\n")
        out.flush()
    except BrokenPipeError:
        # `kmigrate inspect ... | head`: the reader left; stop quietly, as kafka-dump-log does.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        raise typer.Exit(EXIT_PROBLEMS if dump.errors or dump.invalid_batches else EXIT_OK) from None
    raise typer.Exit(EXIT_PROBLEMS if dump.errors or dump.invalid_batches else EXIT_OK)


@app.command()
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Log dirs, partition dirs or files.", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Findings and counts as one JSON document.")] = False,
    shallow: Annotated[bool, typer.Option("--shallow", help="Check batch CRCs and framing only, "
                                                            "not every record.")] = False,
) -> None:
    """Check CRCs, offsets, indexes, time indexes, snapshots, checkpoints and leftovers.

    Exit 1 with findings naming file and position, 0 when clean, 2 when given something else
    (a directory of log dirs, an empty directory) or nothing it can check."""
    from migration.logdir.validation import validate_paths

    check_paths("validate", paths, Need.KAFKA_PATH)
    res = validate_paths(list(paths), deep=not shallow)
    if res.files_checked == 0 and not res.problems:
        # Zero files checked is no evidence of anything: never "clean".
        skipped = [f.file for f in res.findings if f.code == FindingCode.SKIPPED]
        raise usage_error("validate", "nothing to check: " + (
            f"{', '.join(map(str, skipped))}: not a kind of file the validator knows (.log, .index, .timeindex, "
            ".txnindex, .snapshot, .checkpoint, bootstrap.checkpoint)" if skipped
            else "no Kafka file found in " + ", ".join(map(str, paths))))
    if as_json:
        print(res.model_dump_json(indent=1))
    else:
        for f in res.findings:
            assert f.severity is not None  # the validator gives every finding its severity
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
                                                   show_default=False)],
    deep: Annotated[bool, typer.Option("--deep", help="Decompress wrappers for exact record counts.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="The inventory as one JSON document.")] = False,
) -> None:
    """Scan log dirs into an inventory: brokers, partitions, segments, formats, codecs.

    Exit 2 when a path is not a log dir (a partition directory, a directory of log dirs)."""
    from migration.logdir.model import scan_inventory

    check_paths("inventory", log_dirs, Need.LOG_DIR)
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
    segment_bytes: Annotated[int | None, typer.Option(min=14, help="Roll segments at this size (Kafka's "
                                                               "segment.bytes, at least 14).")] = None,
) -> None:
    """Build a realistic legacy cluster (0.9/0.10/2.x data, a KRaft controller) for demos."""
    from migration.demo.sample_cluster import build_sample_cluster

    if out.exists() and not out.is_dir():
        raise usage_error("sample-cluster", f"{out} is a file: pass an empty or new directory")
    try:
        sc = build_sample_cluster(out, brokers=brokers, scale=scale, seed=seed, segment_bytes=segment_bytes)
    except FileExistsError as exc:
        raise usage_error("sample-cluster", f"{exc}: pass an empty or new directory") from None
    console.print(f"sample cluster in {sc.root}: {len(sc.broker_log_dirs)} brokers, controller "
                  f"{sc.controller_dir}, {sum(sc.records.values())} records; description {sc.description_path}")


# Each migration's commands live in their own module of this package.
for _commands in (upgrade, tier, unify, report):
    _commands.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
