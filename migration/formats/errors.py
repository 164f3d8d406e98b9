"""Typed errors of the format layer.

Every error names the file (when known), the byte position and what was expected, so an
operator can find the damage with a hex editor. Codecs that work on in-memory buffers raise
with positions relative to that buffer; the file-level reader relocates them with
:meth:`KafkaFormatError.located` so the message always carries the absolute file position.
"""

from __future__ import annotations

import copy
from os import PathLike


class KafkaFormatError(Exception):
    """Base class: bad bytes in a Kafka file."""

    kind = "format error"

    def __init__(
        self,
        message: str,
        *,
        path: str | PathLike[str] | None = None,
        position: int | None = None,
        expected: object = None,
        found: object = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = None if path is None else str(path)
        self.position = position
        self.expected = expected
        self.found = found

    def located(self, path: str | PathLike[str] | None, base_position: int = 0) -> KafkaFormatError:
        """A copy that names ``path`` and shifts the position by ``base_position``."""
        err = copy.copy(self)
        if path is not None and err.path is None:
            err.path = str(path)
        if err.position is not None:
            err.position += base_position
        elif base_position:
            err.position = base_position
        err.args = (str(err),)
        return err

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path)
        if self.position is not None:
            where.append(f"byte {self.position}")
        text = f"{': '.join(where)}: {self.message}" if where else self.message
        if self.expected is not None or self.found is not None:
            parts = []
            if self.expected is not None:
                parts.append(f"expected {self.expected}")
            if self.found is not None:
                parts.append(f"found {self.found}")
            text += f" ({', '.join(parts)})"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "path": self.path,
            "position": self.position,
            "message": self.message,
            "expected": None if self.expected is None else str(self.expected),
            "found": None if self.found is None else str(self.found),
        }


class CorruptRecordError(KafkaFormatError):
    """A batch, message or record whose structure is invalid."""

    kind = "corrupt record"


class InvalidCrcError(CorruptRecordError):
    """A stored checksum that does not match the bytes it covers."""

    kind = "bad crc"


class TruncatedError(KafkaFormatError):
    """The data ends before a declared structure does (a truncated tail)."""

    kind = "truncated"


class UnsupportedCodecError(KafkaFormatError):
    """A compression codec id that is unknown or not allowed for the magic."""

    kind = "unsupported codec"


class InvalidFileNameError(KafkaFormatError):
    """A file or directory name that does not follow Kafka's naming rules."""

    kind = "bad file name"


class CorruptIndexError(KafkaFormatError):
    """An offset, time or transaction index that fails Kafka's sanity rules."""

    kind = "corrupt index"


class CorruptSnapshotError(KafkaFormatError):
    """A producer state snapshot that Kafka would reject."""

    kind = "corrupt snapshot"


class CorruptCheckpointError(KafkaFormatError):
    """A text checkpoint or properties file that Kafka would fail to parse,
    or a KRaft checkpoint whose batch sequence is invalid."""

    kind = "corrupt checkpoint"


class SchemaError(KafkaFormatError):
    """A message that does not match its schema (unknown api key, version, field)."""

    kind = "schema error"
