"""One unit of the message-format upgrade: a segment rewritten and swapped in, crash-safely.

Order of work (a kill at any instant leaves a log dir Kafka loads without losing a record, and
a re-run with the same run id finishes or undoes the unit; see :mod:`.replace` and
:mod:`.upgrade_journal`):
  1. fingerprint and back up the segment's files (outside the log dir), journal ``started``;
  2. rewrite into ``.cleaned`` files, fsync, verify the record digest of the output against
     the input's, journal ``cleaned``;
  3. Kafka's replace protocol (``.swap``, ``.deleted``, final names), journal ``done``.
In a stop window after a prestage, a segment whose files are those the prestage converted
(upgrade/stage.py) is backed up with the prestage's checksums and, in step 2, its staged
``.cleaned`` files are linked in instead of written: the window reads none of its bytes.
Rollback swaps the backed-up originals back in with the same protocol.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any

from migration.audit.model import Finding, FindingCode, OffsetRange, UnitResult, UnitStatus, UnitType
from migration.formats import names
from migration.formats.errors import KafkaFormatError
from migration.formats.fileio import durable_unlink, fsync_dir
from migration.migrations.common.backup import (
    UnitBackup,
    UnitPlace,
    backup_unit,
    keep_displaced,
    link_or_copy,
    load_unit_backup,
    run_backup_dir,
    unit_backup_files_dir,
    verify_backup,
)
from migration.migrations.common.leader_epoch import ASSIGNED_CODE, EPOCH_BACKUP_DIR, assign_leader_epoch
from migration.migrations.common.replace import (
    new_file_states,
    remove_cleaned_in_range,
    remove_staged,
    replace_segments,
    segment_files_in_range,
    settle_range,
)
from migration.migrations.upgrade.journal import JournalState, UnitJournal, load_journal, save_journal
from migration.migrations.upgrade.plan import EpochParams, SegmentParams, UpgradeJobOptions
from migration.migrations.upgrade.rewrite import (
    Resume,
    RewriteSpec,
    StagedPrefixChanged,
    cleaned_paths,
    digest_outputs,
    rewrite_segment,
)
from migration.migrations.upgrade.stage import (
    FileIdentity,
    Stage,
    StagedSegment,
    conversion_of,
    identities,
    leader_epochs_after,
    prefix_current,
    segment_files,
    still_current,
)
from migration.runtime.engine import Unit
from migration.runtime.faults import fault_point


class UnitContext:
    """What a unit function needs, from the unit and the job options."""

    def __init__(self, unit: Unit, options: dict[str, Any]) -> None:
        self.unit = unit
        self._options = options
        self.run_id: str = options["run_id"]
        self.run_dir = Path(options["run_dir"])
        self.backup_root: str = options["backup_root"]
        self.params = SegmentParams.model_validate(unit.params)
        self.partition_dir = Path(self.params.partition_dir)
        self.base_offset = self.params.base_offset
        self.next_base_offset = self.params.next_base_offset
        self.log_name = names.log_file_name(self.base_offset)
        self.started = time.monotonic()

    @functools.cached_property
    def options(self) -> UpgradeJobOptions:
        """The upgrade's options (a rollback from backups alone has none, and needs none)."""
        return UpgradeJobOptions.model_validate(self._options)

    def result(self, ur: UnitResult, *, from_stage: bool = False, from_prefix: bool = False) -> dict[str, Any]:
        u = self.unit
        status = "ok" if ur.status in (UnitStatus.OK, UnitStatus.SKIPPED) else ur.status.value
        return {"status": status, "broker_id": u.broker_id, "topic": u.topic, "partition": u.partition,
                "unit_result": ur.model_dump(mode="json"), "from_stage": from_stage, "from_prefix": from_prefix}

    def failed(self, message: str, *, file: str | None = None, position: int | None = None,
               code: FindingCode | None = None) -> dict[str, Any]:
        ur = UnitResult(unit=self.log_name, path=str(self.partition_dir / self.log_name), status=UnitStatus.FAILED,
                        duration_s=time.monotonic() - self.started,
                        errors=[Finding(file=file, position=position, message=message, code=code)])
        return self.result(ur)


def _unit_result(ctx: UnitContext, j: UnitJournal) -> UnitResult:
    stamping = ctx.options.stamp_v0_with_mtime
    before, after = j.digest_before, j.digest_after
    assert before is not None and after is not None
    by_magic_after: dict[str, int] = {}
    for o in j.outputs:
        for k, v in o.bytes_by_magic.items():
            by_magic_after[k] = by_magic_after.get(k, 0) + v
    warnings = [Finding(message=w, code=FindingCode.OVERSIZED_RECORD) for w in j.warnings]
    if len(j.outputs) > 1:
        warnings.append(Finding(
            file=str(ctx.partition_dir / ctx.log_name), code=FindingCode.SEGMENT_SPLIT,
            message=f"split into {len(j.outputs)} segments ("
                    + ", ".join(o.files[0] for o in j.outputs) + ") to respect segment.bytes / int32 offsets"))
    repairs = ctx.params.index_repairs
    if repairs:
        warnings.append(Finding(
            file=str(ctx.partition_dir / ctx.log_name), code=FindingCode.INDEX_REBUILT,
            message="offset and time index rebuilt with Kafka's rules (the originals are in the backup): "
                    + "; ".join(repairs)))
    if j.prefix_from is not None:
        warnings.append(Finding(file=str(ctx.partition_dir / ctx.log_name), code=FindingCode.PREFIX_USED,
                                message=f"from stage {j.prefix_from}: " + FindingCode.PREFIX_USED.meaning))
    if j.split_batches:
        warnings.append(Finding(code=FindingCode.BATCH_SPLIT, message=f"{j.split_batches} converted batch(es) above "
                                f"max.message.bytes ({ctx.options.max_message_bytes}) split"))
    # With stamping the timestamps change on purpose: the content digest is the proof then.
    return UnitResult(
        unit=ctx.log_name,
        path=str(ctx.partition_dir / ctx.log_name),
        status=UnitStatus.OK,
        input_format=",".join(sorted(j.bytes_by_magic_before)) or None,
        output_format=",".join(sorted(by_magic_after)) or None,
        format_bytes_before=j.bytes_by_magic_before,
        format_bytes_after=by_magic_after,
        records_before=before.records,
        records_after=after.records,
        bytes_before=j.bytes_before,
        bytes_after=sum(o.size for o in j.outputs),
        offsets=OffsetRange(first=before.first_offset, last=before.last_offset)
        if before.first_offset is not None and before.last_offset is not None else None,
        digest_algorithm=before.algorithm,
        digest_before=before.content if stamping else before.full,
        digest_after=after.content if stamping else after.full,
        duration_s=time.monotonic() - ctx.started,
        warnings=warnings,
    )


def _finish(ctx: UnitContext, j: UnitJournal) -> dict[str, Any]:
    ur = _unit_result(ctx, j)
    j.state = JournalState.DONE
    j.unit_result = ur.model_dump(mode="json")
    save_journal(ctx.run_dir, j)
    return ctx.result(ur, from_stage=j.staged_from is not None, from_prefix=j.prefix_from is not None)


def _resume_replace(ctx: UnitContext, j: UnitJournal) -> str:
    """Bring a ``cleaned`` unit to an end state: ``finished``, ``restart`` (the staged output
    was discarded, e.g. by Kafka's loader, and the original is intact) or ``changed``."""
    pdir = ctx.partition_dir
    states = new_file_states(pdir, j.output_names)
    if any(s in ("cleaned", "swap") for s in states.values()):
        replace_segments(pdir, [o.files for o in j.outputs], j.original_names)
        return "finished"
    if all(o.matches(pdir / o.files[0]) for o in j.outputs):
        replace_segments(pdir, [o.files for o in j.outputs], j.original_names)  # leftover .deleted files
        return "finished"
    log = next(f for f in j.originals if f.name == ctx.log_name)
    if log.matches(pdir / ctx.log_name):
        return "restart"
    return "changed"


def run_unit(unit: Unit, options: dict[str, Any]) -> dict[str, Any]:
    """Upgrade one segment. Idempotent: a done unit reports its recorded result again, a
    half-done one is finished (or restarted when its staged output was discarded)."""
    ctx = UnitContext(unit, options)
    j = load_journal(ctx.run_dir, unit.id)
    if j is not None and j.state is JournalState.DONE and j.unit_result is not None:
        ur = UnitResult.model_validate(j.unit_result)
        if ur.digest_algorithm is None and j.digest_before is not None:
            ur.digest_algorithm = j.digest_before.algorithm  # finished by a kmigrate that did not name it
        return ctx.result(ur, from_stage=j.staged_from is not None, from_prefix=j.prefix_from is not None)
    if j is not None and j.state in (JournalState.ROLLING_BACK, JournalState.ROLLED_BACK):
        return ctx.failed("the unit was rolled back; start a new run to upgrade it again", code=FindingCode.ROLLED_BACK)
    if j is not None and j.state is JournalState.CLEANED:
        outcome = _resume_replace(ctx, j)
        if outcome == "finished":
            return _finish(ctx, j)
        if outcome == "changed":
            return ctx.failed("the segment changed since this run started (neither the original nor the "
                              "rewritten segment is in place); nothing replaced. Restore the originals with: "
                              f"kmigrate rollback {ctx.run_id}; then start a new run",
                              file=str(ctx.partition_dir / ctx.log_name), code=FindingCode.SEGMENT_CHANGED)
    return _fresh(ctx, j)


def _fresh(ctx: UnitContext, previous: UnitJournal | None) -> dict[str, Any]:
    pdir = ctx.partition_dir
    opts = ctx.options
    # Output of an interrupted attempt (Kafka would delete it at startup too).
    remove_cleaned_in_range(pdir, ctx.base_offset, ctx.next_base_offset)
    log = pdir / ctx.log_name
    if not log.exists():
        return ctx.failed("segment file is missing", file=str(log), code=FindingCode.SEGMENT_MISSING)
    files = segment_files(pdir, ctx.base_offset)
    staged = _usable_stage(ctx)
    u = ctx.unit
    ub, earlier = backup_unit(ctx.backup_root, ctx.run_id, u.id, pdir, files,
                              UnitPlace(log_dir=u.log_dir, broker_id=u.broker_id, topic=u.topic,
                                        partition=u.partition, base_offset=ctx.base_offset,
                                        next_base_offset=ctx.next_base_offset),
                              known={f.name: f for f in staged.originals} if staged is not None else None)
    original_log = next(f for f in ub.files if f.name == ctx.log_name)
    if staged is not None and original_log.checksum != next(f.checksum for f in staged.originals
                                                            if f.name == ctx.log_name):
        staged = None  # an earlier attempt's backup, taken without the stage: proved the long way below
    # A backup of an earlier attempt (its journal may be missing: killed between the two) was
    # taken of the segment as it was then: it may only be used if the segment is still that
    # (the stage's identity check proved it, or its checksum does).
    if (previous is not None or earlier) and staged is None and not original_log.matches(log):
        return ctx.failed("the segment changed since its backup; nothing replaced. Restore the originals "
                          f"with: kmigrate rollback {ctx.run_id}; then start a new run", file=str(log),
                          code=FindingCode.SEGMENT_CHANGED)
    fault_point("backup")
    j = UnitJournal(unit_id=ctx.unit.id, partition_dir=str(pdir), log_file=ctx.log_name,
                    base_offset=ctx.base_offset, state=JournalState.STARTED, originals=ub.files,
                    backup_dir=ub.backup_dir, staged_from=staged.stage_id if staged is not None else None
                    ).follows(previous)
    save_journal(ctx.run_dir, j)
    if staged is not None and _link_staged(ctx, staged):
        j.outputs = [o.model_copy(deep=True) for o in staged.outputs]
        j.bytes_before = staged.bytes_before
        j.bytes_by_magic_before = dict(staged.bytes_by_magic_before)
        j.digest_before = staged.digest_before
        j.digest_after = staged.digest_after
        j.split_batches = staged.split_batches
        j.warnings = list(staged.warnings)
        return _swap_in(ctx, j)
    j.staged_from = None
    spec = RewriteSpec(
        target_magic=opts.target_magic,
        segment_bytes=opts.segment_bytes,
        max_message_bytes=opts.max_message_bytes,
        index_interval_bytes=opts.index_interval_bytes,
        stamp_v0_ms=original_log.mtime_ns // 1_000_000 if opts.stamp_v0_with_mtime else None,
        leader_epochs=leader_epochs_after(pdir, assign=False) if opts.target_magic == 2 else (),
        next_base_offset=ctx.next_base_offset,
    )
    rr = None
    resume = _usable_prefix(ctx)
    try:
        try:
            rr = rewrite_segment(log, spec, resume=resume)  # removes its own partial output when it fails
        except StagedPrefixChanged:
            resume = None  # the stage went meanwhile (--discard-stage, a prestage pass): the whole is converted
            rr = rewrite_segment(log, spec)
        after = digest_outputs(pdir, rr.outputs)
    except KafkaFormatError as exc:
        durable_unlink(*cleaned_paths(pdir, rr.outputs if rr is not None else []))
        j.state = JournalState.FAILED
        j.error = exc.to_dict()
        save_journal(ctx.run_dir, j)
        return ctx.failed(f"corrupt input, segment not rewritten: {exc.message}", file=exc.path or str(log),
                          position=exc.position, code=FindingCode.CORRUPT_SEGMENT)
    if not after.matches(rr.digest_before, timestamps=not opts.stamp_v0_with_mtime):
        remove_staged(pdir, [n for o in rr.outputs for n in o.files])
        j.state = JournalState.FAILED
        j.error = {"message": "record digest of the rewritten segment differs from the original"}
        save_journal(ctx.run_dir, j)
        return ctx.failed("record digest of the rewritten segment differs from the original; nothing replaced",
                          file=str(log), code=FindingCode.DIGEST_MISMATCH)
    j.outputs = rr.outputs
    j.prefix_from = ctx.options.stage if resume is not None else None
    j.bytes_before = rr.bytes_before
    j.bytes_by_magic_before = rr.bytes_by_magic_before
    j.digest_before = rr.digest_before
    j.digest_after = after
    j.split_batches = rr.split_batches
    j.warnings = rr.warnings
    return _swap_in(ctx, j)


def _swap_in(ctx: UnitContext, j: UnitJournal) -> dict[str, Any]:
    """The ``.cleaned`` outputs are in place (written or linked from the stage): make them
    durable, journal ``cleaned``, then Kafka's replace protocol."""
    pdir = ctx.partition_dir
    # The journal may say "cleaned" only once the .cleaned names are durable: a power cut could
    # otherwise keep the journal and lose an index's .cleaned name, and the resume would swap
    # the new .log in beside the original index (docs/architecture.md, "Durability").
    fsync_dir(pdir)
    fault_point("cleaned")
    j.state = JournalState.CLEANED
    save_journal(ctx.run_dir, j)
    fault_point("journal-cleaned")
    replace_segments(pdir, [o.files for o in j.outputs], j.original_names)
    fault_point("replaced")
    return _finish(ctx, j)


def _run_stage(ctx: UnitContext) -> Stage | None:
    """The stage this run swaps in (``--stage``), if any."""
    opts = ctx.options
    return Stage(opts.stage_root, opts.stage) if opts.stage is not None and opts.stage_root is not None else None


def _usable_stage(ctx: UnitContext) -> StagedSegment | None:
    """The prestage's conversion of this segment, when it is of the segment as it is now and
    made as this run would make it (upgrade/stage.py); None: convert here. Stats only: the
    window's cost grows with the files, not the bytes."""
    opts = ctx.options
    stage = _run_stage(ctx)
    pdir = ctx.partition_dir
    try:
        entry = stage.load(pdir, ctx.base_offset) if stage is not None else None
    except (OSError, ValueError):
        return None  # unreadable: converted here, the prestage's word is not needed
    # an earlier attempt's backup links moved the originals' ctimes; its manifest may not be
    # written yet (killed in between), so its files are looked for where they would be
    backup = unit_backup_files_dir(ctx.backup_root, ctx.run_id, ctx.unit.id)
    # the checkpoint as this unit's conversion would read it (an epoch unit has run before it)
    if stage is None or entry is None or not still_current(entry, pdir, ctx.next_base_offset, conversion_of(opts),
                                          leader_epochs_after(pdir, assign=False) if opts.target_magic == 2 else [],
                                          ctime_moved_by_us=lambda cur: _linked_in_backup(backup, cur)):
        return None
    staged_now = identities(stage.files_dir(pdir, ctx.base_offset), [i.name for i in entry.staged_ids])
    if staged_now is None or not all(a.same_except_ctime(b) for a, b in zip(entry.staged_ids, staged_now, strict=True)):
        return None
    return entry


def _usable_prefix(ctx: UnitContext) -> Resume | None:
    """The prestage's conversion of this segment's first bytes (it was the active segment),
    when the segment still begins with them and this run would convert them the same; None:
    convert the whole (upgrade/stage.py, StagedPrefix)."""
    opts = ctx.options
    stage = _run_stage(ctx)
    if stage is None or opts.stamp_v0_with_mtime:
        return None
    pdir = ctx.partition_dir
    try:
        entry = stage.load_prefix(pdir, ctx.base_offset)
    except (OSError, ValueError):
        return None
    files_dir = stage.prefix_files_dir(pdir, ctx.base_offset)
    if entry is None or not prefix_current(entry, pdir, conversion_of(opts), leader_epochs_after(
            pdir, assign=False) if opts.target_magic == 2 else [], files_dir):
        return None
    nxt = ctx.next_base_offset
    if nxt is not None and entry.state.input_last_offset >= nxt:
        return None  # rolled since, and the next segment overlaps it: the whole conversion's checks report it
    return Resume(entry.state, files_dir)


def _linked_in_backup(backup_dir: Path, current: FileIdentity) -> bool:
    """The run's backup of the unit holds this very file (a hard link of it)."""
    try:
        st = os.stat(backup_dir / current.name)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (current.dev, current.ino)


def _link_staged(ctx: UnitContext, entry: StagedSegment) -> bool:
    """Link the staged ``.cleaned`` files into the partition directory (the caller fsyncs it);
    False, with nothing left behind, when the stage went meanwhile (``--discard-stage``)."""
    pdir = ctx.partition_dir
    assert ctx.options.stage_root is not None  # _usable_stage found the entry there
    src = Stage(ctx.options.stage_root, entry.stage_id).files_dir(pdir, ctx.base_offset)
    try:
        for n in entry.output_names:
            os.link(src / (n + names.CLEANED_FILE_SUFFIX), pdir / (n + names.CLEANED_FILE_SUFFIX))
            fault_point("stage-link")
    except OSError:
        remove_cleaned_in_range(pdir, ctx.base_offset, ctx.next_base_offset)
        return False
    return True


# ---------------------------------------------------------------- rollback


def _stage_originals(pdir: Path, j: UnitJournal) -> None:
    assert j.backup_dir is not None
    for f in j.originals:
        dst = pdir / (f.name + names.CLEANED_FILE_SUFFIX)
        dst.unlink(missing_ok=True)
        link_or_copy(Path(j.backup_dir) / f.name, dst)
        os.utime(dst, ns=(f.mtime_ns, f.mtime_ns))
    fsync_dir(pdir)


def _originals_in_place(pdir: Path, j: UnitJournal, in_range: list[str]) -> bool:
    return set(in_range) == set(j.original_names) and all(f.matches(pdir / f.name)
                                                         for f in j.originals)


def _journal_from_backup(ctx: UnitContext, ub: UnitBackup) -> UnitJournal:
    """What a rollback needs when the unit's journal is lost: its originals and their backup."""
    return UnitJournal(unit_id=ctx.unit.id, partition_dir=str(ctx.partition_dir), log_file=ctx.log_name,
                       base_offset=ctx.base_offset, state=JournalState.DONE, originals=ub.files,
                       backup_dir=ub.backup_dir)


def settle_unit(unit: Unit, options: dict[str, Any]) -> list[str]:
    """Bring a unit's replacement in flight, if any, to an end: the upgrade's (finished, renames
    only) or an interrupted rollback's (finished too), and the range's leftovers resolved as
    Kafka's loader would. A rollback settles every unit of a run before it stages the first
    unit's originals: staging ``.cleaned`` files in a partition directory while another
    unit's ``.swap`` files are there would make Kafka's loader delete those swaps, and with
    them the records of that unit (docs/architecture.md, "One replace in flight per
    partition"). Returns what it did, for the unit's rollback result."""
    ctx = UnitContext(unit, options)
    j = load_journal(ctx.run_dir, unit.id)
    ub = load_unit_backup(ctx.backup_root, ctx.run_id, unit.id)
    if ub is None:
        return []  # never backed up, so never replaced: the rollback only drops its .cleaned files
    if j is None:
        j = _journal_from_backup(ctx, ub)
    if j.state is JournalState.ROLLING_BACK:
        rollback_unit(unit, options)  # its staged originals are the replacement in flight
        return []
    if j.state is JournalState.CLEANED:
        _resume_replace(ctx, j)
    return settle_range(ctx.partition_dir, ctx.base_offset, ctx.next_base_offset, j.original_names)


def rollback_unit(unit: Unit, options: dict[str, Any], *, settled: list[str] | None = None) -> dict[str, Any]:
    """Put the originals of a unit back (byte for byte, mtimes included) from its backup,
    whatever the partition directory holds now: the upgraded segment, a half-done replacement,
    what Kafka's loader made of one, nothing at all, or something else (kept under the run's
    backup, ``displaced/``, before it is replaced). Works without the unit's journal.
    Idempotent and resumable: every step is Kafka's replace protocol. The caller settles every
    unit of the partition directory first (:func:`settle_unit`, whose notes are ``settled``)."""
    ctx = UnitContext(unit, options)
    pdir = ctx.partition_dir
    end = ctx.next_base_offset
    j = load_journal(ctx.run_dir, unit.id)
    ub = load_unit_backup(ctx.backup_root, ctx.run_id, unit.id)
    skipped = UnitResult(unit=ctx.log_name, path=str(pdir / ctx.log_name), status=UnitStatus.SKIPPED)
    if ub is None:
        if j is not None and j.state not in (JournalState.STARTED, JournalState.FAILED, JournalState.ROLLED_BACK):
            return ctx.failed("no backup manifest for this unit; its originals cannot be restored",
                              code=FindingCode.BACKUP_INVALID)
        # never backed up, so never replaced: drop what an interrupted rewrite left
        remove_cleaned_in_range(pdir, ctx.base_offset, end)
        return ctx.result(skipped)
    if j is None:
        j = _journal_from_backup(ctx, ub)
        notes = ["journal lost: rolled back from the backup manifest"]
    else:
        notes = []
    notes += settled or []
    # a replacement in flight is finished first (renames only): the directory is then whole
    if j.state is JournalState.CLEANED and _resume_replace(ctx, j) == "finished":
        j.state = JournalState.DONE
    if j.state is not JournalState.ROLLING_BACK:
        notes += settle_range(pdir, ctx.base_offset, end, j.original_names)
        in_range = segment_files_in_range(pdir, ctx.base_offset, end)
        if _originals_in_place(pdir, j, in_range):
            for f in j.originals:
                os.utime(pdir / f.name, ns=(f.mtime_ns, f.mtime_ns))
            j.state = JournalState.ROLLED_BACK
            save_journal(ctx.run_dir, j)
            return ctx.result(_rolled_back(ctx, j, notes) if j.outputs or notes else skipped)
        problems = verify_backup(ub)
        if problems:
            return ctx.failed("backup unusable: " + "; ".join(problems), code=FindingCode.BACKUP_INVALID)
        # ours: originals as backed up, and output segments whose .log is as this run wrote it
        # (their indexes are derived from it); anything else is kept before it is replaced
        ours = {f.name for f in j.originals if f.matches(pdir / f.name)}
        ours |= {n for o in j.outputs if o.matches(pdir / o.files[0]) for n in o.files}
        foreign = [n for n in in_range if n not in ours]
        if foreign:
            kept = keep_displaced(ctx.backup_root, ctx.run_id, unit.id, pdir, foreign)
            notes.append(f"kept {', '.join(foreign)} (neither original nor this run's output) in {kept}")
        j.displaced = in_range
        _stage_originals(pdir, j)
        j.state = JournalState.ROLLING_BACK
        save_journal(ctx.run_dir, j)
        fault_point("rollback-staged")
    states = new_file_states(pdir, j.original_names)
    log = next(f for f in j.originals if f.name == ctx.log_name)
    if not any(s in ("cleaned", "swap") for s in states.values()) and not log.matches(pdir / ctx.log_name):
        _stage_originals(pdir, j)  # Kafka's loader discarded the staged originals
    replace_segments(pdir, [j.original_names], sorted(set(j.displaced) | set(j.output_names)))
    for f in j.originals:
        os.utime(pdir / f.name, ns=(f.mtime_ns, f.mtime_ns))
    j.state = JournalState.ROLLED_BACK
    save_journal(ctx.run_dir, j)
    return ctx.result(_rolled_back(ctx, j, notes))


def _rolled_back(ctx: UnitContext, j: UnitJournal, notes: list[str]) -> UnitResult:
    return UnitResult(unit=ctx.log_name, path=str(ctx.partition_dir / ctx.log_name), status=UnitStatus.OK,
                      bytes_before=sum(o.size for o in j.outputs) or None,
                      # the segment's .log, as the upgrade counts it (its indexes are restored too)
                      bytes_after=next((f.size for f in j.originals if f.name == ctx.log_name),
                                       sum(f.size for f in j.originals)),
                      # the records the rewrite wrote, back as the originals held them
                      records_before=j.digest_after.records if j.digest_after is not None and j.outputs else None,
                      records_after=j.digest_before.records if j.digest_before is not None else None,
                      input_format=",".join(sorted({k for o in j.outputs for k in o.bytes_by_magic})) or None,
                      output_format=",".join(sorted(j.bytes_by_magic_before)) or None,
                      duration_s=time.monotonic() - ctx.started,
                      warnings=[Finding(message=n, code=FindingCode.ROLLBACK_REPAIR) for n in notes])


def epoch_backup_dir(backup_root: str, run_id: str) -> Path:
    return run_backup_dir(backup_root, run_id) / EPOCH_BACKUP_DIR


def run_epoch_unit(unit: Unit, options: dict[str, Any]) -> dict[str, Any]:
    """``--assign-leader-epoch``: leader epoch 0 from the partition's log start offset, the
    original checkpoint kept in the run's backup first (docs/formats.md §5.7). The unit runs
    before the partition's segment units (same serial key), so their rewrites read the new
    checkpoint and stamp epoch 0 on the batches they write."""
    started = time.monotonic()
    pdir = Path(EpochParams.model_validate(unit.params).partition_dir)
    path = pdir / names.LEADER_EPOCH_CHECKPOINT_FILE
    base = {"broker_id": unit.broker_id, "topic": unit.topic, "partition": unit.partition}
    try:
        a = assign_leader_epoch(pdir, backup_dir=epoch_backup_dir(options["backup_root"], options["run_id"]))
    except (KafkaFormatError, OSError, ValueError) as exc:
        ur = UnitResult(unit=path.name, unit_type=UnitType.FILE, path=str(path), status=UnitStatus.FAILED,
                        duration_s=time.monotonic() - started,
                        errors=[Finding(file=str(path), message=f"leader epoch not assigned: {exc}",
                                        code=FindingCode.LEADER_EPOCH_FAILED)])
        return {**base, "status": "failed", "unit_result": ur.model_dump(mode="json")}
    ur = UnitResult(unit=path.name, unit_type=UnitType.FILE, path=str(path),
                    status=UnitStatus.OK if a is not None else UnitStatus.SKIPPED,
                    duration_s=time.monotonic() - started,
                    warnings=[Finding(file=str(path), code=ASSIGNED_CODE, message=a.describe())] if a else [])
    return {**base, "status": "ok", "unit_result": ur.model_dump(mode="json")}
