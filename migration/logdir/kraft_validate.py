"""Validation of KRaft snapshots (KIP-630) and of the metadata partition holding them.

Per checkpoint file (``<20-digit end offset>-<10-digit epoch>.checkpoint`` or the legacy
``bootstrap.checkpoint``, docs/formats.md §6, §7):
- the name parses as Kafka's ``SnapshotPath`` does;
- every batch is a v2 batch with a valid CRC-32C, offsets start at 0 and are contiguous,
  no trailing bytes after the last complete batch;
- the first batch is a control batch whose first record is a SnapshotHeaderRecord; the last
  record of the last batch is the only SnapshotFooterRecord;
- KRaftVersionRecord and VotersRecord only in the header batch, never in ``bootstrap.checkpoint``
  (the bootstrap reader fails on them); no other control type;
- data records carry frame version 1, a known api key and a valid version, with no bytes after
  the body; the partition leader epoch of every batch is the epoch in the name.
Per metadata partition (``__cluster_metadata-0``): its segments as any partition
(``validate_partition_dir``), leftover ``.checkpoint.part`` / ``.checkpoint.deleted`` files,
and KIP-630's invariant: when the log start offset is above 0, a snapshot whose end offset is
at or above it must exist (else Kafka refuses to start); snapshots ending below it are stale.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from migration.formats import names
from migration.formats.control_records import ControlRecordType, decode_control_value, read_control_key
from migration.formats.errors import KafkaFormatError, TruncatedError
from migration.formats.file_records import iterate_batches
from migration.formats.kraft_checkpoint import KRAFT_MAX_BATCH_BYTES
from migration.formats.layout import ATTRIBUTES_OFFSET, MAGIC_OFFSET, PARTITION_LEADER_EPOCH_OFFSET
from migration.formats.metadata_records import (
    METADATA_VERSION_FEATURE,
    MV_3_3_IV0,
    MV_3_3_IV3,
    UnknownMetadataRecordError,
    decode_metadata_record,
    metadata_version_name,
)
from migration.formats.model import Compression, Record
from migration.formats.record_batch import RecordBatch
from migration.logdir.findings import FindingCode
from migration.logdir.validate import ValidationResult, validate_partition_dir

__all__ = ["CheckpointCheck", "validate_checkpoint_file", "validate_metadata_log_dir"]

_KRAFT_HEADER_TYPES = (ControlRecordType.KRAFT_VERSION, ControlRecordType.KRAFT_VOTERS)


def _code(kind: str, rule: str) -> FindingCode:
    """The code of a snapshot rule for a KRaft snapshot (``kind`` CHECKPOINT) or for
    bootstrap.checkpoint (BOOTSTRAP): CHECKPOINT_FOOTER, BOOTSTRAP_FOOTER."""
    return FindingCode.of(f"{kind}_{rule}")


@dataclass
class CheckpointCheck:
    """What one checkpoint's validation learnt (for the directory-level checks)."""

    path: Path
    end_offset: int | None = None
    epoch: int | None = None
    complete: bool = False
    valid: bool = False
    metadata_records: int = 0
    metadata_version: int | None = None
    kraft_types: list[str] = field(default_factory=list)


def validate_checkpoint_file(path: str | os.PathLike[str], *, result: ValidationResult) -> ValidationResult:
    """Check one KRaft snapshot file or ``bootstrap.checkpoint``; findings go to ``result``."""
    _check_checkpoint(Path(path), result)
    return result


def _check_checkpoint(p: Path, res: ValidationResult) -> CheckpointCheck:
    check = CheckpointCheck(path=p)
    bootstrap = p.name == names.BOOTSTRAP_CHECKPOINT_FILE
    if bootstrap:
        check.epoch = 0  # BatchFileWriter writes epoch 0 everywhere
    else:
        try:
            cn = names.parse_checkpoint_file_name(p.name)
        except KafkaFormatError as exc:
            # Kafka's SnapshotPath.parse ignores such a file: whatever it holds is never loaded.
            res.add("error", FindingCode.CHECKPOINT_NAME, p, f"{exc.message}: Kafka ignores this file (expected "
                    "<20-digit end offset>-<10-digit epoch>.checkpoint)")
        else:
            check.end_offset, check.epoch = cn.end_offset, cn.epoch
            if cn.state is not names.CheckpointState.COMPLETE:
                res.add("warning", _code("CHECKPOINT", cn.state.name), p,
                        f"{cn.state.value} snapshot file left by an interrupted write or delete "
                        "(Kafka deletes it at startup)")
                return check
            check.complete = True
    try:
        data = p.read_bytes()
    except OSError as exc:
        res.add("error", FindingCode.UNREADABLE, p, str(exc))
        return check
    res.files_checked += 1
    errors_before = len(res.problems)
    _check_batches(p, data, check, bootstrap=bootstrap, res=res)
    check.valid = len(res.problems) == errors_before
    return check


def _check_batches(p: Path, data: bytes, check: CheckpointCheck, *, bootstrap: bool, res: ValidationResult) -> None:
    kind = "BOOTSTRAP" if bootstrap else "CHECKPOINT"
    batches: list[RecordBatch] = []
    try:
        for b in iterate_batches(data, path=str(p), strict=True):
            if not isinstance(b, RecordBatch):  # a v0/v1 entry (LegacyBatch)
                res.add("error", _code(kind, "MAGIC"), p, f"batch magic {b.magic}: snapshots hold v2 batches only",
                        position=b.position + MAGIC_OFFSET)
                return
            b.ensure_valid()
            batches.append(b)
    except TruncatedError as exc:
        res.add_error(exc.located(str(p)), _code(kind, "TRUNCATED"), file=p)
        return
    except KafkaFormatError as exc:
        res.add_error(exc.located(str(p)), _code(kind, "CORRUPT"), file=p)
        return
    res.bytes_checked += len(data)
    res.batches_checked += len(batches)
    if not batches:
        res.add("error", _code(kind, "EMPTY"), p, "no batch: a snapshot starts with a header batch", position=0)
        return
    expected_offset = 0
    footer_seen = False
    for i, b in enumerate(batches):
        pos = b.position
        if b.base_offset != expected_offset:
            res.add("error", _code(kind, "OFFSET"), p, f"batch base offset {b.base_offset}, expected {expected_offset} "
                    "(snapshot offsets start at 0 and are contiguous)", position=pos)
        if check.epoch is not None and b.partition_leader_epoch != check.epoch:
            res.add("error", _code(kind, "EPOCH"), p, f"batch partition leader epoch {b.partition_leader_epoch}, but "
                    f"the snapshot epoch is {check.epoch}", position=pos + PARTITION_LEADER_EPOCH_OFFSET)
        if b.size_in_bytes > KRAFT_MAX_BATCH_BYTES:
            res.add("warning", _code(kind, "BATCH_SIZE"), p, f"batch of {b.size_in_bytes} bytes is above KRaft's "
                    f"{KRAFT_MAX_BATCH_BYTES}-byte maximum", position=pos)
        try:
            compression = b.compression
        except KafkaFormatError as exc:  # a codec id Kafka does not know: no reader decodes the batch
            res.add_error(exc.located(str(p)), _code(kind, "CORRUPT"), file=p)
            return
        if compression is not Compression.NONE:
            res.add("warning", _code(kind, "COMPRESSED"), p, f"{compression.name} batch: Kafka writes snapshots "
                    "uncompressed", position=pos + ATTRIBUTES_OFFSET)
        if b.is_transactional or b.has_producer_id:
            res.add("warning", _code(kind, "PRODUCER"), p, "snapshot batch with producer state or the transactional "
                    "flag", position=pos + ATTRIBUTES_OFFSET)
        try:
            records = b.records()
        except KafkaFormatError as exc:
            res.add_error(exc.located(str(p), pos), _code(kind, "CORRUPT"), file=p)
            return
        res.records_checked += len(records)
        offsets = [r.offset for r in records]
        if offsets != list(range(b.base_offset, b.base_offset + len(records))):
            res.add("error", _code(kind, "OFFSET"), p, "record offsets inside the batch are not contiguous",
                    position=pos)
        expected_offset = b.next_offset
        if footer_seen:
            res.add("error", _code(kind, "AFTER_FOOTER"), p, "batch after the SnapshotFooterRecord", position=pos)
        if b.is_control:
            footer_seen |= _check_control_batch(p, b, records, i, len(batches), check, kind, bootstrap, res)
        elif i == 0:
            res.add("error", _code(kind, "HEADER"), p, "first batch is not the header control batch", position=pos)
        else:
            _check_data_batch(p, b, records, check, kind, res)
    if not footer_seen:
        res.add("error", _code(kind, "FOOTER"), p, "does not end with a SnapshotFooterRecord",
                position=batches[-1].position)
    if bootstrap:
        _check_bootstrap_mv(p, check, res)


def _check_control_batch(p: Path, b: RecordBatch, records: list[Record], i: int, n: int, check: CheckpointCheck,
                         kind: str, bootstrap: bool, res: ValidationResult) -> bool:
    footer = False
    pos = b.position
    for j, r in enumerate(records):
        try:
            ctype = read_control_key(r.key).type
            if ctype is not ControlRecordType.UNKNOWN and not ctype.is_transaction_marker:
                decode_control_value(ctype, r.value or b"")
        except KafkaFormatError as exc:
            res.add("error", _code(kind, "CONTROL_RECORD"), p,
                    f"control record at snapshot offset {r.offset}: {exc.message}", position=pos)
            continue
        if i == 0 and j == 0:
            if ctype is not ControlRecordType.SNAPSHOT_HEADER:
                res.add("error", _code(kind, "HEADER"), p, f"first record is {ctype.name}, not a SnapshotHeaderRecord",
                        position=pos)
            continue
        if ctype is ControlRecordType.SNAPSHOT_FOOTER:
            if i != n - 1 or j != len(records) - 1:
                res.add("error", _code(kind, "FOOTER"), p, "SnapshotFooterRecord is not the last record", position=pos)
            footer = True
        elif ctype in _KRAFT_HEADER_TYPES:
            check.kraft_types.append(ctype.name)
            if bootstrap:
                res.add("error", _code(kind, "KRAFT_RECORD"), p, f"{ctype.name} in bootstrap.checkpoint: Kafka's "
                        "bootstrap reader fails on it", position=pos)
            elif i != 0:
                res.add("error", _code(kind, "KRAFT_RECORD"), p, f"{ctype.name} outside the header batch", position=pos)
        elif ctype is ControlRecordType.SNAPSHOT_HEADER:
            res.add("error", _code(kind, "HEADER"), p, "second SnapshotHeaderRecord", position=pos)
        elif ctype is ControlRecordType.LEADER_CHANGE:
            res.add("info", _code(kind, "LEADER_CHANGE"), p, "LEADER_CHANGE record in a snapshot (readers skip it)",
                    position=pos)
        else:
            res.add("error", _code(kind, "CONTROL_TYPE"), p, f"control record type {ctype.name} is not allowed in a "
                    "snapshot", position=pos)
    return footer


def _check_data_batch(p: Path, b: RecordBatch, records: list[Record], check: CheckpointCheck, kind: str,
                      res: ValidationResult) -> None:
    pos = b.position
    for r in records:
        if r.value is None:
            res.add("error", _code(kind, "RECORD"), p, f"metadata record at snapshot offset {r.offset} has no value",
                    position=pos)
            continue
        try:
            m = decode_metadata_record(r.value)
        except UnknownMetadataRecordError as exc:
            res.add("error", _code(kind, "API_KEY"), p, f"record at snapshot offset {r.offset}: {exc.message}",
                    position=pos)
            continue
        except KafkaFormatError as exc:
            res.add("error", _code(kind, "RECORD"), p, f"metadata record at snapshot offset {r.offset}: {exc.message}",
                    position=pos)
            continue
        check.metadata_records += 1
        if m.api_key == 12 and m.fields.get("Name") == METADATA_VERSION_FEATURE:
            check.metadata_version = int(m.fields["FeatureLevel"])  # the last one wins, as in Kafka


def _check_bootstrap_mv(p: Path, check: CheckpointCheck, res: ValidationResult) -> None:
    mv = check.metadata_version
    if mv is None:
        res.add("error", FindingCode.BOOTSTRAP_METADATA_VERSION, p, "no metadata.version FeatureLevelRecord: "
                "Kafka refuses to load this bootstrap file")
    elif mv < MV_3_3_IV0:
        res.add("error", FindingCode.BOOTSTRAP_METADATA_VERSION, p, f"metadata.version {metadata_version_name(mv)} "
                "is below 3.3-IV0: Kafka refuses to load this bootstrap file")
    elif mv < MV_3_3_IV3:
        res.add("warning", FindingCode.BOOTSTRAP_METADATA_VERSION, p, f"metadata.version "
                f"{metadata_version_name(mv)} is below 3.3-IV3: newer servers fail on it (KAFKA-19192)")


def validate_metadata_log_dir(path: str | os.PathLike[str], *, result: ValidationResult) -> ValidationResult:
    """Validate ``__cluster_metadata-0`` (or a metadata log dir holding it, whose
    ``bootstrap.checkpoint`` is then checked too)."""
    res = result
    p = Path(path)
    if p.name != names.METADATA_PARTITION_DIR and (p / names.METADATA_PARTITION_DIR).is_dir():
        p = p / names.METADATA_PARTITION_DIR
    boot = p.parent / names.BOOTSTRAP_CHECKPOINT_FILE
    if boot.is_file():
        # The controller reads the bootstrap file beside the metadata partition at startup.
        _check_checkpoint(boot, res)
    if not p.is_dir():
        res.add("error", FindingCode.MISSING, p, "no metadata partition directory")
        return res
    part = names.METADATA_PARTITION_DIR
    # Segments as any partition; the generic check reports .checkpoint.deleted files as plain
    # leftovers, which are ours to report as snapshot leftovers.
    segs = ValidationResult()
    validate_partition_dir(p, result=segs)
    segs.findings = [f for f in segs.findings
                     if not (f.code == FindingCode.LEFTOVER_FILE
                             and (f.file or "").endswith(names.DELETED_CHECKPOINT_SUFFIX))]
    res.merge(segs)
    checks: list[CheckpointCheck] = []
    for e in sorted(os.scandir(p), key=lambda e: e.name):
        if not e.is_file() or names.CHECKPOINT_FILE_SUFFIX not in e.name:
            continue
        checks.append(_check_checkpoint(Path(e.path), res))
    for f in res.findings:
        if f.partition is None and f.file is not None and f.file.startswith(str(p)):
            f.partition = part
    _check_log_start(p, checks, res)
    return res


def _check_log_start(p: Path, checks: list[CheckpointCheck], res: ValidationResult) -> None:
    """KIP-630 "Validation of Snapshot and Log": a log starting above 0 needs a snapshot."""
    bases = sorted(names.offset_from_file_name(e.name) for e in os.scandir(p)
                   if e.name.endswith(names.LOG_FILE_SUFFIX) and e.name[:1].isdigit())
    complete = [c for c in checks if c.complete and c.end_offset is not None]
    if not bases:
        return  # Kafka creates an empty segment at the latest snapshot's end offset
    log_start = bases[0]
    if log_start > 0 and not any(c.end_offset is not None and c.end_offset >= log_start for c in complete):
        res.add("error", FindingCode.SNAPSHOT_MISSING, p, f"log start offset {log_start} > 0 but no snapshot ends "
                "at or above it: Kafka refuses to start", partition=names.METADATA_PARTITION_DIR)
    for c in complete:
        if c.end_offset is not None and c.end_offset < log_start:
            res.add("warning", FindingCode.SNAPSHOT_STALE, c.path, f"snapshot end offset {c.end_offset} is below the "
                    f"log start offset {log_start} (Kafka deletes it at startup)",
                    partition=names.METADATA_PARTITION_DIR)
