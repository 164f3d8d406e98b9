"""Fuzz target: control records of v2 control batches (the key; ABORT/COMMIT markers; the KRaft
bodies: LeaderChange, SnapshotHeader/Footer, KRaftVersion, Voters). An input is one record:
a length byte, the key (0xFF: a null key), then the value."""

from __future__ import annotations

from fuzz.harness import Target, attempt
from migration.formats.control_records import (
    CONTROL_VALUE_SCHEMAS,
    ControlRecordType,
    EndTransactionMarker,
    decode_control_record,
    decode_control_value,
    read_control_key,
)

NULL_KEY = 0xFF


def split(data: bytes) -> tuple[bytes | None, bytes | None]:
    if not data:
        return None, None
    n = data[0]
    if n == NULL_KEY:
        return None, data[1:]
    return data[1 : 1 + n], data[1 + n :]


def run(data: bytes, kind: str) -> None:
    key, value = split(data)
    attempt(read_control_key, key)
    attempt(decode_control_record, key, value)
    attempt(decode_control_record, key, value, strict=False)
    attempt(EndTransactionMarker.decode, key, value)
    for ctype in CONTROL_VALUE_SCHEMAS:
        attempt(decode_control_value, ctype, value or b"")
        attempt(decode_control_value, ctype, value or b"", strict=False)
    for ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        attempt(EndTransactionMarker.decode_value, ctype, value)


def seed_check(data: bytes, name: str) -> None:
    decode_control_record(*split(data))


TARGET = Target("control_records", run, hot=lambda d: list(range(min(len(d), 12))), quick_examples=1200,
                seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
