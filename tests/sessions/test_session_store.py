"""Session store: dirty detection, failed-first, budget rotation, epochs, leases, eviction, bulk speed."""

from __future__ import annotations

import shutil
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from migration import settings
from migration.sessions import (
    Budget,
    Cost,
    DirtyReason,
    FileStat,
    Outcome,
    PartitionFingerprint,
    RunPlan,
    SegmentStat,
    SessionBusyError,
    SessionStore,
    StaleRunError,
)
from migration.sessions import store as store_module
from migration.sessions.schema import partition_table

T0 = datetime(2024, 1, 1, tzinfo=UTC)


class Clock:
    """A settable clock for leases and eviction."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


def fingerprint(
    topic: str = "orders",
    partition: int = 0,
    log_dir: str = "/data/kafka-logs",
    *,
    segments: int = 2,
    size: int = 100,
    mtime: int = 1_700_000_000_000_000_000,
    log_end_offset: int | None = None,
    extra_files: dict[str, FileStat] | None = None,
) -> PartitionFingerprint:
    segs = [SegmentStat(base_offset=i * 1000, size=size, mtime_ns=mtime + i) for i in range(segments)]
    files = {f"{s.base_offset:020d}.index": FileStat(size=8, mtime_ns=s.mtime_ns) for s in segs}
    files["leader-epoch-checkpoint"] = FileStat(size=20, mtime_ns=mtime)
    files.update(extra_files or {})
    return PartitionFingerprint(
        topic=topic,
        partition=partition,
        log_dir=log_dir,
        segments=segs,
        log_start_offset=segs[0].base_offset if segs else None,
        log_end_offset=log_end_offset,
        files=files,
    )


def fleet(n: int, *, topic: str = "orders", **kwargs: object) -> list[PartitionFingerprint]:
    return [fingerprint(topic, i, **kwargs) for i in range(n)]  # type: ignore[arg-type]


def with_changes(fp: PartitionFingerprint, **update: object) -> PartitionFingerprint:
    """A copy with fields replaced, re-validated (so segments are re-sorted and re-hashed)."""
    data = fp.model_dump()
    data.update(update)
    return PartitionFingerprint.model_validate(data)


def all_ok(plan: RunPlan) -> dict[tuple[str, int, str], Outcome]:
    return {p.key: Outcome.ok() for p in plan.selected}


def keys(items: list) -> list[tuple[str, int, str]]:
    return [p.key for p in items]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(store_url: str, clock: Clock) -> SessionStore:
    s = SessionStore(store_url, clock=clock)
    yield s
    s.close()


def run(
    store: SessionStore,
    fps: list[PartitionFingerprint],
    believed: int | None,
    *,
    run_id: str = "r",
    budget: Budget | None = None,
    outcomes: dict | None = None,
    name: str = "dag",
    broker: int = 1,
) -> RunPlan:
    plan = store.begin_run(name, broker, run_id, believed_epoch=believed, fingerprints=fps, budget=budget)
    store.finish_run(plan, all_ok(plan) if outcomes is None else outcomes)
    return plan


# -- dirty detection -------------------------------------------------------------------------


def test_first_run_is_a_full_rescan_with_everything_dirty(store: SessionStore) -> None:
    fps = fleet(5)
    plan = store.begin_run("dag", 1, "r1", believed_epoch=None, fingerprints=fps, budget=None)
    assert plan.full_rescan
    assert "no stored state" in (plan.full_rescan_reason or "")
    assert plan.epoch == 1 and plan.base_epoch == 0
    assert plan.session_id is not None and len(plan.session_id) == 16
    assert sorted(keys(plan.selected)) == sorted(fp.key for fp in fps)
    assert plan.deferred == [] and plan.clean == []
    assert all(DirtyReason.NEW in p.reasons and DirtyReason.FULL_RESCAN in p.reasons for p in plan.selected)
    store.finish_run(plan, all_ok(plan))
    [info] = store.sessions()
    assert (info.name, info.broker_id, info.epoch, info.partitions, info.pending) == ("dag", 1, 1, 5, 0)
    assert info.session_id == plan.session_id and info.lease_run_id is None


def test_second_run_with_nothing_changed_selects_nothing(store: SessionStore) -> None:
    fps = fleet(5)
    first = run(store, fps, None)
    second = store.begin_run("dag", 1, "r2", believed_epoch=first.epoch, fingerprints=fleet(5), budget=None)
    assert not second.full_rescan and second.full_rescan_reason is None
    assert second.selected == [] and second.deferred == []
    assert sorted(keys(second.clean)) == sorted(fp.key for fp in fps)
    assert second.epoch == 2 and second.session_id == first.session_id
    store.finish_run(second, {})
    assert store.sessions()[0].epoch == 2


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("size", DirtyReason.SEGMENT_CHANGED),
        ("mtime", DirtyReason.SEGMENT_CHANGED),
        ("new_segment", DirtyReason.SEGMENT_LIST_CHANGED),
        ("log_start", DirtyReason.LOG_START_MOVED),
        ("log_end", DirtyReason.LOG_END_MOVED),
        ("files", DirtyReason.FILES_CHANGED),
    ],
)
def test_one_change_makes_exactly_that_partition_dirty(store: SessionStore, change: str, reason: str) -> None:
    fps = fleet(6)
    first = run(store, fps, None)
    target = fps[3]
    segs = [s.model_dump() for s in target.segments]
    if change == "size":
        segs[-1]["size"] += 1
        changed = with_changes(target, segments=segs)
    elif change == "mtime":
        segs[-1]["mtime_ns"] += 1
        changed = with_changes(target, segments=segs)
    elif change == "new_segment":
        segs.append({"base_offset": 5000, "size": 0, "mtime_ns": 1})
        changed = with_changes(target, segments=segs)
    elif change == "log_start":
        changed = with_changes(target, log_start_offset=500)
    elif change == "log_end":
        changed = with_changes(target, log_end_offset=1234)
    else:
        files = dict(target.files)
        files["00000000000000001000.snapshot"] = FileStat(size=10, mtime_ns=5)
        changed = with_changes(target, files={k: v.model_dump() for k, v in files.items()})
    assert changed.digest() != target.digest()
    current = [*fps[:3], changed, *fps[4:]]
    plan = store.begin_run("dag", 1, "r2", believed_epoch=first.epoch, fingerprints=current, budget=None)
    assert not plan.full_rescan
    assert keys(plan.selected) == [target.key]
    assert plan.selected[0].reasons == [reason]
    assert len(plan.clean) == 5
    store.finish_run(plan, all_ok(plan))
    # Recorded as seen: the next run is clean again.
    third = store.begin_run("dag", 1, "r3", believed_epoch=plan.epoch, fingerprints=current, budget=None)
    assert third.selected == [] and len(third.clean) == 6
    store.abandon_run(third)


def test_fingerprint_digest_is_canonical() -> None:
    a = fingerprint(segments=3)
    shuffled = with_changes(a, segments=[s.model_dump() for s in reversed(a.segments)])
    assert shuffled.digest() == a.digest()
    assert fingerprint(segments=3, size=101).digest() != a.digest()
    assert fingerprint(log_dir="/other").digest() == fingerprint().digest()  # log_dir is identity, not content
    assert fingerprint(log_dir="/other").key != fingerprint().key
    with pytest.raises(ValueError, match="two segments"):
        PartitionFingerprint(
            topic="t",
            partition=0,
            log_dir="/d",
            segments=[SegmentStat(base_offset=0, size=1, mtime_ns=1), SegmentStat(base_offset=0, size=2, mtime_ns=1)],
        )


def test_same_partition_in_two_log_dirs_is_tracked_separately(store: SessionStore) -> None:
    fps = [fingerprint("t", 0, "/a"), fingerprint("t", 0, "/b")]
    first = run(store, fps, None)
    moved = [fps[0], fingerprint("t", 0, "/b", size=7)]
    plan = store.begin_run("dag", 1, "r2", believed_epoch=first.epoch, fingerprints=moved, budget=None)
    assert keys(plan.selected) == [("t", 0, "/b")]
    store.abandon_run(plan)


# -- outcomes ----------------------------------------------------------------------------------


def test_failed_partition_stays_dirty_and_goes_first(store: SessionStore) -> None:
    fps = fleet(5)
    first = run(store, fps, None)
    # Run 2: partitions 1 and 4 changed; 4 fails.
    changed = [fps[0], fingerprint("orders", 1, size=1), fps[2], fps[3], fingerprint("orders", 4, size=1)]
    p2 = store.begin_run("dag", 1, "r2", believed_epoch=first.epoch, fingerprints=changed, budget=None)
    assert keys(p2.selected) == [("orders", 1, "/data/kafka-logs"), ("orders", 4, "/data/kafka-logs")]
    store.finish_run(
        p2,
        {
            ("orders", 1, "/data/kafka-logs"): Outcome.ok(),
            ("orders", 4, "/data/kafka-logs"): Outcome.failed("CRC mismatch\nin segment 0"),
        },
    )
    # Run 3: nothing changed but 4 failed; partition 0 changed too. Failed goes first.
    changed[0] = fingerprint("orders", 0, size=3)
    p3 = store.begin_run("dag", 1, "r3", believed_epoch=p2.epoch, fingerprints=changed, budget=None)
    assert keys(p3.selected) == [("orders", 4, "/data/kafka-logs"), ("orders", 0, "/data/kafka-logs")]
    # Still different from what the last ok run saw, and failed: both are reported.
    assert p3.selected[0].reasons == [DirtyReason.FAILED_LAST_RUN, DirtyReason.SEGMENT_CHANGED]
    assert p3.selected[0].failures == 1
    assert p3.selected[1].reasons == [DirtyReason.SEGMENT_CHANGED]
    info = store.sessions()[0]
    assert info.failed == 1
    store.finish_run(p3, all_ok(p3))
    p4 = store.begin_run("dag", 1, "r4", believed_epoch=p3.epoch, fingerprints=changed, budget=None)
    assert p4.selected == []
    assert store.sessions()[0].failed == 0
    store.abandon_run(p4)


def test_failed_outcome_reason_is_stored_short(store: SessionStore) -> None:
    fps = fleet(1)
    plan = store.begin_run("dag", 1, "r1", believed_epoch=None, fingerprints=fps, budget=None)
    store.finish_run(plan, {fps[0].key: Outcome.failed("boom " * 1000)})
    with store._engine.begin() as conn:
        row = conn.execute(select(partition_table)).one()
    assert row.outcome == "failed" and row.outcome_run_id == "r1" and row.outcome_epoch == 1
    assert len(row.outcome_reason) <= 500 and row.seen_digest is None and row.failures == 1


def test_skipped_and_unreported_partitions_stay_dirty_without_priority(store: SessionStore) -> None:
    fps = fleet(3)
    plan = store.begin_run("dag", 1, "r1", believed_epoch=None, fingerprints=fps, budget=None)
    store.finish_run(plan, {fps[0].key: Outcome.ok(), fps[1].key: Outcome.skipped("filtered out")})
    p2 = store.begin_run("dag", 1, "r2", believed_epoch=plan.epoch, fingerprints=fps, budget=None)
    assert not p2.full_rescan
    assert sorted(keys(p2.selected)) == sorted([fps[1].key, fps[2].key])
    assert all(p.reasons == [DirtyReason.NOT_DONE] for p in p2.selected)
    with pytest.raises(ValueError, match="did not select"):
        store.finish_run(p2, {fps[0].key: Outcome.ok()})
    store.abandon_run(p2)


def test_partitions_gone_from_the_broker_are_forgotten(store: SessionStore) -> None:
    fps = fleet(4)
    first = run(store, fps, None)
    plan = store.begin_run("dag", 1, "r2", believed_epoch=first.epoch, fingerprints=fps[:2], budget=None)
    assert sorted(keys(plan.removed)) == sorted([fps[2].key, fps[3].key])
    store.finish_run(plan, {})
    assert store.sessions()[0].partitions == 2
    # Back again: they are new.
    p3 = store.begin_run("dag", 1, "r3", believed_epoch=plan.epoch, fingerprints=fps, budget=None)
    assert sorted(keys(p3.selected)) == sorted([fps[2].key, fps[3].key])
    assert all(p.reasons == [DirtyReason.NEW] for p in p3.selected)
    store.abandon_run(p3)


# -- budget and rotation ---------------------------------------------------------------------


def test_budget_rotation_serves_every_partition_including_one_larger_than_the_budget(
    store: SessionStore,
) -> None:
    # Hot partitions: every partition changes before every run, so all are always dirty. Without
    # rotation the same head of the list would be served forever.
    budget = Budget(max_bytes=300)
    n = 10
    big = 7
    served_at: dict[int, list[int]] = {i: [] for i in range(n)}
    believed = None
    for r in range(1, 16):
        fps = [fingerprint("hot", i, segments=1, size=(1000 if i == big else 100), mtime=r) for i in range(n)]
        plan = store.begin_run("dag", 1, f"r{r}", believed_epoch=believed, fingerprints=fps, budget=budget)
        assert len(plan.selected) + len(plan.deferred) == n and plan.clean == []
        used = sum(p.cost.bytes for p in plan.selected)
        if any(p.partition == big for p in plan.selected):
            assert len(plan.selected) == 1 and plan.selected[0].oversize  # served alone
        else:
            assert used <= 300
            assert len(plan.selected) == 3  # budget filled
        for p in plan.selected:
            served_at[p.partition].append(r)
        store.finish_run(plan, all_ok(plan))
        believed = plan.epoch
    assert all(served_at[i] for i in range(n)), served_at
    # No starvation: with 10 partitions, 3 per run (or the big one alone), nobody waits long.
    for i, runs in served_at.items():
        gaps = [b - a for a, b in zip([0, *runs], runs, strict=False)]
        assert max(gaps) <= 5, (i, runs)
    assert len(served_at[big]) >= 2


def test_budget_by_segments_and_costs_from_the_caller(store: SessionStore) -> None:
    fps = fleet(6, segments=2)  # 2 segments each
    plan = store.begin_run("dag", 1, "r1", believed_epoch=None, fingerprints=fps, budget=Budget(max_segments=5))
    assert len(plan.selected) == 2 and len(plan.deferred) == 4
    store.abandon_run(plan)
    costs = {fp.key: Cost(bytes=1, segments=1) for fp in fps}
    plan = store.begin_run(
        "dag", 1, "r1b", believed_epoch=None, fingerprints=fps, budget=Budget(max_segments=5), costs=costs
    )
    assert len(plan.selected) == 5 and len(plan.deferred) == 1
    store.abandon_run(plan)


def test_deferred_partitions_are_served_first_by_later_runs(store: SessionStore) -> None:
    fps = fleet(9)
    budget = Budget(max_bytes=600)  # 3 partitions of 200 bytes
    plan = store.begin_run("dag", 1, "r1", believed_epoch=None, fingerprints=fps, budget=budget)
    first_batch = keys(plan.selected)
    deferred = keys(plan.deferred)
    assert len(first_batch) == 3 and len(deferred) == 6
    store.finish_run(plan, all_ok(plan))
    plan2 = store.begin_run("dag", 1, "r2", believed_epoch=plan.epoch, fingerprints=fps, budget=budget)
    assert keys(plan2.selected) == deferred[:3]
    assert all(p.reasons == [DirtyReason.NOT_DONE] for p in plan2.selected)
    assert sorted(keys(plan2.clean)) == sorted(first_batch)
    store.finish_run(plan2, all_ok(plan2))
    plan3 = store.begin_run("dag", 1, "r3", believed_epoch=plan2.epoch, fingerprints=fps, budget=budget)
    assert keys(plan3.selected) == deferred[3:]
    store.finish_run(plan3, all_ok(plan3))
    plan4 = store.begin_run("dag", 1, "r4", believed_epoch=plan3.epoch, fingerprints=fps, budget=budget)
    assert plan4.selected == [] and len(plan4.clean) == 9
    store.abandon_run(plan4)


def test_persistently_failing_partitions_lose_priority_so_others_are_served(store_url: str, clock: Clock) -> None:
    store = SessionStore(store_url, clock=clock, failed_first_runs=2)
    budget = Budget(max_bytes=200)  # one partition per run
    fps = fleet(3)
    served: list[int] = []
    believed = None
    for r in range(8):
        plan = store.begin_run("dag", 1, f"r{r}", believed_epoch=believed, fingerprints=fps, budget=budget)
        assert len(plan.selected) == 1
        served.append(plan.selected[0].partition)
        # Partition 0 always fails; the others succeed.
        outcomes = {p.key: Outcome.failed("bad") if p.partition == 0 else Outcome.ok() for p in plan.selected}
        store.finish_run(plan, outcomes)
        believed = plan.epoch
    assert {1, 2} <= set(served), served
    store.close()


# -- epochs ----------------------------------------------------------------------------------


def test_epoch_mismatch_forces_full_rescan(store: SessionStore) -> None:
    fps = fleet(4)
    first = run(store, fps, None)
    plan = store.begin_run("dag", 1, "r2", believed_epoch=first.epoch + 3, fingerprints=fps, budget=None)
    assert plan.full_rescan and "epoch mismatch: caller believes 4, store is at 1" in (plan.full_rescan_reason or "")
    assert len(plan.selected) == 4 and plan.clean == []
    assert all(p.reasons == [DirtyReason.FULL_RESCAN] for p in plan.selected)
    assert plan.epoch == 5  # never goes back below what a caller has seen
    store.finish_run(plan, all_ok(plan))
    again = store.begin_run("dag", 1, "r3", believed_epoch=5, fingerprints=fps, budget=None)
    assert not again.full_rescan and again.selected == [] and again.epoch == 6
    store.abandon_run(again)


def test_unknown_epoch_forces_full_rescan(store: SessionStore) -> None:
    fps = fleet(3)
    run(store, fps, None)
    plan = store.begin_run("dag", 1, "r2", believed_epoch=None, fingerprints=fps, budget=None)
    assert plan.full_rescan and "unknown" in (plan.full_rescan_reason or "")
    assert len(plan.selected) == 3
    store.abandon_run(plan)


def test_lost_state_forces_full_rescan(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "state.sqlite"
    fps = fleet(3)
    s1 = SessionStore(f"sqlite:///{path}", clock=clock)
    first = run(s1, fps, None)
    s1.close()
    path.unlink()
    s2 = SessionStore(f"sqlite:///{path}", clock=clock)
    plan = s2.begin_run("dag", 1, "r2", believed_epoch=first.epoch, fingerprints=fps, budget=None)
    assert plan.full_rescan and len(plan.selected) == 3
    assert plan.session_id != first.session_id
    assert plan.epoch == first.epoch + 1
    s2.abandon_run(plan)
    s2.close()


def test_state_restored_from_backup_forces_full_rescan(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "state.sqlite"
    backup = tmp_path / "backup.sqlite"
    fps = fleet(3)
    store = SessionStore(f"sqlite:///{path}", clock=clock)
    p1 = run(store, fps, None, run_id="r1")
    store.close()
    shutil.copy(path, backup)
    store = SessionStore(f"sqlite:///{path}", clock=clock)
    changed = [fingerprint("orders", 0, size=5), *fps[1:]]
    p2 = run(store, changed, p1.epoch, run_id="r2")
    assert keys(p2.selected) == [changed[0].key]
    store.close()
    shutil.copy(backup, path)  # the state goes back to epoch 1; partition 0's change is forgotten
    store = SessionStore(f"sqlite:///{path}", clock=clock)
    p3 = store.begin_run("dag", 1, "r3", believed_epoch=p2.epoch, fingerprints=changed, budget=None)
    assert p3.full_rescan and "caller believes 2, store is at 1" in (p3.full_rescan_reason or "")
    assert len(p3.selected) == 3
    assert p3.epoch == 3
    store.abandon_run(p3)
    store.close()


def test_full_rescan_over_budget_leaves_the_rest_dirty(store: SessionStore) -> None:
    fps = fleet(4)
    first = run(store, fps, None)  # all seen, all clean
    plan = store.begin_run("dag", 1, "r2", believed_epoch=None, fingerprints=fps, budget=Budget(max_bytes=400))
    assert plan.full_rescan and len(plan.selected) == 2 and len(plan.deferred) == 2
    store.finish_run(plan, all_ok(plan))
    nxt = store.begin_run("dag", 1, "r3", believed_epoch=plan.epoch, fingerprints=fps, budget=None)
    assert not nxt.full_rescan
    # What the untrusted state said about the deferred ones is gone: they are still to do.
    assert sorted(keys(nxt.selected)) == sorted(keys(plan.deferred))
    assert all(p.reasons == [DirtyReason.NOT_DONE] for p in nxt.selected)
    assert first.session_id == nxt.session_id
    store.abandon_run(nxt)


def test_run_plan_round_trips_as_json(store: SessionStore) -> None:
    fps = fleet(3)
    plan = store.begin_run("dag", 1, "r1", believed_epoch=None, fingerprints=fps, budget=Budget(max_bytes=400))
    again = RunPlan.model_validate_json(plan.model_dump_json())
    assert again == plan
    store.finish_run(again, all_ok(again))  # e.g. begin and finish in different Airflow tasks
    assert store.sessions()[0].epoch == 1


# -- leases ----------------------------------------------------------------------------------


def test_concurrent_run_is_refused_naming_the_holder(store: SessionStore, clock: Clock) -> None:
    fps = fleet(2)
    holder = store.begin_run("dag", 1, "run-A", believed_epoch=None, fingerprints=fps, budget=None)
    clock.advance(timedelta(minutes=5))
    with pytest.raises(SessionBusyError) as err:
        store.begin_run("dag", 1, "run-B", believed_epoch=None, fingerprints=fps, budget=None)
    msg = str(err.value)
    assert "run-A" in msg and holder.started_at.isoformat() in msg
    assert err.value.holder_run_id == "run-A"
    # Another broker or DAG is independent.
    other = store.begin_run("dag", 2, "run-C", believed_epoch=None, fingerprints=fps, budget=None)
    store.abandon_run(other)
    store.finish_run(holder, all_ok(holder))
    after = store.begin_run("dag", 1, "run-B", believed_epoch=holder.epoch, fingerprints=fps, budget=None)
    assert not after.full_rescan
    store.abandon_run(after)


def test_concurrent_begin_from_four_threads_lets_exactly_one_in(store_url: str) -> None:
    url = store_url
    SessionStore(url).close()  # tables exist before the race
    fps = fleet(200)
    results: list[object] = []
    barrier = threading.Barrier(4)

    def attempt(i: int) -> None:
        s = SessionStore(url)
        barrier.wait()
        try:
            results.append(s.begin_run("dag", 1, f"run-{i}", believed_epoch=None, fingerprints=fps, budget=None))
        except SessionBusyError as e:
            results.append(e)
        finally:
            s.close()

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    plans = [r for r in results if isinstance(r, RunPlan)]
    refused = [r for r in results if isinstance(r, SessionBusyError)]
    assert len(plans) == 1 and len(refused) == 3
    assert all(e.holder_run_id == plans[0].run_id for e in refused)


def test_store_transactions_wait_for_each_other(store_url: str, clock: Clock) -> None:
    """A run's plan or commit never interleaves with another store transaction (PostgreSQL's
    READ COMMITTED alone would let a late commit and a new run both write epoch N + 1)."""
    holder = SessionStore(store_url, clock=clock)
    other = SessionStore(store_url, clock=clock)
    done = threading.Event()

    def plan_and_abandon() -> None:
        plan = other.begin_run("dag", 1, "r", believed_epoch=None, fingerprints=fleet(2), budget=None)
        other.abandon_run(plan)
        done.set()

    worker = threading.Thread(target=plan_and_abandon)
    with holder._engine.begin():  # any open transaction of the store
        worker.start()
        assert not done.wait(1.0), "a store transaction ran while another was open"
    assert done.wait(30)
    worker.join()
    holder.close()
    other.close()


def test_stale_lease_expires_and_the_crashed_run_cannot_commit(store_url: str, clock: Clock) -> None:
    store = SessionStore(store_url, clock=clock, lease_ttl=timedelta(hours=1))
    fps = fleet(3)
    crashed = store.begin_run("dag", 1, "crashed", believed_epoch=None, fingerprints=fps, budget=None)
    clock.advance(timedelta(minutes=59))
    with pytest.raises(SessionBusyError):
        store.begin_run("dag", 1, "next", believed_epoch=None, fingerprints=fps, budget=None)
    clock.advance(timedelta(minutes=2))
    nxt = store.begin_run("dag", 1, "next", believed_epoch=None, fingerprints=fps, budget=None)
    assert nxt.full_rescan
    with pytest.raises(StaleRunError, match="lost the lease"):
        store.finish_run(crashed, all_ok(crashed))
    store.finish_run(nxt, all_ok(nxt))
    assert store.sessions()[0].epoch == 1
    store.close()


def test_late_finish_after_expiry_is_accepted_when_nobody_took_over(store_url: str, clock: Clock) -> None:
    store = SessionStore(store_url, clock=clock, lease_ttl=timedelta(hours=1))
    fps = fleet(2)
    slow = store.begin_run("dag", 1, "slow", believed_epoch=None, fingerprints=fps, budget=None)
    clock.advance(timedelta(hours=3))
    assert store.evict_idle() == []  # drops the expired lease, keeps the session
    assert store.sessions()[0].lease_run_id is None
    store.finish_run(slow, all_ok(slow))
    assert store.sessions()[0].epoch == 1
    store.close()


def test_same_run_id_may_take_over_its_own_lease(store: SessionStore) -> None:
    fps = fleet(2)
    first = store.begin_run("dag", 1, "airflow-run-1", believed_epoch=None, fingerprints=fps, budget=None)
    retry = store.begin_run("dag", 1, "airflow-run-1", believed_epoch=None, fingerprints=fps, budget=None)
    with pytest.raises(StaleRunError):
        store.finish_run(first, all_ok(first))  # the earlier attempt's plan is void
    store.finish_run(retry, all_ok(retry))
    assert store.sessions()[0].epoch == 1


def test_abandon_run_releases_the_lease_without_advancing(store: SessionStore) -> None:
    fps = fleet(2)
    first = run(store, fps, None)
    plan = store.begin_run("dag", 1, "r2", believed_epoch=first.epoch, fingerprints=fleet(2, size=9), budget=None)
    assert len(plan.selected) == 2
    assert store.abandon_run(plan) is True
    assert store.abandon_run(plan) is False
    again = store.begin_run("dag", 1, "r3", believed_epoch=first.epoch, fingerprints=fleet(2, size=9), budget=None)
    assert not again.full_rescan and len(again.selected) == 2 and again.epoch == 2
    store.abandon_run(again)


def test_crash_mid_commit_leaves_the_previous_state(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    fps = fleet(5)
    first = run(store, fps, None)
    changed = fleet(5, size=7)
    plan = store.begin_run("dag", 1, "r2", believed_epoch=first.epoch, fingerprints=changed, budget=None)
    original = store_module._PartitionWrites.execute

    def crash(self: object, conn: object, session_id: str) -> None:
        original(self, conn, session_id)  # the partition rows are written ...
        raise RuntimeError("power cut")  # ... and the process dies before the session row

    monkeypatch.setattr(store_module._PartitionWrites, "execute", crash)
    with pytest.raises(RuntimeError, match="power cut"):
        store.finish_run(plan, all_ok(plan))
    monkeypatch.undo()
    [info] = store.sessions()
    assert info.epoch == 1 and info.lease_run_id == "r2"  # nothing committed, lease still held
    store.abandon_run(plan)
    again = store.begin_run("dag", 1, "r3", believed_epoch=first.epoch, fingerprints=changed, budget=None)
    assert not again.full_rescan and len(again.selected) == 5  # the partitions are still dirty
    store.abandon_run(again)


# -- eviction --------------------------------------------------------------------------------


def test_idle_sessions_are_evicted(store_url: str, clock: Clock) -> None:
    store = SessionStore(store_url, clock=clock, idle_eviction=timedelta(days=7))
    fps = fleet(3)
    old = run(store, fps, None, name="old-dag")
    clock.advance(timedelta(days=5))
    fresh = run(store, fps, None, name="fresh-dag")
    clock.advance(timedelta(days=3))
    assert store.evict_idle() == [("old-dag", 1)]
    assert [s.name for s in store.sessions()] == ["fresh-dag"]
    plan = store.begin_run("old-dag", 1, "r", believed_epoch=old.epoch, fingerprints=fps, budget=None)
    assert plan.full_rescan and plan.session_id != old.session_id
    store.abandon_run(plan)
    assert fresh.session_id in {s.session_id for s in store.sessions()}
    store.close()


def test_idle_eviction_spares_a_running_session(store_url: str, clock: Clock) -> None:
    store = SessionStore(
        store_url,
        clock=clock,
        idle_eviction=timedelta(hours=1),
        lease_ttl=timedelta(hours=6),
    )
    plan = store.begin_run("dag", 1, "long", believed_epoch=None, fingerprints=fleet(2), budget=None)
    clock.advance(timedelta(hours=2))
    assert store.evict_idle() == []
    store.finish_run(plan, all_ok(plan))
    assert store.sessions()[0].epoch == 1
    store.close()


def test_slot_limit_evicts_the_least_recently_used_session(store_url: str, clock: Clock) -> None:
    store = SessionStore(store_url, clock=clock, slot_limit=2)
    fps = fleet(2)
    a = run(store, fps, None, name="a")
    clock.advance(timedelta(minutes=1))
    b = run(store, fps, None, name="b")
    clock.advance(timedelta(minutes=1))
    run(store, fps, a.epoch, name="a")  # a is now more recently used than b
    clock.advance(timedelta(minutes=1))
    c = run(store, fps, None, name="c")
    assert c.session_id is not None
    assert sorted(s.name for s in store.sessions()) == ["a", "c"]
    again = store.begin_run("b", 1, "r", believed_epoch=b.epoch, fingerprints=fps, budget=None)
    assert again.full_rescan  # b's state was evicted
    store.abandon_run(again)
    store.close()


def test_no_free_slot_runs_sessionless(store_url: str, clock: Clock) -> None:
    store = SessionStore(store_url, clock=clock, slot_limit=1)
    fps = fleet(3)
    running = store.begin_run("a", 1, "ra", believed_epoch=None, fingerprints=fps, budget=None)
    plan = store.begin_run("b", 1, "rb", believed_epoch=None, fingerprints=fps, budget=Budget(max_bytes=400))
    assert plan.sessionless and plan.session_id is None and plan.epoch == 0
    assert plan.full_rescan and "sessionless" in (plan.full_rescan_reason or "")
    assert len(plan.selected) == 2 and len(plan.deferred) == 1  # the budget still applies
    with pytest.raises(SessionBusyError):  # the lease still guards (b, 1)
        store.begin_run("b", 1, "rb2", believed_epoch=None, fingerprints=fps, budget=None)
    store.finish_run(plan, all_ok(plan))
    assert [s.name for s in store.sessions()] == ["a"]
    store.finish_run(running, all_ok(running))
    # a is idle now: b gets the slot by evicting it.
    nxt = store.begin_run("b", 1, "rb3", believed_epoch=None, fingerprints=fps, budget=None)
    assert not nxt.sessionless
    store.finish_run(nxt, all_ok(nxt))
    assert [s.name for s in store.sessions()] == ["b"]
    store.close()


# -- scale -----------------------------------------------------------------------------------


def test_ten_thousand_clean_partitions_plan_quickly(store_url: str) -> None:
    store = SessionStore(store_url)
    fps = [fingerprint(f"topic-{i % 100}", i // 100, segments=3) for i in range(10_000)]
    first = run(store, fps, None)
    assert len(first.selected) == 10_000
    # A new scheduled run: callers rebuild fingerprints from fresh stats; time plan + commit.
    fresh = [fingerprint(f"topic-{i % 100}", i // 100, segments=3) for i in range(10_000)]
    started = time.perf_counter()
    plan = store.begin_run("dag", 1, "r2", believed_epoch=first.epoch, fingerprints=fresh, budget=None)
    store.finish_run(plan, {})
    elapsed = time.perf_counter() - started
    assert plan.selected == [] and len(plan.clean) == 10_000
    assert elapsed < 10.0, f"planning 10,000 clean partitions took {elapsed:.2f}s"
    store.close()


# -- configuration ---------------------------------------------------------------------------


def test_default_url_is_under_the_home_state_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (settings.ENV_SESSIONS_URL, "KMIGRATE_HOME", "KMIGRATE_OUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KMIGRATE_HOME", str(tmp_path / "home"))
    store = SessionStore()
    expected = tmp_path / "home" / "state" / "sessions.sqlite"
    assert store.url == f"sqlite:///{expected.resolve()}"
    run(store, fleet(1), None)
    assert expected.is_file()
    store.close()
    # Without a home set: the XDG state directory, wherever the process runs from.
    monkeypatch.delenv("KMIGRATE_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path / "home")
    assert store_module.default_store_url() == f"sqlite:///{(tmp_path / 'xdg' / 'kmigrate' / 'state').resolve()}" \
        "/sessions.sqlite"
    monkeypatch.setenv(settings.ENV_SESSIONS_URL, "postgresql+psycopg://kmig@db/kmig")
    assert store_module.default_store_url() == "postgresql+psycopg://kmig@db/kmig"


def test_unsupported_backend_is_refused_without_showing_the_password() -> None:
    with pytest.raises(ValueError, match="only sqlite and postgresql") as err:
        SessionStore("mysql+pymysql://kmig:hunter2@db/kmig")
    assert "hunter2" not in str(err.value)


def test_any_sqlalchemy_url_second_sqlite_file(tmp_path: Path) -> None:
    a = SessionStore(f"sqlite:///{tmp_path / 'a' / 'one.sqlite'}")
    b = SessionStore(f"sqlite:///{tmp_path / 'b' / 'two.sqlite'}")
    pa = run(a, fleet(2), None)
    assert b.sessions() == []
    pb = b.begin_run("dag", 1, "r", believed_epoch=pa.epoch, fingerprints=fleet(2), budget=None)
    assert pb.full_rescan  # separate databases share nothing
    b.abandon_run(pb)
    a.close()
    b.close()


def test_schema_and_statements_compile_for_postgresql() -> None:
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.schema import CreateTable

    from migration.sessions.schema import metadata

    dialect = postgresql.dialect()
    ddl = {t.name: str(CreateTable(t).compile(dialect=dialect)) for t in metadata.sorted_tables}
    assert set(ddl) == {"migration_session", "migration_session_partition", "migration_session_lease"}
    assert "BIGINT" in ddl["migration_session"] and "PRIMARY KEY (name, broker_id)" in ddl["migration_session"]
    assert "PRIMARY KEY (session_id, topic, partition, log_dir)" in ddl["migration_session_partition"]


def test_naive_clock_is_rejected(tmp_path: Path) -> None:
    store = SessionStore(f"sqlite:///{tmp_path / 's.sqlite'}", clock=lambda: datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        store.begin_run("dag", 1, "r", believed_epoch=None, fingerprints=fleet(1), budget=None)
    store.close()


def test_changes_made_by_the_run_itself_do_not_make_it_dirty_next_time(tmp_path):
    """A run that adds files (producer snapshots) commits what it left, not what it found."""
    from migration.sessions import Outcome, SessionStore, fingerprint_partition_dir

    logdir = tmp_path / "logs"
    pdir = logdir / "orders-0"
    pdir.mkdir(parents=True)
    (pdir / "00000000000000000000.log").write_bytes(b"x" * 10)
    (pdir / "00000000000000000005.log").write_bytes(b"y" * 10)
    store = SessionStore(f"sqlite:///{tmp_path / 's.sqlite'}")
    plan = store.begin_run("t", 1, "r1", believed_epoch=None,
                           fingerprints=[fingerprint_partition_dir(pdir, log_dir=str(logdir))])
    assert len(plan.selected) == 1
    (pdir / "00000000000000000005.snapshot").write_bytes(b"\x00" * 10)  # the run's own change
    key = plan.selected[0].key
    store.finish_run(plan, {key: Outcome.ok()}, {key: fingerprint_partition_dir(pdir, log_dir=str(logdir))})
    plan2 = store.begin_run("t", 1, "r2", believed_epoch=plan.epoch,
                            fingerprints=[fingerprint_partition_dir(pdir, log_dir=str(logdir))])
    assert plan2.selected == [] and len(plan2.clean) == 1
    # without the after-run fingerprint the same change would count as dirty
    store.finish_run(plan2, {})
    (pdir / "00000000000000000010.snapshot").write_bytes(b"\x00" * 10)
    plan3 = store.begin_run("t", 1, "r3", believed_epoch=plan2.epoch,
                            fingerprints=[fingerprint_partition_dir(pdir, log_dir=str(logdir))])
    assert len(plan3.selected) == 1
