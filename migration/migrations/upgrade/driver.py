"""The phased message-format upgrade: driver API shared by the CLI and the Airflow DAG.

    prepare_upgrade  -> job.json + prepare.json   (safety gates, inventory, validation, plan)
    run_unit         -> one segment rewritten      (engine: inline or Spark, one task per unit)
    finalize_upgrade -> RunReport                  (results, digests, corrupt segments, refusal)
    execute_upgrade  = prepare -> hold the log dir locks -> engine -> finalize
    rollback_run / commit_run                      (restore originals / drop backups)

A re-run with the same run id resumes: the job's units are reused, done units report their
recorded result, half-done ones are finished from their journal (see :mod:`.upgrade_unit`).
"""

from __future__ import annotations

import shlex
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from migration.audit.model import (
    Finding,
    FindingCode,
    FormatVersions,
    RunKind,
    RunReport,
    RunStatus,
    StopWindow,
    UnitResult,
    UnitStatus,
    UnitType,
    new_run_id,
)
from migration.audit.store import InvalidRunId, ReportNotFound, ReportStore
from migration.formats import names
from migration.migrations.common.backup import drop_backups, run_backup_dir, unit_backups
from migration.migrations.common.leader_epoch import (
    ASSIGNED_CODE,
    assignments,
    restore_leader_epoch,
)
from migration.migrations.common.replace import remove_cleaned_in_range
from migration.migrations.common.reports import notice_report, refused_report
from migration.migrations.upgrade.journal import IN_FLIGHT, JournalState, load_journal
from migration.migrations.upgrade.options import TARGET_MAGIC, UpgradeOptions
from migration.migrations.upgrade.plan import (
    EPOCH_UNIT_KIND,
    UNIT_KIND,
    EpochParams,
    SegmentParams,
    UpgradePlan,
    UpgradePrepare,
    WindowRecord,
    load_plan,
    pending_deletes_note,
    prepare_upgrade,
    run_lock,
)
from migration.migrations.upgrade.stage import Stage, StageRead
from migration.migrations.upgrade.unit import (
    epoch_backup_dir,
    rollback_unit,
    run_epoch_unit,
    run_unit,
    settle_unit,
)
from migration.runtime.engine import Progress, Unit, UnitKind, get_engine, unit_kinds
from migration.runtime.faults import unit_scope
from migration.runtime.runs import RunDir
from migration.runtime.safety import (
    Refused,
    RunLock,
    check_not_live,
    holding_locks,
    remove_under_lock,
)
from migration.settings import default_backup_root

__all__ = [
    "Refused",
    "UpgradeOptions",
    "commit_run",
    "execute_upgrade",
    "finalize_upgrade",
    "prepare_upgrade",
    "rollback_run",
    "run_unit",
]

# the kinds of unit an upgrade job runs, with their typed parameters (the engine checks them)
UNIT_KINDS = unit_kinds(UnitKind(UNIT_KIND, SegmentParams, run_unit),
                        UnitKind(EPOCH_UNIT_KIND, EpochParams, run_epoch_unit))


def _params(options: dict[str, Any], log_dirs: list[str], engine: str | None) -> dict[str, Any]:
    keep = ("target", "stamp_v0_with_mtime", "segment_bytes", "max_message_bytes", "index_interval_bytes",
            "backup_root", "force", "dry_run", "assign_leader_epoch", "excluded_topics")
    return {k: options.get(k) for k in keep if k in options} | {"log_dirs": log_dirs, "engine": engine}


def finalize_upgrade(run_id: str, *, engine: str | None = None, plan: UpgradePlan | None = None) -> RunReport:
    """Build, check and save the run report from the plan (read from the run dir when not
    given) and results.json."""
    plan = plan or load_plan(run_id)
    rd = plan.run_dir if plan is not None else RunDir(run_id)
    prep = plan.prepare if plan is not None else UpgradePrepare(run_id=run_id)
    units = plan.units if plan is not None else []
    opts = plan.options if plan is not None else None
    started = datetime.fromisoformat(prep.started_at) if isinstance(prep.started_at, str) else None
    target = opts.target if opts is not None else prep.target
    params = opts.model_dump(mode="json") if opts is not None else (prep.options or {})
    report = RunReport.start(RunKind.UPGRADE, _params(params, prep.log_dirs, engine), run_id=run_id, now=started,
                             formats=FormatVersions(target_magic=TARGET_MAGIC.get(target or "")))
    if prep.refusal:
        report.refuse(prep.refusal)
    for w in prep.warnings:
        report.warn(w)
    dry_run = prep.dry_run
    results = {r.get("unit_id"): r for r in rd.read_results()}
    for u in units:
        assert u.topic is not None and u.partition is not None
        report.plan_unit(u.broker_id, u.topic, u.partition, Path(u.path).name, u.size,
                         UnitType.FILE if u.kind == EPOCH_UNIT_KIND else UnitType.SEGMENT)
        r = results.get(u.id)
        if dry_run and u.kind == EPOCH_UNIT_KIND:
            ur = UnitResult(unit=Path(u.path).name, unit_type=UnitType.FILE, path=u.path, status=UnitStatus.PLANNED,
                            warnings=[Finding(file=u.path, code=ASSIGNED_CODE, message="would be " + EpochParams
                                              .model_validate(u.params).plan.describe())])
        elif dry_run:
            ur = UnitResult(unit=Path(u.path).name, path=u.path, status=UnitStatus.PLANNED,
                            input_format=",".join(sorted(SegmentParams.model_validate(u.params).formats)) or None,
                            output_format=target, bytes_before=u.size, bytes_after=prep.estimates.get(u.id),
                            records_before=prep.record_estimates.get(u.id),
                            records_after=prep.record_estimates.get(u.id))
        elif r is None:
            ur = UnitResult(unit=Path(u.path).name, path=u.path, status=UnitStatus.FAILED,
                            errors=[Finding(message="no result for this unit (engine stopped?); re-run with the "
                                                    "same run id to finish it")])
        elif "unit_result" in r:
            ur = UnitResult.model_validate(r["unit_result"])
        else:
            ur = UnitResult(unit=Path(u.path).name, path=u.path, status=UnitStatus.FAILED,
                            duration_s=r.get("duration_s"),
                            errors=[Finding(message=str(r.get("error", "unit failed")), file=u.path)])
        report.add_unit(u.broker_id, u.topic, u.partition, ur, track_progress=not dry_run)
    for row in prep.skipped:
        fmt = ",".join(sorted(row.formats)) or None
        report.add_unit(row.broker_id, row.topic, row.partition, UnitResult(
            unit=row.unit, path=row.path, status=UnitStatus.SKIPPED, input_format=fmt, output_format=fmt,
            bytes_before=row.bytes, bytes_after=row.bytes, records_before=row.records, records_after=row.records,
            warnings=[Finding(file=row.path, code=FindingCode.ALREADY_IN_TARGET,
                              message=f"already {target or 'in the target format'}: left as it is" if row.formats
                              else "empty segment: left as it is")]),
            track_progress=False)
    for ine in prep.ineligible:
        report.add_unit(ine.broker_id, ine.topic, ine.partition, UnitResult(
            unit=Path(ine.path).name, unit_type=UnitType.PARTITION, path=ine.path, status=UnitStatus.INELIGIBLE,
            bytes_before=ine.bytes, bytes_after=ine.bytes,
            warnings=[Finding(file=ine.path, code=FindingCode.of(ine.code), message=ine.reason)]), track_progress=False)
    for bad in prep.corrupt:
        report.add_unit(bad.broker_id, bad.topic, bad.partition, UnitResult(
            unit=bad.unit, path=bad.path, status=UnitStatus.FAILED, bytes_before=bad.bytes,
            errors=[Finding(file=bad.file, position=bad.position, code=FindingCode.of(bad.code),
                            message=f"corrupt segment, not rewritten: {bad.message}")]), track_progress=False)
    if prep.window is not None and not dry_run:
        _add_window(report, units, results, prep.window)
    if dry_run:
        growth = sum(prep.estimates.values()) - sum(u.size for u in units)
        segments = [u for u in units if u.kind == UNIT_KIND]
        report.warn(f"dry run: {len(segments)} segment(s), {sum(u.size for u in units)} bytes to rewrite, "
                    f"expected {'growth' if growth >= 0 else 'shrinkage'} about {abs(growth)} bytes; nothing changed")
    elif opts is not None and unit_backups(opts.backup_root, run_id):
        report.warn(f"originals kept in {run_backup_dir(opts.backup_root, run_id)} until 'kmigrate commit "
                    f"{run_id}' (or 'kmigrate rollback {run_id}')")
    report.finish()
    ReportStore().save(report)
    return report


def _add_window(report: RunReport, units: list[Unit], results: dict[Any, dict[str, Any]], w: WindowRecord) -> None:
    """Each broker's stop window: its segments swapped from the stage or converted in the run,
    the staged ones left unused, and the window's duration."""
    counts: dict[int, list[int]] = {}  # broker -> swapped, converted, discarded, prefixed
    for u in units:
        r = results.get(u.id)
        if u.kind == UNIT_KIND and r is not None:
            c = counts.setdefault(u.broker_id, [0, 0, 0, 0])
            c[0 if r.get("from_stage") else 1] += 1
            c[3] += bool(r.get("from_prefix"))
    broker_of_dir = {u.log_dir: u.broker_id for u in units}
    only = report.brokers[0].broker_id if len(report.brokers) == 1 else -1
    for d, n in w.discarded.items():
        counts.setdefault(broker_of_dir.get(d, only), [0, 0, 0, 0])[2] += n
    for broker_id, (swapped, converted, discarded, prefixed) in sorted(counts.items()):
        report.broker(broker_id).window = StopWindow(stage_id=w.stage_id, swapped=swapped, converted=converted,
                                                     prefixed=prefixed, discarded=discarded,
                                                     duration_s=w.duration_s)


def execute_upgrade(log_dirs: list[str], *, options: UpgradeOptions, engine: str = "inline",
                    run_id: str | None = None, master: str | None = None, spark: Any = None,
                    broker_id: int | None = None, progress: Progress | None = None) -> RunReport:
    """prepare -> hold the log dir locks -> run the units on ``engine`` -> finalize."""
    run_id = run_id or new_run_id(RunKind.UPGRADE)
    window_start = time.monotonic()
    try:
        plan = prepare_upgrade(log_dirs, run_id=run_id, options=options, broker_id=broker_id)
    except Refused as exc:
        RunDir(run_id).write_prepare(UpgradePrepare(
            run_id=run_id, started_at=datetime.now().astimezone().isoformat(), log_dirs=[str(d) for d in log_dirs],
            refusal=str(exc), options=options.model_dump(mode="json"), target=options.target))
        return finalize_upgrade(run_id, engine=engine)
    if plan.prepare.dry_run or plan.options is None:
        return finalize_upgrade(run_id, engine=engine, plan=plan)
    opts = plan.options
    dirs = plan.prepare.log_dirs
    lock = opts.run_lock or run_lock(dirs, opts.target, run_id)
    try:
        with holding_locks(dirs, lock):
            removed = remove_under_lock(opts.model_dump(mode="json"))
            if removed:
                note = pending_deletes_note(opts.remove_under_lock, removed=False)
                plan.prepare.warnings = [w if w != note else pending_deletes_note([str(p) for p in removed],
                                                                                  removed=True)
                                         for w in plan.prepare.warnings]
                plan.run_dir.write_prepare(plan.prepare)
            results = get_engine(engine, master=master, spark=spark).run(
                plan.units, opts.model_dump(mode="json"), progress, kinds=UNIT_KINDS)
    except Refused as exc:
        plan.prepare.refusal = str(exc)
        plan.run_dir.write_prepare(plan.prepare)
        return finalize_upgrade(run_id, engine=engine, plan=plan)
    plan.run_dir.write_results(results)
    if opts.stage is not None and opts.stage_root is not None and plan.prepare.window is None:
        plan.prepare.window = close_window(Stage(opts.stage_root, opts.stage), plan.units, dirs, results,
                                            time.monotonic() - window_start, read=plan.stage_read)
        plan.run_dir.write_prepare(plan.prepare)
    return finalize_upgrade(run_id, engine=engine, plan=plan)


def close_window(stage: Stage, units: list[Unit], log_dirs: list[str], results: list[dict[str, Any]],
                  duration_s: float, *, read: StageRead | None = None) -> WindowRecord:
    """After the window's units: the stage's segments and prefixes of these log dirs are dropped
    (those swapped in live on in the log dir under their own names; the rest are of no use now,
    and counted as discarded: their original changed or is gone, or their unit failed), and
    the stage retired once nothing of it is left (its bookkeeping removed once the broker runs
    again: stage.py). ``read``: what
    the window's plan read of the stage, when this process made the plan (not read again
    while the stage is there; one discarded meanwhile reads as empty, as it is)."""
    from_stage = {r.get("unit_id") for r in results if r.get("from_stage") or r.get("from_prefix")}
    used = {(p.partition_dir, p.base_offset) for u in units if u.id in from_stage
            for p in [SegmentParams.model_validate(u.params)]}
    discarded: dict[str, int] = {}
    if read is None or not stage.exists():
        read = stage.read()
    entries = read.entries
    ours = []
    for e in entries:
        d = next((d for d in log_dirs if Path(e.partition_dir).is_relative_to(d)), None)
        if d is None:
            continue  # another broker's, staged under the same id
        ours.append(e)
        if (e.partition_dir, e.base_offset) not in used:
            discarded[d] = discarded.get(d, 0) + 1
    verified = read.verified
    ours_verified = [v for v in verified if any(Path(v.partition_dir).is_relative_to(d) for d in log_dirs)]
    ours_prefixes = []
    for pr in read.prefixes:
        d = next((d for d in log_dirs if Path(pr.partition_dir).is_relative_to(d)), None)
        if d is None:
            continue
        ours_prefixes.append(pr)
        if (pr.partition_dir, pr.base_offset) not in used:  # truncated, gone, or staged with other options
            discarded[d] = discarded.get(d, 0) + 1
    if len(ours) == len(entries) and len(ours_verified) == len(verified) and len(ours_prefixes) == len(read.prefixes):
        stage.retire()  # the rest once the broker runs again (stage.py, sweep_deleted)
    else:
        stage.forget(ours)
        stage.forget_verified(ours_verified)
        stage.forget_prefixes(ours_prefixes)
    return WindowRecord(stage_id=stage.stage_id, duration_s=duration_s, discarded=discarded)


def _units_from_backups(run_id: str, backup_root: str) -> list[Unit]:
    """The units of a run whose run directory is lost, from its backup manifests."""
    units = []
    for ub in unit_backups(backup_root, run_id):
        place = ub.place
        if place is None or place.base_offset is None or place.log_dir is None:
            raise Refused(f"the backup manifest of unit {ub.unit_id} (run {run_id}) predates the manifests "
                          "that say where a unit lives; roll back with the run directory in place")
        units.append(Unit(kind=UNIT_KIND, id=ub.unit_id, broker_id=place.broker_id, log_dir=place.log_dir,
                          path=str(Path(ub.partition_dir) / names.log_file_name(place.base_offset)),
                          topic=place.topic, partition=place.partition, serial_key=ub.partition_dir,
                          params={"partition_dir": ub.partition_dir, "base_offset": place.base_offset,
                                  "next_base_offset": place.next_base_offset}))
    return units


def rollback_run(run_id: str, *, backup_root: str | None = None) -> RunReport:
    """Restore the originals of every unit of an upgrade run (byte for byte, mtimes too) and
    remove the segments it created, from whatever state the log dirs are in. Without the run's
    directory (job, journals), the backup manifests under ``backup_root`` (default: the
    default backup root) say what to restore."""
    report_id = new_run_id(RunKind.ROLLBACK)
    run_path = RunDir.path_of(run_id)
    rd = RunDir.existing(run_id)
    done, committed = _finished(run_id, rd)
    if done is not None:
        # Idempotent: the originals went back then; restoring again could undo what Kafka wrote since.
        return notice_report(RunKind.ROLLBACK, report_id, {"upgrade_run_id": run_id},
                             f"run {run_id} already rolled back on {done}: nothing to do",
                             code=FindingCode.ALREADY_ROLLED_BACK)
    if committed is not None:
        return refused_report(RunKind.ROLLBACK, report_id, f"run {run_id} already committed on {committed}: its "
                              "backups were dropped then, nothing to roll back from", {"upgrade_run_id": run_id})
    if rd is not None and rd.job_path.exists():
        units, opts = rd.read_job()
        dirs = rd.read_prepare().get("log_dirs", sorted({u.log_dir for u in units}))
    else:
        root = str(Path(backup_root).resolve() if backup_root else default_backup_root())
        try:
            units = _units_from_backups(run_id, root)
        except (Refused, ValueError) as exc:
            return refused_report(RunKind.ROLLBACK, report_id, str(exc), {"upgrade_run_id": run_id})
        if not units and rd is not None:
            # The job file is durable before the first unit touches a log dir, and a unit's
            # backup before its first change: with neither, the run changed no log dir (it was
            # refused, a dry run, or stopped, by a kill or a power cut, before its first unit).
            return notice_report(RunKind.ROLLBACK, report_id, {"upgrade_run_id": run_id},
                                 f"run {run_id} never changed a log dir (no job file in {run_path}, no backups in "
                                 f"{root}): nothing to roll back")
        if not units:
            return refused_report(RunKind.ROLLBACK, report_id, f"no upgrade job for run {run_id} in {run_path.parent} "
                                  f"and no backups of it in {root}", {"upgrade_run_id": run_id})
        opts = {"run_id": run_id, "run_dir": str(run_path.resolve()), "backup_root": root}
        dirs = sorted({u.log_dir for u in units})
    params = {"upgrade_run_id": run_id, "log_dirs": dirs}
    # recorded under the upgrade's run id: killed, it is resumed by the same command, and it
    # resolves a killed upgrade of that run
    lock = RunLock(run_id=run_id, run_kind="rollback", resume=f"kmigrate rollback {shlex.quote(run_id)}",
                   blocks_other_runs=True)
    try:
        check_not_live(dirs, resolves=run_id)
        with holding_locks(dirs, lock):
            report = RunReport.start(RunKind.ROLLBACK, params, run_id=report_id)
            segments = [u for u in units if u.kind != EPOCH_UNIT_KIND]  # checkpoints: restored below
            # first every replacement in flight ends, then the originals are staged unit by unit
            settled = {}
            for u in segments:
                with unit_scope(u.id):
                    settled[u.id] = settle_unit(u, opts)
            files = 0
            for u in segments:
                with unit_scope(u.id):
                    r = rollback_unit(u, opts, settled=settled[u.id])
                assert u.topic is not None and u.partition is not None
                ur = UnitResult.model_validate(r["unit_result"])
                if ur.status is UnitStatus.SKIPPED and not ur.warnings:
                    ur.warnings = [Finding(file=ur.path, code=FindingCode.NOT_CHANGED, message="the run never "
                                           "replaced this segment: nothing to restore")]
                elif ur.status is UnitStatus.OK:
                    j = load_journal(opts["run_dir"], u.id)
                    files += len(j.originals) if j is not None else 0
                report.add_unit(u.broker_id, u.topic, u.partition, ur)
            _restore_epochs(report, units, opts["backup_root"], run_id)
    except Refused as exc:
        return refused_report(RunKind.ROLLBACK, report_id, str(exc), params)
    restored = [u for u in report.iter_results() if u.status is UnitStatus.OK and u.unit_type is UnitType.SEGMENT]
    summary = (f"restored {len(restored)} segment(s): {sum(u.records_after or 0 for u in restored):,} records, "
               f"{sum(u.bytes_after or 0 for u in restored):,} bytes, {files} file(s)")
    report.warn(f"run {run_id}: {summary}")
    report.finish()
    ReportStore().save(report)
    _record_event(run_id, report, summary)
    return report


def _record_event(run_id: str, report: RunReport, summary: str) -> None:
    """The upgrade run's report says what became of it; a rollback or commit that went through
    is also marked in its run directory, which makes the next one a no-op (:func:`_finished`)."""
    ReportStore().append_event(run_id, report, summary)
    rd = RunDir.existing(run_id)  # a rollback without its run directory may have made one since
    if report.status is RunStatus.OK and rd is not None:
        rd.mark_done(report.kind, report_id=report.run_id, at=report.finished_at or report.started_at, summary=summary)


def _finished(run_id: str, rd: RunDir | None) -> tuple[str | None, str | None]:
    """When (and by which report) a rollback and a commit of ``run_id`` went through, each as
    "<time> UTC (report <id>)", None where none did. From the run directory's marks, else the
    run's report's events (the run directory may be lost), the report read at most once."""
    kinds = (RunKind.ROLLBACK, RunKind.COMMIT)
    marks = {k: rd.done_at(k) if rd is not None else None for k in kinds}
    if None in marks.values():
        try:
            report: RunReport | None = ReportStore().load(run_id)
        except (ReportNotFound, InvalidRunId, OSError, ValueError):
            report = None
        for k in kinds:
            event = report.last_event(k) if report is not None and marks[k] is None else None
            if event is not None:
                marks[k] = f"{event.at:%Y-%m-%d %H:%M:%S} UTC (report {event.run_id})"
    return marks[RunKind.ROLLBACK], marks[RunKind.COMMIT]


def _restore_epochs(report: RunReport, units: list[Unit], backup_root: str, run_id: str) -> None:
    """Every leader-epoch-checkpoint the run changed, back as it was (byte for byte, mtime too)."""
    where = {EpochParams.model_validate(u.params).partition_dir: u for u in units if u.kind == EPOCH_UNIT_KIND}
    for manifest, a in assignments(epoch_backup_dir(backup_root, run_id)):
        path = str(Path(a.partition_dir) / names.LEADER_EPOCH_CHECKPOINT_FILE)
        u = where.get(a.partition_dir)
        broker_id = u.broker_id if u is not None else -1
        try:
            restore_leader_epoch(manifest)
            ur = UnitResult(unit=names.LEADER_EPOCH_CHECKPOINT_FILE, unit_type=UnitType.FILE, path=path,
                            status=UnitStatus.OK, warnings=[Finding(
                                file=path, code=FindingCode.LEADER_EPOCH_RESTORED,
                                message="restored as it was before the run" + (" (no file)" if a.before is None
                                                                               else ""))])
        except (OSError, ValueError) as exc:
            ur = UnitResult(unit=names.LEADER_EPOCH_CHECKPOINT_FILE, unit_type=UnitType.FILE, path=path,
                            status=UnitStatus.FAILED, errors=[Finding(file=path, message=f"not restored: {exc}")])
        report.add_unit(broker_id, a.topic, a.partition, ur)


def commit_run(run_id: str) -> RunReport:
    """Drop the backups of a finished upgrade run (after this, no rollback)."""
    rd = RunDir.existing(run_id)
    report_id = new_run_id(RunKind.COMMIT)
    params: dict[str, Any] = {"upgrade_run_id": run_id}
    if rd is None or not rd.job_path.exists():
        return refused_report(RunKind.COMMIT, report_id, f"no upgrade job for run {run_id}", params)
    rolled_back, committed = _finished(run_id, rd)
    if rolled_back is not None or committed is not None:
        return notice_report(RunKind.COMMIT, report_id, params,
                             f"nothing to commit: run {run_id} was rolled back on {rolled_back}"
                             if rolled_back is not None
                             else f"run {run_id} already committed on {committed}: its backups were dropped then",
                             code=FindingCode.NOT_CHANGED)
    units, opts = rd.read_job()
    unfinished = []
    for u in units:
        j = load_journal(opts["run_dir"], u.id)
        if j is not None and j.state in IN_FLIGHT:
            unfinished.append(f"{u.path} ({j.state.value})")
    if unfinished:
        return refused_report(RunKind.COMMIT, report_id, "units still in progress, their backups are needed: "
                               + ", ".join(unfinished[:5]) + "; re-run the upgrade or roll back first", params)
    report = RunReport.start(RunKind.COMMIT, params | {"backup_root": opts.get("backup_root")}, run_id=report_id)
    files = records = size = 0
    for u in units:
        j = load_journal(opts["run_dir"], u.id)
        if j is not None and j.state is JournalState.STARTED:
            seg = SegmentParams.model_validate(u.params)
            remove_cleaned_in_range(Path(seg.partition_dir), seg.base_offset, seg.next_base_offset)
        assert u.topic is not None and u.partition is not None
        if u.kind == EPOCH_UNIT_KIND:
            report.add_unit(u.broker_id, u.topic, u.partition, UnitResult(
                unit=Path(u.path).name, unit_type=UnitType.FILE, path=u.path, status=UnitStatus.OK,
                warnings=[Finding(file=u.path, code=FindingCode.LEADER_EPOCH_ASSIGNED, message="its original, "
                                  "kept for a rollback, dropped with the backups")]))
            continue
        done = j is not None and j.state is JournalState.DONE
        ur = UnitResult(unit=Path(u.path).name, path=u.path, status=UnitStatus.OK if done else UnitStatus.SKIPPED,
                        bytes_before=sum(f.size for f in j.originals) if j is not None else None)
        if done:
            assert j is not None
            ur.records_before = j.digest_before.records if j.digest_before is not None else None
            files += len(j.originals)
            records += ur.records_before or 0
            size += ur.bytes_before or 0
        else:
            ur.warnings = [Finding(file=u.path, code=FindingCode.NOT_CHANGED, message="the run never replaced "
                                   "this segment" + (f" (journal: {j.state.value})" if j is not None else "")
                                   + ": no original of it to drop")]
        report.add_unit(u.broker_id, u.topic, u.partition, ur)
    freed = drop_backups(opts["backup_root"], run_id)
    kept = sum(1 for u in report.iter_results() if u.status is UnitStatus.OK and u.unit_type is UnitType.SEGMENT)
    summary = (f"dropped the originals of {kept} segment(s): {records:,} records, {size:,} bytes, {files} file(s) "
               f"({freed:,} bytes freed)")
    report.warn(f"backups of run {run_id} dropped: {summary}; rollback is no longer possible")
    report.finish()
    ReportStore().save(report)
    _record_event(run_id, report, summary)
    return report
