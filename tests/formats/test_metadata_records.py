"""KRaft metadata record frame (docs/formats.md §6.3, §6.6) and the metadata.version table."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migration.formats.errors import KafkaFormatError, SchemaError, TruncatedError
from migration.formats.message_schema import (
    MessageSchema,
    StructSpec,
    default_registry,
    uuid_to_str,
    write_unsigned_varint,
)
from migration.formats.metadata_records import (
    METADATA_VERSIONS,
    MV_3_3_IV3,
    MetadataRecord,
    UnknownMetadataRecordError,
    decode_metadata_record,
    encode_metadata_record,
    metadata_schema,
    metadata_version_level,
    metadata_version_name,
)

REG = default_registry()
METADATA_SCHEMAS = sorted(REG.metadata_by_api_key.values(), key=lambda s: s.api_key or 0)
METADATA_VERSIONS_UNDER_TEST = [(s, v) for s in METADATA_SCHEMAS for v in s.versions]

# §6.6: FeatureLevelRecord(metadata.version, 21), framed.
FEATURE_LEVEL_MV21 = bytes.fromhex("010C0011") + b"metadata.version" + bytes.fromhex("001500")


def uvarint(n: int) -> bytes:
    out = bytearray()
    write_unsigned_varint(out, n)
    return bytes(out)


def test_feature_level_vector_encodes_byte_exact() -> None:
    assert len(FEATURE_LEVEL_MV21) == 23
    assert encode_metadata_record("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": 21}) == (
        FEATURE_LEVEL_MV21
    )
    assert encode_metadata_record(12, 0, {"Name": "metadata.version", "FeatureLevel": 21}) == FEATURE_LEVEL_MV21


def test_feature_level_vector_decodes() -> None:
    record = decode_metadata_record(FEATURE_LEVEL_MV21)
    assert record == MetadataRecord("FeatureLevelRecord", 12, 0, {"Name": "metadata.version", "FeatureLevel": 21})
    assert record.raw == FEATURE_LEVEL_MV21
    assert record.encode() == FEATURE_LEVEL_MV21
    assert metadata_version_name(record.fields["FeatureLevel"]) == "3.9-IV0"


def test_raw_bytes_keep_non_canonical_input_identical() -> None:
    # A tagged field written at its default value is legal but not what the encoder
    # produces; the kept raw bytes make re-encoding byte-identical anyway.
    body = b"\x00\x00\x00\x01" + bytes(16) + b"\x01" + b"\x01\x04\xff\xff\xff\xfe"  # Leader = -2 (default)
    framed = b"\x01\x05\x00" + body
    record = decode_metadata_record(framed)
    assert record.fields["Leader"] == -2
    assert record.encode() == framed
    fresh = encode_metadata_record(record.api_key, record.version, record.fields)
    assert fresh == b"\x01\x05\x00" + b"\x00\x00\x00\x01" + bytes(16) + b"\x00"


def test_scram_record_with_large_api_key_free_frame() -> None:
    fields = {
        "Name": "alice",
        "Mechanism": 2,
        "Salt": b"s" * 3,
        "StoredKey": b"k" * 64,
        "ServerKey": b"v" * 64,
        "Iterations": 4096,
    }
    framed = encode_metadata_record("UserScramCredentialRecord", 0, fields)
    assert framed[:3] == b"\x01\x0b\x00"
    assert decode_metadata_record(framed).fields == fields


def test_cluster_id_record() -> None:
    framed = encode_metadata_record("ClusterIdRecord", 0, {"ClusterId": "MkU3OEVBNTcwNTJENDM2Qk"})
    assert framed == b"\x01\x1d\x00\x17MkU3OEVBNTcwNTJENDM2Qk\x00"
    assert decode_metadata_record(framed).name == "ClusterIdRecord"


# --------------------------------------------------------------------------- bad frames


def test_frame_version_zero_is_the_unsupported_preview_format() -> None:
    with pytest.raises(SchemaError, match="frame version 0") as info:
        decode_metadata_record(b"\x00" + FEATURE_LEVEL_MV21[1:])
    assert info.value.position == 0
    assert info.value.found == 0


def test_unknown_frame_version() -> None:
    with pytest.raises(SchemaError, match="frame version 2") as info:
        decode_metadata_record(b"\x02" + FEATURE_LEVEL_MV21[1:])
    assert info.value.position == 0


def test_unknown_api_key_is_named() -> None:
    with pytest.raises(UnknownMetadataRecordError, match="api key 99") as info:
        decode_metadata_record(b"\x01\x63\x00\x00")
    assert info.value.api_key == 99
    assert info.value.position == 1
    assert isinstance(info.value, SchemaError)
    with pytest.raises(UnknownMetadataRecordError):
        encode_metadata_record(99, 0, {})
    with pytest.raises(SchemaError):
        encode_metadata_record("SnapshotHeaderRecord", 0, {})  # a control body, not a metadata record


def test_values_over_int16_are_refused() -> None:
    with pytest.raises(SchemaError, match="api key was too large") as info:
        decode_metadata_record(b"\x01" + uvarint(32768) + b"\x00")
    assert info.value.position == 1
    with pytest.raises(SchemaError, match="version was too large"):
        decode_metadata_record(b"\x01\x0c" + uvarint(40000))


def test_unsupported_record_version() -> None:
    with pytest.raises(SchemaError, match="no version 1") as info:
        decode_metadata_record(b"\x01\x0c\x01" + FEATURE_LEVEL_MV21[3:])
    assert info.value.position == 2


def test_garbage_after_body() -> None:
    with pytest.raises(SchemaError, match="garbage after FeatureLevelRecord") as info:
        decode_metadata_record(FEATURE_LEVEL_MV21 + b"\x00")
    assert info.value.position == 23
    assert info.value.found == "1 more byte(s)"


def test_truncated_body_and_frame() -> None:
    with pytest.raises(TruncatedError) as info:
        decode_metadata_record(FEATURE_LEVEL_MV21[:-3])
    assert info.value.position == 20  # FeatureLevel int16 starts at byte 20
    for cut in range(len(FEATURE_LEVEL_MV21)):
        with pytest.raises(TruncatedError):
            decode_metadata_record(FEATURE_LEVEL_MV21[:cut])


def test_errors_relocate_to_file_positions() -> None:
    with pytest.raises(KafkaFormatError) as info:
        decode_metadata_record(FEATURE_LEVEL_MV21 + b"\x00")
    located = info.value.located("00000000000000000000-0000000000.checkpoint", 1000)
    assert located.position == 1023 and "byte 1023" in str(located)


# --------------------------------------------------------------------------- metadata.version


def test_metadata_version_table() -> None:
    assert MV_3_3_IV3 == 7
    assert sorted(METADATA_VERSIONS) == list(range(1, 22))
    assert metadata_version_name(1) == "3.0-IV1"
    assert metadata_version_name(7) == "3.3-IV3"
    assert metadata_version_name(11) == "3.5-IV2"
    assert metadata_version_name(21) == "3.9-IV0"
    assert metadata_version_name(99) == "level 99"
    assert metadata_version_level("3.4-IV0") == 8
    with pytest.raises(SchemaError):
        metadata_version_level("9.9-IV9")


# --------------------------------------------------------------------------- round trips


def _primitive(type_name: str) -> st.SearchStrategy[Any]:
    bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
    if type_name in bits:
        b = bits[type_name]
        return st.integers(-(2 ** (b - 1)), 2 ** (b - 1) - 1)
    return {
        "uint16": st.integers(0, 2**16 - 1),
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": st.text(max_size=10),
        "bytes": st.binary(max_size=10),
        "uuid": st.binary(min_size=16, max_size=16).map(uuid_to_str),
    }[type_name]


def _struct(spec: StructSpec, version: int) -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in spec.fields:
        if version not in f.versions:
            continue
        element = _struct(f.struct, version) if f.struct is not None else _primitive(f.element_type)
        strategy = st.lists(element, max_size=3) if f.is_array else element
        fields[f.name] = st.none() | strategy if version in f.nullable_versions else strategy
    return st.fixed_dictionaries(fields)


@pytest.mark.parametrize(("schema", "version"), METADATA_VERSIONS_UNDER_TEST, ids=lambda x: getattr(x, "name", str(x)))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_framed_round_trip(schema: MessageSchema, version: int, data: st.DataObject) -> None:
    fields = data.draw(_struct(schema.struct, version))
    framed = encode_metadata_record(schema.name, version, fields)
    assert framed[0] == 1
    record = decode_metadata_record(framed)
    assert (record.name, record.api_key, record.version) == (schema.name, schema.api_key, version)
    assert record.fields == fields
    assert encode_metadata_record(record.api_key, record.version, record.fields) == framed
    assert metadata_schema(record.api_key) is schema
