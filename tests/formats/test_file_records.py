from __future__ import annotations

import pytest

from migration.formats.errors import CorruptRecordError, TruncatedError
from migration.formats.file_records import FileRecords, iterate_batches, read_batches
from migration.formats.legacy import build_messages, build_wrapper
from migration.formats.model import Compression, Record
from migration.formats.record_batch import build_record_batch

# Every test here runs on each record core (compiled and pure Python).
pytestmark = pytest.mark.usefixtures("record_core")


def _mixed_segment() -> tuple[bytes, list[Record]]:
    recs = [Record(i, 1000 + i, b"k%d" % i, b"v" * (i * 37 % 500)) for i in range(40)]
    data = (build_messages(recs[:10], magic=0) + build_wrapper(recs[10:20], magic=1, compression=Compression.GZIP)
            + build_record_batch(recs[20:30], compression=Compression.LZ4) + build_messages(recs[30:], magic=1))
    return data, recs


@pytest.mark.parametrize("chunk", [32, 100, 4096, 1 << 23])
def test_streaming_reads_mixed_magics_at_any_chunk_size(tmp_path, chunk):
    data, recs = _mixed_segment()
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(data)
    fr = FileRecords(p, chunk_size=chunk)
    out = []
    positions = []
    for b in fr.batches():
        b.ensure_valid()
        positions.append(b.position)
        out.extend(b.records())
    assert [(r.offset, r.key, r.value) for r in out] == [(r.offset, r.key, r.value) for r in recs]
    assert positions == [b.position for b in iterate_batches(data)]
    assert fr.valid_bytes == len(data) and fr.trailing_bytes == 0


def test_truncated_tail_is_reported_not_read(tmp_path):
    data, _ = _mixed_segment()
    cut = data + build_record_batch([Record(99, 1, None, b"x" * 100)])[:50]
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(cut)
    fr = FileRecords(p, chunk_size=64)
    n = sum(1 for _ in fr.batches())
    assert n == len(list(iterate_batches(data)))
    assert (fr.valid_bytes, fr.trailing_bytes) == (len(data), 50)
    with pytest.raises(TruncatedError) as exc:
        read_batches(p, strict=True)
    assert exc.value.position == len(data) and exc.value.path == str(p)


def test_size_below_14_is_corrupt_with_file_and_position(tmp_path):
    data, _ = _mixed_segment()
    bad = data + (7).to_bytes(8, "big") + (13).to_bytes(4, "big") + b"\x00" * 20
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(bad)
    with pytest.raises(CorruptRecordError) as exc:
        list(FileRecords(p, chunk_size=128).batches())
    assert exc.value.path == str(p) and exc.value.position == len(data) + 8


def test_wrong_magic_is_corrupt(tmp_path):
    data = bytearray(build_record_batch([Record(0, 1, None, b"x")]))
    data[16] = 7
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match="magic") as exc:
        list(FileRecords(p).batches())
    assert exc.value.position == 16


def test_seventeen_bytes_or_fewer_end_iteration(tmp_path):
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(b"\x00" * 17)
    fr = FileRecords(p)
    assert list(fr.batches()) == []
    assert fr.trailing_bytes == 17


@pytest.mark.parametrize("tail", [18, 20, 24])
def test_size_below_14_is_corrupt_even_where_the_entry_would_not_fit(tmp_path, tail):
    # Found by tests/fuzz: with 18..25 bytes left and a size field below 14, the streaming
    # reader waited for the rest of the entry and called the bytes a truncated tail, while
    # iterate_batches (and Kafka's FileLogInputStream: size check first) report corruption.
    data, _ = _mixed_segment()
    bad = data + (7).to_bytes(8, "big") + (13).to_bytes(4, "big") + b"\x00" * (tail - 12)
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(bad)
    for chunk in (19, 1 << 20):
        with pytest.raises(CorruptRecordError) as exc:
            list(FileRecords(p, chunk_size=chunk).batches())
        assert exc.value.position == len(data) + 8
    with pytest.raises(CorruptRecordError) as exc:
        list(iterate_batches(bad))
    assert exc.value.position == len(data) + 8
