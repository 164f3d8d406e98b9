from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats import transaction_index as ti
from migration.formats.errors import CorruptIndexError, InvalidFileNameError, TruncatedError
from migration.formats.transaction_index import AbortedTxn, TransactionIndex, TruncatedIndexError

I64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def indexes(draw: st.DrawFn) -> tuple[int, list[AbortedTxn]]:
    base = draw(st.integers(0, 2**40))
    lasts = sorted(set(draw(st.lists(st.integers(base, 2**62), max_size=20))))
    return base, [AbortedTxn(draw(I64), draw(I64), last, draw(I64)) for last in lasts]


def test_entry_bytes_pinned() -> None:
    txn = AbortedTxn(producer_id=7, first_offset=10, last_offset=20, last_stable_offset=5)
    expected = bytes.fromhex(
        "0000" "0000000000000007" "000000000000000A" "0000000000000014" "0000000000000005"
    )
    assert txn.to_bytes() == expected
    assert len(expected) == 34
    assert TransactionIndex(0, [txn]).to_bytes() == expected


@given(indexes())
def test_round_trip(case: tuple[int, list[AbortedTxn]]) -> None:
    base, entries = case
    index = TransactionIndex(base, entries)
    assert TransactionIndex.from_bytes(index.to_bytes(), base) == index


def test_append_requires_increasing_last_offset() -> None:
    index = TransactionIndex(0, [AbortedTxn(1, 0, 10, 0)])
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 5, 10, 0))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2**63, 5, 11, 0))  # producer id does not fit int64
    index.append(AbortedTxn(2, 5, 11, 0))
    assert len(index) == 2


def test_version_must_be_zero() -> None:
    good = AbortedTxn(1, 2, 3, 4).to_bytes()
    bad = b"\x00\x01" + good[2:]
    with pytest.raises(CorruptIndexError) as e:
        TransactionIndex.from_bytes(good + bad, 0, path="t.txnindex")
    assert e.value.position == 34 and e.value.found == 1 and e.value.path == "t.txnindex"


def test_partial_trailing_entry() -> None:
    data = AbortedTxn(1, 2, 3, 4).to_bytes() + b"\x00" * 10
    with pytest.raises(TruncatedIndexError) as e:
        TransactionIndex.from_bytes(data, 0)
    assert isinstance(e.value, TruncatedError) and isinstance(e.value, CorruptIndexError)
    assert e.value.position == 34
    # Kafka ignores the partial entry.
    assert len(TransactionIndex.from_bytes(data, 0, strict=False)) == 1


def test_sanity_check_last_offset_below_base() -> None:
    data = AbortedTxn(1, 2, 100, 4).to_bytes() + AbortedTxn(1, 2, 99, 4).to_bytes()
    with pytest.raises(CorruptIndexError) as e:
        TransactionIndex.from_bytes(data[34:], 100)
    assert e.value.position == 18
    with pytest.raises(CorruptIndexError) as e:
        TransactionIndex.from_bytes(data, 0)  # sane, but lastOffset decreases
    assert e.value.position == 34 + 18


def test_collect_aborted_txns() -> None:
    index = TransactionIndex(0, [AbortedTxn(1, 0, 10, 0), AbortedTxn(2, 20, 30, 0), AbortedTxn(3, 40, 50, 0)])
    assert [t.producer_id for t in index.collect_aborted_txns(11, 40)] == [2]
    assert [t.producer_id for t in index.collect_aborted_txns(10, 41)] == [1, 2, 3]


def test_file_round_trip_and_names(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000005.txnindex"
    index = TransactionIndex(5, [AbortedTxn(9, 5, 8, 5)])
    index.write(path)
    assert TransactionIndex.read(path) == index
    with pytest.raises(InvalidFileNameError):
        index.write(tmp_path / "00000000000000000006.txnindex")
    with pytest.raises(InvalidFileNameError):
        TransactionIndex.read(tmp_path / "00000000000000000005.index")
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_truncated_file_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(struct.pack(">hqq", 0, 1, 2))
    with pytest.raises(TruncatedError) as e:
        TransactionIndex.read(path)
    assert e.value.path == str(path) and e.value.position == 0


def test_entry_layout_is_kafkas() -> None:
    # AbortedTxn.java: (field, offset, length), TOTAL_SIZE 34
    fields = [("VERSION", 0, 2), ("PRODUCER_ID", 2, 8), ("FIRST_OFFSET", 10, 8), ("LAST_OFFSET", 18, 8),
              ("LAST_STABLE_OFFSET", 26, 8)]
    at = 0
    for name, offset, length in fields:
        assert getattr(ti, f"{name}_OFFSET") == offset == at, name
        assert getattr(ti, f"{name}_LENGTH") == length, name
        at = offset + length
    assert at == ti.ENTRY_SIZE == TransactionIndex.ENTRY_SIZE == 34
    txn = AbortedTxn(producer_id=7, first_offset=100, last_offset=120, last_stable_offset=90)
    data = TransactionIndex(0, [AbortedTxn(1, 2, 3, 4), txn]).to_bytes()
    entry = ti.ENTRY_SIZE  # the second entry
    assert struct.unpack_from(">h", data, entry + ti.VERSION_OFFSET)[0] == ti.ABORTED_TXN_VERSION
    got = [struct.unpack_from(">q", data, entry + getattr(ti, f"{name}_OFFSET"))[0] for name, _, _ in fields[1:]]
    assert got == list(txn)
