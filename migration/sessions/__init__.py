"""Incremental session store for scheduled migration runs (KIP-227 fetch sessions, for runs).

Pure Python over a database: no Spark, Airflow or boto3 here, and no Kafka file is read except
the ``os.scandir`` stats of :func:`fingerprint_partition_dir`.
"""

from migration.sessions.errors import SessionBusyError, SessionError, StaleRunError
from migration.sessions.fingerprint import (
    FileStat,
    FingerprintDigest,
    PartitionFingerprint,
    SegmentStat,
    fingerprint_partition_dir,
)
from migration.sessions.models import (
    Budget,
    Cost,
    DirtyReason,
    Outcome,
    OutcomeStatus,
    PartitionKey,
    PartitionRef,
    PlannedPartition,
    RunPlan,
    SessionInfo,
)
from migration.sessions.store import SessionStore, default_store_url

__all__ = [
    "Budget",
    "Cost",
    "DirtyReason",
    "FileStat",
    "FingerprintDigest",
    "Outcome",
    "OutcomeStatus",
    "PartitionFingerprint",
    "PartitionKey",
    "PartitionRef",
    "PlannedPartition",
    "RunPlan",
    "SegmentStat",
    "SessionBusyError",
    "SessionError",
    "SessionInfo",
    "SessionStore",
    "StaleRunError",
    "default_store_url",
    "fingerprint_partition_dir",
]
