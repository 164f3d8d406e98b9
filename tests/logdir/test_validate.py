from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from migration.cli.app import app
from migration.logdir.findings import FindingCode
from migration.logdir.validation import validate_paths

runner = CliRunner()


def _segments(sample_cluster) -> list[Path]:
    return sorted(p for d in sample_cluster.log_dirs for p in d.glob("*/*.log"))


def test_sample_cluster_validates_clean(sample_cluster):
    res = validate_paths([*sample_cluster.log_dirs, sample_cluster.controller_dir])
    assert res.ok, [str(f) for f in res.problems]
    assert res.records_checked > 5000 and res.batches_checked > 500
    result = runner.invoke(app, ["validate", *map(str, sample_cluster.log_dirs)])
    assert result.exit_code == 0, result.output


def test_a_flipped_byte_in_any_segment_is_found_and_names_the_partition(sample_cluster):
    rng = random.Random(1234)
    segments = _segments(sample_cluster)
    assert len(segments) >= 20
    for seg in segments:
        data = bytearray(seg.read_bytes())
        original = bytes(data)
        for _ in range(3):
            pos = rng.randrange(len(data))
            data[pos] ^= 1 << rng.randrange(8)
            seg.write_bytes(bytes(data))
            res = validate_paths([seg.parent.parent])
            partition = seg.parent.name
            assert not res.ok, f"flip at byte {pos} of {seg} went unnoticed"
            assert any(f.partition == partition and f.file.startswith(str(seg.parent)) for f in res.problems)
            data = bytearray(original)
        seg.write_bytes(original)


def test_cli_names_file_and_position_and_exits_1(sample_cluster):
    seg = _segments(sample_cluster)[0]
    data = bytearray(seg.read_bytes())
    data[200] ^= 0xFF
    seg.write_bytes(bytes(data))
    result = runner.invoke(app, ["validate", "--json", str(seg.parent)])
    assert result.exit_code == 1
    found = [f for f in json.loads(result.output)["findings"] if f["file"] == str(seg)]
    assert found and {f["code"] for f in found} <= set(FindingCode), found
    f = found[0]
    assert f["severity"] == "error" and isinstance(f["position"], int) and f["partition"] == seg.parent.name
    text = runner.invoke(app, ["validate", str(seg.parent)])
    assert text.exit_code == 1 and f"ERROR   {f['code']}: {seg} @ byte {f['position']}: " in text.output


def test_truncated_tail_and_leftovers_are_findings(sample_cluster):
    seg = _segments(sample_cluster)[-1]
    seg.write_bytes(seg.read_bytes()[:-7])
    (seg.parent / (seg.name + ".cleaned")).write_bytes(b"x")
    res = validate_paths([seg.parent])
    codes = {f.code for f in res.problems}
    assert "LEFTOVER_FILE" in codes
    assert codes & {"TRAILING_BYTES", "INDEX_BEYOND_LOG", "TIMEINDEX_BEYOND_LOG"}


def test_index_garbage_is_found(sample_cluster):
    idx = next(p for p in sorted(sample_cluster.log_dirs[0].glob("*/*.index")) if p.stat().st_size >= 16)
    data = bytearray(idx.read_bytes())
    data[4:8] = (10**6).to_bytes(4, "big")  # first entry points far beyond the log
    idx.write_bytes(bytes(data))
    res = validate_paths([idx.parent])
    assert any(f.file == str(idx) for f in res.problems)


@pytest.mark.parametrize("name", ["garbage.log", "00000000000000000000.index"])
def test_bad_names_and_orphans(tmp_path, name):
    pdir = tmp_path / "topic-0"
    pdir.mkdir()
    (pdir / name).write_bytes(b"\x00" * 8)
    res = validate_paths([tmp_path / "topic-0" / name])
    assert not res.ok


# ------------------------------------------------------------------ missing and empty indexes


def _partition_segments(sample_cluster, partition: str) -> list[Path]:
    pdir = next(d / partition for d in sample_cluster.log_dirs if (d / partition).is_dir())
    return sorted(pdir.glob("*.log"))


def _companion(log: Path, suffix: str) -> Path:
    return log.with_name(log.name[: -len(".log")] + suffix)


def _about(res, path: Path) -> list[tuple[str, str]]:
    return [(f.severity, f.code) for f in res.findings if f.file == str(path)]


@pytest.mark.parametrize("partition", ["clicks-v1-0", "audit-lat-0", "events-v2-0"])
def test_empty_time_index_beside_timestamps_is_an_error(sample_cluster, partition):
    logs = _partition_segments(sample_cluster, partition)
    for log in (logs[0], logs[-1]):  # a closed segment and the active one alike
        ti = _companion(log, ".timeindex")
        ti.write_bytes(b"")
        res = validate_paths([log.parent])
        assert _about(res, ti) == [("error", "TIMEINDEX_EMPTY")]
        f = next(f for f in res.findings if f.code == "TIMEINDEX_EMPTY")
        assert f.partition == partition and f.position == 0
        assert not res.ok


def test_empty_time_index_beside_records_without_timestamps_is_right(sample_cluster, tmp_path):
    from migration.demo.sample_cluster import PartitionWriter
    from migration.formats.legacy import encode_message

    # v0 data (the sample's legacy-v0 time indexes are empty) ...
    logs = _partition_segments(sample_cluster, "legacy-v0-0")
    assert all(_companion(log, ".timeindex").stat().st_size == 0 for log in logs)
    res = validate_paths([logs[0].parent])
    assert res.ok and not [f for f in res.findings if f.code.startswith("TIMEINDEX")]
    # ... and v1 messages whose timestamps are all -1
    w = PartitionWriter(tmp_path / "nots-0", 4000)
    for o in range(200):
        w.append(encode_message(o, 1, 0, -1, b"k%d" % o, b"v" * 50), first_offset=o, next_offset=o + 1,
                 mtime_s=1_500_000_000)
    w.close()
    logs = sorted((tmp_path / "nots-0").glob("*.log"))
    assert len(logs) > 1 and all(_companion(log, ".timeindex").stat().st_size == 0 for log in logs)
    res = validate_paths([tmp_path / "nots-0"])
    assert res.ok and not [f for f in res.findings if f.code.startswith("TIMEINDEX")], [str(f) for f in res.findings]


def test_missing_offset_index_closed_is_an_error_active_info(sample_cluster):
    logs = _partition_segments(sample_cluster, "events-v2-0")
    closed, active = _companion(logs[0], ".index"), _companion(logs[-1], ".index")
    closed.unlink()
    active.unlink()
    res = validate_paths([logs[0].parent])
    assert _about(res, closed) == [("error", "INDEX_MISSING")]
    assert _about(res, active) == [("info", "INDEX_MISSING")]
    # a single file knows whether its segment is closed from its neighbours
    assert _about(validate_paths([logs[0]]), closed) == [("error", "INDEX_MISSING")]
    assert _about(validate_paths([logs[-1]]), active) == [("info", "INDEX_MISSING")]


def test_missing_time_index_beside_v1_data_is_an_error(sample_cluster):
    # Kafka 0.10.0 wrote v1 data without time indexes; later brokers create them empty.
    logs = _partition_segments(sample_cluster, "clicks-v1-0")
    for log in logs:
        _companion(log, ".timeindex").unlink()
    res = validate_paths([logs[0].parent])
    for log in logs:
        assert _about(res, _companion(log, ".timeindex")) == [("error", "TIMEINDEX_MISSING")]


def test_both_missing_take_the_offset_index_verdict(sample_cluster):
    # Kafka recovers a segment without .index: that rebuilds the time index too.
    logs = _partition_segments(sample_cluster, "clicks-v1-0")
    for log in (logs[0], logs[-1]):
        _companion(log, ".index").unlink()
        _companion(log, ".timeindex").unlink()
    res = validate_paths([logs[0].parent])
    assert _about(res, _companion(logs[0], ".index")) == [("error", "INDEX_MISSING")]
    assert _about(res, _companion(logs[0], ".timeindex")) == [("error", "TIMEINDEX_MISSING")]
    assert _about(res, _companion(logs[-1], ".index")) == [("info", "INDEX_MISSING")]
    assert _about(res, _companion(logs[-1], ".timeindex")) == [("info", "TIMEINDEX_MISSING")]


def test_missing_time_index_beside_v0_data_and_indexes_of_an_empty_log_are_info(sample_cluster, tmp_path):
    logs = _partition_segments(sample_cluster, "legacy-v0-0")
    ti = _companion(logs[0], ".timeindex")
    ti.unlink()
    res = validate_paths([logs[0].parent])
    assert _about(res, ti) == [("info", "TIMEINDEX_MISSING")]
    assert res.ok
    pdir = tmp_path / "empty-0"
    pdir.mkdir()
    (pdir / "00000000000000000000.log").write_bytes(b"")
    res = validate_paths([pdir])
    assert res.ok and {f.code for f in res.findings} == {"INDEX_MISSING", "TIMEINDEX_MISSING"}


def test_index_findings_come_from_one_pass_over_the_segment(sample_cluster, monkeypatch):
    from migration.formats.file_records import FileRecords

    logs = _partition_segments(sample_cluster, "clicks-v1-0")
    _companion(logs[0], ".timeindex").write_bytes(b"")
    _companion(logs[1], ".index").unlink()
    calls = []
    original = FileRecords.batches

    def counting(self, *args, **kwargs):
        calls.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(FileRecords, "batches", counting)
    res = validate_paths([logs[0].parent])
    assert {f.code for f in res.problems} == {"TIMEINDEX_EMPTY", "INDEX_MISSING"}
    assert len(calls) == len(logs)
