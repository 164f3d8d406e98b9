"""Kill -9 at every step of the unification: the directory must stay loadable by Kafka and a
re-run must complete.

Kafka at startup deletes ``*.checkpoint.part`` files (KafkaMetadataLog.recoverSnapshots); we
simulate that and then require: the zero checkpoint is the old or the new complete file, and
bootstrap.checkpoint is still in place or safely (byte for byte) in the backup root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migration.migrations.unify import FAULT_POINTS

ROOT = Path(__file__).resolve().parents[3]


def _cli(d: Path, backups: Path, tmp_path: Path, fault: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, KMIGRATE_PROJECT_ROOT=str(ROOT), KMIGRATE_OUT=str(tmp_path / "out"),
               KMIGRATE_REPORT_ROOT=str(tmp_path / "out" / "reports"))
    env.pop("KMIGRATE_FAULT_AT", None)
    if fault:
        env["KMIGRATE_FAULT_AT"] = fault
    return subprocess.run([sys.executable, "-m", "migration", "unify-bootstrap", str(d), "--engine", "inline",
                           "--backup-root", str(backups)], env=env, capture_output=True, text=True, timeout=60)


def _inputs(kraft, dynamic: bool) -> tuple[bytes, bytes | None]:
    values, _ = kraft.bootstrap_values()
    kr = [(kraft.KRAFT_VERSION, kraft.kraft_version_value(1)), (kraft.KRAFT_VOTERS, kraft.default_voters())]
    return kraft.bootstrap(values), (kraft.checkpoint([], kraft=kr) if dynamic else None)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The zero checkpoint an uninterrupted run writes, per quorum kind (the build is deterministic)."""
    return {}


def _reference(kraft, tmp_path: Path, dynamic: bool, cache: dict) -> bytes:
    if dynamic not in cache:
        boot, zero = _inputs(kraft, dynamic)
        d = kraft.make_metadata_dir(tmp_path / f"ref-{dynamic}", boot=boot, zero=zero)
        r = _cli(d, tmp_path / "ref-backups", tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        cache[dynamic] = (d / kraft.METADATA_DIR / kraft.ZERO).read_bytes()
        shutil.rmtree(tmp_path / f"ref-{dynamic}")
    return cache[dynamic]


# Every step for a dynamic quorum (replacing a zero checkpoint); for a static quorum (creating
# it) the steps where its absence matters: mid-write and between the rename and the retirement.
CASES = [(True, step) for step in FAULT_POINTS] + [(False, "zero-part-partial"), (False, "zero-renamed")]


@pytest.mark.parametrize(("dynamic", "step"), CASES, ids=[f"{'dynamic' if d else 'static'}-{s}" for d, s in CASES])
def test_kill_at_step_then_kafka_startup_then_rerun(tmp_path, kraft, reference, dynamic, step):
    new_zero = _reference(kraft, tmp_path, dynamic, reference)
    boot, old_zero = _inputs(kraft, dynamic)
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=boot, zero=old_zero)
    backups = tmp_path / "backups"
    mdir = d / kraft.METADATA_DIR
    before = set(os.listdir(mdir))

    r = _cli(d, backups, tmp_path, fault=step)
    assert r.returncode == -9, f"not killed at {step}: {r.returncode}\n{r.stdout}{r.stderr}"

    # What the kill left: at most .checkpoint.part files beside the files that were there.
    extra = set(os.listdir(mdir)) - before - {kraft.ZERO}
    assert all(n.endswith(".checkpoint.part") for n in extra), extra
    if step in ("zero-part-partial", "zero-part-written"):
        assert len(extra) == 1
    # Kafka's startup: partial snapshots are deleted.
    for n in extra:
        os.unlink(mdir / n)
    zero_path = mdir / kraft.ZERO
    if step in ("zero-backed-up", "zero-part-partial", "zero-part-written"):
        assert (zero_path.read_bytes() if zero_path.exists() else None) == old_zero
    else:
        assert zero_path.read_bytes() == new_zero  # complete, and exactly what a clean run writes
    if zero_path.exists():
        kraft.decode(zero_path.read_bytes())  # CRCs and framing hold
    in_place = (d / "bootstrap.checkpoint").read_bytes() if (d / "bootstrap.checkpoint").exists() else None
    kept = [p.read_bytes() for p in backups.rglob("bootstrap.checkpoint")]
    assert in_place == boot or kept == [boot], "bootstrap.checkpoint lost"
    if in_place is None:
        assert step == "bootstrap-retired"

    r = _cli(d, backups, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert zero_path.read_bytes() == new_zero
    assert not (d / "bootstrap.checkpoint").exists()
    assert [p.read_bytes() for p in backups.rglob("bootstrap.checkpoint")] == [boot]
    if old_zero is not None:
        assert [p.read_bytes() for p in backups.rglob(kraft.ZERO)] == [old_zero]
    assert not [n for n in os.listdir(mdir) if n.endswith(".part")]


def test_rerun_without_kafka_startup_cleans_partial_file(tmp_path, kraft, reference):
    """A re-run straight after the kill (no broker start in between) deletes the .part itself."""
    new_zero = _reference(kraft, tmp_path, True, reference)
    boot, old_zero = _inputs(kraft, True)
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=boot, zero=old_zero)
    assert _cli(d, tmp_path / "backups", tmp_path, fault="zero-part-partial").returncode == -9
    r = _cli(d, tmp_path / "backups", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (d / kraft.METADATA_DIR / kraft.ZERO).read_bytes() == new_zero
    assert not [n for n in os.listdir(d / kraft.METADATA_DIR) if n.endswith(".part")]
