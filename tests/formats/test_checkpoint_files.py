from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats.checkpoint_files import (
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    TopicPartitionOffset,
    segment_leader_epochs,
    to_checkpoint_text,
)
from migration.formats.errors import CorruptCheckpointError

topics = st.from_regex(r"\A[a-zA-Z0-9._-]{1,40}\Z")
offset_entries = st.builds(
    TopicPartitionOffset, topics, st.integers(0, 2**31 - 1), st.integers(-(2**63), 2**63 - 1)
)
epoch_entries = st.builds(EpochEntry, st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1))


def test_offset_checkpoint_text() -> None:
    f = OffsetCheckpointFile([TopicPartitionOffset("orders", 3, 1200), TopicPartitionOffset("a-b", 0, 0)])
    assert f.to_bytes() == b"0\n2\norders 3 1200\na-b 0 0\n"
    assert OffsetCheckpointFile.from_bytes(f.to_bytes()) == f
    assert f.offsets() == {("orders", 3): 1200, ("a-b", 0): 0}


@given(st.lists(offset_entries, max_size=20))
def test_offset_round_trip(items: list[TopicPartitionOffset]) -> None:
    f = OffsetCheckpointFile(items)
    assert OffsetCheckpointFile.from_bytes(f.to_bytes()).entries == tuple(items)


@given(st.lists(epoch_entries, max_size=20))
def test_epoch_round_trip(items: list[EpochEntry]) -> None:
    f = LeaderEpochCheckpointFile(items)
    assert LeaderEpochCheckpointFile.from_bytes(f.to_bytes()).entries == tuple(items)


@pytest.mark.parametrize("data", [b"", b"0\n", b"0"])
def test_empty_and_version_only_files_have_no_entries(data: bytes) -> None:
    assert len(OffsetCheckpointFile.from_bytes(data)) == 0


def test_reader_tolerances() -> None:
    # CRLF line ends, tabs and trailing whitespace, no final newline, sign on numbers.
    f = OffsetCheckpointFile.from_bytes(b"0\r\n2\r\nt\t1  +5  \r\nu 2 -1")
    assert f.entries == (("t", 1, 5), ("u", 2, -1))


def test_version_mismatch() -> None:
    with pytest.raises(CorruptCheckpointError) as e:
        OffsetCheckpointFile.from_bytes(b"1\n0\n", path="/d/recovery-point-offset-checkpoint")
    assert e.value.path == "/d/recovery-point-offset-checkpoint"
    assert e.value.position == 0 and e.value.found == 1


@pytest.mark.parametrize(
    ("data", "position", "line"),
    [
        (b"0\n2\nt 0 1\nt 0\n", 10, 4),  # too few fields
        (b"0\n2\nt 0 1\n t 0 1\n", 10, 4),  # leading blank: Java split yields an empty first field
        (b"0\n1\nt x 1\n", 4, 3),  # partition not a number
        (b"0\n1\nt 0 99999999999999999999\n", 4, 3),  # offset overflows int64
        (b"0\n1\nt 2147483648 1\n", 4, 3),  # partition overflows int32
        (b"0\n1\n\n", 4, 3),  # empty line
        (b"0\nx\n", 2, 2),  # count not a number
        (b"v0\n0\n", 0, 1),  # version not a number
        (b" 0\n0\n", 0, 1),
    ],
)
def test_bad_lines(data: bytes, position: int, line: int) -> None:
    with pytest.raises(CorruptCheckpointError) as e:
        OffsetCheckpointFile.from_bytes(data, path="cp")
    assert e.value.position == position
    assert f"line {line}" in str(e.value)
    assert str(e.value).startswith("cp: byte ")


def test_count_mismatch() -> None:
    with pytest.raises(CorruptCheckpointError) as e:
        OffsetCheckpointFile.from_bytes(b"0\n3\nt 0 1\n", path="cp")
    assert (e.value.expected, e.value.found, e.value.position) == (3, 1, 2)


def test_not_utf8() -> None:
    with pytest.raises(CorruptCheckpointError) as e:
        OffsetCheckpointFile.from_bytes(b"0\n1\nt\xff 0 1\n")
    assert e.value.position == 5


def test_writer_rejects_unwritable_topics(tmp_path: Path) -> None:
    for topic in ["", "has space", "tab\t"]:
        with pytest.raises(ValueError):
            OffsetCheckpointFile([TopicPartitionOffset(topic, 0, 0)])
    with pytest.raises(ValueError):
        LeaderEpochCheckpointFile([EpochEntry(2**31, 0)])
    assert list(tmp_path.iterdir()) == []


def test_write_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("0\n1\nold 0 1\n")
    OffsetCheckpointFile([TopicPartitionOffset("new", 1, 2)]).write(path)
    assert path.read_text() == "0\n1\nnew 1 2\n"
    assert OffsetCheckpointFile.read(path).entries == (("new", 1, 2),)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_read_error_names_file(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n1\n0 0 0\n")
    with pytest.raises(CorruptCheckpointError) as e:
        LeaderEpochCheckpointFile.read(path)
    assert e.value.path == str(path) and e.value.position == 4


def test_leader_epoch_text() -> None:
    f = LeaderEpochCheckpointFile.from_bytes(b"0\n2\n0 0\n3 150\n")
    assert f.entries == (EpochEntry(0, 0), EpochEntry(3, 150))
    assert to_checkpoint_text(f.entries) == "0\n2\n0 0\n3 150\n"
    assert to_checkpoint_text([]) == "0\n0\n"
    f.check_order()
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCheckpointFile([EpochEntry(3, 0), EpochEntry(2, 10)]).check_order()
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCheckpointFile([EpochEntry(1, 10), EpochEntry(2, 10)]).check_order()


EPOCHS = [EpochEntry(0, 0), EpochEntry(2, 100), EpochEntry(5, 250), EpochEntry(7, 400)]


@pytest.mark.parametrize(
    ("start", "next_offset", "expected"),
    [
        (0, 100, [(0, 0)]),
        (100, 250, [(2, 100)]),  # entry exactly at start keeps its epoch
        (120, 400, [(2, 120), (5, 250)]),  # collapse, keep inner, drop entry at next
        (120, 401, [(2, 120), (5, 250), (7, 400)]),
        (500, 900, [(7, 500)]),
        (50, 60, [(0, 50)]),
    ],
)
def test_segment_leader_epochs(start: int, next_offset: int, expected: list[tuple[int, int]]) -> None:
    assert segment_leader_epochs(EPOCHS, start, next_offset) == expected


def test_segment_leader_epochs_edge_cases() -> None:
    # No epoch at or before the start: nothing to collapse.
    assert segment_leader_epochs([EpochEntry(4, 10)], 0, 20) == [(4, 10)]
    assert segment_leader_epochs([], 0, 20) == []
    with pytest.raises(ValueError):
        segment_leader_epochs(EPOCHS, 10, 10)


@given(
    st.lists(st.integers(0, 1000), unique=True, max_size=10),
    st.integers(0, 1000),
    st.integers(1, 500),
)
def test_segment_leader_epochs_properties(starts: list[int], start: int, length: int) -> None:
    entries = [EpochEntry(e, s) for e, s in enumerate(sorted(starts))]
    result = segment_leader_epochs(entries, start, start + length)
    assert all(start <= e.start_offset < start + length for e in result)
    if any(e.start_offset <= start for e in entries):
        assert result[0].start_offset == start
    # The epoch in force at any offset of the segment is unchanged.
    for off in range(start, start + length, max(1, length // 7)):
        before = [e.epoch for e in entries if e.start_offset <= off]
        after = [e.epoch for e in result if e.start_offset <= off]
        assert (before[-1] if before else None) == (after[-1] if after else None)


@pytest.mark.parametrize(
    ("data", "position", "line"),
    [
        (b"0\n1\n0 " + b"1" * 5000 + b"\n", 4, 3),  # an offset of more digits than Python's int() reads
        (b"0\n" + b"9" * 4301 + b"\n", 2, 2),
        (b"-" + b"0" * 4300 + b"1\n0\n", 0, 1),  # version -1, behind more zeros than int() reads
    ],
)
def test_numbers_of_thousands_of_digits_are_malformed_lines(data: bytes, position: int, line: int) -> None:
    # Found by tests/fuzz: int() raised ValueError (its 4300-digit limit) out of the reader.
    with pytest.raises(CorruptCheckpointError) as e:
        LeaderEpochCheckpointFile.from_bytes(data, path="cp")
    assert e.value.position == position
    assert f"line {line}" in str(e.value)


def test_leading_zeros_parse_as_in_java() -> None:
    data = b"0\n1\n" + b"0" * 5000 + b"7 +00042\n"
    assert LeaderEpochCheckpointFile.from_bytes(data).entries == (EpochEntry(7, 42),)
