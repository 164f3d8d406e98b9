"""File-name rules of a Kafka log directory, as named constants and parsers.

Facts from Kafka's LogFileUtils, UnifiedLog, LocalLog and SnapshotPath (see
docs/formats.md §3.1, §4, §6.1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from migration.formats.errors import InvalidFileNameError

# Segment files and their companions, named by the 20-digit base offset.
LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
SEGMENT_FILE_SUFFIXES = (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)

# Suffixes appended after a normal name during replacement, deletion and checkpointing.
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
TMP_FILE_SUFFIX = ".tmp"
LEFTOVER_SUFFIXES = (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX, TMP_FILE_SUFFIX)

# KRaft snapshots (KIP-630).
CHECKPOINT_FILE_SUFFIX = ".checkpoint"
PARTIAL_CHECKPOINT_SUFFIX = ".checkpoint.part"
DELETED_CHECKPOINT_SUFFIX = ".checkpoint.deleted"

# Partition directory suffixes.
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

# Files at the root of a log dir.
LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES_FILE = "meta.properties"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINT_FILES = (
    RECOVERY_POINT_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    CLEANER_OFFSET_CHECKPOINT_FILE,
)
BOOTSTRAP_CHECKPOINT_FILE = "bootstrap.checkpoint"

# Files in a partition directory.
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"

# The KRaft metadata partition.
METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION_DIR = "__cluster_metadata-0"

OFFSET_DIGITS = 20
EPOCH_DIGITS = 10
INT64_MAX = (1 << 63) - 1

_OFFSET_NAME = re.compile(r"^(\d{1,20})\.")
_CHECKPOINT_NAME = re.compile(
    r"^(\d{20})-(\d{10})(\.checkpoint(?:\.part|\.deleted)?|-\d+\.checkpoint\.part)$"
)
_SPECIAL_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)(-delete|-future|-stray)$")


def filename_prefix_from_offset(offset: int) -> str:
    """The 20-digit zero-padded decimal Kafka uses in segment and snapshot names."""
    if offset < 0:
        raise ValueError(f"offset {offset} cannot name a file")
    return f"{offset:0{OFFSET_DIGITS}d}"


def log_file_name(base_offset: int) -> str:
    return filename_prefix_from_offset(base_offset) + LOG_FILE_SUFFIX


def index_file_name(base_offset: int) -> str:
    return filename_prefix_from_offset(base_offset) + INDEX_FILE_SUFFIX


def time_index_file_name(base_offset: int) -> str:
    return filename_prefix_from_offset(base_offset) + TIME_INDEX_FILE_SUFFIX


def txn_index_file_name(base_offset: int) -> str:
    return filename_prefix_from_offset(base_offset) + TXN_INDEX_FILE_SUFFIX


def producer_snapshot_file_name(offset: int) -> str:
    return filename_prefix_from_offset(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX


def offset_from_file_name(name: str) -> int:
    """Parse the offset from ``<digits>.<suffix...>`` as Kafka's ``offsetFromFileName`` does."""
    m = _OFFSET_NAME.match(name)
    if not m or int(m.group(1)) > INT64_MAX:
        raise InvalidFileNameError(
            "file name does not start with a decimal offset", path=name, expected="<20 digits>.<suffix>"
        )
    return int(m.group(1))


def checkpoint_file_name(end_offset: int, epoch: int) -> str:
    """``<20-digit end offset>-<10-digit epoch>.checkpoint`` (KIP-630 snapshot id)."""
    if end_offset < 0 or epoch < 0:
        raise ValueError(f"snapshot id ({end_offset}, {epoch}) cannot name a file")
    return f"{end_offset:0{OFFSET_DIGITS}d}-{epoch:0{EPOCH_DIGITS}d}{CHECKPOINT_FILE_SUFFIX}"


ZERO_CHECKPOINT_FILE = checkpoint_file_name(0, 0)


class CheckpointState(StrEnum):
    COMPLETE = "complete"
    PARTIAL = "partial"
    DELETED = "deleted"


@dataclass(frozen=True)
class CheckpointName:
    end_offset: int
    epoch: int
    state: CheckpointState


def parse_checkpoint_file_name(name: str) -> CheckpointName:
    """Parse a KRaft snapshot name the way Kafka's ``SnapshotPath`` does."""
    m = _CHECKPOINT_NAME.match(name)
    if not m:
        raise InvalidFileNameError(
            "not a KRaft snapshot file name",
            path=name,
            expected="<20-digit end offset>-<10-digit epoch>.checkpoint",
        )
    suffix = m.group(3)
    if suffix.endswith(".part"):
        state = CheckpointState.PARTIAL
    elif suffix.endswith(".deleted"):
        state = CheckpointState.DELETED
    else:
        state = CheckpointState.COMPLETE
    return CheckpointName(int(m.group(1)), int(m.group(2)), state)


class PartitionDirKind(StrEnum):
    LIVE = "live"
    DELETE = "delete"
    FUTURE = "future"
    STRAY = "stray"


@dataclass(frozen=True)
class TopicPartitionDir:
    topic: str
    partition: int
    kind: PartitionDirKind

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def parse_partition_dir_name(name: str) -> TopicPartitionDir:
    """Parse ``<topic>-<partition>`` (with the -delete/-future/-stray forms) as Kafka's
    ``UnifiedLog.parseTopicPartitionName`` does."""
    kind = PartitionDirKind.LIVE
    base = name
    for suffix, k in (
        (DELETE_DIR_SUFFIX, PartitionDirKind.DELETE),
        (FUTURE_DIR_SUFFIX, PartitionDirKind.FUTURE),
        (STRAY_DIR_SUFFIX, PartitionDirKind.STRAY),
    ):
        if name.endswith(suffix):
            if not _SPECIAL_DIR.match(name):
                raise InvalidFileNameError(f"malformed {suffix} partition directory name", path=name)
            base = name[: name.rindex(".")]
            kind = k
            break
    idx = base.rfind("-")
    if idx <= 0 or idx == len(base) - 1:
        raise InvalidFileNameError(
            "not a topic-partition directory name", path=name, expected="<topic>-<partition>"
        )
    topic, part = base[:idx], base[idx + 1 :]
    if not part.isdigit() or int(part) > 2**31 - 1:
        raise InvalidFileNameError(
            "partition is not a non-negative int32", path=name, expected="<topic>-<partition>", found=part
        )
    return TopicPartitionDir(topic, int(part), kind)
