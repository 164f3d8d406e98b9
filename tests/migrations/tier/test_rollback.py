"""``kmigrate rollback`` of a tier-prepare run (issue 31): the leader-epoch-checkpoint back byte
for byte, a snapshot the run replaced back, exactly the snapshots it created removed; twice in a
row; after a kill at several points of the run and of the rollback; from the backup root alone;
via the CLI, one line per partition. Every comparison is of the partition directories' names,
bytes and mtimes before the run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migration.formats import names
from migration.migrations.tier.driver import execute_tier, rollback_tier_run
from migration.migrations.tier.options import TierOptions

from .tiny_dir import build_tier_log_dir

ROOT = Path(__file__).resolve().parents[3]
JOB = Path(__file__).with_name("tier_job.py")
KMIGRATE = Path(sys.executable).parent / "kmigrate"
RUN_ID = "tier-rollback"
STATE_VARS = ("KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_FAULT_AT", "KMIGRATE_FAULT_DIR")


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.log_dir = tmp_path / "kafka-logs"
        self.store = tmp_path / "store"
        self.store.mkdir()
        build_tier_log_dir(self.log_dir)
        self.before = tree(self.log_dir)
        self.env = {k: v for k, v in os.environ.items() if k not in STATE_VARS} | {
            "KMIGRATE_HOME": str(self.home), "PYTHONPATH": str(ROOT), "KMIGRATE_PROJECT_ROOT": str(ROOT),
            "COLUMNS": "200"}

    def options(self) -> TierOptions:
        return TierOptions(store_url=self.store.as_uri(), assign_leader_epoch=True, part_size=4096,
                           multipart_threshold=16384)

    def run(self) -> None:
        report = execute_tier([str(self.log_dir)], options=self.options(), engine="inline", run_id=RUN_ID)
        assert report.exit_code() == 0, [(u.path, u.errors) for *_, u in report.problem_units()]

    def job(self, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
        env = self.env | ({"KMIGRATE_FAULT_AT": fault} if fault else {})
        return subprocess.run([sys.executable, str(JOB), *args], env=env, capture_output=True, text=True, timeout=300)


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """relative path -> (bytes, mtime_ns) of every file of the log dir (the lock file: bytes only)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = (p.read_bytes(), 0 if p.name == names.LOCK_FILE else p.stat().st_mtime_ns)
    return out


def diff(before: dict, after: dict) -> list[str]:
    return ([f"missing {p}" for p in sorted(set(before) - set(after))]
            + [f"extra {p}" for p in sorted(set(after) - set(before))]
            + [f"changed {p}" for p in sorted(set(before) & set(after)) if before[p] != after[p]])


@pytest.fixture
def setup(tmp_path, monkeypatch) -> Setup:
    for key in STATE_VARS:
        monkeypatch.delenv(key, raising=False)
    s = Setup(tmp_path)
    monkeypatch.setenv("KMIGRATE_HOME", str(s.home))
    return s


def test_rollback_restores_the_checkpoints_and_removes_exactly_the_runs_snapshots(setup):
    pay = setup.log_dir / "payments-0"
    corrupt = sorted(pay.glob("*.snapshot"))
    assert len(corrupt) == 1
    setup.run()
    changed = diff(setup.before, tree(setup.log_dir))
    created = sorted(p for p in changed if p.startswith("extra "))
    assert len(created) == 5 and all(p.endswith(".snapshot") for p in created)
    assert {p.split("/")[0] for p in changed if p.endswith(names.LEADER_EPOCH_CHECKPOINT_FILE)} == {
        "changed legacy-v0-0", "changed clicks-v1-0", "changed payments-0"}
    assert f"changed payments-0/{corrupt[0].name}" in changed  # rebuilt: the original was bad

    report = rollback_tier_run(RUN_ID)
    assert report.exit_code() == 0, (report.refusal, [(u.path, u.errors) for *_, u in report.problem_units()])
    assert diff(setup.before, tree(setup.log_dir)) == []
    lines = {u.unit: u.warnings[0].message for *_, u in report.iter_units()}
    assert sorted(lines) == ["clicks-v1-0", "legacy-v0-0", "payments-0"]
    assert f"{corrupt[0].name} restored" in lines["payments-0"]
    assert "leader-epoch-checkpoint restored" in lines["legacy-v0-0"]
    kept = [w for w in report.warnings if w.code == "TIER_OBJECTS_KEPT"]
    assert kept and str(setup.store) in kept[0].message  # staged objects stay, and it says where
    assert any(p.name.endswith(".rsm-manifest") for p in setup.store.rglob("*"))

    again = rollback_tier_run(RUN_ID)  # twice in a row: nothing left to undo
    assert again.exit_code() == 0
    assert diff(setup.before, tree(setup.log_dir)) == []
    assert all("nothing to undo" in u.warnings[0].message for *_, u in again.iter_units())


def test_a_second_rollback_after_brokers_ran_keeps_what_kafka_wrote_since(setup):
    """The first rollback went through: a second one changes nothing, so a snapshot a broker
    wrote since under a name the run had created is kept."""
    setup.run()
    created = sorted(p.split(" ", 1)[1] for p in diff(setup.before, tree(setup.log_dir)) if p.startswith("extra "))
    first = rollback_tier_run(RUN_ID)
    assert first.exit_code() == 0
    kafkas = setup.log_dir / created[0]
    kafkas.write_bytes(b"a snapshot Kafka wrote")  # the brokers ran since
    again = rollback_tier_run(RUN_ID)
    assert again.exit_code() == 0 and not list(again.iter_units())
    assert "already rolled back on" in again.warnings[0].message and first.run_id in again.warnings[0].message
    assert kafkas.read_bytes() == b"a snapshot Kafka wrote"


def test_a_rerun_after_the_rollback_prepares_again_and_rolls_back_again(setup):
    setup.run()
    assert rollback_tier_run(RUN_ID).exit_code() == 0
    setup.run()  # the same run id: the manifests keep the first originals
    assert diff(setup.before, tree(setup.log_dir)) != []
    assert rollback_tier_run(RUN_ID).exit_code() == 0
    assert diff(setup.before, tree(setup.log_dir)) == []


@pytest.mark.parametrize(("fault", "changed"), [
    ("tier-backup-manifest:1", False),  # the first manifest durable, nothing written yet
    ("tier-snapshot-written:2", True),  # a snapshot's temporary file complete, not yet linked
    ("tier-snapshot-renamed:3", True),  # linked, the temporary name not yet removed
    ("leader-epoch-backed-up:2", True),  # the second partition's original checkpoint kept, not rewritten
    ("tier-backup-manifest:4", True),  # the corrupt snapshot kept, about to be replaced
])
def test_rollback_after_a_kill_of_the_run(setup, fault, changed):
    killed = setup.job(RUN_ID, setup.store.as_uri(), str(setup.log_dir), fault=fault)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    killed_diff = diff(setup.before, tree(setup.log_dir))
    assert (killed_diff != []) == changed, killed_diff
    report = rollback_tier_run(RUN_ID)
    assert report.exit_code() == 0, (report.refusal, [(u.path, u.errors) for *_, u in report.problem_units()])
    assert diff(setup.before, tree(setup.log_dir)) == []


@pytest.mark.parametrize("count", [1, 2])
def test_a_killed_rollback_is_finished_by_the_next(setup, count):
    setup.run()
    killed = setup.job("--rollback", RUN_ID, fault=f"tier-rollback-partition:{count}")
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert diff(setup.before, tree(setup.log_dir)) != []
    assert rollback_tier_run(RUN_ID).exit_code() == 0
    assert diff(setup.before, tree(setup.log_dir)) == []


def test_rollback_from_the_backup_root_alone(setup):
    setup.run()
    shutil.rmtree(setup.home / "runs" / RUN_ID)
    shutil.rmtree(setup.home / "reports")
    report = rollback_tier_run(RUN_ID, backup_root=str(setup.home / "backups"))
    assert report.exit_code() == 0, report.refusal
    assert diff(setup.before, tree(setup.log_dir)) == []
    assert len(list(report.iter_units())) == 3


def test_a_run_that_never_changed_a_log_dir_has_nothing_to_roll_back(setup):
    dry = execute_tier([str(setup.log_dir)], options=setup.options().model_copy(update={"dry_run": True}),
                       engine="inline", run_id=RUN_ID)
    assert dry.exit_code() == 0
    report = rollback_tier_run(RUN_ID)
    assert report.exit_code() == 0 and not list(report.iter_units())
    assert "never changed a log dir" in report.warnings[0].message
    assert diff(setup.before, tree(setup.log_dir)) == []


def _kmigrate(setup: Setup, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KMIGRATE), *args], env=setup.env, capture_output=True, text=True, timeout=300)


def test_kmigrate_rollback_of_a_tier_run(setup):
    r = _kmigrate(setup, "tier-prepare", str(setup.log_dir), "--store-url", setup.store.as_uri(), "--engine",
                  "inline", "--assign-leader-epoch", "--run-id", RUN_ID)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _kmigrate(setup, "rollback", RUN_ID)
    assert r.returncode == 0, r.stdout + r.stderr
    assert diff(setup.before, tree(setup.log_dir)) == []
    lines = [line for line in r.stdout.splitlines() if line.startswith("ok ")]
    assert sorted(line.split()[1] for line in lines) == ["clicks-v1-0", "legacy-v0-0", "payments-0"], r.stdout
    assert "Traceback" not in r.stderr
    # without the run directory, from the backup root it is told
    shutil.rmtree(setup.home / "runs" / RUN_ID)
    r = _kmigrate(setup, "rollback", RUN_ID, "--backup-root", str(setup.home / "backups"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert len([line for line in r.stdout.splitlines() if line.startswith("ok ")]) == 3


def test_a_version_1_manifest_with_sha256_checksums_still_rolls_back(setup):
    """Manifests before version 2 recorded a replaced file's ``sha256``; a later kmigrate checks
    it as SHA-256 and restores from it."""
    import hashlib
    import json

    setup.run()
    manifests = sorted((setup.home / "backups" / RUN_ID / "tier" / "partitions").glob("*.json"))
    replaced = 0
    for m in manifests:
        doc = json.loads(m.read_text())
        keep = m.with_suffix("")
        for f in doc["replaced"]:
            f.pop("checksum"), f.pop("checksum_algorithm"), f.pop("linked")
            f["sha256"] = hashlib.sha256((keep / f["name"]).read_bytes()).hexdigest()
            replaced += 1
        m.write_text(json.dumps(doc | {"version": 1}))
    assert replaced
    report = rollback_tier_run(RUN_ID)
    assert report.exit_code() == 0, (report.refusal, [(u.path, u.errors) for *_, u in report.problem_units()])
    assert diff(setup.before, tree(setup.log_dir)) == []
