"""Whole-file checksums of the originals and outputs (migration/migrations/common/checksum.py).

A run writes BLAKE3 checksums and names the algorithm in its backup manifests and journals. A
run whose documents an earlier kmigrate wrote (version 1: SHA-256 in ``sha256`` and
``log_sha256``, no algorithm) still resumes and rolls back with this one, its checksums checked
with SHA-256; and a backup that changed is still refused."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import blake3
import pytest
from conftest import tree_state
from kafka_loader import read_log_dir_records, simulate_log_dir_startup

from migration.migrations.common.backup import MANIFESTS_DIR
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade, rollback_run
from migration.migrations.upgrade.journal import UnitJournal
from migration.runtime.runs import latest_journal_files

CRASH_JOB = Path(__file__).with_name("crash_job.py")
SEGMENT_BYTES = 24 * 1024
OPTIONS = UpgradeOptions(target="v2", segment_bytes=SEGMENT_BYTES)


@pytest.fixture
def log_dir(sample_cluster_template, tmp_path) -> Path:
    d = tmp_path / "kafka-logs"
    shutil.copytree(sample_cluster_template.broker_log_dirs[1], d, copy_function=shutil.copy2)
    return d


def _journals(private_out: Path, run_id: str) -> list[Path]:
    """Each unit's latest journal file."""
    paths = latest_journal_files(private_out / "runs" / run_id / "journal")
    assert paths
    return paths


def _manifests(journals: list[Path]) -> list[Path]:
    dirs = {Path(json.loads(p.read_text())["backup_dir"]).parents[1] / MANIFESTS_DIR for p in journals}
    paths = sorted(m for d in dirs for m in d.glob("*.json"))
    assert paths
    return paths


def _original_as_version_1(f: dict, backup_dir: Path) -> dict:
    data = (backup_dir / f["name"]).read_bytes()
    assert f["checksum_algorithm"] == "blake3" and f["checksum"] == blake3.blake3(data).hexdigest()
    rest = {k: v for k, v in f.items() if k not in ("checksum", "checksum_algorithm")}
    return rest | {"sha256": hashlib.sha256(data).hexdigest()}


def _output_as_version_1(o: dict, partition_dir: Path) -> dict:
    name = o["files"][0]
    for candidate in (name, name + ".cleaned", name + ".swap"):
        p = partition_dir / candidate
        if p.exists() and blake3.blake3(p.read_bytes()).hexdigest() == o["log_checksum"]:
            data = p.read_bytes()
            break
    else:
        raise AssertionError(f"no file of {partition_dir} has the checksum of output {name}")
    assert o["checksum_algorithm"] == "blake3" and len(data) == o["size"]
    rest = {k: v for k, v in o.items() if k not in ("log_checksum", "checksum_algorithm")}
    return rest | {"log_sha256": hashlib.sha256(data).hexdigest()}


def _as_version_1(private_out: Path, run_id: str) -> None:
    """Rewrite the run's journals and backup manifests as a version-1 kmigrate wrote them, after
    checking that every checksum they hold is the BLAKE3 of its file."""
    journals = _journals(private_out, run_id)
    for p in journals:
        j = json.loads(p.read_text())
        assert j["version"] == 5 and j.pop("staged_from") is None and j.pop("prefix_from") is None  # versions 3, 5
        j["originals"] = [_original_as_version_1(f, Path(j["backup_dir"])) for f in j["originals"]]
        j["outputs"] = [_output_as_version_1(o, Path(j["partition_dir"])) for o in j["outputs"]]
        # before version 4 a unit's journal was one file, <unit id>.json, replaced at each save
        for earlier in p.parent.glob(f"{j['unit_id']}+*.json"):
            earlier.unlink()
        (p.parent / f"{j['unit_id']}.json").write_text(json.dumps(j | {"version": 1}, indent=1))
    journals = _journals(private_out, run_id)
    for p in _manifests(journals):
        m = json.loads(p.read_text())
        assert m["version"] == 2
        m["files"] = [_original_as_version_1(f, Path(m["backup_dir"])) for f in m["files"]]
        p.write_text(json.dumps(m | {"version": 1}, indent=1))


def test_a_crashed_run_of_an_earlier_kmigrate_restarts_its_units(log_dir, private_out) -> None:
    """Journals say ``cleaned`` (outputs complete, nothing renamed); Kafka's loader then deletes
    the .cleaned outputs. The re-run must recognise the originals by their SHA-256 and rewrite
    the units ("restart"); taking the SHA-256 for a BLAKE3 would call them changed and fail."""
    expected = read_log_dir_records(log_dir)
    run_id = "checksums-v1-resume"
    env = os.environ | {"KMIGRATE_FAULT_AT": "journal-cleaned:2", "PYTHONPATH": str(Path.cwd())}
    proc = subprocess.run([sys.executable, str(CRASH_JOB), run_id, "v2", str(SEGMENT_BYTES), str(log_dir)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    in_flight = [p for p in _journals(private_out, run_id) if json.loads(p.read_text())["state"] == "cleaned"]
    assert in_flight
    _as_version_1(private_out, run_id)
    simulate_log_dir_startup(log_dir)
    assert not list(log_dir.glob("*/*.cleaned"))

    report = execute_upgrade([str(log_dir)], options=OPTIONS, engine="inline", run_id=run_id)
    assert report.exit_code() == 0, [(u.path, [e.message for e in u.errors]) for *_, u in report.problem_units()]
    assert read_log_dir_records(log_dir) == expected
    # the restarted units' journals are written as this version (4): their originals keep the SHA-256
    # of their backup, their new outputs have BLAKE3 (units done before the crash are left alone)
    restarted = {json.loads(p.read_text())["unit_id"] for p in in_flight}
    for p in _journals(private_out, run_id):
        j = json.loads(p.read_text())
        if j["unit_id"] not in restarted:
            continue
        assert (j["version"], j["state"]) == (UnitJournal.VERSION, "done")
        assert {f["checksum_algorithm"] for f in j["originals"]} == {"sha256"}
        assert {o["checksum_algorithm"] for o in j["outputs"]} == {"blake3"}


def test_a_finished_run_of_an_earlier_kmigrate_rolls_back(log_dir, private_out) -> None:
    originals = tree_state(log_dir)
    run_id = "checksums-v1-rollback"
    assert execute_upgrade([str(log_dir)], options=OPTIONS, engine="inline", run_id=run_id).exit_code() == 0
    _as_version_1(private_out, run_id)
    rb = rollback_run(run_id)
    assert rb.exit_code() == 0, [(u.path, [e.message for e in u.errors]) for *_, u in rb.problem_units()]
    assert tree_state(log_dir) == originals


def test_a_changed_backup_is_refused_whatever_its_checksum(log_dir, private_out) -> None:
    """One byte of a backed-up original flipped (same size): the rollback refuses that unit with
    version-1 (SHA-256) documents as with version-2 (BLAKE3) ones, and leaves its files alone."""
    run_id = "checksums-changed-backup"
    assert execute_upgrade([str(log_dir)], options=OPTIONS, engine="inline", run_id=run_id).exit_code() == 0
    _as_version_1(private_out, run_id)
    manifest = json.loads(_manifests(_journals(private_out, run_id))[0].read_text())
    victim = Path(manifest["backup_dir"]) / next(f["name"] for f in manifest["files"] if f["name"].endswith(".log"))
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    os.unlink(victim)  # a hard link to the original's inode: replace it, do not write through it
    victim.write_bytes(bytes(data))
    journal = json.loads(next(p for p in _journals(private_out, run_id) if json.loads(p.read_text())["unit_id"]
                              == manifest["unit_id"]).read_text())
    pdir = Path(manifest["partition_dir"])
    outputs = {n: (pdir / n).read_bytes() for o in journal["outputs"] for n in o["files"]}
    rb = rollback_run(run_id)
    messages = [e.message for *_, u in rb.problem_units() for e in u.errors]
    assert rb.exit_code() != 0 and any("backup unusable" in m and str(victim) in m for m in messages), messages
    assert {n: (pdir / n).read_bytes() for n in outputs} == outputs  # that unit's outputs left in place
