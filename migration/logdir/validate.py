"""Validation of broker log dirs, partition dirs and single files.

What is checked (Kafka's own rules, docs/formats.md §0.3, §1-§5, §8):
- segments: every batch CRC, and with ``deep`` the inner messages of v0/v1 wrappers (CRC,
  structure) and every v2 record; offsets strictly increasing (a shallow pass compares a
  wrapper by its last offset, the one Kafka's recovery reads, without decompressing it), at or
  above the segment base offset, below the next segment's base offset and within int32 of
  the base offset; no trailing bytes after the last complete batch;
- offset index: Kafka's sanity check, entries strictly increasing, every position a batch
  boundary at or before the batch holding the entry's offset (entries of multi-batch appends
  that kafka-dump-log calls mismatches are legal and reported as info);
- time index: sanity check, strictly increasing timestamps, each entry's timestamp the
  maximum seen up to its offset, offsets inside the segment;
- missing and empty indexes (Kafka's load, LogLoader.java and LogSegment.sanityCheck in
  LogSegment.java, runs no index sanity check since KAFKA-7283 and recovers only the segments
  at or above the recovery point, so below it what is on disk is what Kafka uses):
  ``INDEX_MISSING``, no ``.index`` beside a ``.log``: Kafka recovers such a segment at load
  (both indexes rebuilt), a full read logged as an error and the sign of lost files: an error
  for a closed segment; info for the active one (the partition's last segment, also the verdict
  on a segment validated without ``next_base_offset``), which Kafka's load rebuilds like after
  every unclean shutdown, and beside an empty ``.log``;
  ``TIMEINDEX_MISSING`` / ``TIMEINDEX_EMPTY``, no ``.timeindex``, or one without entries,
  although the segment's batches carry a max timestamp >= 0: Kafka creates a missing time index
  empty (LogSegment.sanityCheck truncates a newly created one to 0 bytes) and never rebuilds it
  unless it recovers the segment, so time lookups miss the segment and time-based retention
  falls back to the ``.log`` mtime: an error, with the ``INDEX_MISSING`` verdict when the
  ``.index`` is missing too (that recovery rebuilds both). Without timestamps (v0 data, v1 at
  -1) an empty time index is right (TimeIndex.maybeAppend never indexes -1): no finding for an
  empty one, info for a missing one (Kafka creates the empty file);
- transaction index, producer snapshots (CRC, naming, alignment to segment base offsets),
  leader-epoch-checkpoint, partition.metadata, leftover files of an interrupted operation.
A segment is read once, streaming; the index files (at most 10 MiB each) are merge-joined
against the batches as they pass, so memory does not grow with the segment.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from migration.formats import core, names
from migration.formats._protocols import SegmentWalker
from migration.formats.checkpoint_files import LeaderEpochCheckpointFile
from migration.formats.errors import KafkaFormatError
from migration.formats.file_records import Batch, FileRecords
from migration.formats.index_file import IndexFile
from migration.formats.layout import PARTITION_LEADER_EPOCH_OFFSET
from migration.formats.model import MAGIC_V2, NO_PARTITION_LEADER_EPOCH
from migration.formats.offset_index import OffsetIndex
from migration.formats.partition_metadata import PartitionMetadataFile
from migration.formats.producer_snapshot import ProducerSnapshot
from migration.formats.record_batch import RecordBatch
from migration.formats.time_index import TimeIndex
from migration.formats.transaction_index import TransactionIndex
from migration.logdir.findings import Finding, FindingCode, Severity
from migration.logdir.leftovers import loader_actions

INT32_MAX = 2**31 - 1


class ValidationResult(BaseModel):
    findings: list[Finding] = Field(default_factory=list)
    files_checked: int = 0
    bytes_checked: int = 0
    batches_checked: int = 0
    records_checked: int = 0

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.severity != "info"]

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, severity: Severity, code: FindingCode, file: str | os.PathLike[str], message: str, *,
            position: int | None = None, partition: str | None = None) -> None:
        self.findings.append(Finding(severity=severity, code=code, file=str(file), position=position,
                                     message=message, partition=partition))

    def add_error(self, exc: KafkaFormatError, code: FindingCode, partition: str | None = None,
                  file: str | os.PathLike[str] | None = None) -> None:
        self.findings.append(Finding.of_error(exc, code, severity="error", file=file, partition=partition))

    def merge(self, other: ValidationResult) -> None:
        self.findings.extend(other.findings)
        self.files_checked += other.files_checked
        self.bytes_checked += other.bytes_checked
        self.batches_checked += other.batches_checked
        self.records_checked += other.records_checked


class SegmentSummary(BaseModel):
    """What a validation pass learnt about a segment, for callers that act on it."""

    base_offset: int
    valid: bool
    batches: int = 0
    records: int = 0
    last_offset: int | None = None
    max_timestamp: int = -1


def batch_offset_problems(first: int | None, last: int, prev_last: int, base: int, next_base: int | None,
                          span: tuple[int, int] | None = None) -> Iterator[tuple[FindingCode, str]]:
    """Kafka's offset rules for one batch of a segment with base offset ``base``: (code,
    message) for each rule it breaks. ``first`` is None for a legacy wrapper that was not
    decompressed (judged by its last offset); ``span``, the offsets of a v2 batch's records."""
    if (last if first is None else first) <= prev_last:
        yield FindingCode.OFFSET_ORDER, (f"batch offsets {'' if first is None else first}..{last} do not follow "
                                         f"the previous batch ending at {prev_last}")
    if span is not None and first is not None and (span[0] < first or span[1] > last):
        yield FindingCode.RECORD_OFFSET, (f"record offsets {span[0]}..{span[1]} outside the batch's range "
                                          f"{first}..{last}")
    if last - base > INT32_MAX:
        yield FindingCode.OFFSET_OVERFLOW, f"offset {last} is more than int32 above the segment base offset {base}"
    if next_base is not None and last >= next_base:
        yield FindingCode.OFFSET_BEYOND_SEGMENT, (f"offset {last} is not below the next segment's base offset "
                                                  f"{next_base}")


@runtime_checkable
class WalkerObserver(Protocol):
    """An ``on_batch`` of :func:`validate_segment` that also lets the compiled core's segment
    walker judge runs of batches: the walker's duties for it (``core.segment_walker``'s keyword
    arguments, or None for no walker), and what it takes from the walker at the end."""

    def __call__(self, batch: Batch, /) -> None: ...

    @property
    def walker_duties(self) -> dict[str, int] | None: ...

    def absorb_walker(self, walker: SegmentWalker, /) -> None: ...


def validate_segment(
    log_path: str | os.PathLike[str],
    *,
    next_base_offset: int | None = None,
    deep: bool = True,
    result: ValidationResult | None = None,
    partition: str | None = None,
    on_batch: Callable[[Batch], None] | None = None,
    leader_epochs: list[tuple[int, int]] | None = None,
) -> tuple[ValidationResult, SegmentSummary]:
    """Validate one segment and its companions (index, time index, transaction index), in one
    streaming pass. ``next_base_offset`` is the partition's next segment's; None means this is
    the partition's last (active) segment.

    ``on_batch`` sees every batch the loop reads. A :class:`WalkerObserver` (``walker_duties``
    and ``absorb_walker``) lets the compiled core judge runs of batches in C and takes what it
    gathered about them at the end; any other callable has the loop read every batch itself."""

    res = result if result is not None else ValidationResult()
    log_path = Path(log_path)
    base = names.offset_from_file_name(log_path.name)
    summary = SegmentSummary(base_offset=base, valid=True)
    errors_before = len(res.problems)
    prefix = log_path.parent / names.filename_prefix_from_offset(base)
    index_path = Path(str(prefix) + names.INDEX_FILE_SUFFIX)
    time_path = Path(str(prefix) + names.TIME_INDEX_FILE_SUFFIX)
    txn_path = Path(str(prefix) + names.TXN_INDEX_FILE_SUFFIX)

    offset_entries, offset_state = _index_entries(OffsetIndex, index_path, base, FindingCode.INDEX_CORRUPT, res,
                                                  partition)
    time_entries, time_state = _index_entries(TimeIndex, time_path, base, FindingCode.TIMEINDEX_CORRUPT, res,
                                              partition)
    _index_entries(TransactionIndex, txn_path, base, FindingCode.TXNINDEX_CORRUPT, res, partition)

    fr = FileRecords(log_path)
    res.files_checked += 1
    epoch_starts = [start for _, start in leader_epochs or ()]
    oi = 0  # next offset-index entry to match
    ti = 0  # next time-index entry to match
    max_ts = -1
    prev_last = base - 1
    records = 0
    batches = 0
    # The compiled record core judges runs of regular batches in C (none of them has a finding)
    # and leaves every other batch to this loop; it carries the loop's state meanwhile.
    observer = on_batch if isinstance(on_batch, WalkerObserver) else None
    duties: dict[str, Any] | None = {} if on_batch is None else None if observer is None else observer.walker_duties
    walker: SegmentWalker | None = None if duties is None else core.segment_walker(
        deep=deep, base_offset=base, next_base_offset=next_base_offset, offset_entries=offset_entries,
        time_entries=time_entries, leader_epochs=leader_epochs, **duties)
    try:
        for b in fr.batches(skip=None if walker is None else walker.advance):
            if walker is not None and walker.enabled:
                prev_last, max_ts, oi, ti = walker.prev_last, walker.max_ts, walker.oi, walker.ti
            batches += 1
            pos = b.position
            span = None  # offsets of a v2 batch's records, when deep
            try:
                b.ensure_valid()
                if deep:
                    if isinstance(b, RecordBatch):  # magic 2 (v0/v1 entries are LegacyBatch)
                        # Decodes and checks every record as records() does, without building
                        # Record objects (the digest's walk without its output).
                        span = b.check_records()
                        n = b.records_count
                    else:
                        n = len(b.scan()[1]) if b.is_compressed else 1  # inner CRCs and structure
                    records += n
            except KafkaFormatError as exc:
                res.add_error(exc.located(str(log_path)), FindingCode.CORRUPT_BATCH, partition, log_path)
                summary.valid = False
                # Kafka stops recovery at the first invalid batch: so do we.
                break
            last = b.last_offset
            # A legacy wrapper's first offset lies inside its compressed value: a shallow pass
            # works, as Kafka's segment recovery does, from the outer CRC and the last offsets
            # (their order and range) and never decompresses.
            first = b.base_offset if deep or b.magic == MAGIC_V2 or not b.is_compressed else None
            floor = prev_last + 1 if first is None else first  # lowest offset the batch may hold
            for code, message in batch_offset_problems(first, last, prev_last, base, next_base_offset, span):
                res.add("error", code, log_path, message, position=pos, partition=partition)
            prev_last = max(prev_last, last)
            if leader_epochs and isinstance(b, RecordBatch):
                # The epoch field is outside the CRC: the leader-epoch cache, built from these
                # same batches, is the only cross-check Kafka leaves us.
                k = bisect.bisect_right(epoch_starts, b.base_offset) - 1  # first, for a v2 batch
                expected_epoch = leader_epochs[k][0] if k >= 0 else None
                # A batch without an epoch (-1: written by a tool, or converted from v0/v1
                # without one) is no conflict: Kafka's LogSegment.recover assigns epochs only
                # from batches that carry one.
                if expected_epoch is not None and b.partition_leader_epoch not in (expected_epoch,
                                                                                   NO_PARTITION_LEADER_EPOCH):
                    res.add("error", FindingCode.LEADER_EPOCH_MISMATCH, log_path,
                            f"batch at offset {first} has partition leader epoch {b.partition_leader_epoch}, "
                            f"leader-epoch-checkpoint says {expected_epoch}",
                            position=pos + PARTITION_LEADER_EPOCH_OFFSET, partition=partition)
            if b.max_timestamp > max_ts:
                max_ts = b.max_timestamp
            # offset index: entries whose position is this batch's
            while oi < len(offset_entries) and offset_entries[oi][1] < pos:
                res.add("error", FindingCode.INDEX_POSITION, index_path,
                        f"entry {oi} (offset {offset_entries[oi][0]}) points inside a batch, at byte "
                        f"{offset_entries[oi][1]}", position=oi * OffsetIndex.ENTRY_SIZE, partition=partition)
                oi += 1
            while oi < len(offset_entries) and offset_entries[oi][1] == pos:
                off = offset_entries[oi][0]
                if off < floor:
                    res.add("error", FindingCode.INDEX_OFFSET, index_path,
                            f"entry {oi} names offset {off} but byte {pos} starts at offset {floor}"
                            + ("" if first is not None else " or later"), position=oi * OffsetIndex.ENTRY_SIZE,
                            partition=partition)
                elif off != last:
                    res.add("info", FindingCode.INDEX_MULTI_BATCH, index_path,
                            f"entry {oi} offset {off} is not the last offset {last} of the batch at byte {pos} "
                            "(a multi-batch append; lookups stay correct)", position=oi * OffsetIndex.ENTRY_SIZE,
                            partition=partition)
                oi += 1
            # time index: an entry (T, O) is checked when the batch holding O passes
            while ti < len(time_entries) and time_entries[ti][1] <= last:
                ts, off = time_entries[ti]
                if ts > max_ts:
                    res.add("error", FindingCode.TIMEINDEX_AHEAD, time_path,
                            f"entry {ti} timestamp {ts} is above the maximum timestamp {max_ts} up to offset {off}",
                            position=ti * TimeIndex.ENTRY_SIZE, partition=partition)
                ti += 1
            if on_batch is not None:
                on_batch(b)
            if walker is not None and walker.enabled:
                _hand_back(walker, prev_last, max_ts, oi, ti)
    except KafkaFormatError as exc:
        res.add_error(exc.located(str(log_path)), FindingCode.CORRUPT_BATCH, partition, log_path)
        summary.valid = False
    if walker is not None:
        # The walker holds the state after its last run (a batch that broke the loop changed
        # nothing of it) and counted the batches and records it judged.
        if walker.enabled:
            prev_last, max_ts, oi, ti = walker.prev_last, walker.max_ts, walker.oi, walker.ti
        batches += walker.batches
        records += walker.records
        if observer is not None:
            observer.absorb_walker(walker)
    if summary.valid and fr.trailing_bytes:
        res.add("error", FindingCode.TRAILING_BYTES, log_path,
                f"{fr.trailing_bytes} bytes after the last complete batch (a truncated tail)",
                position=fr.valid_bytes, partition=partition)
        summary.valid = False
    if summary.valid:
        for j in range(oi, len(offset_entries)):
            res.add("error", FindingCode.INDEX_BEYOND_LOG, index_path,
                    f"entry {j} points at byte {offset_entries[j][1]}, not a batch start in the log",
                    position=j * OffsetIndex.ENTRY_SIZE, partition=partition)
        for j in range(ti, len(time_entries)):
            res.add("error", FindingCode.TIMEINDEX_BEYOND_LOG, time_path,
                    f"entry {j} names offset {time_entries[j][1]}, beyond the last offset {prev_last}",
                    position=j * TimeIndex.ENTRY_SIZE, partition=partition)
    _missing_or_empty_indexes(res, index_path, time_path, offset_state, time_state, time_entries, batches=batches,
                              max_ts=max_ts, closed=next_base_offset is not None, partition=partition)
    prev_ts = None
    for j, (ts, _off) in enumerate(time_entries):
        if prev_ts is not None and ts <= prev_ts:
            res.add("error", FindingCode.TIMEINDEX_ORDER, time_path, f"entry {j} timestamp {ts} does not increase",
                    position=j * TimeIndex.ENTRY_SIZE, partition=partition)
        prev_ts = ts
    res.bytes_checked += fr.valid_bytes
    res.batches_checked += batches
    res.records_checked += records
    summary.batches = batches
    summary.records = records
    summary.last_offset = prev_last if batches else None
    summary.max_timestamp = max_ts
    if len(res.problems) > errors_before:
        summary.valid = False
    return res, summary


def _hand_back(walker: SegmentWalker, prev_last: int, max_ts: int, oi: int, ti: int) -> None:
    """The loop's state to the segment walker; a last offset beyond int64 (base offset plus
    delta of a corrupt v2 batch) ends the walker's part: the loop carries on alone."""
    try:
        walker.prev_last = prev_last
    except OverflowError:
        walker.enabled = False
        return
    walker.max_ts, walker.oi, walker.ti = max_ts, oi, ti


IndexState = Literal["ok", "missing", "corrupt"]


def _index_entries(index_type: type[IndexFile] | type[TransactionIndex], path: Path, base: int, code: FindingCode,
                   res: ValidationResult, partition: str | None) -> tuple[list[tuple[int, int]], IndexState]:
    """Read one index file with Kafka's sanity rules: its entries as plain tuples and
    ``"ok"``, or no entries and ``"missing"``, or ``"corrupt"`` (with a finding)."""
    if not path.exists():
        return [], "missing"
    try:
        index = index_type.read(path, base, strict=True)
    except KafkaFormatError as exc:
        res.add_error(exc, code, partition, path)
        return [], "corrupt"
    except ValueError as exc:
        res.add("error", code, path, str(exc), partition=partition)
        return [], "corrupt"
    res.files_checked += 1
    # The transaction index is only checked: the batches are matched against the other two.
    return (index.pairs() if isinstance(index, IndexFile) else []), "ok"


def _missing_or_empty_indexes(res: ValidationResult, index_path: Path, time_path: Path, offset_state: IndexState,
                              time_state: IndexState, time_entries: list[tuple[int, int]], *, batches: int,
                              max_ts: int, closed: bool, partition: str | None) -> None:
    """``INDEX_MISSING``, ``TIMEINDEX_MISSING`` and ``TIMEINDEX_EMPTY`` (module docstring):
    judged after the segment's single pass, from its batch count and max timestamp."""
    # Kafka's LogLoader recovers a segment whose offset index is missing (both indexes rebuilt).
    missing: Severity = "error" if closed and batches else "info"
    if offset_state == "missing":
        res.add(missing, FindingCode.INDEX_MISSING, index_path,
                f"no offset index beside a{' closed' if closed else 'n active'} segment of {batches} batches: Kafka "
                "recovers the segment at load (reads all of it, rebuilds both indexes)"
                if batches else "no offset index beside an empty segment (Kafka creates it at load)",
                partition=partition)
    if time_state == "corrupt" or time_entries:
        return
    # Otherwise Kafka keeps the time index as it is (a missing one is created empty).
    wrong: Severity = missing if offset_state == "missing" else "error"
    if time_state == "missing":
        if max_ts >= 0:
            res.add(wrong, FindingCode.TIMEINDEX_MISSING, time_path,
                    f"no time index although the segment's records carry timestamps (max {max_ts}): Kafka "
                    "creates it empty, so time lookups miss the segment and time-based retention uses the "
                    ".log mtime", partition=partition)
        else:
            res.add("info", FindingCode.TIMEINDEX_MISSING, time_path,
                    "no time index; Kafka creates it empty at load, which is right for records without "
                    "timestamps", partition=partition)
    elif max_ts >= 0:
        res.add(wrong, FindingCode.TIMEINDEX_EMPTY, time_path,
                f"time index has no entries although the segment's records carry timestamps (max {max_ts}): "
                "time lookups miss the segment and time-based retention uses the .log mtime",
                position=0, partition=partition)


def validate_partition_dir(path: str | os.PathLike[str], *, deep: bool = True,
                           result: ValidationResult | None = None) -> ValidationResult:

    res = result if result is not None else ValidationResult()
    p = Path(path)
    try:
        tp = names.parse_partition_dir_name(p.name)
    except KafkaFormatError as exc:
        res.add_error(exc, FindingCode.BAD_DIR_NAME, None, p)
        return res
    part = tp.name
    logs: list[int] = []
    snapshots: list[int] = []
    entries = sorted(os.scandir(p), key=lambda e: e.name)
    # what the loader will do, when there is anything for it to do: named file by file
    fates = loader_actions(p) if any(e.name.endswith(names.LEFTOVER_SUFFIXES) for e in entries) else {}
    for e in entries:
        name = e.name
        if name.endswith(names.LEFTOVER_SUFFIXES):
            res.add("warning", FindingCode.LEFTOVER_FILE, e.path,
                    "left by an interrupted replace, delete or write: "
                    + fates.get(name, "Kafka resolves it at startup"), partition=part)
            continue
        if name in fates:  # a file a leftover swap will replace: still validated as it is now
            res.add("warning", FindingCode.LEFTOVER_FILE, e.path, fates[name], partition=part)
        if name.endswith(names.LOG_FILE_SUFFIX):
            logs.append(names.offset_from_file_name(name))
        elif name.endswith(names.PRODUCER_SNAPSHOT_FILE_SUFFIX):
            snapshots.append(names.offset_from_file_name(name))
        elif name.endswith((names.INDEX_FILE_SUFFIX, names.TIME_INDEX_FILE_SUFFIX, names.TXN_INDEX_FILE_SUFFIX)):
            base = names.offset_from_file_name(name)
            if not (p / names.log_file_name(base)).exists():
                res.add("warning", FindingCode.ORPHAN_INDEX, e.path, "index file without its .log (Kafka deletes it)",
                        partition=part)
    epochs = _leader_epochs(p, res, part)
    for i, base in enumerate(logs):
        nxt = logs[i + 1] if i + 1 < len(logs) else None
        validate_segment(p / names.log_file_name(base), next_base_offset=nxt, deep=deep, result=res,
                         partition=part, leader_epochs=epochs)
    base_set = set(logs)
    for off in snapshots:
        sp = p / names.producer_snapshot_file_name(off)
        try:
            ProducerSnapshot.read(sp)
            res.files_checked += 1
        except KafkaFormatError as exc:
            res.add_error(exc, FindingCode.SNAPSHOT_CORRUPT, part, sp)
            continue
        if off not in base_set and not (logs and off > logs[-1] and off == max(snapshots)):
            res.add("warning", FindingCode.SNAPSHOT_STRAY, sp,
                    f"snapshot offset {off} is not a segment base offset (Kafka deletes it as a stray)",
                    partition=part)
    pm = p / names.PARTITION_METADATA_FILE
    if pm.exists():
        try:
            PartitionMetadataFile.read(pm)
            res.files_checked += 1
        except KafkaFormatError as exc:
            res.add_error(exc, FindingCode.PARTITION_METADATA_CORRUPT, part, pm)
    return res


def _leader_epochs(p: Path, res: ValidationResult, part: str) -> list[tuple[int, int]] | None:

    lec = p / names.LEADER_EPOCH_CHECKPOINT_FILE
    if not lec.exists():
        return None
    try:
        f = LeaderEpochCheckpointFile.read(lec)
        f.check_order()
        res.files_checked += 1
    except KafkaFormatError as exc:
        res.add_error(exc, FindingCode.LEADER_EPOCH_CORRUPT, part, lec)
        return None
    return [(e.epoch, e.start_offset) for e in f.entries]
