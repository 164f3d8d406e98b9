"""``.kafka_cleanshutdown``: the clean-shutdown marker of a log dir, docs/formats.md §4.8.

Layout: UTF-8 JSON object ``{"version":0,"brokerEpoch":<int64>}`` (Jackson field order, no
spaces, no newline). Brokers before KIP-966 wrote an empty file. Kafka treats the file's
existence as "clean shutdown" and reads the epoch leniently (any failure: no epoch); this
reader reports malformed content so a migration can flag it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from migration.formats.errors import CorruptCheckpointError
from migration.formats.fileio import BytesLike, StrPath, durable_replace, read_bytes
from migration.formats.names import TMP_FILE_SUFFIX

CLEAN_SHUTDOWN_VERSION = 0
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


@dataclass(frozen=True)
class CleanShutdownFile:
    broker_epoch: int | None  # None: legacy empty marker or a null/missing brokerEpoch
    version: int = CLEAN_SHUTDOWN_VERSION

    @classmethod
    def from_bytes(cls, data: BytesLike, *, path: StrPath | None = None) -> CleanShutdownFile:
        raw = bytes(data)
        if not raw.strip():
            return cls(None, CLEAN_SHUTDOWN_VERSION)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptCheckpointError(
                "clean shutdown file is not UTF-8", path=path, position=e.start
            ) from None
        try:
            content = json.loads(text)
        except json.JSONDecodeError as e:
            raise CorruptCheckpointError(
                f"clean shutdown file is not JSON: {e.msg}",
                path=path,
                position=len(text[: e.pos].encode("utf-8")),
            ) from None
        except RecursionError:
            raise CorruptCheckpointError(
                "clean shutdown file nests JSON deeper than the reader's stack", path=path, position=0
            ) from None
        except ValueError as e:  # a number of more than 4300 digits: no int32 or int64 has them
            raise CorruptCheckpointError(
                f"clean shutdown file holds an unreadable number: {e}", path=path, position=0
            ) from None
        if not isinstance(content, dict):
            raise CorruptCheckpointError(
                "clean shutdown file is not a JSON object", path=path, position=0, found=type(content).__name__
            )
        # Unknown fields are ignored, like Jackson's @JsonIgnoreProperties(ignoreUnknown = true).
        version = content.get("version", CLEAN_SHUTDOWN_VERSION)
        epoch = content.get("brokerEpoch")
        if isinstance(version, bool) or not isinstance(version, int) or not INT32_MIN <= version <= INT32_MAX:
            raise CorruptCheckpointError(
                "clean shutdown version is not an int32", path=path, position=0, found=version
            )
        if epoch is not None and (
            isinstance(epoch, bool) or not isinstance(epoch, int) or not INT64_MIN <= epoch <= INT64_MAX
        ):
            raise CorruptCheckpointError(
                "brokerEpoch is not an int64", path=path, position=0, found=epoch
            )
        return cls(epoch, version)

    @classmethod
    def read(cls, path: StrPath) -> CleanShutdownFile:
        return cls.from_bytes(read_bytes(path), path=path)

    def to_bytes(self) -> bytes:
        if self.broker_epoch is not None and not INT64_MIN <= self.broker_epoch <= INT64_MAX:
            raise ValueError(f"broker epoch {self.broker_epoch} is not an int64")
        return json.dumps(
            {"version": self.version, "brokerEpoch": self.broker_epoch}, separators=(",", ":")
        ).encode("utf-8")

    def write(self, path: StrPath, *, tmp_suffix: str = TMP_FILE_SUFFIX) -> None:
        """Write crash-safely (Kafka writes in place; a rename never leaves a torn marker)."""
        durable_replace(path, self.to_bytes(), tmp_suffix=tmp_suffix)
