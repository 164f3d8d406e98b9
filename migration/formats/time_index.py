"""Time index (``<20-digit base offset>.timeindex``), docs/formats.md §3.3, §3.6, §3.9.

Byte layout (big-endian), a flat array of 12-byte entries (ENTRY_SIZE), no header; each offset
is the previous one plus the previous field's length (Kafka's TimeIndex.java: ENTRY_SIZE 12)::

    offset  size  field                                                              offset name here
    0       8     timestamp       int64  largest timestamp seen up to this entry (ms) TIMESTAMP_OFFSET
    8       4     relativeOffset  int32  offset - base offset of the batch holding it RELATIVE_OFFSET_OFFSET

An entry (T, O) means: the largest timestamp in the segment up to and including the batch
whose last offset is O is T. Timestamps strictly increase between entries, offsets never
decrease. Like the offset index, a preallocated zero tail ends at the first entry i > 0 whose
offset equals the base offset.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from migration.formats.errors import CorruptIndexError
from migration.formats.index_file import (
    EntryIndex,
    IndexFullError,
    InvalidOffsetError,
    ascending,
    relative_offset,
)
from migration.formats.names import TIME_INDEX_FILE_SUFFIX

NO_TIMESTAMP = -1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

TIMESTAMP_OFFSET = 0
TIMESTAMP_LENGTH = 8
RELATIVE_OFFSET_OFFSET = TIMESTAMP_OFFSET + TIMESTAMP_LENGTH
RELATIVE_OFFSET_LENGTH = 4
ENTRY_SIZE = RELATIVE_OFFSET_OFFSET + RELATIVE_OFFSET_LENGTH

_ENTRY = struct.Struct(">qi")  # timestamp, relative offset: ENTRY_SIZE bytes


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int  # absolute offset


class TimeIndex(EntryIndex[TimestampOffset]):
    """The time index of one segment."""

    ENTRY_TUPLE = TimestampOffset
    ENTRY = _ENTRY
    FIELDS = ((TIMESTAMP_OFFSET, TIMESTAMP_LENGTH), (RELATIVE_OFFSET_OFFSET, RELATIVE_OFFSET_LENGTH))
    ENTRY_SIZE = ENTRY_SIZE
    FILE_SUFFIX = TIME_INDEX_FILE_SUFFIX
    OFFSET_FIELD = 1

    def __init__(
        self,
        base_offset: int,
        entries: Iterable[tuple[int, int]] = (),
        *,
        max_index_size: int | None = None,
    ) -> None:
        super().__init__(base_offset, max_index_size=max_index_size)
        self._timestamps: list[int] = []
        for timestamp, offset in entries:
            if not self.maybe_append(timestamp, offset):
                # A constructor argument that would be silently dropped is a caller bug.
                raise InvalidOffsetError(
                    f"entry ({timestamp}, {offset}) does not increase the timestamp of the last entry"
                )

    def _load(self, columns: list[list[int]]) -> None:
        timestamps, rels = columns
        self._timestamps.extend(timestamps)
        self._offsets.extend(map(self.base_offset.__add__, rels) if self.base_offset else rels)

    def _columns(self) -> tuple[list[int], list[int]]:
        return self._timestamps, self._offsets

    # -- queries -------------------------------------------------------------------------

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base offset) when empty (Kafka's ``lastEntry``)."""
        if not self._offsets:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[-1], self._offsets[-1])

    def is_full(self) -> bool:
        # The last slot is reserved for the entry written at roll/close (§3.4).
        return self.max_entries is not None and len(self) >= self.max_entries - 1

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, else (-1, base offset)."""
        i = bisect.bisect_right(self._timestamps, target_timestamp)
        if i == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[i - 1], self._offsets[i - 1])

    # -- mutation ------------------------------------------------------------------------

    def extend(self, timestamps: Sequence[int], offsets: Sequence[int]) -> None:
        """Many :meth:`maybe_append` calls that each append (timestamps strictly increasing
        from above the last entry's, offsets increasing: the compiled core's segment walker
        makes them so): the first and the last are checked as maybe_append checks them."""
        n = len(timestamps)
        if n <= 2 or self.max_entries is not None:
            for timestamp, offset in zip(timestamps, offsets, strict=True):
                self.maybe_append(timestamp, offset)
            return
        if not self.maybe_append(timestamps[0], offsets[0]):
            raise InvalidOffsetError(f"timestamp {timestamps[0]} does not follow the last entry's")
        relative_offset(self.base_offset, offsets[-1])
        if not INT64_MIN <= timestamps[-1] <= INT64_MAX:
            raise ValueError(f"timestamp {timestamps[-1]} is not an int64")
        self._timestamps.extend(timestamps[1:])
        self._offsets.extend(offsets[1:])

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Kafka's ``TimeIndex.maybeAppend`` (§3.6). Returns whether an entry was added."""
        if not skip_full_check and self.is_full():
            raise IndexFullError(f"attempt to append to a full time index (size = {len(self)})")
        if not INT64_MIN <= timestamp <= INT64_MAX:
            raise ValueError(f"timestamp {timestamp} is not an int64")
        last = self.last_entry
        if self._offsets and offset < last.offset:
            raise InvalidOffsetError(
                f"attempt to append an offset ({offset}) to slot {len(self)} no larger than"
                f" the last offset appended ({last.offset})"
            )
        if self._offsets and timestamp < last.timestamp:
            raise InvalidOffsetError(
                f"attempt to append a timestamp ({timestamp}) to slot {len(self)} no larger than"
                f" the last timestamp appended ({last.timestamp})"
            )
        # Equal timestamps (a roll/close re-appending the last entry) are silently skipped,
        # and so is -1 on an empty index: v0 data leaves the time index empty.
        if timestamp > last.timestamp:
            relative_offset(self.base_offset, offset)
            self._timestamps.append(timestamp)
            self._offsets.append(offset)
            return True
        return False

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset`` (Kafka's ``truncateTo``)."""
        i = bisect.bisect_left(self._offsets, offset)
        del self._timestamps[i:], self._offsets[i:]

    # -- validation ----------------------------------------------------------------------

    def sanity_check(self) -> None:
        """Kafka's ``TimeIndex.sanityCheck`` (§3.9)."""
        last = (len(self) - 1) * self.ENTRY_SIZE
        if self._offsets and self._timestamps[-1] < self._timestamps[0]:
            raise CorruptIndexError(
                "corrupt time index: last timestamp is smaller than the first timestamp",
                path=self.path,
                position=last,
                expected=f">= {self._timestamps[0]}",
                found=self._timestamps[-1],
            )
        if self._offsets and self._offsets[-1] < self.base_offset:
            raise CorruptIndexError(
                "corrupt time index: last offset is smaller than the base offset",
                path=self.path,
                position=last + RELATIVE_OFFSET_OFFSET,
                expected=f">= {self.base_offset}",
                found=self._offsets[-1],
            )
        length = self._length()
        if length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"time index file size {length} is not a multiple of {self.ENTRY_SIZE}",
                path=self.path,
                position=length - length % self.ENTRY_SIZE,
                expected=f"multiple of {self.ENTRY_SIZE} bytes",
                found=length,
            )

    def check_order(self) -> None:
        """Timestamps strictly increase, offsets never decrease nor precede the base offset."""
        timestamps, offsets = self._timestamps, self._offsets
        if (not offsets or offsets[0] >= self.base_offset) \
                and ascending(timestamps, strictly=True) and ascending(offsets, strictly=False):
            return
        prev: TimestampOffset | None = None
        for i, (timestamp, offset) in enumerate(zip(self._timestamps, self._offsets, strict=True)):
            where = i * self.ENTRY_SIZE
            if offset < self.base_offset:
                raise CorruptIndexError(
                    "negative relative offset", path=self.path, position=where + RELATIVE_OFFSET_OFFSET,
                    expected=f">= {self.base_offset}", found=offset,
                )
            if prev is not None and timestamp <= prev.timestamp:
                raise CorruptIndexError(
                    "timestamps do not strictly increase", path=self.path, position=where,
                    expected=f"> {prev.timestamp}", found=timestamp,
                )
            if prev is not None and offset < prev.offset:
                raise CorruptIndexError(
                    "offsets decrease", path=self.path, position=where + RELATIVE_OFFSET_OFFSET,
                    expected=f">= {prev.offset}", found=offset,
                )
            prev = TimestampOffset(timestamp, offset)

    # -- writing -------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The trimmed file: entries x 12 bytes."""
        out = bytearray(len(self) * self.ENTRY_SIZE)
        base = self.base_offset
        for i, (timestamp, offset) in enumerate(zip(self._timestamps, self._offsets, strict=True)):
            _ENTRY.pack_into(out, i * self.ENTRY_SIZE, timestamp, offset - base)
        return bytes(out)
