"""The logical record: what every message format carries and what a migration must preserve.

A ``Record`` is format-neutral. Readers of v0/v1 messages and v2 batches produce it; writers
consume it. Digests of a partition's data (before and after a rewrite) are computed over these
fields, so two segments holding the same logical records in different formats digest equal.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

# The log entry prefix every format shares (docs/formats.md §0.3): offset int64 + size int32
# (LOG_OVERHEAD, 12 bytes) before every log entry / batch, the magic after 4 more bytes
# (HEADER_SIZE_UP_TO_MAGIC, 17 bytes); the smallest size field is a v0 message with null key
# and value (MIN_MESSAGE_SIZE, 14 bytes). Derived from the field lengths in layout.py.
from migration.formats.layout import HEADER_SIZE_UP_TO_MAGIC as HEADER_SIZE_UP_TO_MAGIC
from migration.formats.layout import LOG_OVERHEAD as LOG_OVERHEAD
from migration.formats.layout import MIN_MESSAGE_SIZE as MIN_MESSAGE_SIZE

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

MAGIC_V0 = 0
MAGIC_V1 = 1
MAGIC_V2 = 2


class Compression(IntEnum):
    """Codec ids of the attributes byte (bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        return self.name.lower()


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        return {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[int(self)]


class Header(NamedTuple):
    key: str
    value: bytes | None


class Record(NamedTuple):
    """One logical record. ``timestamp`` is the effective one (a LogAppendTime wrapper's or
    batch's time applies to its records), -1 when there is none."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
