"""One home for state (docs/operations.md, "Where state lives"): the real ``kmigrate`` run from
directories outside the repository finds the runs, reports and sessions of one home, by
default the XDG state directory, whatever the working directory; says which home it reads; an
unknown run id is a usage error naming the closest ones and writes nothing; backups land on the
log dir's file system."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migration.audit.model import RunReport
from migration.sessions import Outcome, PartitionFingerprint, SessionStore

KMIGRATE = Path(sys.executable).parent / "kmigrate"
ROOT = Path(__file__).resolve().parents[2]
STATE_VARS = ("KMIGRATE_HOME", "KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_SESSIONS_URL",
              "KMIGRATE_PROJECT_ROOT", "XDG_STATE_HOME")


def _env(user_home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user whose home directory is ``user_home``: no kmigrate setting."""
    env = {k: v for k, v in os.environ.items() if k not in STATE_VARS}
    return env | {"HOME": str(user_home), "COLUMNS": "200"} | extra


def _kmigrate(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([str(KMIGRATE), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _entries(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.fixture
def user(tmp_path: Path) -> Path:
    """A user's home directory outside the repository (kmigrate's default home is under it)."""
    assert not tmp_path.is_relative_to(ROOT)
    home = tmp_path / "user"
    home.mkdir()
    return home


def _upgrade(log_dir: Path, run_id: str, cwd: Path, env: dict[str, str], *extra: str) -> str:
    r = _kmigrate(["upgrade", str(log_dir), "--to", "v2", "--engine", "inline", "--run-id", run_id, *extra], cwd, env)
    assert r.returncode == 0, r.stdout + r.stderr
    return run_id


def test_runs_are_found_from_any_directory_in_the_default_xdg_home(sample_cluster, user, tmp_path):
    env = _env(user)
    default_home = user / ".local" / "state" / "kmigrate"
    run_id = _upgrade(sample_cluster.broker_log_dirs[1], "upgrade-20261123T050000Z-5eed0001", tmp_path / "a", env)
    assert _entries(tmp_path / "a") == []  # nothing in the working directory (was ./out)
    assert (default_home / "reports" / run_id / "report.json").is_file()

    elsewhere = tmp_path / "b"
    listed = _kmigrate(["report", "--list"], elsewhere, env)
    assert listed.returncode == 0 and run_id in listed.stdout, listed.stdout + listed.stderr
    assert f"home: {default_home} (default: ~/.local/state/kmigrate)" in listed.stderr
    as_json = _kmigrate(["report", "--list", "--json"], elsewhere, env)
    assert as_json.returncode == 0 and [s["run_id"] for s in json.loads(as_json.stdout)] == [run_id]

    shown = _kmigrate(["report", run_id], elsewhere, env)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert run_id in shown.stdout and "formats" in shown.stdout  # the summary, not the bare id
    assert f"home: {default_home}" in shown.stderr
    shown = _kmigrate(["report", run_id, "--format", "json"], elsewhere, env)
    assert RunReport.from_json(shown.stdout).run_id == run_id

    # A mistyped run id: a usage error naming the run, nothing written anywhere.
    before = _entries(default_home)
    typo = run_id[:-1] + ("0" if run_id[-1] != "0" else "1")
    for command in (["rollback", typo], ["commit", typo], ["report", typo]):
        r = _kmigrate(command, elsewhere, env)
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        assert f"no run {typo} in " in r.stderr and f"closest: {run_id}" in r.stderr, r.stderr
        assert f"home: {default_home}" in r.stderr and "Traceback" not in r.stderr
    assert _entries(elsewhere) == [] and _entries(default_home) == before

    # The real id rolls back from there too.
    r = _kmigrate(["rollback", run_id], elsewhere, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _entries(elsewhere) == []


def test_home_option_and_environment(sample_cluster, user, tmp_path):
    chosen = tmp_path / "chosen-home"
    env = _env(user, KMIGRATE_HOME=str(chosen))
    run_id = _upgrade(sample_cluster.broker_log_dirs[2], "upgrade-dry", tmp_path / "a", env, "--dry-run")
    assert (chosen / "reports" / run_id / "report.json").is_file()
    assert not (user / ".local").exists()

    listed = _kmigrate(["report", "--list"], tmp_path / "b", env)
    assert run_id in listed.stdout and f"home: {chosen} (KMIGRATE_HOME)" in listed.stderr
    # KMIGRATE_OUT, the earlier name, still works; KMIGRATE_HOME wins over it; --home over both.
    legacy = _kmigrate(["report", "--list"], tmp_path / "b", _env(user, KMIGRATE_OUT=str(chosen)))
    assert run_id in legacy.stdout and f"home: {chosen} (KMIGRATE_OUT" in legacy.stderr
    both = _kmigrate(["report", "--list"], tmp_path / "b", env | {"KMIGRATE_OUT": str(tmp_path / "old")})
    assert run_id in both.stdout
    other = tmp_path / "other-home"
    r = _kmigrate(["--home", str(other), "report", "--list"], tmp_path / "b", env)
    assert r.returncode == 0 and run_id not in r.stdout
    assert f"home: {other} (--home)" in r.stderr and f"no reports in {other / 'reports'}" in r.stderr
    # Relative to where it is given, once.
    r = _kmigrate(["--home", "chosen-home", "report", run_id], tmp_path, env | {"KMIGRATE_HOME": str(other)})
    assert r.returncode == 0 and f"home: {chosen} (--home)" in r.stderr, r.stderr
    # The XDG base directory convention.
    r = _kmigrate(["report", "--list"], tmp_path / "b", _env(user, XDG_STATE_HOME=str(tmp_path / "xdg")))
    assert f"home: {tmp_path / 'xdg' / 'kmigrate'} ($XDG_STATE_HOME/kmigrate)" in r.stderr
    # A home that is a file: a usage error, no traceback.
    (tmp_path / "a-file").write_text("")
    r = _kmigrate(["--home", str(tmp_path / "a-file"), "report", "--list"], tmp_path / "b", env)
    assert r.returncode == 2 and "is not a directory" in r.stderr and "Traceback" not in r.stderr
    assert _entries(tmp_path / "b") == []


def test_sessions_listed_from_any_directory(user, tmp_path):
    env = _env(user)
    default_home = user / ".local" / "state" / "kmigrate"
    # Listing an empty home creates no store.
    r = _kmigrate(["sessions", "--json"], tmp_path / "a", env)
    assert r.returncode == 0 and json.loads(r.stdout) == [] and not default_home.exists(), r.stderr
    db = default_home / "state" / "sessions.sqlite"
    with SessionStore(f"sqlite:///{db}") as store:
        plan = store.begin_run("nightly-tiering", 7, "r1", believed_epoch=None,
                               fingerprints=[PartitionFingerprint(topic="orders", partition=0, log_dir="/data/k")])
        store.finish_run(plan, {p.key: Outcome.ok() for p in plan.selected})

    r = _kmigrate(["sessions"], tmp_path / "b", env)
    assert r.returncode == 0 and "nightly-tiering" in r.stdout and "broker 7" in r.stdout, r.stdout + r.stderr
    assert f"home: {default_home}" in r.stderr and f"sessions: {db}" in r.stderr
    r = _kmigrate(["sessions", "--json"], tmp_path / "b", env)
    assert [(s["name"], s["broker_id"], s["epoch"]) for s in json.loads(r.stdout)] == [("nightly-tiering", 7, 1)]
    assert _entries(tmp_path / "a") == [] and _entries(tmp_path / "b") == []


def _device(path: Path) -> int:
    return path.stat().st_dev


@pytest.fixture
def other_file_system(tmp_path: Path):
    """A directory on another file system than ``tmp_path`` (the memory file system)."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or _device(shm) == _device(tmp_path):
        pytest.skip("needs /dev/shm on another file system than the temporary directory")
    d = shm / f"kmigrate-test-{os.getpid()}-{tmp_path.name}"
    d.mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_backups_are_hard_links_on_the_log_dirs_file_system(sample_cluster_template, other_file_system, user,
                                                            tmp_path):
    # The log dirs on one file system, the home on another.
    cluster = other_file_system / "cluster"
    log_dir = cluster / "broker-1"
    shutil.copytree(sample_cluster_template.broker_log_dirs[1], log_dir, copy_function=shutil.copy2)
    home = tmp_path / "home"
    env = _env(user, KMIGRATE_HOME=str(home))
    run_id = _upgrade(log_dir, "upgrade-linked", tmp_path / "a", env)
    backups = cluster / ".kmigrate-backups" / run_id
    manifests = [json.loads(p.read_text()) for p in (backups / "manifests").glob("*.json")]
    assert manifests and all(f["linked"] for m in manifests for f in m["files"])
    assert all(_device(Path(m["backup_dir"])) == _device(log_dir) for m in manifests)
    assert not (home / "backups").exists()
    report = RunReport.from_json((home / "reports" / run_id / "report.json").read_text())
    assert not [w for w in report.warnings if "copies" in w.message]
    assert _kmigrate(["commit", run_id], tmp_path / "a", env).returncode == 0
    assert not backups.exists()

    # A backup root on another file system: the run copies, and says so.
    shutil.rmtree(log_dir)
    shutil.copytree(sample_cluster_template.broker_log_dirs[1], log_dir, copy_function=shutil.copy2)
    run_id = _upgrade(log_dir, "upgrade-copied", tmp_path / "a", env, "--backup-root", str(tmp_path / "elsewhere"))
    report = RunReport.from_json((home / "reports" / run_id / "report.json").read_text())
    assert [w.message for w in report.warnings if "backups are copies, not hard links" in w.message]
    manifests = [json.loads(p.read_text()) for p in (tmp_path / "elsewhere" / run_id / "manifests").glob("*.json")]
    assert manifests and not any(f["linked"] for m in manifests for f in m["files"])


def test_spark_executors_see_the_drivers_home(spark, tmp_path, monkeypatch):
    """An executor is another process (maybe another host, a Python worker reused across jobs):
    it works in the home of the driver that submitted the job, not the one of its own start."""
    from migration.runtime.engine import NoParams, SparkEngine, Unit, UnitKind, unit_kinds

    probe_file = Path(__file__).with_name("home_probe.py")
    monkeypatch.syspath_prepend(str(probe_file.parent))
    import home_probe

    spark.sparkContext.addPyFile(str(probe_file))
    units = [Unit(kind="probe", id=f"u{i}", log_dir=str(tmp_path), path=str(tmp_path)) for i in range(3)]
    for name in ("first", "second"):
        monkeypatch.setenv("KMIGRATE_HOME", str(tmp_path / name))
        kinds = unit_kinds(UnitKind("probe", NoParams, home_probe.probe))
        results = SparkEngine(spark=spark).run(units, {}, kinds=kinds)
        assert {r.get("home") for r in results} == {str(tmp_path / name)}, results
