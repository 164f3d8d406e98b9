"""Indexes are always valid after a run: a segment the upgrade leaves in its format, but whose
offset or time index is wrong (empty with timestamps, missing, garbage), gets both indexes rebuilt
with Kafka's rules, named in the output and the report as a repair; its ``.log`` stays byte for
byte; a rollback puts the old index files back."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import tree_state
from kafka_loader import read_log_dir

from migration.logdir.validation import validate_paths
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade, rollback_run


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _repairs(report) -> dict[str, str]:
    return {u.unit: w.message for *_, u in report.iter_units() for w in u.warnings if w.code == "INDEX_REBUILT"}


@pytest.mark.parametrize(("topic", "target", "damage"), [
    ("events-v2-0", "v2", "empty-timeindex"),
    ("events-v2-0", "v2", "garbage-index"),
    ("clicks-v1-0", "v1", "no-timeindex"),  # v1 data as Kafka 0.10.0 wrote it (KIP-32 before KIP-33)
    ("clicks-v1-0", "v1", "no-index"),
])
def test_segment_in_target_format_with_a_wrong_index_is_repaired(sample_cluster, topic, target, damage):
    d = sample_cluster.broker_log_dirs[1]
    seg = sorted((d / topic).glob("*.log"))[0]
    index, timeindex = seg.with_suffix(".index"), seg.with_suffix(".timeindex")
    st = seg.stat()
    if damage == "empty-timeindex":
        timeindex.write_bytes(b"")
    elif damage == "garbage-index":
        index.write_bytes(os.urandom(index.stat().st_size + 3))
    elif damage == "no-timeindex":
        timeindex.unlink()
    else:
        index.unlink()
    for p in (index, timeindex):
        if p.exists():
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    damaged = tree_state(d)
    before = validate_paths([str(d)])
    assert any(f.file.startswith(str(seg.with_suffix(""))) for f in before.problems), [str(f) for f in before.problems]
    log_sha, records = _sha(seg), read_log_dir(d)[topic]

    report = execute_upgrade([str(d)], options=UpgradeOptions(target=target), engine="inline", run_id=f"r-{damage}")
    assert report.exit_code() == 0, [(u.path, [e.message for e in u.errors]) for *_, u in report.problem_units()]
    repairs = _repairs(report)
    assert seg.name in repairs and "rebuilt" in repairs[seg.name]
    after = validate_paths([str(d)])
    assert after.ok, [str(f) for f in after.problems]
    assert _sha(seg) == log_sha and read_log_dir(d)[topic] == records  # the .log, byte for byte
    assert seg.stat().st_mtime_ns == st.st_mtime_ns and timeindex.stat().st_mtime_ns == st.st_mtime_ns

    rb = rollback_run(f"r-{damage}")
    assert rb.exit_code() == 0
    assert tree_state(d) == damaged


def test_cli_names_the_repair(sample_cluster, private_out):
    d = sample_cluster.broker_log_dirs[1]
    seg = sorted((d / "events-v2-0").glob("*.log"))[0]
    seg.with_suffix(".timeindex").write_bytes(b"")
    proc = subprocess.run([sys.executable, "-m", "migration", "upgrade", str(d), "--to", "v2", "--engine", "inline"],
                          capture_output=True, text=True, timeout=180,
                          env=os.environ | {"PYTHONPATH": str(Path.cwd()), "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = " ".join(proc.stdout.split())
    assert "INDEX_REBUILT" in text or "index rebuilt" in text, text
    assert seg.name in text
