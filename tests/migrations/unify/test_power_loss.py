"""Power loss during ``unify-bootstrap`` (issue 31): the run's system calls are recorded with
strace and replayed on a model of the file system (tests/support/powerloss.py); every state a
power cut could leave, under the ext4-ordered and the POSIX rules, is judged as test_crash.py
judges a killed run: after Kafka's startup (``*.checkpoint.part`` deleted) the zero checkpoint
is the old or the new complete file and decodes, bootstrap.checkpoint is in place or kept in
the backup root byte for byte; and a re-run finishes, with the new zero checkpoint, the
bootstrap file retired into the backups once, the old zero checkpoint kept, and validation
clean."""

from __future__ import annotations

import os
import sys

import pytest
from support import powerloss as pl

from migration.logdir.validation import validate_paths
from migration.migrations.unify import UnifyOptions, execute_unify

pytestmark = pytest.mark.usefixtures("strace_installed")
workdir = pl.workdir_fixture("kmigrate-power-loss-", scope="function")
home_inside_root = pl.home_inside_root_fixture("_isolated_out")


def _inputs(kraft, dynamic: bool) -> tuple[bytes, bytes | None]:
    values, _ = kraft.bootstrap_values()
    kr = [(kraft.KRAFT_VERSION, kraft.kraft_version_value(1)), (kraft.KRAFT_VOTERS, kraft.default_voters())]
    return kraft.bootstrap(values), (kraft.checkpoint([], kraft=kr) if dynamic else None)


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic-quorum", "static-quorum"])
def test_power_loss_during_unify_bootstrap(workdir, kraft, dynamic) -> None:
    root, scratch = workdir / "root", workdir / "scratch"
    scratch.mkdir()
    boot, old_zero = _inputs(kraft, dynamic)
    ctl = kraft.make_metadata_dir(root / "ctl", boot=boot, zero=old_zero)
    mdir = ctl / kraft.METADATA_DIR
    backups = root / "backups"
    env = pl.traced_env(root)
    rec = pl.record([sys.executable, "-m", "migration", "unify-bootstrap", str(ctl), "--engine", "inline",
                     "--backup-root", str(backups)], root, env=env, cwd=scratch)
    assert rec.returncode == 0, rec.stdout + rec.stderr
    new_zero = (mdir / kraft.ZERO).read_bytes()
    ctl_rel, mdir_rel, backups_rel = rec.rel(ctl), rec.rel(mdir), rec.rel(backups)

    def judge(st: pl.CrashState) -> list[str]:
        problems = []
        # Kafka's startup on a copy: partial snapshots are deleted.
        files = {n: b for n, b in st.files(mdir_rel).items() if not n.endswith(".checkpoint.part")}
        zero = files.get(kraft.ZERO)
        if zero not in (old_zero, new_zero):
            problems.append(f"after Kafka's startup the zero checkpoint is neither the old nor the new one: "
                            f"{None if zero is None else len(zero)} bytes")
        elif zero is not None:
            try:
                kraft.decode(zero)
            except AssertionError as exc:
                problems.append(f"the zero checkpoint does not decode: {exc}")
        in_place = st.files(ctl_rel).get("bootstrap.checkpoint")
        kept = [b for n, b in st.files(backups_rel).items() if n.endswith("/bootstrap.checkpoint")]
        if in_place != boot and kept != [boot]:
            problems.append(f"bootstrap.checkpoint lost: in place {in_place is not None}, "
                            f"{len(kept)} copies in the backups ({sum(k == boot for k in kept)} intact)")
        # The same run again, on the state as the power cut left it.
        pl.materialize(st, root)
        report = execute_unify([ctl], options=UnifyOptions(backup_root=str(backups)))
        if report.exit_code() != 0:
            why = [f"{u.path}: " + "; ".join(str(e) for e in u.errors) for *_, u in report.problem_units()]
            problems.append(f"re-run: exit {report.exit_code()}: {report.refusal or ''} {' | '.join(why)}"[:1500])
            return problems
        if (mdir / kraft.ZERO).read_bytes() != new_zero:
            problems.append("after the re-run the zero checkpoint is not the one a clean run writes")
        if (ctl / "bootstrap.checkpoint").exists():
            problems.append("after the re-run bootstrap.checkpoint is still in place")
        if [p.read_bytes() for p in backups.rglob("bootstrap.checkpoint")] != [boot]:
            problems.append("after the re-run the backups do not hold bootstrap.checkpoint exactly once")
        if old_zero is not None and [p.read_bytes() for p in backups.rglob(kraft.ZERO)] != [old_zero]:
            problems.append("after the re-run the backups do not hold the old zero checkpoint exactly once")
        if [n for n in os.listdir(mdir) if n.endswith(".part")]:
            problems.append("after the re-run a .part file is left")
        res = validate_paths([ctl])
        problems += [f"after the re-run, validate: {f}" for f in res.problems]
        return problems

    states = rec.crash_states()
    pl.assert_every_entry_durable_at_once(rec, states)
    pl.assert_no_failures(rec, states, judge, "power loss during unify-bootstrap")
