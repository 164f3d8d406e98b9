"""Incremental runs in the spirit of KIP-227 fetch sessions, for any scheduled migration.

Per (DAG or command, broker) the session store keeps what the last run saw. A run:
  1. fingerprints the broker's partition dirs (names, sizes, mtimes: no file is read),
  2. asks the store for a plan: dirty partitions first-failed-first, under the budget,
     rotated so none starves; an epoch the run does not believe in forces a full rescan,
  3. works on the selected partitions only (none selected: no Spark job at all),
  4. commits the outcomes, which advances the epoch and the rotation.
The epoch the caller believes in is kept beside the reports (``out/state/beliefs``), apart
from the store, so a store restored from a backup or shared by two runs is caught.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from migration.audit.model import RunReport, SessionInfo, UnitStatus
from migration.formats import names
from migration.formats.fileio import durable_mkdir, durable_replace
from migration.runtime.runs import RunDir
from migration.sessions import Budget, Outcome, PartitionFingerprint, RunPlan, SessionStore, fingerprint_partition_dir
from migration.settings import beliefs_dir

PLAN_FILE = "session-plan.json"


def _belief_path(name: str, broker_id: int) -> Path:
    d = durable_mkdir(beliefs_dir())
    return d / f"{name}-b{broker_id}.json"


def believed_epoch(name: str, broker_id: int) -> int | None:
    p = _belief_path(name, broker_id)
    if not p.exists():
        return None
    return int(json.loads(p.read_text())["epoch"])


def fingerprints(log_dirs: list[str]) -> list[PartitionFingerprint]:
    out = []
    for d in log_dirs:
        with os.scandir(d) as it:
            for e in it:
                if not e.is_dir() or e.name == names.METADATA_PARTITION_DIR:
                    continue
                try:
                    tp = names.parse_partition_dir_name(e.name)
                except Exception:
                    continue
                if tp.kind != names.PartitionDirKind.LIVE:
                    continue
                out.append(fingerprint_partition_dir(e.path, log_dir=str(d)))
    return out


def begin_incremental(name: str, broker_id: int, log_dirs: list[str], run_id: str, *,
                      budget_bytes: int | None = None, budget_segments: int | None = None,
                      store: SessionStore | None = None) -> RunPlan:
    store = store or SessionStore()
    budget = Budget(max_bytes=budget_bytes, max_segments=budget_segments) if (budget_bytes or budget_segments) \
        else None
    plan = store.begin_run(name, broker_id, run_id, believed_epoch=believed_epoch(name, broker_id),
                           fingerprints=fingerprints(log_dirs), budget=budget)
    RunDir(run_id).write(PLAN_FILE, plan.model_dump(mode="json"))
    return plan


def load_plan(run_id: str) -> RunPlan | None:
    rd = RunDir(run_id)
    if not (rd.path / PLAN_FILE).exists():
        return None
    return RunPlan.model_validate(rd.read(PLAN_FILE))


def session_info(plan: RunPlan) -> SessionInfo:
    return SessionInfo(session_id=plan.session_id or "sessionless", epoch=plan.epoch, full_rescan=plan.full_rescan,
                       dirty=len(plan.selected), deferred=len(plan.deferred), clean=len(plan.clean))


def finish_incremental(run_id: str, report: RunReport | None, *, store: SessionStore | None = None) -> dict:
    """Commit the run's outcomes (from its report) to the session; without a report the run
    is abandoned: the lease is released and nothing is recorded, so all stays dirty.

    An ineligible partition (compacted, excluded) counts as done: it becomes dirty again when
    its files change. A failed one, not ready or broken, stays dirty: every run tries it again
    and fails until the operator fixes or excludes it."""
    plan = load_plan(run_id)
    if plan is None:
        return {"committed": False, "reason": "no session plan"}
    store = store or SessionStore()
    if report is None:
        store.abandon_run(plan)
        return {"committed": False, "reason": "the run left no report: session abandoned"}
    status: dict[tuple[str, int], list[UnitStatus]] = {}
    reasons: dict[tuple[str, int], str] = {}
    for b in report.brokers:
        for p in b.partitions:
            for u in p.units:
                done = u.status is UnitStatus.INELIGIBLE
                status.setdefault((p.topic, p.partition), []).append(UnitStatus.OK if done else u.status)
                if u.errors:
                    reasons[(p.topic, p.partition)] = u.errors[0].message
    outcomes: dict = {}
    for sel in plan.selected:
        st = status.get((sel.topic, sel.partition))
        if not st:
            outcomes[sel.key] = Outcome.skipped("not processed by this run")
        elif any(s in (UnitStatus.FAILED, UnitStatus.REFUSED) for s in st):
            outcomes[sel.key] = Outcome.failed(reasons.get((sel.topic, sel.partition), "failed"))
        elif all(s in (UnitStatus.OK, UnitStatus.SKIPPED) for s in st):
            outcomes[sel.key] = Outcome.ok()
        else:
            outcomes[sel.key] = Outcome.skipped("planned only (dry run)")
    # What this run saw includes what it changed itself (snapshot files it added, say).
    seen_after = {}
    for sel in plan.selected:
        if outcomes[sel.key].status == "ok":
            pdir = Path(sel.log_dir) / f"{sel.topic}-{sel.partition}"
            if pdir.is_dir():
                seen_after[sel.key] = fingerprint_partition_dir(pdir, log_dir=sel.log_dir)
    store.finish_run(plan, outcomes, seen_after)
    if plan.session_id is not None:
        # durable: the next run compares its session's epoch with this belief
        durable_replace(_belief_path(plan.name, plan.broker_id),
                     json.dumps({"epoch": plan.epoch, "session_id": plan.session_id}).encode(), tmp_suffix=".tmp")
    return {"committed": True, "epoch": plan.epoch, "ok": sum(1 for o in outcomes.values() if o.status == "ok"),
            "failed": sum(1 for o in outcomes.values() if o.status == "failed")}
