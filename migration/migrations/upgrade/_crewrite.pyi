"""Stub of the compiled ``_crewrite.pyx``."""

from collections.abc import Callable, Sequence
from typing import Any

from migration.formats._cwalker import SegmentWalker

class RewriteWalker(SegmentWalker):
    def __init__(self, *, deep: bool, base_offset: int, next_base_offset: int | None,
                 offset_entries: Sequence[tuple[int, int]], time_entries: Sequence[tuple[int, int]],
                 leader_epochs: Sequence[tuple[int, int]] | None, digest: bool = False, target_magic: int,
                 stamp_v0: int | None = None, output_leader_epochs: Sequence[tuple[int, int]] = (),
                 segment_bytes: int = ..., max_message_bytes: int = ..., index_interval_bytes: int = 4096,
                 count_from: int = 3) -> None: ...
    def open_output(self, base_offset: int, valid_bytes: int, last_index_entry: int, max_timestamp: int,
                    offset_of_max_timestamp: int, time_index_last_timestamp: int, /) -> None: ...
    def write_output(self, sink: Callable[[tuple[Any, ...]], None], /) -> None: ...
