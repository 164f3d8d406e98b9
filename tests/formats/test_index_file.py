"""What the offset and time index share (index_file): the bulk reading of entry fields and the
preallocated tail, against a reading entry by entry with the entry's struct."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats.index_file import entry_columns, preallocated_entry_count
from migration.formats.offset_index import OffsetIndex
from migration.formats.time_index import TimeIndex


def _by_entry(data: bytes, entry: struct.Struct) -> list[list[int]]:
    """The reference: every entry unpacked on its own, then split into fields."""
    rows = list(entry.iter_unpack(data))
    return [list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in range(len(entry.format) - 1)]


@pytest.mark.parametrize("index_type", [OffsetIndex, TimeIndex])
@given(data=st.data())
def test_entry_columns_match_a_reading_entry_by_entry(index_type: type, data: st.DataObject) -> None:
    n = data.draw(st.integers(0, 40))
    # Any bytes: negative fields (sign bits set) and every byte value in every place.
    raw = data.draw(st.binary(min_size=n * index_type.ENTRY_SIZE, max_size=n * index_type.ENTRY_SIZE))
    assert entry_columns(memoryview(raw), index_type.FIELDS, index_type.ENTRY_SIZE) == _by_entry(raw, index_type.ENTRY)


@pytest.mark.parametrize("index_type", [OffsetIndex, TimeIndex])
def test_fields_are_the_entry_struct_in_order(index_type: type) -> None:
    """FIELDS tile the entry in the struct's order, so the columns are the struct's fields."""
    at = 0
    for offset, length in index_type.FIELDS:
        assert offset == at
        at += length
    assert at == index_type.ENTRY_SIZE == index_type.ENTRY.size
    assert len(index_type.FIELDS) == len(index_type.ENTRY.format) - 1  # ">" then one code per field


@given(st.lists(st.integers(0, 3), max_size=12))
def test_preallocated_entry_count_stops_at_the_first_zero_after_the_first(rels: list[int]) -> None:
    expected = next((i for i, r in enumerate(rels) if i > 0 and r == 0), len(rels))
    assert preallocated_entry_count(rels) == expected


@given(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1)), max_size=30),
       st.integers(0, 2**40), st.integers(0, 5))
def test_offset_index_read_in_bulk_is_the_entries(entries: list[tuple[int, int]], base: int, tail: int) -> None:
    """Loaded without the order checks (any entries), with a zero-filled tail: what a reading
    entry by entry gives, the tail ignored from the first zero relative offset on."""
    raw = b"".join(struct.pack(">ii", r, p) for r, p in entries) + bytes(8 * tail)
    index = OffsetIndex.from_bytes(raw, base, strict=False)
    rows = list(struct.iter_unpack(">ii", raw))
    count = next((i for i, (r, _) in enumerate(rows) if i > 0 and r == 0), len(rows))
    assert index.pairs() == [(base + r, p) for r, p in rows[:count]]
    assert index.ignored_tail_entries == len(rows) - count


@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**31 - 1)), max_size=30),
       st.integers(0, 2**40), st.integers(0, 5))
def test_time_index_read_in_bulk_is_the_entries(entries: list[tuple[int, int]], base: int, tail: int) -> None:
    raw = b"".join(struct.pack(">qi", t, r) for t, r in entries) + bytes(12 * tail)
    index = TimeIndex.from_bytes(raw, base, strict=False)
    rows = list(struct.iter_unpack(">qi", raw))
    count = next((i for i, (_, r) in enumerate(rows) if i > 0 and r == 0), len(rows))
    assert index.pairs() == [(t, base + r) for t, r in rows[:count]]
    assert index.ignored_tail_entries == len(rows) - count
