"""Fuzz target: KRaft snapshots and ``bootstrap.checkpoint`` read by the codec
(``read_checkpoint``, which may reject the file) and by the validator
(``validate_checkpoint_file``, which must only report findings). The seed name is the file
name, so the snapshot epoch and the bootstrap rules follow it."""

from __future__ import annotations

from fuzz.harness import Target, attempt, fix_crcs, fix_frame_lengths, fix_lengths_and_crcs, frame_hot
from fuzz.readers import scratch_dir
from migration.formats.kraft_checkpoint import read_checkpoint
from migration.logdir.kraft_validate import validate_checkpoint_file
from migration.logdir.validate import ValidationResult


def run(data: bytes, kind: str) -> None:
    contents = attempt(read_checkpoint, data, path=kind)
    if contents is not None:
        _ = (contents.kraft_version, contents.voters_record)
    path = scratch_dir() / kind
    path.write_bytes(data)
    validate_checkpoint_file(path, result=ValidationResult())


def seed_check(data: bytes, name: str) -> None:
    read_checkpoint(data, path=name)
    path = scratch_dir() / name
    path.write_bytes(data)
    result = validate_checkpoint_file(path, result=ValidationResult())
    assert result.ok, result.problems


TARGET = Target("kraft_checkpoint", run, fixups=(fix_frame_lengths, fix_crcs, fix_lengths_and_crcs),
                hot=frame_hot, quick_examples=550, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
