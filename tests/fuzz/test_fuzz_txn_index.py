"""Fuzz target: transaction index files (``.txnindex``) read strictly and as Kafka reads them
(a partial trailing entry ignored), then queried. The seed name carries the base offset."""

from __future__ import annotations

import re

from fuzz.harness import Target, attempt
from fuzz.readers import scratch_dir
from migration.formats.transaction_index import TransactionIndex


def base_offset(kind: str) -> int:
    return int(re.match(r"base-(\d+)", kind).group(1))


def run(data: bytes, kind: str) -> None:
    base = base_offset(kind)
    for strict in (True, False):
        index = attempt(TransactionIndex.from_bytes, data, base, path=kind, strict=strict)
        if index is None:
            continue
        _ = (index.entries, len(index), list(index))
        index.collect_aborted_txns(base, base + 100)
        attempt(index.sanity_check)
        attempt(index.check_order)
        index.to_bytes()
    path = scratch_dir() / f"{base:020d}.txnindex"
    path.write_bytes(data)
    attempt(TransactionIndex.read, path)


def seed_check(data: bytes, name: str) -> None:
    TransactionIndex.from_bytes(data, base_offset(name))


def hot(data: bytes) -> list[int]:
    return [p for i in range(0, len(data), 34) for p in (i, i + 2, i + 10, i + 18, i + 26)]


TARGET = Target("txn_index", run, hot=hot, quick_examples=350, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
