"""Rebuild a segment's offset and time index exactly as Kafka's ``LogSegment.recover`` does
(kafka-formats.md §3.7). Pure: no files, the caller supplies the batches it has read."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from .offset_index import OffsetIndex, relative_offset
from .time_index import NO_TIMESTAMP, TimeIndex

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
    if index_interval_bytes < 0:
        raise ValueError(f"index.interval.bytes must be >= 0, got {index_interval_bytes}")
    offset_index = OffsetIndex(base_offset)
    time_index = TimeIndex(base_offset)
    valid_bytes = 0
    last_index_entry = 0
    # Kafka starts from the (reset) time index's last entry: (-1, base offset).
    max_timestamp_so_far = NO_TIMESTAMP
    offset_of_max_timestamp = base_offset
    for batch in batches:
        if batch.position != valid_bytes:
            raise ValueError(
                f"batch at position {batch.position} does not follow the previous batch"
                f" (expected position {valid_bytes})"
            )
        if batch.size_in_bytes <= 0:
            raise ValueError(f"batch at position {batch.position} has size {batch.size_in_bytes}")
        relative_offset(base_offset, batch.last_offset)  # Kafka's ensureOffsetInRange
        if batch.max_timestamp > max_timestamp_so_far:
            max_timestamp_so_far = batch.max_timestamp
            offset_of_max_timestamp = batch.last_offset
        # Strictly greater, so the first batch never gets an entry.
        if valid_bytes - last_index_entry > index_interval_bytes:
            offset_index.append(batch.last_offset, valid_bytes)
            time_index.maybe_append(max_timestamp_so_far, offset_of_max_timestamp)
            last_index_entry = valid_bytes
        valid_bytes += batch.size_in_bytes
    # Like Kafka at the end of recovery: the last time entry holds the segment's max timestamp.
    time_index.maybe_append(max_timestamp_so_far, offset_of_max_timestamp, skip_full_check=True)
    return offset_index, time_index
