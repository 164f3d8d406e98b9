"""Validation of any path kmigrate is given: a log dir (partitions, the KRaft metadata
partition, text files), a partition directory, or one file. The rules themselves live in
:mod:`migration.logdir.validate` (segments, indexes, partitions) and
:mod:`migration.logdir.kraft_validate` (KRaft snapshots and the metadata partition); this module
only dispatches, so that neither of those imports the other's caller."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from migration.formats import names
from migration.formats.checkpoint_files import OffsetCheckpointFile
from migration.formats.errors import KafkaFormatError
from migration.formats.meta_properties import MetaProperties
from migration.formats.producer_snapshot import ProducerSnapshot
from migration.logdir.findings import FindingCode
from migration.logdir.kraft_validate import validate_checkpoint_file, validate_metadata_log_dir
from migration.logdir.validate import ValidationResult, validate_partition_dir, validate_segment


def validate_log_dir(path: str | os.PathLike[str], *, deep: bool = True,
                     result: ValidationResult | None = None) -> ValidationResult:

    res = result if result is not None else ValidationResult()
    p = Path(path)
    mp = p / names.META_PROPERTIES_FILE
    if mp.exists():
        try:
            MetaProperties.read(mp)
            res.files_checked += 1
        except (KafkaFormatError, ValueError) as exc:
            res.add("error", FindingCode.META_PROPERTIES, mp, str(exc))
    for name in names.OFFSET_CHECKPOINT_FILES:
        cp = p / name
        if cp.exists():
            try:
                OffsetCheckpointFile.read(cp)
                res.files_checked += 1
            except KafkaFormatError as exc:
                res.add_error(exc, FindingCode.OFFSET_CHECKPOINT_CORRUPT, None, cp)
    for e in sorted(os.scandir(p), key=lambda e: e.name):
        if e.name.endswith(names.LEFTOVER_SUFFIXES) and e.is_file():
            res.add("warning", FindingCode.LEFTOVER_FILE, e.path, "temporary file of an interrupted checkpoint write")
        if not e.is_dir():
            continue
        if e.name == names.METADATA_PARTITION_DIR:
            validate_metadata_dir(Path(e.path), res)
            continue
        try:
            names.parse_partition_dir_name(e.name)
        except KafkaFormatError:
            res.add("warning", FindingCode.UNKNOWN_DIR, e.path, "not a topic-partition directory: Kafka refuses to "
                    "start on a log dir holding it")
            continue
        validate_partition_dir(e.path, deep=deep, result=res)
    return res


def validate_metadata_dir(path: Path, res: ValidationResult) -> None:
    """The KRaft metadata partition: its segments like any partition, its checkpoints and
    snapshots by the KRaft validator."""
    validate_metadata_log_dir(path, result=res)


def validate_file(path: str | os.PathLike[str], *, deep: bool = True,
                  result: ValidationResult | None = None) -> ValidationResult:

    res = result if result is not None else ValidationResult()
    p = Path(path)
    name = p.name
    try:
        if name.endswith(names.LOG_FILE_SUFFIX):
            validate_segment(p, next_base_offset=_next_base_offset(p), deep=deep, result=res)
        elif name.endswith((names.INDEX_FILE_SUFFIX, names.TIME_INDEX_FILE_SUFFIX, names.TXN_INDEX_FILE_SUFFIX)):
            log = p.with_name(names.log_file_name(names.offset_from_file_name(name)))
            if log.exists():
                validate_segment(log, next_base_offset=_next_base_offset(log), deep=deep, result=res)
            else:
                res.add("warning", FindingCode.ORPHAN_INDEX, p, "index file without its .log")
        elif name.endswith(names.PRODUCER_SNAPSHOT_FILE_SUFFIX):
            ProducerSnapshot.read(p)
            res.files_checked += 1
        elif name.endswith(names.CHECKPOINT_FILE_SUFFIX) or name == names.BOOTSTRAP_CHECKPOINT_FILE:

            validate_checkpoint_file(p, result=res)
        else:
            res.add("info", FindingCode.SKIPPED, p, "not a file kind the validator knows")
    except KafkaFormatError as exc:
        res.add_error(exc, FindingCode.CORRUPT_FILE, None, p)
    return res


def _next_base_offset(log: Path) -> int | None:
    """Base offset of the segment after ``log`` in its directory, None for the last one."""
    base = names.offset_from_file_name(log.name)
    later = []
    for e in os.scandir(log.parent):
        if e.name.endswith(names.LOG_FILE_SUFFIX):
            try:
                off = names.offset_from_file_name(e.name)
            except KafkaFormatError:
                continue
            if off > base:
                later.append(off)
    return min(later, default=None)


def validate_paths(paths: Sequence[str | os.PathLike[str]], *, deep: bool = True) -> ValidationResult:
    """Validate each PATH: a log dir (has meta.properties or partition dirs), a partition dir
    or a single file."""
    res = ValidationResult()
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            res.add("error", FindingCode.MISSING, p, "no such file or directory")
        elif p.is_file():
            validate_file(p, deep=deep, result=res)
        elif p.name == names.METADATA_PARTITION_DIR:
            validate_metadata_dir(p, res)
        elif _is_partition_dir(p):
            validate_partition_dir(p, deep=deep, result=res)
        else:
            validate_log_dir(p, deep=deep, result=res)
    return res


def _is_partition_dir(p: Path) -> bool:
    if (p / names.META_PROPERTIES_FILE).exists():
        return False
    try:
        names.parse_partition_dir_name(p.name)
    except KafkaFormatError:
        return False
    return any(e.name.endswith(names.LOG_FILE_SUFFIX) for e in os.scandir(p))
