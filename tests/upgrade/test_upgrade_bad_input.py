"""Bad input and safety gates: corruption, truncated tails, live locks, unclean shutdowns."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import tree_state
from kafka_loader import read_log_dir

from migration.audit.model import UnitStatus
from migration.ops.upgrade import UpgradeOptions, execute_upgrade


def _segment(log_dir: Path, topic_prefix: str) -> Path:
    part = sorted(p for p in log_dir.iterdir() if p.name.startswith(topic_prefix))[0]
    return sorted(part.glob("*.log"))[0]


def _failed(report) -> list:
    return [u for *_, u in report.iter_units() if u.status is UnitStatus.FAILED]


def test_corrupt_segment_is_reported_not_rewritten(sample_cluster) -> None:
    d = sample_cluster.broker_log_dirs[1]
    seg = _segment(d, "legacy-v0")
    data = bytearray(seg.read_bytes())
    data[1000] ^= 0xFF  # a flipped byte inside a message
    seg.write_bytes(bytes(data))
    before = seg.read_bytes()
    report = execute_upgrade([str(d)], options=UpgradeOptions(target="v2"), engine="inline")
    assert report.exit_code() == 1
    failed = _failed(report)
    assert len(failed) == 1
    err = failed[0].errors[0]
    assert err.file == str(seg) and err.position is not None and err.position <= 1000
    assert seg.read_bytes() == before  # never rewritten
    assert report.totals.units_ok > 0  # the others completed
    # the other segments of that partition were upgraded
    others = [u for *_, u in report.iter_units() if u.status is UnitStatus.OK]
    assert all(u.output_format == "v2" for u in others)


def test_truncated_tail_is_reported(sample_cluster) -> None:
    d = sample_cluster.broker_log_dirs[1]
    seg = _segment(d, "legacy-v0")
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - 5)
    report = execute_upgrade([str(d)], options=UpgradeOptions(target="v1"), engine="inline")
    assert report.exit_code() == 1
    (failed,) = _failed(report)
    assert failed.errors[0].file == str(seg) and failed.errors[0].position is not None
    assert failed.errors[0].position < size - 5
    assert seg.stat().st_size == size - 5


_PY_HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("locked", flush=True)
    time.sleep(120)
""")

_JAVA_HOLDER = textwrap.dedent("""
    import java.nio.channels.FileChannel;
    import java.nio.file.*;
    public class Holder {
        public static void main(String[] a) throws Exception {
            FileChannel ch = FileChannel.open(Paths.get(a[0]), StandardOpenOption.CREATE, StandardOpenOption.READ,
                                              StandardOpenOption.WRITE);
            if (ch.tryLock() == null) { System.exit(1); }
            System.out.println("locked");
            System.out.flush();
            Thread.sleep(120000);
        }
    }
""")


def _holder(kind: str, lock: Path, tmp_path: Path) -> subprocess.Popen:
    if kind == "python":
        cmd = [sys.executable, "-c", _PY_HOLDER, str(lock)]
    else:
        if not shutil.which("javac"):
            pytest.skip("no JDK")
        src = tmp_path / "Holder.java"
        src.write_text(_JAVA_HOLDER)
        subprocess.run(["javac", "-d", str(tmp_path), str(src)], check=True)
        cmd = ["java", "-cp", str(tmp_path), "Holder", str(lock)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "locked"
    return p


@pytest.mark.parametrize("kind", ["python", "java"])
def test_live_lock_refuses_and_changes_nothing(sample_cluster, tmp_path, kind) -> None:
    d = sample_cluster.broker_log_dirs[1]
    before = tree_state(d)
    holder = _holder(kind, d / ".lock", tmp_path)
    try:
        report = execute_upgrade([str(d)], options=UpgradeOptions(target="v2"), engine="inline")
    finally:
        holder.kill()
        holder.wait()
    assert report.exit_code() == 3 and "lock" in (report.refusal or "")
    assert tree_state(d) == before


def test_unclean_shutdown_refuses_unless_forced(sample_cluster) -> None:
    d = sample_cluster.broker_log_dirs[2]
    (d / ".kafka_cleanshutdown").unlink()
    before = tree_state(d)
    records = read_log_dir(d)
    report = execute_upgrade([str(d)], options=UpgradeOptions(target="v2"), engine="inline")
    assert report.exit_code() == 3 and "unclean" in (report.refusal or "")
    assert tree_state(d) == before
    forced = execute_upgrade([str(d)], options=UpgradeOptions(target="v2", force=True), engine="inline")
    assert forced.exit_code() == 0 and forced.totals.units_ok > 0
    assert any("unclean" in w.message for w in forced.warnings)
    assert [[r[0] for r in v] for v in read_log_dir(d).values()] == [[r[0] for r in v] for v in records.values()]


def test_dry_run_touches_nothing(sample_cluster) -> None:
    d = sample_cluster.broker_log_dirs[1]
    before = tree_state(d)
    t = time.monotonic()
    report = execute_upgrade([str(d)], options=UpgradeOptions(target="v2", dry_run=True), engine="inline")
    assert time.monotonic() - t < 30
    assert report.exit_code() == 0 and report.totals.units_planned > 0
    planned = [u for *_, u in report.iter_units() if u.status is UnitStatus.PLANNED]
    assert all(u.bytes_after and u.bytes_after > 0 for u in planned)
    assert any("expected growth" in w.message for w in report.warnings)
    assert tree_state(d) == before


def test_cli_exit_codes(sample_cluster, tmp_path) -> None:
    d = sample_cluster.broker_log_dirs[3]
    run = [sys.executable, "-m", "migration"]
    ok = subprocess.run([*run, "upgrade", str(d), "--to", "v2", "--engine", "inline", "--run-id", "cli-run"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "report:" in ok.stdout
    usage = subprocess.run([*run, "upgrade", str(d), "--to", "v9"], capture_output=True, text=True)
    assert usage.returncode == 2
    rb = subprocess.run([*run, "rollback", "cli-run"], capture_output=True, text=True)
    assert rb.returncode == 0, rb.stdout + rb.stderr
    (d / ".kafka_cleanshutdown").unlink()
    refused = subprocess.run([*run, "upgrade", str(d), "--to", "v2", "--engine", "inline"],
                             capture_output=True, text=True)
    assert refused.returncode == 3 and "REFUSED" in refused.stdout
