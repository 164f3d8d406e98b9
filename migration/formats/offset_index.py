"""Offset index (``<20-digit base offset>.index``), docs/formats.md §3.

Byte layout (big-endian), a flat array of 8-byte entries (ENTRY_SIZE), no header; each offset
is the previous one plus the previous field's length (Kafka's OffsetIndex.java: ENTRY_SIZE 8)::

    offset  size  field                                                          offset name here
    0       4     relativeOffset  int32  absolute offset - segment base offset   RELATIVE_OFFSET_OFFSET
    4       4     position        int32  byte position of a batch in the .log    POSITION_OFFSET

Entry count = floor(file length / 8). A file of an active segment after a crash is still
preallocated (zero-filled tail); like kafka-dump-log, reading stops at the first entry i > 0
whose offset equals the base offset. A finished segment's index is trimmed to entries x 8
bytes, which is what :meth:`OffsetIndex.to_bytes` produces. What the offset and time index
share is in :mod:`.index_file`.
"""

from __future__ import annotations

import bisect
import operator
import struct
from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from typing import NamedTuple

from migration.formats.errors import CorruptIndexError
from migration.formats.index_file import (
    INT32_MAX,
    EntryIndex,
    IndexFullError,
    InvalidOffsetError,
    ascending,
    relative_offset,
)
from migration.formats.names import INDEX_FILE_SUFFIX

RELATIVE_OFFSET_OFFSET = 0
RELATIVE_OFFSET_LENGTH = 4
POSITION_OFFSET = RELATIVE_OFFSET_OFFSET + RELATIVE_OFFSET_LENGTH
POSITION_LENGTH = 4
ENTRY_SIZE = POSITION_OFFSET + POSITION_LENGTH

_ENTRY = struct.Struct(">ii")  # relative offset, position: ENTRY_SIZE bytes


class OffsetPosition(NamedTuple):
    offset: int  # absolute offset
    position: int


class OffsetIndex(EntryIndex[OffsetPosition]):
    """The offset index of one segment: sorted (absolute offset, position) entries."""

    ENTRY_TUPLE = OffsetPosition
    ENTRY = _ENTRY
    FIELDS = ((RELATIVE_OFFSET_OFFSET, RELATIVE_OFFSET_LENGTH), (POSITION_OFFSET, POSITION_LENGTH))
    ENTRY_SIZE = ENTRY_SIZE
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

    def _load(self, columns: list[list[int]]) -> None:
        rels, positions = columns
        self._offsets.extend(map(self.base_offset.__add__, rels) if self.base_offset else rels)
        self._positions.extend(positions)

    def _columns(self) -> tuple[list[int], list[int]]:
        return self._offsets, self._positions

    # -- queries -------------------------------------------------------------------------

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

    def extend(self, offsets: Sequence[int], positions: Sequence[int]) -> None:
        """Many :meth:`append` calls for entries already in increasing order (offsets and
        positions both; the compiled core's segment walker makes them so): the first and the
        last are checked as append checks them, the rest taken as they are."""
        n = len(offsets)
        if n <= 2 or self.max_entries is not None:
            for offset, position in zip(offsets, positions, strict=True):
                self.append(offset, position)
            return
        self.append(offsets[0], positions[0])
        relative_offset(self.base_offset, offsets[-1])
        if not 0 <= positions[-1] <= INT32_MAX:
            raise ValueError(f"position {positions[-1]} is not a non-negative int32")
        self._offsets.extend(offsets[1:])
        self._positions.extend(positions[1:])

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
        offsets, positions = self._offsets, self._positions
        if (not offsets or (offsets[0] >= self.base_offset and positions[0] >= 0)) \
                and ascending(offsets, strictly=True) and ascending(positions, strictly=False):
            return
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
                    "positions decrease", path=self.path, position=where + POSITION_OFFSET,
                    expected=f">= {prev_position}", found=position,
                )
            prev_offset, prev_position = offset, position

    # -- writing -------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The trimmed file: entries x 8 bytes."""
        # One pack of every field (_ENTRY's layout, repeated): no Python step per entry.
        relative = map(operator.sub, self._offsets, repeat(self.base_offset))
        fields = chain.from_iterable(zip(relative, self._positions, strict=True))
        return struct.pack(f"{_ENTRY.format[0]}{len(self) * _ENTRY.format[1:]}", *fields)
