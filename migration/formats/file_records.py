"""Batch-by-batch iteration of a ``.log`` segment or a KRaft ``.checkpoint`` file.

Every entry starts with the same 17 bytes (HEADER_SIZE_UP_TO_MAGIC: offset/base offset int64,
size/length int32, crc/leader epoch int32, magic int8; layout.py derives each offset from the
field lengths, as Kafka's Records.java), so the reader dispatches on the magic at byte 16
(MAGIC_OFFSET):
0 and 1 are legacy log entries (:class:`LegacyBatch`), 2 a record batch (:class:`RecordBatch`).

Kafka's rule (FileLogInputStream.nextBatch): stop when 17 or fewer bytes remain or when the
declared entry does not fit in the file — those bytes are a truncated tail, reported as
``trailing_bytes`` — and fail when the size field is below 14.

Files are read in chunks into a sliding buffer, so memory stays bounded by the chunk size
plus the largest batch whatever the file size (segments are up to 1 GiB or more).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

from migration.formats.errors import CorruptRecordError, KafkaFormatError, TruncatedError
from migration.formats.layout import MAGIC_OFFSET, SIZE_OFFSET
from migration.formats.legacy import LegacyBatch
from migration.formats.model import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    MIN_MESSAGE_SIZE,
)
from migration.formats.record_batch import RecordBatch

Batch = LegacyBatch | RecordBatch
# skip(buffer, position in it, file position of the buffer's first byte) -> position after the
# batches it consumed (see FileRecords.batches)
Skip = Callable[[bytes, int, int], int]

# 1 MiB: a chunk the compiled walker checks while it is still in the CPU's cache. Deep validation
# of a 16 MiB uncompressed v2 segment ran at about 1.1 GB/s with 8 MiB chunks and 4.2 GB/s with
# 1 MiB in one measurement (docs/benchmarks.md, "Measurements the code cites", Reader chunks);
# a batch larger than a chunk is still read whole.
DEFAULT_CHUNK_SIZE = 1024 * 1024
_SIZE_AND_MAGIC = struct.Struct(">qi4xb")  # offset, size, (crc or leader epoch), magic: HEADER_SIZE_UP_TO_MAGIC
_SIZE = struct.Struct(">i")


def _make_batch(view: memoryview, at: int, position: int, path: str | None) -> Batch:
    magic = view[at + MAGIC_OFFSET]
    try:
        if magic == MAGIC_V2:
            return RecordBatch(view, at, position)
        if magic in (MAGIC_V0, MAGIC_V1):
            return LegacyBatch(view, at, position)
    except KafkaFormatError as exc:
        raise exc.located(path) from None
    raise CorruptRecordError(
        "unknown magic", path=path, position=position + MAGIC_OFFSET, expected="0, 1 or 2", found=magic
    )


def iterate_batches(
    buf: bytes | bytearray | memoryview,
    *,
    path: str | None = None,
    base_position: int = 0,
    strict: bool = False,
) -> Iterator[Batch]:
    """Shallow iteration over an in-memory buffer. With ``strict``, a truncated tail raises
    :class:`TruncatedError` instead of ending the iteration."""
    view = memoryview(buf)
    end = len(view)
    pos = 0
    unpack = _SIZE_AND_MAGIC.unpack_from
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        _, size, _ = unpack(view, pos)
        if size < MIN_MESSAGE_SIZE:
            raise CorruptRecordError(
                "record size is smaller than the minimum record overhead",
                path=path,
                position=base_position + pos + SIZE_OFFSET,
                expected=f">= {MIN_MESSAGE_SIZE}",
                found=size,
            )
        if pos + LOG_OVERHEAD + size > end:
            break
        batch = _make_batch(view, pos, base_position + pos, path)
        yield batch
        pos += LOG_OVERHEAD + size
    if strict and pos != end:
        raise TruncatedError(
            f"{end - pos} trailing bytes after the last complete batch",
            path=path,
            position=base_position + pos,
            expected="a complete batch",
        )


class FileRecords:
    """A segment file read batch by batch. After a full iteration, ``valid_bytes`` is the
    end of the last complete batch and ``trailing_bytes`` what follows it."""

    def __init__(self, path: str | os.PathLike[str], *, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        self.path = Path(path)
        self.chunk_size = chunk_size
        self.size = self.path.stat().st_size
        self.valid_bytes = 0
        self.trailing_bytes = 0

    def batches(self, start: int = 0, end: int | None = None, *, skip: Skip | None = None
                ) -> Generator[Batch, None, None]:
        """Yield batches from byte ``start`` (a batch boundary) to ``end`` (default: file end).

        ``skip`` (the compiled record core's :class:`SegmentWalker`) is offered the buffer
        before each batch; the complete batches it consumes are not yielded (it judged them
        itself), the first one it leaves is read as usual."""
        path = str(self.path)
        limit = self.size if end is None else min(end, self.size)
        with open(self.path, "rb", buffering=0) as f:
            f.seek(start)
            file_pos = start  # file position of buf[0]
            buf = b""
            at = 0
            eof = False
            size_at = _SIZE.unpack_from
            view = memoryview(buf)
            while True:
                if skip is not None and len(buf) - at > HEADER_SIZE_UP_TO_MAGIC:
                    moved = skip(buf, at, file_pos)
                    if moved != at:
                        at = moved
                        self.valid_bytes = file_pos + at
                avail = len(buf) - at
                # One header read per batch; the view is made once per chunk, not per batch.
                size = size_at(view, at + SIZE_OFFSET)[0] if avail >= LOG_OVERHEAD else 0
                # Kafka (FileLogInputStream.nextBatch) checks the size before whether the entry fits:
                # a size below 14 is corrupt even when the file ends before the entry would.
                if avail <= HEADER_SIZE_UP_TO_MAGIC or (size >= MIN_MESSAGE_SIZE and avail < LOG_OVERHEAD + size):
                    if eof:
                        break
                    if avail >= LOG_OVERHEAD and size >= MIN_MESSAGE_SIZE:
                        # the rest of this batch only: the tail is copied with one batch, not with a
                        # whole chunk, and the next chunk is read into a buffer of its own
                        want = LOG_OVERHEAD + size - avail
                    else:
                        want = max(self.chunk_size, LOG_OVERHEAD + max(size, 0))
                    want = min(want, limit - (file_pos + len(buf)))
                    chunk = f.read(want) if want > 0 else b""
                    if not chunk:
                        eof = True
                        continue
                    file_pos += at
                    buf = buf[at:] + chunk if at < len(buf) else chunk
                    view = memoryview(buf)
                    at = 0
                    continue
                if size < MIN_MESSAGE_SIZE:
                    raise CorruptRecordError(
                        "record size is smaller than the minimum record overhead",
                        path=path,
                        position=file_pos + at + SIZE_OFFSET,
                        expected=f">= {MIN_MESSAGE_SIZE}",
                        found=size,
                    )
                batch = _make_batch(view, at, file_pos + at, path)
                at += LOG_OVERHEAD + size
                self.valid_bytes = file_pos + at
                yield batch
            self.valid_bytes = file_pos + at
            self.trailing_bytes = limit - self.valid_bytes

    def __iter__(self) -> Iterator[Batch]:
        return self.batches()


def read_batches(path: str | os.PathLike[str], *, strict: bool = False) -> list[Batch]:
    """All batches of a small file (checkpoints, tests). Segments should use FileRecords."""
    data = Path(path).read_bytes()
    return list(iterate_batches(data, path=str(path), strict=strict))
