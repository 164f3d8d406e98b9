"""KRaft metadata records: the frame around each record value (docs/formats.md §6.3).

Value of every data record in ``__cluster_metadata`` and in KRaft checkpoints
(Kafka's ``AbstractApiMessageSerde``)::

    frame version   uvarint   must be 1 (0 is the unsupported 2.8 preview format)
    api key         uvarint   record type, <= 32767 (e.g. 12 = FeatureLevelRecord)
    version         uvarint   record schema version, <= 32767
    body            the record at that version, flexible encoding (message_schema, §6.4)

No byte may follow the body ("garbage after"). The bodies come from the ``"type":
"metadata"`` definitions in ``migration/formats/schemas``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from migration.formats.errors import SchemaError
from migration.formats.message_schema import (
    MessageSchema,
    SchemaRegistry,
    default_registry,
    read_unsigned_varint,
    write_unsigned_varint,
)

__all__ = [
    "FRAME_VERSION",
    "METADATA_VERSIONS",
    "METADATA_VERSION_FEATURE",
    "MV_3_3_IV0",
    "MV_3_3_IV3",
    "MV_3_5_IV2",
    "MetadataRecord",
    "UnknownMetadataRecordError",
    "decode_metadata_record",
    "encode_metadata_record",
    "metadata_schema",
    "metadata_version_level",
    "metadata_version_name",
]

FRAME_VERSION = 1
_MAX_SHORT = 0x7FFF


class UnknownMetadataRecordError(SchemaError):
    """A frame whose api key names no known metadata record type."""

    kind = "unknown metadata record"

    def __init__(self, api_key: int, **kwargs: Any) -> None:
        super().__init__(f"unknown metadata record api key {api_key}", **kwargs)
        self.api_key = api_key


@dataclass(frozen=True)
class MetadataRecord:
    """One decoded metadata record value; ``raw`` keeps the exact bytes it was read from."""

    name: str
    api_key: int
    version: int
    fields: dict[str, Any]
    raw: bytes | None = field(default=None, compare=False, repr=False)

    def encode(self, registry: SchemaRegistry | None = None) -> bytes:
        """The record's bytes: the original bytes when it was decoded (so re-encoding is
        byte-identical even for non-canonical input), otherwise a fresh encoding."""
        if self.raw is not None:
            return self.raw
        return encode_metadata_record(self.api_key, self.version, self.fields, registry=registry)


def metadata_schema(name_or_api_key: str | int, registry: SchemaRegistry | None = None) -> MessageSchema:
    """The metadata record schema named ``name_or_api_key`` or having that api key."""
    reg = registry or default_registry()
    if isinstance(name_or_api_key, int):
        schema = reg.metadata(name_or_api_key)
        if schema is None:
            raise UnknownMetadataRecordError(name_or_api_key, found=name_or_api_key)
        return schema
    schema = reg.by_name.get(name_or_api_key)
    if schema is None or schema.type != "metadata":
        raise SchemaError(f"no metadata record named {name_or_api_key!r}", found=name_or_api_key)
    return schema


def _read_short(buf: memoryview, pos: int, what: str) -> tuple[int, int]:
    value, nxt = read_unsigned_varint(buf, pos, len(buf), what)
    if value > _MAX_SHORT:
        raise SchemaError(f"value for {what} was too large", position=pos, expected="<= 32767", found=value)
    return value, nxt


def decode_metadata_record(
    buf: bytes | bytearray | memoryview, *, registry: SchemaRegistry | None = None
) -> MetadataRecord:
    """Decode one framed metadata record value; positions in errors are relative to ``buf``."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    frame, pos = _read_short(mv, 0, "frame version")
    if frame == 0:
        raise SchemaError(
            "metadata record with frame version 0 (the unsupported KRaft preview format of 2.8)",
            position=0,
            expected=f"frame version {FRAME_VERSION}",
            found=0,
        )
    if frame != FRAME_VERSION:
        raise SchemaError(
            f"unknown metadata record frame version {frame}",
            position=0,
            expected=f"frame version {FRAME_VERSION}",
            found=frame,
        )
    key_pos = pos
    api_key, pos = _read_short(mv, pos, "api key")
    version_pos = pos
    version, pos = _read_short(mv, pos, "version")
    reg = registry or default_registry()
    schema = reg.metadata(api_key)
    if schema is None:
        raise UnknownMetadataRecordError(
            api_key, position=key_pos, expected=f"one of {sorted(reg.metadata_by_api_key)}", found=api_key
        )
    if version not in schema.valid_versions:
        raise SchemaError(
            f"{schema.name} (api key {api_key}) has no version {version}",
            position=version_pos,
            expected=f"version {schema.valid_versions}",
            found=version,
        )
    values, end = schema.decode_from(mv, pos, version)
    if end != len(mv):
        raise SchemaError(
            f"found {len(mv) - end} byte(s) of garbage after {schema.name} (api key {api_key})",
            position=end,
            expected="end of record value",
            found=f"{len(mv) - end} more byte(s)",
        )
    return MetadataRecord(schema.name, api_key, version, values, bytes(mv))


def encode_metadata_record(
    name_or_api_key: str | int,
    version: int,
    fields: Mapping[str, Any],
    *,
    registry: SchemaRegistry | None = None,
) -> bytes:
    """Frame and encode one metadata record value."""
    schema = metadata_schema(name_or_api_key, registry)
    assert schema.api_key is not None  # the registry only holds metadata schemas with keys
    out = bytearray()
    write_unsigned_varint(out, FRAME_VERSION)
    write_unsigned_varint(out, schema.api_key)
    write_unsigned_varint(out, version)
    schema.encode_into(out, fields, version)
    return bytes(out)


# ``metadata.version`` feature levels (FeatureLevelRecord value of "metadata.version"), from
# Kafka's MetadataVersion enum (§6.5). Levels of 4.x IVs are not listed: unverified.
METADATA_VERSIONS: dict[int, str] = {
    1: "3.0-IV1",
    2: "3.1-IV0",
    3: "3.2-IV0",
    4: "3.3-IV0",
    5: "3.3-IV1",
    6: "3.3-IV2",
    7: "3.3-IV3",
    8: "3.4-IV0",
    9: "3.5-IV0",
    10: "3.5-IV1",
    11: "3.5-IV2",
    12: "3.6-IV0",
    13: "3.6-IV1",
    14: "3.6-IV2",
    15: "3.7-IV0",
    16: "3.7-IV1",
    17: "3.7-IV2",
    18: "3.7-IV3",
    19: "3.7-IV4",
    20: "3.8-IV0",
    21: "3.9-IV0",
}
_LEVEL_BY_NAME = {name: level for level, name in METADATA_VERSIONS.items()}

MV_3_3_IV0 = 4  # minimum MV a bootstrap checkpoint may hold (§7.1)
MV_3_3_IV3 = 7
MV_3_5_IV2 = 11  # --add-scram needs at least this (§7.1)
METADATA_VERSION_FEATURE = "metadata.version"


def metadata_version_name(level: int) -> str:
    """``"3.9-IV0"`` for 21; levels outside the known table are named ``"level N"``."""
    return METADATA_VERSIONS.get(level, f"level {level}")


def metadata_version_level(name: str) -> int:
    """The feature level of a release name such as ``"3.9-IV0"``."""
    try:
        return _LEVEL_BY_NAME[name]
    except KeyError:
        raise SchemaError(f"unknown metadata.version {name!r}", expected="e.g. 3.9-IV0", found=name) from None
