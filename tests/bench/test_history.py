"""The benchmark's run history (bench/history.py): each run of bench.run appends one entry."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from bench import history, run

ROOT = Path(__file__).resolve().parents[2]


def _results(value: float, status: str) -> dict[str, Any]:
    """A results.json document as bench.run writes it: report-only rows, target rows, a crash."""
    return {
        "machine": {"cores": 2, "cpu": "AMD EPYC", "ram_gib": 23.5, "python": "3.11.7", "date": "2026-11-25",
                    "record_core": "record core: compiled (CRC-32C sse4.2, CRC-32 pclmul)", "python_core": False,
                    "scale": 20, "command": "python -m bench.run --quick", "total_seconds": 35.2},
        "summary": {"PASS": 1, "MISS": 1, "ERROR": 1, "crashed": ["spark"]},
        "rows": [
            {"name": "cp -a cluster (baseline v1)", "seconds": 0.1, "target": "report only", "status": "INFO"},
            {"name": "upgrade --to v1 (inline engine, whole cluster)", "key": "upgrade-v1", "seconds": 0.3,
             "ratio": f"{value}x floor",
             "target": ">= 0.6x codec floor", "status": status, "value": value, "threshold": 0.6, "ceiling": 0.59,
             "ceiling_one_core": 0.51},
            {"name": "worker rewriting one 0.06 GiB segment --to v2", "key": "rss", "ratio": "peak RSS 50 MB",
             "target": "< 300 MB (for 1 GiB; smaller segment here)", "status": "PASS", "value": 49.8,
             "threshold": 300.0, "ceiling": None},
            {"name": "spark: crashed", "ratio": "RuntimeError: boom", "error": "boom", "target": "", "status": "ERROR"},
        ],
    }


def test_a_runs_entry_validates_and_a_second_run_appends(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    argv = ["python", "-m", "bench.run", "--quick"]
    first = history.entry_from_results(_results(0.52, "MISS (ceiling 0.59x)"), argv=argv, quick=True,
                                       date="2026-11-25", commit_dirty=("124464e", False))
    history.append(first, path)
    lines = path.read_text().splitlines()
    assert len(lines) == 1
    entry = history.Entry.model_validate_json(lines[0])
    raw = json.loads(lines[0])
    assert raw["version"] == 1 and raw["quick"] is True and raw["commit"] == "124464e" and raw["dirty"] is False
    assert raw["summary"] == {"pass": 1, "miss": 1, "error": 1}
    assert raw["machine"]["cpus"] == 2 and raw["machine"]["core"].startswith("record core: compiled")
    assert raw["duration_s"] == 35.2 and raw["command"] == argv
    # the target rows only, each with its stable key; the report-only row stays in results.json
    assert [(r.key, r.status) for r in entry.rows] == [
        ("upgrade-v1", "MISS (ceiling 0.59x)"), ("rss", "PASS"), (None, "ERROR")]
    assert entry.rows[0].value == 0.52 and entry.rows[0].threshold == 0.6 and entry.rows[0].ceiling == 0.59
    assert entry.rows[0].ceiling_one_core == 0.51

    second = history.entry_from_results(_results(0.61, "PASS"), argv=argv, quick=False, date="2026-11-26",
                                        commit_dirty=("df705cc", True))
    history.append(second, path)
    entries = history.load(path)
    assert [(e.commit, e.dirty, e.quick, e.rows[0].status) for e in entries] == [
        ("124464e", False, True, "MISS (ceiling 0.59x)"), ("df705cc", True, False, "PASS")]
    assert entries[0] == first  # the first line is kept as it was
    assert not list(tmp_path.glob("*.tmp"))  # durable_replace's temporary file is gone


def test_a_line_that_is_no_entry_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"version": 2, "date": null}\n')
    with pytest.raises(ValueError):
        history.load(path)


def test_bench_run_records_its_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bench.run's own call: the entry lands in the history file with the run's argv."""
    monkeypatch.setattr(history, "HISTORY", tmp_path / "history.jsonl")
    run._record_history(_results(0.52, "MISS"), ["--quick", "--only", "upgrade"], quick=True, date="2026-11-25")
    (entry,) = history.load()
    assert entry.command == ["python", "-m", "bench.run", "--quick", "--only", "upgrade"]
    assert entry.quick is True and entry.date == "2026-11-25"
    assert entry.commit is not None  # this checkout's HEAD


def _target_keys() -> list[str | None]:
    """The ``key`` of every ``_target`` call in bench/ (None: a call without one), an f-string's
    fields expanded over the upgrade targets (``f"upgrade-{target}"``: upgrade-v1, upgrade-v2)."""
    keys: list[str | None] = []
    for path in sorted((ROOT / "bench").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            func = node.func if isinstance(node, ast.Call) else None
            if (func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)) != "_target":
                continue
            assert isinstance(node, ast.Call)
            key = next((k.value for k in node.keywords if k.arg == "key"), None)
            if isinstance(key, ast.Constant):
                keys.append(key.value)
            elif isinstance(key, ast.JoinedStr):
                keys += ["".join(v.value if isinstance(v, ast.Constant) else t for v in key.values)
                         for t in ("v1", "v2")]
            else:
                keys.append(None)
    return keys


def test_every_target_of_bench_run_has_a_key() -> None:
    """Every target row bench.run makes gets one of the keys, each key one target; an unknown
    key is refused."""
    keys = _target_keys()
    assert None not in keys
    assert sorted(keys) == sorted(history.KEYS)
    with pytest.raises(ValueError):
        run._target({"name": "x"}, 1.0, 1.0, key="upgrade-v3", target=">= 1x", ratio="1x")
    row = run._target({"name": "x"}, 1.0, 1.0, key="upgrade-v1", target=">= 1x", ratio="1x")
    assert row["key"] == "upgrade-v1" and row["status"] == "PASS"


def test_the_committed_history_validates() -> None:
    """Every line of bench/history.jsonl is an Entry; the notebook's runs come first, oldest first."""
    entries = history.load(ROOT / "bench" / "history.jsonl")
    assert entries, "bench/history.jsonl holds the runs so far"
    seeded = [e for e in entries if e.source == "docs/benchmarks.md before the rewrite"]
    assert entries[:len(seeded)] == seeded
    dated = [e.date for e in seeded if e.date is not None]
    assert dated == sorted(dated)
