"""Power loss during ``upgrade --to v2`` (issue 31): the run's system calls are recorded with
strace and replayed on a model of the file system (tests/support/powerloss.py); every state
a power cut could leave, under the ext4-ordered and the POSIX rules, is judged three ways, each
on a fresh copy: Kafka's loader (every record exactly once, no segment or index problem), a
re-run of the same job (finishes, records equal, validation clean, no leftover) and a rollback
(every original back, byte for byte). Crashes during a re-run and during a rollback are
recorded and judged the same way, and one Spark run. A last test shows the harness has teeth:
with the directory fsyncs removed, the POSIX model finds failing states.

The log dir is small on purpose (three partitions: v0 with wrappers, v1, v0 then v1; a
segment split by the rewrite), so that each test judges its few hundred states in about a
minute. The tree lives in /dev/shm when there is one: fsync is free there, and the judge's
re-runs and rollbacks fsync a hundred times each.
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kafka_loader import read_log_dir_records
from support import powerloss as pl

from migration.demo import sample_cluster as sample
from migration.formats import names
from migration.formats.checkpoint_files import OffsetCheckpointFile, TopicPartitionOffset
from migration.formats.clean_shutdown import CleanShutdownFile
from migration.formats.kafka_uuid import Uuid
from migration.formats.meta_properties import MetaProperties
from migration.migrations.upgrade.driver import UpgradeOptions

pytestmark = pytest.mark.usefixtures("strace_installed")
CRASH_JOB = Path(__file__).with_name("crash_job.py")
RUN_ID = "power-loss"
SOURCE_SEGMENT_BYTES = 8 * 1024
SEGMENT_BYTES = 6 * 1024  # the rewrite splits the larger v1 segment
OPTIONS = UpgradeOptions(target="v2", segment_bytes=SEGMENT_BYTES)
# (topic, kind of _legacy_stream, records): 2 + 1 + 1 segments; seed 3 puts gzip, snappy and
# lz4 wrappers in them.
PARTITIONS = (("legacy-v0", "v0", 60), ("clicks-v1", "v1", 36), ("orders-upgraded", "upgraded", 30))
SEED = 3


def build_log_dir(log_dir: Path) -> None:
    """A broker log dir from the sample cluster's generators, cleanly shut down."""
    rng = random.Random(SEED)
    values = sample._Values(rng)
    log_dir.mkdir(parents=True)
    ends = []
    for topic, kind, n in PARTITIONS:
        w = sample.PartitionWriter(log_dir / f"{topic}-0", SOURCE_SEGMENT_BYTES)
        for data, first, nxt, mtime in sample._legacy_stream(kind, n, rng, values, sample.T0_MS):
            w.append(data, first_offset=first, next_offset=nxt, mtime_s=mtime)
        w.close()
        ends.append(TopicPartitionOffset(topic, 0, w.next_offset))
    for name in names.OFFSET_CHECKPOINT_FILES:
        OffsetCheckpointFile([] if name == names.CLEANER_OFFSET_CHECKPOINT_FILE else ends).write(log_dir / name)
    MetaProperties(version=1, cluster_id=sample.CLUSTER_ID, node_id=1,
                   directory_id=Uuid.from_bytes(rng.randbytes(16))).write(log_dir / names.META_PROPERTIES_FILE)
    (log_dir / names.LOCK_FILE).touch()
    CleanShutdownFile(broker_epoch=101).write(log_dir / names.CLEAN_SHUTDOWN_FILE)


@dataclass
class Run:
    """A traced run and what its states are judged against."""

    root: Path
    log_dir: Path
    scratch: Path
    env: dict[str, str]
    recording: pl.Recording
    states: list[pl.CrashState]
    expected: dict[str, list[tuple]]
    original: dict[str, bytes]

    options: UpgradeOptions = field(default_factory=lambda: OPTIONS)

    def judge(self, recording: pl.Recording | None = None, checks: tuple[str, ...] = ("loader", "rerun", "rollback"),
              ) -> pl.UpgradeJudge:
        return pl.UpgradeJudge(recording or self.recording, self.log_dir, self.scratch, RUN_ID, self.options,
                               self.expected, self.original, checks)


workdir = pl.workdir_fixture("kmigrate-power-loss-")
home_inside_root = pl.home_inside_root_fixture("private_out")


def _new_log_dir(workdir: Path, prefix: str) -> tuple[Path, Path, Path, dict[str, list[tuple]], dict[str, str]]:
    """(root, scratch, log dir, its records, the traced run's environment) of a fresh tree."""
    root = workdir / f"{prefix}root"
    scratch = workdir / f"{prefix}scratch"
    scratch.mkdir()
    root.mkdir()
    log_dir = root / "kafka-logs"
    build_log_dir(log_dir)
    return root, scratch, log_dir, read_log_dir_records(log_dir), pl.traced_env(root)


@pytest.fixture(scope="module")
def inline_run(workdir) -> Run:
    root, scratch, log_dir, expected, env = _new_log_dir(workdir, "")
    rec = pl.record([sys.executable, str(CRASH_JOB), RUN_ID, "v2", str(SEGMENT_BYTES), str(log_dir)], root,
                    env=env, cwd=scratch)
    assert rec.returncode == 0, rec.stderr[-3000:]
    return Run(root, log_dir, scratch, env, rec, rec.crash_states(), expected, rec.initial.files("kafka-logs"))


def _mid_run(run: Run) -> pl.CrashState:
    """A state in the middle of a replacement, past half of the run: a unit's originals are
    renamed ``.deleted`` while its new files are ``.swap``."""
    half = len(run.recording.ops) // 2

    def mid(st: pl.CrashState) -> bool:
        files = st.names("kafka-logs")
        return st.point >= half and any(n.endswith(".deleted") for n in files) and any(
            n.endswith(".swap") for n in files)

    return run.recording.state_where(pl.EXT4, mid)


def test_power_loss_during_the_upgrade(inline_run) -> None:
    run = inline_run
    assert len(run.recording.ops) > 100
    pl.assert_every_entry_durable_at_once(run.recording, run.states)
    pl.assert_no_failures(run.recording, run.states, run.judge(), "power loss during upgrade --to v2")


def test_power_loss_during_a_rerun(inline_run) -> None:
    run = inline_run
    start = _mid_run(run)
    pl.materialize(start, run.root)
    rec = pl.record([sys.executable, str(CRASH_JOB), RUN_ID, "v2", str(SEGMENT_BYTES), str(run.log_dir)], run.root,
                    env=run.env, cwd=run.scratch)
    assert rec.returncode == 0, rec.stderr[-3000:]
    states = rec.crash_states()
    pl.assert_no_failures(rec, states, run.judge(rec), f"power loss during a re-run started from {start.label()}")


def test_power_loss_during_a_rollback(inline_run) -> None:
    run = inline_run
    start = _mid_run(run)
    pl.materialize(start, run.root)
    script = textwrap.dedent(f"""
        import sys
        from migration.migrations.upgrade.driver import rollback_run
        sys.exit(rollback_run({RUN_ID!r}).exit_code())
    """)
    rec = pl.record(pl.python_script(script, run.scratch / "rollback.py"), run.root, env=run.env, cwd=run.scratch)
    assert rec.returncode == 0, rec.stderr[-3000:]
    assert pl.tree_files(run.log_dir) == run.original
    states = rec.crash_states()
    # Every state loads with every record once, and a second rollback finishes the first.
    pl.assert_no_failures(rec, states, run.judge(rec, ("loader", "rollback")),
                          f"power loss during a rollback started from {start.label()}")


def test_the_harness_finds_missing_directory_fsyncs(inline_run) -> None:
    """The same upgrade with every fsync of a directory made a no-op: the POSIX model must find
    a state that loses or breaks data, and the judge must not break on the states before it
    (the ext4-ordered model cannot fail: it keeps entries without fsyncs)."""
    run = inline_run
    pl.assert_finds_missing_directory_fsyncs(run.recording.initial, CRASH_JOB,
                                             [RUN_ID, "v2", str(SEGMENT_BYTES), str(run.log_dir)], run.root, run.env,
                                             run.scratch, run.judge, last=40)


# The stop window after a prestage (issue 30): the same log dir, whose three closed segments
# are staged (one split in two by the conversion); the active ones are converted in the window.
STAGE_ID = "power-loss-stage"


@pytest.fixture(scope="module")
def window_run(workdir) -> Run:
    """A prestage (not traced: its stage is the state the window starts from, under the home
    in the root), then the stop window with ``--stage``, traced."""
    root, scratch, log_dir, expected, env = _new_log_dir(workdir, "window-")
    options = OPTIONS.model_copy(update={"stage": STAGE_ID})
    prestage = textwrap.dedent(f"""
        import sys
        from migration.migrations.upgrade.driver import UpgradeOptions
        from migration.migrations.upgrade.prestage import PrestageOptions, prestage_upgrade
        report = prestage_upgrade([{str(log_dir)!r}], options=PrestageOptions(
            upgrade=UpgradeOptions.model_validate_json({OPTIONS.model_dump_json()!r}), stage_id={STAGE_ID!r}))
        sys.exit(report.exit_code())
    """)
    pre = subprocess.run(pl.python_script(prestage, scratch / "prestage.py"), env=env, cwd=scratch,
                         capture_output=True, text=True)
    assert pre.returncode == 0, pre.stdout[-3000:] + pre.stderr[-3000:]
    rec = pl.record([sys.executable, str(CRASH_JOB), "--stage", STAGE_ID, RUN_ID, "v2", str(SEGMENT_BYTES),
                     str(log_dir)], root, env=env, cwd=scratch)
    assert rec.returncode == 0, rec.stderr[-3000:]
    return Run(root, log_dir, scratch, env, rec, rec.crash_states(), expected, rec.initial.files("kafka-logs"),
               options)


def test_power_loss_during_a_stop_window(window_run, monkeypatch) -> None:
    """Every state of a window that swaps staged segments in: loaded by Kafka with every record,
    finished by a re-run, rolled back. (A materialized state's files are new inodes, so a
    re-run's plan finds the staged originals changed and converts them itself: the swap's own
    steps are judged by the loader and the rollback, the re-run by the records it ends with.)
    The retired stage's files are unlinked without an fsync (stage.py: nothing relies on them
    being gone), so POSIX states of their own are expected there and judged like the rest."""
    run = window_run
    monkeypatch.setenv("KMIGRATE_HOME", run.env["KMIGRATE_HOME"])
    staged = [op for op in run.recording.ops if op.kind == "link" and "stages/" in op.text]
    assert len(staged) >= 5, f"the window swapped in {len(staged)} staged file(s): too few to judge the swap"
    pl.assert_no_failures(run.recording, run.states, run.judge(), "power loss during a stop window")


@pytest.mark.slow
def test_power_loss_during_a_spark_upgrade(inline_run) -> None:
    """``--engine spark --master local[2]``: the units run in Spark's Python workers (forked
    by its daemon), traced with the JVM; the states are judged with inline re-runs."""
    run = inline_run
    pl.materialize(run.recording.initial, run.root)
    script = textwrap.dedent(f"""
        import sys
        from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade
        report = execute_upgrade([{str(run.log_dir)!r}], options=UpgradeOptions.model_validate_json(
            {OPTIONS.model_dump_json()!r}), engine="spark", master="local[2]", run_id={RUN_ID!r})
        sys.exit(report.exit_code())
    """)
    rec = pl.record(pl.python_script(script, run.scratch / "spark_job.py"), run.root, env=run.env, cwd=run.scratch)
    assert rec.returncode == 0, rec.stderr[-3000:]
    assert any(op.pid != rec.ops[0].pid for op in rec.ops), "no file operation came from a Spark worker"
    states = rec.crash_states()
    pl.assert_no_failures(rec, states, run.judge(rec, ("loader", "rerun")), "power loss during a Spark upgrade")
