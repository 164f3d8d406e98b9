"""Fuzz target: the ``.kafka_cleanshutdown`` marker (empty, or a small JSON object)."""

from __future__ import annotations

from fuzz.harness import Target, attempt
from migration.formats.clean_shutdown import CleanShutdownFile


def run(data: bytes, kind: str) -> None:
    attempt(CleanShutdownFile.from_bytes, data, path=kind)


def seed_check(data: bytes, name: str) -> None:
    CleanShutdownFile.from_bytes(data)


TARGET = Target("clean_shutdown", run, hot=lambda d: [i for i, b in enumerate(d) if b in b'{[:,"'],
                quick_examples=1200, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
