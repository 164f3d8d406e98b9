"""Schema-driven message codec: vectors of docs/formats.md §6.4-§6.6, tagged fields,
non-flexible versions, hypothesis round trips, typed errors and redaction."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migration.formats.errors import KafkaFormatError, SchemaError, TruncatedError
from migration.formats.message_schema import (
    DEFAULT_SCHEMA_DIR,
    UNKNOWN_TAGGED_FIELDS,
    ZERO_UUID,
    FieldSpec,
    MessageSchema,
    StructSpec,
    default_registry,
    load_schemas,
    read_unsigned_varint,
    redact,
    uuid_from_str,
    uuid_to_str,
    write_unsigned_varint,
)

REG = default_registry()
ALL_SCHEMAS = sorted(REG.by_name.values(), key=lambda s: s.name)
SCHEMA_VERSIONS = [(s, v) for s in ALL_SCHEMAS for v in s.versions]

NAME = b"metadata.version"
FEATURE_LEVEL_BODY = bytes([len(NAME) + 1]) + NAME + b"\x00\x15" + b"\x00"


def uvarint(n: int) -> bytes:
    out = bytearray()
    write_unsigned_varint(out, n)
    return bytes(out)


# --------------------------------------------------------------------------- generated values


def _primitive(type_name: str) -> st.SearchStrategy[Any]:
    ints = {
        "int8": (-(2**7), 2**7 - 1),
        "int16": (-(2**15), 2**15 - 1),
        "int32": (-(2**31), 2**31 - 1),
        "int64": (-(2**63), 2**63 - 1),
        "uint16": (0, 2**16 - 1),
        "uint32": (0, 2**32 - 1),
    }
    if type_name in ints:
        lo, hi = ints[type_name]
        return st.integers(lo, hi)
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": st.text(max_size=12),
        "bytes": st.binary(max_size=12),
        "uuid": st.binary(min_size=16, max_size=16).map(uuid_to_str),
    }[type_name]


def field_strategy(f: FieldSpec, version: int) -> st.SearchStrategy[Any]:
    element = struct_strategy(f.struct, version) if f.struct is not None else _primitive(f.element_type)
    strategy = st.lists(element, max_size=3) if f.is_array else element
    if version in f.nullable_versions:
        strategy = st.none() | strategy
    return strategy


def struct_strategy(spec: StructSpec, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({f.name: field_strategy(f, version) for f in spec.fields if version in f.versions})


def values_for(schema: MessageSchema, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return struct_strategy(schema.struct, version)


# --------------------------------------------------------------------------- primitives


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (2**32 - 1, "ffffffff0f")],
)
def test_unsigned_varint_vectors(value: int, encoded: str) -> None:
    assert uvarint(value) == bytes.fromhex(encoded)
    buf = memoryview(bytes.fromhex(encoded))
    assert read_unsigned_varint(buf, 0, len(buf)) == (value, len(buf))


def test_unsigned_varint_errors() -> None:
    with pytest.raises(SchemaError, match="too long") as info:
        read_unsigned_varint(memoryview(b"\x80\x80\x80\x80\x80\x01"), 0, 6)
    assert info.value.position == 0
    with pytest.raises(TruncatedError) as info2:
        read_unsigned_varint(memoryview(b"\x00\x80\x80"), 1, 3)
    assert info2.value.position == 1
    with pytest.raises(SchemaError):
        write_unsigned_varint(bytearray(), -1)


def test_uuid_string_form() -> None:
    raw = bytes(range(16))
    text = uuid_to_str(raw)
    assert len(text) == 22 and "=" not in text
    assert uuid_from_str(text) == raw
    assert uuid_from_str(ZERO_UUID) == bytes(16)
    # Kafka uses the URL-safe alphabet: 0xfb 0xff -> "-_" characters, never "+/".
    assert uuid_to_str(b"\xfb\xff" * 8).count("+") == 0
    for bad in ("short", "A" * 23, "!" * 22):
        with pytest.raises(SchemaError):
            uuid_from_str(bad)


# --------------------------------------------------------------------------- loading


def test_default_directory_and_required_schemas() -> None:
    assert Path(__file__).resolve().parents[2] / "migration" / "formats" / "schemas" == DEFAULT_SCHEMA_DIR
    expected = {
        0: "RegisterBrokerRecord",
        2: "TopicRecord",
        3: "PartitionRecord",
        4: "ConfigRecord",
        5: "PartitionChangeRecord",
        7: "FenceBrokerRecord",
        8: "UnfenceBrokerRecord",
        9: "RemoveTopicRecord",
        11: "UserScramCredentialRecord",
        12: "FeatureLevelRecord",
        15: "ProducerIdsRecord",
        20: "NoOpRecord",
        27: "RegisterControllerRecord",
        29: "ClusterIdRecord",
    }
    for api_key, name in expected.items():
        assert REG.metadata(api_key) is not None and REG.metadata(api_key).name == name
    for name in ("SnapshotHeaderRecord", "SnapshotFooterRecord", "KRaftVersionRecord", "VotersRecord"):
        assert REG.get(name).type == "data" and REG.get(name).api_key is None
    assert list(REG.get("PartitionRecord").versions) == [0, 1, 2]
    assert list(REG.get("RegisterBrokerRecord").versions) == [0, 1, 2, 3]
    assert list(REG.get("LeaderChangeMessage").versions) == [0, 1]
    salt = REG.get("UserScramCredentialRecord").struct.field("Salt")
    assert salt is not None and salt.sensitive


def test_every_schema_file_is_plain_json_without_license_header() -> None:
    for path in DEFAULT_SCHEMA_DIR.glob("*.json"):
        text = path.read_text()
        assert "Licensed to the Apache" not in text
        json.loads(text)


def _write(directory: Path, name: str, text: str) -> None:
    (directory / f"{name}.json").write_text(text)


def test_override_directory_and_kafka_comment_lines(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "Tiny",
        """// a comment line as in Kafka's own files
        { "type": "data", "name": "Tiny", "validVersions": "0", "flexibleVersions": "0+",
          "fields": [ { "name": "A", "type": "int32", "versions": "0+" } ] }""",
    )
    reg = load_schemas(tmp_path)
    assert list(reg.by_name) == ["Tiny"]
    assert reg.get("Tiny").encode({"A": 7}, 0) == b"\x00\x00\x00\x07\x00"
    with pytest.raises(SchemaError):
        reg.get("FeatureLevelRecord")


@pytest.mark.parametrize(
    "bad_field",
    [
        '{ "name": "A", "type": "int32", "versions": "0+", "nullableVersions": "0+" }',
        '{ "name": "A", "type": "Nope", "versions": "0+" }',
        '{ "name": "A", "type": "int32", "versions": "0+", "taggedVersions": "0+" }',
        '{ "name": "A", "type": "[]int32", "versions": "0+", "default": "null" }',
        '{ "name": "A", "type": "int32", "versions": "x+" }',
    ],
)
def test_bad_schema_definitions_are_rejected(tmp_path: Path, bad_field: str) -> None:
    _write(
        tmp_path,
        "Bad",
        '{ "type": "data", "name": "Bad", "validVersions": "0", "flexibleVersions": "0+", '
        f'"fields": [ {bad_field} ] }}',
    )
    with pytest.raises(SchemaError):
        load_schemas(tmp_path)


def test_duplicate_api_key_is_rejected(tmp_path: Path) -> None:
    for name in ("A", "B"):
        _write(
            tmp_path,
            name,
            f'{{ "apiKey": 1, "type": "metadata", "name": "{name}", "validVersions": "0", '
            '"flexibleVersions": "0+", "fields": [] }',
        )
    with pytest.raises(SchemaError, match="api key 1"):
        load_schemas(tmp_path)


# --------------------------------------------------------------------------- vectors


def test_feature_level_record_body_vector() -> None:
    schema = REG.get("FeatureLevelRecord")
    assert schema.encode({"Name": "metadata.version", "FeatureLevel": 21}, 0) == FEATURE_LEVEL_BODY
    assert schema.decode(FEATURE_LEVEL_BODY, 0) == {"Name": "metadata.version", "FeatureLevel": 21}
    assert schema.decode(memoryview(b"xx" + FEATURE_LEVEL_BODY)[2:], 0)["FeatureLevel"] == 21


def test_snapshot_control_bodies() -> None:
    header = REG.get("SnapshotHeaderRecord")
    encoded = header.encode({"Version": 0, "LastContainedLogTimestamp": 1_700_000_000_123}, 0)
    assert len(encoded) == 11
    assert encoded == b"\x00\x00" + struct.pack(">q", 1_700_000_000_123) + b"\x00"
    assert REG.get("SnapshotFooterRecord").encode({"Version": 0}, 0) == b"\x00\x00\x00"
    assert REG.get("KRaftVersionRecord").encode({"Version": 0, "KRaftVersion": 1}, 0) == bytes.fromhex("0000000100")


DIR_ID = bytes.fromhex("0123456789abcdeffedcba9876543210")
VOTERS_BYTES = (
    b"\x00\x00"  # Version
    + b"\x02"  # one voter
    + b"\x00\x00\x00\x01"  # VoterId
    + DIR_ID  # VoterDirectoryId
    + b"\x02"  # one endpoint
    + b"\x0bCONTROLLER"
    + b"\x0alocalhost"
    + b"\x23\x85"  # Port 9093
    + b"\x00"  # endpoint tagged fields
    + b"\x00\x00\x00\x01"  # KRaftVersionFeature 0..1
    + b"\x00"  # KRaftVersionFeature tagged fields
    + b"\x00"  # voter tagged fields
    + b"\x00"  # message tagged fields
)
VOTERS_VALUE = {
    "Version": 0,
    "Voters": [
        {
            "VoterId": 1,
            "VoterDirectoryId": uuid_to_str(DIR_ID),
            "Endpoints": [{"Name": "CONTROLLER", "Host": "localhost", "Port": 9093}],
            "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1},
        }
    ],
}


def test_voters_record_byte_for_byte() -> None:
    schema = REG.get("VotersRecord")
    assert schema.encode(VOTERS_VALUE, 0) == VOTERS_BYTES
    decoded = schema.decode(VOTERS_BYTES, 0)
    assert decoded == VOTERS_VALUE
    assert schema.encode(decoded, 0) == VOTERS_BYTES


def test_partition_record_v2_tagged_fields_by_hand() -> None:
    schema = REG.get("PartitionRecord")
    topic = bytes(range(16))
    value = {
        "PartitionId": 0,
        "TopicId": uuid_to_str(topic),
        "Replicas": [1, 2],
        "Isr": [1],
        "RemovingReplicas": [],
        "AddingReplicas": [],
        "Leader": 1,
        "LeaderRecoveryState": 1,
        "LeaderEpoch": 3,
        "PartitionEpoch": 4,
        "Directories": [ZERO_UUID, ZERO_UUID],
        "EligibleLeaderReplicas": [2],
        "LastKnownElr": None,
    }
    expected = (
        b"\x00\x00\x00\x00"
        + topic
        + b"\x03\x00\x00\x00\x01\x00\x00\x00\x02"
        + b"\x02\x00\x00\x00\x01"
        + b"\x01"
        + b"\x01"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x03"
        + b"\x00\x00\x00\x04"
        + b"\x03"
        + bytes(32)
        # tagged: LeaderRecoveryState (tag 0, 1 byte) and ELR (tag 1); LastKnownElr is at
        # its default (null) so it is not written.
        + b"\x02"
        + b"\x00\x01\x01"
        + b"\x01\x05\x02\x00\x00\x00\x02"
    )
    assert schema.encode(value, 2) == expected
    assert schema.decode(expected, 2) == value
    # At version 0 the tagged field LeaderRecoveryState is still there, ELR is not.
    v0 = {k: v for k, v in value.items() if k not in ("Directories", "EligibleLeaderReplicas", "LastKnownElr")}
    decoded_v0 = schema.decode(schema.encode(v0, 0), 0)
    assert decoded_v0 == v0


def test_tagged_fields_at_default_are_not_written_and_defaults_fill_in() -> None:
    schema = REG.get("PartitionChangeRecord")
    body = schema.encode({"PartitionId": 5, "TopicId": ZERO_UUID}, 0)
    assert body == b"\x00\x00\x00\x05" + bytes(16) + b"\x00"
    decoded = schema.decode(body, 0)
    assert decoded["Leader"] == -2 and decoded["Isr"] is None and decoded["LeaderRecoveryState"] == -1
    # Explicit values equal to the default are still not written.
    assert schema.encode(decoded, 0) == body
    # A nullable tagged field given as empty (not null) is written: [] differs from null.
    assert schema.encode({"PartitionId": 5, "TopicId": ZERO_UUID, "Isr": []}, 0).endswith(b"\x01\x00\x01\x01")


def test_unknown_tagged_fields_are_kept_or_skipped() -> None:
    schema = REG.get("FeatureLevelRecord")
    body = FEATURE_LEVEL_BODY[:-1] + b"\x02" + b"\x05\x03abc" + b"\x09\x00"
    decoded = schema.decode(body, 0)
    assert decoded[UNKNOWN_TAGGED_FIELDS] == [(5, b"abc"), (9, b"")]
    assert schema.encode(decoded, 0) == body
    skipped = schema.decode(body, 0, keep_unknown_tags=False)
    assert skipped == {"Name": "metadata.version", "FeatureLevel": 21}
    assert schema.encode(skipped, 0) == FEATURE_LEVEL_BODY


def test_unknown_tags_interleave_with_known_ones_in_tag_order(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "Tags",
        """{ "type": "data", "name": "Tags", "validVersions": "0", "flexibleVersions": "0+",
          "fields": [
            { "name": "A", "type": "int8", "versions": "0+", "taggedVersions": "0+", "tag": 0 },
            { "name": "B", "type": "string", "versions": "0+", "taggedVersions": "0+", "tag": 5 } ] }""",
    )
    schema = load_schemas(tmp_path).get("Tags")
    body = b"\x03" + b"\x00\x01\x07" + b"\x03\x02zz" + b"\x05\x02\x02q"
    decoded = schema.decode(body, 0)
    assert decoded == {"A": 7, "B": "q", UNKNOWN_TAGGED_FIELDS: [(3, b"zz")]}
    assert schema.encode(decoded, 0) == body


def test_tag_of_a_field_from_another_version_is_refused() -> None:
    # PartitionChangeRecord tag 8 (Directories) exists from version 1 only; Kafka throws.
    schema = REG.get("PartitionChangeRecord")
    body = b"\x00\x00\x00\x01" + bytes(16) + b"\x01\x08\x01\x00"
    assert schema.decode(body, 1)["Directories"] is None
    with pytest.raises(SchemaError, match="tag 8") as info:
        schema.decode(body, 0)
    assert info.value.position == 21


def test_unknown_tags_inside_nested_structs_are_kept() -> None:
    schema = REG.get("VotersRecord")
    # Give the endpoint struct an unknown tag 7 with payload 0x2a.
    at = VOTERS_BYTES.index(b"\x23\x85") + 2
    body = VOTERS_BYTES[:at] + b"\x01\x07\x01\x2a" + VOTERS_BYTES[at + 1 :]
    decoded = schema.decode(body, 0)
    assert decoded["Voters"][0]["Endpoints"][0][UNKNOWN_TAGGED_FIELDS] == [(7, b"\x2a")]
    assert schema.encode(decoded, 0) == body
    assert schema.decode(body, 0, keep_unknown_tags=False) == VOTERS_VALUE


def test_fields_absent_at_a_version() -> None:
    schema = REG.get("RegisterBrokerRecord")
    base = {
        "BrokerId": 1,
        "IncarnationId": ZERO_UUID,
        "BrokerEpoch": 10,
        "EndPoints": [{"Name": "PLAINTEXT", "Host": "h", "Port": 9092, "SecurityProtocol": 0}],
        "Features": [{"Name": "metadata.version", "MinSupportedVersion": 1, "MaxSupportedVersion": 21}],
        "Rack": None,
        "Fenced": True,
    }
    v0 = schema.decode(schema.encode(base, 0), 0)
    assert "IsMigratingZkBroker" not in v0 and "InControlledShutdown" not in v0 and "LogDirs" not in v0
    assert v0 == base
    # The default of a field the version lacks may be given; anything else is refused.
    assert schema.encode({**base, "IsMigratingZkBroker": False}, 0) == schema.encode(base, 0)
    with pytest.raises(SchemaError, match="IsMigratingZkBroker"):
        schema.encode({**base, "IsMigratingZkBroker": True}, 0)
    v3 = schema.decode(schema.encode({**base, "LogDirs": [ZERO_UUID]}, 3), 3)
    assert v3["LogDirs"] == [ZERO_UUID] and v3["IsMigratingZkBroker"] is False
    assert v3["InControlledShutdown"] is False


def test_missing_fields_take_defaults() -> None:
    schema = REG.get("PartitionRecord")
    assert schema.decode(schema.encode({}, 0), 0) == schema.defaults(0)
    assert schema.defaults(0)["PartitionId"] == -1 and schema.defaults(0)["TopicId"] == ZERO_UUID
    assert REG.get("RegisterBrokerRecord").defaults(1)["Fenced"] is True


def test_float64_uint16_bool_and_nullable_string() -> None:
    schema = REG.get("ClientQuotaRecord")
    value = {
        "Entity": [{"EntityType": "user", "EntityName": None}],
        "Key": "producer_byte_rate",
        "Value": 1024.5,
        "Remove": False,
    }
    body = schema.encode(value, 0)
    assert body == (b"\x02\x05user\x00\x00" + b"\x13producer_byte_rate" + struct.pack(">d", 1024.5) + b"\x00" + b"\x00")
    assert schema.decode(body, 0) == value
    # Kafka reads any non-zero byte as true.
    assert schema.decode(body[:-2] + b"\x07\x00", 0)["Remove"] is True


# --------------------------------------------------------------------------- non-flexible versions


def test_non_flexible_and_flexible_versions_of_one_schema(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "Mixed",
        """{ "type": "data", "name": "Mixed", "validVersions": "0-1", "flexibleVersions": "1+",
          "fields": [
            { "name": "S", "type": "string", "versions": "0+", "nullableVersions": "0+" },
            { "name": "B", "type": "bytes", "versions": "0+", "nullableVersions": "0+" },
            { "name": "A", "type": "[]int16", "versions": "0+", "nullableVersions": "0+" },
            { "name": "T", "type": "[]Item", "versions": "0+", "fields": [
              { "name": "N", "type": "string", "versions": "0+" } ]},
            { "name": "X", "type": "int32", "versions": "1+", "taggedVersions": "1+", "tag": 0 }
          ] }""",
    )
    schema = load_schemas(tmp_path).get("Mixed")
    value = {"S": "ab", "B": b"\x01", "A": [5], "T": [{"N": "n"}]}
    v0 = schema.encode(value, 0)
    assert v0 == (
        b"\x00\x02ab" + b"\x00\x00\x00\x01\x01" + b"\x00\x00\x00\x01\x00\x05" + b"\x00\x00\x00\x01" + b"\x00\x01n"
    )
    assert schema.decode(v0, 0) == value
    nulls = {"S": None, "B": None, "A": None, "T": []}
    v0_null = schema.encode(nulls, 0)
    assert v0_null == b"\xff\xff" + b"\xff\xff\xff\xff" * 2 + b"\x00\x00\x00\x00"
    assert schema.decode(v0_null, 0) == nulls
    v1 = schema.encode({**value, "X": 9}, 1)
    assert v1 == b"\x03ab\x02\x01\x02\x00\x05\x02\x02n\x00" + b"\x01\x00\x04\x00\x00\x00\x09"
    assert schema.decode(v1, 1) == {**value, "X": 9}
    with pytest.raises(SchemaError, match="X"):
        schema.encode({**value, "X": 9}, 0)
    with pytest.raises(SchemaError, match="not flexible"):
        schema.encode({**value, UNKNOWN_TAGGED_FIELDS: [(3, b"")]}, 0)


# --------------------------------------------------------------------------- bad input


def test_truncated_body_reports_position_and_expectation() -> None:
    schema = REG.get("FeatureLevelRecord")
    with pytest.raises(TruncatedError) as info:
        schema.decode(FEATURE_LEVEL_BODY[:10], 0)
    assert info.value.position == 1  # the name bytes start after the length varint
    assert "16 byte(s)" in str(info.value.expected)
    assert "FeatureLevelRecord.Name" in info.value.message
    for cut in range(len(FEATURE_LEVEL_BODY)):
        with pytest.raises(TruncatedError):
            schema.decode(FEATURE_LEVEL_BODY[:cut], 0)


def test_garbage_after_body() -> None:
    with pytest.raises(SchemaError, match="garbage after FeatureLevelRecord") as info:
        REG.get("FeatureLevelRecord").decode(FEATURE_LEVEL_BODY + b"\x00\x01", 0)
    assert info.value.position == len(FEATURE_LEVEL_BODY)


def test_bad_bodies() -> None:
    schema = REG.get("FeatureLevelRecord")
    with pytest.raises(SchemaError, match="non-nullable") as info:
        schema.decode(b"\x00\x00\x15\x00", 0)
    assert info.value.position == 0
    with pytest.raises(SchemaError, match="UTF-8"):
        schema.decode(b"\x02\xff\x00\x15\x00", 0)
    with pytest.raises(SchemaError, match="invalid length"):
        schema.decode(uvarint(0x8000 + 1) + b"x" * 0x8000 + b"\x00\x15\x00", 0)
    with pytest.raises(SchemaError, match="no version 1"):
        schema.decode(FEATURE_LEVEL_BODY, 1)
    # A known tag whose declared size disagrees with its content.
    pc = REG.get("PartitionChangeRecord")
    with pytest.raises(SchemaError, match="declared size") as info2:
        pc.decode(b"\x00\x00\x00\x01" + bytes(16) + b"\x01" + b"\x01\x05\x00\x00\x00\x07\x00", 0)
    assert info2.value.position == 21
    # An array count larger than the bytes left.
    pr = REG.get("PartitionRecord")
    with pytest.raises(TruncatedError, match="array") as info3:
        pr.decode(b"\x00\x00\x00\x01" + bytes(16) + uvarint(1000), 0)
    assert info3.value.position == 20


def test_bad_values_on_encode() -> None:
    schema = REG.get("FeatureLevelRecord")
    with pytest.raises(SchemaError, match="unknown field"):
        schema.encode({"Name": "x", "Level": 1}, 0)
    with pytest.raises(SchemaError, match="does not fit int16"):
        schema.encode({"Name": "x", "FeatureLevel": 40000}, 0)
    with pytest.raises(SchemaError):
        schema.encode({"Name": b"x", "FeatureLevel": 1}, 0)
    with pytest.raises(SchemaError):
        schema.encode({"Name": None, "FeatureLevel": 1}, 0)
    with pytest.raises(SchemaError):
        schema.encode({"Name": "x", "FeatureLevel": True}, 0)
    with pytest.raises(SchemaError):
        REG.get("TopicRecord").encode({"Name": "t", "TopicId": "not-a-uuid"}, 0)


# --------------------------------------------------------------------------- redaction


def test_redaction_hides_scram_secrets() -> None:
    schema = REG.get("UserScramCredentialRecord")
    secrets = {"Salt": b"SALT-SECRET-1234", "StoredKey": b"STORED-SECRET-99", "ServerKey": b"SERVER-SECRET-77"}
    value = {"Name": "alice", "Mechanism": 1, **secrets, "Iterations": 4096}
    decoded = schema.decode(schema.encode(value, 0), 0)
    redacted = redact(decoded, schema)
    assert redacted["Name"] == "alice" and redacted["Iterations"] == 4096
    assert redacted["Salt"] == "<redacted 16 bytes>"
    text = repr(redacted) + json.dumps(redacted)
    for secret in secrets.values():
        assert secret.decode() not in text and secret.hex() not in text
    assert decoded["Salt"] == secrets["Salt"]  # the input is not modified


def test_redaction_recurses_into_nested_structs(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "Nested",
        """{ "type": "data", "name": "Nested", "validVersions": "0", "flexibleVersions": "0+",
          "fields": [ { "name": "Users", "type": "[]User", "versions": "0+", "fields": [
            { "name": "Name", "type": "string", "versions": "0+" },
            { "name": "Password", "type": "string", "versions": "0+", "sensitive": true } ]} ] }""",
    )
    schema = load_schemas(tmp_path).get("Nested")
    value = {"Users": [{"Name": "bob", "Password": "hunter2"}]}
    redacted = redact(schema.decode(schema.encode(value, 0), 0), schema)
    assert redacted == {"Users": [{"Name": "bob", "Password": "<redacted 7 bytes>"}]}


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize(("schema", "version"), SCHEMA_VERSIONS, ids=lambda x: getattr(x, "name", str(x)))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_every_schema(schema: MessageSchema, version: int, data: st.DataObject) -> None:
    value = data.draw(values_for(schema, version))
    body = schema.encode(value, version)
    decoded = schema.decode(body, version)
    assert decoded == value
    assert schema.encode(decoded, version) == body
    # Any strict prefix is an error, never a silent partial decode.
    if body:
        cut = data.draw(st.integers(0, len(body) - 1))
        with pytest.raises(KafkaFormatError):
            schema.decode(body[:cut], version)
