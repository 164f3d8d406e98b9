"""Deep reads shared by the segment targets: every accessor of a batch, inner messages and
records, with cross-checks between the project's two readers of the same bytes (the streaming
``FileRecords`` and the in-memory ``iterate_batches``; the fast digest walk and the careful
record decoder; a wrapper's fast scan and its careful inner parse; the record digest from raw
bytes and from decoded records). A disagreement is a defect as much as a crash: the validator
trusts one and the rewrite the other."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from fuzz.harness import attempt, outcome
from migration.formats.control_records import EndTransactionMarker, decode_control_record
from migration.formats.digest import RecordDigester, digest_records
from migration.formats.errors import KafkaFormatError
from migration.formats.file_records import Batch, FileRecords, iterate_batches, read_batches
from migration.formats.legacy import LegacyBatch
from migration.formats.model import MAGIC_V0, Record
from migration.formats.record_batch import RecordBatch

_SCRATCH: Path | None = None


def scratch_dir() -> Path:
    """A directory of this process for the files a target writes (removed at exit)."""
    global _SCRATCH
    if _SCRATCH is None:
        _SCRATCH = Path(tempfile.mkdtemp(prefix="kmigrate-fuzz-"))
        atexit.register(shutil.rmtree, _SCRATCH, True)
    return _SCRATCH


def _collect(batches: Iterable[Batch]) -> tuple[list[Batch], KafkaFormatError | None]:
    out: list[Batch] = []
    try:
        for b in batches:
            out.append(b)
    except KafkaFormatError as exc:
        return out, exc
    return out, None


def _error_key(exc: KafkaFormatError | None) -> tuple[object, ...] | None:
    return None if exc is None else (type(exc), exc.position, exc.message)


def read_segment(data: bytes, *, name: str = "00000000000000000000.log") -> None:
    """Read ``data`` as a segment file: streaming with a tiny and the default chunk size, and in
    memory; the three must agree on batches, error and trailing bytes; then read every batch
    deeply."""
    path = scratch_dir() / name
    path.write_bytes(data)
    in_memory, mem_err = _collect(iterate_batches(data, path=str(path)))
    expected = [b.position for b in in_memory]
    for chunk in (1 + data[-1] % 64 if data else 1, 8 * 1024 * 1024):
        fr = FileRecords(path, chunk_size=chunk)
        streamed, err = _collect(fr.batches())
        assert [b.position for b in streamed] == expected, f"chunk size {chunk}: FileRecords disagrees"
        assert _error_key(err) == _error_key(mem_err), f"chunk size {chunk}: {err!r} vs {mem_err!r}"
        if err is None:
            end = expected[-1] + in_memory[-1].size_in_bytes if expected else 0
            assert (fr.valid_bytes, fr.trailing_bytes) == (end, len(data) - end)
    attempt(read_batches, path, strict=True)
    for b in in_memory:
        read_batch(b)


def read_batch(b: Batch) -> None:
    if isinstance(b, RecordBatch):
        read_v2_batch(b)
    else:
        read_legacy_batch(b)


def read_legacy_batch(b: LegacyBatch) -> None:
    _ = (b.size_in_bytes, b.is_compressed, b.last_offset, b.max_timestamp, b.is_valid(), b.raw_bytes())
    attempt(b.ensure_valid)
    codec = attempt(lambda: b.compression)
    attempt(lambda: b.timestamp_type)
    attempt(lambda: (b.key, b.value))
    scan, scan_err = outcome(b.scan)
    inner, inner_err = outcome(b.inner)
    if codec:
        # The fast scan must accept exactly what the careful parser accepts, with the same offsets.
        assert (scan_err is None) == (inner_err is None), f"scan: {scan_err!r}, inner: {inner_err!r}"
        if scan is not None and inner is not None:
            assert [e[0] for e in scan[1]] == [m.offset for m in inner]
    for m in inner or ():
        attempt(m.ensure_valid)
        attempt(lambda m=m: (m.key, m.value))
    records = attempt(lambda: list(b.records()))
    attempt(lambda: (b.base_offset, b.record_count))
    attempt(b.digest_parts, [], [])
    if records is not None:
        check_digests(b, records)
    if b.magic == MAGIC_V0 and not b.is_compressed and scan is not None:
        b.upconvert_to_v1(b.offset, 0, 0)


def check_digests(b: Batch, records: list[Record]) -> None:
    """Records a reader accepts digest (migration/formats/digest.py: what proves a rewrite kept every
    record) the same from the raw batch as from the decoded records."""
    fast = RecordDigester()
    fast.add_batch(b)
    assert fast.result() == digest_records(records)


def read_v2_batch(b: RecordBatch) -> None:
    _ = (b.size_in_bytes, b.last_offset, b.next_offset, b.is_compressed, b.timestamp_type, b.is_transactional,
         b.is_control, b.has_delete_horizon, b.has_producer_id, b.last_sequence, b.is_valid(), b.raw_bytes())
    attempt(b.ensure_valid)
    attempt(lambda: b.compression)
    parts: list[bytes | memoryview] = []
    stamps: list[int] = []
    span, span_err = outcome(b.digest_parts, parts, stamps)
    records, records_err = outcome(b.records)
    # The validator checks records through the digest walk, the rewrite through records():
    # both must accept and reject the same batches and see the same offsets and timestamps.
    assert (span_err is None) == (records_err is None), f"digest: {span_err!r}, records: {records_err!r}"
    if records is not None:
        assert span == ((records[0].offset, records[-1].offset) if records else None)
        assert stamps == [r.timestamp for r in records]
        check_digests(b, records)
        if b.is_control:
            for r in records:
                attempt(decode_control_record, r.key, r.value)
                attempt(decode_control_record, r.key, r.value, strict=False)
                attempt(EndTransactionMarker.decode, r.key, r.value)
