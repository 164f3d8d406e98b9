"""``meta.properties``: the identity of a log dir, docs/formats.md §4.7.

Layout: a ``java.util.Properties`` file as ``Properties.store(writer, "")`` writes it::

    #                                   empty comment
    #Sun Nov 22 02:31:19 UTC 2026       java.util.Date.toString() at write time
    key=value                           one line per property, Properties escaping

    key           version 0 (ZooKeeper)        version 1 (KRaft)
    version       0 (assumed when absent)      1
    broker.id     int32, optional              -
    node.id       -                            int32, required
    cluster.id    optional                     required
    directory.id  Kafka Uuid, optional         Kafka Uuid, optional

Kafka reads the file with ``Properties.load(InputStream)``, i.e. ISO-8859-1 with the Java
properties grammar (comments, ``=``/``:``/whitespace separators, backslash escapes and line
continuations), which :func:`load_properties` implements.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from migration.formats.errors import CorruptCheckpointError
from migration.formats.fileio import BytesLike, StrPath, durable_replace, read_bytes
from migration.formats.java_numbers import INT32_MAX, INT32_MIN, parse_java_int
from migration.formats.kafka_uuid import Uuid
from migration.formats.names import TMP_FILE_SUFFIX

VERSION_PROP = "version"
BROKER_ID_PROP = "broker.id"
NODE_ID_PROP = "node.id"
CLUSTER_ID_PROP = "cluster.id"
DIRECTORY_ID_PROP = "directory.id"

META_PROPERTIES_V0 = 0
META_PROPERTIES_V1 = 1

_WHITESPACE = " \t\f"  # what the Java LineReader skips
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class Property(NamedTuple):
    key: str
    value: str
    position: int  # byte position of the logical line in the file


# -- java.util.Properties ---------------------------------------------------------------------


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Java's ``Properties.LineReader``: (start position, logical line) pairs with comments and
    blank lines skipped and continuation lines joined (the ``\\`` and line break removed, the
    next line's leading whitespace skipped). ISO-8859-1 makes char and byte positions equal."""
    n = len(text)
    i = 0
    while i < n:
        # Skip leading whitespace and blank lines before a logical line.
        while i < n and (text[i] in _WHITESPACE or text[i] in "\r\n"):
            i += 1
        if i >= n:
            return
        start = i
        if text[i] in "#!":
            # A comment runs to the end of its natural line and cannot be continued.
            while i < n and text[i] not in "\r\n":
                i += 1
            continue
        parts: list[str] = []
        while True:
            j = i
            while j < n and text[j] not in "\r\n":
                j += 1
            segment = text[i:j]
            backslashes = len(segment) - len(segment.rstrip("\\"))
            if backslashes % 2 == 0:
                parts.append(segment)
                i = j
                break
            parts.append(segment[:-1])
            # Consume the line break (\r\n counts as one) and the next line's leading blanks.
            if j < n and text[j] == "\r":
                j += 1
            if j < n and text[j] == "\n":
                j += 1
            while j < n and text[j] in _WHITESPACE:
                j += 1
            i = j
            if i >= n:
                break
        yield start, "".join(parts)


def _unescape(s: str, position: int) -> str:
    """Java's ``loadConvert``: ``\\uXXXX``, ``\\t \\n \\r \\f``, any other ``\\c`` is ``c``."""
    if "\\" not in s:
        return s
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:
            break  # a lone trailing backslash is dropped
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i : i + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise CorruptCheckpointError(
                    "malformed \\uxxxx encoding", position=position, expected="4 hex digits", found=digits
                )
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append({"t": "\t", "r": "\r", "n": "\n", "f": "\f"}.get(c, c))
    # Java strings are UTF-16: join escaped surrogate pairs into one code point.
    return "".join(out).encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")


def parse_properties(data: BytesLike, *, path: StrPath | None = None) -> list[Property]:
    """Every key/value pair in file order (``Properties.load``; a repeated key: last wins)."""
    text = bytes(data).decode("latin-1")
    props: list[Property] = []
    for start, line in _logical_lines(text):
        limit = len(line)
        key_len = 0
        value_start = limit
        has_sep = False
        preceding_backslash = False
        while key_len < limit:
            c = line[key_len]
            if c in "=:" and not preceding_backslash:
                value_start = key_len + 1
                has_sep = True
                break
            if c in _WHITESPACE and not preceding_backslash:
                value_start = key_len + 1
                break
            preceding_backslash = (not preceding_backslash) if c == "\\" else False
            key_len += 1
        while value_start < limit:
            c = line[value_start]
            if c not in _WHITESPACE:
                if not has_sep and c in "=:":
                    has_sep = True
                else:
                    break
            value_start += 1
        try:
            key = _unescape(line[:key_len], start)
            value = _unescape(line[value_start:], start)
        except CorruptCheckpointError as e:
            raise e.located(path) from None
        props.append(Property(key, value, start))
    return props


def load_properties(data: BytesLike, *, path: StrPath | None = None) -> dict[str, str]:
    return {p.key: p.value for p in parse_properties(data, path=path)}


def _escape(s: str, *, escape_space: bool) -> str:
    """Java's ``saveConvert`` with Unicode escaping (non-ASCII as ``\\uXXXX``: pure ASCII output
    reads back identically with Kafka's ISO-8859-1 loader)."""
    out: list[str] = []
    for i, c in enumerate(s):
        if c == " ":
            out.append("\\ " if i == 0 or escape_space else " ")
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif c in "=:#!\\":
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.extend(f"\\u{unit:04X}" for unit in _utf16_units(c))
        else:
            out.append(c)
    return "".join(out)


def _utf16_units(s: str) -> list[int]:
    """The UTF-16 code units of ``s``: Java's ``char``s."""
    raw = s.encode("utf-16-be")
    return [int.from_bytes(raw[k : k + 2], "big") for k in range(0, len(raw), 2)]


def _java_string_hash(s: str) -> int:
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def _jdk17_store_order(keys: Iterable[str]) -> list[str]:
    """The order ``Properties.store`` writes keys up to JDK 17: iteration order of its
    ``ConcurrentHashMap`` (16 buckets for a handful of keys; insertion order within a bucket).
    JDK 18+ sorts by key instead."""
    keys = list(keys)
    if len(keys) > 12:  # the table would have resized; fall back to a stable order
        return sorted(keys)

    def bucket(k: str) -> int:
        h = _java_string_hash(k)
        return ((h ^ (h >> 16)) & 0x7FFFFFFF) & 15

    return sorted(keys, key=bucket)  # sorted() is stable: insertion order within a bucket


def java_date(now: datetime) -> str:
    """``java.util.Date.toString()`` in UTC: ``EEE MMM dd HH:mm:ss zzz yyyy``."""
    t = now.astimezone(UTC)
    return f"{_DAYS[t.weekday()]} {_MONTHS[t.month - 1]} {t.day:02d} {t:%H:%M:%S} UTC {t.year}"


def store_properties(
    props: Mapping[str, str], *, comment: str = "", now: datetime | None = None, sort_keys: bool = False
) -> bytes:
    """``Properties.store(writer, comment)``: ``#comment``, ``#<date>``, then ``key=value`` lines
    in JDK 17 hash order (or sorted, as JDK 18+ writes them)."""
    if any(not 0x20 <= ord(c) <= 0x7E for c in comment):
        raise ValueError("the comment must be one line of printable ASCII")
    lines = ["#" + comment, "#" + java_date(now or datetime.now(UTC))]
    keys = sorted(props) if sort_keys else _jdk17_store_order(props)
    for k in keys:
        lines.append(f"{_escape(k, escape_space=True)}={_escape(props[k], escape_space=False)}")
    return "".join(line + "\n" for line in lines).encode("ascii")


# -- MetaProperties ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MetaProperties:
    """Kafka's ``MetaProperties``: version 0 carries an optional broker.id, version 1 a required
    node.id and cluster.id."""

    version: int
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: Uuid | None = None

    def __post_init__(self) -> None:
        if self.version not in (META_PROPERTIES_V0, META_PROPERTIES_V1):
            raise ValueError(f"unknown meta.properties version number {self.version}")
        if self.version == META_PROPERTIES_V1 and (self.cluster_id is None or self.node_id is None):
            raise ValueError("version 1 meta.properties needs cluster.id and node.id")
        if self.node_id is not None and not INT32_MIN <= self.node_id <= INT32_MAX:
            raise ValueError(f"node id {self.node_id} is not an int32")

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], *, path: StrPath | None = None, positions: Mapping[str, int] | None = None
    ) -> MetaProperties:
        """``MetaProperties.Builder(Properties).build()``."""
        where = positions or {}

        def fail(message: str, key: str | None, expected: object = None, found: object = None) -> None:
            raise CorruptCheckpointError(
                message, path=path, position=where.get(key) if key else None, expected=expected, found=found
            )

        def required_int(key: str) -> int:
            text = props.get(key)
            if text is None:
                fail(f"failed to find required property {key}", None)
                raise AssertionError  # unreachable: fail raises
            value = parse_java_int(text)
            if value is None:
                fail(f"unable to read {key} as a base-10 number", key, expected="an int32", found=text)
                raise AssertionError  # unreachable: fail raises
            return value

        version_text = props.get(VERSION_PROP, str(META_PROPERTIES_V0)).strip()
        parsed_version = parse_java_int(version_text)
        if parsed_version is None:
            fail("invalid meta.properties version string", VERSION_PROP, expected="0 or 1", found=version_text)
            raise AssertionError  # unreachable: fail raises
        version = parsed_version
        if version not in (META_PROPERTIES_V0, META_PROPERTIES_V1):
            fail("unknown meta.properties version number", VERSION_PROP, expected="0 or 1", found=version)
        node_id: int | None = None
        if version == META_PROPERTIES_V0:
            if BROKER_ID_PROP in props:
                node_id = required_int(BROKER_ID_PROP)
        else:
            node_id = required_int(NODE_ID_PROP)
        cluster_id = props.get(CLUSTER_ID_PROP)
        directory_id: Uuid | None = None
        if DIRECTORY_ID_PROP in props:
            try:
                directory_id = Uuid.from_string(props[DIRECTORY_ID_PROP])
            except ValueError as e:
                fail(f"invalid directory.id: {e}", DIRECTORY_ID_PROP, found=props[DIRECTORY_ID_PROP])
        if version == META_PROPERTIES_V1 and cluster_id is None:
            fail("cluster.id was not found", None, expected=CLUSTER_ID_PROP)
        return cls(version, cluster_id, node_id, directory_id)

    @classmethod
    def from_bytes(cls, data: BytesLike, *, path: StrPath | None = None) -> MetaProperties:
        parsed = parse_properties(data, path=path)
        props = {p.key: p.value for p in parsed}
        positions = {p.key: p.position for p in parsed}
        return cls.from_properties(props, path=path, positions=positions)

    @classmethod
    def read(cls, path: StrPath) -> MetaProperties:
        return cls.from_bytes(read_bytes(path), path=path)

    def to_properties(self) -> dict[str, str]:
        """``MetaProperties.toProperties``, in Kafka's insertion order."""
        props = {VERSION_PROP: str(self.version)}
        if self.cluster_id is not None:
            props[CLUSTER_ID_PROP] = self.cluster_id
        if self.version == META_PROPERTIES_V0:
            if self.node_id is not None:
                props[BROKER_ID_PROP] = str(self.node_id)
        else:
            props[NODE_ID_PROP] = str(self.node_id)
        if self.directory_id is not None:
            props[DIRECTORY_ID_PROP] = self.directory_id.to_string()
        return props

    def to_bytes(self, *, now: datetime | None = None, sort_keys: bool = False) -> bytes:
        return store_properties(self.to_properties(), now=now, sort_keys=sort_keys)

    def write(
        self, path: StrPath, *, now: datetime | None = None, sort_keys: bool = False, tmp_suffix: str = TMP_FILE_SUFFIX
    ) -> None:
        durable_replace(path, self.to_bytes(now=now, sort_keys=sort_keys), tmp_suffix=tmp_suffix)
