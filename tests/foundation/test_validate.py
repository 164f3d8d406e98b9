from __future__ import annotations

import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from migration.cli import app
from migration.validate import validate_paths

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
            assert any(f.partition == partition and f.path.startswith(str(seg.parent)) for f in res.problems)
            data = bytearray(original)
        seg.write_bytes(original)


def test_cli_names_file_and_position_and_exits_1(sample_cluster):
    seg = _segments(sample_cluster)[0]
    data = bytearray(seg.read_bytes())
    data[200] ^= 0xFF
    seg.write_bytes(bytes(data))
    result = runner.invoke(app, ["validate", "--json", str(seg.parent)])
    assert result.exit_code == 1
    assert str(seg) in result.output and '"position"' in result.output


def test_truncated_tail_and_leftovers_are_findings(sample_cluster):
    seg = _segments(sample_cluster)[-1]
    seg.write_bytes(seg.read_bytes()[:-7])
    (seg.parent / (seg.name + ".cleaned")).write_bytes(b"x")
    res = validate_paths([seg.parent])
    codes = {f.code for f in res.problems}
    assert "leftover-file" in codes
    assert codes & {"trailing-bytes", "index-beyond-log", "timeindex-beyond-log"}


def test_index_garbage_is_found(sample_cluster):
    idx = next(p for p in sorted(sample_cluster.log_dirs[0].glob("*/*.index")) if p.stat().st_size >= 16)
    data = bytearray(idx.read_bytes())
    data[4:8] = (10**6).to_bytes(4, "big")  # first entry points far beyond the log
    idx.write_bytes(bytes(data))
    res = validate_paths([idx.parent])
    assert any(f.path == str(idx) for f in res.problems)


@pytest.mark.parametrize("name", ["garbage.log", "00000000000000000000.index"])
def test_bad_names_and_orphans(tmp_path, name):
    pdir = tmp_path / "topic-0"
    pdir.mkdir()
    (pdir / name).write_bytes(b"\x00" * 8)
    res = validate_paths([tmp_path / "topic-0" / name])
    assert not res.ok
