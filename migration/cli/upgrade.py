"""``kmigrate upgrade`` / ``rollback`` / ``commit``: the message-format upgrade from the shell.

Exit codes: 0 ok, 1 a unit failed or a digest differs, 2 usage error, 3 refused (a live
broker, an unclean shutdown without --force, leftovers of an interrupted run).
"""

from __future__ import annotations

# Imports of the migrations sit inside the commands: start-up cost, measured (migration/cli/__init__.py).
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from migration.cli.common import (
    ENGINE_HELP,
    EngineName,
    check_paths,
    check_run_id,
    console,
    err_console,
    usage_error,
)
from migration.cli.progress import engine_progress
from migration.logdir.paths import Need
from migration.migrations.upgrade.options import TargetFormat  # 7 ms: the option's choices


def _show(report: Any, command: str) -> NoReturn:
    from migration.cli.common import ineligible_lines, show_report

    raise typer.Exit(show_report(report, command, lines=ineligible_lines(report)))


def _refused_at_once(log_dirs: list[str], run_id: str, force: bool) -> bool:
    """Whether the gates that refuse a run before it starts (a live broker, a killed run's work
    in flight, an unclean shutdown without --force) will refuse this one; the run checks them
    again and reports the refusal."""
    from migration.runtime.safety import Refused, check_clean_shutdown, check_not_live

    try:
        check_not_live(log_dirs, run_id=run_id)
        check_clean_shutdown(log_dirs, force=force)
    except Refused:
        return True
    return False


def upgrade(
    log_dirs: Annotated[list[Path], typer.Argument(help="Broker log dirs (stopped broker).", show_default=False)],
    # a plain value checked below, so that a wrong one is one line naming the valid ones
    to_value: Annotated[str | None, typer.Option("--to", metavar="[v1|v2]", help="Target message format: v1 or v2 "
                                                 "(required, but with --discard-stage).", show_default=False)] = None,
    engine: Annotated[EngineName, typer.Option("--engine", help=ENGINE_HELP)] = EngineName.SPARK,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Plan only: units, bytes, expected growth.")] = False,
    backup_root: Annotated[Path | None, typer.Option(help="Where originals are kept (outside every log dir).")
                           ] = None,
    stamp_v0_with_mtime: Annotated[bool, typer.Option(
        "--stamp-v0-with-mtime", help="Give v0 messages the segment mtime as LogAppendTime (default: -1).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Proceed after an unclean shutdown.")] = False,
    master: Annotated[str | None, typer.Option(help="Spark master (default local[*]).")] = None,
    run_id: Annotated[str | None, typer.Option(help="Run id; an existing one resumes that run.")] = None,
    # Kafka's own lower bounds (LogConfig: segment.bytes at least LegacyRecord.RECORD_OVERHEAD_V0,
    # max.message.bytes at least 0).
    segment_bytes: Annotated[int, typer.Option(min=14, help="segment.bytes: split rewritten segments above it.")
                             ] = 1 << 30,
    max_message_bytes: Annotated[int, typer.Option(min=0, help="max.message.bytes: split larger converted "
                                                   "batches.")] = 1048588,
    exclude_topic: Annotated[list[str] | None, typer.Option(
        "--exclude-topic", help="A topic to leave alone (reported ineligible, never a failure); repeatable.")
                             ] = None,
    assign_leader_epoch: Annotated[bool, typer.Option(
        "--assign-leader-epoch", help="With --to v2: give data written before KIP-101 leader epoch 0 from the log "
        "start offset (leader-epoch-checkpoint and rewritten batches), so tiered storage can take it; rollback "
        "restores the checkpoint.")] = False,
    prestage: Annotated[bool, typer.Option(
        "--prestage", help="With the broker RUNNING: convert its closed segments into a stage, and what its "
        "active segments hold so far (no lock taken, nothing written in a log dir); --run-id names the stage. "
        "Then, with the broker stopped, swap them in with --stage. Runs inline, one segment at a time.")] = False,
    stage: Annotated[str | None, typer.Option(
        "--stage", help="The stop window: swap in the segments this prestage staged whose originals are "
        "unchanged, convert of an active segment only what follows its staged bytes, convert the rest.")] = None,
    stage_root: Annotated[Path | None, typer.Option(
        help="Where stages live, on the log dirs' file system (default: beside the backups).")] = None,
    budget: Annotated[int | None, typer.Option(
        min=1, help="--prestage: bytes of segments one pass converts at most; the next pass carries on.")] = None,
    io_rate: Annotated[int | None, typer.Option(
        min=1, help="--prestage: bytes per second read plus written, at most.")] = None,
    discard_stage: Annotated[str | None, typer.Option(
        "--discard-stage", help="Remove a stage that will not be swapped in, or what a window left of one it "
                                "retired (safe at any time).")] = None,
) -> None:
    """Upgrade segments to message format v1 or v2, crash-safely, with backups and proof.

    Exit 0 ok, 1 a unit failed, 2 when a path is not a broker log dir (nothing is written), 3
    refused."""
    from migration.audit.model import RunKind, new_run_id
    from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade
    from migration.migrations.upgrade.plan import resume_command

    if discard_stage is not None:
        _discard(log_dirs, discard_stage, stage_root)
    if to_value is None:
        raise usage_error("upgrade", "--to is required: v1 or v2")
    if prestage and stage is not None:
        raise usage_error("upgrade", "--prestage makes a stage, --stage swaps one in: give one of them")
    if prestage and dry_run:
        raise usage_error("upgrade", "--prestage with --dry-run: a dry run of the upgrade itself plans what the "
                                     "prestage would convert (drop --prestage)")
    if not prestage and (budget is not None or io_rate is not None):
        raise usage_error("upgrade", "--budget and --io-rate pace a --prestage; the window and an offline upgrade "
                                     "run at full speed")
    try:
        to = TargetFormat(to_value)
    except ValueError:
        raise usage_error("upgrade", f"--to {to_value!r} is not a message format kmigrate writes: use "
                                     + " or ".join(t.value for t in TargetFormat)) from None
    if assign_leader_epoch and to is not TargetFormat.V2:
        raise typer.BadParameter("needs --to v2: only v2 batches carry a partition leader epoch",
                                 param_hint="--assign-leader-epoch")
    check_paths("upgrade", log_dirs, Need.BROKER_LOG_DIR)
    check_run_id("upgrade", run_id)
    check_run_id("upgrade", stage, "--stage")
    options = UpgradeOptions(target=to, stamp_v0_with_mtime=stamp_v0_with_mtime, force=force,
                             dry_run=dry_run, backup_root=str(backup_root) if backup_root else None,
                             segment_bytes=segment_bytes, max_message_bytes=max_message_bytes,
                             assign_leader_epoch=assign_leader_epoch, stage=stage,
                             stage_root=str(stage_root) if stage_root else None,
                             excluded_topics=dict.fromkeys(exclude_topic or [], "excluded with --exclude-topic"))
    if prestage:
        _prestage(log_dirs, options, run_id or new_run_id(RunKind.PRESTAGE), budget, io_rate)
    run_id = run_id or new_run_id(RunKind.UPGRADE)
    if not dry_run and not _refused_at_once([str(d) for d in log_dirs], run_id, force):
        # said first, so that an operator whose run is killed knows what to type next (not for a
        # run refused before it starts: the refusal is all there is to say)
        err_console.print(
            f"run {run_id}; if it is interrupted, resume it with: "
            f"{resume_command([str(d.resolve()) for d in log_dirs], to.value, run_id)} "
            f"or roll it back with: kmigrate rollback {run_id}", highlight=False, soft_wrap=True)
    with engine_progress("upgrade", console, engine=engine.value, run_id=run_id,
                         notes=err_console) as progress:
        report = execute_upgrade([str(d) for d in log_dirs], options=options, engine=engine.value,
                                 run_id=run_id, master=master if engine is EngineName.SPARK else None,
                                 progress=progress)
    _show(report, "upgrade")


def _prestage(log_dirs: list[Path], options: Any, stage_id: str, budget: int | None, io_rate: int | None
              ) -> NoReturn:
    from migration.migrations.upgrade.prestage import PrestageOptions, prestage_upgrade

    err_console.print(f"stage {stage_id}: converting closed segments beside the running broker", highlight=False,
                      soft_wrap=True)
    report = prestage_upgrade([str(d) for d in log_dirs], options=PrestageOptions(
        upgrade=options, stage_id=stage_id, stage_root=options.stage_root, budget=budget, io_rate=io_rate))
    _show(report, "upgrade --prestage")


def _discard(log_dirs: list[Path], stage_id: str, stage_root: Path | None) -> NoReturn:
    from migration.migrations.upgrade.stage import Stage, sweep_deleted
    from migration.settings import default_stage_root

    check_run_id("upgrade", stage_id, "--discard-stage")
    check_paths("upgrade", log_dirs, Need.BROKER_LOG_DIR)
    root = stage_root.resolve() if stage_root else default_stage_root([str(d) for d in log_dirs])
    s = Stage(root, stage_id)
    if not s.exists():
        if s.retired():  # its window swapped it in and retired it; the leftovers wait for a sweep
            sweep_deleted(root)
            console.print(f"stage {stage_id} was retired by its stop window; what it left in {root} is removed",
                          highlight=False, soft_wrap=True)
            raise typer.Exit(0)
        err_console.print(f"kmigrate upgrade: no stage {stage_id} in {root}: nothing to discard (another "
                          "--stage-root?)", highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    entries = s.manifest_count()  # counted, not read: a damaged manifest is discarded too
    freed = s.discard()
    console.print(f"stage {stage_id} discarded: {entries} staged segment(s), {freed:,} bytes freed", highlight=False,
                  soft_wrap=True)
    raise typer.Exit(0)


def rollback(run_id: Annotated[str, typer.Argument(
                 help="The upgrade run to undo, or an Airflow DAG run id: each of its upgrade step runs, the last "
                      "first.")],
             backup_root: Annotated[Path | None, typer.Option(
                 help="Where the run kept its originals, when its run directory is lost (default: the root "
                      "its report names, else the default backup root).")] = None) -> None:
    """Restore the originals of an upgrade run (byte for byte, mtimes too), whatever state the
    log dirs are in: finished, interrupted, or loaded by Kafka since. A tier-prepare run: the
    snapshots it created removed, the files it replaced and the leader-epoch-checkpoint restored
    (objects it staged stay in the store)."""
    from migration.cli.common import classify_run, rollback_dag_run, say_home, show_report, tier_rollback_lines
    from migration.migrations.upgrade.driver import rollback_run

    say_home("rollback")
    rollback_dag_run(run_id, backup_root)  # a DAG run id: its step runs (exits)
    # An unknown run id is a usage error (2), checked before anything is written.
    run = classify_run("rollback", run_id, backup_root=backup_root, from_backups=True)
    if run.kind == "tier-prepare":  # its log-dir changes undone (objects it staged stay in the store)
        from migration.migrations.tier.driver import rollback_tier_run

        report = rollback_tier_run(run_id, backup_root=run.backup_root)
        raise typer.Exit(show_report(report, "rollback", lines=tier_rollback_lines(report)))
    _show(rollback_run(run_id, backup_root=run.backup_root), "rollback")


def commit(run_id: Annotated[str, typer.Argument(help="The upgrade run to make final.")]) -> None:
    """Drop the backups of an upgrade run (no rollback afterwards)."""
    from migration.cli.common import classify_run, say_home
    from migration.migrations.upgrade.driver import commit_run

    say_home("commit")
    classify_run("commit", run_id)
    _show(commit_run(run_id), "commit")


def verify(run_id: Annotated[str, typer.Argument(help="The upgrade run to verify (before approving it).")],
           kafka_home: Annotated[Path | None, typer.Option(
               "--kafka-home", help="The Kafka distribution you upgrade to (the directory with libs/*.jar): its own "
               "kafka-dump-log --deep-iteration reads every segment the run rewrote.", show_default=False)] = None
           ) -> None:
    """Have Apache Kafka's own kafka-dump-log read every segment an upgrade run rewrote and
    compare its batches, record counts and offsets with the run's report; the report then says
    "verified by Apache Kafka X.Y.Z". Exit 0 verified, 1 Kafka disagrees, 2 a wrong run id or
    --kafka-home (no such directory, no libs/*.jar, no java)."""
    from migration.audit.model import RunKind
    from migration.audit.store import ReportNotFound, ReportStore
    from migration.cli.common import EXIT_OK, EXIT_PROBLEMS, say_home, usage_error
    from migration.migrations.upgrade.verify_kafka import KafkaHomeError, find_kafka, record_verification, verify_run

    if kafka_home is None:
        raise usage_error("verify", "give --kafka-home DIR: the Kafka distribution whose kafka-dump-log reads the "
                                    "run's rewritten segments")
    say_home("verify")
    store = ReportStore()
    try:
        report = store.load(run_id)
    except ReportNotFound:
        raise usage_error("verify", f"no report of run {run_id!r} (see kmigrate report --list)") from None
    if report.kind is not RunKind.UPGRADE:
        raise usage_error("verify", f"run {run_id} is a {report.kind.value} run: verify takes an upgrade run")
    try:
        dist = find_kafka(kafka_home)
        result = verify_run(report, dist)
    except KafkaHomeError as exc:
        raise usage_error("verify", str(exc)) from None
    record_verification(report, result)
    store.save(report)
    console.print(result.summary(), highlight=False, soft_wrap=True)
    for line in result.problems:
        err_console.print(f"kmigrate verify: {line}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"report: {store.json_path(report.run_id)}", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_OK if result.ok else EXIT_PROBLEMS)


def register(app: typer.Typer) -> None:
    app.command()(upgrade)
    app.command()(rollback)
    app.command()(commit)
    app.command()(verify)
