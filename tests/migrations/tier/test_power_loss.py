"""Power loss during ``tier-prepare --assign-leader-epoch --store-url file://...`` (issue 31):
the run's system calls are recorded with strace and replayed on a model of the file system
(tests/support/powerloss.py); every state a power cut could leave, under the ext4-ordered and
the POSIX rules, is judged three ways, each on a fresh copy (``TierJudge``): Kafka's loader (every
record, no segment, index, snapshot or leader-epoch problem the original did not have), a
re-run with the same run id (finishes; nothing left behind in the log dir or the store) and a
rollback (every log-dir file back, byte for byte). The file store's root lies inside the
recorded root, so its states are built too. A last test shows the harness has teeth: with the
directory fsyncs removed, the POSIX model finds failing states.

The log dir (tiny_dir.py): three partitions needing producer snapshots and a leader epoch,
one with a corrupt snapshot the run rebuilds.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import powerloss as pl

from migration.migrations.tier.options import TierOptions

from .tiny_dir import build_tier_log_dir

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.usefixtures("strace_installed")
JOB = Path(__file__).with_name("tier_job.py")
RUN_ID = "tier-power-loss"
STATE_ENV = ("KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_FAULT_AT", "KMIGRATE_FAULT_DIR")


@dataclass
class Run:
    root: Path
    log_dir: Path
    store: Path
    scratch: Path
    env: dict[str, str]
    recording: pl.Recording
    states: list[pl.CrashState]
    expected: dict[str, list[tuple]]
    original: dict[str, bytes]

    def options(self) -> TierOptions:
        return TierOptions(store_url=self.store.as_uri(), assign_leader_epoch=True, part_size=4096,
                           multipart_threshold=16384)

    def judge(self, recording: pl.Recording | None = None,
              checks: tuple[str, ...] = ("loader", "rerun", "rollback")) -> pl.TierJudge:
        return pl.TierJudge(recording or self.recording, self.log_dir, self.store, self.scratch, RUN_ID,
                            self.options(), self.expected, self.original, checks)

    def argv(self) -> list[str]:
        return [RUN_ID, self.store.as_uri(), str(self.log_dir)]


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ, KMIGRATE_HOME=str(root / "home"), PYTHONPATH=str(ROOT), KMIGRATE_PROJECT_ROOT=str(ROOT))
    for key in STATE_ENV:
        env.pop(key, None)
    return env


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Iterator[Path]:
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="kmigrate-tier-power-loss-", dir=shm)) if os.access(shm, os.W_OK) else \
        tmp_path_factory.mktemp("tier-power-loss")
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(autouse=True)
def home_inside_root(monkeypatch, workdir) -> None:
    """The judge's in-process runs see the traced run's home (the backup root under it)."""
    for key in STATE_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("KMIGRATE_HOME", str(workdir / "root" / "home"))


@pytest.fixture(scope="module")
def tier_run(workdir) -> Run:
    root, scratch = workdir / "root", workdir / "scratch"
    scratch.mkdir()
    root.mkdir()
    log_dir, store = root / "kafka-logs", root / "store"
    build_tier_log_dir(log_dir)
    store.mkdir()
    expected = pl._kafka_loader().read_log_dir_records(log_dir)
    env = _env(root)
    rec = pl.record([sys.executable, str(JOB), RUN_ID, store.as_uri(), str(log_dir)], root, env=env, cwd=scratch)
    assert rec.returncode == 0, rec.stdout[-3000:] + rec.stderr[-3000:]
    return Run(root, log_dir, store, scratch, env, rec, rec.crash_states(), expected,
               rec.initial.files(rec.rel(log_dir)))


def _assert_no_failures(recording: pl.Recording, states: list[pl.CrashState], judge, title: str) -> None:
    t0 = time.monotonic()
    failures = pl.judge_states(recording, states, judge)
    print(f"{title}: {len(recording.ops)} operations, {len(states)} states judged in {time.monotonic() - t0:.1f}s, "
          f"{len(failures)} fail")
    assert not failures, pl.report(recording, failures, len(states), title=title)


def test_power_loss_during_tier_prepare(tier_run) -> None:
    run = tier_run
    assert len(run.recording.ops) > 100 and any(st.model == pl.POSIX for st in run.states)
    names = {n for st in run.states for n in st.names(run.recording.rel(run.log_dir))}
    assert any(n.endswith(".snapshot.kmigrate.tmp") for n in names)  # states mid snapshot write are among them
    _assert_no_failures(run.recording, run.states, run.judge(), "power loss during tier-prepare")


def test_the_harness_finds_missing_directory_fsyncs(tier_run) -> None:
    """The same run with every fsync of a directory made a no-op: the POSIX model must find
    states that fail (the ext4-ordered model cannot: it keeps entries without fsyncs)."""
    run = tier_run
    pl.materialize(run.recording.initial, run.root)
    argv = pl.without_directory_fsyncs(JOB, run.scratch / "no_dir_fsync.py")
    rec = pl.record([*argv, *run.argv()], run.root, env=run.env, cwd=run.scratch)
    assert rec.returncode == 0, rec.stderr[-3000:]
    assert not [op for op in rec.ops if op.kind == "fsync" and rec.kind[op.inode] == "d"]
    last = range(len(rec.ops) - 60, len(rec.ops) + 1)
    posix = [st for st in rec.crash_states((pl.POSIX,), points=last) if st.lost]
    failures = pl.judge_states(rec, reversed(posix), run.judge(rec), stop_at_first=True)
    assert failures, "no POSIX crash state fails although no directory is ever fsynced"
    print(pl.report(rec, failures, len(posix), title="without directory fsyncs (expected to fail)"))
