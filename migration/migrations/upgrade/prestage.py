"""``kmigrate upgrade --prestage``: convert a live broker's closed segments into a stage, and
what its active segments hold so far.

    prestage_upgrade(log_dirs, options=PrestageOptions(...)) -> RunReport (kind upgrade-prestage)

It runs beside the broker: it takes no log dir lock and writes nothing inside a log dir. For
each closed segment of an eligible partition it reads the segment's files (checksums, for the
window's backup), converts it into the stage (upgrade/stage.py) with the upgrade's own rewrite,
checks the output's record digest against the input's, and keeps the result only when the
original's files have the same identity after all this as before: a segment Kafka deleted,
replaced or shortened meanwhile is dropped from the stage, not an error. One segment at a time
(one reader), ``--io-rate`` paces reads and writes, and the pages it read and wrote are dropped
from the page cache so the broker's are not pushed out. A later pass keeps what is still
current, drops what Kafka changed, and stages what is new (``--budget`` bounds one pass).

An active segment is written in place by the broker, so its identity proves nothing: what it
holds so far is copied, converted from the copy, and staged with the checksum of the bytes
converted (:func:`stage_prefix`); the window converts only what follows them when the segment
still begins with them. Each pass stages it again unless nothing was appended since.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from migration.audit.model import Finding, FindingCode, OffsetRange, RunKind, RunReport, UnitResult, UnitStatus
from migration.audit.store import ReportNotFound, ReportStore
from migration.formats import names
from migration.formats.errors import KafkaFormatError
from migration.formats.fileio import durable_mkdir, durable_rmtree, unlink_files
from migration.logdir.model import scan_log_dir
from migration.migrations.common.backup import fingerprint
from migration.migrations.common.checksum import CURRENT_FILE_CHECKSUM, prefix_checksum
from migration.migrations.upgrade.options import UpgradeOptions
from migration.migrations.upgrade.plan import checkpoint_epochs, left_as_is, survey_segment
from migration.migrations.upgrade.rewrite import digest_outputs, rewrite_segment
from migration.migrations.upgrade.stage import (
    Conversion,
    Stage,
    StagedPrefix,
    StagedSegment,
    VerifiedSegment,
    conversion_of,
    epochs_in_range,
    identities,
    leader_epochs_after,
    prefix_current,
    segment_files,
    still_current,
    sweep_deleted,
    verified_current,
)
from migration.runtime.safety import Refused
from migration.settings import default_stage_root, device_of, is_inside

# Room kept free beyond the staged bytes: a conversion may grow a segment (v0 to v2 with tiny
# records), and the broker goes on writing while the stage fills.
SPACE_MARGIN_RATIO = 0.10
SPACE_MARGIN_BYTES = 64 << 20
_COPY_CHUNK = 1 << 20


class PrestageOptions(BaseModel):
    """What ``--prestage`` takes beyond the upgrade's options."""

    upgrade: UpgradeOptions
    stage_id: str
    stage_root: str | None = Field(default=None, description="Default: settings.default_stage_root")
    budget: int | None = Field(default=None, ge=1, description="Bytes of originals one pass converts at most")
    io_rate: int | None = Field(default=None, ge=1, description="Bytes per second read plus written, at most")


class _Pacer:
    """``--io-rate``: sleeps after each segment so that bytes moved over time stays at the rate."""

    def __init__(self, rate: int | None) -> None:
        self.rate = rate
        self.moved = 0
        self.t0 = time.monotonic()

    def add(self, nbytes: int) -> None:
        self.moved += nbytes
        if self.rate:
            ahead = self.moved / self.rate - (time.monotonic() - self.t0)
            if ahead > 0:
                time.sleep(ahead)


def _drop_cached(paths: list[Path]) -> None:
    """POSIX_FADV_DONTNEED on files read or written: the broker's hot pages stay cached."""
    if not hasattr(os, "posix_fadvise"):
        return
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


class _Outcome(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    status: Literal["staged", "changed", "corrupt", "not-staged"]
    entry: StagedSegment | None = None
    prefix: StagedPrefix | None = None
    error: KafkaFormatError | None = None
    read_bytes: int = Field(default=0, description="Bytes read (and, for a prefix, copied) before the outcome")

    @property
    def moved_bytes(self) -> int:
        """Bytes read and written, as the pacer counts them."""
        if self.entry is not None:
            return self.read_bytes + self.entry.bytes_after
        if self.prefix is not None:
            return self.read_bytes + self.prefix.state.output.size
        return self.read_bytes


def stage_segment(stage: Stage, partition_dir: Path, base_offset: int, next_base_offset: int | None,
                  conversion: Conversion, epochs: list[tuple[int, int]]) -> _Outcome:
    """Convert one closed segment into ``stage``; the manifest is written only when the
    original's files were the same before and after (then it is durable, files first)."""
    files = segment_files(partition_dir, base_offset)
    before = identities(partition_dir, files)
    log = partition_dir / names.log_file_name(base_offset)
    if before is None or log.name not in files:
        return _Outcome(status="changed")
    out = stage.new_files_dir(partition_dir, base_offset)
    try:
        originals = [fingerprint(partition_dir / n) for n in files]
        log_mtime = next(i.mtime_ns for i in before if i.name == log.name)
        spec = conversion.rewrite_spec(stamp_v0_ms=log_mtime // 1_000_000 if conversion.stamp_v0_with_mtime else None,
                                       epochs=epochs, next_base_offset=next_base_offset)
        rr = rewrite_segment(log, spec, out_dir=out)
        after = digest_outputs(out, rr.outputs)
    except FileNotFoundError:
        durable_rmtree(out)
        return _Outcome(status="changed")
    except KafkaFormatError as exc:
        durable_rmtree(out)
        # Kafka may have shortened or replaced it while it was read: only an unchanged one is corrupt
        if identities(partition_dir, files) != before:
            return _Outcome(status="changed", error=exc)
        return _Outcome(status="corrupt", error=exc)
    read = sum(f.size for f in originals)
    if identities(partition_dir, files) != before or segment_files(partition_dir, base_offset) != files:
        durable_rmtree(out)
        return _Outcome(status="changed", read_bytes=read)
    if not after.matches(rr.digest_before, timestamps=not conversion.stamp_v0_with_mtime):
        durable_rmtree(out)
        return _Outcome(status="corrupt", read_bytes=read, error=KafkaFormatError(
            "record digest of the converted segment differs from the original", path=str(log)))
    staged_names = [n + names.CLEANED_FILE_SUFFIX for o in rr.outputs for n in o.files]
    staged = identities(out, staged_names)
    assert staged is not None  # written and fsynced just now, in a directory only this pass writes
    entry = StagedSegment(
        stage_id=stage.stage_id, partition_dir=str(partition_dir), base_offset=base_offset,
        next_base_offset=next_base_offset, conversion=conversion,
        leader_epochs=epochs_in_range(epochs, base_offset, next_base_offset) if conversion.target_magic == 2 else [],
        originals=originals, original_ids=before, outputs=rr.outputs, staged_ids=staged,
        bytes_before=rr.bytes_before, bytes_by_magic_before=rr.bytes_by_magic_before,
        digest_before=rr.digest_before, digest_after=after, split_batches=rr.split_batches, warnings=rr.warnings)
    stage.save(entry)
    _drop_cached([partition_dir / n for n in files] + [out / n for n in staged_names])
    return _Outcome(status="staged", entry=entry, read_bytes=read)


def _copy_written(src: Path, dst: Path) -> int:
    """Copy what the broker has written of its active segment so far; returns the bytes copied.
    With ``log.preallocate`` the file is segment.bytes long, zeros after the data: the copy
    stops at the first chunk of zeros only and leaves out the zeros that end the chunk before
    (were they a batch's last bytes, that batch is torn: the window converts it)."""
    copied = 0
    last = b""
    with open(src, "rb", buffering=0) as f, open(dst, "wb") as out:
        while chunk := f.read(_COPY_CHUNK):
            if chunk.count(0) != len(chunk):
                out.write(chunk)
                copied += len(chunk)
                last = chunk
                continue
            copied -= len(last) - len(last.rstrip(b"\0"))
            out.truncate(copied)
            break
    return copied


def stage_prefix(stage: Stage, partition_dir: Path, base_offset: int, conversion: Conversion,
                 epochs: list[tuple[int, int]]) -> _Outcome:
    """Convert what an active segment holds so far into ``stage`` (a :class:`StagedPrefix`).
    The broker appends to it meanwhile, and may truncate it, so the conversion reads a copy
    taken first: the checksum the window compares is of exactly the bytes converted (the
    copy's whole batches; a batch the broker was writing ends the copy). The segment's pages
    stay cached: the broker's consumers read them."""
    log = partition_dir / names.log_file_name(base_offset)
    out = stage.new_prefix_dir(partition_dir, base_offset)
    copy = out / log.name
    copied = 0
    try:
        copied = _copy_written(log, copy)
        rr = rewrite_segment(copy, conversion.rewrite_spec(stamp_v0_ms=None, epochs=epochs, next_base_offset=None),
                             out_dir=out, torn_tail_ok=True)
        after = digest_outputs(out, rr.outputs)
        checksum = prefix_checksum(copy, rr.bytes_before, CURRENT_FILE_CHECKSUM)
    except FileNotFoundError:
        durable_rmtree(out)
        return _Outcome(status="changed", read_bytes=2 * copied)
    except KafkaFormatError as exc:
        # a batch it cannot read (a truncation seen mid-way, damage): the window converts the whole, and judges it
        durable_rmtree(out)
        return _Outcome(status="not-staged", read_bytes=2 * copied, error=exc)
    unlink_files(copy)
    moved = 2 * copied  # read, and written into the copy
    state = rr.prefix_state
    if state is None:  # no whole batch yet, or more than one output segment: nothing to carry on from
        durable_rmtree(out)
        return _Outcome(status="not-staged", read_bytes=moved)
    assert checksum is not None  # the copy holds the bytes converted
    if not after.matches(rr.digest_before):
        durable_rmtree(out)
        return _Outcome(status="corrupt", read_bytes=moved, error=KafkaFormatError(
            "record digest of the converted prefix differs from the original's", path=str(log)))
    staged_names = [n + names.CLEANED_FILE_SUFFIX for n in state.output.files]
    staged = identities(out, staged_names)
    assert staged is not None  # written just now, in a directory only this pass writes
    entry = StagedPrefix(
        stage_id=stage.stage_id, partition_dir=str(partition_dir), base_offset=base_offset, next_base_offset=None,
        conversion=conversion, leader_epochs=epochs_in_range(epochs, base_offset, state.input_last_offset + 1)
        if conversion.target_magic == 2 else [], log_file=log.name, input_checksum=checksum,
        checksum_algorithm=CURRENT_FILE_CHECKSUM, state=state, staged_ids=staged)
    stage.save_prefix(entry)
    _drop_cached([out / n for n in staged_names])
    return _Outcome(status="staged", prefix=entry, read_bytes=moved)


class _Candidate(BaseModel):
    broker_id: int
    topic: str
    partition: int
    partition_dir: str
    base_offset: int
    next_base_offset: int | None
    size: int
    epochs: list[tuple[int, int]]
    # for a segment in the target format already, what the window's checks take (plan.survey_segment)
    partition_name: str = ""
    checkpoint: list[tuple[int, int]] = Field(default_factory=list)
    mtime_ns: int = 0
    active: bool = Field(default=False, description="The partition's active segment: its bytes so far are staged "
                         "(stage_prefix)")


class _PassPlan(BaseModel):
    """What a pass does: closed segments to stage, closed segments in the target format to
    check as the window would (:func:`verify_segment`), and what earlier passes did that holds."""

    candidates: list[_Candidate] = Field(default_factory=list)
    to_verify: list[_Candidate] = Field(default_factory=list)
    kept: int = 0
    verified_kept: int = 0
    prefixes_kept: int = 0
    active: int = 0


# How a check of a closed segment in the target format ended (verify_segment)
VerifyOutcome = Literal["verified", "findings", "changed"]


def verify_segment(stage: Stage, c: _Candidate, options: UpgradeOptions, conversion: Conversion
                   ) -> tuple[VerifyOutcome, int, int | None]:
    """Check a closed segment in the target format as the window's plan would (plan.survey_segment)
    and, when that finds nothing and its files were the same before and after the read, record
    it in the stage: the window then skips it unread. Returns (``verified``, ``findings`` or
    ``changed``; bytes read; its records). A segment with findings is left for the window to
    report."""
    pdir = Path(c.partition_dir)
    log = pdir / names.log_file_name(c.base_offset)
    files = segment_files(pdir, c.base_offset)
    before = identities(pdir, files)
    if before is None or log.name not in files:
        return "changed", 0, None
    try:
        res, survey = survey_segment(log, c.next_base_offset, partition=c.partition_name, checkpoint=c.checkpoint,
                                     mtime_ns=c.mtime_ns, options=options, deep=False)
    except FileNotFoundError:
        return "changed", 0, None
    size = next(i.size for i in before if i.name == log.name)
    if identities(pdir, files) != before or segment_files(pdir, c.base_offset) != files:
        return "changed", size, None
    # No POSIX_FADV_DONTNEED here: closed v2 segments are a mixed log dir's recent data, which
    # consumers may be reading from the cache; a page read once stays on the kernel's inactive
    # list and goes first anyway.
    if not left_as_is(res, survey, log, options.target_magic):
        return "findings", size, None
    stage.save_verified(VerifiedSegment(
        stage_id=stage.stage_id, partition_dir=str(pdir), base_offset=c.base_offset,
        next_base_offset=c.next_base_offset, conversion=conversion,
        leader_epochs=epochs_in_range(c.checkpoint, c.base_offset, c.next_base_offset), original_ids=before,
        bytes=size, bytes_by_magic=survey.bytes_by_magic, records=survey.records))
    return "verified", size, survey.records


def _check_place(root: Path, dirs: list[str]) -> None:
    """The stage root: outside every log dir (Kafka refuses to start on a log dir holding a
    directory that is no partition) and on their file system (the window links, never copies)."""
    inside = [d for d in dirs if is_inside(root, d)]
    if inside:
        raise Refused(f"the stage root {root} is inside log dir {inside[0]}: Kafka would refuse to start on it; give "
                      "--stage-root outside every log dir, on their file system")
    try:
        durable_mkdir(root)
    except OSError as exc:
        raise Refused(f"the stage root {root} cannot be created: {exc.strerror or exc}") from None
    other = [d for d in dirs if device_of(d) != device_of(root)]
    if other:
        raise Refused(f"the stage root {root} is on another file system than log dir(s) {', '.join(other)}: the "
                      "stop window would copy the staged segments instead of linking them; give --stage-root on "
                      "their file system (one prestage per file system)")


def _check_report_id(stage_id: str) -> None:
    """The stage id names the prestage's report: never another kind of run's."""
    try:
        kind = ReportStore().load(stage_id).kind
    except (ReportNotFound, OSError, ValueError):
        return
    if kind is not RunKind.PRESTAGE:
        raise Refused(f"{stage_id} is the id of a {kind.value} run: give the prestage another --run-id")


def window_command(dirs: list[str], options: UpgradeOptions, stage_id: str, stage_root: str | None) -> str:
    """The stop window's command: the prestage's conversion options, so that its stage is used."""
    words = ["kmigrate", "upgrade", *dirs, "--to", options.target.value, "--stage", stage_id]
    defaults = UpgradeOptions(target=options.target)
    for flag, value, default in (("--segment-bytes", options.segment_bytes, defaults.segment_bytes),
                                 ("--max-message-bytes", options.max_message_bytes, defaults.max_message_bytes)):
        if value != default:
            words += [flag, str(value)]
    words += ["--stamp-v0-with-mtime"] * options.stamp_v0_with_mtime + ["--assign-leader-epoch"] * \
        options.assign_leader_epoch
    for topic in options.excluded_topics:
        words += ["--exclude-topic", topic]
    if stage_root:
        words += ["--stage-root", stage_root]
    return shlex.join(words)


def _check_space(root: Path, need_bytes: int) -> None:
    st = os.statvfs(root)
    free = st.f_bavail * st.f_frsize
    need = int(need_bytes * (1 + SPACE_MARGIN_RATIO)) + SPACE_MARGIN_BYTES
    if need_bytes and need > free:
        raise Refused(f"not enough space for the stage in {root}: {need:,} bytes needed ({need_bytes:,} of segments "
                      f"to convert, plus {SPACE_MARGIN_RATIO:.0%} and {SPACE_MARGIN_BYTES >> 20} MiB of margin), "
                      f"{free:,} free; free space or give --budget for a pass that fits")


def prestage_upgrade(log_dirs: list[str], *, options: PrestageOptions, broker_id: int | None = None) -> RunReport:
    """Stage the closed segments of ``log_dirs`` (a live broker's) under ``options.stage_id``;
    the report accounts for each: staged, kept from an earlier pass, changed while staging,
    left for a later pass, corrupt; and for each active segment, left for the window."""
    opts = options.upgrade
    dirs = [str(Path(d).resolve()) for d in log_dirs]
    root = Path(options.stage_root).resolve() if options.stage_root else default_stage_root(dirs)
    stage = Stage(root, options.stage_id)
    conversion = conversion_of(opts)
    report = RunReport.start(RunKind.PRESTAGE, {
        "log_dirs": dirs, "stage_id": options.stage_id, "stage_root": str(root), "target": opts.target.value,
        "budget": options.budget, "io_rate": options.io_rate}, run_id=options.stage_id)
    try:
        _check_report_id(options.stage_id)
        _check_place(root, dirs)
        plan = _plan_pass(report, stage, dirs, opts, conversion, broker_id)
        durable_rmtree(*stage.orphans())
        sweep_deleted(root)  # what earlier windows left of their stages
        todo, later = _within_budget(plan.candidates, options.budget)
        _check_space(root, sum(c.size * (2 if c.active else 1) for c in todo))  # a prefix: its copy too
    except Refused as exc:
        report.refuse(str(exc))
        report.finish()
        ReportStore().save(report)
        return report
    pacer = _Pacer(options.io_rate)
    prefixes = 0
    for c in todo:
        t0 = time.monotonic()
        pdir = Path(c.partition_dir)
        if c.active:
            outcome = stage_prefix(stage, pdir, c.base_offset, conversion, c.epochs)
            prefixes += outcome.prefix is not None
            report.add_unit(c.broker_id, c.topic, c.partition, _prefix_result(pdir, c, outcome,
                                                                              time.monotonic() - t0),
                            track_progress=False)
        else:
            outcome = stage_segment(stage, pdir, c.base_offset, c.next_base_offset, conversion, c.epochs)
            report.add_unit(c.broker_id, c.topic, c.partition, _result(pdir, c, outcome, time.monotonic() - t0))
        pacer.add(outcome.moved_bytes)
    verified = 0
    for c in plan.to_verify:  # read only (no --budget: it bounds conversions), paced too
        t0 = time.monotonic()
        status, read, records = verify_segment(stage, c, opts, conversion)
        verified += status == "verified"
        report.add_unit(c.broker_id, c.topic, c.partition, _checked_result(c, status, records, time.monotonic() - t0),
                        track_progress=False)
        pacer.add(read)
    for c in later:
        path = str(Path(c.partition_dir) / names.log_file_name(c.base_offset))
        report.add_unit(c.broker_id, c.topic, c.partition, UnitResult(
            unit=Path(path).name, path=path, status=UnitStatus.SKIPPED, bytes_before=c.size,
            warnings=[Finding(file=path, code=FindingCode.OUTSIDE_BUDGET, message=f"left for a later pass: beyond "
                              f"--budget {options.budget:,} bytes")]), track_progress=False)
    staged = [u for u in report.iter_results() if u.status is UnitStatus.OK]
    report.warn(f"stage {options.stage_id} in {stage.path}: {len(staged)} segment(s) staged now, {plan.kept} kept "
                f"from an earlier pass, {len(later)} left for a later pass; of {plan.active} active segment(s), "
                f"{prefixes + plan.prefixes_kept} with their bytes so far staged ({plan.prefixes_kept} by an earlier "
                "pass: unchanged since), of which the window converts only what the broker appends; "
                f"{verified + plan.verified_kept} closed segment(s) in the target format checked as the "
                f"window would ({plan.verified_kept} by an earlier pass), which it skips unread; "
                "swap them in with the broker stopped: "
                + window_command(dirs, opts, options.stage_id, str(root) if options.stage_root else None))
    report.finish()
    ReportStore().save(report)
    return report


def _within_budget(candidates: list[_Candidate], budget: int | None) -> tuple[list[_Candidate], list[_Candidate]]:
    if budget is None:
        return candidates, []
    total = 0
    for k, c in enumerate(candidates):
        if total + c.size > budget and k > 0:
            return candidates[:k], candidates[k:]
        total += c.size
    return candidates, []


def _plan_pass(report: RunReport, stage: Stage, dirs: list[str], opts: UpgradeOptions, conversion: Conversion,
               broker_id: int | None) -> _PassPlan:
    """What to stage and to check now; entries of the stage that are no longer current are
    dropped, those that are count as kept (staged ones reported)."""
    read = stage.read()
    entries = {(e.partition_dir, e.base_offset): e for e in read.entries}
    verified = {(e.partition_dir, e.base_offset): e for e in read.verified}
    prefixes = {(e.partition_dir, e.base_offset): e for e in read.prefixes}
    out = _PassPlan()
    seen: set[tuple[str, int]] = set()
    stale: list[StagedSegment] = []
    stale_verified: list[VerifiedSegment] = []
    active: set[tuple[str, int]] = set()
    target = opts.target_magic
    for d in dirs:
        ld = _scan_live(d)
        bid = broker_id if broker_id is not None else (ld.node_id if ld.node_id is not None else -1)
        for part in ld.partitions:
            if part.kind != names.PartitionDirKind.LIVE.value or part.topic in opts.excluded_topics:
                continue
            pdir = Path(part.path)
            try:
                epochs = leader_epochs_after(pdir, opts.assign_leader_epoch) if target == 2 else []
            except KafkaFormatError:
                continue  # the window reports the checkpoint as corrupt
            except FileNotFoundError:
                continue  # the partition is being deleted
            segs = part.segments
            out.active += 1 if segs else 0
            checkpoint = checkpoint_epochs(part)
            for k, seg in enumerate(segs[:-1]):  # the last is the active segment: the broker writes it
                nxt = segs[k + 1].base_offset
                key = (str(pdir), seg.base_offset)
                seen.add(key)
                v = verified.get(key)
                path = pdir / seg.log_file
                if v is not None and verified_current(v, pdir, nxt, conversion, checkpoint):
                    out.verified_kept += 1
                    report.add_unit(bid, part.topic, part.partition, _kept(
                        path, (v.bytes, v.bytes), (v.records, v.records), FindingCode.PRESTAGE_VERIFIED,
                        "checked by an earlier pass and unchanged since: " + FindingCode.PRESTAGE_VERIFIED.meaning),
                        track_progress=False)
                    continue
                if v is not None:
                    stale_verified.append(v)
                entry = entries.get(key)
                if entry is not None and still_current(entry, pdir, nxt, conversion, epochs):
                    out.kept += 1
                    report.add_unit(bid, part.topic, part.partition, _kept(
                        path, (entry.bytes_before, entry.bytes_after),
                        (entry.digest_before.records, entry.digest_after.records), FindingCode.PRESTAGE_KEPT,
                        FindingCode.PRESTAGE_KEPT.meaning), track_progress=False)
                    continue
                if entry is not None:
                    stale.append(entry)
                in_target = _in_target(pdir / seg.log_file, target) if seg.size else None
                if in_target is None:
                    continue
                c = _Candidate(broker_id=bid, topic=part.topic, partition=part.partition, partition_dir=str(pdir),
                               base_offset=seg.base_offset, next_base_offset=nxt, size=seg.size, epochs=epochs,
                               partition_name=part.name, checkpoint=checkpoint, mtime_ns=seg.mtime_ns)
                (out.to_verify if in_target else out.candidates).append(c)
            if segs and segs[-1].size and not conversion.stamp_v0_with_mtime:
                # the v0 stamp is the .log's mtime, which every append moves: no prefix then
                last = segs[-1]
                key = (str(pdir), last.base_offset)
                active.add(key)
                p = prefixes.get(key)
                path = pdir / last.log_file
                if p is not None and p.state.input_bytes == last.size and prefix_current(
                        p, pdir, conversion, epochs, stage.prefix_files_dir(pdir, last.base_offset)):
                    out.prefixes_kept += 1
                    report.add_unit(bid, part.topic, part.partition, _kept(
                        path, (p.state.input_bytes, p.state.output.size), (None, None), FindingCode.PREFIX_STAGED,
                        "staged by an earlier pass, nothing appended since: " + FindingCode.PREFIX_STAGED.meaning),
                        track_progress=False)
                elif _in_target(path, target) is False:
                    out.candidates.append(_Candidate(
                        broker_id=bid, topic=part.topic, partition=part.partition, partition_dir=str(pdir),
                        base_offset=last.base_offset, next_base_offset=None, size=last.size, epochs=epochs,
                        active=True))

    def gone(e: StagedSegment | VerifiedSegment) -> bool:
        """Deleted or merged by Kafka since: nothing of it to swap in or to skip."""
        return (e.partition_dir, e.base_offset) not in seen and any(Path(e.partition_dir).is_relative_to(d)
                                                                    for d in dirs)

    stale += [e for e in entries.values() if gone(e)]
    stale_verified += [e for e in verified.values() if gone(e)]
    stage.forget(stale)
    stage.forget_verified(stale_verified)
    # A prefix is of the segment active now, or of nothing: a rolled segment is staged whole.
    # One kept is not restaged unless something was appended; a candidate's is replaced.
    stage.forget_prefixes([e for k, e in prefixes.items() if k not in active and any(
        Path(e.partition_dir).is_relative_to(d) for d in dirs)])
    return out


def _scan_live(log_dir: str, attempts: int = 3) -> Any:
    """A live broker's log dir, scanned: a partition directory Kafka renames (deletion) or a
    segment it deletes while the scan reads may make it fail; it is read again."""
    for attempt in range(attempts):
        try:
            return scan_log_dir(log_dir, stats=False)
        except FileNotFoundError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _in_target(log: Path, target: int) -> bool | None:
    """Whether a segment's first batch is in the target format already (the magic byte sits at
    byte 16 in every format): such a segment is nearly always wholly so, the window leaves it as
    it is, and staging it would be work for nothing; one with older batches after a newer (a
    lowered message.format.version) the window converts on the spot."""
    try:
        with open(log, "rb") as f:
            head = f.read(17)
    except FileNotFoundError:
        return None  # deleted by Kafka since the scan: nothing to stage
    return len(head) == 17 and head[16] >= target


def _kept(log: Path, sizes: tuple[int, int], records: tuple[int | None, int | None], code: FindingCode,
          message: str) -> UnitResult:
    """A segment an earlier pass staged or checked (a prefix of: staged), unchanged since."""
    return UnitResult(unit=log.name, path=str(log), status=UnitStatus.SKIPPED, bytes_before=sizes[0],
                      bytes_after=sizes[1], records_before=records[0], records_after=records[1],
                      warnings=[Finding(file=str(log), code=code, message=message)])


def _checked_result(c: _Candidate, status: VerifyOutcome, records: int | None, duration: float) -> UnitResult:
    """A closed segment in the target format, as its check by the prestage ended."""
    log = Path(c.partition_dir) / names.log_file_name(c.base_offset)
    code, message = {
        "verified": (FindingCode.PRESTAGE_VERIFIED, FindingCode.PRESTAGE_VERIFIED.meaning),
        "findings": (FindingCode.ALREADY_IN_TARGET, "in the target format already; its checks found something: the "
                                                    "stop window checks it again and reports it"),
    }.get(status, (FindingCode.CHANGED_WHILE_STAGING, "Kafka changed the segment while it was checked: the stop "
                                                       "window checks it"))
    return UnitResult(unit=log.name, path=str(log), status=UnitStatus.SKIPPED, bytes_before=c.size,
                      bytes_after=c.size, records_before=records, records_after=records, duration_s=duration,
                      warnings=[Finding(file=str(log), code=code, message=message)])


def _prefix_result(pdir: Path, c: _Candidate, outcome: _Outcome, duration: float) -> UnitResult:
    """An active segment, as the staging of its bytes so far ended (a skipped unit: the window
    converts it, from the staged prefix when the segment still begins with those bytes)."""
    log = pdir / names.log_file_name(c.base_offset)
    p = outcome.prefix
    if outcome.status == "corrupt":
        return _result(pdir, c, outcome, duration)
    if p is not None:
        return UnitResult(unit=log.name, path=str(log), status=UnitStatus.SKIPPED, bytes_before=p.state.input_bytes,
                          bytes_after=p.state.output.size, duration_s=duration, warnings=[Finding(
                              file=str(log), code=FindingCode.PREFIX_STAGED,
                              message=f"{p.state.input_bytes:,} of its bytes staged: "
                                      + FindingCode.PREFIX_STAGED.meaning)])
    if outcome.status == "changed":
        code, message = FindingCode.CHANGED_WHILE_STAGING, FindingCode.CHANGED_WHILE_STAGING.meaning
    else:
        why = f": {outcome.error.message}" if outcome.error is not None else ""
        code, message = FindingCode.PREFIX_NOT_STAGED, FindingCode.PREFIX_NOT_STAGED.meaning + why
    return UnitResult(unit=log.name, path=str(log), status=UnitStatus.SKIPPED, bytes_before=c.size,
                      duration_s=duration, warnings=[Finding(file=str(log), code=code, message=message)])


def _result(pdir: Path, c: _Candidate, outcome: _Outcome, duration: float) -> UnitResult:
    log = pdir / names.log_file_name(c.base_offset)
    e = outcome.entry
    if outcome.status == "staged" and e is not None:
        return UnitResult(
            unit=log.name, path=str(log), status=UnitStatus.OK,
            input_format=",".join(sorted(e.bytes_by_magic_before)) or None,
            output_format=f"v{e.conversion.target_magic}", bytes_before=e.bytes_before, bytes_after=e.bytes_after,
            records_before=e.digest_before.records, records_after=e.digest_after.records,
            offsets=OffsetRange(first=e.digest_before.first_offset, last=e.digest_before.last_offset)
            if e.digest_before.first_offset is not None and e.digest_before.last_offset is not None else None,
            digest_algorithm=e.digest_before.algorithm,
            digest_before=e.digest_before.content if e.conversion.stamp_v0_with_mtime else e.digest_before.full,
            digest_after=e.digest_after.content if e.conversion.stamp_v0_with_mtime else e.digest_after.full,
            duration_s=duration, warnings=[Finding(file=str(log), code=FindingCode.PRESTAGED,
                                                   message=FindingCode.PRESTAGED.meaning)])
    if outcome.status == "changed":
        return UnitResult(unit=log.name, path=str(log), status=UnitStatus.SKIPPED, bytes_before=c.size,
                          duration_s=duration, warnings=[Finding(file=str(log), code=FindingCode.CHANGED_WHILE_STAGING,
                                                                 message=FindingCode.CHANGED_WHILE_STAGING.meaning)])
    exc = outcome.error
    return UnitResult(unit=log.name, path=str(log), status=UnitStatus.FAILED, bytes_before=c.size, duration_s=duration,
                      errors=[Finding(file=exc.path if exc is not None and exc.path else str(log),
                                      position=exc.position if exc is not None else None,
                                      message=f"not staged: {exc.message if exc is not None else 'corrupt'}",
                                      code=FindingCode.CORRUPT_SEGMENT)])

