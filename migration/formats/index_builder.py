"""Rebuild a segment's offset and time index exactly as Kafka's ``LogSegment.recover`` does
(docs/formats.md §3.7). Pure: no files, the caller supplies the batches it has read."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import Protocol

from migration.formats.index_file import relative_offset
from migration.formats.offset_index import OffsetIndex
from migration.formats.time_index import NO_TIMESTAMP, TimeIndex

DEFAULT_INDEX_INTERVAL_BYTES = 4096


class BatchLike(Protocol):
    """What recovery needs of a batch (v2 batch or v0/v1 shallow entry)."""

    @property
    def position(self) -> int: ...

    @property
    def size_in_bytes(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def max_timestamp(self) -> int: ...


class IndexBuilder:
    """Incremental form of :func:`build_indexes`, for writers that produce a segment batch by
    batch (a streaming rewrite must not keep one object per batch of a 1 GiB segment).

    Feed ``append(position, size, last_offset, max_timestamp)`` in file order, then ``finish()``.
    """

    __slots__ = (
        "base_offset",
        "index_interval_bytes",
        "offset_index",
        "time_index",
        "valid_bytes",
        "_last_index_entry",
        "_max_timestamp_so_far",
        "_offset_of_max_timestamp",
        "_finished",
    )

    def __init__(self, base_offset: int, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES) -> None:
        if index_interval_bytes < 0:
            raise ValueError(f"index.interval.bytes must be >= 0, got {index_interval_bytes}")
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.offset_index = OffsetIndex(base_offset)
        self.time_index = TimeIndex(base_offset)
        self.valid_bytes = 0
        self._last_index_entry = 0
        # Kafka starts from the (reset) time index's last entry: (-1, base offset).
        self._max_timestamp_so_far = NO_TIMESTAMP
        self._offset_of_max_timestamp = base_offset
        self._finished = False

    def append(self, position: int, size_in_bytes: int, last_offset: int, max_timestamp: int) -> None:
        if self._finished:
            raise ValueError("index builder already finished")
        if position != self.valid_bytes:
            raise ValueError(
                f"batch at position {position} does not follow the previous batch"
                f" (expected position {self.valid_bytes})"
            )
        if size_in_bytes <= 0:
            raise ValueError(f"batch at position {position} has size {size_in_bytes}")
        relative_offset(self.base_offset, last_offset)  # Kafka's ensureOffsetInRange
        if max_timestamp > self._max_timestamp_so_far:
            self._max_timestamp_so_far = max_timestamp
            self._offset_of_max_timestamp = last_offset
        # Strictly greater, so the first batch never gets an entry.
        if self.valid_bytes - self._last_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, self.valid_bytes)
            self.time_index.maybe_append(self._max_timestamp_so_far, self._offset_of_max_timestamp)
            self._last_index_entry = self.valid_bytes
        self.valid_bytes += size_in_bytes

    def state(self) -> tuple[int, int, int, int, int]:
        """(valid bytes, position of the last entry, max timestamp so far, its offset, the time
        index's last timestamp): what the compiled core's segment walker continues from
        (:meth:`absorb` takes it back)."""
        return (self.valid_bytes, self._last_index_entry, self._max_timestamp_so_far, self._offset_of_max_timestamp,
                self.time_index.last_entry.timestamp)

    def absorb(self, offset_entries: bytes, time_entries: bytes, valid_bytes: int, last_index_entry: int,
               max_timestamp: int, offset_of_max_timestamp: int) -> None:
        """The effect of many :meth:`append` calls computed elsewhere (the compiled core's
        segment walker, from :meth:`state`): the entries they made, as native int64 pairs
        ((offset, position) and (timestamp, offset), in increasing order), then the state."""
        if self._finished:
            raise ValueError("index builder already finished")
        pairs = array("q")
        pairs.frombytes(offset_entries)
        self.offset_index.extend(pairs[0::2], pairs[1::2])
        pairs = array("q")
        pairs.frombytes(time_entries)
        self.time_index.extend(pairs[0::2], pairs[1::2])
        self.valid_bytes = valid_bytes
        self._last_index_entry = last_index_entry
        self._max_timestamp_so_far = max_timestamp
        self._offset_of_max_timestamp = offset_of_max_timestamp

    def finish(self) -> tuple[OffsetIndex, TimeIndex]:
        """Like Kafka at the end of recovery: the last time entry holds the segment's max timestamp."""
        if not self._finished:
            self.time_index.maybe_append(
                self._max_timestamp_so_far, self._offset_of_max_timestamp, skip_full_check=True
            )
            self._finished = True
        return self.offset_index, self.time_index


def build_indexes(
    batches: Iterable[BatchLike],
    base_offset: int,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
) -> tuple[OffsetIndex, TimeIndex]:
    """The (offset index, time index) ``LogSegment.recover`` writes for these batches.

    Batches must be the segment's valid prefix, contiguous from position 0: recovery pairs
    each entry with ``validBytes`` (the running size), so a gap would yield wrong positions.
    Raises :class:`~migration.formats.offset_index.IndexOffsetOverflowError` when a last
    offset does not fit the index (Kafka splits such a segment instead).
    """
    builder = IndexBuilder(base_offset, index_interval_bytes)
    for batch in batches:
        builder.append(batch.position, batch.size_in_bytes, batch.last_offset, batch.max_timestamp)
    return builder.finish()
