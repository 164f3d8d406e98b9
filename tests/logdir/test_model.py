from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from support.lock_holders import PY_HOLDER, hold, hold_lock

from migration.logdir.model import LogDirLock, is_locked, scan_inventory, scan_log_dir


def test_inventory_of_sample_cluster(sample_cluster):
    inv = scan_inventory([*sample_cluster.log_dirs, sample_cluster.controller_dir], deep=True)
    by_node = inv.brokers()
    assert sorted(k for k in by_node if k is not None) == [1, 2, 3, 3000]
    names = {p.name for d in inv.log_dirs for p in d.partitions}
    assert names == set(sample_cluster.records)
    for d in inv.log_dirs:
        assert d.clean_shutdown and not d.locked
        for p in d.partitions:
            # deep scan counts every record: the sample's record count per partition
            total = sum(s.stats.records for s in p.segments)
            assert total <= sample_cluster.records[p.name]
            assert all(s.stats.error is None and s.stats.trailing_bytes == 0 for s in p.segments)
    legacy = next(p for d in inv.log_dirs for p in d.partitions if p.topic == "legacy-v0")
    assert legacy.topic_id is None
    assert set(legacy.formats()) == {"v0"}
    events = next(p for d in inv.log_dirs for p in d.partitions if p.topic == "events-v2")
    assert events.topic_id == sample_cluster.topic_ids["events-v2"]
    assert {c for s in events.segments for c in s.stats.codecs} >= {"none", "gzip", "snappy", "lz4", "zstd"}
    ctrl = next(d for d in inv.log_dirs if d.node_id == 3000)
    assert ctrl.bootstrap_checkpoint and ctrl.metadata_log is not None
    assert ctrl.metadata_log.zero_checkpoint is not None


def test_leftover_files_are_listed(sample_cluster):
    pdir = next(Path(p) for p in sample_cluster.log_dirs[0].iterdir() if p.is_dir())
    (pdir / "00000000000000000000.log.swap").write_bytes(b"")
    d = scan_log_dir(sample_cluster.log_dirs[0], stats=False)
    part = next(p for p in d.partitions if p.path == str(pdir))
    assert "00000000000000000000.log.swap" in part.leftovers


def test_lock_held_by_another_python_process_is_seen(tmp_path):
    (tmp_path / ".lock").touch()
    assert not is_locked(tmp_path)
    proc = hold_lock("python", tmp_path / ".lock", tmp_path)
    try:
        assert is_locked(tmp_path)
        assert not LogDirLock(tmp_path).acquire()
    finally:
        proc.kill()
        proc.wait()
    time.sleep(0.05)
    assert not is_locked(tmp_path)


def test_lock_held_by_java_filechannel_trylock_is_seen(tmp_path):
    """What a broker takes: FileChannel.tryLock. flock(2) would not see it; lockf does."""
    logdir = tmp_path / "logs"
    logdir.mkdir()
    proc = hold_lock("java", logdir / ".lock", tmp_path)
    try:
        assert is_locked(logdir)
    finally:
        proc.kill()
        proc.wait()
    assert not is_locked(logdir)


def test_our_own_lock_keeps_a_broker_out(tmp_path):
    with LogDirLock(tmp_path):
        assert not is_locked(tmp_path)  # ours: not reported as a live broker
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
            import fcntl, os
            fd = os.open({str(tmp_path / '.lock')!r}, os.O_RDWR)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                print("got")
            except OSError:
                print("refused")
        """)], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "refused"


def test_a_lock_held_by_our_own_job_is_not_a_live_broker_for_its_executors(tmp_path, monkeypatch):
    """The Spark job driver holds the lock; executors (other processes), told its pid, must not
    refuse. Any other process, even one with the same state directory, is kept out."""
    monkeypatch.setenv("KMIGRATE_OUT", str(tmp_path / "out"))
    logdir = tmp_path / "logs"
    logdir.mkdir()
    job = hold([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from migration.logdir.model import LogDirLock
        lock = LogDirLock({str(logdir)!r})
        assert lock.acquire()
        print("locked", flush=True)
        time.sleep(60)
    """)])
    try:
        from migration.logdir.model import lock_holder_pid

        assert lock_holder_pid(logdir) == job.pid
        assert not is_locked(logdir, job_owner_pid=job.pid)  # our job's lock
        executor_side = LogDirLock(logdir, job_owner_pid=job.pid)
        assert executor_side.acquire() and executor_side._shared  # shared with its job's holder
        executor_side.release()
        assert lock_holder_pid(logdir) == job.pid  # releasing a shared hold keeps the job's lock
        # the same state directory proves nothing: another process is not the job's executor
        assert is_locked(logdir)
        assert not LogDirLock(logdir).acquire()
    finally:
        job.kill()
        job.wait()
    # a foreign holder that reuses nothing of ours is live
    other = hold([sys.executable, "-c", PY_HOLDER, str(logdir / ".lock")])
    try:
        assert is_locked(logdir)
    finally:
        other.kill()
        other.wait()
