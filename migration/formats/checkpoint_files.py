"""Text checkpoint files (Kafka's ``CheckpointFile``), docs/formats.md §4.4, §4.5, §5.5.

Layout (UTF-8, every line ends with ``\\n``)::

    <version>          int32, 0 for every file here
    <entry count>      int32
    <entry>            count lines, fields separated by whitespace

    recovery-point-offset-checkpoint, log-start-offset-checkpoint,
    replication-offset-checkpoint, cleaner-offset-checkpoint:  <topic> <partition> <offset>
    leader-epoch-checkpoint:                                   <epoch> <start offset>

Reader rules (``CheckpointFile.CheckpointReadBuffer``): an empty file has no entries; a file
with only a version line has none either; a different version, a line that does not parse or a
count that differs from the number of entry lines is an error. Writers write ``<file>.tmp``,
fsync it and rename it into place.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import ClassVar, Generic, NamedTuple, Self, TypeVar

from migration.formats.errors import CorruptCheckpointError
from migration.formats.fileio import BytesLike, StrPath, durable_replace, read_bytes
from migration.formats.java_numbers import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, parse_java_int
from migration.formats.names import TMP_FILE_SUFFIX

CHECKPOINT_VERSION = 0

# BufferedReader.readLine ends a line at \n, \r or \r\n.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
# Java's \s: the separators Kafka's formatters split on.
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
# Significant digits of the longest int64: a longer number is out of range whatever its
# digits (Python's int() refuses strings of more than 4300 digits; Java's parser takes any
# number of leading zeros).


class TopicPartitionOffset(NamedTuple):
    topic: str
    partition: int
    offset: int


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


E = TypeVar("E", TopicPartitionOffset, EpochEntry)


def _java_split(line: str) -> list[str]:
    """``Pattern.split`` with limit 0: a leading separator yields an empty first field,
    trailing empty fields are dropped."""
    parts = _JAVA_WHITESPACE.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


class _CheckpointFile(ABC, Generic[E]):
    """The generic reader/writer; subclasses give the entry format."""

    VERSION: ClassVar[int] = CHECKPOINT_VERSION
    entry_format: ClassVar[str]

    def __init__(self, entries: Iterable[E] = ()) -> None:
        self.entries: tuple[E, ...] = tuple(self._validated(e) for e in entries)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _CheckpointFile)
        return self.entries == other.entries

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.entries)!r})"

    # Subclass hooks.
    @classmethod
    @abstractmethod
    def _parse_entry(cls, fields: list[str]) -> E | None: ...

    @classmethod
    @abstractmethod
    def _format_entry(cls, entry: E) -> str: ...

    @classmethod
    @abstractmethod
    def _validated(cls, entry: E) -> E: ...

    @classmethod
    def from_bytes(cls, data: BytesLike, *, path: StrPath | None = None) -> Self:
        raw = bytes(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptCheckpointError(
                "checkpoint file is not UTF-8", path=path, position=e.start, found=raw[e.start : e.end]
            ) from None
        # (byte position of the line start, line text without its terminator)
        lines: list[tuple[int, str]] = []
        pos = 0
        for m in _LINE.finditer(text):
            chunk = m.group(0)
            if not chunk:
                continue
            lines.append((pos, chunk.rstrip("\r\n")))
            pos += len(chunk.encode("utf-8"))

        def bad_line(index: int, what: str, expected: object = None) -> CorruptCheckpointError:
            position, line = lines[index]
            return CorruptCheckpointError(
                f"{what} at line {index + 1}", path=path, position=position, expected=expected, found=repr(line)
            )

        if not lines:
            return cls()
        version = parse_java_int(lines[0][1], INT32_MIN, INT32_MAX)
        if version is None:
            raise bad_line(0, "malformed version line", expected="an integer")
        if version != cls.VERSION:
            raise CorruptCheckpointError(
                "unrecognized version of the checkpoint file at line 1",
                path=path,
                position=0,
                expected=cls.VERSION,
                found=version,
            )
        if len(lines) == 1:
            return cls()
        count = parse_java_int(lines[1][1], INT32_MIN, INT32_MAX)
        if count is None:
            raise bad_line(1, "malformed entry count line", expected="an integer")
        entries: list[E] = []
        for i in range(2, len(lines)):
            entry = cls._parse_entry(_java_split(lines[i][1]))
            if entry is None:
                raise bad_line(i, "malformed line in checkpoint file", expected=cls.entry_format)
            entries.append(entry)
        if len(entries) != count:
            raise CorruptCheckpointError(
                f"expected {count} entries in checkpoint file but found {len(entries)}",
                path=path,
                position=lines[1][0],
                expected=count,
                found=len(entries),
            )
        return cls(entries)

    @classmethod
    def read(cls, path: StrPath) -> Self:
        return cls.from_bytes(read_bytes(path), path=path)

    def to_text(self) -> str:
        body = "".join(self._format_entry(e) + "\n" for e in self.entries)
        return f"{self.VERSION}\n{len(self.entries)}\n{body}"

    def to_bytes(self) -> bytes:
        return self.to_text().encode("utf-8")

    def write(self, path: StrPath, *, tmp_suffix: str = TMP_FILE_SUFFIX) -> None:
        durable_replace(path, self.to_bytes(), tmp_suffix=tmp_suffix)


class OffsetCheckpointFile(_CheckpointFile[TopicPartitionOffset]):
    """recovery-point / log-start / replication / cleaner offset checkpoints."""

    entry_format = "<topic> <partition> <offset>"

    @classmethod
    def _parse_entry(cls, fields: list[str]) -> TopicPartitionOffset | None:
        if len(fields) != 3 or not fields[0]:
            return None
        partition = parse_java_int(fields[1], INT32_MIN, INT32_MAX)
        offset = parse_java_int(fields[2], INT64_MIN, INT64_MAX)
        if partition is None or offset is None:
            return None
        return TopicPartitionOffset(fields[0], partition, offset)

    @classmethod
    def _format_entry(cls, entry: TopicPartitionOffset) -> str:
        return f"{entry.topic} {entry.partition} {entry.offset}"

    @classmethod
    def _validated(cls, entry: TopicPartitionOffset) -> TopicPartitionOffset:
        entry = TopicPartitionOffset(*entry)
        if not entry.topic or _JAVA_WHITESPACE.search(entry.topic):
            raise ValueError(f"topic {entry.topic!r} cannot be written to a checkpoint line")
        if not INT32_MIN <= entry.partition <= INT32_MAX or not INT64_MIN <= entry.offset <= INT64_MAX:
            raise ValueError(f"{entry} does not fit int32 partition / int64 offset")
        return entry

    def offsets(self) -> dict[tuple[str, int], int]:
        """The map Kafka loads (a repeated partition: the last line wins)."""
        return {(e.topic, e.partition): e.offset for e in self.entries}


class LeaderEpochCheckpointFile(_CheckpointFile[EpochEntry]):
    """leader-epoch-checkpoint: (leader epoch, first offset of that epoch)."""

    entry_format = "<epoch> <start offset>"

    @classmethod
    def _parse_entry(cls, fields: list[str]) -> EpochEntry | None:
        if len(fields) != 2:
            return None
        epoch = parse_java_int(fields[0], INT32_MIN, INT32_MAX)
        start = parse_java_int(fields[1], INT64_MIN, INT64_MAX)
        if epoch is None or start is None:
            return None
        return EpochEntry(epoch, start)

    @classmethod
    def _format_entry(cls, entry: EpochEntry) -> str:
        return f"{entry.epoch} {entry.start_offset}"

    @classmethod
    def _validated(cls, entry: EpochEntry) -> EpochEntry:
        entry = EpochEntry(*entry)
        if not INT32_MIN <= entry.epoch <= INT32_MAX or not INT64_MIN <= entry.start_offset <= INT64_MAX:
            raise ValueError(f"{entry} does not fit int32 epoch / int64 offset")
        return entry

    def check_order(self) -> None:
        """Epochs and start offsets strictly increase, as Kafka's leader-epoch cache keeps them
        (Kafka's reader itself does not check this)."""
        for i in range(1, len(self.entries)):
            prev, cur = self.entries[i - 1], self.entries[i]
            if cur.epoch <= prev.epoch or cur.start_offset <= prev.start_offset:
                raise CorruptCheckpointError(
                    f"leader epoch entries out of order at line {i + 3}",
                    expected=f"epoch > {prev.epoch} and start offset > {prev.start_offset}",
                    found=f"{cur.epoch} {cur.start_offset}",
                )


def segment_leader_epochs(entries: Sequence[EpochEntry], start: int, next_offset: int) -> list[EpochEntry]:
    """Leader epochs of the segment [start, next_offset) as tiered storage records them (§5.5):
    entries starting at or before ``start`` collapse into (last such epoch, start), entries
    starting at or after ``next_offset`` are dropped (``truncateFromStart`` then
    ``truncateFromEnd`` of Kafka's leader-epoch cache)."""
    if next_offset <= start:
        raise ValueError(f"empty segment range [{start}, {next_offset})")
    # Kafka's cache is a map ordered by epoch; removals walk it from either end.
    ordered = sorted(entries, key=lambda e: e.epoch)
    head = 0
    while head < len(ordered) and ordered[head].start_offset <= start:
        head += 1
    tail = len(ordered)
    while tail > head and ordered[tail - 1].start_offset >= next_offset:
        tail -= 1
    result = [EpochEntry(ordered[head - 1].epoch, start)] if head else []
    result.extend(ordered[head:tail])
    return result


def to_checkpoint_text(entries: Iterable[EpochEntry]) -> str:
    """``0\\n<count>\\n<epoch> <offset>\\n...``: the leader-epoch checkpoint text, which is also
    the leader-epoch index tiered storage uploads."""
    return LeaderEpochCheckpointFile(entries).to_text()

