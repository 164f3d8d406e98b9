"""Producer state snapshot (``<20-digit offset>.snapshot``), docs/formats.md §5.

Byte layout (big-endian). Each offset is the previous one plus the previous field's length, as
ProducerStateManager.java derives VERSION_OFFSET, CRC_OFFSET and PRODUCER_ENTRIES_OFFSET::

    offset  size    field                                           offset name here
    0       2       version      int16   1, the only valid version  VERSION_OFFSET
    2       4       crc          uint32  CRC-32C of [6, end)        CRC_OFFSET
    6       4       entry count  int32   >= 0                       PRODUCER_ENTRIES_OFFSET
    10      46 x n  entries (HEADER_SIZE = 10, ENTRY_SIZE = 46):
        0   8   producer_id               int64                     ENTRY_PRODUCER_ID_OFFSET
        8   2   epoch                     int16                     ENTRY_EPOCH_OFFSET
        10  4   last_sequence             int32  -1 if none         ENTRY_LAST_SEQUENCE_OFFSET
        14  8   last_offset               int64  -1 if none         ENTRY_LAST_OFFSET_OFFSET
        22  4   offset_delta              int32  lastOffset -       ENTRY_OFFSET_DELTA_OFFSET
                                                 firstOffset of that batch
        26  8   timestamp                 int64                     ENTRY_TIMESTAMP_OFFSET
        34  4   coordinator_epoch         int32  -1 if none         ENTRY_COORDINATOR_EPOCH_OFFSET
        38  8   current_txn_first_offset  int64  -1 if no ongoing   ENTRY_CURRENT_TXN_FIRST_OFFSET_OFFSET
                                                 transaction
The lengths are the same names with ``_LENGTH`` (ENTRY_COUNT_LENGTH for the count).

The empty snapshot is exactly ``00 01 48 67 4B C7 00 00 00 00``. The file name's offset is
the producer-state end offset: the state after all records below it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

import crc32c

from migration.formats.errors import CorruptSnapshotError, InvalidFileNameError, TruncatedError
from migration.formats.fileio import BytesLike, StrPath, durable_replace, offset_from_path, read_bytes
from migration.formats.names import PRODUCER_SNAPSHOT_FILE_SUFFIX, TMP_FILE_SUFFIX

PRODUCER_SNAPSHOT_VERSION = 1
VERSION_OFFSET = 0
VERSION_LENGTH = 2
CRC_OFFSET = VERSION_OFFSET + VERSION_LENGTH
CRC_LENGTH = 4
PRODUCER_ENTRIES_OFFSET = CRC_OFFSET + CRC_LENGTH  # the CRC covers [6, end): the count and the entries
ENTRY_COUNT_LENGTH = 4
HEADER_SIZE = PRODUCER_ENTRIES_OFFSET + ENTRY_COUNT_LENGTH

# One producer entry, positions in the entry (the ProducerEntry fields of Kafka's ProducerSnapshot.json)
ENTRY_PRODUCER_ID_OFFSET = 0
ENTRY_PRODUCER_ID_LENGTH = 8
ENTRY_EPOCH_OFFSET = ENTRY_PRODUCER_ID_OFFSET + ENTRY_PRODUCER_ID_LENGTH
ENTRY_EPOCH_LENGTH = 2
ENTRY_LAST_SEQUENCE_OFFSET = ENTRY_EPOCH_OFFSET + ENTRY_EPOCH_LENGTH
ENTRY_LAST_SEQUENCE_LENGTH = 4
ENTRY_LAST_OFFSET_OFFSET = ENTRY_LAST_SEQUENCE_OFFSET + ENTRY_LAST_SEQUENCE_LENGTH
ENTRY_LAST_OFFSET_LENGTH = 8
ENTRY_OFFSET_DELTA_OFFSET = ENTRY_LAST_OFFSET_OFFSET + ENTRY_LAST_OFFSET_LENGTH
ENTRY_OFFSET_DELTA_LENGTH = 4
ENTRY_TIMESTAMP_OFFSET = ENTRY_OFFSET_DELTA_OFFSET + ENTRY_OFFSET_DELTA_LENGTH
ENTRY_TIMESTAMP_LENGTH = 8
ENTRY_COORDINATOR_EPOCH_OFFSET = ENTRY_TIMESTAMP_OFFSET + ENTRY_TIMESTAMP_LENGTH
ENTRY_COORDINATOR_EPOCH_LENGTH = 4
ENTRY_CURRENT_TXN_FIRST_OFFSET_OFFSET = ENTRY_COORDINATOR_EPOCH_OFFSET + ENTRY_COORDINATOR_EPOCH_LENGTH
ENTRY_CURRENT_TXN_FIRST_OFFSET_LENGTH = 8
ENTRY_SIZE = ENTRY_CURRENT_TXN_FIRST_OFFSET_OFFSET + ENTRY_CURRENT_TXN_FIRST_OFFSET_LENGTH

_HEADER = struct.Struct(">hIi")  # version, crc, entry count: HEADER_SIZE bytes
_ENTRY = struct.Struct(">qhiqiqiq")  # the fields above in order: ENTRY_SIZE bytes
_VERSION = struct.Struct(">h")
_CRC = struct.Struct(">I")


class TruncatedSnapshotError(TruncatedError, CorruptSnapshotError):
    """A snapshot that ends before its declared entries: truncated and corrupt at once."""

    kind = "truncated snapshot"


class ProducerSnapshotEntry(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int = -1
    last_offset: int = -1
    offset_delta: int = 0
    timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1


class ProducerSnapshot:
    """The producer entries of one snapshot file (order is hash-map order in Kafka: irrelevant)."""

    ENTRY_SIZE = ENTRY_SIZE

    def __init__(self, entries: Iterable[ProducerSnapshotEntry] = (), *, offset: int | None = None) -> None:
        self.entries: tuple[ProducerSnapshotEntry, ...] = tuple(entries)
        self.offset = offset  # from the file name, when known
        self.path: str | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerSnapshot):
            return NotImplemented
        return self.entries == other.entries

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"ProducerSnapshot(offset={self.offset}, entries={len(self.entries)})"

    @classmethod
    def from_bytes(
        cls, data: BytesLike, *, path: StrPath | None = None, offset: int | None = None
    ) -> ProducerSnapshot:
        """Parse and fully validate: version, entry count against the size, CRC-32C.

        Stricter than Kafka in one point: Kafka's schema parser ignores bytes after the last
        entry (the CRC still covers them); here they are an error.
        """
        view = memoryview(data).cast("B")
        size = len(view)
        if size < VERSION_OFFSET + VERSION_LENGTH:
            raise TruncatedSnapshotError(
                "snapshot ends before its version",
                path=path,
                position=size,
                expected=f"{VERSION_OFFSET + VERSION_LENGTH} bytes",
                found=size,
            )
        (version,) = _VERSION.unpack_from(view, VERSION_OFFSET)
        if version != PRODUCER_SNAPSHOT_VERSION:
            raise CorruptSnapshotError(
                "snapshot contained an unknown file version",
                path=path,
                position=VERSION_OFFSET,
                expected=PRODUCER_SNAPSHOT_VERSION,
                found=version,
            )
        if size < HEADER_SIZE:
            raise TruncatedSnapshotError(
                "snapshot ends inside its header",
                path=path,
                position=size,
                expected=f"{HEADER_SIZE} bytes",
                found=size,
            )
        _, stored_crc, count = _HEADER.unpack_from(view, VERSION_OFFSET)
        if count < 0:
            raise CorruptSnapshotError(
                "non-nullable producer entries serialized with a negative count",
                path=path,
                position=PRODUCER_ENTRIES_OFFSET,
                expected=">= 0",
                found=count,
            )
        expected_size = HEADER_SIZE + count * cls.ENTRY_SIZE
        if size < expected_size:
            whole = (size - HEADER_SIZE) // cls.ENTRY_SIZE
            raise TruncatedSnapshotError(
                f"snapshot declares {count} entries but holds only {whole} complete ones",
                path=path,
                position=HEADER_SIZE + whole * cls.ENTRY_SIZE,
                expected=f"{expected_size} bytes",
                found=size,
            )
        if size > expected_size:
            raise CorruptSnapshotError(
                f"{size - expected_size} bytes after the {count} declared entries",
                path=path,
                position=expected_size,
                expected=f"{expected_size} bytes",
                found=size,
            )
        computed_crc = crc32c.crc32c(view[PRODUCER_ENTRIES_OFFSET:])
        if computed_crc != stored_crc:
            raise CorruptSnapshotError(
                "snapshot is corrupt (CRC is no longer valid)",
                path=path,
                position=CRC_OFFSET,
                expected=f"0x{computed_crc:08x}",
                found=f"0x{stored_crc:08x}",
            )
        snapshot = cls(
            (ProducerSnapshotEntry(*e) for e in _ENTRY.iter_unpack(view[HEADER_SIZE:])), offset=offset
        )
        snapshot.path = None if path is None else str(path)
        return snapshot

    @classmethod
    def read(cls, path: StrPath) -> ProducerSnapshot:
        offset = offset_from_path(path, PRODUCER_SNAPSHOT_FILE_SUFFIX)
        return cls.from_bytes(read_bytes(path), path=path, offset=offset)

    def to_bytes(self) -> bytes:
        out = bytearray(HEADER_SIZE + len(self.entries) * self.ENTRY_SIZE)
        for i, entry in enumerate(self.entries):
            try:
                _ENTRY.pack_into(out, HEADER_SIZE + i * self.ENTRY_SIZE, *entry)
            except struct.error as e:
                raise ValueError(f"producer entry {i} does not fit the snapshot schema: {entry} ({e})") from None
        _HEADER.pack_into(out, VERSION_OFFSET, PRODUCER_SNAPSHOT_VERSION, 0, len(self.entries))
        crc = crc32c.crc32c(memoryview(out)[PRODUCER_ENTRIES_OFFSET:])
        _CRC.pack_into(out, CRC_OFFSET, crc)
        return bytes(out)

    def write(self, path: StrPath, *, tmp_suffix: str = TMP_FILE_SUFFIX) -> None:
        """Write crash-safely (Kafka itself writes in place; a torn snapshot would fail its CRC
        and be deleted, losing producer state, so we rename into place instead)."""
        named = offset_from_path(path, PRODUCER_SNAPSHOT_FILE_SUFFIX)
        if self.offset is not None and named != self.offset:
            raise InvalidFileNameError(
                "file name does not carry the snapshot offset", path=path, expected=self.offset, found=named
            )
        durable_replace(path, self.to_bytes(), tmp_suffix=tmp_suffix)


EMPTY_SNAPSHOT = ProducerSnapshot().to_bytes()
