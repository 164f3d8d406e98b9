"""One finding type, one code vocabulary and one way to name a place in a file, for every layer
above the format layer: the validator (:mod:`migration.logdir.validate`,
:mod:`migration.logdir.kraft_validate`), the migrations and the run report
(:mod:`migration.audit.model` re-exports :class:`Finding`).

The format layer keeps its own :class:`~migration.formats.errors.KafkaFormatError` (it imports
nothing above it); :meth:`Finding.of_error` turns one into a finding. The codes and their
meanings are listed for operators in docs/operations.md ("Finding codes"); a test keeps that
table equal to :class:`FindingCode`.
"""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, field_validator

from migration.formats.errors import KafkaFormatError

Severity = Literal["error", "warning", "info"]


class FindingCode(StrEnum):
    """Stable machine-readable code of a finding (UPPER_SNAKE); each member carries its meaning."""

    meaning: str

    def __new__(cls, value: str, meaning: str) -> Self:
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    @classmethod
    def of(cls, value: str) -> FindingCode:
        """The member spelled ``value`` (ValueError if none): ``FindingCode(value)``, typed."""
        return cls(value)  # type: ignore[call-arg]  # Enum's lookup by value; mypy reads it as __new__(value, meaning)

    # --- segments (.log): docs/formats.md §1-§3, Kafka's LogSegment.java and LogLoader.java
    CORRUPT_BATCH = "CORRUPT_BATCH", (
        "a batch fails its CRC or framing, or a record inside it does not decode: Kafka's recovery truncates "
        "the segment there")
    TRAILING_BYTES = "TRAILING_BYTES", "bytes after the last complete batch: a truncated tail"
    OFFSET_ORDER = "OFFSET_ORDER", "a batch's offsets do not follow those of the batch before it"
    RECORD_OFFSET = "RECORD_OFFSET", "a v2 record's offset lies outside its batch's offset range"
    OFFSET_OVERFLOW = "OFFSET_OVERFLOW", (
        "an offset more than int32 above the segment's base offset (indexes hold relative offsets as int32)")
    OFFSET_BEYOND_SEGMENT = "OFFSET_BEYOND_SEGMENT", "an offset at or above the next segment's base offset"
    LEADER_EPOCH_MISMATCH = "LEADER_EPOCH_MISMATCH", (
        "a batch's partition leader epoch differs from the leader-epoch-checkpoint entry covering its offset")
    CORRUPT_FILE = "CORRUPT_FILE", "a single file given to the validator does not decode"
    # --- offset index (.index): OffsetIndex.java, docs/formats.md §4
    INDEX_CORRUPT = "INDEX_CORRUPT", "the offset index fails Kafka's sanity check (OffsetIndex.sanityCheck)"
    INDEX_POSITION = "INDEX_POSITION", "an offset index entry points inside a batch, not at its start"
    INDEX_OFFSET = "INDEX_OFFSET", "an offset index entry names an offset below the batch it points at"
    INDEX_MULTI_BATCH = "INDEX_MULTI_BATCH", (
        "an offset index entry names an offset other than its batch's last (a multi-batch append; lookups stay "
        "correct)")
    INDEX_BEYOND_LOG = "INDEX_BEYOND_LOG", "an offset index entry points past the last batch of the .log"
    INDEX_MISSING = "INDEX_MISSING", (
        "no .index beside a .log: Kafka recovers the segment at load (reads all of it, rebuilds both indexes)")
    INDEX_EMPTY = "INDEX_EMPTY", (
        "an offset index without entries beside a segment recovery would index: every lookup scans from byte 0")
    # --- time index (.timeindex): TimeIndex.java, docs/formats.md §4
    TIMEINDEX_CORRUPT = "TIMEINDEX_CORRUPT", "the time index fails Kafka's sanity check (TimeIndex.sanityCheck)"
    TIMEINDEX_AHEAD = "TIMEINDEX_AHEAD", (
        "a time index entry's timestamp is above the largest timestamp of the batches up to its offset")
    TIMEINDEX_ORDER = "TIMEINDEX_ORDER", "time index timestamps do not increase"
    TIMEINDEX_BEYOND_LOG = "TIMEINDEX_BEYOND_LOG", "a time index entry names an offset beyond the .log's last one"
    TIMEINDEX_MISSING = "TIMEINDEX_MISSING", (
        "no .timeindex: Kafka creates it empty, so with timestamps in the records time lookups miss the segment")
    TIMEINDEX_EMPTY = "TIMEINDEX_EMPTY", (
        "a time index without entries although the records carry timestamps: time-based retention uses the "
        ".log mtime")
    # --- other files of a partition directory: docs/formats.md §5, §8
    TXNINDEX_CORRUPT = "TXNINDEX_CORRUPT", "the transaction index (.txnindex) does not decode"
    SNAPSHOT_CORRUPT = "SNAPSHOT_CORRUPT", "a producer state snapshot (.snapshot) fails its CRC or layout"
    SNAPSHOT_STRAY = "SNAPSHOT_STRAY", (
        "a producer state snapshot whose offset is no segment base offset (Kafka deletes it)")
    PARTITION_METADATA_CORRUPT = "PARTITION_METADATA_CORRUPT", "partition.metadata does not parse"
    LEADER_EPOCH_CORRUPT = "LEADER_EPOCH_CORRUPT", (
        "leader-epoch-checkpoint does not parse or its entries are out of order")
    LEFTOVER_FILE = "LEFTOVER_FILE", (
        "a file left by an interrupted replace, delete, checkpoint or index rebuild (Kafka resolves it at startup)")
    ORPHAN_INDEX = "ORPHAN_INDEX", "an index file without its .log (Kafka deletes it)"
    # --- log dirs and paths
    BAD_DIR_NAME = "BAD_DIR_NAME", "a partition directory name Kafka does not parse as TOPIC-PARTITION"
    UNKNOWN_DIR = "UNKNOWN_DIR", "a directory in a log dir that is no topic-partition: Kafka refuses to start"
    META_PROPERTIES = "META_PROPERTIES", "meta.properties does not parse"
    OFFSET_CHECKPOINT_CORRUPT = "OFFSET_CHECKPOINT_CORRUPT", "an offset checkpoint file of the log dir does not parse"
    MISSING = "MISSING", "the path, or the metadata partition directory, does not exist"
    UNREADABLE = "UNREADABLE", "a file cannot be read"
    SKIPPED = "SKIPPED", "a file of a kind the validator does not know"
    # --- KRaft snapshots (<end offset>-<epoch>.checkpoint): KIP-630, docs/formats.md §6
    CHECKPOINT_NAME = "CHECKPOINT_NAME", "a .checkpoint name Kafka's SnapshotPath does not parse: never loaded"
    CHECKPOINT_PARTIAL = "CHECKPOINT_PARTIAL", "a .checkpoint.part file of an interrupted snapshot write"
    CHECKPOINT_DELETED = "CHECKPOINT_DELETED", "a .checkpoint.deleted file of an interrupted snapshot delete"
    CHECKPOINT_MAGIC = "CHECKPOINT_MAGIC", "a snapshot batch that is not a v2 batch"
    CHECKPOINT_TRUNCATED = "CHECKPOINT_TRUNCATED", "the snapshot ends inside a batch"
    CHECKPOINT_CORRUPT = "CHECKPOINT_CORRUPT", "a snapshot batch fails its CRC or does not decode"
    CHECKPOINT_EMPTY = "CHECKPOINT_EMPTY", "a snapshot without batches"
    CHECKPOINT_OFFSET = "CHECKPOINT_OFFSET", "snapshot offsets do not start at 0 or are not contiguous"
    CHECKPOINT_EPOCH = "CHECKPOINT_EPOCH", "a batch's partition leader epoch is not the snapshot's epoch"
    CHECKPOINT_BATCH_SIZE = "CHECKPOINT_BATCH_SIZE", "a snapshot batch above KRaft's 8 MiB maximum"
    CHECKPOINT_COMPRESSED = "CHECKPOINT_COMPRESSED", "a compressed snapshot batch (Kafka writes them uncompressed)"
    CHECKPOINT_PRODUCER = "CHECKPOINT_PRODUCER", "a snapshot batch with producer state or the transactional flag"
    CHECKPOINT_CONTROL_RECORD = "CHECKPOINT_CONTROL_RECORD", "a snapshot control record that does not decode"
    CHECKPOINT_HEADER = "CHECKPOINT_HEADER", "the snapshot does not start with exactly one SnapshotHeaderRecord"
    CHECKPOINT_FOOTER = "CHECKPOINT_FOOTER", "the snapshot's last record is not its only SnapshotFooterRecord"
    CHECKPOINT_AFTER_FOOTER = "CHECKPOINT_AFTER_FOOTER", "a batch after the SnapshotFooterRecord"
    CHECKPOINT_KRAFT_RECORD = "CHECKPOINT_KRAFT_RECORD", "a KRaftVersionRecord or VotersRecord outside the header batch"
    CHECKPOINT_LEADER_CHANGE = "CHECKPOINT_LEADER_CHANGE", "a LeaderChangeMessage in a snapshot (readers skip it)"
    CHECKPOINT_CONTROL_TYPE = "CHECKPOINT_CONTROL_TYPE", "a control record type a snapshot may not hold"
    CHECKPOINT_RECORD = "CHECKPOINT_RECORD", "a metadata record without a value, or one that does not decode"
    CHECKPOINT_API_KEY = "CHECKPOINT_API_KEY", "a metadata record of an unknown api key or version"
    SNAPSHOT_MISSING = "SNAPSHOT_MISSING", (
        "the metadata log starts above offset 0 and no snapshot reaches its start: Kafka refuses to start")
    SNAPSHOT_STALE = "SNAPSHOT_STALE", "a snapshot ending below the metadata log's start offset (Kafka deletes it)"
    # --- bootstrap.checkpoint (KIP-1170, docs/formats.md §7): the snapshot rules, plus its own
    BOOTSTRAP_MAGIC = "BOOTSTRAP_MAGIC", "CHECKPOINT_MAGIC in bootstrap.checkpoint"
    BOOTSTRAP_TRUNCATED = "BOOTSTRAP_TRUNCATED", "CHECKPOINT_TRUNCATED in bootstrap.checkpoint"
    BOOTSTRAP_CORRUPT = "BOOTSTRAP_CORRUPT", "CHECKPOINT_CORRUPT in bootstrap.checkpoint"
    BOOTSTRAP_EMPTY = "BOOTSTRAP_EMPTY", "CHECKPOINT_EMPTY in bootstrap.checkpoint"
    BOOTSTRAP_OFFSET = "BOOTSTRAP_OFFSET", "CHECKPOINT_OFFSET in bootstrap.checkpoint"
    BOOTSTRAP_EPOCH = "BOOTSTRAP_EPOCH", "a batch epoch other than 0 in bootstrap.checkpoint"
    BOOTSTRAP_BATCH_SIZE = "BOOTSTRAP_BATCH_SIZE", "CHECKPOINT_BATCH_SIZE in bootstrap.checkpoint"
    BOOTSTRAP_COMPRESSED = "BOOTSTRAP_COMPRESSED", "CHECKPOINT_COMPRESSED in bootstrap.checkpoint"
    BOOTSTRAP_PRODUCER = "BOOTSTRAP_PRODUCER", "CHECKPOINT_PRODUCER in bootstrap.checkpoint"
    BOOTSTRAP_CONTROL_RECORD = "BOOTSTRAP_CONTROL_RECORD", "CHECKPOINT_CONTROL_RECORD in bootstrap.checkpoint"
    BOOTSTRAP_HEADER = "BOOTSTRAP_HEADER", "CHECKPOINT_HEADER in bootstrap.checkpoint"
    BOOTSTRAP_FOOTER = "BOOTSTRAP_FOOTER", "CHECKPOINT_FOOTER in bootstrap.checkpoint"
    BOOTSTRAP_AFTER_FOOTER = "BOOTSTRAP_AFTER_FOOTER", "CHECKPOINT_AFTER_FOOTER in bootstrap.checkpoint"
    BOOTSTRAP_KRAFT_RECORD = "BOOTSTRAP_KRAFT_RECORD", (
        "a KRaftVersionRecord or VotersRecord in bootstrap.checkpoint: Kafka's bootstrap reader fails on it")
    BOOTSTRAP_LEADER_CHANGE = "BOOTSTRAP_LEADER_CHANGE", "CHECKPOINT_LEADER_CHANGE in bootstrap.checkpoint"
    BOOTSTRAP_CONTROL_TYPE = "BOOTSTRAP_CONTROL_TYPE", "CHECKPOINT_CONTROL_TYPE in bootstrap.checkpoint"
    BOOTSTRAP_RECORD = "BOOTSTRAP_RECORD", "CHECKPOINT_RECORD in bootstrap.checkpoint"
    BOOTSTRAP_API_KEY = "BOOTSTRAP_API_KEY", "CHECKPOINT_API_KEY in bootstrap.checkpoint"
    BOOTSTRAP_METADATA_VERSION = "BOOTSTRAP_METADATA_VERSION", (
        "bootstrap.checkpoint has no metadata.version, or one below 3.3-IV0 (refused) or 3.3-IV3 (KAFKA-19192)")
    # --- message-format upgrade and its rollback (docs/operations.md)
    EXCLUDED = "EXCLUDED", "a topic the operator excluded: the partition takes no part"
    CORRUPT_SEGMENT = "CORRUPT_SEGMENT", "the segment did not decode during the rewrite: left as it was"
    DIGEST_MISMATCH = "DIGEST_MISMATCH", "the rewritten segment's record digest differs from the original's"
    OVERSIZED_RECORD = "OVERSIZED_RECORD", "a converted record above max.message.bytes"
    BATCH_SPLIT = "BATCH_SPLIT", "converted batches above max.message.bytes were split"
    SEGMENT_SPLIT = "SEGMENT_SPLIT", "the rewrite split the segment to respect segment.bytes and int32 offsets"
    SEGMENT_CHANGED = "SEGMENT_CHANGED", "the segment changed since the run started or since its backup"
    SEGMENT_MISSING = "SEGMENT_MISSING", "the segment file is missing"
    INDEX_REBUILT = "INDEX_REBUILT", "offset and time index rebuilt with Kafka's recovery rules"
    BACKUP_INVALID = "BACKUP_INVALID", "the unit's backup is missing or does not match its manifest"
    ROLLED_BACK = "ROLLED_BACK", "the unit was rolled back: a new run upgrades it again"
    ROLLBACK_REPAIR = "ROLLBACK_REPAIR", "the rollback repaired something beyond restoring the originals"
    LEADER_EPOCH_ASSIGNED = "LEADER_EPOCH_ASSIGNED", (
        "leader-epoch-checkpoint given an entry at or below the log start offset")
    LEADER_EPOCH_FAILED = "LEADER_EPOCH_FAILED", "the leader epoch could not be assigned"
    LEADER_EPOCH_RESTORED = "LEADER_EPOCH_RESTORED", "leader-epoch-checkpoint restored from its backup"
    # --- tiered-storage readiness (docs/operations.md)
    COMPACTED = "COMPACTED", "a compacted topic: Kafka does not tier it"
    CORRUPT = "CORRUPT", "a partition with a corrupt partition.metadata or closed segment: not staged"
    TOPIC_ID_CONFLICT = "TOPIC_ID_CONFLICT", "partition.metadata and the metadata log name different topic ids"
    NO_TOPIC_ID = "NO_TOPIC_ID", "no topic id in partition.metadata nor in the metadata log"
    NOTHING_TO_STAGE = "NOTHING_TO_STAGE", "no closed segment: only the active segment"
    NO_LEADER_EPOCH = "NO_LEADER_EPOCH", "no leader epoch covers the segment's offsets"
    MISSING_INDEX = "MISSING_INDEX", "offset or time index missing after the rebuild"
    MISSING_SNAPSHOT = "MISSING_SNAPSHOT", "the producer snapshot at the segment's end offset is missing"
    SNAPSHOT_REBUILD_FAILED = "SNAPSHOT_REBUILD_FAILED", "producer snapshots could not be rebuilt from the segments"
    STAGING_FAILED = "STAGING_FAILED", "staging the segment into the object store failed"
    AFTER_FAILURE = "AFTER_FAILURE", "not staged: an earlier segment of the partition could not be"
    STALE_MULTIPART = "STALE_MULTIPART", "a stale multipart upload was aborted"
    ORPHAN_REMOVED = "ORPHAN_REMOVED", "an object without a complete segment was removed"
    NO_RESULT = "NO_RESULT", "the unit did not run"
    UNIT_CRASHED = "UNIT_CRASHED", "the unit raised an unexpected error"
    TIER_ROLLED_BACK = "TIER_ROLLED_BACK", (
        "a tier-prepare run's log-dir changes undone: replaced files and the leader-epoch-checkpoint restored, "
        "the files it created removed")
    TIER_OBJECTS_KEPT = "TIER_OBJECTS_KEPT", "a tier-prepare rollback leaves the objects already staged in the store"
    # --- why a unit was left as it was (every skipped or unchanged unit names one)
    ALREADY_IN_TARGET = "ALREADY_IN_TARGET", "the segment is in the target format already: left as it is"
    ALREADY_STAGED = "ALREADY_STAGED", "the segment's objects are in the store already (staged by an earlier run)"
    ALREADY_ROLLED_BACK = "ALREADY_ROLLED_BACK", "the unit was rolled back already: nothing left to restore"
    NOT_CHANGED = "NOT_CHANGED", "the run never replaced the unit: nothing to restore or drop"
    PRESTAGED = "PRESTAGED", (
        "a closed segment converted into the stage while the broker ran: the stop window swaps it in")
    PRESTAGE_KEPT = "PRESTAGE_KEPT", "staged by an earlier pass and unchanged since: kept as it is"
    PRESTAGE_VERIFIED = "PRESTAGE_VERIFIED", (
        "a closed segment in the target format already, checked as the stop window would (CRCs, offsets, indexes, "
        "leader epochs) with nothing found: the window leaves it as it is without reading it")
    CHANGED_WHILE_STAGING = "CHANGED_WHILE_STAGING", (
        "Kafka deleted, replaced or shortened the segment while it was staged: dropped from the stage (the stop "
        "window converts it if it is still there)")
    PREFIX_STAGED = "PREFIX_STAGED", (
        "the active segment's bytes so far converted into the stage while the broker ran: the stop window converts "
        "only what the broker appended after them")
    PREFIX_NOT_STAGED = "PREFIX_NOT_STAGED", (
        "the active segment's bytes so far were not staged (no whole batch yet, more than one output segment, or a "
        "batch the prestage could not read): the stop window converts it whole, and judges it")
    PREFIX_USED = "PREFIX_USED", (
        "the segment's first bytes came converted from the stage (they had not changed since: their checksum); the "
        "window converted the bytes after them, and checked every record of the whole")
    OUTSIDE_BUDGET = "OUTSIDE_BUDGET", "partitions left for a later run: outside this run's byte or segment budget"


def locate(file: str | os.PathLike[str] | None, position: int | None) -> str:
    """A place in a file as findings, reports and messages write it: ``FILE @ byte N``,
    ``FILE`` or ``byte N`` (empty when neither is known)."""
    name = "" if file is None else str(file)
    if position is None:
        return name
    return f"{name} @ byte {position}" if name else f"byte {position}"


class Finding(BaseModel):
    """An error, warning or note tied to a place on disk (a file, a byte in it)."""

    # A persisted format (run reports): unknown keys are errors, not silently dropped.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    file: str | None = Field(default=None, description="Path of the file concerned, when there is one")
    position: NonNegativeInt | None = Field(default=None, description="Byte position in the file")
    message: str
    code: FindingCode | None = Field(default=None, description="Stable machine-readable code "
                                     "(docs/operations.md, \"Finding codes\")")
    severity: Severity | None = Field(default=None, description="error, warning or info; null in a run report "
                                      "when the list holding the finding (errors, warnings) says it")
    partition: str | None = Field(default=None, description="The topic-partition concerned, e.g. orders-0")

    @field_validator("code", mode="before")
    @classmethod
    def _upper_snake(cls, value: Any) -> Any:
        # Reports written before the vocabulary was unified spell the validator's codes in
        # kebab case (corrupt-batch): the same code.
        if isinstance(value, str) and value.islower():
            return value.upper().replace("-", "_")
        return value

    @classmethod
    def of_error(cls, exc: KafkaFormatError, code: FindingCode | None = None, *,
                 file: str | os.PathLike[str] | None = None, severity: Severity | None = None,
                 partition: str | None = None) -> Finding:
        """The finding of a format error: its file (else ``file``), position and message, with
        what was expected and found."""
        detail = ""
        if exc.expected is not None or exc.found is not None:
            detail = f" (expected {exc.expected}, found {exc.found})"
        return cls(code=code, severity=severity, file=exc.path or (None if file is None else str(file)),
                   position=exc.position, message=exc.message + detail, partition=partition)

    @property
    def where(self) -> str:
        """:func:`locate` of the finding."""
        return locate(self.file, self.position)

    def __str__(self) -> str:
        head = "" if self.severity is None else f"{self.severity.upper():7} "
        head += "" if self.code is None else f"{self.code}: "
        where = self.where
        return head + (f"{where}: " if where else "") + self.message
