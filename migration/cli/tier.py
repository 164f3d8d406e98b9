"""``kmigrate tier-prepare``: producer snapshots and staging of closed segments to S3 (or, with
``--store-url file:///PATH``, to a directory in the same layout).

Credentials come from the standard AWS environment variables or shared config (``--profile``)
and are never printed; the report records the endpoint and bucket only. The store is checked
before anything is written (docs/operations.md): a wrong bucket name, endpoint URL, prefix or
missing credentials exit 2, a store that cannot be reached or written exits 1, each in one line.
"""

from __future__ import annotations

# Imports of the migrations sit inside the commands: start-up cost, measured (migration/cli/__init__.py).
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from migration.cli.common import ENGINE_HELP, EngineName, check_paths, check_run_id, usage_error
from migration.cli.progress import engine_progress
from migration.logdir.paths import Need

if TYPE_CHECKING:
    from migration.orchestration.cluster import ClusterDescription


# TierOptions fields as the command spells them, for one-line messages about wrong values.
_OPTION_FLAGS = {"path_style": "--path-style/--virtual-host",
                 "bucket": "--bucket", "store_url": "--store-url", "endpoint_url": "--endpoint-url",
                 "prefix": "--prefix", "region": "--region", "profile": "--profile", "part_size": "--part-size",
                 "multipart_threshold": "--multipart-threshold"}


def _flag(field: str) -> str:
    return _OPTION_FLAGS.get(field, "--" + field.replace("_", "-"))


def register(app: typer.Typer) -> None:
    app.command("tier-prepare")(tier_prepare)


def _load_cluster(path: Path) -> ClusterDescription:
    """The cluster description, or exit 2 with one line saying why it cannot be read."""
    import yaml
    from pydantic import ValidationError

    from migration.orchestration.cluster import ClusterDescription

    if not path.is_file():
        raise usage_error("tier-prepare", f"--cluster {path}: " + (
            "a directory, not a cluster description file" if path.is_dir() else "no such file"))
    try:
        return ClusterDescription.load(path)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        raise usage_error("tier-prepare", f"--cluster {path}: not a cluster description ({exc.error_count()} "
                                          f"problem(s); {where}: {first['msg']})") from None
    except (OSError, ValueError, yaml.YAMLError) as exc:
        reason = " ".join(str(exc).split())
        raise usage_error("tier-prepare", f"--cluster {path}: cannot read it as JSON or YAML: {reason}") from None


def tier_prepare(
    ctx: typer.Context,
    log_dirs: Annotated[list[Path], typer.Argument(help="Broker log dirs (the broker must be stopped).",
                                                   show_default=False)],
    bucket: Annotated[str | None, typer.Option("--bucket", help="Bucket to stage segments in.")] = None,
    store_url: Annotated[str | None, typer.Option(
        "--store-url", help="file:///PATH: stage into this existing directory instead of a bucket (the plugin's "
        "file-system storage layout).")] = None,
    endpoint_url: Annotated[str | None, typer.Option("--endpoint-url", help="S3-compatible endpoint URL.")] = None,
    prefix: Annotated[str, typer.Option("--prefix", help="Key prefix (the plugin's key.prefix).")] = "",
    region: Annotated[str, typer.Option("--region")] = "us-east-1",
    path_style: Annotated[bool, typer.Option("--path-style/--virtual-host",
                                             help="Path-style or virtual-host addressing.")] = True,
    profile: Annotated[str | None, typer.Option("--profile", help="AWS shared-config profile.")] = None,
    engine: Annotated[EngineName, typer.Option("--engine", help=ENGINE_HELP)] = EngineName.SPARK,
    master: Annotated[str | None, typer.Option("--master", help="Spark master (default local[*]).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Plan only: write nothing, upload nothing.")] = False,
    snapshots_only: Annotated[bool, typer.Option("--snapshots-only",
                                                 help="Write missing producer snapshots, upload nothing.")] = False,
    metadata_log_dir: Annotated[list[Path] | None, typer.Option(
        "--metadata-log-dir", help="A KRaft metadata log dir (topic ids, cleanup policies); repeatable.")] = None,
    cluster: Annotated[Path | None, typer.Option("--cluster", help="Cluster description (YAML/JSON): compacted "
                                                                   "topics and controllers' metadata log dirs.")
                                       ] = None,
    part_size: Annotated[int, typer.Option("--part-size", min=1, help="Multipart part size in bytes.")] = 8 << 20,
    multipart_threshold: Annotated[int, typer.Option("--multipart-threshold", min=1,
                                                     help="Use multipart uploads from this size on.")] = 8 << 20,
    broker_id: Annotated[int | None, typer.Option("--broker-id", help="Override meta.properties' node id.")] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Run id (default: generated).")] = None,
    exclude_topic: Annotated[list[str] | None, typer.Option(
        "--exclude-topic", help="A topic to keep out (reported ineligible, never a failure); repeatable. The "
        "cluster description's excluded_topics count too.")] = None,
    assign_leader_epoch: Annotated[bool, typer.Option(
        "--assign-leader-epoch", help="Give data written before KIP-101 leader epoch 0 from the log start offset "
        "in the leader-epoch-checkpoint, so its segments can be tiered (docs/formats.md §5.7); the original is "
        "kept, and 'kmigrate rollback RUN' restores it.")] = False,
) -> None:
    """Make partitions ready for tiered storage and stage their closed segments.

    What it changes in the log dirs (producer snapshots, rebuilt indexes, the leader-epoch
    checkpoint) is backed up first: 'kmigrate rollback RUN' undoes it (staged objects stay).

    Exit 0 when every partition is ready and staged, 1 when any could not be (after doing all
    the others), 2 for a wrong path or value (nothing written), 3 when refused (a live broker
    holds a log dir)."""
    from pydantic import ValidationError

    from migration.audit.model import RunKind, new_run_id
    from migration.cli.common import console, err_console, ineligible_lines, show_report
    from migration.migrations.tier.driver import execute_tier
    from migration.migrations.tier.options import TierOptions, describe_invalid_options, options_that_cannot_apply
    from migration.migrations.tier.store import StoreArgumentError

    check_paths("tier-prepare", log_dirs, Need.BROKER_LOG_DIR)
    check_paths("tier-prepare", metadata_log_dir or [], Need.METADATA_LOG_DIR, option="--metadata-log-dir")
    check_run_id("tier-prepare", run_id)
    meta_dirs = [str(p) for p in (metadata_log_dir or [])]
    compacted: list[str] = []
    excluded = dict.fromkeys(exclude_topic or [], "excluded with --exclude-topic")
    if cluster is not None:
        desc = _load_cluster(cluster)
        excluded = desc.exclusions("tier") | excluded
        compacted = sorted(set(desc.compacted_topics) | {t for t in desc.topic_configs if desc.is_compacted(t)})
        described = [n.metadata_log_dir for n in desc.controllers if n.metadata_log_dir and
                     n.metadata_log_dir not in meta_dirs]
        check_paths("tier-prepare", described, Need.METADATA_LOG_DIR, option=f"--cluster {cluster}: controller")
        meta_dirs += described
    run_id = run_id or new_run_id(RunKind.TIER_PREPARE)
    try:
        options = TierOptions(bucket=bucket, store_url=store_url, endpoint_url=endpoint_url, prefix=prefix,
                              region=region, path_style=path_style, profile=profile, part_size=part_size,
                              multipart_threshold=multipart_threshold, snapshots_only=snapshots_only, dry_run=dry_run,
                              metadata_log_dirs=meta_dirs, compacted_topics=compacted,
                              assign_leader_epoch=assign_leader_epoch, excluded_topics=excluded)
    except ValidationError as exc:
        raise usage_error("tier-prepare", describe_invalid_options(exc, _OPTION_FLAGS)) from None
    # A flag that cannot apply with another is refused, never silently ignored (checked before anything runs).
    given = {name for name in ctx.params if getattr(ctx.get_parameter_source(name), "name", None) in (
        "COMMANDLINE", "ENVIRONMENT")}
    for field, other, why in options_that_cannot_apply(options, given):
        raise usage_error("tier-prepare", f"{_flag(field)} cannot apply with {_flag(other)}: {why}; give one of them")
    if master is not None and engine is not EngineName.SPARK:
        raise usage_error("tier-prepare", f"--master cannot apply with --engine {engine.value}: it is the Spark "
                                          "master; give one of them")
    try:
        with engine_progress("tier-prepare", console, engine=engine.value, run_id=run_id,
                             notes=err_console) as progress:
            report = execute_tier([str(d) for d in log_dirs], options=options, engine=engine.value, run_id=run_id,
                                  master=master, broker_id=broker_id, progress=progress)
    except StoreArgumentError as exc:  # missing credentials, an unknown profile: checked before any write
        raise usage_error("tier-prepare", str(exc)) from None
    if report.errors and not report.brokers:
        # The run stopped before its first write (the store cannot be used): one line, the report says the same.
        for e in report.errors:
            err_console.print(f"kmigrate tier-prepare: {e.message} (run {report.run_id})", markup=False,
                              highlight=False, soft_wrap=True)
        raise typer.Exit(report.exit_code())
    raise typer.Exit(show_report(report, "tier-prepare", lines=[*ineligible_lines(report),
                                                                f"store: {options.store_location()}"]))
