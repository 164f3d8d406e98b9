"""Digests of logical records: the proof that a rewrite lost or changed nothing.

Two digests are kept over a partition's (or segment's) records in offset order:
- ``content``: offset, key, value and headers. A migration must leave it unchanged, always.
- ``full``: the same plus the effective timestamp. Equal too, unless the operator asked to
  stamp v0 messages with an estimated append time (then only ``content`` must match).
Nulls and empty byte strings digest differently, as they differ in Kafka.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

from pydantic import BaseModel

from .formats.model import Record

_HEAD = struct.Struct(">qii")  # offset, key length (-1 null), value length (-1 null)
_TS = struct.Struct(">q")
_HEADER_HEAD = struct.Struct(">ii")


class RecordDigest(BaseModel):
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    content: str = ""
    full: str = ""

    def matches(self, other: RecordDigest, *, timestamps: bool = True) -> bool:
        same = self.records == other.records and self.content == other.content
        return same and (self.full == other.full if timestamps else True)


class RecordDigester:
    """Incremental digest; feed records in offset order."""

    __slots__ = ("_content", "_full", "records", "first_offset", "last_offset")

    def __init__(self) -> None:
        self._content = hashlib.blake2b(digest_size=32)
        self._full = hashlib.blake2b(digest_size=32)
        self.records = 0
        self.first_offset: int | None = None
        self.last_offset: int | None = None

    def update(self, records: Iterable[Record]) -> None:
        content = self._content.update
        full = self._full.update
        n = 0
        last = None
        for r in records:
            key, value = r.key, r.value
            parts = [_HEAD.pack(r.offset, -1 if key is None else len(key), -1 if value is None else len(value))]
            if key:
                parts.append(key)
            if value:
                parts.append(value)
            if r.headers:
                for h in r.headers:
                    hk = h.key.encode("utf-8", "surrogateescape")
                    parts.append(_HEADER_HEAD.pack(len(hk), -1 if h.value is None else len(h.value)))
                    parts.append(hk)
                    if h.value:
                        parts.append(h.value)
            blob = b"".join(parts)
            content(blob)
            full(blob)
            full(_TS.pack(r.timestamp))
            if self.first_offset is None:
                self.first_offset = r.offset
            last = r.offset
            n += 1
        self.records += n
        if last is not None:
            self.last_offset = last

    def result(self) -> RecordDigest:
        return RecordDigest(
            records=self.records,
            first_offset=self.first_offset,
            last_offset=self.last_offset,
            content=self._content.hexdigest(),
            full=self._full.hexdigest(),
        )


def digest_records(records: Iterable[Record]) -> RecordDigest:
    d = RecordDigester()
    d.update(records)
    return d.result()
