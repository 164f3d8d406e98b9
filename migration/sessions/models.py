"""Documents of the session store: budgets, outcomes, run plans and session listings.

All are pydantic v2 models so a plan can travel between Airflow tasks as JSON (XCom) and be
written into a run report: ``RunPlan.model_validate_json(plan.model_dump_json())`` round-trips.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

PartitionKey = tuple[str, int, str]
"""``(topic, partition, log_dir)``: the unit a session tracks."""

MAX_REASON_LENGTH = 500


class Cost(BaseModel):
    """What serving one dirty partition costs against the run's budget."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bytes: int = Field(default=0, ge=0)
    segments: int = Field(default=0, ge=0)


class Budget(BaseModel):
    """Per-run limit; ``None`` means unlimited on that axis."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_bytes: int | None = Field(default=None, ge=0)
    max_segments: int | None = Field(default=None, ge=0)

    def fits(self, used: Cost, extra: Cost) -> bool:
        if self.max_bytes is not None and used.bytes + extra.bytes > self.max_bytes:
            return False
        return self.max_segments is None or used.segments + extra.segments <= self.max_segments


class OutcomeStatus(StrEnum):
    OK = "ok"  # done (or verified nothing to do): the fingerprint becomes "seen"
    FAILED = "failed"  # stays dirty and goes first next run
    SKIPPED = "skipped"  # not attempted this run: stays dirty, no priority


class Outcome(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    status: OutcomeStatus
    reason: str = ""

    @field_validator("reason")
    @classmethod
    def _short(cls, reason: str) -> str:
        # A reason is a one-line summary; stack traces belong in the run's logs, not the store.
        reason = " ".join(reason.split())
        return reason if len(reason) <= MAX_REASON_LENGTH else reason[: MAX_REASON_LENGTH - 1] + "…"

    @classmethod
    def ok(cls, reason: str = "") -> Outcome:
        return cls(status=OutcomeStatus.OK, reason=reason)

    @classmethod
    def failed(cls, reason: str) -> Outcome:
        return cls(status=OutcomeStatus.FAILED, reason=reason)

    @classmethod
    def skipped(cls, reason: str) -> Outcome:
        return cls(status=OutcomeStatus.SKIPPED, reason=reason)


class DirtyReason(StrEnum):
    """Why a partition is part of this run."""

    FULL_RESCAN = "full rescan"  # the session's state is not trusted (see RunPlan.full_rescan_reason)
    NEW = "new partition"  # the session has never seen it
    NOT_DONE = "not done yet"  # seen before but never completed ok (deferred or skipped)
    FAILED_LAST_RUN = "failed last run"
    SEGMENT_LIST_CHANGED = "segment list changed"  # new or rolled segment, retention, compaction
    SEGMENT_CHANGED = "segment size or mtime changed"
    LOG_START_MOVED = "log start offset moved"
    LOG_END_MOVED = "log end offset moved"
    FILES_CHANGED = "index, snapshot or checkpoint files changed"


class PartitionRef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: str
    partition: int
    log_dir: str

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.partition, self.log_dir)


class PlannedPartition(PartitionRef):
    """A dirty partition: why, what it costs, and the fingerprint to record if it ends ok."""

    reasons: list[DirtyReason]
    cost: Cost
    digest: str
    bases_digest: str
    segments_digest: str
    files_digest: str
    log_start_offset: int | None
    log_end_offset: int | None
    known: bool  # the store has a row for it (decides update vs insert at finish)
    failures: int = 0  # consecutive failed runs before this one
    oversize: bool = False  # cost exceeds the whole budget: served alone when first in line


class RunPlan(BaseModel):
    """What one run should do. Hand it back to ``finish_run`` or ``abandon_run``."""

    model_config = ConfigDict(extra="forbid")

    name: str
    broker_id: int
    run_id: str
    session_id: str | None  # None: sessionless run (no free slot); nothing is recorded
    epoch: int  # the epoch this run commits; 0 for a sessionless run
    base_epoch: int  # the stored epoch this plan was made against (0: no committed run)
    full_rescan: bool
    full_rescan_reason: str | None = None
    started_at: datetime
    lease_token: str  # identifies this run's lease (a retry with the same run id gets another)
    lease_expires_at: datetime
    budget: Budget | None = None
    selected: list[PlannedPartition]  # in the order to do them
    deferred: list[PlannedPartition]  # dirty but over budget, in queue order
    clean: list[PartitionRef]  # unchanged since they last ended ok
    removed: list[PartitionRef]  # tracked by the session but not passed this run: dropped at finish

    @property
    def sessionless(self) -> bool:
        return self.session_id is None

    def reasons(self) -> dict[PartitionKey, list[DirtyReason]]:
        """Why each dirty partition (selected or deferred) is dirty."""
        return {p.key: list(p.reasons) for p in (*self.selected, *self.deferred)}


class SessionInfo(BaseModel):
    """One row of ``SessionStore.sessions()``, for a CLI listing."""

    model_config = ConfigDict(frozen=True)

    name: str
    broker_id: int
    session_id: str
    epoch: int
    created_at: datetime
    last_used_at: datetime
    partitions: int
    failed: int  # partitions whose last outcome was failed
    pending: int  # partitions never completed ok since their last change was seen (deferred etc.)
    lease_run_id: str | None = None
    lease_started_at: datetime | None = None
    lease_expires_at: datetime | None = None
