"""Stub of the compiled ``_cwalker.pyx`` (its instances satisfy ``_protocols.SegmentWalker``)."""

from collections.abc import Sequence
from typing import Any

from migration.formats._protocols import Buffer

class SegmentWalker:
    prev_last: int
    max_ts: int
    oi: int
    ti: int
    enabled: bool
    @property
    def batches(self) -> int: ...
    @property
    def records(self) -> int: ...
    @property
    def counted(self) -> int: ...
    def __init__(self, *, deep: bool, base_offset: int, next_base_offset: int | None,
                 offset_entries: Sequence[tuple[int, int]], time_entries: Sequence[tuple[int, int]],
                 leader_epochs: Sequence[tuple[int, int]] | None, digest: bool = False,
                 count_from: int = 3) -> None: ...
    def advance(self, buf: Buffer, at: int, file_pos: int, /) -> int: ...
    def bytes_by_magic(self) -> tuple[int, int, int]: ...
    def feed_digest(self, digester: Any, /) -> bool: ...
