"""``kmigrate inspect``: dump Kafka files like kafka-dump-log, shallow or deep, as text or JSON.

Dispatch is on the file name, as DumpLogSegments does: ``.log`` and ``.checkpoint`` (KRaft
snapshots and bootstrap.checkpoint) are record files, then ``.index``, ``.timeindex``,
``.txnindex``, ``.snapshot``. Metadata records in checkpoints are decoded through the schemas;
fields marked sensitive (SCRAM salts and keys) are always shown redacted.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from migration.formats import names
from migration.formats.control_records import decode_control_record
from migration.formats.errors import KafkaFormatError
from migration.formats.file_records import FileRecords
from migration.formats.message_schema import redact
from migration.formats.metadata_records import decode_metadata_record, metadata_schema
from migration.formats.model import MAGIC_V2


def _blob(b: bytes | None) -> Any:
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(b).decode()


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes | bytearray | memoryview):
        return _blob(bytes(v))
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    return v


def file_kind(path: Path) -> str:
    name = path.name
    if name.endswith(names.LOG_FILE_SUFFIX):
        return "log"
    if name.endswith(names.CHECKPOINT_FILE_SUFFIX) or name == names.BOOTSTRAP_CHECKPOINT_FILE:
        return "checkpoint"
    for suffix, kind in ((names.INDEX_FILE_SUFFIX, "index"), (names.TIME_INDEX_FILE_SUFFIX, "timeindex"),
                         (names.TXN_INDEX_FILE_SUFFIX, "txnindex"),
                         (names.PRODUCER_SNAPSHOT_FILE_SUFFIX, "snapshot")):
        if name.endswith(suffix):
            return kind
    return "unknown"


def inspect_file(path: str | os.PathLike[str], *, deep: bool = False) -> Iterator[dict[str, Any]]:
    """Yield one dict per batch (record files) or entry (index and snapshot files); a final
    dict with ``summary`` says what was found at the end (trailing bytes)."""
    p = Path(path)
    kind = file_kind(p)
    if kind in ("log", "checkpoint"):
        yield from _inspect_records(p, deep=deep or kind == "checkpoint", metadata=kind == "checkpoint"
                                    or names.METADATA_PARTITION_DIR in p.parts)
    elif kind == "index":
        from migration.formats.offset_index import OffsetIndex

        idx = OffsetIndex.read(p, strict=False)
        for e in idx.entries:
            yield {"offset": e.offset, "position": e.position}
    elif kind == "timeindex":
        from migration.formats.time_index import TimeIndex

        tidx = TimeIndex.read(p, strict=False)
        for e in tidx.entries:
            yield {"timestamp": e.timestamp, "offset": e.offset}
    elif kind == "txnindex":
        from migration.formats.transaction_index import TransactionIndex

        for t in TransactionIndex.read(p, strict=False).entries:
            yield t._asdict()
    elif kind == "snapshot":
        from migration.formats.producer_snapshot import ProducerSnapshot

        for e in ProducerSnapshot.read(p).entries:
            yield e._asdict()
    else:
        yield {"summary": True, "skipped": f"Ignoring unknown file {p}"}


def _inspect_records(p: Path, *, deep: bool, metadata: bool) -> Iterator[dict[str, Any]]:
    fr = FileRecords(p)
    for b in fr.batches():
        row: dict[str, Any] = {
            "baseOffset": b.base_offset, "lastOffset": b.last_offset, "position": b.position,
            "size": b.size_in_bytes, "magic": b.magic, "compresscodec": b.compression.label,
            "timestampType": b.timestamp_type.label, "maxTimestamp": b.max_timestamp,
            "crc": b.crc, "isvalid": b.is_valid(),
        }
        if b.magic == MAGIC_V2:
            row.update(count=b.records_count, baseSequence=b.base_sequence, lastSequence=b.last_sequence,
                       producerId=b.producer_id, producerEpoch=b.producer_epoch,
                       partitionLeaderEpoch=b.partition_leader_epoch, isTransactional=b.is_transactional,
                       isControl=b.is_control)
        if deep:
            row["records"] = [_record_row(b, r, metadata) for r in b.records()]
        yield row
    yield {"summary": True, "validBytes": fr.valid_bytes, "trailingBytes": fr.trailing_bytes}


def _record_row(batch: Any, r: Any, metadata: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"offset": r.offset, "timestamp": r.timestamp,
                           "keySize": -1 if r.key is None else len(r.key),
                           "valueSize": -1 if r.value is None else len(r.value)}
    if r.headers:
        row["headerKeys"] = [h.key for h in r.headers]
    if batch.magic == MAGIC_V2 and batch.is_control:
        try:
            cr = decode_control_record(r.key, r.value)
            body = cr.body
            row["control"] = {"type": cr.type.name,
                              "body": body if isinstance(body, dict) else getattr(body, "__dict__", None)}
        except KafkaFormatError as exc:
            row["controlError"] = str(exc)
    elif metadata and r.value is not None:
        try:
            m = decode_metadata_record(r.value)
            row["payload"] = {"type": m.name, "version": m.version,
                              "fields": _jsonable(redact(m.fields, metadata_schema(m.api_key)))}
        except KafkaFormatError as exc:
            row["payloadError"] = str(exc)
    return row


def format_row(row: dict[str, Any]) -> list[str]:
    """kafka-dump-log-like text lines for one row."""
    if row.get("summary"):
        if "skipped" in row:
            return [row["skipped"]]
        if row.get("trailingBytes"):
            return [f"Found {row['trailingBytes']} invalid bytes at the end of the file"]
        return []
    head = " ".join(f"{k}: {v}" for k, v in row.items() if k != "records")
    lines = [head]
    for r in row.get("records", []):
        lines.append("| " + " ".join(f"{k}: {_jsonable(v)}" for k, v in r.items()))
    return lines
