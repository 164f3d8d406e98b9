"""Crash safety: SIGKILL the upgrade at many points, then check that (a) Kafka's startup
(LogLoader, docs/formats.md §4.9, simulated on a copy) loads every record exactly once and (b) a
re-run of the same job finishes it with every record in place.

Segments are split (small segment.bytes) so that multi-segment swaps are interrupted too.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_loader import read_log_dir_records, simulate_log_dir_startup

from migration.formats.file_records import FileRecords
from migration.logdir.validation import validate_paths
from migration.migrations.common.backup import MANIFESTS_DIR
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade

CRASH_JOB = Path(__file__).with_name("crash_job.py")
SEGMENT_BYTES = 24 * 1024

# (step, count): the count-th time the job reaches that step it is killed.
FAULTS = [
    ("backup", 1),  # originals linked, journal not written
    ("write-batch", 150),  # half-written .cleaned output
    ("cleaned", 2),  # output complete, journal still says started
    ("journal-cleaned", 1),  # journal says cleaned, nothing renamed
    ("swap-rename", 1),  # first .cleaned -> .swap of a split segment
    ("swap-rename", 4),  # mid-way through a later unit's renames
    ("old-deleted", 1),  # one old file renamed .deleted, others old
    ("old-deleted", 3),
    ("swap-final", 1),  # one .swap renamed in
    ("swap-final", 5),
    ("deleted-remove", 2),
    ("replaced", 3),  # replaced, journal not yet done
]



@pytest.fixture(scope="module")
def expected(sample_cluster_template) -> dict[str, list[tuple]]:
    return read_log_dir_records(sample_cluster_template.broker_log_dirs[1])


@pytest.mark.parametrize(("step", "count"), FAULTS, ids=[f"{s}:{c}" for s, c in FAULTS])
def test_sigkill_then_kafka_load_and_rerun(sample_cluster_template, tmp_path, private_out, expected, step,
                                           count) -> None:
    src = sample_cluster_template.broker_log_dirs[1]
    log_dir = tmp_path / "kafka-logs"
    shutil.copytree(src, log_dir, copy_function=shutil.copy2)
    run_id = f"crash-{step}-{count}"
    env = os.environ | {"KMIGRATE_FAULT_AT": f"{step}:{count}", "PYTHONPATH": str(Path.cwd())}
    proc = subprocess.run([sys.executable, str(CRASH_JOB), run_id, "v2", str(SEGMENT_BYTES), str(log_dir)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, f"fault point not reached: rc {proc.returncode}\n{proc.stderr}"

    # (a) Kafka's startup on a copy of the crashed state
    kafka_view = tmp_path / "kafka-view"
    shutil.copytree(log_dir, kafka_view, copy_function=shutil.copy2)
    simulate_log_dir_startup(kafka_view)
    assert read_log_dir_records(kafka_view) == expected
    res = validate_paths([str(kafka_view)])
    assert not [f for f in res.problems if f.code in ("CORRUPT_BATCH", "OFFSET_ORDER", "TRAILING_BYTES")]

    # (b) the same job, re-run on the crashed state, finishes
    report = execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2", segment_bytes=SEGMENT_BYTES),
                             engine="inline", run_id=run_id)
    assert report.exit_code() == 0, [u for *_, u in report.problem_units()]
    assert report.totals.digest_mismatches == 0
    assert read_log_dir_records(log_dir) == expected
    res = validate_paths([str(log_dir)])
    assert res.ok, [str(f) for f in res.problems]
    assert not [f for f in res.findings if f.code == "LEFTOVER_FILE"]
    assert not list(log_dir.glob("*/*.log")) or all(
        p.read_bytes()[16:17] == b"\x02" for p in log_dir.glob("*/*.log") if p.stat().st_size)


def test_segment_changed_after_a_crash_between_backup_and_journal_is_refused(sample_cluster_template, tmp_path,
                                                                             private_out) -> None:
    """Killed after a unit's backup manifest was written and before its journal: if the segment
    then changes (here Kafka's recovery truncating it to its first batch), the re-run must not
    rewrite it against the old backup, or a rollback would put back records that were gone and
    drop the ones that came."""
    log_dir = tmp_path / "kafka-logs"
    shutil.copytree(sample_cluster_template.broker_log_dirs[1], log_dir, copy_function=shutil.copy2)
    run_id = "crash-backup-then-changed"
    env = os.environ | {"KMIGRATE_FAULT_AT": "backup:1", "PYTHONPATH": str(Path.cwd())}
    proc = subprocess.run([sys.executable, str(CRASH_JOB), run_id, "v2", str(SEGMENT_BYTES), str(log_dir)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, f"fault point not reached: rc {proc.returncode}\n{proc.stderr}"
    (manifest,) = (private_out / "backups" / run_id / MANIFESTS_DIR).glob("*.json")
    m = json.loads(manifest.read_text())
    segment = Path(m["partition_dir"]) / next(f["name"] for f in m["files"] if f["name"].endswith(".log"))
    first = next(iter(FileRecords(segment).batches()))
    os.truncate(segment, first.position + first.size_in_bytes)
    changed = segment.read_bytes()

    report = execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2", segment_bytes=SEGMENT_BYTES),
                             engine="inline", run_id=run_id)
    refused = [u for *_, u in report.problem_units()]
    assert [e.code for u in refused for e in u.errors] == ["SEGMENT_CHANGED"], refused
    assert refused[0].path == str(segment)
    assert segment.read_bytes() == changed  # nothing replaced
    assert report.exit_code() != 0
