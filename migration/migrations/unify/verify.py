"""The proof of a unification: the zero checkpoint decodes, holds exactly the records digested
before, keeps the KRaft control records, and passes the KIP-630 snapshot checks
(docs/formats.md §6.2, ``logdir/kraft_validate.py``). The records on disk are digested with the
expected digest's algorithm (the one stored next to it), never with another."""

from __future__ import annotations

import os
from pathlib import Path

from migration.formats import names
from migration.formats.digest import CURRENT_ALGORITHM, DigestAlgorithm
from migration.formats.errors import KafkaFormatError
from migration.formats.file_records import iterate_batches
from migration.formats.kraft_checkpoint import KRAFT_MAX_BATCH_BYTES, KRaftControlRecord, read_checkpoint
from migration.logdir.findings import locate
from migration.logdir.kraft_validate import validate_checkpoint_file
from migration.logdir.validate import ValidationResult
from migration.migrations.unify.state import metadata_log_dir_of, record_values, records_digest


def check_zero(data: bytes, path: Path, expected_digest: str, kraft: list[KRaftControlRecord], *,
               algorithm: DigestAlgorithm | str = CURRENT_ALGORITHM) -> list[str]:
    """Problems of a unified zero checkpoint's bytes: decode, records, KRaft records, batches.
    ``algorithm``: the hash of ``expected_digest``."""
    problems: list[str] = []
    try:
        contents = read_checkpoint(data, path=path)
    except KafkaFormatError as exc:
        return [str(exc)]
    algorithm = DigestAlgorithm(algorithm)
    digest = records_digest(record_values(contents.metadata_records), algorithm)
    if digest != expected_digest:
        problems.append(f"{path}: metadata records digest {digest} differs from the bootstrap records' "
                        f"{expected_digest} ({algorithm.value})")
    if [(r.type, r.value) for r in contents.kraft_records] != [(r.type, r.value) for r in kraft]:
        problems.append(f"{path}: KRaft control records differ from the previous zero checkpoint's")
    if contents.epochs != {0}:
        problems.append(f"{path}: batch epochs {sorted(contents.epochs)}, expected only 0")
    for b in iterate_batches(data, path=str(path), strict=True):
        if b.size_in_bytes > KRAFT_MAX_BATCH_BYTES:
            problems.append(f"{locate(path, b.position)}: batch of {b.size_in_bytes} bytes above 8 MiB")
    return problems


def validate_file(path: Path) -> list[str]:
    """The snapshot validator's problems with one checkpoint file."""
    res = validate_checkpoint_file(path, result=ValidationResult())
    return [str(f) for f in res.problems]


def verify_unified(metadata_log_dir: str | os.PathLike[str], expected_digest: str | None, *,
                   algorithm: DigestAlgorithm | str = CURRENT_ALGORITHM) -> list[str]:
    """Problems left after unification (empty when done): the zero checkpoint decodes and holds
    exactly the records digested as ``expected_digest`` (None: the log moved on, case 5), passes
    the KIP-630 checks, and bootstrap.checkpoint is gone from the dir.

    ``algorithm``: the hash ``expected_digest`` was computed with, as stored next to it (a
    state, a summary or a unit result without one was written before BLAKE3: blake2b-256);
    the records on disk are digested with it."""
    algorithm = DigestAlgorithm(algorithm)
    d = metadata_log_dir_of(metadata_log_dir)
    mdir = d / names.METADATA_PARTITION_DIR
    zero_path = mdir / names.ZERO_CHECKPOINT_FILE
    problems: list[str] = []
    if (d / names.BOOTSTRAP_CHECKPOINT_FILE).exists():
        problems.append(f"{d / names.BOOTSTRAP_CHECKPOINT_FILE}: still present")
    if zero_path.is_file():
        data = zero_path.read_bytes()
        try:
            contents = read_checkpoint(data, path=zero_path)
        except KafkaFormatError as exc:
            return [*problems, str(exc)]
        if expected_digest is not None:
            digest = records_digest(record_values(contents.metadata_records), algorithm)
            if digest != expected_digest:
                problems.append(f"{zero_path}: metadata records digest {digest}, expected {expected_digest} "
                                f"({algorithm.value})")
        for b in iterate_batches(data, path=str(zero_path), strict=True):
            if b.size_in_bytes > KRAFT_MAX_BATCH_BYTES:
                problems.append(f"{locate(zero_path, b.position)}: batch above 8 MiB")
        problems += validate_file(zero_path)
    elif expected_digest is not None:
        problems.append(f"{zero_path}: missing")
    partial = [e.name for e in os.scandir(mdir) if e.name.endswith(names.PARTIAL_CHECKPOINT_SUFFIX)] \
        if mdir.is_dir() else []
    if partial:
        problems.append(f"{mdir}: partial snapshot files left: {', '.join(sorted(partial))}")
    return problems
