"""Bad input and safety gates: corruption, truncated tails, live locks, unclean shutdowns."""

from __future__ import annotations

import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import tree_state
from kafka_loader import read_log_dir, read_log_dir_records
from support.lock_holders import hold_lock

from migration.audit.model import UnitStatus
from migration.formats.compression import gzip_compress, gzip_decompress
from migration.formats.file_records import FileRecords
from migration.formats.model import Compression
from migration.logdir.validate import validate_segment
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade, rollback_run


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


def _tamper_first_gzip_wrapper(seg: Path, mutate: Callable[[bytearray], None]) -> tuple[int, int]:
    """Change the decompressed inner messages of the first gzip wrapper of ``seg`` and write the
    wrapper again with a valid outer CRC: what a buggy writer leaves, which only a check of
    the inner messages finds. Returns the new wrapper's (position, size)."""
    data = seg.read_bytes()
    w = next(b for b in FileRecords(seg).batches() if b.is_compressed and b.compression is Compression.GZIP)
    key, value, _ = w._key_value()
    assert key is None and value is not None
    inner = bytearray(gzip_decompress(value))
    mutate(inner)
    new_value = gzip_compress(bytes(inner))
    head = struct.pack(">bb", w.magic, w.attributes) + (struct.pack(">q", w.timestamp) if w.magic else b"")
    body = head + struct.pack(">ii", -1, len(new_value)) + new_value
    entry = struct.pack(">qiI", w.offset, 4 + len(body), zlib.crc32(body)) + body
    seg.write_bytes(data[:w.position] + entry + data[w.position + w.size_in_bytes:])
    return w.position, len(entry)


def _flip_first_inner_crc(inner: bytearray) -> None:
    inner[12] ^= 0xFF  # the CRC of the first inner message (after its offset and size)


def _repeat_previous_offset(inner: bytearray) -> None:
    # A v0 inner message carries its absolute offset, outside its CRC: make it the offset
    # of the entry before the wrapper, so offsets no longer increase.
    (first,) = struct.unpack_from(">q", inner, 0)
    struct.pack_into(">q", inner, 0, first - 1)


@pytest.mark.parametrize("mutate", [_flip_first_inner_crc, _repeat_previous_offset], ids=["inner-crc", "inner-offset"])
def test_corruption_inside_a_wrapper_fails_its_unit_and_changes_nothing(sample_cluster, mutate) -> None:
    """A real run checks batch CRCs and framing before it starts (no decompression); the
    rewrite pass, reading every inner message, finds the rest and leaves the segment as it is."""
    d = sample_cluster.broker_log_dirs[1]
    seg = _segment(d, "legacy-v0")
    pos, size = _tamper_first_gzip_wrapper(seg, mutate)
    tampered = tree_state(d)
    shallow, _ = validate_segment(seg, deep=False)
    deep, _ = validate_segment(seg, deep=True)
    assert not [f for f in shallow.problems if f.file == str(seg)]
    assert [f for f in deep.problems if f.file == str(seg) and f.code in ("CORRUPT_BATCH", "OFFSET_ORDER")]
    before = seg.read_bytes()
    report = execute_upgrade([str(d)], options=UpgradeOptions(target="v1"), engine="inline")
    assert report.exit_code() == 1
    (failed,) = _failed(report)
    err = failed.errors[0]
    assert err.code == "CORRUPT_SEGMENT" and err.file == str(seg)
    assert err.position is not None and pos <= err.position < pos + size
    assert seg.read_bytes() == before
    assert not [p for p in seg.parent.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    ok = [u for *_, u in report.iter_units() if u.status is UnitStatus.OK and u.input_format != u.output_format]
    assert ok and all(u.output_format == "v1" for u in ok)  # the other units completed
    # A re-run of the same run fails that unit again and keeps the others' results.
    again = execute_upgrade([str(d)], options=UpgradeOptions(target="v1"), engine="inline", run_id=report.run_id)
    assert again.exit_code() == 1 and [u.errors[0].code for u in _failed(again)] == ["CORRUPT_SEGMENT"]
    assert again.totals.units_ok == report.totals.units_ok and seg.read_bytes() == before
    # Rolling the run back restores the others and leaves the corrupt segment as it is.
    rb = rollback_run(report.run_id)
    assert rb.exit_code() == 0
    assert tree_state(d) == tampered  # byte for byte, mtimes included


def test_dry_run_plan_names_corruption_inside_a_wrapper(sample_cluster) -> None:
    d = sample_cluster.broker_log_dirs[1]
    seg = _segment(d, "legacy-v0")
    pos, size = _tamper_first_gzip_wrapper(seg, _flip_first_inner_crc)
    report = execute_upgrade([str(d)], options=UpgradeOptions(target="v1", dry_run=True), engine="inline")
    assert report.exit_code() == 1
    (failed,) = _failed(report)
    err = failed.errors[0]
    assert err.file == str(seg) and err.position is not None and pos <= err.position < pos + size


@pytest.mark.parametrize("kind", ["python", "java"])
def test_live_lock_refuses_and_changes_nothing(sample_cluster, tmp_path, kind) -> None:
    d = sample_cluster.broker_log_dirs[1]
    before = tree_state(d)
    holder = hold_lock(kind, d / ".lock", tmp_path)
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
    assert any("expected growth" in w.message or "expected shrinkage" in w.message for w in report.warnings)
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
    assert refused.returncode == 3 and "kmigrate upgrade: refused:" in refused.stderr, refused.stdout + refused.stderr


@pytest.mark.parametrize("suffix", [".cleaned", ".swap"])
def test_leftovers_of_an_interrupted_replacement_are_refused(sample_cluster, suffix) -> None:
    """A .cleaned or .swap file is a replacement that did not finish: nothing is touched, not
    even Kafka's pending deletes elsewhere in the log dir."""
    d = sample_cluster.broker_log_dirs[1]
    seg = _segment(d, "clicks-v1")
    leftover = seg.with_name(seg.name + suffix)
    leftover.write_bytes(seg.read_bytes())
    other = _segment(d, "legacy-v0")
    pending = other.with_name("00000000000000000000.log.deleted" if other.name != "00000000000000000000.log"
                              else "00000000000000000000.index.deleted")
    pending.write_bytes(b"retention's rename")
    before = tree_state(d)
    report = execute_upgrade([str(d)], options=UpgradeOptions(target="v2"), engine="inline", run_id="leftover")
    assert report.exit_code() == 3
    assert leftover.name in report.refusal and "start the broker once" in report.refusal
    assert tree_state(d) == before


def _pending_deletes(log_dir: Path) -> list[Path]:
    """What a broker stopped cleanly leaves (Kafka 4.4 does): a segment retention renamed to
    .deleted, with its indexes, at a base offset no live segment has."""
    made = []
    for prefix in ("legacy-v0", "clicks-v1"):
        part = _segment(log_dir, prefix).parent
        bases = {int(p.name.split(".")[0]) for p in part.glob("*.log")}
        gone = next(o for o in range(1, 1 << 20) if o not in bases)
        for suffix in (".log", ".index", ".timeindex"):
            p = part / f"{gone:020d}{suffix}.deleted"
            p.write_bytes(b"a segment retention deleted")
            made.append(p)
    return made


def test_kafkas_pending_deletes_are_removed_first(sample_cluster) -> None:
    """.deleted files where no replacement is in flight are deletes Kafka had not finished: a
    dry run says the run removes them and changes nothing; the run removes them (durably) and
    upgrades every segment, every record still there."""
    d = sample_cluster.broker_log_dirs[1]
    pending = _pending_deletes(d)
    records_before = read_log_dir_records(d)
    before = tree_state(d)
    dry = execute_upgrade([str(d)], options=UpgradeOptions(target="v2", dry_run=True), engine="inline",
                          run_id="pending-dry")
    assert dry.exit_code() == 0 and tree_state(d) == before
    assert any("the run removes them first" in w.message and f"{len(pending)} .deleted" in w.message
               for w in dry.warnings), [w.message for w in dry.warnings]
    report = execute_upgrade([str(d)], options=UpgradeOptions(target="v2"), engine="inline", run_id="pending")
    assert report.exit_code() == 0, report.refusal
    assert not any(p.exists() for p in pending)
    assert any(f"removed {len(pending)} .deleted" in w.message for w in report.warnings)
    assert read_log_dir_records(d) == records_before


def test_deleted_files_of_a_run_in_flight_are_refused(sample_cluster) -> None:
    """A .deleted file where a killed run has a unit in flight may be that run's: the run is
    named (resume or roll back), nothing is touched."""
    from migration.migrations.upgrade.journal import JournalState, UnitJournal, save_journal
    from migration.runtime.runs import RunDir

    d = sample_cluster.broker_log_dirs[1]
    seg = _segment(d, "clicks-v1")
    deleted = seg.with_name(seg.name + ".deleted")
    deleted.write_bytes(seg.read_bytes())
    rd = RunDir("killed-run")
    rd.path.mkdir(parents=True, exist_ok=True)
    save_journal(rd.path, UnitJournal(unit_id="u", partition_dir=str(seg.parent), log_file=seg.name,
                                      base_offset=0, state=JournalState.STARTED))
    before = tree_state(d)
    report = execute_upgrade([str(d)], options=UpgradeOptions(target="v2"), engine="inline", run_id="after-kill")
    assert report.exit_code() == 3
    assert deleted.name in report.refusal and "kmigrate rollback killed-run" in report.refusal
    assert tree_state(d) == before


def test_kafkas_pending_deletes_stay_when_the_lock_cannot_be_taken(sample_cluster, monkeypatch) -> None:
    """The pending deletes go only once the run holds the log dir lock: a broker that starts
    between the plan and the lock finds its log dir as it left it."""
    import migration.migrations.upgrade.driver as driver
    from migration.runtime.safety import Refused

    d = sample_cluster.broker_log_dirs[1]
    pending = _pending_deletes(d)

    def broker_started(*_a, **_k):
        raise Refused("a live process holds the lock")

    monkeypatch.setattr(driver, "holding_locks", broker_started)
    report = execute_upgrade([str(d)], options=UpgradeOptions(target="v2"), engine="inline", run_id="raced")
    assert report.exit_code() == 3
    assert all(p.exists() for p in pending)
