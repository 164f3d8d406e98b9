"""``partition.metadata``: the topic id of a partition directory, docs/formats.md §4.6.

Layout: UTF-8 text, exactly ``"version: 0\\ntopic_id: <topic id>"`` (no trailing newline), the
topic id being a Kafka Uuid string (22 characters of URL-safe base64).

Reader rules (``PartitionMetadataReadBuffer``): each of the first two lines is split on the
regex ``:\\s+`` and must give two parts (the key names are not checked); the version must be
an integer >= 0; the topic id must decode to 16 bytes and must not be the zero Uuid. Later
lines are ignored. Written via ``partition.metadata.tmp`` + fsync + rename.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from migration.formats.errors import CorruptCheckpointError
from migration.formats.fileio import BytesLike, StrPath, durable_replace, read_bytes
from migration.formats.java_numbers import parse_java_int
from migration.formats.kafka_uuid import ZERO_UUID, Uuid
from migration.formats.names import TMP_FILE_SUFFIX

PARTITION_METADATA_VERSION = 0

_SEPARATOR = re.compile(r":[ \t\n\x0b\f\r]+")  # Java's ":\s+"
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


@dataclass(frozen=True)
class PartitionMetadataFile:
    topic_id: Uuid
    version: int = PARTITION_METADATA_VERSION

    @classmethod
    def from_bytes(cls, data: BytesLike, *, path: StrPath | None = None) -> PartitionMetadataFile:
        raw = bytes(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptCheckpointError(
                "partition metadata is not UTF-8", path=path, position=e.start, found=raw[e.start : e.end]
            ) from None
        lines: list[tuple[int, str]] = []
        pos = 0
        for m in _LINE.finditer(text):
            if len(lines) == 2 or not m.group(0):
                break
            lines.append((pos, m.group(0).rstrip("\r\n")))
            pos += len(m.group(0).encode("utf-8"))
        if not lines:
            raise CorruptCheckpointError("partition metadata file is empty", path=path, position=0)

        version_parts = _SEPARATOR.split(lines[0][1])
        if len(version_parts) != 2:
            raise CorruptCheckpointError(
                "malformed line in partition metadata file at line 1",
                path=path, position=0, expected="version: <int>", found=repr(lines[0][1]),
            )
        version = parse_java_int(version_parts[1])
        if version is None or version < 0:
            raise CorruptCheckpointError(
                "unrecognized version of partition metadata file at line 1",
                path=path,
                position=len(lines[0][1].encode("utf-8")) - len(version_parts[1].encode("utf-8")),
                expected="an integer >= 0",
                found=version_parts[1],
            )
        if len(lines) < 2:
            raise CorruptCheckpointError(
                "partition metadata file has no topic id line",
                path=path, position=len(raw), expected="topic_id: <uuid>", found="end of file",
            )
        line_pos, line = lines[1]
        id_parts = _SEPARATOR.split(line)
        if len(id_parts) != 2:
            raise CorruptCheckpointError(
                "malformed line in partition metadata file at line 2",
                path=path, position=line_pos, expected="topic_id: <uuid>", found=repr(line),
            )
        id_pos = line_pos + len(line.encode("utf-8")) - len(id_parts[1].encode("utf-8"))
        try:
            topic_id = Uuid.from_string(id_parts[1])
        except ValueError as e:
            raise CorruptCheckpointError(
                f"invalid topic id in partition metadata file: {e}", path=path, position=id_pos,
                expected="22 characters of URL-safe base64", found=id_parts[1],
            ) from None
        if topic_id == ZERO_UUID:
            raise CorruptCheckpointError(
                "invalid topic id in partition metadata file", path=path, position=id_pos,
                expected="a non-zero Uuid", found=id_parts[1],
            )
        return cls(topic_id, version)

    @classmethod
    def read(cls, path: StrPath) -> PartitionMetadataFile:
        return cls.from_bytes(read_bytes(path), path=path)

    def to_text(self) -> str:
        # Kafka's writer always writes version 0, whatever version it read.
        return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {self.topic_id.to_string()}"

    def to_bytes(self) -> bytes:
        if self.topic_id == ZERO_UUID:
            raise ValueError("the zero Uuid is not a valid topic id")
        return self.to_text().encode("utf-8")

    def write(self, path: StrPath, *, tmp_suffix: str = TMP_FILE_SUFFIX) -> None:
        durable_replace(path, self.to_bytes(), tmp_suffix=tmp_suffix)
