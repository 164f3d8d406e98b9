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

import os
import shlex
from datetime import datetime
from pathlib import Path
from typing import Any

from migration.audit.model import (
    Finding,
    FormatVersions,
    RunKind,
    RunReport,
    UnitResult,
    UnitStatus,
    UnitType,
    new_run_id,
)
from migration.audit.store import ReportStore
from migration.formats import names
from migration.formats.errors import KafkaFormatError
from migration.logdir.model import scan_log_dir
from migration.logdir.validate import ValidationResult, validate_segment
from migration.migrations.common.backup import drop_backups, unit_backups, write_backup_manifest
from migration.migrations.common.index_repair import rebuild_reasons
from migration.migrations.common.leader_epoch import (
    ASSIGNED_CODE,
    EpochAssignment,
    assignments,
    plan_assignment,
    restore_leader_epoch,
)
from migration.migrations.common.replace import remove_cleaned_in_range
from migration.migrations.upgrade.journal import IN_FLIGHT, JOURNAL_DIR, JournalState, UnitJournal, load_journal
from migration.migrations.upgrade.options import UpgradeOptions
from migration.migrations.upgrade.rewrite import Converter, RewriteSpec
from migration.migrations.upgrade.unit import epoch_backup_dir, rollback_unit, run_epoch_unit, run_unit
from migration.runtime.engine import Progress, Unit, get_engine
from migration.runtime.faults import unit_scope
from migration.runtime.runs import RunDir
from migration.runtime.safety import (
    Refused,
    RunLock,
    check_backup_root,
    check_clean_shutdown,
    check_not_live,
    holding_locks,
)
from migration.settings import default_backup_root, runs_dir

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

UNIT_KIND = "upgrade-segment"
# --assign-leader-epoch: one unit per partition that needs it, before its segment units
EPOCH_UNIT_KIND = "upgrade-leader-epoch"
UNIT_FUNCTIONS = {UNIT_KIND: run_unit, EPOCH_UNIT_KIND: run_epoch_unit}
# Validation findings that make a segment's data unusable as input (index findings are not:
# the rewrite rebuilds the indexes).
CORRUPT_CODES = frozenset({"corrupt-batch", "trailing-bytes", "offset-order", "offset-beyond-segment",
                           "record-offset"})
def _unit_id(broker_id: int, dir_index: int, topic: str, partition: int, base_offset: int) -> str:
    return f"b{broker_id}.d{dir_index}.{topic}-{partition}.{names.filename_prefix_from_offset(base_offset)}"


def _backup_root(options: UpgradeOptions, log_dirs: list[str]) -> str:
    """``--backup-root``, else one on the log dirs' file system, so backups are hard links
    (settings.default_backup_root; docs/operations.md, "Backups")."""
    return str(Path(options.backup_root).resolve() if options.backup_root else default_backup_root(log_dirs))


class _SegmentSurvey:
    """Collects, while the validator streams a segment, its formats and, in a dry run, how many
    bytes the conversion adds (negative: removes). The dry run converts every batch in memory
    with the upgrade's own converter and writes nothing, so the figure is what the real run
    does, not an estimate (compression included)."""

    def __init__(self, target_magic: int, *, estimate_growth: bool, spec: RewriteSpec | None = None) -> None:
        self.target = target_magic
        self.estimate_growth = estimate_growth
        self.converter = Converter(spec or RewriteSpec(target_magic=target_magic))
        self.bytes_by_magic: dict[str, int] = {}
        self.growth = 0
        self.records: int | None = 0

    def __call__(self, b: Any) -> None:
        label = f"v{b.magic}"
        self.bytes_by_magic[label] = self.bytes_by_magic.get(label, 0) + b.size_in_bytes
        # The report counts the records of every segment, also of those left as they are (only
        # batches in the target format are counted here: a rewrite counts its own): a v2 batch
        # says it in its header, a v1 wrapper is decompressed for it.
        if b.magic >= self.target and self.records is not None:
            try:
                self.records += b.record_count
            except KafkaFormatError:
                self.records = None  # corrupt: the validation reports it
        if self.estimate_growth and b.magic < self.target:
            self.growth += sum(len(p.data) for p in self.converter.convert(b)) - b.size_in_bytes

    @property
    def magics(self) -> set[int]:
        return {int(k[1:]) for k in self.bytes_by_magic}


def _leftovers(partition_dir: Path) -> list[str]:
    """Files of an interrupted replacement. ``.deleted`` ones count too: Kafka deletes them at
    startup, and while they are there a replacement may not have finished."""
    return sorted(e.name for e in os.scandir(partition_dir)
                  if e.name.endswith((names.CLEANED_FILE_SUFFIX, names.SWAP_FILE_SUFFIX, names.DELETED_FILE_SUFFIX)))


def _runs_in_flight(partition_dirs: set[str]) -> list[str]:
    """Upgrade runs (in this tool's state directory) with a unit in flight in one of these
    partition directories."""
    found = set()
    for jf in runs_dir().glob(f"*/{JOURNAL_DIR}/*.json"):
        try:
            j = UnitJournal.model_validate_json(jf.read_text())
        except (OSError, ValueError):
            continue
        if j.partition_dir in partition_dirs and j.state in IN_FLIGHT:
            found.add(jf.parent.parent.name)
    return sorted(found)


def resume_command(log_dirs: list[str], target: str, run_id: str) -> str:
    return "kmigrate upgrade " + " ".join(shlex.quote(d) for d in log_dirs) + f" --to {target} --run-id " \
        + shlex.quote(run_id)


def run_lock(log_dirs: list[str], target: str, run_id: str) -> RunLock:
    """What an upgrade records with its locks: a killed one blocks other runs until resumed
    or rolled back (it may leave a replacement in flight)."""
    return RunLock(run_id=run_id, run_kind="upgrade", resume=resume_command(log_dirs, target, run_id),
                   rollback=f"kmigrate rollback {shlex.quote(run_id)}", blocks_other_runs=True)


def prepare_upgrade(log_dirs: list[str], *, run_id: str, options: UpgradeOptions,
                    broker_id: int | None = None) -> RunDir:
    """Safety gates (raise :class:`Refused`), inventory, validation, plan -> job.json and
    prepare.json in the run directory. With an existing job for ``run_id``, resume it."""
    rd = RunDir(run_id)
    dirs = [str(Path(d).resolve()) for d in log_dirs]
    previous = rd.read_prepare()
    if rd.job_path.exists() and previous and not previous.get("dry_run") and not previous.get("refusal"):
        # A re-run of the same job: same units, gates checked again.
        check_not_live(previous["log_dirs"], run_id=run_id)
        return rd
    started = datetime.now().astimezone()
    warnings = check_not_live(dirs, run_id=run_id)
    warnings += check_clean_shutdown(dirs, force=options.force)
    backup_root = _backup_root(options, dirs)
    warnings += check_backup_root(backup_root, dirs)  # log dirs whose backups are copies
    target = options.target_magic
    # A dry run is the plan: every record checked, growth estimated. A real run checks here
    # what Kafka's recovery checks (batch CRCs, framing, offsets, no decompression); each
    # unit's rewrite pass, in the executors, checks every inner message and record on its
    # single read of the segment and leaves the segment untouched when one is corrupt.
    deep = options.dry_run
    units: list[Unit] = []
    skipped: list[dict[str, Any]] = []
    corrupt: list[dict[str, Any]] = []
    ineligible: list[dict[str, Any]] = []
    estimates: dict[str, int] = {}
    leftovers: list[str] = []
    for i, d in enumerate(dirs):
        ld = scan_log_dir(d, stats=False)
        bid = broker_id if broker_id is not None else (ld.node_id if ld.node_id is not None else -1)
        for part in ld.partitions:
            if part.kind != names.PartitionDirKind.LIVE.value:
                warnings.append(f"{part.path}: {part.kind} partition directory left as it is")
                continue
            pdir = Path(part.path)
            if part.topic in options.excluded_topics:
                ineligible.append({"broker_id": bid, "topic": part.topic, "partition": part.partition,
                                   "path": str(pdir), "bytes": part.size, "code": "EXCLUDED",
                                   "reason": f"topic excluded by the operator: {options.excluded_topics[part.topic]}"})
                continue
            left = _leftovers(pdir)
            if left:
                leftovers.extend(str(pdir / n) for n in left)
                continue
            if options.assign_leader_epoch:
                epoch_unit = _epoch_unit(bid, i, d, part, corrupt)
                if epoch_unit is not None:
                    units.append(epoch_unit)
            bases = [s.base_offset for s in part.segments]
            for k, seg in enumerate(part.segments):
                nxt = bases[k + 1] if k + 1 < len(bases) else None
                log_path = pdir / seg.log_file
                survey = _SegmentSurvey(target, estimate_growth=deep, spec=RewriteSpec(
                    target_magic=target, segment_bytes=options.segment_bytes,
                    max_message_bytes=options.max_message_bytes,
                    stamp_v0_ms=seg.mtime_ns // 1_000_000 if options.stamp_v0_with_mtime else None))
                res, _ = validate_segment(log_path, next_base_offset=nxt, deep=deep, partition=part.name,
                                          on_batch=survey, leader_epochs=part.leader_epochs and
                                          [tuple(e) for e in part.leader_epochs])
                row = {"broker_id": bid, "topic": part.topic, "partition": part.partition, "unit": seg.log_file,
                       "path": str(log_path), "bytes": seg.size, "formats": survey.bytes_by_magic,
                       "records": survey.records}
                bad = _corruption(res, log_path)
                if bad is not None:
                    corrupt.append(row | bad)
                    continue
                # A segment whose offset or time index is wrong (or missing, even where Kafka would
                # rebuild it) is a unit even when it is in the target format already: its pass
                # copies the batches byte for byte and rebuilds both indexes with Kafka's rules,
                # so no segment of a partition the run touches keeps an index Kafka would use as
                # it is (below the recovery point Kafka checks none).
                index_findings = rebuild_reasons(res.findings, log_path)
                warnings.extend(str(f) for f in res.problems if f not in index_findings)
                in_target = not survey.magics or min(survey.magics) >= target
                if in_target and not (index_findings and survey.magics):
                    skipped.append(row)  # already in the target format (or empty): not rewritten
                    continue
                uid = _unit_id(bid, i, part.topic, part.partition, seg.base_offset)
                estimates[uid] = seg.size + survey.growth
                # serial_key: one replacement in flight per partition directory, on every engine
                units.append(Unit(kind=UNIT_KIND, id=uid, broker_id=bid, log_dir=d, path=str(log_path),
                                  topic=part.topic, partition=part.partition, size=seg.size,
                                  serial_key=str(pdir),
                                  params={"partition_dir": str(pdir), "base_offset": seg.base_offset,
                                          "next_base_offset": nxt, "mtime_ns": seg.mtime_ns,
                                          "formats": survey.bytes_by_magic,
                                          "index_repairs": [f"{Path(f.path).name}: {f.code}: {f.message}"
                                                            for f in index_findings]}))
    if leftovers:
        owners = _runs_in_flight({str(Path(p).parent) for p in leftovers})
        how = ("; ".join(f"they belong to run {r}: resume it with: {resume_command(dirs, options.target, r)} "
                         f"or roll it back with: kmigrate rollback {shlex.quote(r)}" for r in owners) if owners
               else f"no upgrade run in {runs_dir()} has work in flight there: start the broker once (Kafka's "
                    "log loader resolves them), stop it cleanly, and run again")
        raise Refused("leftover files of an interrupted segment replacement: " + ", ".join(leftovers[:5])
                      + (" ..." if len(leftovers) > 5 else "") + "; " + how)
    opts = options.model_dump(mode="json") | {"backup_root": backup_root, "run_id": run_id,
                                               "run_dir": str(rd.path.resolve()),
                                               "run_lock": run_lock(dirs, options.target, run_id).model_dump()}
    rd.write_prepare({"run_id": run_id, "started_at": started.isoformat(), "log_dirs": dirs,
                      "dry_run": options.dry_run, "warnings": warnings, "skipped": skipped, "corrupt": corrupt,
                      "ineligible": ineligible,
                      "estimates": estimates, "refusal": None})
    rd.write_job(units, opts)
    return rd


def _epoch_unit(broker_id: int, dir_index: int, log_dir: str, part: Any, corrupt: list[dict[str, Any]]
                ) -> Unit | None:
    """The partition's leader-epoch unit when its checkpoint lacks an entry at or below the log
    start offset; a checkpoint Kafka could not load is reported as corrupt instead."""
    pdir = Path(part.path)
    path = pdir / names.LEADER_EPOCH_CHECKPOINT_FILE
    try:
        plan = plan_assignment(pdir)
    except KafkaFormatError as exc:
        corrupt.append({"broker_id": broker_id, "topic": part.topic, "partition": part.partition,
                        "unit": path.name, "path": str(path), "bytes": path.stat().st_size, "formats": {},
                        "file": str(path), "position": exc.position, "message": str(exc.located(path)),
                        "code": "leader-epoch-corrupt"})
        return None
    if plan is None:
        return None
    return Unit(kind=EPOCH_UNIT_KIND, id=f"b{broker_id}.d{dir_index}.{part.topic}-{part.partition}.leader-epoch",
                broker_id=broker_id, log_dir=log_dir, path=str(path), topic=part.topic, partition=part.partition,
                size=0, serial_key=str(pdir), params={"partition_dir": str(pdir), "plan": plan.model_dump(mode="json")})


def _corruption(res: ValidationResult, log_path: Path) -> dict[str, Any] | None:
    for f in res.problems:
        if f.code in CORRUPT_CODES and Path(f.path) == log_path:
            return {"file": f.path, "position": f.position, "message": f.message, "code": f.code}
    return None


def _params(options: dict[str, Any], log_dirs: list[str], engine: str | None) -> dict[str, Any]:
    keep = ("target", "stamp_v0_with_mtime", "segment_bytes", "max_message_bytes", "index_interval_bytes",
            "backup_root", "force", "dry_run", "assign_leader_epoch", "excluded_topics")
    return {k: options.get(k) for k in keep if k in options} | {"log_dirs": log_dirs, "engine": engine}


def finalize_upgrade(run_id: str, *, engine: str | None = None) -> RunReport:
    """Build, check and save the run report from job.json, prepare.json and results.json."""
    rd = RunDir(run_id)
    prep = rd.read_prepare()
    units, opts = rd.read_job() if rd.job_path.exists() else ([], {})
    started = datetime.fromisoformat(prep["started_at"]) if prep.get("started_at") else None
    target = opts.get("target") or prep.get("target")
    report = RunReport.start(RunKind.UPGRADE, _params(opts or prep.get("options", {}), prep.get("log_dirs", []),
                                                      engine),
                             run_id=run_id, now=started,
                             formats=FormatVersions(target_magic={"v1": 1, "v2": 2}.get(target or "")))
    if prep.get("refusal"):
        report.refuse(prep["refusal"])
    for w in prep.get("warnings", []):
        report.warn(w)
    dry_run = bool(prep.get("dry_run"))
    results = {r.get("unit_id"): r for r in rd.read_results()}
    for u in units:
        assert u.topic is not None and u.partition is not None
        report.plan_unit(u.broker_id, u.topic, u.partition, Path(u.path).name, u.size,
                         UnitType.FILE if u.kind == EPOCH_UNIT_KIND else UnitType.SEGMENT)
        r = results.get(u.id)
        if dry_run and u.kind == EPOCH_UNIT_KIND:
            ur = UnitResult(unit=Path(u.path).name, unit_type=UnitType.FILE, path=u.path, status=UnitStatus.PLANNED,
                            warnings=[Finding(file=u.path, code=ASSIGNED_CODE, message="would be " + EpochAssignment
                                              .model_validate(u.params["plan"]).describe())])
        elif dry_run:
            ur = UnitResult(unit=Path(u.path).name, path=u.path, status=UnitStatus.PLANNED,
                            input_format=",".join(sorted(u.params.get("formats", {}))) or None, output_format=target,
                            bytes_before=u.size, bytes_after=prep.get("estimates", {}).get(u.id))
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
    for row in prep.get("skipped", []):
        fmt = ",".join(sorted(row["formats"])) or None
        report.add_unit(row["broker_id"], row["topic"], row["partition"], UnitResult(
            unit=row["unit"], path=row["path"], status=UnitStatus.SKIPPED, input_format=fmt, output_format=fmt,
            bytes_before=row["bytes"], bytes_after=row["bytes"], records_before=row.get("records"),
            records_after=row.get("records")), track_progress=False)
    for row in prep.get("ineligible", []):
        report.add_unit(row["broker_id"], row["topic"], row["partition"], UnitResult(
            unit=Path(row["path"]).name, unit_type=UnitType.PARTITION, path=row["path"],
            status=UnitStatus.INELIGIBLE, bytes_before=row["bytes"], bytes_after=row["bytes"],
            warnings=[Finding(file=row["path"], code=row["code"], message=row["reason"])]), track_progress=False)
    for row in prep.get("corrupt", []):
        report.add_unit(row["broker_id"], row["topic"], row["partition"], UnitResult(
            unit=row["unit"], path=row["path"], status=UnitStatus.FAILED, bytes_before=row["bytes"],
            errors=[Finding(file=row["file"], position=row["position"], code=row["code"],
                            message=f"corrupt segment, not rewritten: {row['message']}")]), track_progress=False)
    if dry_run:
        growth = sum(prep.get("estimates", {}).values()) - sum(u.size for u in units)
        segments = [u for u in units if u.kind == UNIT_KIND]
        report.warn(f"dry run: {len(segments)} segment(s), {sum(u.size for u in units)} bytes to rewrite, "
                    f"expected {'growth' if growth >= 0 else 'shrinkage'} about {abs(growth)} bytes; nothing changed")
    elif opts.get("backup_root"):
        path = write_backup_manifest(opts["backup_root"], run_id)
        if path is not None:
            report.warn(f"originals kept in {path.parent} until 'kmigrate commit {run_id}' "
                        f"(or 'kmigrate rollback {run_id}')")
    report.finish()
    ReportStore().save(report)
    return report


def _refused_report(kind: RunKind, run_id: str, reason: str, params: dict[str, Any]) -> RunReport:
    report = RunReport.start(kind, params, run_id=run_id)
    report.refuse(reason)
    report.finish()
    ReportStore().save(report)
    return report


def execute_upgrade(log_dirs: list[str], *, options: UpgradeOptions, engine: str = "inline",
                    run_id: str | None = None, master: str | None = None, spark: Any = None,
                    broker_id: int | None = None, progress: Progress | None = None) -> RunReport:
    """prepare -> hold the log dir locks -> run the units on ``engine`` -> finalize."""
    run_id = run_id or new_run_id(RunKind.UPGRADE)
    try:
        rd = prepare_upgrade(log_dirs, run_id=run_id, options=options, broker_id=broker_id)
    except Refused as exc:
        rd = RunDir(run_id)
        rd.write_prepare({"run_id": run_id, "started_at": datetime.now().astimezone().isoformat(),
                          "log_dirs": [str(d) for d in log_dirs], "refusal": str(exc),
                          "options": options.model_dump(mode="json"), "target": options.target})
        return finalize_upgrade(run_id, engine=engine)
    if rd.read_prepare().get("dry_run"):
        return finalize_upgrade(run_id, engine=engine)
    units, opts = rd.read_job()
    dirs = rd.read_prepare()["log_dirs"]
    lock = RunLock.model_validate(opts["run_lock"]) if opts.get("run_lock") else \
        run_lock(dirs, opts.get("target") or options.target, run_id)
    try:
        with holding_locks(dirs, lock):
            results = get_engine(engine, master=master, spark=spark).run(units, opts, progress,
                                                                         functions=UNIT_FUNCTIONS)
    except Refused as exc:
        prep = rd.read_prepare()
        prep["refusal"] = str(exc)
        rd.write_prepare(prep)
        return finalize_upgrade(run_id, engine=engine)
    rd.write_results(results)
    return finalize_upgrade(run_id, engine=engine)


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
    rd = RunDir(run_id)
    if rd.job_path.exists():
        units, opts = rd.read_job()
        dirs = rd.read_prepare().get("log_dirs", sorted({u.log_dir for u in units}))
    else:
        root = str(Path(backup_root).resolve() if backup_root else default_backup_root())
        try:
            units = _units_from_backups(run_id, root)
        except (Refused, ValueError) as exc:
            return _refused_report(RunKind.ROLLBACK, report_id, str(exc), {"upgrade_run_id": run_id})
        if not units:
            return _refused_report(RunKind.ROLLBACK, report_id, f"no upgrade job for run {run_id} in {rd.path.parent} "
                                   f"and no backups of it in {root}", {"upgrade_run_id": run_id})
        opts = {"run_id": run_id, "run_dir": str(rd.path.resolve()), "backup_root": root}
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
            for u in units:
                if u.kind == EPOCH_UNIT_KIND:
                    continue  # the checkpoints are restored below, from their backups
                with unit_scope(u.id):
                    r = rollback_unit(u, opts)
                assert u.topic is not None and u.partition is not None
                report.add_unit(u.broker_id, u.topic, u.partition, UnitResult.model_validate(r["unit_result"]))
            _restore_epochs(report, units, opts["backup_root"], run_id)
    except Refused as exc:
        return _refused_report(RunKind.ROLLBACK, report_id, str(exc), params)
    report.finish()
    ReportStore().save(report)
    return report


def _restore_epochs(report: RunReport, units: list[Unit], backup_root: str, run_id: str) -> None:
    """Every leader-epoch-checkpoint the run changed, back as it was (byte for byte, mtime too)."""
    where = {u.params["partition_dir"]: u for u in units if u.kind == EPOCH_UNIT_KIND}
    for manifest, a in assignments(epoch_backup_dir(backup_root, run_id)):
        path = str(Path(a.partition_dir) / names.LEADER_EPOCH_CHECKPOINT_FILE)
        u = where.get(a.partition_dir)
        broker_id = u.broker_id if u is not None else -1
        try:
            restore_leader_epoch(manifest)
            ur = UnitResult(unit=names.LEADER_EPOCH_CHECKPOINT_FILE, unit_type=UnitType.FILE, path=path,
                            status=UnitStatus.OK, warnings=[Finding(
                                file=path, code="LEADER_EPOCH_RESTORED",
                                message="restored as it was before the run" + (" (no file)" if a.before is None
                                                                               else ""))])
        except (OSError, ValueError) as exc:
            ur = UnitResult(unit=names.LEADER_EPOCH_CHECKPOINT_FILE, unit_type=UnitType.FILE, path=path,
                            status=UnitStatus.FAILED, errors=[Finding(file=path, message=f"not restored: {exc}")])
        report.add_unit(broker_id, a.topic, a.partition, ur)


def commit_run(run_id: str) -> RunReport:
    """Drop the backups of a finished upgrade run (after this, no rollback)."""
    rd = RunDir(run_id)
    report_id = new_run_id(RunKind.COMMIT)
    params: dict[str, Any] = {"upgrade_run_id": run_id}
    if not rd.job_path.exists():
        return _refused_report(RunKind.COMMIT, report_id, f"no upgrade job for run {run_id}", params)
    units, opts = rd.read_job()
    unfinished = []
    for u in units:
        j = load_journal(opts["run_dir"], u.id)
        if j is not None and j.state in IN_FLIGHT:
            unfinished.append(f"{u.path} ({j.state.value})")
    if unfinished:
        return _refused_report(RunKind.COMMIT, report_id, "units still in progress, their backups are needed: "
                               + ", ".join(unfinished[:5]) + "; re-run the upgrade or roll back first", params)
    report = RunReport.start(RunKind.COMMIT, params | {"backup_root": opts.get("backup_root")}, run_id=report_id)
    for u in units:
        j = load_journal(opts["run_dir"], u.id)
        if j is not None and j.state is JournalState.STARTED:
            remove_cleaned_in_range(Path(u.params["partition_dir"]), u.params["base_offset"],
                                    u.params.get("next_base_offset"))
        assert u.topic is not None and u.partition is not None
        report.add_unit(u.broker_id, u.topic, u.partition, UnitResult(
            unit=Path(u.path).name, path=u.path,
            status=UnitStatus.OK if j is not None and j.state is JournalState.DONE else UnitStatus.SKIPPED,
            bytes_before=sum(f.size for f in j.originals) if j is not None else None))
    freed = drop_backups(opts["backup_root"], run_id)
    report.warn(f"backups of run {run_id} dropped ({freed} bytes freed); rollback is no longer possible")
    report.finish()
    ReportStore().save(report)
    return report
