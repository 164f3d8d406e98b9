"""Offline rebuild of Kafka's producer state, for segment-aligned producer snapshots.

Tiered storage uploads ``<N>.snapshot`` with every segment (N = next segment's base offset);
data written before Kafka 2.8 has none, and RemoteLogManager fails with a NullPointerException
(docs/formats.md §5.5, §5.6). An empty snapshot is only truthful when no idempotent or
transactional batch lies below N (docs/formats.md §10.3 item 9); otherwise the state must be what
``ProducerStateManager`` would hold at N after replaying the log from its start.

The model follows ``ProducerStateEntry`` / ``ProducerAppendInfo`` with the append origin a
broker uses while loading a log (REPLICATION): epoch regressions are tolerated, never fatal.
- data batch (producer id >= 0): a different epoch clears the batch metadata (an epoch bump
  resets); the batch becomes the latest one (last sequence, last offset, offset delta, max
  timestamp), the producer's timestamp becomes the batch's max timestamp; a transactional
  batch with no ongoing transaction starts one at its base offset;
- control batch with an ABORT/COMMIT marker: epoch as for data, coordinator epoch from the
  marker, the timestamp from the marker record (Kafka uses ``record.timestamp()``; for the
  single-record marker batches brokers write it equals the batch's max timestamp), and the
  ongoing transaction ends. An empty control batch (cleaned transaction) changes nothing.
Producers are never expired here: expiry depends on the broker's clock at load time, and
Kafka itself re-applies ``producer.id.expiration.ms`` when it loads a snapshot (§5.4).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from migration.formats import names
from migration.formats.control_records import ControlRecordType, EndTransactionMarker, read_control_key
from migration.formats.errors import CorruptSnapshotError, KafkaFormatError
from migration.formats.file_records import FileRecords
from migration.formats.fileio import durable_replace
from migration.formats.model import MAGIC_V2, NO_PRODUCER_EPOCH
from migration.formats.producer_snapshot import (
    EMPTY_SNAPSHOT,
    ENTRY_CURRENT_TXN_FIRST_OFFSET_OFFSET,
    ENTRY_LAST_OFFSET_OFFSET,
    HEADER_SIZE,
    ProducerSnapshot,
    ProducerSnapshotEntry,
)
from migration.formats.record_batch import RecordBatch
from migration.runtime.faults import fault_point

# The temporary name of a snapshot being written: ``N.snapshot.kmigrate.tmp`` (ours, by the marker).
SNAPSHOT_TMP_SUFFIX = ".kmigrate" + names.TMP_FILE_SUFFIX


class ProducerStateError(Exception):
    """The log holds producer batches Kafka itself would refuse to load."""


@dataclass(frozen=True)
class BatchMetadata:
    """The newest batch of a producer (the only one a snapshot persists)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int


@dataclass
class ProducerEntry:
    """One producer's state, as ``ProducerStateEntry``."""

    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    last_batch: BatchMetadata | None = None
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    def _maybe_update_epoch(self, epoch: int) -> None:
        # Any change of epoch (a bump, or a regression tolerated on replication) drops the
        # cached batches: sequence numbers restart with a new epoch.
        if epoch != self.epoch:
            self.last_batch = None
            self.epoch = epoch

    def to_snapshot_entry(self) -> ProducerSnapshotEntry:
        b = self.last_batch
        return ProducerSnapshotEntry(
            producer_id=self.producer_id,
            epoch=self.epoch,
            last_sequence=b.last_seq if b else -1,
            last_offset=b.last_offset if b else -1,
            offset_delta=b.offset_delta if b else 0,
            timestamp=self.last_timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=self.current_txn_first_offset,
        )


@dataclass
class ProducerState:
    """Producer state of one partition up to ``end_offset`` (exclusive)."""

    producers: dict[int, ProducerEntry] = field(default_factory=dict)
    end_offset: int = 0
    producer_batches: int = 0  # idempotent/transactional batches applied so far

    @classmethod
    def from_snapshot(cls, snapshot: ProducerSnapshot, offset: int) -> ProducerState:
        state = cls(end_offset=offset)
        for e in snapshot.entries:
            batch = (BatchMetadata(e.last_sequence, e.last_offset, e.offset_delta, e.timestamp)
                     if e.last_offset >= 0 else None)
            state.producers[e.producer_id] = ProducerEntry(
                e.producer_id, e.epoch, batch, e.timestamp, e.coordinator_epoch, e.current_txn_first_offset)
        return state

    @property
    def is_empty(self) -> bool:
        return not self.producers

    def apply(self, batch: RecordBatch) -> None:
        """Apply one v2 batch (batches must come in offset order)."""
        self.end_offset = max(self.end_offset, batch.next_offset)
        if batch.producer_id < 0:
            return
        self.producer_batches += 1
        entry = self.producers.get(batch.producer_id)
        if entry is None:
            entry = self.producers[batch.producer_id] = ProducerEntry(batch.producer_id)
        if batch.is_control:
            self._apply_marker(entry, batch)
            return
        entry._maybe_update_epoch(batch.producer_epoch)
        entry.last_batch = BatchMetadata(batch.last_sequence, batch.last_offset, batch.last_offset_delta,
                                         batch.max_timestamp)
        entry.last_timestamp = batch.max_timestamp
        if entry.current_txn_first_offset >= 0 and not batch.is_transactional:
            raise ProducerStateError(
                f"non-transactional batch at offset {batch.base_offset} from producer {batch.producer_id} while "
                f"its transaction from offset {entry.current_txn_first_offset} is open (Kafka: InvalidTxnState)")
        if entry.current_txn_first_offset < 0 and batch.is_transactional:
            entry.current_txn_first_offset = batch.base_offset

    @staticmethod
    def _apply_marker(entry: ProducerEntry, batch: RecordBatch) -> None:
        records = batch.records()
        if not records:
            return  # the whole transaction was cleaned away
        record = records[0]
        ctype = read_control_key(record.key).type
        if not ctype.is_transaction_marker:
            # Only transaction markers carry producer ids; Kafka would fail to parse others here.
            if ctype is ControlRecordType.UNKNOWN:
                return
            raise ProducerStateError(f"control batch at offset {batch.base_offset} with producer id "
                                     f"{batch.producer_id} holds a {ctype.name} record, not a transaction marker")
        marker = EndTransactionMarker.decode_value(ctype, record.value)
        entry._maybe_update_epoch(batch.producer_epoch)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = record.timestamp
        entry.current_txn_first_offset = -1

    def snapshot(self) -> ProducerSnapshot:
        # Kafka writes hash-map order; readers do not depend on it. Sort for reproducible bytes.
        return ProducerSnapshot((self.producers[p].to_snapshot_entry() for p in sorted(self.producers)),
                                offset=self.end_offset)


def iter_v2_batches(log_file: str | os.PathLike[str]) -> Iterator[RecordBatch]:
    """Every v2 batch of a segment, CRC-checked (a corrupt batch must not shape the state)."""
    fr = FileRecords(log_file)
    for b in fr.batches():
        if b.magic != MAGIC_V2:
            continue
        assert isinstance(b, RecordBatch)
        try:
            b.ensure_valid()
        except KafkaFormatError as exc:
            raise exc.located(log_file) from None
        yield b
    if fr.trailing_bytes:
        raise KafkaFormatError(f"{fr.trailing_bytes} trailing bytes after the last complete batch",
                               path=str(log_file), position=fr.valid_bytes)


class SnapshotAction(StrEnum):
    EXISTING = "existing"  # already there and valid: never overwritten
    EMPTY = "empty"  # written: no producer batch below the offset
    REBUILT = "rebuilt"  # written: producer state replayed from the log


@dataclass(frozen=True)
class SnapshotOutcome:
    offset: int
    action: SnapshotAction
    producers: int
    path: str
    replaced: KafkaFormatError | None = None  # the existing file was bad: why it was rebuilt


def snapshot_temporaries(partition_dir: str | os.PathLike[str]) -> list[Path]:
    """``N.snapshot.kmigrate.tmp`` files a killed write left (before or after its link to
    ``N.snapshot``). Kafka's loader removes only ``.deleted``, ``.cleaned`` and ``.swap`` files:
    these would stay for good; kmigrate's marker says they are ours to remove."""
    return sorted(Path(partition_dir).glob("*" + names.PRODUCER_SNAPSHOT_FILE_SUFFIX + SNAPSHOT_TMP_SUFFIX))


def snapshot_problem(path: Path) -> KafkaFormatError | None:
    """What is wrong with an existing ``N.snapshot``, or None: its name (an offset), version,
    size, CRC-32C (the strict reader), and offsets: every producer's last offset and open
    transaction lie below N, the offset the state is at (a snapshot beyond its own offset was
    not taken there)."""
    try:
        snap = ProducerSnapshot.read(path)
    except KafkaFormatError as exc:
        return exc
    offset = snap.offset
    assert offset is not None  # read() takes it from the name
    for i, e in enumerate(snap.entries):
        entry = HEADER_SIZE + i * ProducerSnapshot.ENTRY_SIZE
        for what, value, at in (("last offset", e.last_offset, ENTRY_LAST_OFFSET_OFFSET),
                                ("open transaction's first offset", e.current_txn_first_offset,
                                 ENTRY_CURRENT_TXN_FIRST_OFFSET_OFFSET)):
            if value >= offset:
                return CorruptSnapshotError(f"producer {e.producer_id}'s {what} lies at or beyond the snapshot's "
                                            "offset", path=path, position=entry + at, expected=f"< {offset}",
                                            found=value)
    return None


def ensure_segment_snapshots(
    partition_dir: str | os.PathLike[str],
    segment_bases: Iterable[int],
    *,
    dry_run: bool = False,
    before_replace: Callable[[Path], None] | None = None,
    before_create: Callable[[list[Path]], None] | None = None,
) -> list[SnapshotOutcome]:
    """Make sure a valid ``N.snapshot`` exists for every segment boundary N (each base offset
    but the first). ``segment_bases`` are all segment base offsets, the active segment's included.

    An existing snapshot is checked (:func:`snapshot_problem`); a bad one is rebuilt from the
    log like a missing one (``before_replace`` is called with its path first: the caller keeps
    the original), never kept. ``before_create`` is called once, before the first write, with
    the paths of the missing snapshots about to be created (the caller lists them durably, so
    that a rollback knows every file the run may have left). One streaming pass over the closed segments, in order; a
    missing snapshot is written via a temporary name + fsync + link (no-clobber), durably, a bad
    one replaced by a rename. The replay starts from an existing snapshot at the first segment's
    base offset if there is one (state of data already deleted by retention), else from an
    empty state; that one must be valid when anything is to be rebuilt (the state it holds is
    nowhere else), else :class:`ProducerStateError` names its file and byte.
    """
    p = Path(partition_dir)
    bases = sorted(segment_bases)
    boundaries = bases[1:]
    bad: dict[int, KafkaFormatError] = {}
    missing: list[int] = []
    for n in boundaries:
        path = p / names.producer_snapshot_file_name(n)
        if not path.exists():
            missing.append(n)
        elif (problem := snapshot_problem(path)) is not None:
            bad[n] = problem
            missing.append(n)
    out: list[SnapshotOutcome] = []
    if not missing:
        return [SnapshotOutcome(n, SnapshotAction.EXISTING, -1, str(p / names.producer_snapshot_file_name(n)))
                for n in boundaries]
    state = ProducerState(end_offset=bases[0] if bases else 0)
    seed = p / names.producer_snapshot_file_name(bases[0]) if bases else None
    if seed is not None and seed.exists():
        if (problem := snapshot_problem(seed)) is not None:
            raise ProducerStateError(f"{problem}; the producer state of the data below it is in no other file, so "
                                     "the snapshots at the segment boundaries cannot be rebuilt")
        state = ProducerState.from_snapshot(ProducerSnapshot.read(seed), bases[0])
    last_needed = missing[-1]
    if not dry_run and before_create is not None:
        before_create([p / names.producer_snapshot_file_name(n) for n in missing if n not in bad])
    for base, nxt in zip(bases, bases[1:], strict=False):
        if base >= last_needed:
            break
        for batch in iter_v2_batches(p / names.log_file_name(base)):
            if batch.base_offset >= nxt:
                raise ProducerStateError(f"batch at offset {batch.base_offset} lies beyond its segment's end {nxt}")
            state.apply(batch)
        state.end_offset = nxt
        target = p / names.producer_snapshot_file_name(nxt)
        if nxt not in bad and target.exists():
            out.append(SnapshotOutcome(nxt, SnapshotAction.EXISTING, -1, str(target)))
            continue
        snap = state.snapshot()
        action = SnapshotAction.EMPTY if state.is_empty else SnapshotAction.REBUILT
        if not dry_run:
            data = EMPTY_SNAPSHOT if state.is_empty else snap.to_bytes()
            if nxt in bad:
                if before_replace is not None:
                    before_replace(target)
                durable_replace(target, data, tmp_suffix=SNAPSHOT_TMP_SUFFIX, fault=_fault)
            else:
                # Never overwrite: another writer (a broker started by mistake) would win the race.
                _write_new(target, data)
        out.append(SnapshotOutcome(nxt, action, len(snap), str(target), bad.get(nxt)))
    for n in boundaries:
        if n > last_needed:
            out.append(SnapshotOutcome(n, SnapshotAction.EXISTING, -1, str(p / names.producer_snapshot_file_name(n))))
    return out


def _write_new(target: Path, data: bytes) -> None:
    """Temporary name, fsync, then a link to the final name that fails if it exists (a rename
    would silently replace a snapshot that appeared meanwhile), the temporary name unlinked,
    then the directory fsynced (``fileio.durable_replace``, no-clobber)."""
    durable_replace(target, data, tmp_suffix=SNAPSHOT_TMP_SUFFIX, no_clobber=True, fault=_fault)


def _fault(step: str) -> None:
    """Fault points of a snapshot write (crash tests): ``tier-snapshot-written`` (the temporary
    file complete and fsynced), ``tier-snapshot-renamed`` (under its name, before the directory
    fsync)."""
    fault_point(f"tier-snapshot-{step}")
