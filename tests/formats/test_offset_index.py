from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats import offset_index
from migration.formats.errors import CorruptIndexError, InvalidFileNameError
from migration.formats.index_file import IndexFullError, IndexOffsetOverflowError, InvalidOffsetError
from migration.formats.offset_index import OffsetIndex, OffsetPosition

INT32_MAX = 2**31 - 1


@st.composite
def indexes(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]]]:
    base = draw(st.integers(0, 2**62))
    rels = sorted(set(draw(st.lists(st.integers(0, INT32_MAX), max_size=40))))
    # A relative offset of 0 past entry 0 would look like preallocated tail: Kafka cannot write it
    # (offsets strictly increase), so it cannot occur.
    positions = sorted(draw(st.lists(st.integers(0, INT32_MAX), min_size=len(rels), max_size=len(rels))))
    return base, [(base + r, p) for r, p in zip(rels, positions, strict=True)]


def test_entry_bytes_pinned() -> None:
    # Relative offset 5 (absolute 105 at base 100), position 4096.
    index = OffsetIndex(100, [(105, 4096), (200, 8200)])
    assert index.to_bytes() == bytes.fromhex("00000005 00001000 00000064 00002008")
    assert OffsetIndex.from_bytes(index.to_bytes(), 100).entries == (
        OffsetPosition(105, 4096),
        OffsetPosition(200, 8200),
    )


@given(indexes())
def test_round_trip(case: tuple[int, list[tuple[int, int]]]) -> None:
    base, entries = case
    index = OffsetIndex(base, entries)
    data = index.to_bytes()
    assert len(data) == 8 * len(entries)
    assert OffsetIndex.from_bytes(data, base) == index


@given(indexes(), st.integers(0, 2**63 - 1))
def test_lookup_is_largest_offset_at_most_target(case: tuple[int, list[tuple[int, int]]], target: int) -> None:
    base, entries = case
    index = OffsetIndex(base, entries)
    below = [e for e in entries if e[0] <= target]
    expected = OffsetPosition(*below[-1]) if below else OffsetPosition(base, 0)
    assert index.lookup(target) == expected


def test_append_rules() -> None:
    index = OffsetIndex(1000)
    index.append(1000, 0)
    with pytest.raises(InvalidOffsetError):
        index.append(1000, 10)  # not strictly increasing
    with pytest.raises(IndexOffsetOverflowError):
        index.append(1000 + INT32_MAX + 1, 10)
    index.append(1000 + INT32_MAX, 10)  # the largest representable offset
    with pytest.raises(IndexOffsetOverflowError):
        OffsetIndex(1000).append(999, 0)  # below the base offset
    with pytest.raises(ValueError):
        OffsetIndex(0).append(1, -1)
    assert len(index) == 2


def test_full_index() -> None:
    index = OffsetIndex(0, max_index_size=20)  # 2 entries
    index.append(1, 0)
    index.append(2, 5)
    assert index.is_full()
    with pytest.raises(IndexFullError):
        index.append(3, 9)


def test_truncate_to() -> None:
    index = OffsetIndex(0, [(1, 0), (5, 10), (9, 20)])
    index.truncate_to(5)
    assert index.entries == (OffsetPosition(1, 0),)
    assert index.last_offset == 1
    index.truncate_to(0)
    assert index.last_offset == 0 and len(index) == 0


def test_preallocated_zero_tail_is_recognised() -> None:
    data = OffsetIndex(50, [(50, 0), (60, 4200), (70, 8400)]).to_bytes() + bytes(8 * 100)
    index = OffsetIndex.from_bytes(data, 50)
    assert index.entries == ((50, 0), (60, 4200), (70, 8400))
    assert index.ignored_tail_entries == 100
    assert index.file_length == len(data)
    # Trimming on write.
    assert index.to_bytes() == data[:24]


def test_all_zero_file_has_one_entry_at_the_base_offset() -> None:
    # Entry 0 is read even when it is (base, 0): the rule stops at i > 0 only.
    index = OffsetIndex.from_bytes(bytes(8 * 4), 7)
    assert index.entries == ((7, 0),)


def test_empty_file() -> None:
    index = OffsetIndex.from_bytes(b"", 0)
    assert len(index) == 0 and index.lookup(100) == (0, 0)


@pytest.mark.parametrize("extra", [1, 3, 7])
def test_size_not_multiple_of_entry_size(extra: int) -> None:
    data = OffsetIndex(0, [(1, 0), (2, 100)]).to_bytes() + b"\x00" * extra
    with pytest.raises(CorruptIndexError) as e:
        OffsetIndex.from_bytes(data, 0, path="/x/00000000000000000000.index")
    assert e.value.path == "/x/00000000000000000000.index"
    assert e.value.position == 16
    # Kafka's lenient load still reads the whole entries; the explicit sanity check fails.
    lenient = OffsetIndex.from_bytes(data, 0, strict=False)
    assert len(lenient) == 2
    with pytest.raises(CorruptIndexError):
        lenient.sanity_check()


def test_negative_relative_offset_fails_sanity_check() -> None:
    data = struct.pack(">ii", 1, 0) + struct.pack(">ii", -5, 10)
    with pytest.raises(CorruptIndexError) as e:
        OffsetIndex.from_bytes(data, 100)
    assert e.value.position == 8
    assert e.value.found == 95


def test_out_of_order_entries_fail_check_order() -> None:
    data = struct.pack(">iiiiii", 1, 0, 9, 100, 4, 200)
    # Kafka's sanity check only looks at the last entry: it passes.
    OffsetIndex.from_bytes(data, 0, strict=False).sanity_check()
    with pytest.raises(CorruptIndexError) as e:
        OffsetIndex.from_bytes(data, 0)
    assert e.value.position == 16
    data = struct.pack(">iiii", 1, 100, 2, 50)
    with pytest.raises(CorruptIndexError) as e:
        OffsetIndex.from_bytes(data, 0)
    assert e.value.position == 12


def test_read_takes_base_offset_from_name(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000368769.index"
    OffsetIndex(368769, [(368800, 4097)]).write(path)
    index = OffsetIndex.read(path)
    assert index.base_offset == 368769
    assert index.entries == ((368800, 4097),)
    assert path.read_bytes() == bytes.fromhex("0000001f 00001001")
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


@pytest.mark.parametrize("name", ["garbage.index", "00000000000000000000.log", "00000000000000000000.timeindex"])
def test_read_wrong_name(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(bytes(8))
    with pytest.raises(InvalidFileNameError) as e:
        OffsetIndex.read(path)
    assert e.value.path == str(path)


def test_read_corrupt_file_names_path(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(bytes(8) + b"\x01\x02\x03")
    with pytest.raises(CorruptIndexError) as e:
        OffsetIndex.read(path)
    assert e.value.path == str(path) and e.value.position == 8


@pytest.mark.parametrize("name", ["00000000000000000001.index", "00000000000000000000.timeindex", "x.index"])
def test_write_wrong_name_writes_nothing(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidFileNameError):
        OffsetIndex(0, [(3, 0)]).write(tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_entry_layout_is_kafkas() -> None:
    # OffsetIndex.java: ENTRY_SIZE 8, relative offset at n * 8, position at n * 8 + 4
    assert (offset_index.RELATIVE_OFFSET_OFFSET, offset_index.POSITION_OFFSET, OffsetIndex.ENTRY_SIZE) == (0, 4, 8)
    assert offset_index.POSITION_OFFSET == offset_index.RELATIVE_OFFSET_OFFSET + offset_index.RELATIVE_OFFSET_LENGTH
    assert OffsetIndex.ENTRY_SIZE == offset_index.POSITION_OFFSET + offset_index.POSITION_LENGTH
    assert OffsetIndex.ENTRY.size == OffsetIndex.ENTRY_SIZE
    data = OffsetIndex(100, [(105, 4096), (110, 8192)]).to_bytes()
    at = OffsetIndex.ENTRY_SIZE  # the second entry
    assert struct.unpack_from(">i", data, at + offset_index.RELATIVE_OFFSET_OFFSET)[0] == 10
    assert struct.unpack_from(">i", data, at + offset_index.POSITION_OFFSET)[0] == 8192


@given(st.lists(st.integers(1, 1000), min_size=0, max_size=40), st.integers(0, 5))
def test_extend_is_appends(gaps: list[int], before: int) -> None:
    """extend (the compiled walker's entries at once) leaves the index as append one by one."""
    offsets = [105 + sum(gaps[: i + 1]) for i in range(len(gaps))]
    positions = [10 * (o - 100) + 100 for o in offsets]
    one, many = OffsetIndex(100), OffsetIndex(100)
    for i in range(before):  # entries already there, below the new ones
        one.append(100 + i, i)
        many.append(100 + i, i)
    for o, p in zip(offsets, positions, strict=True):
        one.append(o, p)
    many.extend(offsets, positions)
    assert one == many


def test_extend_checks_the_ends() -> None:
    idx = OffsetIndex(100)
    idx.append(150, 40)
    with pytest.raises(InvalidOffsetError):
        idx.extend([150, 160, 170], [50, 60, 70])  # the first is not above the last entry
    with pytest.raises(IndexOffsetOverflowError):
        idx.extend([160, 170, 100 + 2**31], [50, 60, 70])  # the last does not fit int32
    with pytest.raises(ValueError):
        idx.extend([160, 170, 180], [50, 60, 2**31])


def _first_order_fault(base: int, entries: list[tuple[int, int]]) -> int | None:
    """The byte position check_order must name (None: in order), written out entry by entry."""
    prev_offset, prev_position = None, 0
    for i, (rel, position) in enumerate(entries):
        offset = base + rel
        if offset < base or (prev_offset is not None and offset <= prev_offset):
            return i * 8
        if position < prev_position:
            return i * 8 + 4
        prev_offset, prev_position = offset, position
    return None


@given(st.lists(st.tuples(st.integers(-2, 40), st.integers(-2, 40)), max_size=8))
def test_check_order_names_the_first_fault(entries: list[tuple[int, int]]) -> None:
    """The order check's whole-list fast path and its entry loop agree: in order, or the first
    fault's position."""
    data = b"".join(struct.pack(">ii", r, p) for r, p in entries)
    # what is read: up to the preallocated tail (the first entry after the first with offset 0)
    entries = entries[: next((i for i, (r, _) in enumerate(entries) if i and r == 0), len(entries))]
    expected = _first_order_fault(1000, entries)
    index = OffsetIndex.from_bytes(data, 1000, strict=False)  # Kafka's sanity check aside
    if expected is None:
        index.check_order()
        assert [tuple(e) for e in index] == [(1000 + r, p) for r, p in entries]
    else:
        with pytest.raises(CorruptIndexError) as e:
            index.check_order()
        assert e.value.position == expected
