from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats import producer_snapshot as ps
from migration.formats.errors import CorruptSnapshotError, InvalidFileNameError, TruncatedError
from migration.formats.producer_snapshot import (
    EMPTY_SNAPSHOT,
    ProducerSnapshot,
    ProducerSnapshotEntry,
    TruncatedSnapshotError,
)

EMPTY = bytes.fromhex("00 01 48 67 4B C7 00 00 00 00")


def i(bits: int) -> st.SearchStrategy[int]:
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


entries = st.builds(ProducerSnapshotEntry, i(64), i(16), i(32), i(64), i(32), i(64), i(32), i(64))

SAMPLE = ProducerSnapshot(
    [
        ProducerSnapshotEntry(
            producer_id=1000,
            epoch=3,
            last_sequence=41,
            last_offset=99,
            offset_delta=9,
            timestamp=1700000000000,
            coordinator_epoch=-1,
            current_txn_first_offset=-1,
        ),
        ProducerSnapshotEntry(producer_id=2000, epoch=0),
    ]
)


def test_empty_snapshot_bytes() -> None:
    assert ProducerSnapshot().to_bytes() == EMPTY
    assert EMPTY_SNAPSHOT == EMPTY
    assert ProducerSnapshot.from_bytes(EMPTY) == ProducerSnapshot()


def test_entry_layout() -> None:
    data = SAMPLE.to_bytes()
    assert len(data) == 10 + 2 * 46
    assert data[:2] == b"\x00\x01"
    assert struct.unpack(">I", data[2:6])[0] == crc32c.crc32c(data[6:])
    assert data[6:10] == b"\x00\x00\x00\x02"
    assert data[10:56] == bytes.fromhex(
        "00000000000003E8"  # producer_id
        "0003"  # epoch
        "00000029"  # last_sequence
        "0000000000000063"  # last_offset
        "00000009"  # offset_delta
        "0000018BCFE56800"  # timestamp
        "FFFFFFFF"  # coordinator_epoch
        "FFFFFFFFFFFFFFFF"  # current_txn_first_offset
    )
    # Defaults: no batch metadata, no transaction.
    assert ProducerSnapshot.from_bytes(data).entries[1] == (2000, 0, -1, -1, 0, -1, -1, -1)


@given(st.lists(entries, max_size=20))
def test_round_trip(items: list[ProducerSnapshotEntry]) -> None:
    snapshot = ProducerSnapshot(items)
    assert ProducerSnapshot.from_bytes(snapshot.to_bytes()) == snapshot


@given(st.data())
def test_any_flipped_byte_after_the_header_is_a_crc_mismatch(data: st.DataObject) -> None:
    raw = bytearray(SAMPLE.to_bytes())
    pos = data.draw(st.integers(10, len(raw) - 1))
    raw[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptSnapshotError) as e:
        ProducerSnapshot.from_bytes(raw, path="00000000000000000010.snapshot")
    assert e.value.position == 2
    assert e.value.path == "00000000000000000010.snapshot"
    assert not isinstance(e.value, TruncatedError)


def test_flipped_crc_byte() -> None:
    raw = bytearray(EMPTY)
    raw[5] ^= 0x01
    with pytest.raises(CorruptSnapshotError) as e:
        ProducerSnapshot.from_bytes(raw)
    assert e.value.position == 2
    assert e.value.expected == "0x48674bc7"


@pytest.mark.parametrize("version", [0, 2, -1])
def test_unknown_version(version: int) -> None:
    raw = struct.pack(">h", version) + EMPTY[2:]
    with pytest.raises(CorruptSnapshotError) as e:
        ProducerSnapshot.from_bytes(raw)
    assert e.value.position == 0 and e.value.found == version


def test_every_truncation_is_reported() -> None:
    full = SAMPLE.to_bytes()
    for n in range(len(full)):
        with pytest.raises(TruncatedSnapshotError) as e:
            ProducerSnapshot.from_bytes(full[:n])
        assert isinstance(e.value, CorruptSnapshotError) and isinstance(e.value, TruncatedError)
        assert e.value.position is not None and e.value.position <= n


def test_truncation_position_is_the_incomplete_entry() -> None:
    full = SAMPLE.to_bytes()
    with pytest.raises(TruncatedSnapshotError) as e:
        ProducerSnapshot.from_bytes(full[:70])
    assert e.value.position == 56


def test_trailing_bytes() -> None:
    raw = bytearray(EMPTY + b"\x00\x00")
    raw[2:6] = struct.pack(">I", crc32c.crc32c(bytes(raw[6:])))  # even with a matching CRC
    with pytest.raises(CorruptSnapshotError) as e:
        ProducerSnapshot.from_bytes(raw)
    assert e.value.position == 10


def test_negative_count() -> None:
    body = struct.pack(">i", -1)
    raw = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    with pytest.raises(CorruptSnapshotError) as e:
        ProducerSnapshot.from_bytes(raw)
    assert e.value.position == 6


def test_garbage() -> None:
    with pytest.raises(CorruptSnapshotError):
        ProducerSnapshot.from_bytes(b"this is not a snapshot at all")


def test_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001234.snapshot"
    SAMPLE.write(path)
    loaded = ProducerSnapshot.read(path)
    assert loaded == SAMPLE and loaded.offset == 1234
    ProducerSnapshot(offset=5).write(tmp_path / "00000000000000000005.snapshot")
    assert (tmp_path / "00000000000000000005.snapshot").read_bytes() == EMPTY
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000005.snapshot",
        "00000000000000001234.snapshot",
    ]


def test_corrupt_file_names_path(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.snapshot"
    path.write_bytes(EMPTY[:7])
    with pytest.raises(TruncatedSnapshotError) as e:
        ProducerSnapshot.read(path)
    assert e.value.path == str(path) and e.value.position == 7


@pytest.mark.parametrize("name", ["00000000000000000005.log", "snapshot.snapshot", "00000000000000000005"])
def test_wrong_names(tmp_path: Path, name: str) -> None:
    (tmp_path / "in").mkdir()
    src = tmp_path / "in" / name
    src.write_bytes(EMPTY)
    with pytest.raises(InvalidFileNameError) as e:
        ProducerSnapshot.read(src)
    assert e.value.path == str(src)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(InvalidFileNameError):
        ProducerSnapshot().write(out / name)
    with pytest.raises(InvalidFileNameError):
        ProducerSnapshot(offset=5).write(out / "00000000000000000006.snapshot")
    assert list(out.iterdir()) == []


def test_unencodable_entry_writes_nothing(tmp_path: Path) -> None:
    bad = ProducerSnapshot([ProducerSnapshotEntry(producer_id=2**63, epoch=0)])
    with pytest.raises(ValueError):
        bad.write(tmp_path / "00000000000000000000.snapshot")
    with pytest.raises(ValueError):
        ProducerSnapshot([ProducerSnapshotEntry(producer_id=1, epoch=2**15)]).to_bytes()
    assert list(tmp_path.iterdir()) == []


# ProducerStateManager.java: VERSION_OFFSET 0, CRC_OFFSET = VERSION_OFFSET + 2, PRODUCER_ENTRIES_OFFSET
# = CRC_OFFSET + 4; the ProducerEntry of ProducerSnapshot.json: (field, offset, length, attribute).
ENTRY_FIELDS = [
    ("PRODUCER_ID", 0, 8, "producer_id"),
    ("EPOCH", 8, 2, "epoch"),
    ("LAST_SEQUENCE", 10, 4, "last_sequence"),
    ("LAST_OFFSET", 14, 8, "last_offset"),
    ("OFFSET_DELTA", 22, 4, "offset_delta"),
    ("TIMESTAMP", 26, 8, "timestamp"),
    ("COORDINATOR_EPOCH", 34, 4, "coordinator_epoch"),
    ("CURRENT_TXN_FIRST_OFFSET", 38, 8, "current_txn_first_offset"),
]


def test_offsets_are_kafkas_and_derived_from_the_lengths() -> None:
    assert (ps.VERSION_OFFSET, ps.CRC_OFFSET, ps.PRODUCER_ENTRIES_OFFSET, ps.HEADER_SIZE) == (0, 2, 6, 10)
    assert ps.CRC_OFFSET == ps.VERSION_OFFSET + ps.VERSION_LENGTH
    assert ps.PRODUCER_ENTRIES_OFFSET == ps.CRC_OFFSET + ps.CRC_LENGTH
    assert ps.HEADER_SIZE == ps.PRODUCER_ENTRIES_OFFSET + ps.ENTRY_COUNT_LENGTH
    at = 0
    for name, offset, length, _ in ENTRY_FIELDS:
        assert getattr(ps, f"ENTRY_{name}_OFFSET") == offset == at, name
        assert getattr(ps, f"ENTRY_{name}_LENGTH") == length, name
        at = offset + length
    assert at == ps.ENTRY_SIZE == ProducerSnapshot.ENTRY_SIZE == 46


def test_each_field_is_written_at_its_named_offset() -> None:
    entry = ProducerSnapshotEntry(0x0102030405060708, 0x0A0B, 0x0C0D0E0F, 0x1112131415161718, 0x191A1B1C,
                                  0x2122232425262728, 0x292A2B2C, 0x3132333435363738)
    data = ProducerSnapshot([entry]).to_bytes()
    assert len(data) == ps.HEADER_SIZE + ps.ENTRY_SIZE
    assert struct.unpack_from(">h", data, ps.VERSION_OFFSET)[0] == ps.PRODUCER_SNAPSHOT_VERSION
    assert struct.unpack_from(">I", data, ps.CRC_OFFSET)[0] == crc32c.crc32c(data[ps.PRODUCER_ENTRIES_OFFSET :])
    assert struct.unpack_from(">i", data, ps.PRODUCER_ENTRIES_OFFSET)[0] == 1
    kinds = {2: ">h", 4: ">i", 8: ">q"}
    for name, _, length, attribute in ENTRY_FIELDS:
        (value,) = struct.unpack_from(kinds[length], data, ps.HEADER_SIZE + getattr(ps, f"ENTRY_{name}_OFFSET"))
        assert value == getattr(entry, attribute), name
