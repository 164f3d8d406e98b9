"""Fuzz target: v0/v1 segments (messages, gzip/snappy/lz4 wrappers with absolute or relative inner
offsets, LogAppendTime, a mixed-magic segment) read through FileRecords, then deeply."""

from __future__ import annotations

from fuzz.harness import Target, fix_crcs, fix_frame_lengths, fix_lengths_and_crcs, frame_hot
from fuzz.readers import read_segment
from migration.formats.file_records import iterate_batches


def run(data: bytes, kind: str) -> None:
    read_segment(data)


def seed_check(data: bytes, name: str) -> None:
    for b in iterate_batches(data, strict=True):
        b.ensure_valid()
        list(b.records())


TARGET = Target("segment_legacy", run, fixups=(fix_frame_lengths, fix_crcs, fix_lengths_and_crcs), hot=frame_hot,
                quick_examples=800, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
