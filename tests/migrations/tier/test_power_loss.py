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

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import powerloss as pl

from migration.migrations.tier.options import TierOptions

from .tiny_dir import build_tier_log_dir

pytestmark = pytest.mark.usefixtures("strace_installed")
JOB = Path(__file__).with_name("tier_job.py")
RUN_ID = "tier-power-loss"


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
        return pl.TierJudge(recording or self.recording, self.log_dir, self.scratch, RUN_ID, self.options(),
                            self.expected, self.original, checks, store=self.store)

    def argv(self) -> list[str]:
        return [RUN_ID, self.store.as_uri(), str(self.log_dir)]


workdir = pl.workdir_fixture("kmigrate-tier-power-loss-")
home_inside_root = pl.home_inside_root_fixture()


@pytest.fixture(scope="module")
def tier_run(workdir) -> Run:
    root, scratch = workdir / "root", workdir / "scratch"
    scratch.mkdir()
    root.mkdir()
    log_dir, store = root / "kafka-logs", root / "store"
    build_tier_log_dir(log_dir)
    store.mkdir()
    expected = pl._kafka_loader().read_log_dir_records(log_dir)
    env = pl.traced_env(root)
    rec = pl.record([sys.executable, str(JOB), RUN_ID, store.as_uri(), str(log_dir)], root, env=env, cwd=scratch)
    assert rec.returncode == 0, rec.stdout[-3000:] + rec.stderr[-3000:]
    return Run(root, log_dir, store, scratch, env, rec, rec.crash_states(), expected,
               rec.initial.files(rec.rel(log_dir)))


def test_power_loss_during_tier_prepare(tier_run) -> None:
    run = tier_run
    assert len(run.recording.ops) > 100
    pl.assert_every_entry_durable_at_once(run.recording, run.states)
    names = {n for st in run.states for n in st.names(run.recording.rel(run.log_dir))}
    assert any(n.endswith(".snapshot.kmigrate.tmp") for n in names)  # states mid snapshot write are among them
    pl.assert_no_failures(run.recording, run.states, run.judge(), "power loss during tier-prepare")


def test_the_harness_finds_missing_directory_fsyncs(tier_run) -> None:
    """The same run with every fsync of a directory made a no-op: the POSIX model must find a
    state that loses or breaks data, and the judge must not break on the states before it (the
    ext4-ordered model cannot fail: it keeps entries without fsyncs)."""
    run = tier_run
    pl.assert_finds_missing_directory_fsyncs(run.recording.initial, JOB, run.argv(), run.root, run.env, run.scratch,
                                             run.judge, last=60)
