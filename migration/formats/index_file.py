"""What Kafka's index files share (``AbstractIndex``), docs/formats.md §3: entries of a fixed
size whose offset is relative to the segment's base offset (an int32), a preallocated
zero-filled tail recognised on read, the sanity checks on the file length, and the trimmed
crash-safe write. :mod:`.offset_index` and :mod:`.time_index` give the entry layouts.
"""

from __future__ import annotations

import operator
import struct
import sys
from abc import ABC, abstractmethod
from array import array
from collections.abc import Callable, Iterator, Sequence
from itertools import islice, starmap
from typing import ClassVar, Generic, Self, TypeVar

from migration.formats.errors import InvalidFileNameError
from migration.formats.fileio import BytesLike, StrPath, durable_replace, offset_from_path, read_bytes
from migration.formats.names import INT64_MAX, TMP_FILE_SUFFIX

INT32_MAX = (1 << 31) - 1


class IndexOffsetOverflowError(ValueError):
    """An offset that cannot be stored relative to the base offset (Kafka's
    ``IndexOffsetOverflowException``): the segment must be split instead."""


class InvalidOffsetError(ValueError):
    """An append that does not respect the index order (Kafka's ``InvalidOffsetException``)."""


class IndexFullError(ValueError):
    """An append to an index that reached its ``segment.index.bytes`` capacity."""


def relative_offset(base_offset: int, offset: int) -> int:
    """``offset - base_offset`` if it fits an int32 index slot (Kafka's ``toRelative``)."""
    rel = offset - base_offset
    if rel < 0 or rel > INT32_MAX:
        raise IndexOffsetOverflowError(
            f"offset {offset} cannot be stored relative to base offset {base_offset}"
        )
    return rel


def ascending(values: Sequence[int], *, strictly: bool) -> bool:
    """Each value above (``strictly``) or at least its predecessor, checked without a Python
    step per value: the order checks' usual case (their entry loops only name a fault)."""
    return all(map(operator.lt if strictly else operator.le, values, islice(values, 1, None)))


def check_base_offset(base_offset: int) -> None:
    if not 0 <= base_offset <= INT64_MAX:
        raise ValueError(f"base offset {base_offset} is not a non-negative int64")


def preallocated_entry_count(relative_offsets: Sequence[int]) -> int:
    """Entries before the zero-filled preallocated tail (kafka-dump-log's rule: stop at the
    first entry i > 0 whose relative offset is 0), given every entry's relative offset."""
    try:
        return relative_offsets.index(0, 1)
    except ValueError:
        return len(relative_offsets)


# array typecodes of the signed integers of 4 and 8 bytes (C's int and long long here)
_SIGNED = {array(code).itemsize: code for code in ("q", "l", "i")}


def entry_columns(data: memoryview, fields: Sequence[tuple[int, int]], entry_size: int) -> list[list[int]]:
    """The fields of a flat array of big-endian entries, one list of ints per field, without
    a Python step per entry: each field's bytes are gathered with strided slices and read as
    one array of signed integers. ``fields`` are (offset in the entry, length) pairs;
    ``data`` holds whole entries."""
    n = len(data) // entry_size
    columns = []
    for offset, length in fields:
        packed = bytearray(length * n)
        for j in range(length):
            packed[j::length] = data[offset + j :: entry_size]
        values = array(_SIGNED[length], packed)
        if sys.byteorder == "little":
            values.byteswap()
        columns.append(values.tolist())
    return columns


class IndexFile(ABC):
    """What the offset and time index share, as Kafka's ``AbstractIndex`` does: fixed-size
    entries relative to the segment's base offset, a preallocated zero-filled tail recognised
    on read, the file length for the sanity checks, the trimmed crash-safe write, and the
    entries as pairs and for equality. Subclasses give ``ENTRY``, ``FIELDS`` (each field's
    offset and length in an entry, in ``ENTRY``'s order), ``FILE_SUFFIX``, ``OFFSET_FIELD``
    (where the relative offset is in an unpacked entry), ``_load`` and ``_columns``; through
    :class:`EntryIndex` their entries read as named tuples."""

    ENTRY: ClassVar[struct.Struct]
    FIELDS: ClassVar[tuple[tuple[int, int], ...]]
    ENTRY_SIZE: ClassVar[int]
    FILE_SUFFIX: ClassVar[str]
    OFFSET_FIELD: ClassVar[int]

    def __init__(self, base_offset: int, *, max_index_size: int | None = None) -> None:
        check_base_offset(base_offset)
        self.base_offset = base_offset
        # Capacity from segment.index.bytes; None = unbounded (an offline rebuild has no mmap).
        self.max_entries = None if max_index_size is None else max_index_size // self.ENTRY_SIZE
        self._offsets: list[int] = []
        # Set when the index comes from a file: what sanity_check inspects, and where errors point.
        self.path: str | None = None
        self.file_length: int | None = None
        self.ignored_tail_entries = 0

    @classmethod
    def from_bytes(cls, data: BytesLike, base_offset: int, *, path: StrPath | None = None,
                   strict: bool = True) -> Self:
        """Parse an index file's bytes.

        ``strict`` runs :meth:`sanity_check` (Kafka's rule) and :meth:`check_order` (what
        Kafka's writer guarantees); without it the entries are loaded as Kafka loads them.
        """
        view = memoryview(data).cast("B")
        index = cls(base_offset)
        index.path = None if path is None else str(path)
        index.file_length = len(view)
        whole = view[: len(view) - len(view) % cls.ENTRY_SIZE]
        columns = entry_columns(whole, cls.FIELDS, cls.ENTRY_SIZE)
        total = len(columns[cls.OFFSET_FIELD])
        count = preallocated_entry_count(columns[cls.OFFSET_FIELD])
        index.ignored_tail_entries = total - count
        index._load([c[:count] if count < total else c for c in columns])
        if strict:
            index.sanity_check()
            index.check_order()
        return index

    @classmethod
    def read(cls, path: StrPath, base_offset: int | None = None, *, strict: bool = True) -> Self:
        """Read ``<base offset><suffix>``; the base offset comes from the file name unless given."""
        named = offset_from_path(path, cls.FILE_SUFFIX)
        return cls.from_bytes(read_bytes(path), named if base_offset is None else base_offset, path=path,
                              strict=strict)

    @abstractmethod
    def _load(self, columns: list[list[int]]) -> None:
        """Take the entries read from a file: one list per field, in ``FIELDS`` order."""

    @abstractmethod
    def _columns(self) -> tuple[list[int], list[int]]:
        """The two fields of every entry, in the file's field order, the offset absolute."""

    def pairs(self) -> list[tuple[int, int]]:
        """The entries as plain tuples in the file's field order, the offset absolute."""
        return list(zip(*self._columns(), strict=True))

    def __eq__(self, other: object) -> bool:
        # Another kind of index is not equal (NotImplemented both ways: identity decides).
        if not isinstance(other, type(self)):
            return NotImplemented
        return (self.base_offset, *self._columns()) == (other.base_offset, *other._columns())

    @abstractmethod
    def sanity_check(self) -> None: ...

    @abstractmethod
    def check_order(self) -> None: ...

    @abstractmethod
    def to_bytes(self) -> bytes: ...

    def __len__(self) -> int:
        return len(self._offsets)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_offset={self.base_offset}, entries={len(self)})"

    def _length(self) -> int:
        return len(self) * self.ENTRY_SIZE if self.file_length is None else self.file_length

    def write(self, path: StrPath, *, tmp_suffix: str = TMP_FILE_SUFFIX) -> None:
        """Write the trimmed index crash-safely; the name must carry this base offset."""
        check_file_name(path, self.FILE_SUFFIX, self.base_offset)
        durable_replace(path, self.to_bytes(), tmp_suffix=tmp_suffix)


E = TypeVar("E", bound=tuple[int, int])  # an entry as the queries give it (a NamedTuple)


class EntryIndex(IndexFile, Generic[E]):
    """An index whose entries read as ``ENTRY_TUPLE`` (OffsetPosition, TimestampOffset): a
    generic step of its own, so that :class:`IndexFile` stays a plain type for callers."""

    ENTRY_TUPLE: Callable[[int, int], E]

    @property
    def entries(self) -> tuple[E, ...]:
        return tuple(starmap(self.ENTRY_TUPLE, zip(*self._columns(), strict=True)))

    def __iter__(self) -> Iterator[E]:
        return iter(self.entries)


def check_file_name(path: StrPath, suffix: str, base_offset: int) -> None:
    named = offset_from_path(path, suffix)
    if named != base_offset:
        raise InvalidFileNameError(
            "file name does not carry the base offset",
            path=path,
            expected=base_offset,
            found=named,
        )
