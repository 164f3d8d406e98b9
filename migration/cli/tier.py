"""``kmigrate tier-prepare``: producer snapshots and staging of closed segments to S3.

Credentials come from the standard AWS environment variables or shared config (``--profile``)
and are never printed; the report records the endpoint and bucket only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command("tier-prepare")(tier_prepare)


def tier_prepare(
    log_dirs: Annotated[list[Path], typer.Argument(help="Broker log dirs (the broker must be stopped).",
                                                   exists=True, file_okay=False)],
    bucket: Annotated[str, typer.Option("--bucket", help="Bucket to stage segments in.")],
    endpoint_url: Annotated[str | None, typer.Option("--endpoint-url", help="S3-compatible endpoint URL.")] = None,
    prefix: Annotated[str, typer.Option("--prefix", help="Key prefix (the plugin's key.prefix).")] = "",
    region: Annotated[str, typer.Option("--region")] = "us-east-1",
    path_style: Annotated[bool, typer.Option("--path-style/--virtual-host",
                                             help="Path-style or virtual-host addressing.")] = True,
    profile: Annotated[str | None, typer.Option("--profile", help="AWS shared-config profile.")] = None,
    engine: Annotated[str, typer.Option("--engine", help="spark or inline.")] = "inline",
    master: Annotated[str | None, typer.Option("--master", help="Spark master (default local[*]).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Plan only: write nothing, upload nothing.")] = False,
    snapshots_only: Annotated[bool, typer.Option("--snapshots-only",
                                                 help="Write missing producer snapshots, upload nothing.")] = False,
    metadata_log_dir: Annotated[list[Path] | None, typer.Option(
        "--metadata-log-dir", help="A KRaft metadata log dir (topic ids, cleanup policies); repeatable.")] = None,
    cluster: Annotated[Path | None, typer.Option("--cluster", help="Cluster description (YAML/JSON): compacted "
                                                                   "topics and controllers' metadata log dirs.",
                                                 exists=True, dir_okay=False)] = None,
    part_size: Annotated[int, typer.Option("--part-size", min=1, help="Multipart part size in bytes.")] = 8 << 20,
    multipart_threshold: Annotated[int, typer.Option("--multipart-threshold", min=1,
                                                     help="Use multipart uploads from this size on.")] = 8 << 20,
    broker_id: Annotated[int | None, typer.Option("--broker-id", help="Override meta.properties' node id.")] = None,
    run_id: Annotated[str | None, typer.Option("--run-id")] = None,
    exclude_topic: Annotated[list[str] | None, typer.Option(
        "--exclude-topic", help="A topic to keep out (reported ineligible, never a failure); repeatable. The "
        "cluster description's excluded_topics count too.")] = None,
    assign_leader_epoch: Annotated[bool, typer.Option(
        "--assign-leader-epoch", help="Give data written before KIP-101 leader epoch 0 from the log start offset "
        "in the leader-epoch-checkpoint, so its segments can be tiered (docs/formats.md §5.7).")] = False,
) -> None:
    """Make partitions ready for tiered storage and stage their closed segments.

    Exit 0 when every partition is ready and staged, 1 when any could not be (after doing all
    the others), 3 when refused (a live broker holds a log dir)."""
    from migration.audit.model import UnitStatus
    from migration.cli.common import EXIT_USAGE, console, err_console
    from migration.migrations.tier.driver import TierOptions, execute_tier
    from migration.orchestration.cluster import ClusterDescription

    if engine not in ("spark", "inline"):
        err_console.print(f"unknown engine {engine!r}: use spark or inline")
        raise typer.Exit(EXIT_USAGE)
    meta_dirs = [str(p) for p in (metadata_log_dir or [])]
    compacted: list[str] = []
    excluded = dict.fromkeys(exclude_topic or [], "excluded with --exclude-topic")
    if cluster is not None:
        desc = ClusterDescription.load(cluster)
        excluded = desc.exclusions("tier") | excluded
        compacted = sorted(set(desc.compacted_topics) | {t for t in desc.topic_configs if desc.is_compacted(t)})
        meta_dirs += [n.metadata_log_dir for n in desc.controllers if n.metadata_log_dir and
                      n.metadata_log_dir not in meta_dirs]
    options = TierOptions(bucket=bucket, endpoint_url=endpoint_url, prefix=prefix, region=region,
                          path_style=path_style, profile=profile, part_size=part_size,
                          multipart_threshold=multipart_threshold, snapshots_only=snapshots_only, dry_run=dry_run,
                          metadata_log_dirs=meta_dirs, compacted_topics=compacted,
                          assign_leader_epoch=assign_leader_epoch, excluded_topics=excluded)
    from migration.cli.progress import unit_progress

    with unit_progress("tier-prepare", console) as progress:
        report = execute_tier([str(d) for d in log_dirs], options=options, engine=engine, run_id=run_id,
                              master=master, broker_id=broker_id, progress=progress)
    if report.refusal:
        err_console.print(f"[red]refused:[/red] {report.refusal}")
    for _bid, topic, partition, u in report.iter_units():
        if u.status is UnitStatus.INELIGIBLE:
            console.print(f"[cyan]ineligible[/cyan] {topic}-{partition}: {'; '.join(w.message for w in u.warnings)}",
                          highlight=False, soft_wrap=True)
    for _bid, topic, partition, u in report.problem_units():
        msg = "; ".join(f.message for f in u.errors) or u.status.value
        console.print(f"[red]{u.status.value}[/red] {topic}-{partition} {u.unit}: {msg}", highlight=False,
                      soft_wrap=True)
    t = report.totals
    console.print(f"run {report.run_id}: {t.units} units, {t.units_ok} ok, {t.units_skipped} skipped, "
                  f"{t.units_ineligible} ineligible, "
                  f"{t.units_failed} failed; bucket {bucket} at {endpoint_url or 'AWS'}; exit {report.exit_code()}",
                  highlight=False, soft_wrap=True)
    raise typer.Exit(report.exit_code())
