"""Fuzz target: ``meta.properties`` (java.util.Properties grammar: comments, separators,
escapes, continuation lines; then Kafka's MetaProperties rules)."""

from __future__ import annotations

from fuzz.harness import Target, attempt
from migration.formats.meta_properties import MetaProperties, load_properties, parse_properties


def run(data: bytes, kind: str) -> None:
    attempt(parse_properties, data, path=kind)
    attempt(load_properties, data)
    meta = attempt(MetaProperties.from_bytes, data, path=kind)
    if meta is not None:
        meta.to_properties()


def seed_check(data: bytes, name: str) -> None:
    MetaProperties.from_bytes(data)


def hot(data: bytes) -> list[int]:
    return [0, *(i for i, b in enumerate(data) if b in b"\n=:\\ ")]


TARGET = Target("meta_properties", run, hot=hot, quick_examples=600, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
