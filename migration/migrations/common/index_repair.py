"""Repair of a segment's offset and time indexes in place, with Kafka's recovery rules.

Every segment of a partition an upgrade touched must leave with indexes Kafka can use: Kafka's
load (LogLoader.java, LogSegment.sanityCheck in LogSegment.java) rebuilds a segment's indexes
only when its ``.index`` is missing or the segment is at or above the recovery point after an
unclean shutdown; any other index is used as it is. A missing ``.timeindex`` is created empty,
so time lookups (TimeIndex.java) and time-based retention of a segment whose records carry
timestamps silently fall back to the ``.log`` mtime. Kafka 0.10.0 wrote v1 data without time
indexes; offline tools have been seen to leave empty ones.

- :func:`segment_index_problems` judges a segment's ``.index`` and ``.timeindex`` with the
  validator's own checks (:func:`migration.logdir.validate.validate_segment`, one shallow pass) and
  returns the findings that call for a rebuild: missing, failing Kafka's sanity rules
  (OffsetIndex.sanityCheck, TimeIndex.sanityCheck), entries that do not match the log, an empty
  time index beside records with timestamps; also an empty offset index beside a segment that
  recovery would index (``INDEX_EMPTY``: lookups then scan from byte 0) and temporary files
  an interrupted rebuild left (``LEFTOVER_FILE``).
- :func:`rebuild_segment_indexes` rebuilds both from the ``.log`` as LogSegment.recover does
  (:class:`~migration.formats.index_builder.IndexBuilder`, the builder of the upgrade rewrite):
  one streaming shallow pass, every batch CRC checked. Each file whose bytes change is written
  as ``<name>.cleaned`` (a name Kafka's loader deletes at startup), fsynced with its previous
  mtime (a new file gets the ``.log``'s), renamed over ``<name>``, and the directory fsynced.
  The ``.log`` is only read.

Both can be called again after a crash at any point: the first only reads; the second
rewrites what still differs (a file already rebuilt is byte-identical and left alone), and its
temporary files are overwritten or removed. A corrupt log (bad CRC or framing, a truncated
tail, offsets out of order, beyond the next segment or beyond int32 of the base offset) raises
:class:`~migration.formats.errors.KafkaFormatError` and changes nothing.

Kafka's loader deletes every ``.swap`` at or above the lowest ``.cleaned`` offset of a
directory (an interrupted split). A ``.cleaned`` left by a crash here must therefore not meet a
replacement in flight in the same directory: :func:`rebuild_segment_indexes` refuses
(:class:`ReplacementInFlight`) while any ``.swap`` file is present, and a caller that may start
a replacement after a crashed repair re-runs the repair first (or drops its leftovers with
:func:`discard_repair_leftovers`).

Fault points (crash tests, :mod:`migration.runtime.faults`): ``index-repair-written`` (a temporary
file complete and fsynced, before its rename), ``index-repair-renamed`` (after the rename, before
the directory fsync).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from migration.formats import names
from migration.formats.errors import CorruptIndexError, CorruptRecordError, KafkaFormatError, TruncatedError
from migration.formats.file_records import Batch, FileRecords
from migration.formats.fileio import durable_replace, durable_unlink, fsync_dir
from migration.formats.index_builder import DEFAULT_INDEX_INTERVAL_BYTES, IndexBuilder
from migration.formats.index_file import IndexFile
from migration.formats.model import MAGIC_V2
from migration.formats.offset_index import OffsetIndex
from migration.formats.time_index import TimeIndex
from migration.logdir.findings import Finding, FindingCode
from migration.logdir.validate import batch_offset_problems, validate_segment
from migration.runtime.faults import fault_point

TMP_SUFFIX = names.CLEANED_FILE_SUFFIX
# Findings on an index file that call for a rebuild although they are not problems: a missing
# file is always created (an empty time index where the records carry no timestamp).
_ALWAYS = frozenset({FindingCode.INDEX_MISSING, FindingCode.TIMEINDEX_MISSING})


def rebuild_reasons(findings: Iterable[Finding], log: Path) -> list[Finding]:
    """Of the validation findings of segment ``log``, those on its offset or time index that
    call for :func:`rebuild_segment_indexes`."""
    prefix = str(log)[: -len(names.LOG_FILE_SUFFIX)]
    ours = (prefix + names.INDEX_FILE_SUFFIX, prefix + names.TIME_INDEX_FILE_SUFFIX)
    return [f for f in findings if f.file in ours and (f.severity != "info" or f.code in _ALWAYS)]


class ReplacementInFlight(RuntimeError):
    """A ``.swap`` file in the partition directory: a segment replacement is not finished."""


class IndexFileRepair(BaseModel):
    """One index file of a repaired segment."""

    file: str = Field(description="Final file name, e.g. 00000000000000000000.timeindex")
    action: Literal["created", "rebuilt", "unchanged"]
    reason: str | None = Field(default=None, description="Why it was written (None when unchanged)")
    entries_before: int | None = Field(default=None, description="None: missing, or unreadable by Kafka's sanity rules")
    entries_after: int
    size_before: int | None = None
    size_after: int
    mtime_ns: int = Field(description="Its mtime now: the previous one, or the .log's for a created file")


class IndexRepair(BaseModel):
    """What :func:`rebuild_segment_indexes` did to one segment."""

    partition_dir: str
    base_offset: int
    log_file: str
    batches: int = 0
    log_bytes: int = 0
    max_timestamp: int = -1
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    files: list[IndexFileRepair] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list, description="The findings that asked for the repair")

    @property
    def created(self) -> list[str]:
        return [f.file for f in self.files if f.action == "created"]

    @property
    def rebuilt(self) -> list[str]:
        return [f.file for f in self.files if f.action == "rebuilt"]

    @property
    def changed(self) -> bool:
        return any(f.action != "unchanged" for f in self.files)


def _paths(pdir: Path, base_offset: int) -> tuple[Path, Path, Path]:
    return (pdir / names.log_file_name(base_offset), pdir / names.index_file_name(base_offset),
            pdir / names.time_index_file_name(base_offset))


def _partition_name(pdir: Path) -> str | None:
    try:
        return names.parse_partition_dir_name(pdir.name).name
    except KafkaFormatError:
        return None


def _staged_rewrite(log: Path) -> bool:
    """A rewrite of this segment is staged: its ``.cleaned`` output takes our temporary names."""
    return log.with_name(log.name + names.CLEANED_FILE_SUFFIX).exists()


def _refuse_in_flight(pdir: Path, log: Path) -> None:
    swaps = sorted(e.name for e in os.scandir(pdir) if e.name.endswith(names.SWAP_FILE_SUFFIX))
    if swaps:
        raise ReplacementInFlight(f"{pdir}: a segment replacement is not finished ({', '.join(swaps[:3])}); "
                                  "finish it before repairing indexes in this directory")
    if _staged_rewrite(log):
        raise ReplacementInFlight(f"{log}: a rewrite of this segment is staged ({log.name}"
                                  f"{names.CLEANED_FILE_SUFFIX}); finish or discard it first")


def _log_error(f: Finding) -> KafkaFormatError:
    kind = TruncatedError if f.code == FindingCode.TRAILING_BYTES else CorruptRecordError
    return kind(f"{f.message} [{f.code}]", path=f.file, position=f.position)


def segment_index_problems(
    partition_dir: str | os.PathLike[str],
    base_offset: int,
    next_base_offset: int | None,
    *,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
) -> list[Finding]:
    """What is wrong with the segment's ``.index`` and ``.timeindex``: the findings that call
    for :func:`rebuild_segment_indexes` (empty: leave the segment as it is). One shallow pass
    over the ``.log`` (batch CRCs, framing, offsets); a corrupt log raises
    :class:`KafkaFormatError`, since indexes cannot be judged, nor rebuilt, against it.
    ``next_base_offset``: the next segment's, None for the partition's last segment."""
    pdir = Path(partition_dir)
    log, index_path, time_path = _paths(pdir, base_offset)
    last_position = -1

    def on_batch(b: Batch) -> None:
        nonlocal last_position
        last_position = b.position

    res, _ = validate_segment(log, next_base_offset=next_base_offset, deep=False, partition=_partition_name(pdir),
                              on_batch=on_batch)
    for f in res.problems:
        if f.file == str(log):
            raise _log_error(f)
    out = rebuild_reasons(res.findings, log)
    if (not any(f.file == str(index_path) for f in out) and index_path.exists()
            and index_path.stat().st_size == 0 and last_position > index_interval_bytes):
        # Valid for Kafka, but each lookup in the segment then reads it from byte 0.
        out.append(Finding(severity="warning", code=FindingCode.INDEX_EMPTY, file=str(index_path), position=0,
                           partition=_partition_name(pdir),
                           message=f"offset index has no entries although recovery (index.interval.bytes="
                                   f"{index_interval_bytes}) indexes this segment: every lookup scans it from "
                                   "byte 0"))
    for p in (index_path, time_path) if not _staged_rewrite(log) else ():
        tmp = p.with_name(p.name + TMP_SUFFIX)
        if tmp.exists():
            out.append(Finding(severity="warning", code=FindingCode.LEFTOVER_FILE, file=str(tmp),
                               partition=_partition_name(pdir),
                               message="left by an interrupted index rebuild (Kafka deletes it at startup)"))
    return out


def _read_entries(index_type: type[IndexFile], data: bytes, base_offset: int, path: Path) -> int | None:
    """Entries of an existing index file by Kafka's sanity rules, None when it fails them."""
    try:
        return len(index_type.from_bytes(data, base_offset, path=path, strict=True))
    except (CorruptIndexError, ValueError):
        return None


def _install(path: Path, data: bytes, mtime_ns: int, atime_ns: int) -> None:
    """``data`` as ``path``, through ``<path>.cleaned`` (a name Kafka's loader deletes at
    startup), its times set before the fsync (``fileio.durable_replace``)."""
    durable_replace(path, data, tmp_suffix=TMP_SUFFIX, times_ns=(atime_ns, mtime_ns),
                    fault=lambda step: fault_point(f"index-repair-{step}"))


def _build(log: Path, base_offset: int, index_interval_bytes: int) -> tuple[OffsetIndex, TimeIndex, int, int, int]:
    """LogSegment.recover's indexes for ``log``: (offset index, time index, batches, bytes,
    max timestamp). Raises :class:`KafkaFormatError` at the first batch recovery would stop
    at, or an offset the validator rejects (next segment unknown here)."""
    builder = IndexBuilder(base_offset, index_interval_bytes)
    fr = FileRecords(log)
    prev_last = base_offset - 1
    batches = 0
    max_ts = -1
    for b in fr.batches():
        try:
            b.ensure_valid()
        except KafkaFormatError as exc:
            raise exc.located(str(log)) from None
        # As the validator's shallow pass: a legacy wrapper is judged by its last offset.
        first = b.base_offset if b.magic == MAGIC_V2 or not b.is_compressed else None
        for code, message in batch_offset_problems(first, b.last_offset, prev_last, base_offset, None):
            raise CorruptRecordError(f"{message} [{code}]", path=str(log), position=b.position)
        prev_last = max(prev_last, b.last_offset)
        try:
            builder.append(b.position, b.size_in_bytes, b.last_offset, b.max_timestamp)
        except ValueError as exc:  # the builder's own offset rules (Kafka's ensureOffsetInRange)
            raise CorruptRecordError(str(exc), path=str(log), position=b.position) from None
        max_ts = max(max_ts, b.max_timestamp)
        batches += 1
    if fr.trailing_bytes:
        raise TruncatedError(f"{fr.trailing_bytes} bytes after the last complete batch (a truncated tail)",
                             path=str(log), position=fr.valid_bytes)
    offset_index, time_index = builder.finish()
    return offset_index, time_index, batches, fr.valid_bytes, max_ts


def rebuild_segment_indexes(
    partition_dir: str | os.PathLike[str],
    base_offset: int,
    *,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    findings: Sequence[Finding] = (),
) -> IndexRepair:
    """Rebuild the segment's ``.index`` and ``.timeindex`` from its ``.log`` (module
    docstring); ``findings``, the reasons (from :func:`segment_index_problems`), are kept in
    the result. Files whose bytes already are the rebuilt ones are not written."""
    pdir = Path(partition_dir)
    log, index_path, time_path = _paths(pdir, base_offset)
    _refuse_in_flight(pdir, log)
    log_st = log.stat()
    offset_index, time_index, batches, log_bytes, max_ts = _build(log, base_offset, index_interval_bytes)
    repair = IndexRepair(partition_dir=str(pdir), base_offset=base_offset, log_file=log.name, batches=batches,
                         log_bytes=log_bytes, max_timestamp=max_ts, index_interval_bytes=index_interval_bytes,
                         findings=list(findings))
    for path, index in ((index_path, offset_index), (time_path, time_index)):
        data = index.to_bytes()
        try:
            old = path.read_bytes()
            st = path.stat()
        except FileNotFoundError:
            old, st = None, None
        if old == data:
            assert st is not None
            # Already what recovery builds (also after a crash that had renamed it in).
            durable_unlink(path.with_name(path.name + TMP_SUFFIX))
            repair.files.append(IndexFileRepair(file=path.name, action="unchanged", entries_before=len(index),
                                                entries_after=len(index), size_before=len(old),
                                                size_after=len(data), mtime_ns=st.st_mtime_ns))
            continue
        action: Literal["created", "rebuilt"]
        if old is None:
            action, reason, before = "created", "missing", None
            atime_ns, mtime_ns = log_st.st_mtime_ns, log_st.st_mtime_ns
        else:
            assert st is not None
            action = "rebuilt"
            atime_ns, mtime_ns = st.st_atime_ns, st.st_mtime_ns
            before = _read_entries(type(index), old, base_offset, path)
            if before is None:
                reason = "fails Kafka's index sanity rules"
            elif before == 0 and len(index):
                reason = "empty although the log holds " + (
                    "records with timestamps" if isinstance(index, TimeIndex) else "batches to index")
            else:
                reason = f"does not match the log ({before} entries, recovery builds {len(index)})"
        _install(path, data, mtime_ns, atime_ns)
        repair.files.append(IndexFileRepair(file=path.name, action=action, reason=reason, entries_before=before,
                                            entries_after=len(index), size_before=None if old is None else len(old),
                                            size_after=len(data), mtime_ns=mtime_ns))
    # Always: a previous call may have renamed files in and crashed before its directory fsync.
    fsync_dir(pdir)
    return repair


def discard_repair_leftovers(partition_dir: str | os.PathLike[str], base_offset: int) -> list[str]:
    """Remove the temporary files an interrupted :func:`rebuild_segment_indexes` of this segment
    left (``<base>.index.cleaned``, ``<base>.timeindex.cleaned``); their names. Refuses
    (:class:`ReplacementInFlight`) when a rewrite of the segment is staged: those names are then
    its output."""
    pdir = Path(partition_dir)
    log = _paths(pdir, base_offset)[0]
    if _staged_rewrite(log):
        raise ReplacementInFlight(f"{log}: a rewrite of this segment is staged; its .cleaned files are not ours")
    return [p.name for p in durable_unlink(*(p.with_name(p.name + TMP_SUFFIX) for p in _paths(pdir, base_offset)[1:]))]
