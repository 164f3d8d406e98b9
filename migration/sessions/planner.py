"""Which partitions a run does: dirty detection, priority order and the budget (pure functions).

Order (KIP-227's rotation, adapted to runs): every partition the session tracks has a position
``seq``; partitions served by a run are moved to the end in the order they were served, so the
head of the queue is always the partition that has waited longest. Partitions that failed last
run go first, but only for ``failed_first_runs`` consecutive failures: a partition that keeps
failing then joins the ordinary rotation instead of starving everyone behind it.

Budget: walk the queue and take every partition that still fits (a smaller one behind a big one
may be taken; the big one keeps its place and only moves forward). The head of the queue is
always served: if it alone exceeds the whole budget it is served alone. Since each run serves the
head and moves it behind everything else, a partition at position *p* is served within *p* runs
while it stays dirty: nothing starves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from migration.sessions.fingerprint import PartitionFingerprint
from migration.sessions.models import (
    Budget,
    Cost,
    DirtyReason,
    OutcomeStatus,
    PartitionKey,
    PartitionRef,
    PlannedPartition,
)


@dataclass(frozen=True, slots=True)
class StoredPartition:
    """One partition row as loaded for planning (only the columns planning needs)."""

    seq: int
    seen_digest: str | None
    seen_bases_digest: str | None
    seen_segments_digest: str | None
    seen_files_digest: str | None
    seen_log_start_offset: int | None
    seen_log_end_offset: int | None
    outcome: str | None
    failures: int


@dataclass(slots=True)
class PartitionSelection:
    selected: list[PlannedPartition]
    deferred: list[PlannedPartition]
    clean: list[PartitionRef]
    removed: list[PartitionRef]


def _change_reasons(fp: PartitionFingerprint, row: StoredPartition) -> list[DirtyReason]:
    parts = fp.parts
    reasons: list[DirtyReason] = []
    if row.seen_bases_digest != parts.bases_digest:
        reasons.append(DirtyReason.SEGMENT_LIST_CHANGED)
    elif row.seen_segments_digest != parts.segments_digest:
        reasons.append(DirtyReason.SEGMENT_CHANGED)
    if row.seen_log_start_offset != parts.log_start_offset:
        reasons.append(DirtyReason.LOG_START_MOVED)
    if row.seen_log_end_offset != parts.log_end_offset:
        reasons.append(DirtyReason.LOG_END_MOVED)
    if row.seen_files_digest != parts.files_digest:
        reasons.append(DirtyReason.FILES_CHANGED)
    return reasons


def plan_partitions(
    fingerprints: Sequence[PartitionFingerprint],
    stored: Mapping[PartitionKey, StoredPartition],
    *,
    full_rescan: bool,
    budget: Budget | None,
    costs: Mapping[PartitionKey, Cost] | None = None,
    failed_first_runs: int = 3,
) -> PartitionSelection:
    """Split ``fingerprints`` into selected / deferred / clean and list stored partitions that are gone.

    With ``full_rescan`` every stored digest is ignored (every partition is dirty); stored order
    and failure counts are still used, they only decide who goes first.
    """
    # (priority group, seq, key) sort keys; new partitions follow every tracked one, by key.
    queue: list[tuple[tuple[int, int, PartitionKey], PlannedPartition]] = []
    clean: list[PartitionRef] = []
    seen_keys: set[PartitionKey] = set()
    new_seq = 1 << 62
    for fp in fingerprints:
        key = fp.key
        if key in seen_keys:
            raise ValueError(f"partition {key} passed twice")
        seen_keys.add(key)
        parts = fp.parts
        row = stored.get(key)
        failed = row is not None and row.outcome == OutcomeStatus.FAILED
        if row is not None and not full_rescan and not failed and row.seen_digest == parts.digest:
            clean.append(PartitionRef(topic=fp.topic, partition=fp.partition, log_dir=fp.log_dir))
            continue
        reasons: list[DirtyReason] = []
        if full_rescan:
            reasons.append(DirtyReason.FULL_RESCAN)
        if row is None:
            reasons.append(DirtyReason.NEW)
        else:
            if failed:
                reasons.append(DirtyReason.FAILED_LAST_RUN)
            if row.seen_digest is None:
                if not failed:
                    reasons.append(DirtyReason.NOT_DONE)
            elif not full_rescan:
                reasons.extend(_change_reasons(fp, row))
        cost = costs.get(key) if costs is not None else None
        if cost is None:
            cost = Cost(bytes=fp.cost_bytes, segments=fp.cost_segments)
        planned = PlannedPartition(
            topic=fp.topic,
            partition=fp.partition,
            log_dir=fp.log_dir,
            reasons=reasons,
            cost=cost,
            digest=parts.digest,
            bases_digest=parts.bases_digest,
            segments_digest=parts.segments_digest,
            files_digest=parts.files_digest,
            log_start_offset=parts.log_start_offset,
            log_end_offset=parts.log_end_offset,
            known=row is not None,
            failures=row.failures if row is not None else 0,
            oversize=budget is not None and not budget.fits(Cost(), cost),
        )
        group = 0 if failed and row is not None and row.failures <= failed_first_runs else 1
        queue.append(((group, row.seq if row is not None else new_seq, key), planned))

    queue.sort(key=lambda item: item[0])
    selected: list[PlannedPartition] = []
    deferred: list[PlannedPartition] = []
    used = Cost()
    for _, planned in queue:
        if budget is None:
            selected.append(planned)
        elif not selected and not deferred and planned.oversize:
            # The head of the queue is served even if it alone exceeds the budget; alone, so the
            # run stays as close to the budget as it can.
            selected.append(planned)
            used = Cost(bytes=used.bytes + planned.cost.bytes, segments=used.segments + planned.cost.segments)
        elif (not selected or not selected[0].oversize) and budget.fits(used, planned.cost):
            selected.append(planned)
            used = Cost(bytes=used.bytes + planned.cost.bytes, segments=used.segments + planned.cost.segments)
        else:
            deferred.append(planned)

    removed = [PartitionRef(topic=k[0], partition=k[1], log_dir=k[2]) for k in stored if k not in seen_keys]
    return PartitionSelection(selected=selected, deferred=deferred, clean=clean, removed=removed)
