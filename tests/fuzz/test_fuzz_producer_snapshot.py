"""Fuzz target: producer state snapshots (``.snapshot``): version, CRC-32C, entry count.
Half the mutations get their CRC (and entry count) fixed so the entries themselves are read;
a snapshot that parses must re-encode to the same bytes."""

from __future__ import annotations

import struct

import crc32c

from fuzz.harness import Target, attempt
from fuzz.readers import scratch_dir
from migration.formats.producer_snapshot import (
    CRC_OFFSET,
    HEADER_SIZE,
    PRODUCER_ENTRIES_OFFSET,
    ProducerSnapshot,
)


def fix_crc(data: bytes) -> bytes:
    if len(data) < HEADER_SIZE:
        return data
    buf = bytearray(data)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c.crc32c(bytes(buf[PRODUCER_ENTRIES_OFFSET:])))
    return bytes(buf)


def fix_count_and_crc(data: bytes) -> bytes:
    if len(data) < HEADER_SIZE:
        return data
    buf = bytearray(data)
    struct.pack_into(">i", buf, PRODUCER_ENTRIES_OFFSET, (len(buf) - HEADER_SIZE) // ProducerSnapshot.ENTRY_SIZE)
    return fix_crc(bytes(buf))


def run(data: bytes, kind: str) -> None:
    snapshot = attempt(ProducerSnapshot.from_bytes, data, path=kind, offset=0)
    if snapshot is not None:
        assert snapshot.to_bytes() == data, "a snapshot that parses re-encodes to its bytes"
    path = scratch_dir() / "00000000000000000000.snapshot"
    path.write_bytes(data)
    attempt(ProducerSnapshot.read, path)


def seed_check(data: bytes, name: str) -> None:
    ProducerSnapshot.from_bytes(data)


def hot(data: bytes) -> list[int]:
    return [0, 2, 6, 9, *(p for i in range(HEADER_SIZE, len(data), 46) for p in (i, i + 8, i + 10, i + 14, i + 22))]


TARGET = Target("producer_snapshot", run, fixups=(fix_crc, fix_count_and_crc), hot=hot, quick_examples=600,
                seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
