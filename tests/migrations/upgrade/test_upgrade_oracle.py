"""The oracle: upgrade the sample cluster to v1 and to v2 (inline engine), then read every
partition with kafka-python and check record for record, batch by batch, index by index."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import tree_state
from kafka_loader import read_log_dir

from migration.audit.model import UnitStatus
from migration.formats import compression as codecs
from migration.formats.file_records import FileRecords
from migration.formats.legacy import LegacyBatch
from migration.formats.model import MAGIC_V1, MAGIC_V2, Compression, TimestampType
from migration.logdir.validation import validate_paths
from migration.migrations.upgrade.driver import UpgradeOptions, commit_run, execute_upgrade, rollback_run

# Every test here runs on each record core (compiled and pure Python).
pytestmark = pytest.mark.usefixtures("record_core")

SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")


def _norm(records: dict[str, list[tuple]], *, timestamps: bool) -> dict[str, list[tuple]]:
    """kafka-python gives v0 timestamps as None; Kafka's value is -1."""
    return {p: [(o, (-1 if t is None else t) if timestamps else None, k, v, h) for o, t, k, v, h in recs]
            for p, recs in records.items()}


def _original_batches(log_dirs: list[Path]) -> dict[tuple[str, int], dict]:
    """(partition, last offset) -> what the original batch was, read with our codecs."""
    out = {}
    for d in log_dirs:
        for log in sorted(d.glob("*/*.log")):
            for b in FileRecords(log).batches():
                recs = list(b.records())
                out[(log.parent.name, b.last_offset)] = {
                    "magic": b.magic, "codec": b.compression, "ts_type": b.timestamp_type, "timestamp": b.max_timestamp,
                    "records": [(r.offset, r.timestamp, r.key, r.value) for r in recs],
                    "raw": bytes(b.raw_bytes()), "log": log.name,
                }
    return out


def _mtimes(log_dirs: list[Path]) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for d in log_dirs for p in d.glob("*/*")
            if p.suffix in SEGMENT_SUFFIXES}


def _inner_offsets(b: LegacyBatch) -> list[int]:
    """The offset fields stored inside a wrapper (relative for v1), read raw."""
    data = codecs.decompress(b.compression, b.value, b.magic)
    offs, pos = [], 0
    while pos < len(data):
        offs.append(int.from_bytes(data[pos:pos + 8], "big", signed=True))
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
    return offs


def _check_report(report, rewritten_formats: set[str]) -> None:
    assert report.exit_code() == 0, [u for *_, u in report.problem_units()]
    t = report.totals
    assert t.units_ok > 0 and t.units_failed == 0 and t.digest_mismatches == 0
    for *_, u in report.iter_units():
        if u.status is UnitStatus.OK:
            assert u.digest_before == u.digest_after and u.records_before == u.records_after
            assert set(u.input_format.split(",")) & rewritten_formats
            assert u.offsets is not None and u.duration_s is not None


@pytest.mark.parametrize("target", ["v1", "v2"])
def test_upgrade_record_for_record(sample_cluster, tmp_path, target) -> None:
    dirs = sample_cluster.log_dirs
    before = read_log_dir_all(dirs)
    originals = _original_batches(dirs)
    mtimes = _mtimes(dirs)
    trees = {d: tree_state(d) for d in dirs}

    report = execute_upgrade([str(d) for d in dirs], options=UpgradeOptions(target=target), engine="inline")
    _check_report(report, {"v0"} if target == "v1" else {"v0", "v1"})
    assert report.totals.units_skipped > 0  # segments already in the target format stay

    # every record, read by kafka-python, equals the record before
    after = read_log_dir_all(dirs)
    assert _norm(after, timestamps=True) == _norm(before, timestamps=True)
    assert sum(len(v) for v in after.values()) == sum(sample_cluster.records.values()) - _holes(before)

    # batch by batch
    target_magic = MAGIC_V1 if target == "v1" else MAGIC_V2
    seen_lz4 = seen_lat = seen_single = seen_wrapper = 0
    for d in dirs:
        for log in sorted(d.glob("*/*.log")):
            for b in FileRecords(log).batches():
                b.ensure_valid()
                assert b.magic >= target_magic
                orig = originals[(log.parent.name, b.last_offset)]
                if orig["magic"] >= target_magic:
                    assert bytes(b.raw_bytes()) == orig["raw"]  # kept byte for byte
                    continue
                assert b.compression == orig["codec"]  # codec kept, even where it does not pay
                recs = [(r.offset, r.timestamp, r.key, r.value) for r in b.records()]
                assert recs == orig["records"]
                if target == "v1":
                    assert b.timestamp_type is TimestampType.CREATE_TIME and b.timestamp == -1
                    if b.is_compressed:
                        seen_wrapper += 1
                        first = orig["records"][0][0]
                        assert b.offset == orig["records"][-1][0]  # wrapper offset = last inner
                        assert _inner_offsets(b) == [o - first for o, *_ in orig["records"]]  # relative, holes kept
                        if b.compression is Compression.LZ4:
                            seen_lz4 += 1
                            assert b.value[6] == 0x82  # magic-1 frame header checksum
                else:
                    assert b.producer_id == -1 and b.producer_epoch == -1 and b.base_sequence == -1
                    assert b.base_offset == orig["records"][0][0]
                    assert b.last_offset_delta == orig["records"][-1][0] - b.base_offset
                    assert b.partition_leader_epoch == -1  # legacy partitions have no epochs
                    if orig["ts_type"] is TimestampType.LOG_APPEND_TIME:
                        seen_lat += 1
                        assert b.timestamp_type is TimestampType.LOG_APPEND_TIME
                        assert b.max_timestamp == orig["timestamp"]
                    else:
                        assert b.timestamp_type is TimestampType.CREATE_TIME
                        assert b.max_timestamp == max(t for _, t, *_ in orig["records"])
                    if orig["codec"] is Compression.NONE:
                        seen_single += 1
                        assert b.records_count == 1
                    else:
                        seen_wrapper += 1
                        assert b.records_count == len(orig["records"])
                        if b.compression is Compression.LZ4:
                            seen_lz4 += 1
    assert seen_wrapper and seen_lz4
    if target == "v2":
        assert seen_lat and seen_single

    # indexes and time indexes follow Kafka's rules; nothing left behind
    res = validate_paths([str(d) for d in dirs])
    assert res.ok, [str(f) for f in res.problems]
    assert not [f for f in res.findings if f.code == "LEFTOVER_FILE"]
    # mtimes of .log, .index and .timeindex kept
    assert _mtimes(dirs) == mtimes

    # a re-run rewrites nothing
    rerun_trees = {d: tree_state(d) for d in dirs}
    again = execute_upgrade([str(d) for d in dirs], options=UpgradeOptions(target=target), engine="inline")
    assert again.exit_code() == 0 and again.totals.units_ok == 0 and again.totals.units_skipped > 0
    assert {d: tree_state(d) for d in dirs} == rerun_trees

    # rollback restores every original byte for byte, mtimes included
    rb = rollback_run(report.run_id)
    assert rb.exit_code() == 0 and rb.totals.units_ok == report.totals.units_ok
    assert {d: tree_state(d) for d in dirs} == trees
    assert commit_run(report.run_id).exit_code() == 0


def read_log_dir_all(dirs: list[Path]) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for d in dirs:
        out.update(read_log_dir(d))
    return out


def _holes(records: dict[str, list[tuple]]) -> int:
    """Offsets missing inside partitions (compaction): the sample's counts are log end offsets."""
    return sum((recs[-1][0] + 1) - len(recs) for recs in records.values() if recs)


def test_split_on_segment_bytes_and_max_message_bytes(sample_cluster) -> None:
    d = sample_cluster.broker_log_dirs[1]
    before = read_log_dir(d)
    opts = UpgradeOptions(target="v2", segment_bytes=16 * 1024, max_message_bytes=2048)
    report = execute_upgrade([str(d)], options=opts, engine="inline")
    _check_report(report, {"v0", "v1"})
    codes = {w.code for *_, u in report.iter_units() for w in u.warnings}
    assert {"SEGMENT_SPLIT", "BATCH_SPLIT"} <= codes
    after = read_log_dir(d)
    assert _norm(after, timestamps=True) == _norm(before, timestamps=True)
    for log in d.glob("*/*.log"):
        base = int(log.name.split(".")[0])
        batches = list(FileRecords(log).batches())
        if batches and batches[0].magic == MAGIC_V2 and log.stat().st_size <= 16 * 1024:
            assert batches[0].base_offset >= base
    res = validate_paths([str(d)])
    assert res.ok, [str(f) for f in res.problems]
    trees_after = tree_state(d)
    rb = rollback_run(report.run_id)
    assert rb.exit_code() == 0
    assert read_log_dir(d) == before
    assert tree_state(d) != trees_after


def test_stamp_v0_with_mtime(sample_cluster) -> None:
    d = sample_cluster.broker_log_dirs[1]
    part = next(p for p in d.iterdir() if p.name.startswith("legacy-v0"))
    mtime_ms = {log.name: log.stat().st_mtime_ns // 1_000_000 for log in part.glob("*.log")}
    before = read_log_dir(d)
    report = execute_upgrade([str(d)], options=UpgradeOptions(target="v1", stamp_v0_with_mtime=True),
                             engine="inline")
    assert report.exit_code() == 0 and report.totals.digest_mismatches == 0
    for log in part.glob("*.log"):
        for b in FileRecords(log).batches():
            assert b.magic == MAGIC_V1 and b.timestamp_type is TimestampType.LOG_APPEND_TIME
            assert b.timestamp == mtime_ms[log.name]
    assert _norm(read_log_dir(d), timestamps=False) == _norm(before, timestamps=False)
    assert validate_paths([str(d)]).ok
