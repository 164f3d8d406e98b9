"""The seams of the record core, typed (docs/architecture.md, "The record core"): one Protocol
per twin, which the compiled module (``_c*.pyx``, its signatures in the ``.pyi`` beside it) and
the pure-Python reference (``_pycore.py``) both satisfy, and the segment walker's interface.

Twins (compiled module: what it twins):
  ``_ccrc``           :class:`CrcKernels`, the CRCs of ``_pycore`` (zlib, crc32c)
  ``_clegacy``        :class:`LegacyKernels`, ``legacy.py``'s calls into the core
  ``_crecord_batch``  :class:`RecordBatchKernels`, ``record_batch.py``'s calls into the core
  ``_ccompression``   :class:`CompressionKernels`, ``compression.py``'s framing and gzip
  ``_cwalker``        :class:`SegmentWalker`, ``logdir/validate.py``'s per-batch loop (compiled only)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from migration.formats.compression import Codecs, Data
from migration.formats.model import Record

Buffer = bytes | memoryview  # what the format modules hand the kernels
# A scanned inner message (legacy.py): (absolute offset, effective timestamp, key length
# position, key length, value length, value end, message end) in the scanned buffer.
ScanEntry = tuple[int, int, int, int, int, int, int]
Span = tuple[int, int] | tuple[()]


class CrcFunction(Protocol):
    """A CRC of ``data``, continuing ``value`` (0: from the start)."""

    def __call__(self, data: Buffer, value: int = 0, /) -> int: ...


class CrcKernels(Protocol):
    def crc32(self, data: Buffer, value: int = 0, /) -> int: ...

    def crc32c(self, data: Buffer, value: int = 0, /) -> int: ...


class LegacyKernels(Protocol):
    def scan_inner(self, data: bytes, magic: int, wrapper_offset: int, lat: int | None, /) -> list[ScanEntry] | None:
        ...

    def legacy_digest(self, data: Buffer, entries: Sequence[ScanEntry], parts: list[bytes | memoryview],
                      stamps: list[int], /) -> None: ...

    def v0_entry_to_v1(self, buf: Buffer, at: int, offset: int, attributes: int, timestamp: int, /) -> bytes: ...

    def v0_entries_to_v1(self, data: Buffer, entries: Sequence[ScanEntry], base: int, attributes: int,
                         timestamp: int, /) -> bytes: ...


class RecordBatchKernels(Protocol):
    def digest_v2(self, buf: Buffer, start: int, end: int, count: int, base_offset: int, base_timestamp: int,
                  lat: int | None, parts: list[bytes | memoryview], stamps: list[int], /) -> Span | None: ...

    def check_v2(self, buf: Buffer, start: int, end: int, count: int, base_offset: int, base_timestamp: int,
                 /) -> Span | None: ...

    def encode_records(self, records: Sequence[Record], base_offset: int, base_timestamp: int,
                       /) -> tuple[bytes, int, int]: ...

    def single_record_batch(self, offset: int, timestamp: int, key: Buffer | None, value: Buffer | None,
                            log_append_time: bool, partition_leader_epoch: int, /) -> bytes: ...


class CompressionKernels(Protocol):
    """The compiled framing (``_ccompression``); the Python framing is compression.py's."""

    CODECS: Codecs

    def snappy_decompress(self, data: Data, /) -> bytes: ...

    def snappy_compress(self, data: Data, /) -> bytes: ...

    def lz4_decompress(self, data: Data, magic: int, /) -> bytes: ...

    def lz4_compress(self, data: Data, magic: int, /) -> bytes: ...

    def gzip_decompress(self, data: Data, /) -> bytes: ...

    def gzip_compress(self, data: Data, /) -> bytes: ...

    def gzip_library(self) -> str | None: ...

    def gzip_unavailable(self) -> str: ...


class SegmentWalker(Protocol):
    """The compiled deep validation of runs of regular batches (``_cwalker.SegmentWalker``),
    with the state ``logdir/validate.py``'s loop carries; a walker made with duties of the
    layer above (the rewrite's conversion, named to ``core.segment_walker``) has more
    methods, typed where that layer uses them."""

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

    def advance(self, buf: Buffer, at: int, file_pos: int, /) -> int: ...

    def bytes_by_magic(self) -> tuple[int, int, int]: ...

    def feed_digest(self, digester: Any, /) -> bool: ...


# A walker class (``_cwalker.SegmentWalker`` or a subclass a layer above names to ``core.segment_walker``): built with
# the validation's keyword arguments and the duties it takes.
WalkerType = Callable[..., SegmentWalker]
