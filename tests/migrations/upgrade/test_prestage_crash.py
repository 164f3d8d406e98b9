"""Crash safety of the stop window (``kmigrate upgrade --stage``, upgrade/stage.py): a prestage
converts broker 1's closed legacy segments into a stage, then the window, which links the
staged ``.cleaned`` files into the partition directories and runs the journal and Kafka's
replace protocol, is SIGKILLed at a fault point of that path. Then

(a) Kafka's startup (LogLoader, simulated by ``kafka_loader`` on a copy) loads every record
    exactly once;
(b) a re-run of the same run id finishes: exit 0, every record in place, the staged segments
    swapped in from the stage (their very inodes), the units done before the kill counted as
    they were done, the stage dropped;
(c) ``rollback`` restores the originals byte for byte, mtimes included, after the re-run or
    straight after the kill.

Broker 1 holds four closed legacy segments (``clicks-v1-0`` 0 and 286, ``legacy-v0-0`` 0 and
262), which the prestage stages, and three active ones the window converts on the spot. A
small segment.bytes (in the prestage and the window alike: the stage is used only for the same
conversion) splits each staged segment into three, so every staged unit links nine files.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import tree_state
from kafka_loader import read_log_dir_records, simulate_log_dir_startup
from spark_kill import killed_at_fault
from typer.testing import CliRunner

from migration.audit.model import UnitStatus
from migration.cli.app import app
from migration.formats import names
from migration.logdir.validation import validate_paths
from migration.migrations.common.backup import unit_backups
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade, rollback_run
from migration.migrations.upgrade.prestage import PrestageOptions, prestage_upgrade
from migration.migrations.upgrade.stage import Stage

CRASH_JOB = Path(__file__).with_name("crash_job.py")
SEGMENT_BYTES = 24 * 1024
STAGE_ID = "stage-crash"
STAGED = 4  # closed legacy segments of broker 1
CONVERTED = 3  # its active legacy segments (clicks-v1-0, legacy-v0-0, users-compacted-0)
FILES_PER_STAGED = 9  # three output segments, each .log, .index and .timeindex

CLICKS_0 = "clicks-v1-0.00000000000000000000"
CLICKS_286 = "clicks-v1-0.00000000000000000286"
LEGACY_0 = "legacy-v0-0.00000000000000000000"
LEGACY_262 = "legacy-v0-0.00000000000000000262"

# KMIGRATE_FAULT_AT rules of the staged path. The inline engine runs the units in order:
# clicks 0, 286 (staged), 549 (converted), legacy 0, 262 (staged), 574, users-compacted 1.
FAULTS = [
    ("backup:1", "first unit backed up with the stage's fingerprints, journal not written"),
    (f"backup@{LEGACY_262}:1", "the last staged unit, the three others done before it"),
    (f"backup-link@{LEGACY_262}:2", "its originals half linked into its backup, no backup manifest yet"),
    ("stage-link:1", "the first staged file linked in"),
    ("stage-link:14", "the second staged unit half linked in (5 of its 9 files)"),
    (f"cleaned@{CLICKS_286}:1", "all linked, directory fsynced, journal says started"),
    ("journal-cleaned:1", "journal says cleaned, nothing renamed"),
    (f"swap-rename@{LEGACY_262}:4", "mid-way through .cleaned -> .swap"),
    ("old-deleted:2", "one original .deleted, the others in place"),
    (f"swap-final@{CLICKS_286}:1", "one .swap renamed in"),
    ("swap-final:14", "second unit, a later .swap renamed in"),
    ("deleted-remove:2", "one .deleted original removed"),
    (f"replaced@{LEGACY_0}:1", "replaced, journal not yet done"),
]
ROLLBACK_FAULTS = ["backup:1", "stage-link:14", "journal-cleaned:1", "old-deleted:2", "swap-final:14",
                   f"replaced@{LEGACY_0}:1"]


@pytest.fixture(autouse=True)
def stage_root(private_out, monkeypatch) -> Path:
    """The stage beside the backups (same file system as the log dirs), for the crash job too."""
    root = private_out / "stages"
    monkeypatch.setenv("KMIGRATE_STAGE_ROOT", str(root))
    return root


@pytest.fixture(scope="module")
def expected(sample_cluster_template) -> dict[str, list[tuple]]:
    return read_log_dir_records(sample_cluster_template.broker_log_dirs[1])


@pytest.fixture
def staged_log_dir(sample_cluster_template, tmp_path, stage_root) -> tuple[Path, dict[str, dict[str, int]]]:
    """Broker 1's log dir, prestaged; with the inode of each staged file by staged segment
    (``<partition>.<base offset>``, as CLICKS_0) and where the window will put it
    (``<partition>/<final name>``)."""
    log_dir = tmp_path / "kafka-logs"
    shutil.copytree(sample_cluster_template.broker_log_dirs[1], log_dir, copy_function=shutil.copy2)
    report = prestage_upgrade([str(log_dir)], options=PrestageOptions(
        upgrade=UpgradeOptions(target="v2", segment_bytes=SEGMENT_BYTES), stage_id=STAGE_ID))
    assert report.exit_code() == 0, report.refusal
    assert len([u for u in report.iter_results() if u.status is UnitStatus.OK]) == STAGED
    stage = Stage(stage_root, STAGE_ID)
    inodes = {}
    for e in stage.entries():
        assert len(e.output_names) == FILES_PER_STAGED  # split: multi-segment swaps are interrupted too
        src = stage.files_dir(e.partition_dir, e.base_offset)
        part = Path(e.partition_dir).name
        inodes[f"{part}.{names.filename_prefix_from_offset(e.base_offset)}"] = {
            f"{part}/{n}": os.stat(src / (n + names.CLEANED_FILE_SUFFIX)).st_ino for n in e.output_names}
    assert sorted(inodes) == [CLICKS_0, CLICKS_286, LEGACY_0, LEGACY_262]
    return log_dir, inodes


def _window_options(**kw) -> UpgradeOptions:
    return UpgradeOptions(target="v2", segment_bytes=SEGMENT_BYTES, stage=STAGE_ID, **kw)


def _crash(log_dir: Path, run_id: str, fault: str) -> None:
    env = os.environ | {"KMIGRATE_FAULT_AT": fault, "PYTHONPATH": str(Path.cwd())}
    proc = subprocess.run([sys.executable, str(CRASH_JOB), "--stage", STAGE_ID, run_id, "v2", str(SEGMENT_BYTES),
                           str(log_dir)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, f"fault point not reached: rc {proc.returncode}\n{proc.stderr}"


def _problems(report) -> list:
    return [(u.path, [e.message for e in u.errors]) for *_, u in report.problem_units()]


def _window(report):
    (window,) = [b.window for b in report.brokers if b.window is not None]
    return window


def _without_marker(state: dict) -> dict:
    return {k: v for k, v in state.items() if not k.endswith(names.CLEAN_SHUTDOWN_FILE)}


def _assert_kafka_loads_every_record_once(log_dir: Path, view: Path, expected) -> None:
    shutil.copytree(log_dir, view, copy_function=shutil.copy2)
    simulate_log_dir_startup(view)
    assert read_log_dir_records(view) == expected
    res = validate_paths([str(view)])
    assert not [f for f in res.problems if f.code in ("CORRUPT_BATCH", "OFFSET_ORDER", "TRAILING_BYTES")]


def _assert_upgraded(log_dir: Path, expected) -> None:
    assert read_log_dir_records(log_dir) == expected
    res = validate_paths([str(log_dir)])
    assert res.ok, [str(f) for f in res.problems]
    assert not [f for f in res.findings if f.code == "LEFTOVER_FILE"]
    logs = [p for p in log_dir.glob("*/*.log") if p.stat().st_size]
    assert logs and all(p.read_bytes()[16:17] == b"\x02" for p in logs)


def _assert_swapped_from_stage(log_dir: Path, inodes: dict[str, dict[str, int]], segments: list[str]) -> None:
    """The staged files of ``segments`` are in the log dir under their final names as the very
    files the prestage wrote (links of them, not a conversion made again). Not the converse: the
    inode numbers of a discarded stage's files are free to be reused by a conversion."""
    for seg in segments:
        assert {k: os.stat(log_dir / k).st_ino for k in inodes[seg]} == inodes[seg], seg


@pytest.mark.parametrize(("fault", "what"), FAULTS, ids=[f for f, _ in FAULTS])
def test_window_killed_then_kafka_load_rerun_and_rollback(staged_log_dir, tmp_path, stage_root, expected, fault,
                                                          what) -> None:
    log_dir, inodes = staged_log_dir
    originals = tree_state(log_dir)
    run_id = "window-" + fault.replace(":", "-").replace("@", "-")
    _crash(log_dir, run_id, fault)
    assert Stage(stage_root, STAGE_ID).exists()  # a killed window leaves the stage for its re-run

    # (a) Kafka's startup on a copy of the crashed state: every record exactly once
    _assert_kafka_loads_every_record_once(log_dir, tmp_path / "kafka-view", expected)

    # (b) the same window, re-run: finishes from the stage
    report = execute_upgrade([str(log_dir)], options=_window_options(), engine="inline", run_id=run_id)
    assert report.exit_code() == 0, (report.refusal, _problems(report))
    assert report.totals.digest_mismatches == 0
    window = _window(report)
    assert (window.swapped, window.converted, window.discarded) == (STAGED, CONVERTED, 0), window
    _assert_upgraded(log_dir, expected)
    _assert_swapped_from_stage(log_dir, inodes, list(inodes))
    assert not Stage(stage_root, STAGE_ID).exists()  # dropped with the window

    # (c) rollback: the originals, byte for byte, mtimes too
    rb = rollback_run(run_id)
    assert rb.exit_code() == 0, _problems(rb)
    assert _without_marker(tree_state(log_dir)) == _without_marker(originals)


@pytest.mark.parametrize("fault", ROLLBACK_FAULTS)
def test_rollback_straight_after_the_kill_then_a_new_window(staged_log_dir, stage_root, private_out, expected,
                                                           fault) -> None:
    """Rolled back with the window killed (no re-run): the originals come back byte for byte and
    the stage is left as it was; a new window with it then swaps in at least the staged segments
    the killed one never touched (those it backed up may be converted again, never lost)."""
    log_dir, inodes = staged_log_dir
    originals = tree_state(log_dir)
    run_id = "rollback-" + fault.replace(":", "-").replace("@", "-")
    _crash(log_dir, run_id, fault)
    touched = {f"{Path(ub.partition_dir).name}.{names.filename_prefix_from_offset(ub.place.base_offset)}"
               for ub in unit_backups(private_out / "backups", run_id) if ub.place is not None}
    assert touched

    rb = rollback_run(run_id)
    assert rb.exit_code() == 0, _problems(rb)
    assert _without_marker(tree_state(log_dir)) == _without_marker(originals)
    stage = Stage(stage_root, STAGE_ID)
    assert len(stage.entries()) == STAGED

    untouched = [seg for seg in inodes if seg not in touched]
    again = execute_upgrade([str(log_dir)], options=_window_options(), engine="inline", run_id=run_id + "-again")
    assert again.exit_code() == 0, (again.refusal, _problems(again))
    window = _window(again)
    assert window.swapped >= len(untouched) and window.swapped + window.discarded == STAGED, window
    assert window.swapped + window.converted == STAGED + CONVERTED, window
    _assert_upgraded(log_dir, expected)
    _assert_swapped_from_stage(log_dir, inodes, untouched)
    rb = rollback_run(run_id + "-again")
    assert rb.exit_code() == 0, _problems(rb)
    assert _without_marker(tree_state(log_dir)) == _without_marker(originals)


# (rule, the staged segments swapped in by the re-run): legacy-v0-0 0 is the third staged unit,
# after clicks-v1-0's two; legacy-v0-0 262 is not reached before the kill
DISCARD_FAULTS = [
    (f"backup@{LEGACY_0}:1", [CLICKS_0, CLICKS_286]),  # backed up with the stage's fingerprints
    (f"stage-link@{LEGACY_0}:3", [CLICKS_0, CLICKS_286]),  # three of its nine staged files linked in
    (f"swap-final@{LEGACY_0}:2", [CLICKS_0, CLICKS_286, LEGACY_0]),  # its links outlive the stage
]


@pytest.mark.parametrize(("fault", "swapped"), DISCARD_FAULTS, ids=[f for f, _ in DISCARD_FAULTS])
def test_discard_stage_in_the_middle_of_a_window(staged_log_dir, tmp_path, stage_root, expected, fault,
                                                 swapped: list[str]) -> None:
    """``--discard-stage`` after a window was killed in the middle of a staged unit: the re-run
    converts on the spot what it had not linked in (the units swapped before the kill stay
    counted as swapped); every record is there, and the rollback restores the originals."""
    log_dir, inodes = staged_log_dir
    originals = tree_state(log_dir)
    run_id = "discarded-" + fault.replace(":", "-").replace("@", "-")
    _crash(log_dir, run_id, fault)

    res = CliRunner().invoke(app, ["upgrade", str(log_dir), "--discard-stage", STAGE_ID])
    assert res.exit_code == 0, res.output
    assert f"stage {STAGE_ID} discarded: {STAGED} staged segment(s)" in res.output
    assert not Stage(stage_root, STAGE_ID).exists()
    _assert_kafka_loads_every_record_once(log_dir, tmp_path / "kafka-view", expected)

    report = execute_upgrade([str(log_dir)], options=_window_options(), engine="inline", run_id=run_id)
    assert report.exit_code() == 0, (report.refusal, _problems(report))
    assert report.totals.digest_mismatches == 0
    window = _window(report)
    n = len(swapped)
    assert (window.swapped, window.converted, window.discarded) == (n, STAGED + CONVERTED - n, 0), window
    _assert_upgraded(log_dir, expected)
    _assert_swapped_from_stage(log_dir, inodes, swapped)  # the others: converted, as the counts say

    rb = rollback_run(run_id)
    assert rb.exit_code() == 0, _problems(rb)
    assert _without_marker(tree_state(log_dir)) == _without_marker(originals)


def test_discard_stage_while_the_window_links_it_in(staged_log_dir, stage_root, expected, monkeypatch) -> None:
    """``--discard-stage`` run beside a live window (no kill), between two links of a staged
    unit: the unit takes back what it linked and converts the segment itself, the next staged
    unit finds no stage; exit 0, every record there, the rollback restores the originals."""
    import migration.migrations.upgrade.unit as unit_module

    log_dir, inodes = staged_log_dir
    originals = tree_state(log_dir)
    real = unit_module.fault_point
    links = []

    def discard_mid_link(point: str) -> None:
        real(point)
        if point == "stage-link":
            links.append(point)
            if len(links) == 2 * FILES_PER_STAGED + 3:  # legacy-v0-0 0, its third file linked in
                assert len(list((log_dir / "legacy-v0-0").glob("*.cleaned"))) == 3
                Stage(stage_root, STAGE_ID).discard()

    monkeypatch.setattr(unit_module, "fault_point", discard_mid_link)
    report = execute_upgrade([str(log_dir)], options=_window_options(), engine="inline", run_id="window-raced")
    assert report.exit_code() == 0, (report.refusal, _problems(report))
    assert len(links) == 2 * FILES_PER_STAGED + 3
    window = _window(report)
    assert (window.swapped, window.converted, window.discarded) == (2, STAGED + CONVERTED - 2, 0), window
    _assert_upgraded(log_dir, expected)
    _assert_swapped_from_stage(log_dir, inodes, [CLICKS_0, CLICKS_286])
    rb = rollback_run("window-raced")
    assert rb.exit_code() == 0, _problems(rb)
    assert _without_marker(tree_state(log_dir)) == _without_marker(originals)


# ---------------------------------------------------------------- Spark

# The whole process tree (CLI driver, Spark's JVM, its Python workers) killed from inside an
# executor, as in test_upgrade_spark_crash.py.
SPARK_FAULTS = [
    ("stage-link", f"stage-link@{CLICKS_286}:5:killsession"),
    ("swap-final", f"swap-final@{LEGACY_262}:2:killsession"),
]



@pytest.mark.slow
@pytest.mark.parametrize(("name", "faults"), SPARK_FAULTS, ids=[s[0] for s in SPARK_FAULTS])
def test_spark_window_killed_then_kafka_load_rerun_and_rollback(staged_log_dir, tmp_path, stage_root, expected,
                                                                name, faults) -> None:
    log_dir, inodes = staged_log_dir
    originals = tree_state(log_dir)
    run_id = f"spark-window-{name}"
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    env = os.environ | {"KMIGRATE_FAULT_AT": faults, "KMIGRATE_FAULT_DIR": str(fault_dir),
                        "PYTHONPATH": str(Path.cwd())}
    killed_at_fault([sys.executable, "-m", "migration", "upgrade", str(log_dir), "--to", "v2",
                     "--engine", "spark", "--master", "local[2]", "--run-id", run_id, "--stage", STAGE_ID,
                     "--segment-bytes", str(SEGMENT_BYTES)], env)
    assert Stage(stage_root, STAGE_ID).exists()

    _assert_kafka_loads_every_record_once(log_dir, tmp_path / "kafka-view", expected)

    report = execute_upgrade([str(log_dir)], options=_window_options(), engine="inline", run_id=run_id)
    assert report.exit_code() == 0, (report.refusal, _problems(report))
    window = _window(report)
    assert (window.swapped, window.converted, window.discarded) == (STAGED, CONVERTED, 0), window
    _assert_upgraded(log_dir, expected)
    _assert_swapped_from_stage(log_dir, inodes, list(inodes))
    assert not Stage(stage_root, STAGE_ID).exists()

    rb = rollback_run(run_id)
    assert rb.exit_code() == 0, _problems(rb)
    assert _without_marker(tree_state(log_dir)) == _without_marker(originals)
