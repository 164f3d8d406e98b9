from __future__ import annotations

from pydantic import BaseModel

from migration.formats.digest import digest_records
from migration.formats.model import Header, Record
from migration.runtime.engine import NoParams, Unit, UnitKind, execute_unit, get_engine, serial_groups, unit_kinds


def test_digest_distinguishes_null_from_empty_and_tracks_timestamps():
    a = digest_records([Record(0, -1, None, b"v")])
    b = digest_records([Record(0, -1, b"", b"v")])
    c = digest_records([Record(0, 5, None, b"v")])
    assert a.content != b.content
    assert a.content == c.content and a.full != c.full
    assert a.matches(c, timestamps=False) and not a.matches(c)
    h = digest_records([Record(0, -1, None, b"v", (Header("k", None),))])
    assert h.content != a.content
    assert a.records == 1 and a.first_offset == a.last_offset == 0


def _unit(i: int, kind: str = "test-echo") -> Unit:
    return Unit(kind=kind, id=f"u{i}", log_dir="/nonexistent", path=f"/nonexistent/{i}", size=i)


def echo_unit(unit: Unit, options: dict) -> dict:
    if unit.size == 3:
        raise RuntimeError("boom")
    return {"status": "ok", "echo": unit.path, "factor": options["factor"] * unit.size}


def test_inline_engine_turns_exceptions_into_failed_results():
    seen = []
    out = get_engine("inline").run([_unit(i) for i in range(5)], {"factor": 2},
                                   progress=lambda d, t, r: seen.append((d, t)),
                                   kinds=unit_kinds(UnitKind("test-echo", NoParams, echo_unit)))
    assert [r["status"] for r in out] == ["ok", "ok", "ok", "failed", "ok"]
    assert "boom" in out[3]["error"] and out[3]["unit_id"] == "u3"
    assert out[4]["factor"] == 8 and seen[-1] == (5, 5)


def test_unknown_unit_kind_fails_that_unit_only():
    r = execute_unit(_unit(1, "nope"), {}, unit_kinds(UnitKind("test-echo", NoParams, echo_unit)))
    assert r["status"] == "failed" and "unknown unit kind 'nope'" in r["error"] and "test-echo" in r["error"]


class _SegmentLike(BaseModel):
    base_offset: int


def test_parameters_that_do_not_fit_the_kind_fail_the_unit_before_it_runs():
    ran = []
    kinds = unit_kinds(UnitKind("typed", _SegmentLike, lambda u, o: ran.append(u) or {"status": "ok"}))
    bad = Unit(kind="typed", id="u1", log_dir="/x", path="/x", params={"base_offset": "zero"})
    r = execute_unit(bad, {}, kinds)
    assert r["status"] == "failed" and "the parameters of unit u1 do not fit kind typed" in r["error"]
    assert "base_offset" in r["error"] and not ran
    ok = execute_unit(bad.model_copy(update={"params": {"base_offset": 5}}), {}, kinds)
    assert ok["status"] == "ok" and ran


def test_a_kind_is_registered_once():
    import pytest

    with pytest.raises(ValueError, match="registered twice"):
        unit_kinds(UnitKind("k", NoParams, echo_unit), UnitKind("k", NoParams, echo_unit))


def _spark_echo(spark):
    """The echo unit function as executors import it: a top-level module shipped with addPyFile
    (the function travels by module and name)."""
    import importlib
    import sys
    from pathlib import Path

    here = Path(__file__).with_name("spark_echo_units.py")
    spark.sparkContext.addPyFile(str(here))
    sys.path.insert(0, str(here.parent))
    try:
        return importlib.import_module("spark_echo_units").echo_unit
    finally:
        sys.path.remove(str(here.parent))


def test_spark_engine_runs_units_in_executors(spark):
    options = {"factor": 3}
    seen: list[tuple[int, int]] = []
    engine = get_engine("spark", spark=spark)
    engine.progress_interval = 0.05
    out = engine.run([_unit(i) for i in range(4)], options, progress=lambda d, t, r: seen.append((d, t)),
                     kinds=unit_kinds(UnitKind("test-echo", NoParams, _spark_echo(spark))))
    assert seen and seen[-1] == (4, 4) and all(t == 4 and 0 <= d <= 4 for d, t in seen)
    assert [r["unit_id"] for r in out] == ["u0", "u1", "u2", "u3"]
    assert [r["status"] for r in out] == ["ok"] * 4
    assert [r["factor"] for r in out] == [0, 3, 6, 9]
    import os

    assert all(r["pid"] != os.getpid() for r in out)  # ran in Python workers, not here


def test_serial_groups_keep_list_order_and_put_each_key_at_its_first_unit():
    keys = ["p0", None, "p1", "p0", None, "p1", "p0"]
    units = [Unit(kind="k", id=f"u{i}", log_dir="/x", path="/x", serial_key=k) for i, k in enumerate(keys)]
    assert serial_groups(units) == [[0, 3, 6], [1], [2, 5], [4]]


def test_spark_engine_runs_the_units_of_one_serial_key_in_one_task_in_order(spark):
    """Two slots, two keys of three units each: the units of a key never overlap in time (one
    replacement in flight per partition), and the results come back in the units' order."""
    options = {"factor": 1, "sleep": 0.2}
    units = [Unit(kind="test-echo", id=f"u{i}", log_dir="/x", path=f"/x/{i}", size=i, serial_key=f"p{i % 2}")
             for i in range(6)]
    out = get_engine("spark", spark=spark).run(units, options,
                                               kinds=unit_kinds(UnitKind("test-echo", NoParams, _spark_echo(spark))))
    assert [r["unit_id"] for r in out] == [u.id for u in units]
    for key in (0, 1):
        mine = [r for i, r in enumerate(out) if i % 2 == key]
        assert len({r["pid"] for r in mine}) == 1
        assert all(a["ended"] <= b["started"] for a, b in zip(mine, mine[1:], strict=False))
