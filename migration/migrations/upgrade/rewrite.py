"""Streaming rewrite of one segment into a target message format.

The input ``.log`` is read batch by batch (:class:`FileRecords`), every batch is checked
(``ensure_valid``) and converted, and the output is written incrementally as
``<base>.log.cleaned`` with its ``.index.cleaned`` and ``.timeindex.cleaned`` (and a
``.txnindex.cleaned`` when the input has a transaction index): the first phase of Kafka's
replace protocol (docs/formats.md §4.9). Memory stays bounded by the reader's chunk, one
batch and the index entries (one per ``index.interval.bytes``).

Conversion rules (docs/formats.md §1.7, §1.9, §2.10; docs/formats.md §10.3 item 3):
- target v1: an uncompressed v0 message becomes a v1 message (same offset, key, value;
  timestamp -1, CreateTime); a v0 wrapper becomes a v1 wrapper of the same codec with
  relative inner offsets (holes kept), offset = last inner offset, timestamp = max inner.
  v1 and v2 batches are copied byte for byte.
- target v2: every uncompressed v0/v1 message becomes a single-record v2 batch, every wrapper
  one v2 batch of the same codec (records and offset gaps kept); a LogAppendTime wrapper's
  time applies to its records and the batch is LogAppendTime. v2 batches are copied.
- ``stamp_v0_ms``: v0 messages get this estimated append time as LogAppendTime instead of -1.
Output segments roll when ``segment_bytes`` would be exceeded or a relative offset would not
fit int32 (KAFKA-6264); a converted batch above ``max_message_bytes`` is split in halves.
"""

from __future__ import annotations

import bisect
import os
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from migration.formats import compression as codecs
from migration.formats import core, names
from migration.formats.digest import RecordDigest, RecordDigester
from migration.formats.errors import CorruptRecordError, KafkaFormatError, TruncatedError
from migration.formats.file_records import Batch, FileRecords
from migration.formats.fileio import BackgroundWriter, read_bytes, write_and_fsync
from migration.formats.index_builder import IndexBuilder
from migration.formats.layout import KEY_SIZE_LENGTH
from migration.formats.legacy import (
    ATTRIBUTE_TIMESTAMP_TYPE_MASK,
    LegacyBatch,
    ScanEntry,
    encode_message,
    v0_entries_to_v1,
)
from migration.formats.model import MAGIC_V0, MAGIC_V1, MAGIC_V2, NO_TIMESTAMP, Record, TimestampType
from migration.formats.offset_index import OffsetIndex
from migration.formats.record_batch import RecordBatch, build_record_batch, build_single_record_batch
from migration.formats.time_index import TimeIndex
from migration.formats.transaction_index import TransactionIndex
from migration.logdir.findings import FindingCode
from migration.logdir.validate import batch_offset_problems
from migration.migrations.common.checksum import (
    CURRENT_FILE_CHECKSUM,
    FileChecksumAlgorithm,
    file_hasher,
    file_matches,
    from_version_1,
)
from migration.runtime.faults import fault_point, fault_points

try:  # this module's conversion and index rules compiled (_crewrite.pyx), built with the record core
    from migration.migrations.upgrade._crewrite import RewriteWalker
    # a segment walker that converts what it judges: core.segment_walker(walker_class=REWRITE_WALKER,
    # target_magic=..., ...) makes one on the compiled core
    REWRITE_WALKER: type[RewriteWalker] | None = RewriteWalker
except ImportError:  # not built: the loop of rewrite_segment converts every batch
    REWRITE_WALKER = None

INT32_MAX = 2**31 - 1
_T = TypeVar("_T")
# The writer thread's buffers, three per output segment (why 1 MiB: fileio.BackgroundWriter).
WRITE_BUFFER_SIZE = 1 << 20
WRITEBACK_BYTES = 8 << 20
WRITEBACK_FIRST_BYTES = 1 << 20
DEFAULT_SEGMENT_BYTES = 1 << 30
DEFAULT_MAX_MESSAGE_BYTES = 1048588


@dataclass
class RewriteSpec:
    target_magic: int
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    index_interval_bytes: int = 4096
    stamp_v0_ms: int | None = None
    leader_epochs: Sequence[tuple[int, int]] = ()  # (epoch, start offset), increasing
    next_base_offset: int | None = None  # of the partition's next segment: offsets stay below it
    _epoch_starts: list[int] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.target_magic not in (MAGIC_V1, MAGIC_V2):
            raise ValueError(f"target magic must be 1 or 2, not {self.target_magic}")
        self._epoch_starts = [start for _, start in self.leader_epochs]

    def leader_epoch(self, base_offset: int) -> int:
        """The epoch covering ``base_offset`` in the leader-epoch-checkpoint, else -1."""
        k = bisect.bisect_right(self._epoch_starts, base_offset) - 1
        return self.leader_epochs[k][0] if k >= 0 else -1


class OutputSegment(BaseModel):
    base_offset: int
    files: list[str] = Field(description="Final file names (without the .cleaned suffix)")
    size: int = 0
    batches: int = 0
    bytes_by_magic: dict[str, int] = Field(default_factory=dict)
    last_offset: int | None = None
    log_checksum: str = Field(default="", description="Of the .log, by checksum_algorithm (common.checksum)")
    checksum_algorithm: FileChecksumAlgorithm = Field(description="sha256 for a version-1 journal's ``log_sha256``")

    @model_validator(mode="before")
    @classmethod
    def _version_1(cls, data: Any) -> Any:
        return from_version_1(data, "log_sha256", "log_checksum")

    def matches(self, path: Path) -> bool:
        """``path`` is this output's .log as it was written: same size and checksum."""
        return file_matches(path, self.size, self.log_checksum, self.checksum_algorithm)


class PrefixState(BaseModel):
    """Where the conversion of a segment's first bytes stopped, all of them in one output:
    what a later conversion of the same segment grown since needs to carry on after them
    (:func:`rewrite_segment`'s ``resume``) and write what a conversion of the whole would. The
    output's offset and time index entries are its files' (the time index's first
    ``time_entries``: closing the output adds the segment's max timestamp)."""

    model_config = ConfigDict(extra="forbid")

    input_bytes: int = Field(description="The input's bytes converted: whole batches from byte 0")
    input_batches: int
    input_bytes_by_magic: dict[str, int] = Field(default_factory=dict)
    input_last_offset: int = Field(description="The highest offset of those batches (the offset checks go on from it)")
    output: OutputSegment = Field(description="The output those bytes made (its .log's size, batches and checksum)")
    valid_bytes: int = Field(description="The index builder's state before its close (IndexBuilder.state)")
    last_index_entry: int
    max_timestamp: int
    offset_of_max_timestamp: int
    offset_entries: int = Field(description="The offset index's entries")
    time_entries: int = Field(description="The time index's entries before its close")
    split_batches: int = Field(default=0, description="Converted batches split for max.message.bytes so far")
    warnings: list[str] = Field(default_factory=list, description="The conversion's warnings so far")


class RewriteResult(BaseModel):
    outputs: list[OutputSegment] = Field(default_factory=list)
    bytes_before: int = 0
    bytes_by_magic_before: dict[str, int] = Field(default_factory=dict)
    batches_before: int = 0
    digest_before: RecordDigest
    split_batches: int = 0
    warnings: list[str] = Field(default_factory=list)
    prefix_state: PrefixState | None = Field(default=None, description="Where a conversion of these bytes and "
                                             "more may carry on from; None: more than one output")


class StagedPrefixChanged(Exception):
    """The staged output of a segment's first bytes is not what its state says (gone, or other
    bytes): a conversion of the whole is needed instead."""


class Piece(NamedTuple):
    """One converted batch, ready to append."""

    data: bytes | memoryview
    first_offset: int
    last_offset: int
    max_timestamp: int
    magic: int


def _label(magic: int) -> str:
    return f"v{magic}"


# ---------------------------------------------------------------- conversion


class Converter:
    """Turns input batches into output pieces for one target format."""

    def __init__(self, spec: RewriteSpec, prefix: PrefixState | None = None) -> None:
        self.spec = spec
        # a conversion carried on from an earlier one's (Resume) counts what that one did too
        self.split_batches = prefix.split_batches if prefix is not None else 0
        self.warnings: list[str] = list(prefix.warnings) if prefix is not None else []

    def convert(self, b: Batch) -> Iterator[Piece]:
        spec = self.spec
        if b.magic >= spec.target_magic:
            # Already in (or above) the target format: the raw bytes, never decoded again.
            first = b.base_offset if isinstance(b, RecordBatch) else b.scan()[1][0][0]
            yield Piece(b.raw_bytes(), first, b.last_offset, b.max_timestamp, b.magic)
            return
        assert isinstance(b, LegacyBatch)
        if spec.target_magic == MAGIC_V1:
            yield from self._v0_to_v1(b)
        else:
            yield from self._legacy_to_v2(b)

    # -- v0 -> v1
    def _v0_stamp(self) -> tuple[int, int]:
        """(attributes timestamp bit, timestamp) a v0 message gets."""
        if self.spec.stamp_v0_ms is None:
            return 0, NO_TIMESTAMP
        return ATTRIBUTE_TIMESTAMP_TYPE_MASK, self.spec.stamp_v0_ms

    def _v0_to_v1(self, b: LegacyBatch) -> Iterator[Piece]:
        ts_bit, ts = self._v0_stamp()
        if not b.is_compressed:
            yield Piece(b.upconvert_to_v1(b.offset, ts_bit, ts), b.offset, b.offset, ts, MAGIC_V1)
            return
        codec = b.compression
        data, entries = b.scan()  # decompressed and checked once (also for the digest)

        def build(items: Sequence[ScanEntry]) -> bytes:
            # Relative inner offsets (KIP-31): holes left by compaction are kept.
            payload = codecs.compress(codec, v0_entries_to_v1(data, items, items[0][0], ts_bit, ts), MAGIC_V1)
            return encode_message(items[-1][0], MAGIC_V1, int(codec) | ts_bit, ts, None, payload)

        for items, out in self._fit(entries, build):
            yield Piece(out, items[0][0], items[-1][0], ts, MAGIC_V1)

    # -- v0/v1 -> v2
    def _legacy_to_v2(self, b: LegacyBatch) -> Iterator[Piece]:
        spec = self.spec
        if b.magic == MAGIC_V0:
            lat = spec.stamp_v0_ms is not None
            ts = spec.stamp_v0_ms if spec.stamp_v0_ms is not None else NO_TIMESTAMP
        else:
            lat = b.timestamp_type is TimestampType.LOG_APPEND_TIME
            ts = b.timestamp  # the wrapper's time (LogAppendTime) or the message's own
        if not b.is_compressed:
            data, ((off, rts, kp, klen, vlen, vend, _),) = b.scan()
            if b.magic == MAGIC_V0 and lat:
                rts = ts
            out = build_single_record_batch(
                off, rts, None if klen < 0 else data[kp + KEY_SIZE_LENGTH : kp + KEY_SIZE_LENGTH + klen],
                None if vlen < 0 else data[vend - vlen : vend], log_append_time=lat,
                partition_leader_epoch=spec.leader_epoch(off),
            )
            yield Piece(out, off, off, rts, MAGIC_V2)
            return
        codec = b.compression
        records = list(b.records())
        if b.magic == MAGIC_V0 and lat:
            records = [r._replace(timestamp=ts) for r in records]

        def build(recs: Sequence[Record]) -> bytes:
            return build_record_batch(
                recs,
                compression=codec,  # kept even where compression does not pay, as Kafka's cleaner does
                timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
                max_timestamp=ts if lat else None,
                partition_leader_epoch=spec.leader_epoch(recs[0].offset),
            )

        for recs, out in self._fit(records, build):
            max_ts = ts if lat else max(r.timestamp for r in recs)
            yield Piece(out, recs[0].offset, recs[-1].offset, max_ts, MAGIC_V2)

    def _fit(self, items: Sequence[_T], build: Callable[[Sequence[_T]], bytes]) -> Iterator[tuple[Sequence[_T], bytes]]:
        """Build one batch of ``items``; if it exceeds max.message.bytes, split it in halves."""
        data = build(items)
        if len(data) <= self.spec.max_message_bytes:
            yield items, data
            return
        if len(items) == 1:
            self.warnings.append(
                f"a single record of {len(data)} bytes exceeds max.message.bytes "
                f"({self.spec.max_message_bytes}); written alone"
            )
            yield items, data
            return
        self.split_batches += 1
        half = len(items) // 2
        yield from self._fit(items[:half], build)
        yield from self._fit(items[half:], build)


# ---------------------------------------------------------------- output


class _SegmentWriter:
    """One output segment being written as ``.cleaned`` files. The ``.log`` is written, hashed
    and sent on to the disk by a thread of its own (fileio.BackgroundWriter) while the rewrite
    goes on converting, so the copies into the page cache run on another core (on this
    project's machine they took a sixth of the whole cluster's upgrade: docs/benchmarks.md,
    "Fresh pages")."""

    def __init__(self, directory: Path, base_offset: int, spec: RewriteSpec) -> None:
        self.directory = directory
        self.base_offset = base_offset
        prefix = names.filename_prefix_from_offset(base_offset)
        self.log_name = prefix + names.LOG_FILE_SUFFIX
        self.index_name = prefix + names.INDEX_FILE_SUFFIX
        self.time_index_name = prefix + names.TIME_INDEX_FILE_SUFFIX
        self.txn_index_name = prefix + names.TXN_INDEX_FILE_SUFFIX
        self.path = directory / (self.log_name + names.CLEANED_FILE_SUFFIX)
        self._checksum = file_hasher(CURRENT_FILE_CHECKSUM)
        # The disk starts writing each step as soon as it is written (fileio.start_writeback),
        # so that the fsync at close waits for the last step, not the whole segment.
        self._file = BackgroundWriter(self.path, chunk_bytes=WRITE_BUFFER_SIZE, first_step=WRITEBACK_FIRST_BYTES,
                                      max_step=WRITEBACK_BYTES, hasher=self._checksum)
        self.indexes = IndexBuilder(base_offset, spec.index_interval_bytes)
        # Plain counters on the hot path; the pydantic document is filled in at close.
        self.size = 0
        self.batches = 0
        self.bytes_by_magic = [0, 0, 0]
        self.last_offset: int | None = None
        # the index builder's state and entry counts just before the close (PrefixState)
        self.open_state: tuple[int, int, int, int, int, int] | None = None

    def append(self, piece: Piece) -> None:
        data = piece.data
        n = len(data)
        self.indexes.append(self.size, n, piece.last_offset, piece.max_timestamp)
        self._file.write(data)
        self.size += n
        self.batches += 1
        self.bytes_by_magic[piece.magic] += n
        self.last_offset = piece.last_offset

    def append_run(self, run: tuple[Any, ...]) -> None:
        """Many pieces at once, converted and indexed by the compiled core's segment walker
        (``SegmentWalker.write_output``, opened at :meth:`IndexBuilder.state`); ``run``'s bytes
        are a view of the walker's buffer, valid only during this call (the writer copies them)."""
        data, batches, last_offset, by_magic, offset_entries, time_entries, *index_state = run
        self.indexes.absorb(offset_entries, time_entries, *index_state)
        self._file.write(data)
        self.size += len(data)
        self.batches += batches
        for magic, n in enumerate(by_magic):
            self.bytes_by_magic[magic] += n
        self.last_offset = last_offset

    def discard(self) -> None:
        self._file.abort()
        self.path.unlink(missing_ok=True)

    def begin_with(self, prefix: Resume) -> None:
        """Begin with the output of an earlier conversion of the input's first bytes, as if this
        writer had written it: its .log copied in (hashed on the way, and checked against the
        checksum it had), its index entries and the index builder's state taken back. Raises
        :class:`StagedPrefixChanged` when the staged files are gone or not the bytes written."""
        state, staged = prefix.state, prefix.files_dir
        out = state.output
        log = staged / (self.log_name + names.CLEANED_FILE_SUFFIX)
        check = file_hasher(out.checksum_algorithm)
        copied = 0
        try:
            with open(log, "rb", buffering=0) as f:
                while chunk := f.read(WRITE_BUFFER_SIZE):
                    self._file.write(chunk)
                    check.update(chunk)
                    copied += len(chunk)
            offsets = OffsetIndex.from_bytes(read_bytes(staged / (self.index_name + names.CLEANED_FILE_SUFFIX)),
                                             self.base_offset, strict=False).pairs()[:state.offset_entries]
            times = TimeIndex.from_bytes(read_bytes(staged / (self.time_index_name + names.CLEANED_FILE_SUFFIX)),
                                         self.base_offset, strict=False).pairs()[:state.time_entries]
        except FileNotFoundError as exc:
            raise StagedPrefixChanged(f"{exc.filename}: gone") from None
        if out.files[0] != self.log_name or copied != out.size or check.hexdigest() != out.log_checksum or \
                (len(offsets), len(times)) != (state.offset_entries, state.time_entries):
            raise StagedPrefixChanged(f"{log}: not the staged prefix's bytes ({copied} bytes, {len(offsets)} and "
                                      f"{len(times)} index entries)")
        self.indexes.absorb(array("q", [v for e in offsets for v in e]).tobytes(),
                            array("q", [v for e in times for v in e]).tobytes(), state.valid_bytes,
                            state.last_index_entry, state.max_timestamp, state.offset_of_max_timestamp)
        self.size = out.size
        self.batches = out.batches
        for label, n in out.bytes_by_magic.items():
            self.bytes_by_magic[int(label[1:])] += n
        self.last_offset = out.last_offset

    def close(self, mtime_ns: int) -> OutputSegment:
        # Kafka falls back to the .log mtime for retention when records carry no timestamp: each
        # file gets the input's, set before its fsync.
        times = (mtime_ns, mtime_ns)
        self._file.close(times_ns=times)  # written, hashed and fsynced
        # where a conversion of more of the input would carry on (PrefixState): before the close
        self.open_state = (*self.indexes.state()[:4], len(self.indexes.offset_index), len(self.indexes.time_index))
        offset_index, time_index = self.indexes.finish()
        index_path = self.directory / (self.index_name + names.CLEANED_FILE_SUFFIX)
        time_path = self.directory / (self.time_index_name + names.CLEANED_FILE_SUFFIX)
        write_and_fsync(index_path, offset_index.to_bytes(), exclusive=False, times_ns=times)
        write_and_fsync(time_path, time_index.to_bytes(), exclusive=False, times_ns=times)
        return OutputSegment(
            base_offset=self.base_offset,
            files=[self.log_name, self.index_name, self.time_index_name],
            size=self.size,
            batches=self.batches,
            bytes_by_magic={_label(m): n for m, n in enumerate(self.bytes_by_magic) if n},
            last_offset=self.last_offset,
            log_checksum=self._checksum.hexdigest(),
            checksum_algorithm=CURRENT_FILE_CHECKSUM,
        )


class _SplittingWriter:
    """Appends pieces to output segments, rolling as Kafka would (size, int32 offsets)."""

    def __init__(self, directory: Path, base_offset: int, spec: RewriteSpec, mtime_ns: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.spec = spec
        self.mtime_ns = mtime_ns
        self.current: _SegmentWriter | None = None
        self.outputs: list[OutputSegment] = []
        self.last: _SegmentWriter | None = None  # the last output's writer, once closed

    def append(self, piece: Piece) -> None:
        cur = self.current
        if cur is None:
            # The first output keeps the input's name: it replaces it in place.
            base = self.base_offset if piece.last_offset - self.base_offset <= INT32_MAX else piece.first_offset
            cur = self.current = _SegmentWriter(self.directory, base, self.spec)
        elif cur.size and (
            cur.size + len(piece.data) > self.spec.segment_bytes or piece.last_offset - cur.base_offset > INT32_MAX
        ):
            self.outputs.append(cur.close(self.mtime_ns))
            cur = self.current = _SegmentWriter(self.directory, piece.first_offset, self.spec)
        cur.append(piece)

    def close(self) -> list[OutputSegment]:
        if self.current is None:
            # An input without batches still needs its replacement (an empty segment).
            self.current = _SegmentWriter(self.directory, self.base_offset, self.spec)
        self.outputs.append(self.current.close(self.mtime_ns))
        self.last, self.current = self.current, None
        return self.outputs

    def abort(self) -> None:
        if self.current is not None:
            self.current.discard()
            self.current = None


def _write_txn_indexes(directory: Path, txn_path: Path, outputs: list[OutputSegment]) -> None:
    """Keep the transaction index: copied as is (offsets do not change), or, when the segment
    was split, each aborted transaction goes with the segment holding its marker."""
    st = txn_path.stat()
    if len(outputs) == 1:
        name = outputs[0].files[0].replace(names.LOG_FILE_SUFFIX, names.TXN_INDEX_FILE_SUFFIX)
        target = directory / (name + names.CLEANED_FILE_SUFFIX)
        write_and_fsync(target, txn_path.read_bytes(), exclusive=False, times_ns=(st.st_atime_ns, st.st_mtime_ns))
        outputs[0].files.append(name)
        return
    txn = TransactionIndex.read(txn_path, strict=False)
    bases = [o.base_offset for o in outputs]
    per: dict[int, TransactionIndex] = {}
    for entry in txn.entries:
        k = max(0, bisect.bisect_right(bases, entry.last_offset) - 1)
        per.setdefault(k, TransactionIndex(bases[k])).append(entry)
    for k, out in enumerate(outputs):
        if k not in per and k != 0:
            continue
        # The first output always gets one, so every file of the input has its replacement.
        name = names.txn_index_file_name(out.base_offset)
        target = directory / (name + names.CLEANED_FILE_SUFFIX)
        write_and_fsync(target, per[k].to_bytes() if k in per else b"", exclusive=False,
                        times_ns=(st.st_atime_ns, st.st_mtime_ns))
        out.files.append(name)


def cleaned_paths(directory: Path, outputs: list[OutputSegment]) -> list[Path]:
    return [directory / (f + names.CLEANED_FILE_SUFFIX) for o in outputs for f in o.files]


def _check_offsets(b: Batch, span: tuple[int, int] | None, prev_last: int, base: int, next_base: int | None,
                   path: Path) -> int:
    """The validator's offset rules for data about to be rewritten (the prepare step checked
    only what needs no decompression); returns the last offset so far. Offsets beyond int32
    of the base are not an error here: the rewrite splits the segment."""
    first, last = b.base_offset, b.last_offset
    for code, message in batch_offset_problems(first, last, prev_last, base, next_base,
                                               span if b.magic == MAGIC_V2 else None):
        if code != FindingCode.OFFSET_OVERFLOW:
            raise CorruptRecordError(message, path=str(path), position=b.position)
    return max(prev_last, last)  # as the validator carries it


def _carry_on(walker: Any, prev_last: int) -> None:
    """The offset the caller's loop reached, to the walker; beyond int64 (a corrupt v2 batch's
    base offset plus delta) the walker's part ends and the loop carries on alone."""
    try:
        walker.prev_last = prev_last
    except OverflowError:
        walker.enabled = False


def add_walker_bytes(by_magic: dict[str, int], walker: Any) -> None:
    """The bytes per format a segment walker consumed, added to a ``{"v0": n, ...}`` count."""
    for magic, n in enumerate(walker.bytes_by_magic()):
        if n:
            by_magic[_label(magic)] = by_magic.get(_label(magic), 0) + n


class Resume(NamedTuple):
    """An earlier conversion of a segment's first bytes (a prestage's, of the segment then
    active) to carry on from: where it stopped, and the directory of its ``.cleaned`` files."""

    state: PrefixState
    files_dir: Path


def rewrite_segment(log_path: str | os.PathLike[str], spec: RewriteSpec, *,
                    out_dir: str | os.PathLike[str] | None = None, torn_tail_ok: bool = False,
                    resume: Resume | None = None) -> RewriteResult:
    """Convert one segment into ``.cleaned`` output segments next to it, or in ``out_dir`` (a
    prestage's stage: upgrade/stage.py), all fsynced, mtimes of the input restored. On any
    error the ``.cleaned`` files written so far are removed and the error is raised: the input
    is never touched.

    ``torn_tail_ok``: bytes after the last complete batch end the input instead of failing it
    (a copy of an active segment the broker was appending to); the result's ``prefix_state``
    then says where a later conversion of the segment may carry on. ``resume``: the input's first
    ``resume.state.input_bytes`` were converted before into the files ``resume`` names (the
    caller proved they are the same bytes); their output is copied in and only the bytes after
    them are converted (:class:`StagedPrefixChanged` when those files are not what they were).
    The result is the same files and counts a conversion of the whole would write;
    the input's record digest still covers every record: the first bytes are read, checked and
    digested again, which costs a fraction of converting them.

    On the compiled record core a :class:`SegmentWalker` takes runs of regular batches whole:
    it checks, digests, converts and indexes them in C exactly as the loop below does batch by
    batch, and stops at anything else (a wrapper to recompress, a roll of the output, a batch
    that might be corrupt), which the loop then handles; errors and outputs are the same
    (tests/formats/test_core_differential.py)."""
    log_path = Path(log_path)
    directory = log_path.parent
    out = Path(out_dir) if out_dir is not None else directory
    base = names.offset_from_file_name(log_path.name)
    st = log_path.stat()
    converter = Converter(spec, resume.state if resume is not None else None)
    writer = _SplittingWriter(out, base, spec, st.st_mtime_ns)
    digester = RecordDigester()
    by_magic: dict[str, int] = {}
    batches = 0
    fr = FileRecords(log_path)
    prev_last = base - 1
    start = 0
    if resume is not None:
        state = resume.state
        first, _ = digest_into(digester, log_path, base, end=state.input_bytes)
        if first.valid_bytes != state.input_bytes:
            raise TruncatedError(f"the first {state.input_bytes} bytes, converted before, end inside a batch",
                                 path=str(log_path), position=first.valid_bytes)
        start, prev_last, batches = state.input_bytes, state.input_last_offset, state.input_batches
        by_magic = dict(state.input_bytes_by_magic)
    walker: Any = None if REWRITE_WALKER is None else core.segment_walker(
        deep=True, base_offset=base, next_base_offset=spec.next_base_offset, walker_class=REWRITE_WALKER,
        digest=True, target_magic=spec.target_magic, stamp_v0=spec.stamp_v0_ms, segment_bytes=spec.segment_bytes,
        max_message_bytes=spec.max_message_bytes,
        index_interval_bytes=spec.index_interval_bytes,
        output_leader_epochs=spec.leader_epochs if spec.target_magic == MAGIC_V2 else ())

    def bulk(buf: bytes | memoryview, at: int, file_pos: int) -> int:
        cur = writer.current
        if cur is None or not walker.enabled:
            return at  # the first piece names the first output: the loop's
        try:
            walker.open_output(cur.base_offset, *cur.indexes.state())
        except OverflowError:  # an index state beyond int64 (a corrupt batch's offsets): the loop's alone
            walker.enabled = False
            return at
        moved: int = walker.advance(buf, at, file_pos)
        if moved != at:
            walker.feed_digest(digester)  # the walker's digest bytes, read in place
            before = cur.batches
            walker.write_output(cur.append_run)  # the output bytes written and hashed in place
            fault_points("write-batch", cur.batches - before)  # one pass per batch, as in the loop
        return moved

    try:
        if resume is not None:
            writer.current = _SegmentWriter(out, base, spec)
            writer.current.begin_with(resume)
            if walker is not None:
                _carry_on(walker, prev_last)
        for b in fr.batches(start, skip=None if walker is None else bulk):
            if walker is not None and walker.enabled:
                prev_last = walker.prev_last  # the batches it consumed moved it
            b.ensure_valid()
            # From the raw bytes; the same scan checks every inner message and record and
            # serves the conversion: this pass is the deep validation of the segment.
            span = digester.add_batch(b)
            prev_last = _check_offsets(b, span, prev_last, base, spec.next_base_offset, log_path)
            batches += 1
            label = _label(b.magic)
            by_magic[label] = by_magic.get(label, 0) + b.size_in_bytes
            for piece in converter.convert(b):
                writer.append(piece)
                fault_point("write-batch")
            if walker is not None:
                _carry_on(walker, prev_last)
        if walker is not None:
            batches += walker.batches
            add_walker_bytes(by_magic, walker)
            if walker.enabled:
                prev_last = walker.prev_last  # the batches it consumed last moved it
        if fr.trailing_bytes and not torn_tail_ok:
            raise TruncatedError(
                f"{fr.trailing_bytes} trailing bytes after the last complete batch",
                path=str(log_path),
                position=fr.valid_bytes,
            )
        outputs = writer.close()
        prefix = names.filename_prefix_from_offset(base)
        txn_path = directory / (prefix + names.TXN_INDEX_FILE_SUFFIX)
        if txn_path.exists():
            _write_txn_indexes(out, txn_path, outputs)
    except BaseException:
        writer.abort()
        for o in writer.outputs:
            for p in cleaned_paths(out, [o]):
                p.unlink(missing_ok=True)
        raise
    return RewriteResult(
        outputs=outputs,
        bytes_before=fr.valid_bytes,
        bytes_by_magic_before=by_magic,
        batches_before=batches,
        digest_before=digester.result(),
        split_batches=converter.split_batches,
        warnings=converter.warnings,
        prefix_state=_prefix_state(writer, converter, outputs, fr.valid_bytes, batches, by_magic, prev_last)
        if torn_tail_ok else None,
    )


def _prefix_state(writer: _SplittingWriter, converter: Converter, outputs: list[OutputSegment], input_bytes: int,
                  batches: int, by_magic: dict[str, int], last_offset: int) -> PrefixState | None:
    """Where a conversion of this input grown since may carry on: with one output only (a
    rolled output is closed for good), and batches in it."""
    last = writer.last
    if len(outputs) != 1 or last is None or last.open_state is None or not batches:
        return None
    valid_bytes, last_index_entry, max_timestamp, offset_of_max_timestamp, offset_entries, time_entries = \
        last.open_state
    return PrefixState(input_bytes=input_bytes, input_batches=batches, input_bytes_by_magic=dict(by_magic),
                       input_last_offset=last_offset, output=outputs[0].model_copy(deep=True),
                       valid_bytes=valid_bytes, last_index_entry=last_index_entry, max_timestamp=max_timestamp,
                       offset_of_max_timestamp=offset_of_max_timestamp, offset_entries=offset_entries,
                       time_entries=time_entries, split_batches=converter.split_batches,
                       warnings=list(converter.warnings))


def digest_into(digester: RecordDigester, path: str | os.PathLike[str], base_offset: int, *,
                end: int | None = None) -> tuple[FileRecords, dict[str, int]]:
    """Feed a segment's logical records (those before byte ``end``, if given) to ``digester``,
    every batch checked (CRCs, framing, records); returns the reader (its ``valid_bytes`` and
    ``trailing_bytes``) and the segment's bytes per format.
    On the compiled core a :class:`SegmentWalker` digests runs of regular batches in C; the
    loop takes the rest, with the same errors."""
    by_magic: dict[str, int] = {}
    fr = FileRecords(path)
    walker = core.segment_walker(deep=True, base_offset=base_offset, next_base_offset=None, digest=True)

    def bulk(buf: bytes | memoryview, at: int, file_pos: int) -> int:
        moved: int = walker.advance(buf, at, file_pos)
        if moved != at:
            walker.feed_digest(digester)  # the walker's digest bytes, read in place
        return moved

    for b in fr.batches(end=end, skip=None if walker is None else bulk):
        b.ensure_valid()
        digester.add_batch(b)
        label = _label(b.magic)
        by_magic[label] = by_magic.get(label, 0) + b.size_in_bytes
        if walker is not None:
            # The walker checks offsets only to vouch for a run; the digest takes any order.
            _carry_on(walker, max(walker.prev_last, b.last_offset))
    if walker is not None:
        add_walker_bytes(by_magic, walker)
    return fr, by_magic


def digest_outputs(directory: Path, outputs: list[OutputSegment]) -> RecordDigest:
    """One digest over the ``.cleaned`` output segments in ``directory``, in offset order; every
    batch is CRC-checked: the proof a rewrite's output holds its input's records."""
    digester = RecordDigester()
    for o in outputs:
        path = directory / (o.files[0] + names.CLEANED_FILE_SUFFIX)
        fr, _ = digest_into(digester, path, o.base_offset)
        if fr.trailing_bytes:
            raise TruncatedError("output segment has trailing bytes", path=str(path), position=fr.valid_bytes)
    return digester.result()


def digest_log(path: str | os.PathLike[str]) -> tuple[RecordDigest, dict[str, int]]:
    """Digest of a segment's logical records (every batch checked), and its bytes per format."""
    digester = RecordDigester()
    fr, by_magic = digest_into(digester, path, _base_offset_or_zero(Path(path)))
    if fr.trailing_bytes:
        raise TruncatedError(f"{fr.trailing_bytes} trailing bytes", path=str(path), position=fr.valid_bytes)
    return digester.result(), by_magic


def _base_offset_or_zero(path: Path) -> int:
    """The base offset a segment's name gives (0 for another name: the walker's offset rules
    then only decide which batches it vouches for, never the digest)."""
    try:
        return names.offset_from_file_name(path.name)
    except KafkaFormatError:
        return 0

