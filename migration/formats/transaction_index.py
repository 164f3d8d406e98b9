"""Transaction index (``<20-digit base offset>.txnindex``), docs/formats.md §3.11.

Byte layout (big-endian), a flat array of 34-byte ``AbortedTxn`` entries (ENTRY_SIZE, Kafka's
TOTAL_SIZE), no header, no preallocation (the file exists only once an aborted transaction's
marker is in the segment). Each offset is the previous one plus the previous field's length, as
AbortedTxn.java derives them (its lengths are named ``_SIZE``, here ``_LENGTH``)::

    offset  size  field                                                 offset name here
    0       2     version           int16  0                            VERSION_OFFSET
    2       8     producerId        int64                               PRODUCER_ID_OFFSET
    10      8     firstOffset       int64                               FIRST_OFFSET_OFFSET
    18      8     lastOffset        int64  offset of the ABORT marker   LAST_OFFSET_OFFSET
    26      8     lastStableOffset  int64  LSO at the time of the abort LAST_STABLE_OFFSET_OFFSET

lastOffset strictly increases from entry to entry.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from migration.formats.errors import CorruptIndexError, TruncatedError
from migration.formats.fileio import BytesLike, StrPath, durable_replace, offset_from_path, read_bytes
from migration.formats.index_file import check_base_offset, check_file_name
from migration.formats.names import INT64_MAX, TMP_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX

ABORTED_TXN_VERSION = 0
INT64_MIN = -(1 << 63)

VERSION_OFFSET = 0
VERSION_LENGTH = 2
PRODUCER_ID_OFFSET = VERSION_OFFSET + VERSION_LENGTH
PRODUCER_ID_LENGTH = 8
FIRST_OFFSET_OFFSET = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH
FIRST_OFFSET_LENGTH = 8
LAST_OFFSET_OFFSET = FIRST_OFFSET_OFFSET + FIRST_OFFSET_LENGTH
LAST_OFFSET_LENGTH = 8
LAST_STABLE_OFFSET_OFFSET = LAST_OFFSET_OFFSET + LAST_OFFSET_LENGTH
LAST_STABLE_OFFSET_LENGTH = 8
ENTRY_SIZE = LAST_STABLE_OFFSET_OFFSET + LAST_STABLE_OFFSET_LENGTH

_ENTRY = struct.Struct(">hqqqq")  # the fields above in order: ENTRY_SIZE bytes


class TruncatedIndexError(TruncatedError, CorruptIndexError):
    """A partial trailing entry: both truncated data and a corrupt index."""

    kind = "truncated index"


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        for name, value in zip(self._fields, self, strict=True):
            if not INT64_MIN <= value <= INT64_MAX:
                raise ValueError(f"{name} {value} is not an int64")
        return _ENTRY.pack(ABORTED_TXN_VERSION, *self)


class TransactionIndex:
    """The aborted transactions whose markers lie in one segment."""

    ENTRY_SIZE = ENTRY_SIZE

    def __init__(self, base_offset: int, entries: Iterable[AbortedTxn] = ()) -> None:
        check_base_offset(base_offset)
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] = []
        self.path: str | None = None
        for txn in entries:
            self.append(txn)

    @classmethod
    def from_bytes(
        cls,
        data: BytesLike,
        base_offset: int,
        *,
        path: StrPath | None = None,
        strict: bool = True,
    ) -> TransactionIndex:
        """Parse the file. Kafka silently ignores a partial trailing entry; ``strict`` reports
        it, and also checks :meth:`sanity_check` and :meth:`check_order`. A version other than 0
        is always an error."""
        view = memoryview(data).cast("B")
        index = cls(base_offset)
        index.path = None if path is None else str(path)
        size = cls.ENTRY_SIZE
        whole = len(view) - len(view) % size
        if strict and whole != len(view):
            raise TruncatedIndexError(
                "transaction index ends inside an entry",
                path=path,
                position=whole,
                expected=f"{size} bytes",
                found=f"{len(view) - whole} bytes",
            )
        for i, (version, *fields) in enumerate(_ENTRY.iter_unpack(view[:whole])):
            if version != ABORTED_TXN_VERSION:
                raise CorruptIndexError(
                    "unexpected aborted transaction version",
                    path=path,
                    position=i * size + VERSION_OFFSET,
                    expected=ABORTED_TXN_VERSION,
                    found=version,
                )
            index._entries.append(AbortedTxn(*fields))
        if strict:
            index.sanity_check()
            index.check_order()
        return index

    @classmethod
    def read(cls, path: StrPath, base_offset: int | None = None, *, strict: bool = True) -> TransactionIndex:
        named = offset_from_path(path, TXN_INDEX_FILE_SUFFIX)
        if base_offset is None:
            base_offset = named
        return cls.from_bytes(read_bytes(path), base_offset, path=path, strict=strict)

    @property
    def entries(self) -> tuple[AbortedTxn, ...]:
        return tuple(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(tuple(self._entries))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransactionIndex):
            return NotImplemented
        return (self.base_offset, self._entries) == (other.base_offset, other._entries)

    def __repr__(self) -> str:
        return f"TransactionIndex(base_offset={self.base_offset}, entries={len(self)})"

    def append(self, txn: AbortedTxn) -> None:
        """Kafka's ``TransactionIndex.append``: lastOffset must strictly increase."""
        txn.to_bytes()  # range check before mutating
        if self._entries and txn.last_offset <= self._entries[-1].last_offset:
            raise ValueError(
                "the last offset of appended transactions must increase sequentially, but"
                f" {txn.last_offset} is not greater than current last offset"
                f" {self._entries[-1].last_offset}"
            )
        self._entries.append(txn)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset), as Kafka's
        ``collectAbortedTxns`` selects them."""
        return [
            t for t in self._entries if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset
        ]

    def sanity_check(self) -> None:
        """Kafka's ``TransactionIndex.sanityCheck``: no lastOffset below the base offset."""
        for i, txn in enumerate(self._entries):
            if txn.last_offset < self.base_offset:
                raise CorruptIndexError(
                    "last offset of aborted transaction is less than the index base offset",
                    path=self.path,
                    position=i * self.ENTRY_SIZE + LAST_OFFSET_OFFSET,
                    expected=f">= {self.base_offset}",
                    found=txn.last_offset,
                )

    def check_order(self) -> None:
        for i in range(1, len(self._entries)):
            prev, cur = self._entries[i - 1].last_offset, self._entries[i].last_offset
            if cur <= prev:
                raise CorruptIndexError(
                    "lastOffset does not strictly increase",
                    path=self.path,
                    position=i * self.ENTRY_SIZE + LAST_OFFSET_OFFSET,
                    expected=f"> {prev}",
                    found=cur,
                )

    def to_bytes(self) -> bytes:
        out = bytearray(len(self._entries) * self.ENTRY_SIZE)
        for i, txn in enumerate(self._entries):
            _ENTRY.pack_into(out, i * self.ENTRY_SIZE, ABORTED_TXN_VERSION, *txn)
        return bytes(out)

    def write(self, path: StrPath, *, tmp_suffix: str = TMP_FILE_SUFFIX) -> None:
        check_file_name(path, TXN_INDEX_FILE_SUFFIX, self.base_offset)
        durable_replace(path, self.to_bytes(), tmp_suffix=tmp_suffix)
