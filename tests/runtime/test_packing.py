"""Bin-packing of units into Spark tasks (runtime/engine.py, ``pack_units``): every unit once, a
serial key's units together and in order, balanced by bytes; and on Spark, a failing unit is
its own failure, progress is per unit, tasks per core is a setting."""

from __future__ import annotations

import random

import pytest

from migration.runtime.engine import (
    TASKS_PER_CORE_ENV,
    UNIT_FIXED_BYTES,
    NoParams,
    SparkEngine,
    Unit,
    UnitKind,
    pack_units,
    unit_kinds,
    unit_weight,
)


def _units(sizes_and_keys: list[tuple[int, str | None]]) -> list[Unit]:
    return [Unit(kind="test-echo", id=f"u{i}", log_dir="/x", path=f"/x/{i}", size=s, serial_key=k)
            for i, (s, k) in enumerate(sizes_and_keys)]


def _check_invariants(units: list[Unit], tasks: list[list[int]]) -> None:
    flat = [i for t in tasks for i in t]
    assert sorted(flat) == list(range(len(units)))  # every unit exactly once
    assert all(tasks)  # no empty task
    where: dict[str, int] = {}
    for n, t in enumerate(tasks):
        for i in t:
            key = units[i].serial_key
            if key is not None:
                assert where.setdefault(key, n) == n, f"serial key {key} split across tasks"
        # inside a task, the units of a key in list order
        for key in {units[i].serial_key for i in t} - {None}:
            mine = [i for i in t if units[i].serial_key == key]
            assert mine == sorted(mine)


def test_a_serial_key_stays_in_one_task_in_list_order():
    keys = ["p0", None, "p1", "p0", None, "p1", "p0", "p2", "p2"]
    units = _units([(100 * (i + 1), k) for i, k in enumerate(keys)])
    for bins in (1, 2, 3, 4, 10):
        tasks = pack_units(units, bins)
        _check_invariants(units, tasks)
        assert len(tasks) == min(bins, 5)  # five groups: p0, p1, p2 and two keyless units


def test_every_unit_exactly_once_and_keys_kept_on_random_jobs():
    rng = random.Random(30)
    for _ in range(200):
        n = rng.randrange(1, 60)
        units = _units([(rng.choice([0, 1, 60_000, 1 << 20, 1 << 30]),
                         rng.choice([None, *(f"p{k}" for k in range(rng.randrange(1, 12)))])) for _ in range(n)])
        _check_invariants(units, pack_units(units, rng.randrange(1, 20)))


def test_tasks_are_balanced_by_bytes_largest_first():
    """Many partitions of uneven sizes into 6 tasks: the heaviest task within the largest group of
    the lightest one (the LPT bound), and the tasks come heaviest first."""
    rng = random.Random(7)
    spec = []
    for p in range(200):
        for _ in range(rng.randrange(1, 5)):
            spec.append((rng.randrange(10_000, 5_000_000), f"p{p}"))
    units = _units(spec)
    tasks = pack_units(units, 6)
    loads = [sum(unit_weight(units[i]) for i in t) for t in tasks]
    groups: dict[str, int] = {}
    for u in units:
        groups[u.serial_key] = groups.get(u.serial_key, 0) + unit_weight(u)
    assert len(tasks) == 6
    assert max(loads) - min(loads) <= max(groups.values())
    assert max(loads) <= 1.05 * sum(loads) / 6
    assert loads == sorted(loads, reverse=True)


def test_a_skewed_partition_gets_a_task_of_its_own_and_the_rest_share_the_others():
    units = _units([(1 << 30, "big")] * 3 + [(60_000, f"p{i}") for i in range(100)])
    tasks = pack_units(units, 4)
    assert tasks[0] == [0, 1, 2]  # the heaviest task first, the big partition alone in it
    small = [sum(unit_weight(units[i]) for i in t) for t in tasks[1:]]
    assert max(small) - min(small) <= unit_weight(units[3])


def test_small_units_weigh_their_fixed_cost():
    """1,000 units of 60 KB do not weigh as one unit of 60 MB: each counts its fixed cost
    (journal, backup, fsyncs) too, so the 60 MB unit's task also takes hundreds of them."""
    units = _units([(60_000_000, "big")] + [(60_000, f"p{i}") for i in range(1000)])
    assert unit_weight(units[1]) == 60_000 + UNIT_FIXED_BYTES
    tasks = pack_units(units, 2)
    big = next(t for t in tasks if 0 in t)
    assert 300 < len(big) - 1 < 500  # by bytes alone: none (60 MB against 60 MB)


def test_units_without_a_key_are_spread_and_one_group_is_one_task():
    assert pack_units(_units([(10, None)] * 5), 2) == [[0, 2, 4], [1, 3]]
    assert pack_units(_units([(10, "p")] * 4), 8) == [[0, 1, 2, 3]]
    assert pack_units([], 4) == []


def test_tasks_per_core_setting(monkeypatch):
    class Conf:
        def __init__(self, values):
            self.values = values

        def get(self, key, default=None):
            return self.values.get(key, default)

    class Sc:
        defaultParallelism = 2

        def __init__(self, values):
            self.conf = Conf(values)

        def getConf(self):  # noqa: N802 - Spark's name
            return self.conf

    units = _units([(1000, f"p{i}") for i in range(40)])
    monkeypatch.delenv(TASKS_PER_CORE_ENV, raising=False)
    assert len(SparkEngine().plan_tasks(Sc({}), units)) == 6  # 2 cores x the default 3
    monkeypatch.setenv(TASKS_PER_CORE_ENV, "4")
    assert len(SparkEngine().plan_tasks(Sc({}), units)) == 8
    assert len(SparkEngine().plan_tasks(Sc({"spark.kmigrate.tasksPerCore": "1"}), units)) == 2
    assert len(SparkEngine(tasks_per_core=5).plan_tasks(Sc({"spark.kmigrate.tasksPerCore": "1"}), units)) == 10
    with pytest.raises(ValueError, match="at least 1"):
        SparkEngine().plan_tasks(Sc({"spark.kmigrate.tasksPerCore": "zero"}), units)


# ------------------------------------------------------------------ on Spark


def _spark_kind(spark, name: str = "echo_unit") -> UnitKind:
    import importlib
    import sys
    from pathlib import Path

    here = Path(__file__).with_name("spark_echo_units.py")
    spark.sparkContext.addPyFile(str(here))
    sys.path.insert(0, str(here.parent))
    try:
        return UnitKind("test-echo", NoParams, getattr(importlib.import_module("spark_echo_units"), name))
    finally:
        sys.path.remove(str(here.parent))


def test_a_failing_unit_does_not_fail_the_others_of_its_task(spark):
    """One task (tasks per core 1, one core's worth of units): the failing units fail alone, the
    others of the task run and report, results in the units' order."""
    units = _units([(10, "p0"), (10, "p0"), (10, "p1"), (10, None), (10, "p1")])
    options = {"factor": 2, "fail": ["u1", "u3"]}
    seen: list[tuple[int, int, str]] = []
    engine = SparkEngine(spark=spark, tasks_per_core=1)
    engine.progress_interval = 0.05
    out = engine.run(units, options, progress=lambda d, t, r: seen.append((d, t, r.get("status"))),
                     kinds=unit_kinds(_spark_kind(spark, "maybe_failing_unit")))
    assert [r["unit_id"] for r in out] == [u.id for u in units]
    assert [r["status"] for r in out] == ["ok", "failed", "ok", "failed", "ok"]
    assert "boom u1" in out[1]["error"]
    assert len({r["pid"] for r in out if "pid" in r}) <= 2  # at most one task per core
    # per unit: each unit seen once, the count rising to 5 of 5, the failures among them
    assert [d for d, _, _ in seen] == [1, 2, 3, 4, 5] and all(t == 5 for _, t, _ in seen)
    assert sorted(s for _, _, s in seen) == ["failed", "failed", "ok", "ok", "ok"]


def test_spark_packs_many_small_units_into_a_few_tasks_per_core(spark):
    """100 partitions of 3 units on local[2] with 3 tasks per core: 6 tasks (Python worker
    processes are reused, so few pids), every unit once, one partition's units in order in one
    task."""
    units = _units([(60_000, f"p{i // 3}") for i in range(300)])
    engine = SparkEngine(spark=spark, tasks_per_core=3)
    assert len(engine.plan_tasks(spark.sparkContext, units)) == 2 * 3
    out = engine.run(units, {"factor": 1}, kinds=unit_kinds(_spark_kind(spark)))
    assert [r["unit_id"] for r in out] == [u.id for u in units]
    assert all(r["status"] == "ok" for r in out)
    for p in range(100):
        mine = out[3 * p:3 * p + 3]
        assert len({r["pid"] for r in mine}) == 1
        assert all(a["ended"] <= b["started"] for a, b in zip(mine, mine[1:], strict=False))
