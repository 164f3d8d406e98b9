"""Offset index (``<20-digit base offset>.index``), docs/formats.md §3.

Byte layout (big-endian), a flat array of 8-byte entries, no header::

    offset  size  field
    0       4     relativeOffset  int32  absolute offset - segment base offset
    4       4     position        int32  byte position of a batch in the .log file

Entry count = floor(file length / 8). A file of an active segment after a crash is still
preallocated (zero-filled tail); like kafka-dump-log, reading stops at the first entry i > 0
whose offset equals the base offset. A finished segment's index is trimmed to entries x 8
bytes, which is what :meth:`OffsetIndex.to_bytes` produces.
"""

from __future__ import annotations

import bisect
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import ClassVar, NamedTuple, Self

from migration.formats.errors import CorruptIndexError, InvalidFileNameError
from migration.formats.fileio import BytesLike, StrPath, atomic_write, offset_from_path, read_bytes
from migration.formats.names import INDEX_FILE_SUFFIX, INT64_MAX, TMP_FILE_SUFFIX

INT32_MAX = (1 << 31) - 1

_ENTRY = struct.Struct(">ii")


class IndexOffsetOverflowError(ValueError):
    """An offset that cannot be stored relative to the base offset (Kafka's
    ``IndexOffsetOverflowException``): the segment must be split instead."""


class InvalidOffsetError(ValueError):
    """An append that does not respect the index order (Kafka's ``InvalidOffsetException``)."""


class IndexFullError(ValueError):
    """An append to an index that reached its ``segment.index.bytes`` capacity."""


class OffsetPosition(NamedTuple):
    offset: int  # absolute offset
    position: int


def relative_offset(base_offset: int, offset: int) -> int:
    """``offset - base_offset`` if it fits an int32 index slot (Kafka's ``toRelative``)."""
    rel = offset - base_offset
    if rel < 0 or rel > INT32_MAX:
        raise IndexOffsetOverflowError(
            f"offset {offset} cannot be stored relative to base offset {base_offset}"
        )
    return rel


def check_base_offset(base_offset: int) -> None:
    if not 0 <= base_offset <= INT64_MAX:
        raise ValueError(f"base offset {base_offset} is not a non-negative int64")


def preallocated_entry_count(data_len: int, entry_size: int, relative_offsets: Iterable[int]) -> int:
    """Entries before the zero-filled preallocated tail (kafka-dump-log's rule: stop at the
    first entry i > 0 whose relative offset is 0)."""
    for i, rel in enumerate(relative_offsets):
        if i > 0 and rel == 0:
            return i
    return data_len // entry_size


class IndexFile(ABC):
    """What the offset and time index share, as Kafka's ``AbstractIndex`` does: fixed-size
    entries relative to the segment's base offset, a preallocated zero-filled tail recognised
    on read, the file length for the sanity checks, and the trimmed crash-safe write.
    Subclasses give ``ENTRY``, ``FILE_SUFFIX``, ``OFFSET_FIELD`` (where the relative offset is
    in an unpacked entry) and ``_load``."""

    ENTRY: ClassVar[struct.Struct]
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
        unpacked = list(cls.ENTRY.iter_unpack(whole))
        count = preallocated_entry_count(len(whole), cls.ENTRY_SIZE, (e[cls.OFFSET_FIELD] for e in unpacked))
        index.ignored_tail_entries = len(unpacked) - count
        index._load(unpacked[:count])
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
    def _load(self, entries: list[tuple[int, int]]) -> None: ...

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
        atomic_write(path, self.to_bytes(), tmp_suffix=tmp_suffix)


class OffsetIndex(IndexFile):
    """The offset index of one segment: sorted (absolute offset, position) entries."""

    ENTRY = _ENTRY
    ENTRY_SIZE = _ENTRY.size
    FILE_SUFFIX = INDEX_FILE_SUFFIX
    OFFSET_FIELD = 0

    def __init__(
        self,
        base_offset: int,
        entries: Iterable[tuple[int, int]] = (),
        *,
        max_index_size: int | None = None,
    ) -> None:
        super().__init__(base_offset, max_index_size=max_index_size)
        self._positions: list[int] = []
        for offset, position in entries:
            self.append(offset, position)

    def _load(self, entries: list[tuple[int, int]]) -> None:
        base = self.base_offset
        for rel, position in entries:
            self._offsets.append(base + rel)
            self._positions.append(position)

    # -- queries -------------------------------------------------------------------------

    @property
    def entries(self) -> tuple[OffsetPosition, ...]:
        return tuple(OffsetPosition(o, p) for o, p in zip(self._offsets, self._positions, strict=True))

    def __iter__(self) -> Iterator[OffsetPosition]:
        return iter(self.entries)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OffsetIndex):
            return NotImplemented
        return (self.base_offset, self._offsets, self._positions) == (
            other.base_offset,
            other._offsets,
            other._positions,
        )

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty (Kafka's ``lastOffset``)."""
        return self._offsets[-1] if self._offsets else self.base_offset

    def is_full(self) -> bool:
        return self.max_entries is not None and len(self) >= self.max_entries

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, else (base offset, 0)."""
        i = bisect.bisect_right(self._offsets, target_offset)
        if i == 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self._offsets[i - 1], self._positions[i - 1])

    # -- mutation ------------------------------------------------------------------------

    def append(self, offset: int, position: int) -> None:
        """Append like Kafka's ``OffsetIndex.append``: offsets strictly increase and must fit."""
        if self.is_full():
            raise IndexFullError(f"attempt to append to a full index (size = {len(self)})")
        if self._offsets and offset <= self._offsets[-1]:
            raise InvalidOffsetError(
                f"attempt to append an offset ({offset}) to position {len(self)} no larger than"
                f" the last offset appended ({self._offsets[-1]})"
            )
        relative_offset(self.base_offset, offset)
        if not 0 <= position <= INT32_MAX:
            raise ValueError(f"position {position} is not a non-negative int32")
        self._offsets.append(offset)
        self._positions.append(position)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset`` (Kafka's ``truncateTo``)."""
        i = bisect.bisect_left(self._offsets, offset)
        del self._offsets[i:], self._positions[i:]

    # -- validation ----------------------------------------------------------------------

    def sanity_check(self) -> None:
        """Kafka's ``OffsetIndex.sanityCheck`` (§3.9)."""
        if self._offsets and self._offsets[-1] < self.base_offset:
            raise CorruptIndexError(
                "corrupt index: last offset is smaller than the base offset",
                path=self.path,
                position=(len(self) - 1) * self.ENTRY_SIZE,
                expected=f">= {self.base_offset}",
                found=self._offsets[-1],
            )
        length = self._length()
        if length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"index file size {length} is not a multiple of {self.ENTRY_SIZE}",
                path=self.path,
                position=length - length % self.ENTRY_SIZE,
                expected=f"multiple of {self.ENTRY_SIZE} bytes",
                found=length,
            )

    def check_order(self) -> None:
        """Offsets strictly increase, positions are non-negative and never decrease."""
        prev_offset, prev_position = None, 0
        for i, (offset, position) in enumerate(zip(self._offsets, self._positions, strict=True)):
            where = i * self.ENTRY_SIZE
            if offset < self.base_offset:
                raise CorruptIndexError(
                    "negative relative offset", path=self.path, position=where,
                    expected=f">= {self.base_offset}", found=offset,
                )
            if prev_offset is not None and offset <= prev_offset:
                raise CorruptIndexError(
                    "offsets do not strictly increase", path=self.path, position=where,
                    expected=f"> {prev_offset}", found=offset,
                )
            if position < prev_position:
                raise CorruptIndexError(
                    "positions decrease", path=self.path, position=where + 4,
                    expected=f">= {prev_position}", found=position,
                )
            prev_offset, prev_position = offset, position

    # -- writing -------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The trimmed file: entries x 8 bytes."""
        out = bytearray(len(self) * self.ENTRY_SIZE)
        base = self.base_offset
        for i, (offset, position) in enumerate(zip(self._offsets, self._positions, strict=True)):
            _ENTRY.pack_into(out, i * self.ENTRY_SIZE, offset - base, position)
        return bytes(out)



def check_file_name(path: StrPath, suffix: str, base_offset: int) -> None:
    named = offset_from_path(path, suffix)
    if named != base_offset:
        raise InvalidFileNameError(
            "file name does not carry the base offset",
            path=path,
            expected=base_offset,
            found=named,
        )
