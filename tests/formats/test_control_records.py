"""Control records: keys, end transaction markers and KRaft control bodies
(docs/formats.md §2.9, §6.5, §6.6, §7.2)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migration.formats import control_records as cr
from migration.formats.control_records import (
    CONTROL_VALUE_SCHEMAS,
    ControlRecordKey,
    ControlRecordType,
    EndTransactionMarker,
    decode_control_key,
    decode_control_record,
    decode_control_value,
    encode_control_key,
    encode_control_value,
    kraft_version_value,
    read_control_key,
    snapshot_footer_value,
    snapshot_header_value,
)
from migration.formats.errors import CorruptRecordError, SchemaError, TruncatedError
from migration.formats.message_schema import UNKNOWN_TAGGED_FIELDS, ZERO_UUID, uuid_to_str


def test_control_record_type_ids() -> None:
    assert [(t.name, int(t)) for t in ControlRecordType] == [
        ("ABORT", 0),
        ("COMMIT", 1),
        ("LEADER_CHANGE", 2),
        ("SNAPSHOT_HEADER", 3),
        ("SNAPSHOT_FOOTER", 4),
        ("KRAFT_VERSION", 5),
        ("KRAFT_VOTERS", 6),
        ("UNKNOWN", -1),
    ]


# --------------------------------------------------------------------------- keys


def test_key_vectors() -> None:
    assert encode_control_key(ControlRecordType.SNAPSHOT_HEADER) == bytes.fromhex("00000003")
    assert encode_control_key(ControlRecordType.SNAPSHOT_FOOTER) == bytes.fromhex("00000004")
    assert encode_control_key(ControlRecordType.COMMIT) == bytes.fromhex("00000001")
    for t in ControlRecordType:
        if t is not ControlRecordType.UNKNOWN:
            assert decode_control_key(encode_control_key(t)) is t
    with pytest.raises(SchemaError):
        encode_control_key(ControlRecordType.UNKNOWN)


def test_key_parsing_rules() -> None:
    # A later key version is read as version 0; the stored version is kept for reports.
    assert read_control_key(bytes.fromhex("00070003")) == ControlRecordKey(7, 3, ControlRecordType.SNAPSHOT_HEADER)
    # Unknown type ids map to UNKNOWN; extra key bytes are ignored.
    assert decode_control_key(bytes.fromhex("0000002a")) is ControlRecordType.UNKNOWN
    assert decode_control_key(bytes.fromhex("0000ffff")) is ControlRecordType.UNKNOWN
    assert decode_control_key(bytes.fromhex("00000001ffff")) is ControlRecordType.COMMIT
    with pytest.raises(TruncatedError, match="too short") as info:
        decode_control_key(b"\x00\x00\x00")
    assert info.value.position == 0
    with pytest.raises(TruncatedError):
        decode_control_key(None)
    with pytest.raises(CorruptRecordError, match="version") as info2:
        decode_control_key(bytes.fromhex("ffff0001"))
    assert info2.value.found == -1


# --------------------------------------------------------------------------- transaction markers


def test_end_transaction_marker() -> None:
    marker = EndTransactionMarker(ControlRecordType.COMMIT, 5)
    assert marker.encode_value() == bytes.fromhex("000000000005")
    assert marker.encode_key() == bytes.fromhex("00000001")
    assert EndTransactionMarker.decode(marker.encode_key(), marker.encode_value()) == marker
    abort = EndTransactionMarker.decode_value(ControlRecordType.ABORT, bytes.fromhex("0000ffffffff"))
    assert abort.coordinator_epoch == -1 and abort.control_type is ControlRecordType.ABORT


def test_end_transaction_marker_leniency_and_errors() -> None:
    # Kafka reads a later version as version 0 and ignores bytes after the 6.
    later = EndTransactionMarker.decode_value(ControlRecordType.COMMIT, bytes.fromhex("000300000009aabb"))
    assert later.version == 3 and later.coordinator_epoch == 9
    with pytest.raises(TruncatedError, match="too short"):
        EndTransactionMarker.decode_value(ControlRecordType.COMMIT, b"\x00\x00\x00\x00\x00")
    with pytest.raises(CorruptRecordError):
        EndTransactionMarker.decode_value(ControlRecordType.COMMIT, bytes.fromhex("ffff00000001"))
    with pytest.raises(SchemaError, match="ABORT or COMMIT"):
        EndTransactionMarker(ControlRecordType.SNAPSHOT_HEADER, 1)
    with pytest.raises(SchemaError):
        EndTransactionMarker(ControlRecordType.ABORT, 2**31).encode_value()


# --------------------------------------------------------------------------- KRaft bodies


def test_snapshot_header_footer_kraft_version_vectors() -> None:
    header = snapshot_header_value(1_700_000_000_000)
    assert len(header) == 11
    assert header == b"\x00\x00" + struct.pack(">q", 1_700_000_000_000) + b"\x00"
    assert decode_control_value(ControlRecordType.SNAPSHOT_HEADER, header) == {
        "Version": 0,
        "LastContainedLogTimestamp": 1_700_000_000_000,
    }
    assert snapshot_footer_value() == bytes.fromhex("000000")
    assert decode_control_value(ControlRecordType.SNAPSHOT_FOOTER, b"\x00\x00\x00") == {"Version": 0}
    assert kraft_version_value(1) == bytes.fromhex("0000000100")
    assert decode_control_value(5, bytes.fromhex("0000000100")) == {"Version": 0, "KRaftVersion": 1}


def test_bootstrap_zero_checkpoint_voter_round_trip() -> None:
    # The voter `kafka-storage format --standalone` writes (§7.2): one endpoint, kraft.version 0..1.
    directory_id = uuid_to_str(bytes.fromhex("9f2b5c0a1e3d4f6a8b7c6d5e4f3a2b1c"))
    fields = {
        "Version": 0,
        "Voters": [
            {
                "VoterId": 3000,
                "VoterDirectoryId": directory_id,
                "Endpoints": [{"Name": "CONTROLLER", "Host": "controller-0.example", "Port": 9093}],
                "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1},
            },
            {
                "VoterId": 3001,
                "VoterDirectoryId": ZERO_UUID,
                "Endpoints": [],
                "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 0},
            },
        ],
    }
    value = encode_control_value(ControlRecordType.KRAFT_VOTERS, fields)
    assert value[:3] == b"\x00\x00\x03"  # Version 0, two voters
    assert value[3:7] == struct.pack(">i", 3000)
    assert value.endswith(b"\x00\x00\x00\x00\x00\x00\x00")  # empty endpoints…feature…tags
    record = decode_control_record(encode_control_key(ControlRecordType.KRAFT_VOTERS), value)
    assert record.type is ControlRecordType.KRAFT_VOTERS
    assert record.body == fields
    assert encode_control_value(ControlRecordType.KRAFT_VOTERS, record.body) == value


def test_leader_change_versions() -> None:
    v0 = {
        "Version": 0,
        "LeaderId": 1,
        "Voters": [{"VoterId": 1}, {"VoterId": 2}],
        "GrantingVoters": [{"VoterId": 1}],
    }
    body0 = encode_control_value(ControlRecordType.LEADER_CHANGE, v0)
    assert body0 == bytes.fromhex("000000000001030000000100000000020002000000010000")
    assert decode_control_value(ControlRecordType.LEADER_CHANGE, body0) == v0
    # Version 1 adds VoterDirectoryId; the body's own Version field selects the schema version.
    v1 = {
        "Version": 1,
        "LeaderId": 1,
        "Voters": [{"VoterId": 1, "VoterDirectoryId": ZERO_UUID}],
        "GrantingVoters": [],
    }
    body1 = encode_control_value(ControlRecordType.LEADER_CHANGE, v1, version=1)
    assert len(body1) == len(bytes.fromhex("0001000000010200000001")) + 16 + 3
    assert decode_control_value(ControlRecordType.LEADER_CHANGE, body1) == v1
    with pytest.raises(SchemaError, match="VoterDirectoryId"):
        encode_control_value(
            ControlRecordType.LEADER_CHANGE,
            {**v1, "Version": 0, "Voters": [{"VoterId": 1, "VoterDirectoryId": uuid_to_str(b"\x01" * 16)}]},
            version=0,
        )


def test_trailing_bytes_strict_and_lenient() -> None:
    value = snapshot_footer_value() + b"\xee"
    with pytest.raises(SchemaError, match="garbage after") as info:
        decode_control_value(ControlRecordType.SNAPSHOT_FOOTER, value)
    assert info.value.position == 3
    assert decode_control_value(ControlRecordType.SNAPSHOT_FOOTER, value, strict=False) == {"Version": 0}


def test_truncated_control_body() -> None:
    with pytest.raises(TruncatedError) as info:
        decode_control_value(ControlRecordType.SNAPSHOT_HEADER, snapshot_header_value(5)[:6])
    assert info.value.position == 2


def test_unknown_tags_in_control_body_are_kept() -> None:
    value = b"\x00\x00" + b"\x01\x04\x02ab"  # footer with an unknown tag 4
    decoded = decode_control_value(ControlRecordType.SNAPSHOT_FOOTER, value)
    assert decoded == {"Version": 0, UNKNOWN_TAGGED_FIELDS: [(4, b"ab")]}
    assert encode_control_value(ControlRecordType.SNAPSHOT_FOOTER, decoded) == value


def test_decode_control_record_dispatch() -> None:
    commit = decode_control_record(bytes.fromhex("00000001"), bytes.fromhex("000000000007"))
    assert commit.body == EndTransactionMarker(ControlRecordType.COMMIT, 7)
    unknown = decode_control_record(bytes.fromhex("00000063"), b"anything")
    assert unknown.type is ControlRecordType.UNKNOWN and unknown.key.type_id == 99 and unknown.body is None
    header = decode_control_record(bytes.fromhex("00000003"), snapshot_header_value(0))
    assert header.body == {"Version": 0, "LastContainedLogTimestamp": 0}
    with pytest.raises(SchemaError):
        decode_control_record(bytes.fromhex("00000004"), None)
    with pytest.raises(SchemaError):
        decode_control_value(ControlRecordType.COMMIT, b"\x00" * 6)


def test_every_kraft_control_type_has_a_schema() -> None:
    assert set(CONTROL_VALUE_SCHEMAS) == {
        ControlRecordType.LEADER_CHANGE,
        ControlRecordType.SNAPSHOT_HEADER,
        ControlRecordType.SNAPSHOT_FOOTER,
        ControlRecordType.KRAFT_VERSION,
        ControlRecordType.KRAFT_VOTERS,
    }


@settings(max_examples=100, deadline=None)
@given(timestamp=st.integers(-(2**63), 2**63 - 1), kraft=st.integers(-(2**15), 2**15 - 1))
def test_header_and_kraft_version_round_trip(timestamp: int, kraft: int) -> None:
    header = snapshot_header_value(timestamp)
    assert decode_control_value(3, header)["LastContainedLogTimestamp"] == timestamp
    assert decode_control_value(5, kraft_version_value(kraft))["KRaftVersion"] == kraft


def test_key_and_marker_layouts_are_kafkas() -> None:
    # ControlRecordType.CURRENT_CONTROL_RECORD_KEY_SIZE 4 (version int16, type int16);
    # EndTransactionMarker.CURRENT_END_TXN_MARKER_VALUE_SIZE 6 (version int16, coordinator epoch int32)
    assert (cr.CONTROL_KEY_VERSION_OFFSET, cr.CONTROL_KEY_TYPE_OFFSET, cr.CONTROL_KEY_SIZE) == (0, 2, 4)
    assert cr.CONTROL_KEY_TYPE_OFFSET == cr.CONTROL_KEY_VERSION_OFFSET + cr.CONTROL_KEY_VERSION_LENGTH
    assert cr.CONTROL_KEY_SIZE == cr.CONTROL_KEY_TYPE_OFFSET + cr.CONTROL_KEY_TYPE_LENGTH
    assert (cr.END_TXN_MARKER_VERSION_OFFSET, cr.COORDINATOR_EPOCH_OFFSET, cr.END_TXN_MARKER_VALUE_SIZE) == (0, 2, 6)
    assert cr.COORDINATOR_EPOCH_OFFSET == cr.END_TXN_MARKER_VERSION_OFFSET + cr.END_TXN_MARKER_VERSION_LENGTH
    assert cr.END_TXN_MARKER_VALUE_SIZE == cr.COORDINATOR_EPOCH_OFFSET + cr.COORDINATOR_EPOCH_LENGTH
    key = encode_control_key(ControlRecordType.COMMIT)
    assert len(key) == cr.CONTROL_KEY_SIZE
    assert struct.unpack_from(">h", key, cr.CONTROL_KEY_TYPE_OFFSET)[0] == ControlRecordType.COMMIT
    value = EndTransactionMarker(ControlRecordType.ABORT, 0x01020304).encode_value()
    assert len(value) == cr.END_TXN_MARKER_VALUE_SIZE
    assert struct.unpack_from(">i", value, cr.COORDINATOR_EPOCH_OFFSET)[0] == 0x01020304
