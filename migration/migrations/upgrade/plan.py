"""The plan of a message-format upgrade: safety gates, inventory, validation, the units.

    prepare_upgrade(log_dirs, run_id=, options=) -> UpgradePlan (run dir, prepare.json, job.json)

What the plan decides is typed: :class:`UpgradePrepare` (``prepare.json``: segments left as they
are, corrupt ones, ineligible partitions, the dry run's growth), the units' parameters
(:class:`SegmentParams`, :class:`EpochParams`) and the job's options (:class:`UpgradeJobOptions`:
the operator's :class:`UpgradeOptions` plus what the run adds). The caller gets the plan back,
so nothing is re-read from disk that was just decided; a resume reads it from the run dir.
"""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from migration.formats import names
from migration.formats.errors import KafkaFormatError
from migration.logdir.findings import FindingCode
from migration.logdir.model import Partition, Segment, scan_log_dir
from migration.logdir.validate import ValidationResult, validate_segment
from migration.migrations.common.index_repair import rebuild_reasons
from migration.migrations.common.leader_epoch import EpochAssignment, plan_assignment
from migration.migrations.upgrade.journal import IN_FLIGHT, JOURNAL_DIR, UnitJournal
from migration.migrations.upgrade.options import UpgradeOptions
from migration.migrations.upgrade.rewrite import Converter, RewriteSpec, add_walker_bytes
from migration.migrations.upgrade.stage import (
    Conversion,
    Stage,
    StagedSegment,
    StageRead,
    conversion_of,
    leader_epochs_after,
    still_current,
    verified_current,
)
from migration.runtime.documents import PrepareDocument
from migration.runtime.engine import Unit
from migration.runtime.runs import RunDir, latest_journal_files
from migration.runtime.safety import Refused, RunLock, check_backup_root, check_clean_shutdown, check_not_live
from migration.settings import default_backup_root, default_stage_root, runs_dir


class SegmentRow(BaseModel):
    """A segment the plan looked at and does not rewrite (already in the target format)."""

    broker_id: int
    topic: str
    partition: int
    unit: str
    path: str
    bytes: int
    formats: dict[str, int] = Field(default_factory=dict)
    records: int | None = None


class CorruptRow(SegmentRow):
    """A file the plan found corrupt: never rewritten, reported as failed."""

    file: str
    position: int | None = None
    message: str
    code: str


class IneligibleRow(BaseModel):
    """A partition the operator keeps out (``excluded_topics``)."""

    broker_id: int
    topic: str
    partition: int
    path: str
    bytes: int
    code: str
    reason: str


class WindowRecord(BaseModel):
    """The stop window of a run with ``--stage``: its duration and the staged segments it left
    unused (by log dir), from which the report's per-broker ``window`` is made."""

    stage_id: str
    duration_s: float
    discarded: dict[str, int] = Field(default_factory=dict, description="Log dir -> staged segments (and "
                                      "prefixes) not used")


class UpgradePrepare(PrepareDocument):
    """``prepare.json`` of an upgrade run."""

    target: str | None = Field(default=None, description="v1 or v2 (a refused run has no job to say it)")
    options: dict[str, Any] | None = Field(default=None, description="A refused run's options (it has no job)")
    skipped: list[SegmentRow] = Field(default_factory=list)
    corrupt: list[CorruptRow] = Field(default_factory=list)
    ineligible: list[IneligibleRow] = Field(default_factory=list)
    estimates: dict[str, int] = Field(default_factory=dict, description="Dry run: unit id -> bytes after")
    record_estimates: dict[str, int] = Field(
        default_factory=dict, description="Dry run: unit id -> the records the real run rewrites (and counts)")
    window: WindowRecord | None = Field(default=None, description="With --stage: the stop window")


class SegmentParams(BaseModel):
    """Parameters of an ``upgrade-segment`` unit."""

    model_config = ConfigDict(extra="forbid")

    partition_dir: str
    base_offset: int
    next_base_offset: int | None = Field(default=None, description="The next segment's base offset; None: last")
    mtime_ns: int | None = None
    formats: dict[str, int] = Field(default_factory=dict)
    index_repairs: list[str] = Field(default_factory=list)


class EpochParams(BaseModel):
    """Parameters of an ``upgrade-leader-epoch`` unit."""

    model_config = ConfigDict(extra="forbid")

    partition_dir: str
    plan: EpochAssignment


class UpgradeJobOptions(UpgradeOptions):
    """``job.json``'s options: the operator's, plus what the run adds. The engines add their own
    keys (``lock_log_dirs``, ``lock_owner_pid``), which this model leaves to them."""

    model_config = ConfigDict(extra="ignore")

    backup_root: str  # resolved: always set in a job
    stage_root: str | None = None  # resolved when there is a stage
    remove_under_lock: list[str] = Field(default_factory=list, description="Kafka's pending deletes, removed "
                                         "once the run holds the locks (runtime/safety.py REMOVE_UNDER_LOCK)")
    run_id: str
    run_dir: str
    run_lock: RunLock | None = None


class UpgradePlan(BaseModel):
    """What :func:`prepare_upgrade` decided, as written to the run directory."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_dir: RunDir
    prepare: UpgradePrepare
    units: list[Unit]
    options: UpgradeJobOptions | None = Field(default=None, description="None for a dry run of a refused job")
    stage_read: StageRead | None = Field(default=None, exclude=True, description="What the plan read of the stage "
                                         "(not in the run directory: a plan loaded from it reads the stage again)")


UNIT_KIND = "upgrade-segment"
# --assign-leader-epoch: one unit per partition that needs it, before its segment units
EPOCH_UNIT_KIND = "upgrade-leader-epoch"
# Validation findings that make a segment's data unusable as input (index findings are not:
# the rewrite rebuilds the indexes).
CORRUPT_CODES = frozenset({FindingCode.CORRUPT_BATCH, FindingCode.TRAILING_BYTES, FindingCode.OFFSET_ORDER,
                           FindingCode.OFFSET_BEYOND_SEGMENT, FindingCode.RECORD_OFFSET})
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
        # a dry run: every record of the segment, the count the real run's unit reports
        self.all_records: int | None = 0

    def __call__(self, b: Any) -> None:
        label = f"v{b.magic}"
        self.bytes_by_magic[label] = self.bytes_by_magic.get(label, 0) + b.size_in_bytes
        # The report counts the records of every segment, also of those left as they are: a v2
        # batch says it in its header, a v1 wrapper is decompressed for it. A segment with a
        # batch below the target is rewritten, and its unit counts its records: from that batch
        # on nothing is counted here (None), so no wrapper is decompressed for a count unused.
        if b.magic < self.target:
            self.records = None
        elif self.records is not None:
            try:
                self.records += b.record_count
            except KafkaFormatError:
                self.records = None  # corrupt: the validation reports it
        if self.estimate_growth and self.all_records is not None:
            try:
                self.all_records += b.record_count
            except KafkaFormatError:
                self.all_records = None  # corrupt: the validation reports it
        if self.estimate_growth and b.magic < self.target:
            self.growth += sum(len(p.data) for p in self.converter.convert(b)) - b.size_in_bytes

    @property
    def walker_duties(self) -> dict[str, int] | None:
        """What the compiled core's segment walker gathers for this survey (validate_segment):
        bytes per format and the records of batches in the target format, until a batch below
        it (the walker then stops counting). A dry run converts every batch in Python (None: no
        walker)."""
        return None if self.estimate_growth else {"count_from": self.target}

    def absorb_walker(self, walker: Any) -> None:
        add_walker_bytes(self.bytes_by_magic, walker)
        if any(walker.bytes_by_magic()[: self.target]):
            self.records = None
        elif self.records is not None:
            self.records += walker.counted

    @property
    def magics(self) -> set[int]:
        return {int(k[1:]) for k in self.bytes_by_magic}


def _leftovers(partition_dir: Path) -> tuple[list[str], list[str]]:
    """Files of an interrupted replacement (``.cleaned``, ``.swap``), and ``.deleted`` files.
    A ``.deleted`` file alone is a delete Kafka had not finished: retention and the cleaner
    rename a segment so and remove it later, and a broker stopped cleanly leaves them behind
    (Kafka 4.4 does); its log loader removes every one at startup (``LogLoader``)."""
    staged: list[str] = []
    deleted: list[str] = []
    for e in os.scandir(partition_dir):
        if e.name.endswith((names.CLEANED_FILE_SUFFIX, names.SWAP_FILE_SUFFIX)):
            staged.append(e.name)
        elif e.name.endswith(names.DELETED_FILE_SUFFIX):
            deleted.append(e.name)
    return sorted(staged), sorted(deleted)


def pending_deletes_note(paths: list[str], *, removed: bool) -> str:
    """What the report says of Kafka's pending deletes (``.deleted`` files where no replacement
    is in flight): the run removes them first, under the log dir lock (``REMOVE_UNDER_LOCK``,
    runtime/safety.py), as Kafka's loader would at the next start; the run's replacements rename
    segments to ``.deleted`` too, and a resume must find only its own."""
    dirs = {str(Path(p).parent) for p in paths}
    listed = ", ".join(Path(p).name for p in paths[:5]) + (" ..." if len(paths) > 5 else "")
    what = f"{len(paths)} .deleted file(s) in {len(dirs)} partition dir(s), deletes Kafka had not finished ({listed})"
    if removed:
        return f"removed {what}, as Kafka's log loader would at startup"
    return f"{what}: the run removes them first, under the log dir lock, as Kafka's log loader would at startup"


def _in_flight() -> dict[str, set[str]]:
    """Partition directory -> the upgrade runs (in this tool's state directory) with a unit in
    flight there."""
    found: dict[str, set[str]] = {}
    for jf in (f for d in runs_dir().glob(f"*/{JOURNAL_DIR}") for f in latest_journal_files(d)):
        try:
            j = UnitJournal.read(jf)
        except (OSError, ValueError):
            continue
        if j.state in IN_FLIGHT:
            found.setdefault(j.partition_dir, set()).add(jf.parent.parent.name)
    return found


def _runs_in_flight(partition_dirs: set[str], in_flight: dict[str, set[str]]) -> list[str]:
    return sorted(r for d in partition_dirs for r in in_flight.get(d, ()))


def resume_command(log_dirs: list[str], target: str, run_id: str) -> str:
    return "kmigrate upgrade " + " ".join(shlex.quote(d) for d in log_dirs) + f" --to {target} --run-id " \
        + shlex.quote(run_id)


def run_lock(log_dirs: list[str], target: str, run_id: str) -> RunLock:
    """What an upgrade records with its locks: a killed one blocks other runs until resumed
    or rolled back (it may leave a replacement in flight)."""
    return RunLock(run_id=run_id, run_kind="upgrade", resume=resume_command(log_dirs, target, run_id),
                   rollback=f"kmigrate rollback {shlex.quote(run_id)}", blocks_other_runs=True)


def load_plan(run_id: str) -> UpgradePlan | None:
    """The plan of an earlier run with this id, from its run directory (None: there is none)."""
    rd = RunDir(run_id)
    prep = rd.read_prepare(UpgradePrepare)
    if prep is None:
        return None
    units, opts = rd.read_job() if rd.job_path.exists() else ([], None)
    return UpgradePlan(run_dir=rd, prepare=prep, units=units,
                       options=UpgradeJobOptions.model_validate(opts) if opts else None)


def prepare_upgrade(log_dirs: list[str], *, run_id: str, options: UpgradeOptions,
                    broker_id: int | None = None) -> UpgradePlan:
    """Safety gates (raise :class:`Refused`), inventory, validation, plan -> job.json and
    prepare.json in the run directory, and the plan itself. With an existing job for
    ``run_id``, resume it: the same units, the gates checked again."""
    dirs = [str(Path(d).resolve()) for d in log_dirs]
    previous = load_plan(run_id)
    if previous is not None and previous.options is not None and not previous.prepare.dry_run \
            and not previous.prepare.refusal:
        check_not_live(previous.prepare.log_dirs, run_id=run_id)
        return previous
    rd = RunDir(run_id)
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
    skipped: list[SegmentRow] = []
    corrupt: list[CorruptRow] = []
    ineligible: list[IneligibleRow] = []
    estimates: dict[str, int] = {}
    record_estimates: dict[str, int] = {}
    stage_root = None
    if options.stage is not None:
        stage_root = str(Path(options.stage_root).resolve() if options.stage_root else default_stage_root(dirs))
        if not Stage(stage_root, options.stage).exists():
            raise Refused(f"no stage {options.stage} in {stage_root} (discarded, or another --stage-root?); without "
                          "--stage every segment is converted in the window")
    stage_read = Stage(stage_root, options.stage).read() if options.stage is not None and stage_root is not None \
        else None
    staged = {(e.partition_dir, e.base_offset): e for e in stage_read.entries} if stage_read else {}
    verified = {(e.partition_dir, e.base_offset): e for e in stage_read.verified} if stage_read else {}
    conversion = conversion_of(options)
    _check_stage_options(conversion, staged.values())
    leftovers: list[str] = []
    pending_deletes: list[str] = []
    in_flight: dict[str, set[str]] | None = None
    for i, d in enumerate(dirs):
        ld = scan_log_dir(d, stats=False)
        bid = broker_id if broker_id is not None else (ld.node_id if ld.node_id is not None else -1)
        for part in ld.partitions:
            if part.kind != names.PartitionDirKind.LIVE.value:
                warnings.append(f"{part.path}: {part.kind} partition directory left as it is")
                continue
            pdir = Path(part.path)
            if part.topic in options.excluded_topics:
                ineligible.append(IneligibleRow(
                    broker_id=bid, topic=part.topic, partition=part.partition, path=str(pdir), bytes=part.size,
                    code="EXCLUDED", reason=f"topic excluded by the operator: {options.excluded_topics[part.topic]}"))
                continue
            left, deleted = _leftovers(pdir)
            if deleted and in_flight is None:
                in_flight = _in_flight()  # read once, and only when there is a .deleted file
            if left or (deleted and in_flight and str(pdir) in in_flight):
                leftovers.extend(str(pdir / n) for n in left + deleted)
                continue
            pending_deletes.extend(str(pdir / n) for n in deleted)
            if options.assign_leader_epoch:
                epoch_unit = _epoch_unit(bid, i, d, part, corrupt)
                if epoch_unit is not None:
                    units.append(epoch_unit)
            bases = [s.base_offset for s in part.segments]
            checkpoint = checkpoint_epochs(part)
            # read once per partition, and only when a staged segment asks
            epochs_after = functools.cache(functools.partial(_staged_epochs, pdir, options))
            for k, seg in enumerate(part.segments):
                nxt = bases[k + 1] if k + 1 < len(bases) else None
                log_path = pdir / seg.log_file
                entry = staged.get((str(pdir), seg.base_offset))
                if entry is not None and (epochs := epochs_after()) is not None and \
                        still_current(entry, pdir, nxt, conversion, epochs):
                    # The prestage validated and converted it: the window reads no byte of it.
                    unit = _segment_unit(bid, i, d, part, seg, nxt, entry.bytes_by_magic_before, [])
                    units.append(unit)
                    estimates[unit.id] = entry.bytes_after
                    continue
                checked = verified.get((str(pdir), seg.base_offset)) if not deep else None
                if checked is not None and verified_current(checked, pdir, nxt, conversion, checkpoint):
                    # The prestage made the checks below and found nothing: the window reads no byte of
                    # it. (A dry run checks every record, more than the prestage did: it reads it.)
                    skipped.append(SegmentRow(broker_id=bid, topic=part.topic, partition=part.partition,
                                              unit=seg.log_file, path=str(log_path), bytes=checked.bytes,
                                              formats=checked.bytes_by_magic, records=checked.records))
                    continue
                res, survey = survey_segment(log_path, nxt, partition=part.name, checkpoint=checkpoint,
                                             mtime_ns=seg.mtime_ns, options=options, deep=deep)
                row = SegmentRow(broker_id=bid, topic=part.topic, partition=part.partition, unit=seg.log_file,
                                 path=str(log_path), bytes=seg.size, formats=survey.bytes_by_magic,
                                 records=survey.records)
                bad = _corruption(res, log_path)
                if bad is not None:
                    corrupt.append(CorruptRow(**row.model_dump(), **bad))
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
                unit = _segment_unit(bid, i, d, part, seg, nxt, survey.bytes_by_magic,
                                     [f"{Path(f.file or '').name}: {f.code}: {f.message}" for f in index_findings])
                units.append(unit)
                estimates[unit.id] = seg.size + survey.growth
                if deep and survey.all_records is not None:
                    record_estimates[unit.id] = survey.all_records
    if leftovers:
        owners = _runs_in_flight({str(Path(p).parent) for p in leftovers}, in_flight or _in_flight())
        how = ("; ".join(f"they belong to run {r}: resume it with: {resume_command(dirs, options.target, r)} "
                         f"or roll it back with: kmigrate rollback {shlex.quote(r)}" for r in owners) if owners
               else f"no upgrade run in {runs_dir()} has work in flight there: start the broker once (Kafka's "
                    "log loader resolves them), stop it cleanly, and run again")
        raise Refused("leftover files of an interrupted segment replacement: " + ", ".join(leftovers[:5])
                      + (" ..." if len(leftovers) > 5 else "") + "; " + how)
    if pending_deletes:
        warnings.append(pending_deletes_note(pending_deletes, removed=False))
    job_options = UpgradeJobOptions(**options.model_dump(exclude={"backup_root", "stage_root"}),
                                    backup_root=backup_root, stage_root=stage_root,
                                    run_id=run_id, run_dir=str(rd.path.resolve()),
                                    run_lock=run_lock(dirs, options.target, run_id),
                                    remove_under_lock=pending_deletes)
    prepare = UpgradePrepare(run_id=run_id, started_at=started.isoformat(), log_dirs=dirs, dry_run=options.dry_run,
                             target=options.target, warnings=warnings, skipped=skipped, corrupt=corrupt,
                             ineligible=ineligible, estimates=estimates,
                             record_estimates=record_estimates)
    rd.write_prepare(prepare)
    rd.write_job(units, job_options.model_dump(mode="json"))
    return UpgradePlan(run_dir=rd, prepare=prepare, units=units, options=job_options, stage_read=stage_read)


def _segment_unit(broker_id: int, dir_index: int, log_dir: str, part: Partition, seg: Segment, next_base: int | None,
                  formats: dict[str, int], index_repairs: list[str]) -> Unit:
    pdir = Path(part.path)
    # serial_key: one replacement in flight per partition directory, on every engine
    return Unit(kind=UNIT_KIND, id=_unit_id(broker_id, dir_index, part.topic, part.partition, seg.base_offset),
                broker_id=broker_id, log_dir=log_dir, path=str(pdir / seg.log_file), topic=part.topic,
                partition=part.partition, size=seg.size, serial_key=str(pdir),
                params=SegmentParams(partition_dir=str(pdir), base_offset=seg.base_offset, next_base_offset=next_base,
                                     mtime_ns=seg.mtime_ns, formats=formats,
                                     index_repairs=index_repairs).model_dump(mode="json"))


def checkpoint_epochs(part: Partition) -> list[tuple[int, int]]:
    """The leader-epoch checkpoint as read by the scan: (epoch, start offset)."""
    return [(epoch, start) for epoch, start in part.leader_epochs or ()]


def survey_segment(log_path: Path, next_base_offset: int | None, *, partition: str, checkpoint: list[tuple[int, int]],
                   mtime_ns: int, options: UpgradeOptions, deep: bool) -> tuple[ValidationResult, _SegmentSurvey]:
    """What the plan reads of a segment: Kafka's recovery checks (every record's too when
    ``deep``, a dry run) against the partition's leader-epoch ``checkpoint``, its formats and
    records (and, ``deep``, the conversion's growth)."""
    target = options.target_magic
    survey = _SegmentSurvey(target, estimate_growth=deep, spec=RewriteSpec(
        target_magic=target, segment_bytes=options.segment_bytes, max_message_bytes=options.max_message_bytes,
        stamp_v0_ms=mtime_ns // 1_000_000 if options.stamp_v0_with_mtime else None))
    res, _ = validate_segment(log_path, next_base_offset=next_base_offset, deep=deep, partition=partition,
                              on_batch=survey, leader_epochs=checkpoint or None)
    return res, survey


def left_as_is(res: ValidationResult, survey: _SegmentSurvey, log_path: Path, target_magic: int) -> bool:
    """A segment the upgrade leaves as it is and reports nothing of: every batch in the target
    format, nothing corrupt, no index to rebuild, no finding at all."""
    return bool(survey.magics) and min(survey.magics) >= target_magic and not res.problems \
        and _corruption(res, log_path) is None and not rebuild_reasons(res.findings, log_path)


def _check_stage_options(wanted: Conversion, entries: Iterable[StagedSegment]) -> None:
    """A window with other conversion options than its prestage's could use none of its stage:
    refused, naming the differences, rather than converting everything in the window."""
    for e in entries:
        if e.conversion != wanted:
            raise Refused(f"stage {e.stage_id} was made with other options than this run's ("
                          + "; ".join(e.conversion.differences(wanted)) + "): run the window with the prestage's "
                          "options (its report prints the command), or discard the stage (--discard-stage "
                          f"{e.stage_id}) and prestage again")


def _staged_epochs(partition_dir: Path, options: UpgradeOptions) -> list[tuple[int, int]] | None:
    """The leader-epoch entries a conversion of the partition's segments would use now
    (stage.py, ``still_current``); None when the checkpoint is unreadable: no staged segment of
    the partition is used (the epoch unit reports the checkpoint)."""
    try:
        return leader_epochs_after(partition_dir, options.assign_leader_epoch) if options.target_magic == 2 else []
    except KafkaFormatError:
        return None


def _epoch_unit(broker_id: int, dir_index: int, log_dir: str, part: Partition, corrupt: list[CorruptRow]
                ) -> Unit | None:
    """The partition's leader-epoch unit when its checkpoint lacks an entry at or below the log
    start offset; a checkpoint Kafka could not load is reported as corrupt instead."""
    pdir = Path(part.path)
    path = pdir / names.LEADER_EPOCH_CHECKPOINT_FILE
    try:
        plan = plan_assignment(pdir)
    except KafkaFormatError as exc:
        corrupt.append(CorruptRow(broker_id=broker_id, topic=part.topic, partition=part.partition, unit=path.name,
                                  path=str(path), bytes=path.stat().st_size, file=str(path), position=exc.position,
                                  message=str(exc.located(path)), code=FindingCode.LEADER_EPOCH_CORRUPT))
        return None
    if plan is None:
        return None
    return Unit(kind=EPOCH_UNIT_KIND, id=f"b{broker_id}.d{dir_index}.{part.topic}-{part.partition}.leader-epoch",
                broker_id=broker_id, log_dir=log_dir, path=str(path), topic=part.topic, partition=part.partition,
                size=0, serial_key=str(pdir),
                params=EpochParams(partition_dir=str(pdir), plan=plan).model_dump(mode="json"))


def _corruption(res: ValidationResult, log_path: Path) -> dict[str, Any] | None:
    for f in res.problems:
        if f.code in CORRUPT_CODES and f.file is not None and Path(f.file) == log_path:
            return {"file": f.file, "position": f.position, "message": f.message, "code": f.code}
    return None


