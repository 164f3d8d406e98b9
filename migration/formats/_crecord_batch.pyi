"""Stub of the compiled ``_crecord_batch.pyx`` (satisfies ``_protocols.RecordBatchKernels``)."""

from collections.abc import Sequence

from migration.formats._protocols import Buffer, Span
from migration.formats.model import Record

def digest_v2(buf: Buffer, start: int, end: int, count: int, base_offset: int, base_timestamp: int, lat: int | None,
              parts: list[bytes | memoryview], stamps: list[int], /) -> Span | None: ...
def check_v2(buf: Buffer, start: int, end: int, count: int, base_offset: int, base_timestamp: int,
             /) -> Span | None: ...
def encode_records(records: Sequence[Record], base_offset: int, base_timestamp: int, /) -> tuple[bytes, int, int]: ...
def single_record_batch(offset: int, timestamp: int, key: Buffer | None, value: Buffer | None, log_append_time: bool,
                        partition_leader_epoch: int, /) -> bytes: ...
