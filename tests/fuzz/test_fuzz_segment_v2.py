"""Fuzz target: v2 segments (record batches of every codec, control and transactional batches,
KRaft metadata log batches) read through FileRecords and iterate_batches, then deeply."""

from __future__ import annotations

from fuzz.harness import Target, fix_crcs, fix_frame_lengths, fix_lengths_and_crcs, frame_hot
from fuzz.readers import read_segment
from migration.formats.file_records import iterate_batches


def run(data: bytes, kind: str) -> None:
    read_segment(data)


def seed_check(data: bytes, name: str) -> None:
    for b in iterate_batches(data, strict=True):
        b.ensure_valid()
        b.records()


TARGET = Target("segment_v2", run, fixups=(fix_frame_lengths, fix_crcs, fix_lengths_and_crcs), hot=frame_hot,
                quick_examples=600, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
