"""Schema-driven codec for Kafka's JSON-defined messages (KRaft metadata and control records).

Wire layout, as Kafka's ``MessageDataGenerator`` emits it (docs/formats.md §0.1, §6.4)::

    struct          := field* tagged-fields          (tagged-fields only in flexible versions)
    tagged-fields   := uvarint count, (uvarint tag, uvarint size, <size bytes>)*   sorted by tag
    int8..int64     := fixed width, big-endian, signed; uint16 2 bytes; float64 IEEE 754 8 bytes
    bool            := 1 byte, read as "!= 0", written as 0/1
    uuid            := 16 bytes (most then least significant int64); shown as URL-safe base64, no padding
    string          := flexible: uvarint(len + 1), UTF-8   | else int16 len;  0 / negative = null
    bytes           := flexible: uvarint(len + 1), bytes   | else int32 len;  0 / negative = null
    []T             := flexible: uvarint(count + 1), T*    | else int32 count; 0 / negative = null
    struct field    := its fields and tagged-fields inline; a nullable one is prefixed by int8 -1 / 1
                       (inside a tagged field by uvarint 0 / 1)

``uvarint`` is unsigned LEB128 of at most 5 bytes (Kafka's ``ByteUtils.readUnsignedVarint``).
A field is present at a version when that version is in its ``versions``; it is tagged at
that version when the version is also in ``taggedVersions``. Tagged fields equal to their
default are not written; unknown tags are kept (or skipped) on read.

Schemas live in ``migration/formats/schemas/*.json`` in the shape of Kafka's own message JSON files, plus
the project attribute ``"sensitive": true`` for fields that hold secrets (see :func:`redact`).
"""

from __future__ import annotations

import functools
import json
import os
import struct
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migration.formats.errors import CorruptRecordError, SchemaError, TruncatedError
from migration.formats.kafka_uuid import Uuid
from migration.formats.varint import VARINT_MAX_BYTES, decode_unsigned_varint, encode_unsigned_varint

__all__ = [
    "DEFAULT_SCHEMA_DIR",
    "SCHEMA_DIR_ENV",
    "UNKNOWN_TAGGED_FIELDS",
    "ZERO_UUID",
    "FieldSpec",
    "MessageSchema",
    "SchemaRegistry",
    "StructSpec",
    "Versions",
    "default_registry",
    "load_schemas",
    "read_unsigned_varint",
    "redact",
    "uuid_from_str",
    "uuid_to_str",
    "write_unsigned_varint",
]

# package data: the definitions ship inside the wheel, next to this module
DEFAULT_SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
# Lets a deployment whose package is not a source checkout (e.g. a zipped Spark dependency)
# point the loader at a copy of the schema files.
SCHEMA_DIR_ENV = "MIGRATION_KAFKA_SCHEMA_DIR"

# Key under which a decoded struct keeps the tagged fields its schema does not know, as a
# list of (tag, raw bytes) pairs, so that re-encoding writes them back unchanged.
UNKNOWN_TAGGED_FIELDS = "_unknown_tagged_fields"

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID.toString()

_MAX_VERSION = 0x7FFF  # versions are int16; "N+" means up to Short.MAX_VALUE
_MAX_STRING_BYTES = 0x7FFF  # Kafka refuses longer strings on read and on write
_MAX_UVARINT = 0xFFFFFFFF

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT16 = struct.Struct(">H")
_UINT32 = struct.Struct(">I")
_FLOAT64 = struct.Struct(">d")
_UINT8 = struct.Struct(">B")

_FIXED_TYPES: dict[str, struct.Struct] = {
    "int8": _INT8,
    "int16": _INT16,
    "int32": _INT32,
    "int64": _INT64,
    "uint16": _UINT16,
    "uint32": _UINT32,
    "float64": _FLOAT64,
}
_PRIMITIVE_TYPES = frozenset([*_FIXED_TYPES, "bool", "uuid", "string", "bytes"])
_NULLABLE_TYPES = frozenset(["string", "bytes"])  # plus arrays and structs


# --------------------------------------------------------------------------- primitives


def read_unsigned_varint(buf: memoryview, pos: int, end: int, what: str = "unsigned varint") -> tuple[int, int]:
    """Read a LEB128 unsigned varint of at most 5 bytes (the project's one varint codec,
    :mod:`migration.formats.varint`); returns (value, next position). Errors name ``what``."""
    try:
        return decode_unsigned_varint(buf, pos, VARINT_MAX_BYTES, end)
    except TruncatedError:
        raise TruncatedError(f"data ends inside {what}", position=pos, expected=what,
                             found=f"{end - pos} byte(s)") from None
    except CorruptRecordError:
        raise SchemaError(f"{what} is too long", position=pos, expected="at most 5 varint bytes",
                          found="a 6th byte") from None


def write_unsigned_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (0 .. 2**32-1) as an unsigned LEB128 varint."""
    if not 0 <= value <= _MAX_UVARINT:
        raise SchemaError(f"unsigned varint out of range: {value}", expected="0..4294967295", found=value)
    out += encode_unsigned_varint(value)


def uuid_to_str(raw: bytes | memoryview) -> str:
    """Kafka's ``Uuid.toString`` (the project's one Uuid codec, :mod:`migration.formats.kafka_uuid`)."""
    return Uuid.from_bytes(raw).to_string()


def uuid_from_str(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``: the 16 bytes of a URL-safe base64 id."""
    try:
        return Uuid.from_string(text).to_bytes()
    except ValueError as exc:
        raise SchemaError(f"not a Kafka uuid: {text!r}", expected="22 base64url characters (16 bytes)",
                          found=str(exc)) from None


def _uuid_bytes(value: Any, path: str) -> bytes:
    if isinstance(value, str):
        return uuid_from_str(value)
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, bytes | bytearray | memoryview) and len(value) == 16:
        return bytes(value)
    raise SchemaError(f"{path}: not a uuid: {value!r}", expected="Kafka uuid string, uuid.UUID or 16 bytes")


# --------------------------------------------------------------------------- schema model


@dataclass(frozen=True)
class Versions:
    """An inclusive version range as Kafka writes it: "0", "0+", "1-3" or "none"."""

    low: int
    high: int

    NONE_TEXT = "none"

    @classmethod
    def parse(cls, text: str | None, *, default: Versions | None = None, what: str = "versions") -> Versions:
        if text is None:
            if default is None:
                raise SchemaError(f"missing {what}")
            return default
        text = str(text).strip()
        try:
            if text in ("", cls.NONE_TEXT):
                return NO_VERSIONS
            if text.endswith("+"):
                return cls(int(text[:-1]), _MAX_VERSION)
            if "-" in text:
                low, high = text.split("-", 1)
                return cls(int(low), int(high))
            return cls(int(text), int(text))
        except ValueError as exc:
            raise SchemaError(f"bad {what}: {text!r}", expected='"N", "N+", "N-M" or "none"') from exc

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def is_empty(self) -> bool:
        return self.low > self.high

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.low, self.high + 1))

    def __str__(self) -> str:
        if self.is_empty():
            return self.NONE_TEXT
        if self.high == _MAX_VERSION:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


NO_VERSIONS = Versions(0, -1)


@dataclass(frozen=True)
class FieldSpec:
    """One entry of a ``fields`` list."""

    name: str
    type: str
    versions: Versions
    nullable_versions: Versions = NO_VERSIONS
    tagged_versions: Versions = NO_VERSIONS
    tag: int | None = None
    default: str | None = None
    flexible_versions: Versions | None = None  # per-field override of the message's
    ignorable: bool = False
    sensitive: bool = False
    map_key: bool = False
    about: str = ""
    struct: StructSpec | None = None  # element struct of "[]Name" or the struct of "Name"

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type


@dataclass(frozen=True)
class StructSpec:
    name: str
    versions: Versions
    fields: tuple[FieldSpec, ...]

    def field(self, name: str) -> FieldSpec | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


# --------------------------------------------------------------------------- codecs
#
# A codec reads from ``buf[pos:end]`` (a memoryview of the whole input, so error positions
# are absolute) and returns (value, next position); it writes by appending to a bytearray.


def _need(buf: memoryview, pos: int, end: int, n: int, path: str, what: str) -> None:
    if end - pos < n:
        raise TruncatedError(
            f"{path}: data ends inside {what}",
            position=pos,
            expected=f"{n} byte(s) for {what}",
            found=f"{max(end - pos, 0)} byte(s)",
        )


class _Codec(ABC):
    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    @abstractmethod
    def read(self, buf: memoryview, pos: int, end: int) -> tuple[Any, int]: ...

    @abstractmethod
    def write(self, out: bytearray, value: Any) -> None: ...

    def _bad_value(self, value: Any, expected: str, exc: Exception | None = None) -> SchemaError:
        return SchemaError(f"{self.path}: cannot encode {value!r}", expected=expected, found=type(value).__name__)


class _FixedCodec(_Codec):
    __slots__ = ("st", "type_name")

    def __init__(self, path: str, st: struct.Struct, type_name: str) -> None:
        super().__init__(path)
        self.st = st
        self.type_name = type_name

    def read(self, buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
        size = self.st.size
        if end - pos < size:
            _need(buf, pos, end, size, self.path, self.type_name)
        return self.st.unpack_from(buf, pos)[0], pos + size

    def write(self, out: bytearray, value: Any) -> None:
        # bool is an int subclass; refuse it for integer fields so a mixed-up value shows.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._bad_value(value, self.type_name)
        if self.type_name != "float64" and not isinstance(value, int):
            raise self._bad_value(value, self.type_name)
        try:
            out += self.st.pack(value)
        except struct.error as exc:
            raise SchemaError(f"{self.path}: {value!r} does not fit {self.type_name}", found=value) from exc


class _BoolCodec(_Codec):
    __slots__ = ()

    def read(self, buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
        if pos >= end:
            _need(buf, pos, end, 1, self.path, "bool")
        return buf[pos] != 0, pos + 1

    def write(self, out: bytearray, value: Any) -> None:
        if not isinstance(value, bool):
            raise self._bad_value(value, "bool")
        out.append(1 if value else 0)


class _UuidCodec(_Codec):
    __slots__ = ()

    def read(self, buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
        if end - pos < 16:
            _need(buf, pos, end, 16, self.path, "uuid")
        return uuid_to_str(buf[pos : pos + 16]), pos + 16

    def write(self, out: bytearray, value: Any) -> None:
        out += _uuid_bytes(value, self.path)


class _LengthPrefixed(_Codec):
    """Shared length handling of string, bytes and arrays (compact or classic)."""

    __slots__ = ("flexible", "nullable", "classic_len")

    def __init__(self, path: str, flexible: bool, nullable: bool, classic_len: struct.Struct) -> None:
        super().__init__(path)
        self.flexible = flexible
        self.nullable = nullable
        self.classic_len = classic_len

    def _read_length(self, buf: memoryview, pos: int, end: int) -> tuple[int, int]:
        """Returns (length, next position); length -1 means null."""
        start = pos
        if self.flexible:
            n, pos = read_unsigned_varint(buf, pos, end, f"{self.path} length")
            length = n - 1
        else:
            size = self.classic_len.size
            _need(buf, pos, end, size, self.path, "length")
            length = self.classic_len.unpack_from(buf, pos)[0]
            pos += size
        if length < 0:
            if not self.nullable:
                raise SchemaError(
                    f"{self.path}: non-nullable field was serialized as null",
                    position=start,
                    expected="a length >= 0",
                    found="null",
                )
            return -1, pos
        return length, pos

    def _write_length(self, out: bytearray, length: int) -> None:
        if self.flexible:
            write_unsigned_varint(out, length + 1)
        else:
            try:
                out += self.classic_len.pack(length)
            except struct.error as exc:
                raise SchemaError(f"{self.path}: length {length} does not fit its prefix") from exc

    def _write_null(self, out: bytearray) -> None:
        if not self.nullable:
            raise SchemaError(f"{self.path}: null for a non-nullable field", expected="a value", found=None)
        self._write_length(out, -1)


class _StringCodec(_LengthPrefixed):
    __slots__ = ()

    def __init__(self, path: str, flexible: bool, nullable: bool) -> None:
        super().__init__(path, flexible, nullable, _INT16)

    def read(self, buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
        start = pos
        length, pos = self._read_length(buf, pos, end)
        if length < 0:
            return None, pos
        if length > _MAX_STRING_BYTES:
            raise SchemaError(
                f"{self.path}: string had invalid length {length}",
                position=start,
                expected=f"at most {_MAX_STRING_BYTES} bytes",
                found=length,
            )
        if end - pos < length:
            _need(buf, pos, end, length, self.path, "string bytes")
        try:
            return str(buf[pos : pos + length], "utf-8"), pos + length
        except UnicodeDecodeError as exc:
            raise SchemaError(
                f"{self.path}: string is not UTF-8", position=pos + exc.start, expected="UTF-8 text"
            ) from exc

    def write(self, out: bytearray, value: Any) -> None:
        if value is None:
            self._write_null(out)
            return
        if not isinstance(value, str):
            raise self._bad_value(value, "str")
        data = value.encode("utf-8")
        if len(data) > _MAX_STRING_BYTES:
            raise SchemaError(f"{self.path}: string is too long to be serialized", found=len(data))
        self._write_length(out, len(data))
        out += data


class _BytesCodec(_LengthPrefixed):
    __slots__ = ()

    def __init__(self, path: str, flexible: bool, nullable: bool) -> None:
        super().__init__(path, flexible, nullable, _INT32)

    def read(self, buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
        length, pos = self._read_length(buf, pos, end)
        if length < 0:
            return None, pos
        if end - pos < length:
            _need(buf, pos, end, length, self.path, "bytes")
        return bytes(buf[pos : pos + length]), pos + length

    def write(self, out: bytearray, value: Any) -> None:
        if value is None:
            self._write_null(out)
            return
        if not isinstance(value, bytes | bytearray | memoryview):
            raise self._bad_value(value, "bytes")
        self._write_length(out, len(value))
        out += value


class _ArrayCodec(_LengthPrefixed):
    __slots__ = ("element",)

    def __init__(self, path: str, flexible: bool, nullable: bool, element: _Codec) -> None:
        super().__init__(path, flexible, nullable, _INT32)
        self.element = element

    def read(self, buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
        start = pos
        count, pos = self._read_length(buf, pos, end)
        if count < 0:
            return None, pos
        # Kafka's guard against allocating huge collections from corrupt counts: every
        # element takes at least one byte.
        if count > end - pos:
            raise TruncatedError(
                f"{self.path}: array of {count} element(s) but only {end - pos} byte(s) remain",
                position=start,
                expected=f"at least {count} byte(s)",
                found=f"{end - pos} byte(s)",
            )
        read = self.element.read
        items = []
        for _ in range(count):
            item, pos = read(buf, pos, end)
            items.append(item)
        return items, pos

    def write(self, out: bytearray, value: Any) -> None:
        if value is None:
            self._write_null(out)
            return
        if isinstance(value, str | bytes | bytearray | Mapping) or not hasattr(value, "__len__"):
            raise self._bad_value(value, "list")
        self._write_length(out, len(value))
        write = self.element.write
        for item in value:
            write(out, item)


class _StructFieldCodec(_Codec):
    """A struct-typed field (not an array element): inline, or null-marked when nullable."""

    __slots__ = ("body", "nullable", "tagged")

    def __init__(self, path: str, body: _StructCodec, nullable: bool, tagged: bool) -> None:
        super().__init__(path)
        self.body = body
        self.nullable = nullable
        self.tagged = tagged

    def read(self, buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
        if self.nullable:
            if self.tagged:
                marker, pos = read_unsigned_varint(buf, pos, end, f"{self.path} null marker")
                is_null = marker == 0
            else:
                _need(buf, pos, end, 1, self.path, "null marker")
                is_null = _INT8.unpack_from(buf, pos)[0] < 0
                pos += 1
            if is_null:
                return None, pos
        return self.body.read(buf, pos, end)

    def write(self, out: bytearray, value: Any) -> None:
        if value is None:
            if not self.nullable:
                raise SchemaError(f"{self.path}: null for a non-nullable struct", found=None)
            if self.tagged:
                write_unsigned_varint(out, 0)
            else:
                out += _INT8.pack(-1)
            return
        if self.nullable:
            if self.tagged:
                write_unsigned_varint(out, 1)
            else:
                out += _INT8.pack(1)
        self.body.write(out, value)


@dataclass
class _TaggedSlot:
    name: str
    codec: _Codec
    default: Callable[[], Any]
    default_payload: bytes


@dataclass
class _AbsentSlot:
    """A field the schema has, but not at this version: only its default may be written."""

    name: str
    check: _Codec
    default_payload: bytes
    ignorable: bool


class _StructCodec(_Codec):
    """Codec of one struct at one version: the precompiled field list."""

    __slots__ = (
        "regular",
        "defaults",
        "tagged",
        "foreign_tags",
        "absent",
        "flexible",
        "order",
        "known",
        "has_tagged_names",
    )

    def __init__(self, path: str, flexible: bool) -> None:
        super().__init__(path)
        self.flexible = flexible
        self.regular: list[tuple[str, _Codec]] = []
        self.defaults: dict[str, Callable[[], Any]] = {}  # of the regular fields
        self.tagged: dict[int, _TaggedSlot] = {}
        # Tags of fields tagged in other versions only: Kafka refuses them ("Tag N is not
        # valid for version V") instead of keeping them as unknown.
        self.foreign_tags: dict[int, str] = {}
        self.absent: list[_AbsentSlot] = []
        self.order: list[str] = []  # names present at this version, in schema order
        self.known: frozenset[str] = frozenset()
        self.has_tagged_names = False

    def default_value(self) -> dict[str, Any]:
        """Every field of this version at its default, in schema order."""
        value = {name: factory() for name, factory in self.defaults.items()}
        value.update({slot.name: slot.default() for slot in self.tagged.values()})
        return {name: value[name] for name in self.order}

    def read(self, buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
        values: dict[str, Any] = {}
        for name, codec in self.regular:
            values[name], pos = codec.read(buf, pos, end)
        if not self.flexible:
            return values, pos
        for tagged in self.tagged.values():
            values[tagged.name] = tagged.default()
        count, pos = read_unsigned_varint(buf, pos, end, f"{self.path} tagged field count")
        unknown: list[tuple[int, bytes]] = []
        for _ in range(count):
            tag_pos = pos
            tag, pos = read_unsigned_varint(buf, pos, end, f"{self.path} tag")
            size, pos = read_unsigned_varint(buf, pos, end, f"{self.path} tag {tag} size")
            if end - pos < size:
                _need(buf, pos, end, size, self.path, f"tagged field {tag}")
            slot = self.tagged.get(tag)
            if slot is None:
                if tag in self.foreign_tags:
                    raise SchemaError(
                        f"{self.path}: tag {tag} ({self.foreign_tags[tag]}) is not valid for this version",
                        position=tag_pos,
                        expected=f"one of tags {sorted(self.tagged)} or an unknown tag",
                        found=tag,
                    )
                unknown.append((tag, bytes(buf[pos : pos + size])))
                pos += size
                continue
            value, stop = slot.codec.read(buf, pos, pos + size)
            if stop != pos + size:
                # Kafka does not re-check this, but a mismatch means every later byte is misread.
                raise SchemaError(
                    f"{self.path}: tagged field {slot.name} (tag {tag}) does not fill its declared size",
                    position=tag_pos,
                    expected=f"{size} byte(s)",
                    found=f"{stop - pos} byte(s) used",
                )
            values[slot.name] = value
            pos += size
        if unknown:
            values[UNKNOWN_TAGGED_FIELDS] = unknown
        if self.has_tagged_names:
            values = {name: values[name] for name in self.order} | ({UNKNOWN_TAGGED_FIELDS: unknown} if unknown else {})
        return values, pos

    def write(self, out: bytearray, value: Any) -> None:
        if not isinstance(value, Mapping):
            raise self._bad_value(value, "a dict of fields")
        extra = value.keys() - self.known
        if extra:
            raise SchemaError(f"{self.path}: unknown field(s) {sorted(extra)}", expected=sorted(self.known))
        for absent in self.absent:
            if absent.name in value and not absent.ignorable:
                payload = bytearray()
                absent.check.write(payload, value[absent.name])
                if payload != absent.default_payload:
                    raise SchemaError(
                        f"{self.path}: non-default value for {absent.name}, which this version does not have",
                        found=value[absent.name],
                    )
        for name, codec in self.regular:
            codec.write(out, value[name] if name in value else self.defaults[name]())
        if not self.flexible:
            if value.get(UNKNOWN_TAGGED_FIELDS):
                raise SchemaError(f"{self.path}: tagged fields set, but this version is not flexible")
            return
        sections: list[tuple[int, bytes]] = []
        for tag, slot in self.tagged.items():
            if slot.name not in value:
                continue
            payload = bytearray()
            slot.codec.write(payload, value[slot.name])
            if payload != slot.default_payload:
                sections.append((tag, bytes(payload)))
        for tag, raw in value.get(UNKNOWN_TAGGED_FIELDS) or ():
            if tag in self.tagged or tag in self.foreign_tags:
                raise SchemaError(f"{self.path}: unknown tagged field uses the schema's tag {tag}")
            sections.append((tag, bytes(raw)))
        sections.sort(key=lambda s: s[0])
        for (a, _), (b, _) in zip(sections, sections[1:], strict=False):
            if a == b:
                raise SchemaError(f"{self.path}: tag {a} written twice")
        write_unsigned_varint(out, len(sections))
        for tag, section in sections:
            write_unsigned_varint(out, tag)
            write_unsigned_varint(out, len(section))
            out += section


def _parse_int_default(text: str) -> int:
    t = text.strip()
    neg = t.startswith("-")
    body = t[1:] if neg else t
    value = int(body, 16) if body.lower().startswith("0x") else int(body)
    return -value if neg else value


class _Compiler:
    """Turns a StructSpec at one version into a _StructCodec (cached per (struct, version))."""

    def __init__(self, message: MessageSchema) -> None:
        self.message = message
        self.cache: dict[tuple[int, int], _StructCodec] = {}

    def flexible_for(self, spec: FieldSpec, version: int) -> bool:
        flex = spec.flexible_versions or self.message.flexible_versions
        return version in flex

    def struct(self, spec: StructSpec, version: int, path: str) -> _StructCodec:
        key = (id(spec), version)
        if key in self.cache:
            return self.cache[key]
        codec = _StructCodec(path, version in self.message.flexible_versions)
        self.cache[key] = codec
        known = {UNKNOWN_TAGGED_FIELDS}
        for f in spec.fields:
            known.add(f.name)
            fpath = f"{path}.{f.name}"
            if f.tag is not None and not f.tagged_versions.is_empty() and version not in f.tagged_versions:
                codec.foreign_tags[f.tag] = f.name
            nullable = version in f.nullable_versions
            if version not in f.versions:
                # A version-independent checker: null allowed so any value can be compared.
                check = self.type_codec(f, version, fpath, flexible=True, nullable=True, tagged=False)
                default = self.default_factory(f, version, fpath, nullable=True)
                payload = bytearray()
                check.write(payload, default())
                codec.absent.append(_AbsentSlot(f.name, check, bytes(payload), f.ignorable))
                continue
            codec.order.append(f.name)
            default = self.default_factory(f, version, fpath, nullable)
            if version in f.tagged_versions:
                if not codec.flexible:
                    raise SchemaError(
                        f"{fpath}: tagged at version {version}, which is not flexible",
                        path=self.message.source,
                    )
                if f.tag is None:
                    raise SchemaError(f"{fpath}: has taggedVersions but no tag", path=self.message.source)
                if f.tag in codec.tagged:
                    raise SchemaError(f"{fpath}: tag {f.tag} used twice", path=self.message.source)
                fc = self.type_codec(f, version, fpath, flexible=True, nullable=nullable, tagged=True)
                payload = bytearray()
                fc.write(payload, default())
                codec.tagged[f.tag] = _TaggedSlot(f.name, fc, default, bytes(payload))
                codec.has_tagged_names = True
            else:
                fc = self.type_codec(
                    f, version, fpath, flexible=self.flexible_for(f, version), nullable=nullable, tagged=False
                )
                codec.regular.append((f.name, fc))
                codec.defaults[f.name] = default
        codec.known = frozenset(known)
        return codec

    def type_codec(
        self, f: FieldSpec, version: int, path: str, *, flexible: bool, nullable: bool, tagged: bool
    ) -> _Codec:
        if f.is_array:
            element = self.element_codec(f, version, path + "[]", flexible)
            return _ArrayCodec(path, flexible, nullable, element)
        if f.struct is not None:
            return _StructFieldCodec(path, self.struct(f.struct, version, path), nullable, tagged)
        return self.primitive(f.type, path, flexible, nullable)

    def element_codec(self, f: FieldSpec, version: int, path: str, flexible: bool) -> _Codec:
        if f.struct is not None:
            return self.struct(f.struct, version, path)
        # Kafka: array elements are never nullable.
        return self.primitive(f.element_type, path, flexible, False)

    @staticmethod
    def primitive(type_name: str, path: str, flexible: bool, nullable: bool) -> _Codec:
        if type_name in _FIXED_TYPES:
            return _FixedCodec(path, _FIXED_TYPES[type_name], type_name)
        if type_name == "bool":
            return _BoolCodec(path)
        if type_name == "uuid":
            return _UuidCodec(path)
        if type_name == "string":
            return _StringCodec(path, flexible, nullable)
        if type_name == "bytes":
            return _BytesCodec(path, flexible, nullable)
        raise SchemaError(f"{path}: unsupported type {type_name!r}")

    def default_factory(self, f: FieldSpec, version: int, path: str, nullable: bool) -> Callable[[], Any]:
        """Kafka's FieldSpec.fieldDefault: the value a field has when not given or not written."""
        text = f.default
        if text == "null":
            if not nullable:
                raise SchemaError(
                    f"{path}: default null, but the field is not nullable at version {version}",
                    path=self.message.source,
                )
            return lambda: None
        raw = "" if text is None else text
        try:
            if f.is_array:
                if raw:
                    raise SchemaError(f"{path}: arrays only take the default null or none")
                return list
            if f.struct is not None:
                sub = self.struct(f.struct, version, path)
                return sub.default_value
            t = f.type
            if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
                number = _parse_int_default(raw) if raw else 0
                return lambda: number
            if t == "float64":
                real = float(raw) if raw else 0.0
                return lambda: real
            if t == "bool":
                if raw not in ("", "true", "false"):
                    raise SchemaError(f"{path}: bad bool default {raw!r}")
                flag = raw == "true"
                return lambda: flag
            if t == "string":
                return lambda: raw
            if t == "bytes":
                if raw:
                    raise SchemaError(f"{path}: bytes only take the default null or none")
                return bytes
            if t == "uuid":
                text_id = uuid_to_str(uuid_from_str(raw)) if raw else ZERO_UUID
                return lambda: text_id
        except ValueError as exc:
            raise SchemaError(f"{path}: bad default {raw!r}", path=self.message.source) from exc
        raise SchemaError(f"{path}: unsupported type {f.type!r}", path=self.message.source)


def _drop_unknown_tags(value: Any) -> None:
    """Remove kept unknown tagged fields from a decoded struct, recursively."""
    if isinstance(value, dict):
        value.pop(UNKNOWN_TAGGED_FIELDS, None)
        for item in value.values():
            _drop_unknown_tags(item)
    elif isinstance(value, list):
        for item in value:
            _drop_unknown_tags(item)


# --------------------------------------------------------------------------- messages


@dataclass
class MessageSchema:
    """One JSON message definition and its precompiled per-version codecs."""

    name: str
    type: str
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    struct: StructSpec
    source: str | None = None
    _codecs: dict[int, _StructCodec] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        compiler = _Compiler(self)
        for version in self.valid_versions:
            self._codecs[version] = compiler.struct(self.struct, version, self.name)

    @property
    def versions(self) -> range:
        return range(self.valid_versions.low, self.valid_versions.high + 1)

    def _codec(self, version: int) -> _StructCodec:
        codec = self._codecs.get(version)
        if codec is None:
            raise SchemaError(
                f"{self.name} has no version {version}",
                expected=f"version {self.valid_versions}",
                found=version,
            )
        return codec

    def decode_from(
        self, buf: bytes | bytearray | memoryview, pos: int, version: int, *, keep_unknown_tags: bool = True
    ) -> tuple[dict[str, Any], int]:
        """Decode the body starting at ``pos``; returns (fields, position after the body)."""
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        values, end = self._codec(version).read(mv, pos, len(mv))
        if not keep_unknown_tags:
            _drop_unknown_tags(values)
        return values, end

    def decode(
        self, buf: bytes | bytearray | memoryview, version: int, *, keep_unknown_tags: bool = True
    ) -> dict[str, Any]:
        """Decode exactly one body filling ``buf``; bytes after it are an error ("garbage after")."""
        values, pos = self.decode_from(buf, 0, version, keep_unknown_tags=keep_unknown_tags)
        size = memoryview(buf).nbytes
        if pos != size:
            raise SchemaError(
                f"found {size - pos} byte(s) of garbage after {self.name}",
                position=pos,
                expected="end of message",
                found=f"{size - pos} more byte(s)",
            )
        return values

    def encode_into(self, out: bytearray, values: Mapping[str, Any], version: int) -> None:
        self._codec(version).write(out, values)

    def encode(self, values: Mapping[str, Any], version: int) -> bytes:
        out = bytearray()
        self.encode_into(out, values, version)
        return bytes(out)

    def defaults(self, version: int) -> dict[str, Any]:
        """A value with every field present at ``version`` set to its default."""
        codec = self._codec(version)
        return codec.default_value()

# --------------------------------------------------------------------------- loading


def _parse_field(raw: Mapping[str, Any], common: dict[str, StructSpec], source: str, where: str) -> FieldSpec:
    try:
        name = raw["name"]
        type_name = raw["type"]
    except KeyError as exc:
        raise SchemaError(f"{where}: field without {exc.args[0]!r}", path=source) from exc
    path = f"{where}.{name}"
    tagged = Versions.parse(raw.get("taggedVersions"), default=NO_VERSIONS, what=f"{path} taggedVersions")
    # Kafka's FieldSpec: without "versions", a tagged field exists in its taggedVersions
    # (e.g. TransactionLogValue.PreviousProducerId).
    versions = Versions.parse(raw.get("versions"), default=None if tagged.is_empty() else tagged,
                              what=f"{path} versions")
    element = type_name[2:] if type_name.startswith("[]") else type_name
    sub: StructSpec | None = None
    if element not in _PRIMITIVE_TYPES:
        if "fields" in raw:
            sub = StructSpec(
                element,
                versions,
                tuple(_parse_field(f, common, source, path) for f in raw["fields"]),
            )
        elif element in common:
            sub = common[element]
        else:
            raise SchemaError(f"{path}: unknown type {type_name!r}", path=source)
    nullable = Versions.parse(raw.get("nullableVersions"), default=NO_VERSIONS, what=f"{path} nullableVersions")
    if not nullable.is_empty() and not (type_name.startswith("[]") or sub is not None or element in _NULLABLE_TYPES):
        raise SchemaError(f"{path}: type {type_name} cannot be nullable", path=source)
    tag = raw.get("tag")
    default = raw.get("default")
    flexible = raw.get("flexibleVersions")
    return FieldSpec(
        name=name,
        type=type_name,
        versions=versions,
        nullable_versions=nullable,
        tagged_versions=tagged,
        tag=None if tag is None else int(tag),
        default=None if default is None else str(default).lower() if isinstance(default, bool) else str(default),
        flexible_versions=None if flexible is None else Versions.parse(flexible, what=f"{path} flexibleVersions"),
        ignorable=bool(raw.get("ignorable", False)),
        sensitive=bool(raw.get("sensitive", False)),
        map_key=bool(raw.get("mapKey", False)),
        about=str(raw.get("about", "")),
        struct=sub,
    )


def _strip_line_comments(text: str) -> str:
    # Kafka's own files carry // comment lines; accept them so they can be dropped in as-is.
    return "\n".join("" if line.lstrip().startswith("//") else line for line in text.splitlines())


def parse_schema(raw: Mapping[str, Any], source: str | None = None) -> MessageSchema:
    """Build a MessageSchema from one parsed JSON definition."""
    src = source or "<schema>"
    try:
        name = raw["name"]
    except KeyError as exc:
        raise SchemaError("message definition without a name", path=source) from exc
    valid = Versions.parse(raw.get("validVersions"), what=f"{name} validVersions")
    flexible = Versions.parse(raw.get("flexibleVersions"), what=f"{name} flexibleVersions")
    common: dict[str, StructSpec] = {}
    for cs in raw.get("commonStructs", ()):
        common[cs["name"]] = StructSpec(
            cs["name"],
            Versions.parse(cs.get("versions"), default=valid),
            tuple(_parse_field(f, common, src, cs["name"]) for f in cs["fields"]),
        )
    fields = tuple(_parse_field(f, common, src, name) for f in raw.get("fields", ()))
    api_key = raw.get("apiKey")
    return MessageSchema(
        name=name,
        type=str(raw.get("type", "")),
        api_key=None if api_key is None else int(api_key),
        valid_versions=valid,
        flexible_versions=flexible,
        struct=StructSpec(name, valid, fields),
        source=source,
    )


@dataclass
class SchemaRegistry:
    """The message definitions of one schema directory."""

    directory: Path
    by_name: dict[str, MessageSchema]
    metadata_by_api_key: dict[int, MessageSchema]

    def get(self, name: str) -> MessageSchema:
        try:
            return self.by_name[name]
        except KeyError:
            raise SchemaError(f"no schema named {name!r}", path=self.directory) from None

    def metadata(self, api_key: int) -> MessageSchema | None:
        return self.metadata_by_api_key.get(api_key)


def load_schemas(directory: str | os.PathLike[str] | None = None) -> SchemaRegistry:
    """Load every ``*.json`` definition of ``directory`` (default: the package's formats/schemas,
    or ``$MIGRATION_KAFKA_SCHEMA_DIR`` when set)."""
    if directory is None:
        directory = os.environ.get(SCHEMA_DIR_ENV) or DEFAULT_SCHEMA_DIR
    root = Path(directory)
    if not root.is_dir():
        raise SchemaError("schema directory does not exist", path=root)
    by_name: dict[str, MessageSchema] = {}
    by_key: dict[int, MessageSchema] = {}
    for path in sorted(root.glob("*.json")):
        try:
            raw = json.loads(_strip_line_comments(path.read_text(encoding="utf-8")))
        except json.JSONDecodeError as exc:
            raise SchemaError(f"not valid JSON: {exc.msg}", path=path, position=exc.pos) from exc
        schema = parse_schema(raw, str(path))
        if schema.name in by_name:
            raise SchemaError(f"schema {schema.name} defined twice", path=path)
        by_name[schema.name] = schema
        if schema.type == "metadata":
            if schema.api_key is None:
                raise SchemaError(f"metadata schema {schema.name} has no apiKey", path=path)
            if schema.api_key in by_key:
                raise SchemaError(
                    f"api key {schema.api_key} used by {by_key[schema.api_key].name} and {schema.name}", path=path
                )
            by_key[schema.api_key] = schema
    return SchemaRegistry(root, by_name, by_key)


@functools.cache
def default_registry() -> SchemaRegistry:
    """The registry of the default schema directory, loaded once per process."""
    return load_schemas()


# --------------------------------------------------------------------------- redaction


def _redaction_marker(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return f"<redacted {len(value.encode('utf-8'))} bytes>"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<redacted {len(value)} bytes>"
    return "<redacted>"


def _redact_struct(values: Mapping[str, Any], spec: StructSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in values.items():
        f = spec.field(name)
        if f is None:
            out[name] = value
        elif f.sensitive:
            if f.is_array and isinstance(value, list):
                out[name] = [_redaction_marker(v) for v in value]
            else:
                out[name] = _redaction_marker(value)
        elif f.struct is not None and f.is_array and isinstance(value, list):
            out[name] = [_redact_struct(v, f.struct) if isinstance(v, Mapping) else v for v in value]
        elif f.struct is not None and isinstance(value, Mapping):
            out[name] = _redact_struct(value, f.struct)
        else:
            out[name] = value
    return out


def redact(values: Mapping[str, Any], schema: MessageSchema) -> dict[str, Any]:
    """A copy of decoded ``values`` with every ``"sensitive": true`` field replaced by a
    ``"<redacted N bytes>"`` marker, in nested structs and arrays too."""
    return _redact_struct(values, schema.struct)
