"""Records of Kafka's coordinator topics ``__consumer_offsets`` and ``__transaction_state``
(docs/formats.md §8.1).

Key and value of every record (Kafka's ``CoordinatorRecordSerde``)::

    key     int16 record type, then the key message at version = record type
    value   int16 value version, then the value message at that version
            a null value is a tombstone (the key's group, offset or transaction is deleted)

Both messages use Kafka's message encoding (message_schema, docs/formats.md §6.4); keys are never
flexible, values are from their first flexible version. As Kafka's generated readers do (they
check no version range, KIP-915), a value version above the schema's highest is read with the
highest one's layout (new fields of a newer Kafka are tagged, so they are skipped), one below the
lowest with the lowest's; bytes after either message are ignored. Record types (``GroupCoordinatorRecordSerde``,
``TransactionCoordinatorRecordSerde``; definitions from the group-coordinator and
transaction-coordinator ``*.json`` files in ``migration/formats/schemas``):

    __consumer_offsets    0, 1  OffsetCommitKey / OffsetCommitValue
                          2     GroupMetadataKey / GroupMetadataValue (classic groups)
                          3-8   ConsumerGroup* (KIP-848): Metadata, PartitionMetadata, MemberMetadata,
                                TargetAssignmentMetadata, TargetAssignmentMember, CurrentMemberAssignment
    __transaction_state   0     TransactionLogKey / TransactionLogValue

Other types (share and streams groups, whose definitions still changed incompatibly) are
unknown here: :class:`UnknownCoordinatorRecordTypeError`.

A classic group of protocol type ``consumer`` keeps each member's subscription and assignment
as bytes holding an int16 version and a ConsumerProtocolSubscription / ConsumerProtocolAssignment
message at that version (Kafka's ``ConsumerProtocol``): :func:`decode_consumer_protocol`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from migration.formats.errors import KafkaFormatError, SchemaError, TruncatedError
from migration.formats.message_schema import MessageSchema, SchemaRegistry, default_registry

__all__ = [
    "CONSUMER_OFFSETS_TOPIC",
    "CONSUMER_PROTOCOL_ASSIGNMENT",
    "CONSUMER_PROTOCOL_SUBSCRIPTION",
    "CONSUMER_PROTOCOL_TYPE",
    "RECORD_TYPES",
    "TRANSACTION_STATE_TOPIC",
    "Coordinator",
    "CoordinatorKey",
    "CoordinatorRecordType",
    "CoordinatorValue",
    "UnknownCoordinatorRecordTypeError",
    "coordinator_for_topic",
    "decode_consumer_protocol",
    "decode_coordinator_key",
    "decode_coordinator_value",
    "encode_consumer_protocol",
    "encode_coordinator_key",
    "encode_coordinator_value",
    "key_schema",
    "value_schema",
]

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_PROTOCOL_TYPE = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE
CONSUMER_PROTOCOL_SUBSCRIPTION = "ConsumerProtocolSubscription"
CONSUMER_PROTOCOL_ASSIGNMENT = "ConsumerProtocolAssignment"

_INT16 = struct.Struct(">h")


class Coordinator(StrEnum):
    """The coordinator whose records a topic holds."""

    GROUP = "group"  # __consumer_offsets
    TRANSACTION = "transaction"  # __transaction_state


@dataclass(frozen=True)
class CoordinatorRecordType:
    """One record type: its id (the key's int16 prefix) and the names of its key and value schemas."""

    type_id: int
    key: str
    value: str


def _types(*rows: tuple[int, str, str]) -> dict[int, CoordinatorRecordType]:
    return {type_id: CoordinatorRecordType(type_id, key, value) for type_id, key, value in rows}


RECORD_TYPES: dict[Coordinator, dict[int, CoordinatorRecordType]] = {
    Coordinator.GROUP: _types(
        (0, "OffsetCommitKey", "OffsetCommitValue"),
        (1, "OffsetCommitKey", "OffsetCommitValue"),
        (2, "GroupMetadataKey", "GroupMetadataValue"),
        (3, "ConsumerGroupMetadataKey", "ConsumerGroupMetadataValue"),
        (4, "ConsumerGroupPartitionMetadataKey", "ConsumerGroupPartitionMetadataValue"),
        (5, "ConsumerGroupMemberMetadataKey", "ConsumerGroupMemberMetadataValue"),
        (6, "ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupTargetAssignmentMetadataValue"),
        (7, "ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMemberValue"),
        (8, "ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupCurrentMemberAssignmentValue"),
    ),
    Coordinator.TRANSACTION: _types((0, "TransactionLogKey", "TransactionLogValue")),
}

_TOPICS = {CONSUMER_OFFSETS_TOPIC: Coordinator.GROUP, TRANSACTION_STATE_TOPIC: Coordinator.TRANSACTION}


def coordinator_for_topic(topic: str) -> Coordinator | None:
    """The coordinator whose records ``topic`` holds, None for any other topic."""
    return _TOPICS.get(topic)


class UnknownCoordinatorRecordTypeError(SchemaError):
    """A key whose record type names no record type of its coordinator (Kafka's
    ``UnknownRecordTypeException``: a newer Kafka's record, or not a coordinator record)."""

    kind = "unknown coordinator record type"

    def __init__(self, coordinator: Coordinator, record_type: int, **kwargs: Any) -> None:
        super().__init__(f"unknown {coordinator} coordinator record type {record_type}", **kwargs)
        self.coordinator = coordinator
        self.record_type = record_type


@dataclass(frozen=True)
class CoordinatorKey:
    """A decoded key: ``name`` is its schema, read at ``version`` (= the record type)."""

    coordinator: Coordinator
    record_type: int
    name: str
    version: int
    fields: dict[str, Any]


@dataclass(frozen=True)
class CoordinatorValue:
    """A decoded value: its schema ``name``, the ``version`` it was written at and the version
    whose layout it was read with (``read_version``, the nearest the schema has)."""

    name: str
    version: int
    fields: dict[str, Any]
    read_version: int


def _record_type(coordinator: Coordinator, record_type: int, **kwargs: Any) -> CoordinatorRecordType:
    rt = RECORD_TYPES[coordinator].get(record_type)
    if rt is None:
        raise UnknownCoordinatorRecordTypeError(
            coordinator, record_type, expected=f"one of {sorted(RECORD_TYPES[coordinator])}", found=record_type,
            **kwargs)
    return rt


def key_schema(coordinator: Coordinator, record_type: int, registry: SchemaRegistry | None = None) -> MessageSchema:
    return (registry or default_registry()).get(_record_type(coordinator, record_type).key)


def value_schema(coordinator: Coordinator, record_type: int, registry: SchemaRegistry | None = None) -> MessageSchema:
    return (registry or default_registry()).get(_record_type(coordinator, record_type).value)


def _layout_version(schema: MessageSchema, version: int) -> int:
    """The version whose layout Kafka's generated reader uses for ``version``: itself when the
    schema has it, else the nearest end of its range (the readers only test ``_version >= N``)."""
    return min(max(version, schema.valid_versions.low), schema.valid_versions.high)


def _read_int16(buf: memoryview, what: str) -> int:
    if len(buf) < _INT16.size:
        raise TruncatedError(f"data ends inside the {what}", position=0, expected="2 bytes for an int16",
                             found=f"{len(buf)} byte(s)")
    value: int = _INT16.unpack_from(buf, 0)[0]
    return value


def _view(buf: bytes | bytearray | memoryview) -> memoryview:
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


def decode_coordinator_key(
    coordinator: Coordinator, buf: bytes | bytearray | memoryview, *, registry: SchemaRegistry | None = None
) -> CoordinatorKey:
    """Decode one record key; positions in errors are relative to ``buf``."""
    mv = _view(buf)
    record_type = _read_int16(mv, "record type")
    rt = _record_type(coordinator, record_type, position=0)
    schema = (registry or default_registry()).get(rt.key)
    fields, _ = schema.decode_from(mv, _INT16.size, record_type)
    return CoordinatorKey(coordinator, record_type, rt.key, record_type, fields)


def decode_coordinator_value(
    coordinator: Coordinator,
    record_type: int,
    buf: bytes | bytearray | memoryview,
    *,
    registry: SchemaRegistry | None = None,
) -> CoordinatorValue:
    """Decode the value of a record of ``record_type``; positions in errors are relative to ``buf``."""
    mv = _view(buf)
    version = _read_int16(mv, "value version")
    schema = value_schema(coordinator, record_type, registry)
    read_version = _layout_version(schema, version)
    fields, _ = schema.decode_from(mv, _INT16.size, read_version)
    return CoordinatorValue(schema.name, version, fields, read_version)


def encode_coordinator_key(
    coordinator: Coordinator,
    record_type: int,
    fields: Mapping[str, Any],
    *,
    registry: SchemaRegistry | None = None,
) -> bytes:
    """The key bytes of a record of ``record_type`` (Kafka's ``serializeKey``)."""
    out = bytearray(_INT16.pack(record_type))
    key_schema(coordinator, record_type, registry).encode_into(out, fields, record_type)
    return bytes(out)


def encode_coordinator_value(
    coordinator: Coordinator,
    record_type: int,
    version: int,
    fields: Mapping[str, Any],
    *,
    registry: SchemaRegistry | None = None,
) -> bytes:
    """The value bytes of a record of ``record_type`` at ``version`` (Kafka's ``serializeValue``)."""
    out = bytearray(_INT16.pack(version))
    value_schema(coordinator, record_type, registry).encode_into(out, fields, version)
    return bytes(out)


def decode_consumer_protocol(
    name: str, data: bytes | bytearray | memoryview, *, registry: SchemaRegistry | None = None
) -> tuple[int, dict[str, Any]] | None:
    """(layout version, fields) of a version-prefixed ``name`` message (ConsumerProtocolSubscription
    or ConsumerProtocolAssignment), or None when the bytes do not read as one: DumpLogSegments then
    keeps the raw bytes. Versions outside the schema's range read as its nearest one and bytes after
    the message are ignored, as Kafka's reader does."""
    schema = (registry or default_registry()).get(name)
    mv = _view(data)
    try:
        version = _layout_version(schema, _read_int16(mv, "version"))
        fields, _ = schema.decode_from(mv, _INT16.size, version)
    except KafkaFormatError:
        return None
    return version, fields


def encode_consumer_protocol(
    name: str, version: int, fields: Mapping[str, Any], *, registry: SchemaRegistry | None = None
) -> bytes:
    """A version-prefixed ConsumerProtocolSubscription or ConsumerProtocolAssignment
    (Kafka's ``ConsumerProtocol.serializeSubscription`` / ``serializeAssignment``)."""
    out = bytearray(_INT16.pack(version))
    (registry or default_registry()).get(name).encode_into(out, fields, version)
    return bytes(out)
