"""``kmigrate rollback`` from every state: whatever a crash, Kafka's loader or a lost journal
left, the originals come back byte for byte with their mtimes, and nothing found in a log dir
is lost (files in the way are kept under the run's backup). A re-run that cannot finish says
the exact command that resolves it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import tree_state
from kafka_loader import read_log_dir, read_log_dir_records, simulate_log_dir_startup

from migration.migrations.common.backup import DISPLACED_DIR
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade, rollback_run

CRASH_JOB = Path(__file__).with_name("crash_job.py")
SEGMENT_BYTES = 24 * 1024
CLICKS_286 = "clicks-v1-0.00000000000000000286"


def _crash(log_dir: Path, run_id: str, fault: str, segment_bytes: int = SEGMENT_BYTES) -> None:
    env = os.environ | {"KMIGRATE_FAULT_AT": fault, "PYTHONPATH": str(Path.cwd())}
    proc = subprocess.run([sys.executable, str(CRASH_JOB), run_id, "v2", str(segment_bytes), str(log_dir)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, f"fault point not reached: rc {proc.returncode}\n{proc.stderr}"


def _problems(report) -> list:
    return [(u.path, [e.message for e in u.errors]) for *_, u in report.problem_units()]


@pytest.fixture
def log_dir(sample_cluster_template, tmp_path) -> Path:
    d = tmp_path / "kafka-logs"
    shutil.copytree(sample_cluster_template.broker_log_dirs[1], d, copy_function=shutil.copy2)
    return d


def test_rollback_restores_a_segment_kafka_deleted_and_a_rerun_names_the_command(log_dir, private_out):
    """The state two concurrent replacements in one partition could reach: the higher segment's
    originals are .deleted and its new files .swap while a lower .cleaned file exists; Kafka's
    loader then deletes both. The segment "changed" (neither original nor output is there)."""
    originals = tree_state(log_dir)
    before = read_log_dir(log_dir)
    run_id = "lost-segment"
    _crash(log_dir, run_id, f"old-deleted@{CLICKS_286}:1", segment_bytes=1 << 30)
    part = log_dir / "clicks-v1-0"
    (part / "00000000000000000000.log.cleaned").write_bytes(b"\0" * 64)  # a lower unit still rewriting
    simulate_log_dir_startup(log_dir)
    assert read_log_dir(log_dir)["clicks-v1-0"] != before["clicks-v1-0"]  # offsets 286.. are gone

    rerun = execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2"), engine="inline", run_id=run_id)
    assert rerun.exit_code() == 1
    messages = [e.message for _, _, _, u in rerun.problem_units() for e in u.errors]
    assert any(f"kmigrate rollback {run_id}" in m for m in messages), messages

    rb = rollback_run(run_id)
    assert rb.exit_code() == 0, _problems(rb)
    assert tree_state(log_dir) == originals
    assert read_log_dir(log_dir) == before


@pytest.mark.parametrize("fault", ["cleaned:2", "swap-rename:1", "old-deleted:2", "swap-final:1",
                                   "deleted-remove:1", "replaced:3"])
def test_rollback_without_the_journal(log_dir, private_out, fault):
    originals = tree_state(log_dir)
    run_id = f"no-journal-{fault.replace(':', '-')}"
    _crash(log_dir, run_id, fault)
    shutil.rmtree(private_out / "runs" / run_id / "journal")
    rb = rollback_run(run_id)
    assert rb.exit_code() == 0, _problems(rb)
    assert tree_state(log_dir) == originals


@pytest.mark.parametrize("fault", ["swap-rename:2", "old-deleted:3", "replaced:2"])
def test_rollback_without_the_run_directory_from_the_cli(log_dir, private_out, fault):
    originals = tree_state(log_dir)
    run_id = f"no-run-dir-{fault.replace(':', '-')}"
    _crash(log_dir, run_id, fault)
    shutil.rmtree(private_out / "runs" / run_id)
    proc = subprocess.run([sys.executable, "-m", "migration", "rollback", run_id, "--backup-root",
                           str(private_out / "backups")], capture_output=True, text=True, timeout=120,
                          env=os.environ | {"PYTHONPATH": str(Path.cwd())})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert tree_state(log_dir) == originals


def test_rollback_after_kafka_loaded_a_finished_upgrade_keeps_what_is_in_the_way(log_dir, private_out):
    """After the upgrade, something else rewrote a segment where the originals go back (a broker's
    log cleaner, say): its files are kept under the run's backup, not lost."""
    originals = tree_state(log_dir)
    run_id = "foreign"
    report = execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2"), engine="inline", run_id=run_id)
    assert report.exit_code() == 0
    foreign = log_dir / "legacy-v0-0" / "00000000000000000262.log"
    foreign.write_bytes(b"\x00" * 24)
    rb = rollback_run(run_id)
    assert rb.exit_code() == 0, _problems(rb)
    assert tree_state(log_dir) == originals
    kept = list((private_out / "backups" / run_id / DISPLACED_DIR).rglob(foreign.name))
    assert [p.read_bytes() for p in kept] == [b"\x00" * 24]
    again = rollback_run(run_id)  # idempotent
    assert again.exit_code() == 0 and tree_state(log_dir) == originals



@pytest.mark.parametrize("fault", ["rollback-staged:2", "swap-rename@legacy-v0-0:1", "old-deleted:3",
                                   "swap-final:2", "deleted-remove:1"])
def test_rollback_killed_midway_then_kafka_load_and_rollback_again(log_dir, private_out, tmp_path, fault):
    """The rollback itself dies (SIGKILL) at a point of its replace protocol: Kafka loads every
    record exactly once from what it left, and the same rollback, run again, finishes."""
    originals = tree_state(log_dir)
    expected = read_log_dir_records(log_dir)
    run_id = f"rb-killed-{fault.split(':')[0].split('@')[0]}"
    report = execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2", segment_bytes=SEGMENT_BYTES),
                             engine="inline", run_id=run_id)
    assert report.exit_code() == 0
    proc = subprocess.run([sys.executable, "-m", "migration", "rollback", run_id], capture_output=True, text=True,
                          timeout=120, env=os.environ | {"PYTHONPATH": str(Path.cwd()), "KMIGRATE_FAULT_AT": fault})
    assert proc.returncode == -signal.SIGKILL, f"fault point not reached: rc {proc.returncode}\n{proc.stderr}"
    kafka_view = tmp_path / "kafka-view"
    shutil.copytree(log_dir, kafka_view, copy_function=shutil.copy2)
    simulate_log_dir_startup(kafka_view)
    assert read_log_dir_records(kafka_view) == expected
    # the next command names the interrupted rollback; running it again finishes
    blocked = execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2"), engine="inline")
    assert blocked.exit_code() == 3 and f"kmigrate rollback {run_id}" in blocked.refusal
    rb = rollback_run(run_id)
    assert rb.exit_code() == 0, _problems(rb)
    assert tree_state(log_dir) == originals


def test_a_rollback_after_the_commit_says_the_run_was_committed(log_dir, private_out):
    """The commit dropped the backups: a rollback then is refused once, as "already committed",
    not with a missing backup per unit, and changes nothing in the log dir."""
    from migration.migrations.upgrade.driver import commit_run

    run_id = "committed-run"
    report = execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2"), engine="inline", run_id=run_id)
    assert report.exit_code() == 0, _problems(report)
    assert commit_run(run_id).exit_code() == 0
    after_commit = tree_state(log_dir)
    rb = rollback_run(run_id)
    assert rb.exit_code() == 3 and rb.refusal is not None and "already committed on" in rb.refusal
    assert not list(rb.iter_units())
    assert tree_state(log_dir) == after_commit
