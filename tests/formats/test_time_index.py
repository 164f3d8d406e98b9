from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats import time_index
from migration.formats.errors import CorruptIndexError, InvalidFileNameError
from migration.formats.index_file import IndexFullError, IndexOffsetOverflowError, InvalidOffsetError
from migration.formats.time_index import TimeIndex, TimestampOffset

INT32_MAX = 2**31 - 1


@st.composite
def indexes(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]]]:
    base = draw(st.integers(0, 2**62))
    timestamps = sorted(set(draw(st.lists(st.integers(0, 2**62), max_size=30))))
    # Offsets never decrease; 0 past the first entry would read as preallocated tail.
    rels = sorted(draw(st.lists(st.integers(1, INT32_MAX), min_size=len(timestamps), max_size=len(timestamps))))
    if rels and draw(st.booleans()):
        rels[0] = 0
    return base, [(t, base + r) for t, r in zip(timestamps, rels, strict=True)]


def test_entry_bytes_pinned() -> None:
    index = TimeIndex(100, [(1700000000000, 105)])
    assert index.to_bytes() == bytes.fromhex("0000018BCFE56800 00000005")


@given(indexes())
def test_round_trip(case: tuple[int, list[tuple[int, int]]]) -> None:
    base, entries = case
    index = TimeIndex(base, entries)
    data = index.to_bytes()
    assert len(data) == 12 * len(entries)
    assert TimeIndex.from_bytes(data, base) == index


@given(indexes(), st.integers(-1, 2**62))
def test_lookup(case: tuple[int, list[tuple[int, int]]], target: int) -> None:
    base, entries = case
    below = [e for e in entries if e[0] <= target]
    expected = TimestampOffset(*below[-1]) if below else TimestampOffset(-1, base)
    assert TimeIndex(base, entries).lookup(target) == expected


def test_maybe_append_rules() -> None:
    index = TimeIndex(10)
    assert index.last_entry == (-1, 10)
    assert not index.maybe_append(-1, 10)  # -1 is never indexed (v0 data)
    assert index.maybe_append(5, 12)
    assert not index.maybe_append(5, 12)  # equal timestamp: skipped silently (roll / close)
    assert not index.maybe_append(5, 20)  # equal timestamp, larger offset: also skipped
    assert index.maybe_append(6, 12)  # equal offset, larger timestamp: appended
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(100, 11)  # offset goes backwards
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(4, 30)  # timestamp goes backwards
    with pytest.raises(IndexOffsetOverflowError):
        index.maybe_append(100, 10 + INT32_MAX + 1)
    assert index.entries == ((5, 12), (6, 12))


def test_empty_index_accepts_any_offset_at_or_after_base() -> None:
    index = TimeIndex(10)
    # The empty index's last entry is (-1, base): an offset below base is an overflow.
    with pytest.raises(IndexOffsetOverflowError):
        index.maybe_append(3, 9)
    assert index.maybe_append(0, 10)


def test_full_keeps_a_slot_for_roll() -> None:
    index = TimeIndex(0, max_index_size=36)  # 3 slots, full at 2
    index.maybe_append(1, 1)
    index.maybe_append(2, 2)
    with pytest.raises(IndexFullError):
        index.maybe_append(3, 3)
    assert index.maybe_append(3, 3, skip_full_check=True)


def test_constructor_rejects_dropped_entries() -> None:
    with pytest.raises(InvalidOffsetError):
        TimeIndex(0, [(5, 1), (5, 2)])


def test_preallocated_zero_tail() -> None:
    data = TimeIndex(0, [(100, 0), (200, 7)]).to_bytes() + bytes(12 * 50)
    index = TimeIndex.from_bytes(data, 0)
    assert index.entries == ((100, 0), (200, 7))
    assert index.ignored_tail_entries == 50


@pytest.mark.parametrize("extra", [1, 8, 11])
def test_size_not_multiple(extra: int) -> None:
    data = TimeIndex(0, [(100, 1)]).to_bytes() + bytes(extra)
    with pytest.raises(CorruptIndexError) as e:
        TimeIndex.from_bytes(data, 0, path="p.timeindex")
    assert e.value.path == "p.timeindex" and e.value.position == 12


def test_sanity_check_last_timestamp_below_first() -> None:
    data = struct.pack(">qiqi", 500, 1, 100, 2)
    index = TimeIndex.from_bytes(data, 0, strict=False)
    with pytest.raises(CorruptIndexError) as e:
        index.sanity_check()
    assert e.value.position == 12


def test_sanity_check_last_offset_below_base() -> None:
    data = struct.pack(">qiqi", 100, 1, 200, -1)
    with pytest.raises(CorruptIndexError) as e:
        TimeIndex.from_bytes(data, 50)
    assert e.value.position == 20 and e.value.found == 49


def test_check_order() -> None:
    # Middle entry out of order: Kafka's sanity check (first vs last) passes, ours does not.
    data = struct.pack(">qiqiqi", 100, 1, 300, 2, 200, 3)
    TimeIndex.from_bytes(data, 0, strict=False).sanity_check()
    with pytest.raises(CorruptIndexError) as e:
        TimeIndex.from_bytes(data, 0)
    assert e.value.position == 24
    data = struct.pack(">qiqi", 100, 5, 200, 3)
    with pytest.raises(CorruptIndexError) as e:
        TimeIndex.from_bytes(data, 0)
    assert e.value.position == 20


def test_file_round_trip_and_names(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    TimeIndex(100, [(1, 100), (2, 150)]).write(path)
    assert TimeIndex.read(path).entries == ((1, 100), (2, 150))
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    with pytest.raises(InvalidFileNameError):
        TimeIndex.read(tmp_path / "00000000000000000100.index")
    with pytest.raises(InvalidFileNameError):
        TimeIndex(100).write(tmp_path / "00000000000000000000.timeindex")
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_entry_layout_is_kafkas() -> None:
    # TimeIndex.java: ENTRY_SIZE 12, timestamp at n * 12, relative offset at n * 12 + 8
    assert (time_index.TIMESTAMP_OFFSET, time_index.RELATIVE_OFFSET_OFFSET, TimeIndex.ENTRY_SIZE) == (0, 8, 12)
    assert time_index.RELATIVE_OFFSET_OFFSET == time_index.TIMESTAMP_OFFSET + time_index.TIMESTAMP_LENGTH
    assert TimeIndex.ENTRY_SIZE == time_index.RELATIVE_OFFSET_OFFSET + time_index.RELATIVE_OFFSET_LENGTH
    assert TimeIndex.ENTRY.size == TimeIndex.ENTRY_SIZE
    data = TimeIndex(100, [(1000, 104), (2000, 110)]).to_bytes()
    at = TimeIndex.ENTRY_SIZE  # the second entry
    assert struct.unpack_from(">q", data, at + time_index.TIMESTAMP_OFFSET)[0] == 2000
    assert struct.unpack_from(">i", data, at + time_index.RELATIVE_OFFSET_OFFSET)[0] == 10


@given(st.lists(st.tuples(st.integers(1, 1000), st.integers(1, 50)), max_size=40))
def test_extend_is_maybe_appends(steps: list[tuple[int, int]]) -> None:
    """extend (the compiled walker's entries at once) leaves the index as maybe_append one by one."""
    ts, off, entries = 1_000, 100, []
    for dts, doff in steps:
        ts, off = ts + dts, off + doff
        entries.append((ts, off))
    one, many = TimeIndex(100), TimeIndex(100)
    for t, o in entries:
        assert one.maybe_append(t, o)
    many.extend([t for t, _ in entries], [o for _, o in entries])
    assert one == many


def test_extend_checks_the_ends() -> None:
    idx = TimeIndex(100)
    idx.maybe_append(5_000, 150)
    with pytest.raises(InvalidOffsetError):
        idx.extend([6_000, 7_000, 8_000], [140, 160, 170])  # an offset below the last entry's
    with pytest.raises(InvalidOffsetError):
        idx.extend([5_000, 7_000, 8_000], [160, 170, 180])  # a timestamp that would not be appended
    with pytest.raises(IndexOffsetOverflowError):
        idx.extend([6_000, 7_000, 8_000], [160, 170, 100 + 2**31])


def _first_order_fault(base: int, entries: list[tuple[int, int]]) -> int | None:
    """The byte position check_order must name (None: in order), written out entry by entry."""
    prev: tuple[int, int] | None = None
    for i, (timestamp, rel) in enumerate(entries):
        offset = base + rel
        if offset < base:
            return i * 12 + 8
        if prev is not None and timestamp <= prev[0]:
            return i * 12
        if prev is not None and offset < prev[1]:
            return i * 12 + 8
        prev = (timestamp, offset)
    return None


@given(st.lists(st.tuples(st.integers(-2, 40), st.integers(-2, 40)), max_size=8))
def test_check_order_names_the_first_fault(entries: list[tuple[int, int]]) -> None:
    """The order check's whole-list fast path and its entry loop agree: in order, or the first
    fault's position."""
    data = b"".join(struct.pack(">qi", t, r) for t, r in entries)
    # what is read: up to the preallocated tail (the first entry after the first with offset 0)
    entries = entries[: next((i for i, (_, r) in enumerate(entries) if i and r == 0), len(entries))]
    expected = _first_order_fault(1000, entries)
    index = TimeIndex.from_bytes(data, 1000, strict=False)  # Kafka's sanity check aside
    if expected is None:
        index.check_order()
        assert [tuple(e) for e in index] == [(t, 1000 + r) for t, r in entries]
    else:
        with pytest.raises(CorruptIndexError) as e:
            index.check_order()
        assert e.value.position == expected
