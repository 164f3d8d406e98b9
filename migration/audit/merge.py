"""The DAG run's report: every step's report (one per broker, the canary's first) merged into
one, saved with the store's sinks. It names every step it merged, a missing one too, so the
DAG run's report page links each step's report, and its timeline is the DAG run's progress as
the steps made it. Why a step left no report is the orchestration's knowledge, handed in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migration.audit.model import ProgressPoint, RunKind, RunReport, StepRef
from migration.audit.store import ReportNotFound, ReportStore


def merge_reports(kind: RunKind | str, run_ids: list[str], *, run_id: str, params: dict[str, Any],
                  dag_id: str | None = None, dag_run_id: str | None = None, store: ReportStore | None = None,
                  also_failed: Sequence[str] = (),
                  failure: Callable[[str], str | None] = lambda step_run_id: None) -> RunReport:
    """One report for the DAG run: every broker's units, plans, warnings, errors, refusals;
    saved in ``store`` (with its sinks, such as the bucket). It names every step it merged
    (``steps``, a missing one too), so the DAG run's report page links each step's report. A
    step that left no report says why when ``failure`` (its run id -> the reason, or None)
    knows, and so do the steps of ``also_failed`` (not merged: a preflight) when theirs failed."""
    store = store or ReportStore()
    merged = RunReport.start(kind, params, run_id=run_id, dag_id=dag_id, dag_run_id=dag_run_id)
    for rid in also_failed:
        reason = failure(rid)
        if reason is not None:
            merged.error(reason)
    events: list[tuple[Any, int, int]] = []  # (time, units done, bytes done) increments of every step's timeline
    for rid in run_ids:
        try:
            r = store.load(rid)
        except ReportNotFound:
            merged.error(failure(rid)
                         or f"no report for step {rid}: the step failed before writing one, or did not run")
            merged.steps.append(StepRef(run_id=rid))
            continue
        merged.steps.append(StepRef.of(r))
        if r.started_at < merged.started_at:
            merged.started_at = r.started_at
        for pu in r.plan.units:
            merged.plan_unit(pu.broker_id, pu.topic, pu.partition, pu.unit, pu.bytes, pu.unit_type)
        for b in r.brokers:
            for p in b.partitions:
                for u in p.units:
                    if u.digest_before is not None and u.digest_algorithm is None:
                        # a step report of another kmigrate keeps naming its own hash
                        u = u.model_copy(update={"digest_algorithm": r.unit_digest_algorithm(u)})
                    merged.add_unit(b.broker_id, p.topic, p.partition, u, track_progress=False)
            if b.window is not None:
                merged.broker(b.broker_id).window = b.window  # one window per broker, in its own step
        prev_units = prev_bytes = 0
        for pt in r.timeline:
            if pt.units_done != prev_units or pt.bytes_done != prev_bytes:
                events.append((pt.at, pt.units_done - prev_units, pt.bytes_done - prev_bytes))
            prev_units, prev_bytes = pt.units_done, pt.bytes_done
        merged.warnings.extend(r.warnings)
        merged.errors.extend(r.errors)
        if r.refusal:
            merged.refuse(f"{rid}: {r.refusal}" if merged.refusal is None else f"{merged.refusal}; {rid}: {r.refusal}")
        if r.session and merged.session is None:
            merged.session = r.session
        if r.formats and merged.formats.source_magic is None:
            merged.formats = r.formats
    # Progress over the DAG run as the steps made it (canary first, then each broker).
    units_done = bytes_done = 0
    merged.timeline = [ProgressPoint(at=merged.started_at, units_done=0, bytes_done=0)]
    for at, du, db in sorted(events, key=lambda e: e[0]):
        units_done += du
        bytes_done += db
        merged.timeline.append(ProgressPoint(at=max(at, merged.started_at), units_done=max(units_done, 0),
                                             bytes_done=max(bytes_done, 0)))
    merged.finish()
    store.save(merged)
    return merged
