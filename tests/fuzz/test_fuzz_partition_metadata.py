"""Fuzz target: ``partition.metadata`` (version line, topic id line, Kafka Uuid string)."""

from __future__ import annotations

from fuzz.harness import Target, attempt
from migration.formats.partition_metadata import PartitionMetadataFile


def run(data: bytes, kind: str) -> None:
    parsed = attempt(PartitionMetadataFile.from_bytes, data, path=kind)
    if parsed is not None:
        assert PartitionMetadataFile.from_bytes(parsed.to_bytes()).topic_id == parsed.topic_id


def seed_check(data: bytes, name: str) -> None:
    PartitionMetadataFile.from_bytes(data)


def hot(data: bytes) -> list[int]:
    return [0, *(i for i, b in enumerate(data) if b in b"\n: ")]


TARGET = Target("partition_metadata", run, hot=hot, quick_examples=1200, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
