"""``kmigrate inspect``: Kafka's kafka-dump-log (``DumpLogSegments``), line for line.

The text output is what ``kafka-dump-log.sh`` prints (``DumpLogSegments.java`` in Kafka's tools
module, ``DumpLogSegments.scala`` in core before it; facts in docs/formats.md §8):

- every file starts with ``Dumping FILE``; dispatch is on the text after the file name's last
  ``.``: ``.log`` and ``.checkpoint`` are record files, then ``.index``, ``.timeindex``,
  ``.snapshot`` (producer state), ``.txnindex``; anything else is ``Ignoring unknown file``;
- a ``.log`` says ``Log starting offset: N``, a KRaft snapshot ``Snapshot end offset: N, epoch:
  E``, ``bootstrap.checkpoint`` ``KRaft bootstrap snapshot``; then one line per batch, with
  ``--deep-iteration`` one ``| offset: …`` line per record, with ``--print-data-log`` its key
  and payload; ``Found N invalid bytes at the end of NAME`` for a truncated tail;
- ``offset: N position: M`` per offset index entry, ``timestamp: T offset: O`` per time index
  entry, ``version: 0 producerId: …`` per aborted transaction, ``producerId: …`` per producer;
- what the index checks find (mismatches, out-of-order timestamps) and non-consecutive record
  offsets go to stderr after the last file, as Kafka prints them.

Booleans are Java's (``true``/``false``), optional longs Java's ``OptionalLong`` text, KRaft
records Jackson's compact JSON with camelCase field names (``{"type":"TOPIC_RECORD","version":0,
"data":{…}}``, MetadataJsonConverters / ``--cluster-metadata-decoder``).

Records of ``__consumer_offsets`` and ``__transaction_state`` (``--offsets-decoder``,
``--transaction-log-decoder``; OffsetsMessageParser / TransactionLogMessageParser, docs/formats.md
§8.1) print as ``key: {"type":"2","data":{…}} payload: {"version":"4","data":{…}}``, a tombstone's
payload as ``<DELETE>``, a classic consumer group's member subscriptions and assignments decoded.

What kmigrate adds: KRaft files (``.checkpoint`` files and segments of ``__cluster_metadata-0``)
get the cluster metadata decoder without asking, segments of ``__consumer_offsets-N`` and
``__transaction_state-N`` their coordinator's decoder, and a checkpoint is always dumped deep with
its records (a snapshot is its records); fields marked sensitive in the schemas (SCRAM salts and
keys) are always shown redacted; key and value decoders ``string``, ``hex`` and ``json``; every
line also exists as one JSON object (``--json``); bad bytes end the file's dump with one line
naming the file, the byte position and what was expected, never a traceback; a coordinator record
that does not decode says where in the file (batch position, byte of its key or value) and what
was expected, and the dump goes on, as Kafka's "Error at offset N, skipping." does.
"""

from __future__ import annotations

import base64
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from migration.formats import names
from migration.formats.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    control_value_schema,
    decode_control_record,
)
from migration.formats.coordinator_records import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    CONSUMER_PROTOCOL_TYPE,
    Coordinator,
    CoordinatorKey,
    CoordinatorValue,
    UnknownCoordinatorRecordTypeError,
    coordinator_for_topic,
    decode_consumer_protocol,
    decode_coordinator_key,
    decode_coordinator_value,
)
from migration.formats.errors import InvalidFileNameError, KafkaFormatError
from migration.formats.file_records import Batch, FileRecords
from migration.formats.message_schema import ZERO_UUID, FieldSpec, StructSpec, default_registry, redact
from migration.formats.metadata_records import decode_metadata_record, metadata_schema
from migration.formats.model import MAGIC_V1, NO_SEQUENCE, NO_TIMESTAMP, Header, TimestampType
from migration.formats.offset_index import OffsetIndex
from migration.formats.producer_snapshot import ProducerSnapshot
from migration.formats.record_batch import RecordBatch, increment_sequence
from migration.formats.time_index import TimeIndex
from migration.formats.transaction_index import TransactionIndex

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DumpLine",
    "DumpOptions",
    "LogDump",
    "PayloadDecoder",
    "coordinator_key_json",
    "coordinator_value_json",
    "kafka_json",
    "metadata_record_json",
]

RECORD_INDENT = "|"  # DumpLogSegments.RECORD_INDENT
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # --max-message-size default
_VERIFY_CHUNK = 64 * 1024  # read window when checking one index entry against the log
_INT_TYPES = frozenset(["int8", "int16", "int32", "int64", "uint16", "uint32"])


class PayloadDecoder(StrEnum):
    """How ``--print-data-log`` shows keys and values (Kafka: ``--key-decoder-class`` and
    ``--value-decoder-class``, default ``StringDecoder``)."""

    STRING = "string"  # UTF-8, bad bytes replaced (Java's new String(bytes, UTF_8))
    HEX = "hex"
    JSON = "json"  # UTF-8 JSON, printed compact on one line


@dataclass(frozen=True)
class DumpOptions:
    """kafka-dump-log's options, same names (docs/formats.md §8)."""

    deep_iteration: bool = False
    print_data_log: bool = False
    skip_record_metadata: bool = False
    cluster_metadata_decoder: bool = False  # force it for any .log (KRaft files get it anyway)
    offsets_decoder: bool = False  # __consumer_offsets records, forced (its segments get it anyway)
    transaction_log_decoder: bool = False  # __transaction_state records, forced (likewise)
    key_decoder: PayloadDecoder | None = None  # None: string; given, it also wins over the automatic
    value_decoder: PayloadDecoder | None = None  # decoders of KRaft files and coordinator segments
    max_bytes: int | None = None  # read only batches that end within this many bytes
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    verify_index_only: bool = False
    index_sanity_check: bool = False


class DumpLine(NamedTuple):
    """One line of output: ``text`` as kafka-dump-log prints it (None: only in JSON), ``data``
    the same as a JSON object (None: only in text), ``err`` for lines Kafka prints on stderr."""

    text: str | None
    data: dict[str, Any] | None
    err: bool = False


# --------------------------------------------------------------------------- Java's words


def _jbool(value: bool) -> str:
    return "true" if value else "false"


def _optional_long(value: int | None) -> str:
    """Java's ``OptionalLong.toString``."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """DefaultRecordBatch.decrementSequence (wraps below 0 to Integer.MAX_VALUE)."""
    if sequence < decrement:
        return 0x7FFFFFFF - (decrement - sequence) + 1
    return sequence - decrement


def _java_double(value: float) -> str:
    """Java's ``Double.toString`` (shortest digits): plain in [1e-3, 1e7), else ``d.dddE±n``."""
    if math.isnan(value):
        return '"NaN"'  # Jackson quotes non-numeric numbers
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)  # Python is plain in this range too
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(digits) - 1 + exponent}"


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _jackson_string(text: str) -> str:
    out = ['"']
    for ch in text:
        esc = _JSON_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04X}")  # Jackson's escapes use upper-case hex digits
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _jackson(value: Any) -> str:
    """Compact JSON as Jackson's ``JsonNode.toString`` writes it."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, str):
        return _jackson_string(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{_jackson_string(str(k))}:{_jackson(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_jackson(v) for v in value) + "]"
    return _jackson_string(str(value))


# --------------------------------------------------------------------------- Kafka's JSON of messages


def _camel(name: str) -> str:
    """The generator's ``camelCaseName``: the first letter lower-cased."""
    return name[:1].lower() + name[1:]


def _snake_upper(name: str) -> str:
    """MetadataRecordType's constant names: MessageGenerator.toSnakeCase, upper-cased
    (``TopicRecord`` -> ``TOPIC_RECORD``, ``KRaftVersionRecord`` -> ``KRAFT_VERSION_RECORD``)."""
    out: list[str] = []
    prev_capital = True
    for ch in name:
        if ch.isupper():
            if not prev_capital:
                out.append("_")
            out.append(ch.lower())
            prev_capital = True
        else:
            out.append(ch)
            prev_capital = False
    return "".join(out).upper()


def _parse_int(text: str) -> int:
    body = text.lstrip("-")
    value = int(body, 16) if body.lower().startswith("0x") else int(body)
    return -value if text.startswith("-") else value


def _field_default(f: FieldSpec, version: int) -> Any:
    """The value a field has when not set (the generator's fieldDefault), as decoded."""
    text = f.default
    if text == "null":
        return None
    raw = text or ""
    if f.is_array:
        return []
    if f.struct is not None:
        return {g.name: _field_default(g, version) for g in f.struct.fields if version in g.versions}
    if f.type in _INT_TYPES:
        return _parse_int(raw) if raw else 0
    if f.type == "float64":
        return float(raw) if raw else 0.0
    if f.type == "bool":
        return raw == "true"
    if f.type == "bytes":
        return b""
    if f.type == "uuid":
        return raw or ZERO_UUID
    return raw


def _json_scalar(type_name: str, value: Any) -> Any:
    if type_name == "bytes" and isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")  # Jackson's BinaryNode: base64 with padding
    return value


def _json_field(f: FieldSpec, value: Any, version: int) -> Any:
    if value is None:
        return None
    if f.is_array and isinstance(value, list):
        if f.struct is not None:
            return [kafka_json(e, f.struct, version) if isinstance(e, Mapping) else e for e in value]
        return [_json_scalar(f.element_type, e) for e in value]
    if f.struct is not None and isinstance(value, Mapping):
        return kafka_json(value, f.struct, version)
    return _json_scalar(f.type, value)


def _without_unknown_tags(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: v for k, v in value.items() if not k.startswith("_")}
    return value


def kafka_json(values: Mapping[str, Any], spec: StructSpec, version: int) -> dict[str, Any]:
    """Decoded ``values`` of ``spec`` at ``version`` as Kafka's generated ``*JsonConverter.write``
    shows them: schema order, camelCase names, only the fields the version has, tagged fields
    only when not at their default, bytes as base64, uuids as Kafka's text, unknown tags left out."""
    out: dict[str, Any] = {}
    for f in spec.fields:
        if version not in f.versions or f.name not in values:
            continue
        value = values[f.name]
        if version in f.tagged_versions and _without_unknown_tags(value) == _field_default(f, version):
            continue
        out[_camel(f.name)] = _json_field(f, value, version)
    return out


def metadata_record_json(value: bytes) -> dict[str, Any]:
    """One ``__cluster_metadata`` record value as the cluster metadata decoder shows it:
    ``{"type": "TOPIC_RECORD", "version": 0, "data": {…}}``, sensitive fields redacted."""
    record = decode_metadata_record(value)
    schema = metadata_schema(record.api_key)
    data = kafka_json(redact(record.fields, schema), schema.struct, record.version)
    return {"type": _snake_upper(record.name), "version": record.version, "data": data}


def coordinator_key_json(key: CoordinatorKey) -> dict[str, Any]:
    """A coordinator record key as DumpLogSegments' CoordinatorRecordMessageParser shows it:
    ``{"type": "<record type>", "data": {…}}`` (the type as a JSON string)."""
    schema = default_registry().get(key.name)
    return {"type": str(key.record_type), "data": kafka_json(key.fields, schema.struct, key.version)}


def _consumer_protocol_json(name: str, raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, bytes | bytearray | memoryview):
        return None
    parsed = decode_consumer_protocol(name, raw)
    if parsed is None:
        return None
    version, fields = parsed
    return kafka_json(fields, default_registry().get(name).struct, version)


def coordinator_value_json(value: CoordinatorValue) -> dict[str, Any]:
    """A coordinator record value as DumpLogSegments shows it: ``{"version": "<version>", "data":
    {…}}`` (the data in the layout it was read with); a classic group of protocol type ``consumer``
    has each member's subscription and assignment decoded (``prepareGroupMetadataValue``), the
    bytes kept (base64) when they do not read."""
    schema = default_registry().get(value.name)
    data = kafka_json(value.fields, schema.struct, value.read_version)
    if value.name == "GroupMetadataValue" and value.fields.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
        for member, shown in zip(value.fields.get("members") or (), data.get("members") or (), strict=False):
            for field_name, message in (("subscription", CONSUMER_PROTOCOL_SUBSCRIPTION),
                                        ("assignment", CONSUMER_PROTOCOL_ASSIGNMENT)):
                decoded = _consumer_protocol_json(message, member.get(field_name))
                if decoded is not None and field_name in shown:
                    shown[field_name] = decoded
    return {"version": str(value.version), "data": data}


def _reason(exc: KafkaFormatError) -> str:
    """An error's message without its location (the caller names the record)."""
    extra = []
    if exc.expected is not None:
        extra.append(f"expected {exc.expected}")
    if exc.found is not None:
        extra.append(f"found {exc.found}")
    return exc.message + (f" ({', '.join(extra)})" if extra else "")


# --------------------------------------------------------------------------- records


class _Entry(NamedTuple):
    """One record as DumpLogSegments sees it (``Record``; v0/v1 ones are legacy batches)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    sequence: int
    legacy_valid: bool | None  # v0/v1: the message's own CRC check
    legacy_crc: int | None


def _entries(batch: Batch) -> Iterator[_Entry]:
    """Deep iteration of one batch with Kafka's per-record values."""
    if isinstance(batch, RecordBatch):
        base_seq = batch.base_sequence
        for r in batch.records():
            # DefaultRecord: baseSequence >= 0 ? incrementSequence(baseSequence, offsetDelta) : -1
            seq = increment_sequence(base_seq, r.offset - batch.base_offset) if base_seq >= 0 else NO_SEQUENCE
            yield _Entry(r.offset, r.timestamp, r.key, r.value, r.headers, seq, None, None)
        return
    # AbstractLegacyRecordBatch's deep iterator: an inner v1 message of a LogAppendTime wrapper
    # takes the wrapper's timestamp; offsets are absolute.
    lat = batch.is_compressed and batch.magic == MAGIC_V1 and batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    for m in batch.inner():
        ts = batch.timestamp if lat and m.magic == MAGIC_V1 else m.timestamp
        yield _Entry(m.offset, ts, m.key, m.value, (), NO_SEQUENCE, m.is_valid(), m.crc)


def _decode_payload(decoder: PayloadDecoder, data: bytes) -> str:
    if decoder is PayloadDecoder.HEX:
        return data.hex()
    text = data.decode("utf-8", "replace")
    if decoder is PayloadDecoder.JSON:
        return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    return text


# (key, payload) as a MessageParser returns them (a dict is printed as Jackson's JSON); None: not
# printed. A parser is called with the record and the file position of its batch.
_Parsed = tuple[str | dict[str, Any] | None, Any]
_Parser = Callable[[_Entry, int], _Parsed]


def _decoder_parser(key_decoder: PayloadDecoder, value_decoder: PayloadDecoder) -> _Parser:
    """DecoderMessageParser: the key when there is one, the payload when there is one."""

    def parse(entry: _Entry, batch_position: int) -> _Parsed:
        try:
            key = None if entry.key is None else _decode_payload(key_decoder, entry.key)
            payload = None if entry.value is None else _decode_payload(value_decoder, entry.value)
        except ValueError as exc:  # not JSON: reported like Kafka's coordinator-record parsers do
            return f"Error at offset {entry.offset}, skipping. not JSON: {exc}", None
        return key, payload

    return parse


def _metadata_parser(entry: _Entry, batch_position: int) -> _Parsed:
    """ClusterMetadataLogMessageParser: no key; the record as JSON, or the reason it is not one."""
    if entry.value is None:
        return None, f"Error at {entry.offset}, skipping. the record has no value"
    try:
        return None, metadata_record_json(entry.value)
    except KafkaFormatError as exc:
        return None, f"Error at {entry.offset}, skipping. {_reason(exc)}"


def _located_reason(exc: KafkaFormatError, part: str) -> str:
    """``key byte 3: <reason>``: the error inside a record's key or value, its position relative to it."""
    return f"{part} byte {exc.position}: {_reason(exc)}" if exc.position is not None else f"{part}: {_reason(exc)}"


def _coordinator_parser(coordinator: Coordinator, shown: str) -> _Parser:
    """OffsetsMessageParser / TransactionLogMessageParser (CoordinatorRecordMessageParser): the key
    and value as JSON, ``<DELETE>`` for a tombstone; an unknown record type or a record that does
    not decode is reported in the key slot and skipped. Unlike Kafka (which stops the whole dump on
    a record without key), every failure names the file, the batch and the byte of the key or value."""

    def parse(entry: _Entry, batch_position: int) -> _Parsed:
        skipping = f"Error at offset {entry.offset}, skipping. {shown}: the batch at byte {batch_position}"
        if entry.key is None:
            return (f"{skipping}: the record has no key (expected an int16 record type and a {coordinator}"
                    " coordinator record key)"), None
        try:
            key = decode_coordinator_key(coordinator, entry.key)
        except UnknownCoordinatorRecordTypeError as exc:
            return f"Unknown record type {exc.record_type} at offset {entry.offset}, skipping.", None
        except KafkaFormatError as exc:
            return f"{skipping}, {_located_reason(exc, 'key')}", None
        if entry.value is None:
            return coordinator_key_json(key), "<DELETE>"
        try:
            value = decode_coordinator_value(coordinator, key.record_type, entry.value)
        except KafkaFormatError as exc:
            return f"{skipping}, {_located_reason(exc, 'value')}", None
        return coordinator_key_json(key), coordinator_value_json(value)

    return parse


_CONTROL_LABELS = {
    # DumpLogSegments.printControlRecord: the label before each KRaft control body's JSON
    ControlRecordType.LEADER_CHANGE: "LeaderChange:",
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeader",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooter",
    ControlRecordType.KRAFT_VERSION: "KRaftVersion",
    ControlRecordType.KRAFT_VOTERS: "KRaftVoters",
}


def _control(batch: RecordBatch, entry: _Entry, path: str) -> tuple[str, dict[str, Any]]:
    """The text after a control record's metadata, and the same as JSON fields."""
    try:
        cr = decode_control_record(entry.key, entry.value, strict=False)
    except KafkaFormatError as exc:
        raise KafkaFormatError(
            f"control record at offset {entry.offset} of the batch at base offset {batch.base_offset}: "
            f"{_reason(exc)}",
            path=path,
            position=batch.position,
        ) from None
    body = cr.body
    if isinstance(body, EndTransactionMarker):
        return (f" endTxnMarker: {body.control_type.name} coordinatorEpoch: {body.coordinator_epoch}",
                {"endTxnMarker": body.control_type.name, "coordinatorEpoch": body.coordinator_epoch})
    if isinstance(body, dict) and cr.type in _CONTROL_LABELS:
        schema = control_value_schema(cr.type)
        stated = body.get("Version")
        version = stated if isinstance(stated, int) and stated in schema.valid_versions else 0
        data = kafka_json(body, schema.struct, version)
        label = _CONTROL_LABELS[cr.type]
        return f" {label} {_jackson(data)}", {"controlType": label.rstrip(":"), "control": data}
    return (f" controlType: {cr.type.name}({cr.key.type_id})",
            {"controlType": cr.type.name, "controlTypeId": cr.key.type_id})


# --------------------------------------------------------------------------- the dump


@dataclass
class _Findings:
    """What Kafka collects over all files and prints on stderr at the end."""

    index_mismatches: dict[str, list[tuple[int, int]]]
    timestamp_mismatches: dict[str, list[tuple[int, int]]]
    out_of_order: dict[str, list[tuple[int, int]]]
    offsets_not_found: dict[str, list[tuple[int, int]]]
    non_consecutive: dict[str, list[tuple[int, int]]]


class LogDump:
    """Dump files as kafka-dump-log does. ``errors`` counts the files whose dump stopped on
    bad bytes or could not be read; ``invalid_batches`` the batches (or wrappers) whose stored
    CRC their bytes do not match, printed ``isvalid: false`` and dumped on, as Kafka does."""

    def __init__(self, options: DumpOptions | None = None) -> None:
        self.options = options or DumpOptions()
        self.errors = 0
        self.invalid_batches = 0
        self._findings = _Findings({}, {}, {}, {}, {})

    def dump(self, paths: Sequence[str | os.PathLike[str]]) -> Iterator[DumpLine]:
        """Every line for ``paths``, then the findings Kafka prints at the end."""
        for p in paths:
            shown = os.fspath(p)
            yield DumpLine(f"Dumping {shown}", {"entry": "file", "file": shown})
            try:
                yield from self._dump_file(Path(p), shown)
            except KafkaFormatError as exc:
                self.errors += 1
                located = exc.located(shown)
                yield DumpLine(f"error: {located}", {"entry": "error", "file": shown, **located.to_dict()}, err=True)
            except OSError as exc:
                self.errors += 1
                text = f"{shown}: cannot read: {exc.strerror or exc}"
                yield DumpLine(f"error: {text}", {"entry": "error", "file": shown, "kind": "io error",
                                                  "message": text}, err=True)
            except Exception as exc:
                self.errors += 1
                text = f"{shown}: unexpected {type(exc).__name__} while dumping: {exc}"
                yield DumpLine(f"error: {text}", {"entry": "error", "file": shown, "kind": "internal error",
                                                  "message": text}, err=True)
        yield from self._summary()

    # -- dispatch (DumpLogSegments.execute)

    def _dump_file(self, path: Path, shown: str) -> Iterator[DumpLine]:
        name = path.name
        suffix = name[name.rfind(".") :] if "." in name else ""
        if suffix in (names.LOG_FILE_SUFFIX, names.CHECKPOINT_FILE_SUFFIX):
            yield from self._dump_log(path, shown)
        elif suffix == names.INDEX_FILE_SUFFIX:
            yield from self._dump_index(path, shown)
        elif suffix == names.TIME_INDEX_FILE_SUFFIX:
            yield from self._dump_time_index(path, shown)
        elif suffix == names.PRODUCER_SNAPSHOT_FILE_SUFFIX:
            yield from self._dump_producer_snapshot(path, shown)
        elif suffix == names.TXN_INDEX_FILE_SUFFIX:
            yield from self._dump_txn_index(path, shown)
        else:
            yield DumpLine(f"Ignoring unknown file {shown}", {"entry": "ignored", "file": shown}, err=True)

    # -- .log and .checkpoint (dumpLog, printBatchLevel, printRecordMetadata)

    def _dump_log(self, path: Path, shown: str) -> Iterator[DumpLine]:
        o = self.options
        name = path.name
        checkpoint = name.endswith(names.CHECKPOINT_FILE_SUFFIX)
        if not checkpoint:
            try:
                start = names.offset_from_file_name(name)
            except InvalidFileNameError:
                yield DumpLine(f"{shown}: the file name does not start with an offset: no log starting offset",
                               None, err=True)
            else:
                yield DumpLine(f"Log starting offset: {start}",
                               {"entry": "logStartingOffset", "file": shown, "logStartingOffset": start})
        elif name == names.BOOTSTRAP_CHECKPOINT_FILE:
            yield DumpLine("KRaft bootstrap snapshot", {"entry": "bootstrapSnapshot", "file": shown})
        else:
            try:
                snap = names.parse_checkpoint_file_name(name)
            except InvalidFileNameError:
                yield DumpLine(f"{shown}: not a KRaft snapshot name (<end offset>-<epoch>.checkpoint)", None, err=True)
            else:
                yield DumpLine(f"Snapshot end offset: {snap.end_offset}, epoch: {snap.epoch}",
                               {"entry": "snapshot", "file": shown, "endOffset": snap.end_offset, "epoch": snap.epoch})
        parser, forced = self._record_parser(path, shown, checkpoint)
        deep = o.deep_iteration or o.print_data_log or forced or checkpoint
        print_data = o.print_data_log or forced or (parser is not None and deep)
        if parser is None:
            parser = _decoder_parser(o.key_decoder or PayloadDecoder.STRING, o.value_decoder or PayloadDecoder.STRING)
        records = FileRecords(path)
        abs_path = os.path.abspath(path)
        valid_bytes = 0
        last_offset: int | None = None
        for batch in records.batches(0, o.max_bytes):
            yield self._batch_line(batch, valid_bytes, shown)
            if deep:
                try:
                    entries = list(_entries(batch))
                except KafkaFormatError as exc:
                    raise exc.located(shown) from None
                for entry in entries:
                    if last_offset is not None and entry.offset != last_offset + 1:
                        self._findings.non_consecutive.setdefault(abs_path, []).append((last_offset, entry.offset))
                    last_offset = entry.offset
                    yield self._record_line(batch, entry, print_data, parser, shown)
            valid_bytes += batch.size_in_bytes
        trailing = records.size - valid_bytes
        if trailing > 0 and o.max_bytes is None:
            yield DumpLine(f"Found {trailing} invalid bytes at the end of {name}",
                           {"entry": "trailingBytes", "file": shown, "position": valid_bytes, "bytes": trailing})

    def _record_parser(self, path: Path, shown: str, checkpoint: bool) -> tuple[_Parser | None, bool]:
        """(the record decoder for ``path``, whether an option forced it); None: the key and value
        decoders. Kafka's precedence among the options: offsets, transaction log, cluster metadata.
        Without one, a key or value decoder wins; else KRaft files get the cluster metadata decoder
        and segments of a coordinator topic's partition directory their coordinator's."""
        o = self.options
        if o.offsets_decoder:
            return _coordinator_parser(Coordinator.GROUP, shown), True
        if o.transaction_log_decoder:
            return _coordinator_parser(Coordinator.TRANSACTION, shown), True
        if o.cluster_metadata_decoder:
            return _metadata_parser, True
        if o.key_decoder is not None or o.value_decoder is not None:
            return None, False
        parent = path.absolute().parent.name
        if checkpoint or parent == names.METADATA_PARTITION_DIR:
            return _metadata_parser, False
        try:
            coordinator = coordinator_for_topic(names.parse_partition_dir_name(parent).topic)
        except InvalidFileNameError:
            coordinator = None
        return (None if coordinator is None else _coordinator_parser(coordinator, shown)), False

    def _batch_line(self, b: Batch, position: int, shown: str) -> DumpLine:
        data: dict[str, Any] = {"entry": "batch", "file": shown}
        if isinstance(b, RecordBatch):
            # DefaultRecordBatch.lastSequence: -1 only for NO_SEQUENCE
            last_seq = NO_SEQUENCE if b.base_sequence == NO_SEQUENCE else increment_sequence(
                b.base_sequence, b.last_offset_delta)
            horizon = b.base_timestamp if b.has_delete_horizon else None
            head = (f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.records_count}"
                    f" baseSequence: {b.base_sequence} lastSequence: {last_seq} producerId: {b.producer_id}"
                    f" producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.partition_leader_epoch}"
                    f" isTransactional: {_jbool(b.is_transactional)} isControl: {_jbool(b.is_control)}"
                    f" deleteHorizonMs: {_optional_long(horizon)}")
            data.update(baseOffset=b.base_offset, lastOffset=b.last_offset, count=b.records_count,
                        baseSequence=b.base_sequence, lastSequence=last_seq, producerId=b.producer_id,
                        producerEpoch=b.producer_epoch, partitionLeaderEpoch=b.partition_leader_epoch,
                        isTransactional=b.is_transactional, isControl=b.is_control, deleteHorizonMs=horizon)
        else:
            head = f"offset: {b.last_offset}"
            data.update(offset=b.last_offset)
        ts_type = b.timestamp_type.label
        codec = b.compression.label
        valid = b.is_valid()
        self.invalid_batches += not valid
        tail = (f" position: {position} {ts_type}: {b.max_timestamp} size: {b.size_in_bytes} magic: {b.magic}"
                f" compresscodec: {codec} crc: {b.crc} isvalid: {_jbool(valid)}")
        data.update(position=position, timestampType=ts_type, maxTimestamp=b.max_timestamp, size=b.size_in_bytes,
                    magic=b.magic, compresscodec=codec, crc=b.crc, isvalid=valid)
        return DumpLine(head + tail, data)

    def _record_line(self, batch: Batch, entry: _Entry, print_data: bool, parser: _Parser, shown: str) -> DumpLine:
        o = self.options
        data: dict[str, Any] = {"entry": "record", "file": shown, "offset": entry.offset}
        text = ""
        if not o.skip_record_metadata:
            ts_type = batch.timestamp_type.label
            key_size = -1 if entry.key is None else len(entry.key)
            value_size = -1 if entry.value is None else len(entry.value)
            text = (f"{RECORD_INDENT} offset: {entry.offset} {ts_type}: {entry.timestamp}"
                    f" keySize: {key_size} valueSize: {value_size}")
            data.update(timestampType=ts_type, timestamp=entry.timestamp, keySize=key_size, valueSize=value_size)
            if isinstance(batch, RecordBatch):
                header_keys = [h.key for h in entry.headers]
                text += f" sequence: {entry.sequence} headerKeys: [{','.join(header_keys)}]"
                data.update(sequence=entry.sequence, headerKeys=header_keys)
            if entry.legacy_valid is not None:
                text += f" isValid: {_jbool(entry.legacy_valid)} crc: {entry.legacy_crc}"
                data.update(isValid=entry.legacy_valid, crc=entry.legacy_crc)
            if isinstance(batch, RecordBatch) and batch.is_control:
                more, fields = _control(batch, entry, shown)
                text += more
                data.update(fields)
        if print_data and not batch.is_control:
            key, payload = parser(entry, batch.position)
            prefix = f"{RECORD_INDENT} " if o.skip_record_metadata else " "
            if key is not None:
                text += f"{prefix}key: {key if isinstance(key, str) else _jackson(key)}"
                prefix = " "
                data["key"] = key
            if payload is not None:
                text += f"{prefix}payload: {payload if isinstance(payload, str) else _jackson(payload)}"
                data["payload"] = payload
        return DumpLine(text, data)

    # -- .index (dumpIndex)

    def _dump_index(self, path: Path, shown: str) -> Iterator[DumpLine]:
        o = self.options
        index = OffsetIndex.read(path, strict=False)  # stops at the zero-filled tail, as Kafka
        if len(index) == 0:
            yield DumpLine(f"{shown} is empty.", {"entry": "empty", "file": shown})
            return
        if o.index_sanity_check:
            index.sanity_check()
            yield DumpLine(f"{shown} passed sanity check.", {"entry": "sanityCheckPassed", "file": shown})
            return
        log = self._segment_log(path)
        if log is None:
            yield self._not_verified(path, shown)
        mismatches: list[tuple[int, int]] = []
        for e in index.entries:
            if log is not None:
                first = self._first_batch(log, e.position, e.position + o.max_message_size)
                found = -1 if first is None else first.last_offset
                if found != e.offset:
                    mismatches.append((e.offset, found))
            if not o.verify_index_only:
                yield DumpLine(f"offset: {e.offset} position: {e.position}",
                               {"entry": "offsetIndex", "file": shown, "offset": e.offset, "position": e.position})
        if mismatches:
            self._findings.index_mismatches.setdefault(os.path.abspath(path), []).extend(mismatches)

    # -- .timeindex (dumpTimeIndex)

    def _dump_time_index(self, path: Path, shown: str) -> Iterator[DumpLine]:
        o = self.options
        tindex = TimeIndex.read(path, strict=False)
        if o.index_sanity_check:
            tindex.sanity_check()
            yield DumpLine(f"{shown} passed sanity check.", {"entry": "sanityCheckPassed", "file": shown})
            return
        log = self._segment_log(path)
        if log is None and len(tindex):
            yield self._not_verified(path, shown)
        offsets = OffsetIndex(tindex.base_offset)
        index_path = path.with_name(path.name.split(".")[0] + names.INDEX_FILE_SUFFIX)
        if log is not None and index_path.exists():
            offsets = OffsetIndex.read(index_path, strict=False)
        key = os.path.abspath(path)
        prev = NO_TIMESTAMP
        for e in tindex.entries:
            if log is not None:
                batch = self._batch_with_offset(log, offsets.lookup(e.offset).position, e.offset)
                if batch is None or batch.last_offset != e.offset:
                    found = -1 if batch is None else batch.last_offset
                    self._findings.offsets_not_found.setdefault(key, []).append((e.offset, found))
                else:
                    try:
                        stamps = [r.timestamp for r in _entries(batch)]
                    except KafkaFormatError as exc:
                        raise exc.located(str(log.path)) from None
                    max_ts = max([NO_TIMESTAMP, *stamps])
                    if max_ts != e.timestamp:
                        self._findings.timestamp_mismatches.setdefault(key, []).append((e.timestamp, max_ts))
                    if prev >= e.timestamp:
                        self._findings.out_of_order.setdefault(key, []).append((e.timestamp, prev))
            if not o.verify_index_only:
                yield DumpLine(f"timestamp: {e.timestamp} offset: {e.offset}",
                               {"entry": "timeIndex", "file": shown, "timestamp": e.timestamp, "offset": e.offset})
            prev = e.timestamp

    @staticmethod
    def _segment_log(path: Path) -> FileRecords | None:
        log = path.with_name(path.name.split(".")[0] + names.LOG_FILE_SUFFIX)
        return FileRecords(log, chunk_size=_VERIFY_CHUNK) if log.is_file() else None

    @staticmethod
    def _not_verified(path: Path, shown: str) -> DumpLine:
        log = path.name.split(".")[0] + names.LOG_FILE_SUFFIX
        return DumpLine(f"{shown}: no {log} beside it: entries printed, not checked against the log",
                        {"entry": "notVerified", "file": shown, "log": log}, err=True)

    @staticmethod
    def _first_batch(log: FileRecords, start: int, end: int) -> Batch | None:
        batches = log.batches(start, end)
        try:
            return next(batches, None)
        finally:
            batches.close()

    @staticmethod
    def _batch_with_offset(log: FileRecords, start: int, offset: int) -> Batch | None:
        """The first batch from ``start`` whose last offset is at least ``offset``."""
        batches = log.batches(start)
        try:
            for b in batches:
                if b.last_offset >= offset:
                    return b
            return None
        finally:
            batches.close()

    # -- .snapshot (dumpProducerIdSnapshot) and .txnindex (dumpTxnIndex)

    @staticmethod
    def _dump_producer_snapshot(path: Path, shown: str) -> Iterator[DumpLine]:
        for e in ProducerSnapshot.read(path).entries:
            # ProducerStateManager.readSnapshot: currentTxnFirstOffset is an OptionalLong (>= 0 set),
            # batch metadata exists when lastOffset >= 0.
            txn_first = e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None
            text = (f"producerId: {e.producer_id} producerEpoch: {e.epoch} coordinatorEpoch: {e.coordinator_epoch}"
                    f" currentTxnFirstOffset: {_optional_long(txn_first)} lastTimestamp: {e.timestamp}")
            data: dict[str, Any] = {"entry": "producer", "file": shown, "producerId": e.producer_id,
                                    "producerEpoch": e.epoch, "coordinatorEpoch": e.coordinator_epoch,
                                    "currentTxnFirstOffset": txn_first, "lastTimestamp": e.timestamp}
            if e.last_offset >= 0:
                first_seq = _decrement_sequence(e.last_sequence, e.offset_delta)
                text += (f" firstSequence: {first_seq} lastSequence: {e.last_sequence} lastOffset: {e.last_offset}"
                         f" offsetDelta: {e.offset_delta} timestamp: {e.timestamp}")
                data.update(firstSequence=first_seq, lastSequence=e.last_sequence, lastOffset=e.last_offset,
                            offsetDelta=e.offset_delta, timestamp=e.timestamp)
            yield DumpLine(text, data)

    @staticmethod
    def _dump_txn_index(path: Path, shown: str) -> Iterator[DumpLine]:
        for t in TransactionIndex.read(path, strict=False).entries:  # a partial last entry is ignored, as Kafka
            yield DumpLine(
                f"version: 0 producerId: {t.producer_id} firstOffset: {t.first_offset} lastOffset: {t.last_offset}"
                f" lastStableOffset: {t.last_stable_offset}",
                {"entry": "abortedTxn", "file": shown, "version": 0, "producerId": t.producer_id,
                 "firstOffset": t.first_offset, "lastOffset": t.last_offset,
                 "lastStableOffset": t.last_stable_offset})

    # -- what Kafka prints on stderr after the last file

    def _summary(self) -> Iterator[DumpLine]:
        f = self._findings
        for file, pairs in f.index_mismatches.items():
            yield DumpLine(f"Mismatches in :{file}", None, err=True)
            for index_offset, log_offset in sorted(pairs, reverse=True):
                yield DumpLine(f"  Index offset: {index_offset}, log offset: {log_offset}",
                               {"entry": "indexMismatch", "file": file, "indexOffset": index_offset,
                                "logOffset": log_offset}, err=True)
        for file, pairs in f.timestamp_mismatches.items():
            yield DumpLine(f"Found timestamp mismatch in :{file}", None, err=True)
            for index_ts, log_ts in pairs:
                yield DumpLine(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}",
                               {"entry": "timestampMismatch", "file": file, "indexTimestamp": index_ts,
                                "logTimestamp": log_ts}, err=True)
        for file, pairs in f.out_of_order.items():
            yield DumpLine(f"Found out of order timestamp in :{file}", None, err=True)
            for index_ts, prev_ts in pairs:
                yield DumpLine(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}",
                               {"entry": "outOfOrderTimestamp", "file": file, "indexTimestamp": index_ts,
                                "previousTimestamp": prev_ts}, err=True)
        for file, pairs in f.offsets_not_found.items():
            # Kafka 4.3+ names the file (4.1's Scala tool said "... not found in the log.")
            yield DumpLine(f"The following indexed offsets are not found in :{file}", None, err=True)
            for index_offset, log_offset in pairs:
                yield DumpLine(f"Indexed offset: {index_offset}, found log offset: {log_offset}",
                               {"entry": "indexedOffsetNotFound", "file": file, "indexOffset": index_offset,
                                "logOffset": log_offset}, err=True)
        for file, pairs in f.non_consecutive.items():
            yield DumpLine(f"Non-consecutive offsets in {file}", None, err=True)
            for first, second in pairs:
                yield DumpLine(f"  {first} is followed by {second}",
                               {"entry": "nonConsecutiveOffsets", "file": file, "offset": first,
                                "nextOffset": second}, err=True)
