"""Crash safety of the Spark path: ``kmigrate upgrade --engine spark --master local[2]`` is
killed as a whole process tree (CLI driver, Spark's JVM, its Python workers: SIGKILL to the
process group, from inside an executor at an exact fault point), then

(a) Kafka's startup rules (LogLoader, simulated by ``kafka_loader``) are applied to the crashed
    log dir and every record must be there exactly once;
(b) ``kmigrate rollback`` on that Kafka-loaded dir restores the originals byte for byte, mtimes
    included;
(c) on the crashed state as it was, a re-run of the same run finishes with every record in
    place, and a rollback afterwards restores the originals again.

Broker 1 of the sample cluster has two partitions with three legacy segments each (v1
``clicks-v1-0``, v0 ``legacy-v0-0``), so two executors could work on one partition at once.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import tree_state
from kafka_loader import read_log_dir_records, simulate_log_dir_startup
from spark_kill import killed_at_fault

from migration.logdir.validation import validate_paths
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade, rollback_run

pytestmark = pytest.mark.slow

CLICKS_0 = "clicks-v1-0.00000000000000000000"
CLICKS_286 = "clicks-v1-0.00000000000000000286"
LEGACY_262 = "legacy-v0-0.00000000000000000262"

# (id, KMIGRATE_FAULT_AT): every scenario ends with killsession (the whole tree dies at once).
SCENARIOS = [
    # The lower segment of a partition holds .cleaned files (paused right after its journal
    # says cleaned) while the higher one has renamed its originals to .deleted: Kafka's loader
    # would delete the higher segment's .swap files (at or above the lowest .cleaned) and its
    # .deleted originals. Only one replace in flight per partition rules this state out.
    ("two-units-one-partition",
     f"journal-cleaned@{CLICKS_0}:1:pause4,old-deleted@{CLICKS_286}:1:killsession+journal-cleaned@{CLICKS_0}"),
    ("backup", f"backup@{LEGACY_262}:1:killsession"),
    ("write-batch", f"write-batch@{LEGACY_262}:40:killsession"),
    ("journal-cleaned", f"journal-cleaned@{LEGACY_262}:1:killsession"),
    ("swap-rename", f"swap-rename@{LEGACY_262}:2:killsession"),
    ("old-deleted", f"old-deleted@{LEGACY_262}:1:killsession"),
    ("swap-final", f"swap-final@{LEGACY_262}:2:killsession"),
    ("deleted-remove", f"deleted-remove@{LEGACY_262}:1:killsession"),
    ("replaced-any-unit", "replaced:4:killsession"),
]



@pytest.fixture(scope="module")
def source(sample_cluster_template) -> tuple[Path, dict[str, list[tuple]]]:
    src = sample_cluster_template.broker_log_dirs[1]
    return src, read_log_dir_records(src)


def _state_of_run(out: Path, run_id: str) -> dict[str, Path]:
    return {"runs": out / "runs" / run_id, "backups": out / "backups" / run_id}


def _save(paths: dict[str, Path], into: Path) -> None:
    for name, p in paths.items():
        shutil.copytree(p, into / name, copy_function=shutil.copy2)


def _restore(paths: dict[str, Path], frm: Path) -> None:
    for name, p in paths.items():
        shutil.rmtree(p)
        shutil.copytree(frm / name, p, copy_function=shutil.copy2)


@pytest.mark.parametrize(("name", "faults"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_spark_upgrade_killed_then_kafka_load_rollback_and_rerun(source, tmp_path, private_out, name,
                                                                 faults) -> None:
    src, expected = source
    log_dir = tmp_path / "kafka-logs"
    shutil.copytree(src, log_dir, copy_function=shutil.copy2)
    originals = tree_state(log_dir)
    run_id = f"spark-crash-{name}"
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    env = os.environ | {"KMIGRATE_FAULT_AT": faults, "KMIGRATE_FAULT_DIR": str(fault_dir),
                        "PYTHONPATH": str(Path.cwd())}
    killed_at_fault([sys.executable, "-m", "migration", "upgrade", str(log_dir), "--to", "v2",
                     "--engine", "spark", "--master", "local[2]", "--run-id", run_id], env)
    crashed = tmp_path / "crashed"
    shutil.copytree(log_dir, crashed, copy_function=shutil.copy2)
    run_state = _state_of_run(private_out, run_id)
    _save(run_state, tmp_path / "run-state")

    # (a) Kafka starts on the crashed log dir: every record exactly once.
    simulate_log_dir_startup(log_dir)
    assert read_log_dir_records(log_dir) == expected
    res = validate_paths([str(log_dir)])
    assert not [f for f in res.problems if f.code in ("CORRUPT_BATCH", "OFFSET_ORDER", "TRAILING_BYTES")]

    # (b) rollback from the state Kafka's loader left: the originals, byte for byte, mtimes too.
    rb = rollback_run(run_id)
    assert rb.exit_code() == 0, [(u.path, [e.message for e in u.errors]) for *_, u in rb.problem_units()]
    assert tree_state(log_dir) == originals

    # (c) on the crashed state itself: the same run, re-run, finishes; then rolls back.
    shutil.rmtree(log_dir)
    shutil.copytree(crashed, log_dir, copy_function=shutil.copy2)
    _restore(run_state, tmp_path / "run-state")
    report = execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2"), engine="inline", run_id=run_id)
    assert report.exit_code() == 0, [(u.path, [e.message for e in u.errors]) for *_, u in report.problem_units()]
    assert read_log_dir_records(log_dir) == expected
    res = validate_paths([str(log_dir)])
    assert res.ok, [str(f) for f in res.problems]
    assert not [f for f in res.findings if f.code == "LEFTOVER_FILE"]
    rb = rollback_run(run_id)
    assert rb.exit_code() == 0
    assert tree_state(log_dir) == originals
