"""Index repair: what is wrong with a segment's .index/.timeindex, and their rebuild in place.

Rebuilt indexes are checked three ways: against what the sample cluster wrote for the same
data, against LogSegment.recover's rules applied here to kafka-python's reading of the batches
(not our codecs), and against what the upgrade rewrite produces for the same segment."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import tree_state
from kafka.record.memory_records import MemoryRecords
from kafka_loader import read_partition, simulate_startup

from migration.formats.errors import InvalidCrcError, KafkaFormatError, TruncatedError
from migration.formats.model import MAGIC_V1, MAGIC_V2
from migration.formats.offset_index import OffsetIndex
from migration.formats.time_index import TimeIndex
from migration.logdir.validation import validate_paths
from migration.migrations.common.index_repair import (
    IndexRepair,
    ReplacementInFlight,
    discard_repair_leftovers,
    rebuild_segment_indexes,
    segment_index_problems,
)
from migration.migrations.upgrade.rewrite import RewriteSpec, rewrite_segment

ROOT = Path(__file__).resolve().parents[3]


def _pdir(sample_cluster, partition: str) -> Path:
    return next(d / partition for d in sample_cluster.log_dirs if (d / partition).is_dir())


def _segments(pdir: Path) -> list[tuple[int, int | None]]:
    """(base offset, next base offset) of each segment, in order."""
    bases = sorted(int(p.name[:20]) for p in pdir.glob("*.log"))
    return [(b, bases[i + 1] if i + 1 < len(bases) else None) for i, b in enumerate(bases)]


def _file(pdir: Path, base: int, suffix: str) -> Path:
    return pdir / f"{base:020d}{suffix}"


def _kafka_python_recovery(log: Path, base: int, interval: int = 4096) -> tuple[list, list]:
    """LogSegment.recover's index rules over the batches as kafka-python reads them."""
    mr = MemoryRecords(log.read_bytes())
    valid = last_entry = 0
    max_ts, offset_of_max = -1, base
    offsets: list[tuple[int, int]] = []
    times: list[tuple[int, int]] = []

    def maybe_append(ts: int, off: int) -> None:
        if ts > (times[-1][0] if times else -1):
            times.append((ts, off))

    while mr.has_next():
        b = mr.next_batch()
        assert b.validate_crc()
        if b.magic == 2:
            last, ts = b.last_offset, b.max_timestamp
        else:
            last, ts = b._offset, (-1 if b._timestamp is None else b._timestamp)
        if ts > max_ts:
            max_ts, offset_of_max = ts, last
        if valid - last_entry > interval:
            offsets.append((last, valid))
            maybe_append(max_ts, offset_of_max)
            last_entry = valid
        valid += b.size_in_bytes
    maybe_append(max_ts, offset_of_max)
    return offsets, times


def _rewrite_indexes(log: Path, magic: int, tmp_path: Path) -> tuple[bytes, bytes]:
    """The .index and .timeindex the upgrade rewrite writes for this segment (its own format:
    batches copied as they are)."""
    work = tmp_path / "rewrite" / log.parent.name
    work.mkdir(parents=True)
    shutil.copy2(log, work / log.name)
    rr = rewrite_segment(work / log.name, RewriteSpec(target_magic=magic))
    assert len(rr.outputs) == 1
    prefix = log.name[:20]
    return ((work / f"{prefix}.index.cleaned").read_bytes(), (work / f"{prefix}.timeindex.cleaned").read_bytes())


def _check_rebuilt(pdir: Path, base: int) -> None:
    log = _file(pdir, base, ".log")
    offsets, times = _kafka_python_recovery(log, base)
    assert [tuple(e) for e in OffsetIndex.read(_file(pdir, base, ".index")).entries] == offsets
    assert [tuple(e) for e in TimeIndex.read(_file(pdir, base, ".timeindex")).entries] == times


def _stat(p: Path) -> tuple[int, int, int]:
    st = p.stat()
    return st.st_mtime_ns, st.st_ctime_ns, st.st_ino


@pytest.mark.parametrize("partition,magic", [("clicks-v1-0", MAGIC_V1), ("audit-lat-0", MAGIC_V1),
                                             ("events-v2-0", MAGIC_V2)])
def test_empty_time_index_beside_timestamps_is_rebuilt(sample_cluster, tmp_path, partition, magic):
    pdir = _pdir(sample_cluster, partition)
    (base, nxt), *_ = _segments(pdir)
    ti, idx, log = _file(pdir, base, ".timeindex"), _file(pdir, base, ".index"), _file(pdir, base, ".log")
    good = ti.read_bytes()
    assert good
    mtime = ti.stat().st_mtime_ns
    ti.write_bytes(b"")  # what an offline tool left, with the file's old mtime
    os.utime(ti, ns=(mtime, mtime))
    log_before, idx_before = (log.read_bytes(), _stat(log)), _stat(idx)

    problems = segment_index_problems(pdir, base, nxt)
    assert [(f.severity, f.code, f.file) for f in problems] == [("error", "TIMEINDEX_EMPTY", str(ti))]
    repair = rebuild_segment_indexes(pdir, base, findings=problems)
    assert isinstance(repair, IndexRepair)
    assert repair.rebuilt == [ti.name] and repair.created == [] and repair.findings == problems
    f = next(f for f in repair.files if f.file == ti.name)
    assert (f.entries_before, f.entries_after, f.size_before) == (0, len(good) // 12, 0)
    assert "timestamps" in (f.reason or "")
    assert ti.read_bytes() == good and ti.stat().st_mtime_ns == mtime
    assert _stat(idx) == idx_before  # the offset index was right: not written
    assert (log.read_bytes(), _stat(log)) == log_before
    _check_rebuilt(pdir, base)
    assert _rewrite_indexes(log, magic, tmp_path) == (idx.read_bytes(), ti.read_bytes())
    assert segment_index_problems(pdir, base, nxt) == []
    assert validate_paths([pdir]).ok
    assert not list(pdir.glob("*.cleaned"))


def test_missing_offset_index_is_created(sample_cluster, tmp_path):
    pdir = _pdir(sample_cluster, "events-v2-0")
    (base, nxt), *_ = _segments(pdir)
    idx, log = _file(pdir, base, ".index"), _file(pdir, base, ".log")
    good = idx.read_bytes()
    idx.unlink()
    problems = segment_index_problems(pdir, base, nxt)
    assert [(f.severity, f.code) for f in problems] == [("error", "INDEX_MISSING")]
    repair = rebuild_segment_indexes(pdir, base)
    assert repair.created == [idx.name] and repair.rebuilt == []
    assert idx.read_bytes() == good
    assert idx.stat().st_mtime_ns == log.stat().st_mtime_ns  # a new file takes the .log's mtime
    _check_rebuilt(pdir, base)
    assert _rewrite_indexes(log, MAGIC_V2, tmp_path)[0] == good
    assert segment_index_problems(pdir, base, nxt) == [] and validate_paths([pdir]).ok


def test_missing_time_index_beside_v1_data_as_kafka_0_10_0_left_it(sample_cluster):
    pdir = _pdir(sample_cluster, "clicks-v1-0")
    good = {p.name: p.read_bytes() for p in pdir.glob("*.timeindex")}
    for p in pdir.glob("*.timeindex"):
        p.unlink()
    for base, nxt in _segments(pdir):  # the active segment too: Kafka would create it empty
        problems = segment_index_problems(pdir, base, nxt)
        assert [(f.severity, f.code) for f in problems] == [("error", "TIMEINDEX_MISSING")]
        repair = rebuild_segment_indexes(pdir, base, findings=problems)
        ti = _file(pdir, base, ".timeindex")
        assert repair.created == [ti.name] and len(repair.files) == 2
        assert ti.read_bytes() == good[ti.name]
        assert ti.stat().st_mtime_ns == _file(pdir, base, ".log").stat().st_mtime_ns
        _check_rebuilt(pdir, base)
        assert segment_index_problems(pdir, base, nxt) == []
    assert validate_paths([pdir]).ok


def test_missing_indexes_of_the_active_segment_are_created(sample_cluster):
    # Kafka would rebuild them at load (validate: info), but a run leaves every index in place.
    pdir = _pdir(sample_cluster, "events-v2-0")
    base, nxt = _segments(pdir)[-1]
    assert nxt is None
    files = [_file(pdir, base, ".index"), _file(pdir, base, ".timeindex")]
    good = [p.read_bytes() for p in files]
    for p in files:
        p.unlink()
    assert validate_paths([pdir]).ok
    problems = segment_index_problems(pdir, base, nxt)
    assert [(f.severity, f.code) for f in problems] == [("info", "INDEX_MISSING"), ("info", "TIMEINDEX_MISSING")]
    repair = rebuild_segment_indexes(pdir, base, findings=problems)
    assert repair.created == [p.name for p in files]
    assert [p.read_bytes() for p in files] == good
    _check_rebuilt(pdir, base)


@pytest.mark.parametrize("suffix,garbage", [
    (".index", random.Random(1).randbytes(64)),  # whole entries, nonsense values
    (".index", random.Random(2).randbytes(13)),  # not a multiple of 8
    (".timeindex", random.Random(3).randbytes(36)),
    (".timeindex", random.Random(4).randbytes(20)),  # not a multiple of 12
], ids=["index-64", "index-13", "timeindex-36", "timeindex-20"])
def test_garbage_index_is_rebuilt_keeping_its_mtime(sample_cluster, suffix, garbage):
    pdir = _pdir(sample_cluster, "clicks-v1-0")
    (base, nxt), *_ = _segments(pdir)
    bad = _file(pdir, base, suffix)
    good, mtime = bad.read_bytes(), bad.stat().st_mtime_ns
    bad.write_bytes(garbage)
    os.utime(bad, ns=(mtime, mtime))
    problems = segment_index_problems(pdir, base, nxt)
    assert problems and all(f.file == str(bad) and f.severity == "error" for f in problems)
    assert not validate_paths([pdir]).ok
    repair = rebuild_segment_indexes(pdir, base, findings=problems)
    assert repair.rebuilt == [bad.name] and repair.created == []
    assert bad.read_bytes() == good and bad.stat().st_mtime_ns == mtime
    f = next(f for f in repair.files if f.file == bad.name)
    assert f.size_before == len(garbage) and f.reason
    _check_rebuilt(pdir, base)
    assert segment_index_problems(pdir, base, nxt) == [] and validate_paths([pdir]).ok


def test_correct_indexes_are_left_alone(sample_cluster):
    d = sample_cluster.log_dirs[0]
    before = tree_state(d)
    stats = {p: _stat(p) for p in d.rglob("*") if p.is_file()}
    partitions = [p for p in sorted(d.iterdir()) if p.is_dir()]
    assert len(partitions) >= 4
    for pdir in partitions:
        for base, nxt in _segments(pdir):
            assert segment_index_problems(pdir, base, nxt) == [], (pdir.name, base)
    assert tree_state(d) == before
    # A rebuild asked for anyway writes nothing: every file already is what recovery builds.
    pdir = _pdir(sample_cluster, "events-v2-0")
    for base, _ in _segments(pdir):
        repair = rebuild_segment_indexes(pdir, base)
        assert not repair.changed and {f.action for f in repair.files} == {"unchanged"}
    assert tree_state(d) == before
    assert {p: _stat(p) for p in d.rglob("*") if p.is_file()} == stats  # not even renamed over


def test_v0_data_keeps_an_empty_time_index(sample_cluster):
    pdir = _pdir(sample_cluster, "legacy-v0-0")
    segs = _segments(pdir)
    for base, nxt in segs:
        assert _file(pdir, base, ".timeindex").stat().st_size == 0
        assert segment_index_problems(pdir, base, nxt) == []
    # A missing one is created: empty, which is right for records without timestamps.
    base, nxt = segs[0]
    ti = _file(pdir, base, ".timeindex")
    ti.unlink()
    problems = segment_index_problems(pdir, base, nxt)
    assert [(f.severity, f.code) for f in problems] == [("info", "TIMEINDEX_MISSING")]
    repair = rebuild_segment_indexes(pdir, base, findings=problems)
    assert repair.created == [ti.name]
    assert ti.read_bytes() == b"" and ti.stat().st_mtime_ns == _file(pdir, base, ".log").stat().st_mtime_ns
    _check_rebuilt(pdir, base)
    assert segment_index_problems(pdir, base, nxt) == [] and validate_paths([pdir]).ok


def test_empty_offset_index_beside_an_indexable_segment(sample_cluster):
    pdir = _pdir(sample_cluster, "events-v2-0")
    (base, nxt), *_ = _segments(pdir)
    idx = _file(pdir, base, ".index")
    good = idx.read_bytes()
    idx.write_bytes(b"")  # valid for Kafka, but every lookup would scan from byte 0
    assert validate_paths([pdir]).ok
    problems = segment_index_problems(pdir, base, nxt)
    assert [(f.severity, f.code) for f in problems] == [("warning", "INDEX_EMPTY")]
    # an interval larger than the segment: recovery would not index it either
    assert segment_index_problems(pdir, base, nxt, index_interval_bytes=1 << 30) == []
    rebuild_segment_indexes(pdir, base, findings=problems)
    assert idx.read_bytes() == good


def _corrupt_crc(log: Path) -> None:
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0x01
    log.write_bytes(bytes(data))


def _truncate(log: Path) -> None:
    with open(log, "r+b") as f:
        f.truncate(log.stat().st_size - 7)


@pytest.mark.parametrize("damage,error", [(_corrupt_crc, InvalidCrcError), (_truncate, TruncatedError)],
                         ids=["crc", "truncated"])
def test_corrupt_log_raises_and_changes_nothing(sample_cluster, damage, error):
    pdir = _pdir(sample_cluster, "clicks-v1-0")
    (base, nxt), *_ = _segments(pdir)
    log = _file(pdir, base, ".log")
    mtime = log.stat().st_mtime_ns
    damage(log)
    os.utime(log, ns=(mtime, mtime))
    _file(pdir, base, ".timeindex").unlink()  # something to repair
    before = tree_state(pdir)
    with pytest.raises(KafkaFormatError) as e:
        segment_index_problems(pdir, base, nxt)
    assert e.value.path == str(log) and e.value.position is not None
    with pytest.raises(error) as e:
        rebuild_segment_indexes(pdir, base)
    assert e.value.path == str(log) and e.value.position is not None
    assert tree_state(pdir) == before


def test_refused_while_a_replacement_is_in_flight(sample_cluster):
    pdir = _pdir(sample_cluster, "clicks-v1-0")
    (base, _), (later, _), *_ = _segments(pdir)
    _file(pdir, base, ".timeindex").write_bytes(b"")
    swap = _file(pdir, later, ".log.swap")
    swap.write_bytes(_file(pdir, later, ".log").read_bytes())
    before = tree_state(pdir)
    # Kafka's loader drops every .swap at or above the lowest .cleaned: our temporary files
    # must never meet one.
    with pytest.raises(ReplacementInFlight):
        rebuild_segment_indexes(pdir, base)
    swap.unlink()
    staged = _file(pdir, base, ".log.cleaned")
    staged.write_bytes(b"")
    with pytest.raises(ReplacementInFlight):
        rebuild_segment_indexes(pdir, base)
    with pytest.raises(ReplacementInFlight):
        discard_repair_leftovers(pdir, base)
    staged.unlink()
    assert tree_state(pdir) == {k: v for k, v in before.items() if not k.endswith(".swap")}


_REBUILD = ("import sys; from migration.migrations.common.index_repair import rebuild_segment_indexes as r; "
            "r(sys.argv[1], int(sys.argv[2]))")


@pytest.mark.parametrize("fault", ["index-repair-written:1", "index-repair-renamed:1", "index-repair-written:2",
                                   "index-repair-renamed:2"])
def test_killed_at_any_point_kafka_loads_it_and_a_rerun_finishes(sample_cluster, tmp_path, fault):
    pdir = _pdir(sample_cluster, "clicks-v1-0")
    (base, nxt), *_ = _segments(pdir)
    idx, ti = _file(pdir, base, ".index"), _file(pdir, base, ".timeindex")
    good = (idx.read_bytes(), ti.read_bytes())
    mtimes = (idx.stat().st_mtime_ns, ti.stat().st_mtime_ns)
    records = read_partition(pdir)
    # both files need writing: a garbage offset index, an empty time index
    idx.write_bytes(b"\xff" * 16)
    ti.write_bytes(b"")
    for p, m in zip((idx, ti), mtimes, strict=True):
        os.utime(p, ns=(m, m))
    env = os.environ | {"KMIGRATE_FAULT_AT": fault, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _REBUILD, str(pdir), str(base)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr  # SIGKILL at the fault point
    left = sorted(p.name for p in pdir.glob("*.cleaned"))
    assert left == ([idx.name + ".cleaned"] if fault == "index-repair-written:1"
                    else [ti.name + ".cleaned"] if fault == "index-repair-written:2" else [])

    # What Kafka would do with this state: drop our temporary file, and read every record.
    kafka_view = tmp_path / "kafka" / pdir.name
    shutil.copytree(pdir, kafka_view, copy_function=shutil.copy2)
    simulate_startup(kafka_view)
    assert not list(kafka_view.glob("*.cleaned"))
    assert read_partition(kafka_view) == records

    # The re-run finds what is left to do and finishes it (nothing, killed after the last rename).
    problems = segment_index_problems(pdir, base, nxt)
    assert (problems == []) == (fault == "index-repair-renamed:2")
    repair = rebuild_segment_indexes(pdir, base, findings=problems)
    assert (idx.read_bytes(), ti.read_bytes()) == good
    assert (idx.stat().st_mtime_ns, ti.stat().st_mtime_ns) == mtimes
    assert not list(pdir.glob("*.cleaned"))
    assert segment_index_problems(pdir, base, nxt) == [] and validate_paths([pdir]).ok
    if fault.startswith("index-repair-renamed"):
        assert next(f for f in repair.files if f.file == idx.name).action == "unchanged"


def test_leftover_of_an_interrupted_rebuild_is_found_and_discarded(sample_cluster):
    pdir = _pdir(sample_cluster, "events-v2-0")
    (base, nxt), *_ = _segments(pdir)
    tmp = _file(pdir, base, ".timeindex.cleaned")
    tmp.write_bytes(b"\x00" * 7)
    assert [(f.code, f.file) for f in segment_index_problems(pdir, base, nxt)] == [("LEFTOVER_FILE", str(tmp))]
    repair = rebuild_segment_indexes(pdir, base)
    assert not repair.changed and not tmp.exists()
    tmp.write_bytes(b"")
    assert discard_repair_leftovers(pdir, base) == [tmp.name] and not tmp.exists()
    assert discard_repair_leftovers(pdir, base) == []
