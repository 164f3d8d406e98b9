"""Fuzz target: text checkpoint files (leader-epoch-checkpoint; recovery-point, log-start,
replication and cleaner offset checkpoints). The seed name says which reader applies; a file
that parses must write back to text that parses to the same entries."""

from __future__ import annotations

from fuzz.harness import Target, attempt
from migration.formats.checkpoint_files import (
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    segment_leader_epochs,
)


def reader(kind: str) -> type[LeaderEpochCheckpointFile] | type[OffsetCheckpointFile]:
    return LeaderEpochCheckpointFile if kind.startswith("leader-epoch-checkpoint") else OffsetCheckpointFile


def run(data: bytes, kind: str) -> None:
    for cls in (reader(kind), OffsetCheckpointFile, LeaderEpochCheckpointFile):
        parsed = attempt(cls.from_bytes, data, path=kind)
        if parsed is None:
            continue
        assert cls.from_bytes(parsed.to_bytes()) == parsed, "checkpoint text round trip"
        if isinstance(parsed, LeaderEpochCheckpointFile):
            attempt(parsed.check_order)
            segment_leader_epochs(parsed.entries, 0, 100)
        else:
            parsed.offsets()


def seed_check(data: bytes, name: str) -> None:
    reader(name).from_bytes(data)


def hot(data: bytes) -> list[int]:
    return [0, *(i + 1 for i, b in enumerate(data) if b in b"\n ")]  # line and field starts


TARGET = Target("checkpoint_files", run, hot=hot, quick_examples=900, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
