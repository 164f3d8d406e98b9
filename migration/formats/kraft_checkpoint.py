"""KRaft snapshot files (``<end offset>-<epoch>.checkpoint``, KIP-630) and ``bootstrap.checkpoint``.

A checkpoint is a concatenation of v2 record batches (``.log`` framing, CRC-32C):
  1. header batch, control: SnapshotHeaderRecord, then for kraft.version >= 1 a
     KRaftVersionRecord and, when a voter set is known, a VotersRecord;
  2. data batches: metadata records (frame version 1, api key, version, flexible body),
     null keys, no headers, BaseTimestamp = MaxTimestamp = append time;
  3. footer batch, control: SnapshotFooterRecord.
Offsets start at 0 and are contiguous across batches (positions inside the snapshot),
PartitionLeaderEpoch is the snapshot epoch, no compression, batches at most 8 MiB.
``bootstrap.checkpoint`` (pre-KIP-1170) has the same shape with epoch 0 and a header
timestamp of 0.

Facts: docs/formats.md §6, §7.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migration.formats import names
from migration.formats.control_records import (
    ControlRecordType,
    decode_control_value,
    encode_control_key,
    read_control_key,
    snapshot_footer_value,
    snapshot_header_value,
)
from migration.formats.errors import CorruptCheckpointError, KafkaFormatError
from migration.formats.file_records import iterate_batches
from migration.formats.fileio import durable_replace
from migration.formats.layout import MAGIC_OFFSET, RECORD_BATCH_OVERHEAD
from migration.formats.metadata_records import MetadataRecord, decode_metadata_record
from migration.formats.model import Compression, Record
from migration.formats.record_batch import RecordBatch, build_record_batch, encode_record

KRAFT_MAX_BATCH_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class KRaftControlRecord:
    """A control record of the header batch, kept byte for byte."""

    type: ControlRecordType
    value: bytes
    fields: dict[str, Any]


@dataclass
class CheckpointContents:
    path: str | None
    header: dict[str, Any]
    kraft_records: list[KRaftControlRecord] = field(default_factory=list)
    metadata_records: list[MetadataRecord] = field(default_factory=list)
    footer: dict[str, Any] | None = None
    epochs: set[int] = field(default_factory=set)
    batches: int = 0
    records: int = 0
    size: int = 0

    @property
    def kraft_version(self) -> int:
        for r in self.kraft_records:
            if r.type is ControlRecordType.KRAFT_VERSION:
                return int(r.fields["KRaftVersion"])
        return 0

    @property
    def voters_record(self) -> KRaftControlRecord | None:
        for r in self.kraft_records:
            if r.type is ControlRecordType.KRAFT_VOTERS:
                return r
        return None


def read_checkpoint(data: bytes | memoryview, *, path: str | os.PathLike[str] | None = None) -> CheckpointContents:
    """Decode and validate a checkpoint: CRC of every batch, header first, footer last, only
    KRaft control records in control batches, contiguous offsets from 0, framed metadata
    records in data batches, no trailing bytes. Errors name the file and byte position."""
    p = None if path is None else str(path)
    batches: list[RecordBatch] = []
    for b in iterate_batches(data, path=p, strict=True):
        if not isinstance(b, RecordBatch):  # a v0/v1 entry (LegacyBatch)
            raise CorruptCheckpointError("checkpoint batch is not a v2 record batch", path=p,
                                         position=b.position + MAGIC_OFFSET, expected=2, found=b.magic)
        try:
            b.ensure_valid()
        except KafkaFormatError as exc:
            raise exc.located(p) from None
        batches.append(b)
    if not batches:
        raise CorruptCheckpointError("checkpoint holds no batch", path=p, position=0, expected="a header batch")
    contents = CheckpointContents(path=p, header={}, size=len(data))
    expected_offset = 0
    for i, b in enumerate(batches):
        if b.base_offset != expected_offset:
            raise CorruptCheckpointError("checkpoint offsets are not contiguous", path=p, position=b.position,
                                         expected=expected_offset, found=b.base_offset)
        try:
            records = b.records()
        except KafkaFormatError as exc:
            raise exc.located(p) from None
        if [r.offset for r in records] != list(range(b.base_offset, b.base_offset + len(records))):
            raise CorruptCheckpointError("record offsets inside a checkpoint batch are not contiguous", path=p,
                                         position=b.position)
        expected_offset = b.next_offset
        contents.epochs.add(b.partition_leader_epoch)
        contents.batches += 1
        contents.records += len(records)
        if b.is_control:
            _read_control_batch(b, records, i, len(batches), contents, p)
        else:
            if i == 0:
                raise CorruptCheckpointError("first batch is not the header control batch", path=p,
                                             position=b.position, expected="control batch with SnapshotHeaderRecord")
            for r in records:
                if r.value is None:
                    raise CorruptCheckpointError("metadata record without a value", path=p, position=b.position)
                try:
                    contents.metadata_records.append(decode_metadata_record(r.value))
                except KafkaFormatError as exc:
                    raise CorruptCheckpointError(f"metadata record at snapshot offset {r.offset}: {exc.message}",
                                                 path=p, position=b.position, expected=exc.expected,
                                                 found=exc.found) from None
    if contents.footer is None:
        raise CorruptCheckpointError("checkpoint does not end with a SnapshotFooterRecord", path=p,
                                     position=batches[-1].position, expected="footer control batch")
    return contents


def _read_control_batch(b: RecordBatch, records: list[Record], i: int, n: int, contents: CheckpointContents,
                        p: str | None) -> None:
    for j, r in enumerate(records):

        try:
            ctype = read_control_key(r.key).type
            fields = decode_control_value(ctype, r.value or b"") if ctype is not ControlRecordType.UNKNOWN else {}
        except KafkaFormatError as exc:
            raise CorruptCheckpointError(f"control record at snapshot offset {r.offset}: {exc.message}", path=p,
                                         position=b.position) from None
        if i == 0 and j == 0:
            if ctype is not ControlRecordType.SNAPSHOT_HEADER:
                raise CorruptCheckpointError("first record is not a SnapshotHeaderRecord", path=p,
                                             position=b.position, expected="SNAPSHOT_HEADER", found=ctype.name)
            contents.header = fields
        elif ctype is ControlRecordType.SNAPSHOT_FOOTER:
            if i != n - 1 or j != len(records) - 1:
                raise CorruptCheckpointError("SnapshotFooterRecord is not the last record", path=p,
                                             position=b.position)
            contents.footer = fields
        elif ctype in (ControlRecordType.KRAFT_VERSION, ControlRecordType.KRAFT_VOTERS):
            if i != 0:
                raise CorruptCheckpointError(f"{ctype.name} outside the header batch", path=p, position=b.position)
            contents.kraft_records.append(KRaftControlRecord(ctype, bytes(r.value or b""), fields))
        elif ctype is ControlRecordType.SNAPSHOT_HEADER:
            raise CorruptCheckpointError("second SnapshotHeaderRecord", path=p, position=b.position)
        elif ctype is ControlRecordType.LEADER_CHANGE:
            continue  # tolerated by the bootstrap reader
        else:
            raise CorruptCheckpointError("control record type not allowed in a snapshot", path=p,
                                         position=b.position, found=ctype.name)


def read_checkpoint_file(path: str | os.PathLike[str]) -> CheckpointContents:
    return read_checkpoint(Path(path).read_bytes(), path=path)


def build_checkpoint(
    metadata_records: Sequence[bytes],
    *,
    header_timestamp: int,
    append_time: int,
    kraft_records: Sequence[KRaftControlRecord | tuple[ControlRecordType, bytes]] = (),
    epoch: int = 0,
    max_batch_bytes: int = KRAFT_MAX_BATCH_BYTES,
) -> bytes:
    """Encode a checkpoint. ``metadata_records`` are framed record values; ``kraft_records``
    (KRaftVersionRecord, VotersRecord) go after the header, byte for byte."""
    header = [Record(0, append_time, encode_control_key(ControlRecordType.SNAPSHOT_HEADER),
                     snapshot_header_value(header_timestamp))]
    for kr in kraft_records:
        ctype, value = (kr.type, kr.value) if isinstance(kr, KRaftControlRecord) else kr
        header.append(Record(len(header), append_time, encode_control_key(ctype), bytes(value)))
    parts = [_batch(header, epoch, control=True, append_time=append_time)]
    offset = len(header)
    pending: list[Record] = []
    size = RECORD_BATCH_OVERHEAD
    for value in metadata_records:
        rec = Record(offset, append_time, None, bytes(value))
        rec_size = len(encode_record(offset - (pending[0].offset if pending else offset), 0, None, rec.value))
        if rec_size + RECORD_BATCH_OVERHEAD > max_batch_bytes:
            raise CorruptCheckpointError("a metadata record does not fit in one KRaft batch",
                                         expected=f"<= {max_batch_bytes} bytes", found=rec_size)
        if pending and size + rec_size + 5 > max_batch_bytes:  # +5: offset deltas may grow by a varint byte
            parts.append(_batch(pending, epoch, control=False, append_time=append_time))
            pending, size = [], RECORD_BATCH_OVERHEAD
        pending.append(rec)
        size += rec_size
        offset += 1
    if pending:
        parts.append(_batch(pending, epoch, control=False, append_time=append_time))
    footer = [Record(offset, append_time, encode_control_key(ControlRecordType.SNAPSHOT_FOOTER),
                     snapshot_footer_value())]
    parts.append(_batch(footer, epoch, control=True, append_time=append_time))
    return b"".join(parts)


def _batch(records: list[Record], epoch: int, *, control: bool, append_time: int) -> bytes:
    return build_record_batch(records, compression=Compression.NONE, is_control=control,
                              partition_leader_epoch=epoch, base_timestamp=append_time, max_timestamp=append_time)


def write_checkpoint_file(directory: str | os.PathLike[str], end_offset: int, epoch: int, data: bytes) -> Path:
    """Write a snapshot as Kafka does: ``<id>-<random>.checkpoint.part``, fsync, read-only,
    atomic rename to ``<20-digit end offset>-<10-digit epoch>.checkpoint``, fsync the dir."""
    d = Path(directory)
    final = d / names.checkpoint_file_name(end_offset, epoch)
    part = d / f"{final.name[: -len(names.CHECKPOINT_FILE_SUFFIX)]}-{random.randrange(10**18)}" \
               f"{names.PARTIAL_CHECKPOINT_SUFFIX}"
    durable_replace(final, data, tmp_path=part, exclusive=True, read_only=True)  # a random name: nobody's
    return final


def write_bootstrap_checkpoint(directory: str | os.PathLike[str], data: bytes) -> Path:
    """``bootstrap.checkpoint`` via ``bootstrap.checkpoint.tmp``, as kafka-storage format writes it.
    The temporary name is fixed: one a crash left behind is overwritten."""
    d = Path(directory)
    final = d / names.BOOTSTRAP_CHECKPOINT_FILE
    tmp = d / (names.BOOTSTRAP_CHECKPOINT_FILE + names.TMP_FILE_SUFFIX)
    durable_replace(final, data, tmp_path=tmp, exclusive=False)
    return final
