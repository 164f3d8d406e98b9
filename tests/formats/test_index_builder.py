from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats.index_builder import BatchLike, build_indexes
from migration.formats.index_file import IndexOffsetOverflowError

# Every test here runs on each record core (compiled and pure Python).
pytestmark = pytest.mark.usefixtures("record_core")


@dataclass(frozen=True)
class Batch:
    position: int
    size_in_bytes: int
    last_offset: int
    max_timestamp: int


def layout(sizes: list[int], last_offsets: list[int], timestamps: list[int]) -> list[Batch]:
    batches, pos = [], 0
    for size, last, ts in zip(sizes, last_offsets, timestamps, strict=True):
        batches.append(Batch(pos, size, last, ts))
        pos += size
    return batches


def test_batch_is_batchlike() -> None:
    b: BatchLike = Batch(0, 1, 2, 3)
    assert b.size_in_bytes == 1


def test_entry_every_interval_pointing_at_the_batch() -> None:
    # 1000-byte batches: batch k starts at 1000k; an entry when 1000k - last > 4096.
    batches = layout([1000] * 12, list(range(100, 112)), [10 * k for k in range(12)])
    offsets, times = build_indexes(batches, 100)
    assert offsets.entries == ((105, 5000), (110, 10000))
    # Time entries: max so far at each offset entry, then the final max.
    assert times.entries == ((50, 105), (100, 110), (110, 111))


def test_first_batch_never_indexed_and_interval_is_strict() -> None:
    # The first batch is huge, but valid_bytes is 0 when it is seen.
    offsets, _ = build_indexes(layout([100000, 10], [0, 1], [1, 2]), 0)
    assert offsets.entries == ((1, 100000),)
    # Exactly index_interval_bytes since the last entry: no entry (strictly greater).
    offsets, _ = build_indexes(layout([4096, 10], [0, 1], [1, 2]), 0)
    assert offsets.entries == ()
    offsets, _ = build_indexes(layout([4097, 10], [0, 1], [1, 2]), 0)
    assert offsets.entries == ((1, 4097),)


def test_custom_interval() -> None:
    offsets, _ = build_indexes(layout([10] * 5, [0, 1, 2, 3, 4], [-1] * 5), 0, index_interval_bytes=15)
    assert offsets.entries == ((2, 20), (4, 40))


def test_v0_data_leaves_time_index_empty() -> None:
    offsets, times = build_indexes(layout([5000] * 3, [0, 1, 2], [-1, -1, -1]), 0)
    assert len(offsets) == 2
    assert len(times) == 0


def test_ties_keep_the_earliest_batch_with_the_max() -> None:
    _, times = build_indexes(layout([10, 10, 10], [3, 6, 9], [50, 70, 70]), 0)
    assert times.entries == ((70, 6),)


def test_timestamps_going_down_do_not_add_entries() -> None:
    _, times = build_indexes(layout([5000] * 4, [0, 1, 2, 3], [100, 50, 40, 30]), 0)
    assert times.entries == ((100, 0),)


def test_empty_input() -> None:
    offsets, times = build_indexes([], 42)
    assert (len(offsets), len(times), offsets.base_offset, times.base_offset) == (0, 0, 42, 42)


def test_gap_between_batches_is_rejected() -> None:
    with pytest.raises(ValueError):
        build_indexes([Batch(0, 10, 0, 1), Batch(20, 10, 1, 1)], 0)


def test_offset_overflow() -> None:
    with pytest.raises(IndexOffsetOverflowError):
        build_indexes(layout([10, 10], [5, 5 + 2**31], [1, 2]), 5)
    with pytest.raises(IndexOffsetOverflowError):
        build_indexes(layout([10], [4], [1]), 5)


@given(
    st.lists(
        st.tuples(st.integers(14, 9000), st.integers(1, 50), st.integers(-1, 10**6)), min_size=0, max_size=80
    ),
    st.integers(0, 2**40),
    st.sampled_from([0, 100, 4096, 20000]),
)
def test_properties(spec: list[tuple[int, int, int]], base: int, interval: int) -> None:
    last_offsets, cur = [], base - 1
    for _, step, _ in spec:
        cur += step
        last_offsets.append(cur)
    batches = layout([s for s, _, _ in spec], last_offsets, [t for _, _, t in spec])
    offsets, times = build_indexes(batches, base, interval)
    offsets.sanity_check()
    offsets.check_order()
    times.sanity_check()
    times.check_order()
    by_position = {b.position: b for b in batches}
    previous = 0
    for entry in offsets.entries:
        # Every entry points exactly at the batch whose last offset it names (§3.7).
        assert by_position[entry.position].last_offset == entry.offset
        assert entry.position - previous > interval
        previous = entry.position
    max_ts = max((t for _, _, t in spec), default=-1)
    if max_ts >= 0:
        first_with_max = next(b for b in batches if b.max_timestamp == max_ts)
        assert times.last_entry == (max_ts, first_with_max.last_offset)
        # Each time entry holds the max timestamp up to its batch.
        for ts, off in times.entries:
            assert ts == max(b.max_timestamp for b in batches if b.last_offset <= off)
    else:
        assert len(times) == 0
    # Bytes round trip through the file codecs.
    assert type(offsets).from_bytes(offsets.to_bytes(), base) == offsets
    assert type(times).from_bytes(times.to_bytes(), base) == times


def test_incremental_builder_matches_build_indexes() -> None:
    from migration.formats.index_builder import IndexBuilder

    sizes = [5000, 100, 4100, 4097, 3, 9000, 10]
    lasts = [10, 11, 20, 30, 31, 50, 51]
    stamps = [-1, 5, 3, 9, 9, 12, -1]
    expected = build_indexes(layout(sizes, lasts, stamps), 10)
    builder = IndexBuilder(10)
    for b in layout(sizes, lasts, stamps):
        builder.append(b.position, b.size_in_bytes, b.last_offset, b.max_timestamp)
    assert builder.finish() == expected
    with pytest.raises(ValueError):
        builder.append(builder.valid_bytes, 1, 60, 1)
