"""Fuzz target: offset index files (``.index``) read strictly (Kafka's sanity check and the
writer's order) and as Kafka loads them, then queried. The seed name carries the base offset."""

from __future__ import annotations

import re

from fuzz.harness import Target, attempt
from fuzz.readers import scratch_dir
from migration.formats.offset_index import OffsetIndex


def base_offset(kind: str) -> int:
    return int(re.match(r"base-(\d+)", kind).group(1))


def run(data: bytes, kind: str) -> None:
    base = base_offset(kind)
    for strict in (True, False):
        index = attempt(OffsetIndex.from_bytes, data, base, path=kind, strict=strict)
        if index is None:
            continue
        _ = (index.entries, len(index), index.last_offset, index.ignored_tail_entries)
        for target in (base - 1, base, index.last_offset, index.last_offset + 1):
            index.lookup(target)
        index.to_bytes()
    path = scratch_dir() / f"{base:020d}.index"
    path.write_bytes(data)
    attempt(OffsetIndex.read, path)


def seed_check(data: bytes, name: str) -> None:
    OffsetIndex.from_bytes(data, base_offset(name))


TARGET = Target("offset_index", run, hot=lambda d: list(range(0, len(d), 4)), quick_examples=400,
                seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
