"""Fuzz target: time index files (``.timeindex``) read strictly and as Kafka loads them, then
queried. The seed name carries the base offset."""

from __future__ import annotations

import re

from fuzz.harness import Target, attempt
from fuzz.readers import scratch_dir
from migration.formats.time_index import TimeIndex


def base_offset(kind: str) -> int:
    return int(re.match(r"base-(\d+)", kind).group(1))


def run(data: bytes, kind: str) -> None:
    base = base_offset(kind)
    for strict in (True, False):
        index = attempt(TimeIndex.from_bytes, data, base, path=kind, strict=strict)
        if index is None:
            continue
        last = index.last_entry
        _ = (index.entries, len(index), index.ignored_tail_entries)
        for ts in (-1, 0, last.timestamp, last.timestamp + 1):
            index.lookup(ts)
        index.to_bytes()
    path = scratch_dir() / f"{base:020d}.timeindex"
    path.write_bytes(data)
    attempt(TimeIndex.read, path)


def seed_check(data: bytes, name: str) -> None:
    TimeIndex.from_bytes(data, base_offset(name))


def hot(data: bytes) -> list[int]:
    return [p for i in range(0, len(data), 12) for p in (i, i + 4, i + 8)]


TARGET = Target("time_index", run, hot=hot, quick_examples=400, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
