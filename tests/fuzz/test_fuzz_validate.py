"""Fuzz target: the validator on a small broker log dir (a v2 partition with transactions,
indexes and a producer snapshot, a legacy partition, the KRaft metadata partition with a
snapshot, ``bootstrap.checkpoint`` and the root files) in which one file is fuzzed.
``validate_file`` and ``validate_paths`` must only ever produce findings: any exception, a
format error included, is a defect. Corpus names are paths with ``+`` for ``/``."""

from __future__ import annotations

import shutil

from fuzz.harness import Target, fix_crcs, fix_lengths_and_crcs, frame_hot
from fuzz.readers import scratch_dir
from migration.logdir.validation import validate_file, validate_paths

SEPARATOR = "+"


def build_log_dir(kind: str, data: bytes):
    root = scratch_dir() / "validate"
    shutil.rmtree(root, ignore_errors=True)
    logdir = root / "logdir"
    for name, seed in TARGET.seeds():
        path = logdir / name.replace(SEPARATOR, "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if name == kind else seed)
    return logdir, logdir / kind.replace(SEPARATOR, "/")


def run(data: bytes, kind: str) -> None:
    logdir, fuzzed = build_log_dir(kind, data)
    validate_file(fuzzed)
    validate_file(fuzzed, deep=False)
    validate_paths([logdir])
    validate_paths([logdir], deep=False)
    if fuzzed.parent != logdir:
        validate_paths([fuzzed.parent])


def seed_check(data: bytes, name: str) -> None:
    logdir, _ = build_log_dir(name, data)
    result = validate_paths([logdir])
    assert result.ok, [str(f) for f in result.problems]


TARGET = Target("validate", run, fixups=(fix_crcs, fix_lengths_and_crcs), hot=frame_hot, quick_examples=200,
                seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
