"""A conversion carried on from an earlier conversion of the segment's first bytes
(migration/migrations/upgrade/rewrite.py: ``torn_tail_ok``, ``PrefixState``, ``Resume``): what
the stop window does with an active segment whose bytes so far the prestage converted. It must
write exactly the files a conversion of the whole writes, on either core."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from migration.formats import core
from migration.formats.errors import KafkaFormatError
from migration.formats.file_records import FileRecords
from migration.formats.legacy import build_wrapper, encode_message
from migration.formats.model import MAGIC_V0, MAGIC_V1, MAGIC_V2, Compression, Record, TimestampType
from migration.formats.record_batch import build_record_batch
from migration.migrations.upgrade.rewrite import Resume, RewriteSpec, StagedPrefixChanged, rewrite_segment

BASE = 1000
NAME = "00000000000000001000"


def _mixed_segment(seed: int) -> bytes:
    """v0 and v1 messages and wrappers of several codecs, then v2 batches (a format upgrade
    half done), offsets with holes, 200-odd batches."""
    rng = random.Random(seed)
    out = []
    offset = BASE
    for k in range(220):
        kind = rng.choice(["v0", "v0w", "v1", "v1w", "v1lat"] if k < 180 else ["v2"])
        n = rng.randint(1, 12)
        recs = [Record(offset + 2 * i, 1_700_000_200_000 + offset + i, b"k%d" % (offset + i),
                       bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))) for i in range(n)]
        if kind == "v0":
            out.append(encode_message(offset, MAGIC_V0, 0, -1, recs[0].key, recs[0].value))
            offset += 1
            continue
        if kind == "v1":
            out.append(encode_message(offset, MAGIC_V1, 0, recs[0].timestamp, recs[0].key, recs[0].value))
            offset += 1
            continue
        codec = rng.choice([Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
        if kind == "v0w":
            out.append(build_wrapper(recs, magic=MAGIC_V0, compression=codec))
        elif kind == "v1w":
            out.append(build_wrapper(recs, magic=MAGIC_V1, compression=codec))
        elif kind == "v1lat":
            out.append(build_wrapper(recs, magic=MAGIC_V1, compression=codec,
                                     timestamp_type=TimestampType.LOG_APPEND_TIME,
                                     log_append_time=1_700_000_100_000 + offset))
        else:
            out.append(build_record_batch(recs, compression=codec))
        offset = recs[-1].offset + 1
    return b"".join(out)


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name.endswith(".cleaned")}


@pytest.mark.parametrize("core_name", ["python", "compiled"])
@pytest.mark.parametrize("target", [MAGIC_V1, MAGIC_V2])
def test_a_conversion_carried_on_writes_what_a_whole_one_does(tmp_path: Path, core_name: str, target: int) -> None:
    """Cut at batch boundaries and inside batches (the prestage's copy of an active segment ends
    where the broker was writing), converted, then the whole converted carrying on from it:
    the same .log, offset index and time index as one conversion of the whole, and the input's
    record digest and byte counts of the whole."""
    if core_name == "compiled" and core.compiled is None:
        pytest.skip("compiled core not built")
    data = _mixed_segment(seed=target)
    whole_dir = tmp_path / "whole"
    whole_dir.mkdir()
    (whole_dir / f"{NAME}.log").write_bytes(data)
    # a small interval: many index entries, and the prefix's last one lands anywhere
    spec = RewriteSpec(target_magic=target, index_interval_bytes=1500, leader_epochs=[(3, 0), (5, BASE + 300)]
                       if target == MAGIC_V2 else ())
    with core.use(core_name):
        whole = rewrite_segment(whole_dir / f"{NAME}.log", spec)
        expected = _files(whole_dir)
        bounds = [b.position for b in FileRecords(whole_dir / f"{NAME}.log").batches()]
        cuts = sorted({bounds[1], bounds[len(bounds) // 3], bounds[-1], bounds[len(bounds) // 2] + 7,
                       bounds[2 * len(bounds) // 3] + 1, len(data)})
        for cut in cuts:
            stage = tmp_path / f"stage-{cut}"
            stage.mkdir()
            (stage / f"{NAME}.log").write_bytes(data[:cut])
            first = rewrite_segment(stage / f"{NAME}.log", spec, torn_tail_ok=True)
            state = first.prefix_state
            assert state is not None
            assert state.input_bytes == max(b for b in bounds + [len(data)] if b <= cut)
            run = tmp_path / f"run-{cut}"
            run.mkdir()
            shutil.copyfile(whole_dir / f"{NAME}.log", run / f"{NAME}.log")
            carried = rewrite_segment(run / f"{NAME}.log", spec, resume=Resume(state, stage))
            assert _files(run) == expected, cut
            assert carried.digest_before == whole.digest_before
            assert (carried.bytes_before, carried.batches_before, carried.bytes_by_magic_before) == \
                (whole.bytes_before, whole.batches_before, whole.bytes_by_magic_before)
            assert [o.model_dump() for o in carried.outputs] == [o.model_dump() for o in whole.outputs]


def test_a_torn_tail_fails_a_conversion_unless_allowed(tmp_path: Path) -> None:
    data = _mixed_segment(seed=7)
    log = tmp_path / f"{NAME}.log"
    log.write_bytes(data[:-5])
    with pytest.raises(Exception, match="trailing bytes"):
        rewrite_segment(log, RewriteSpec(target_magic=MAGIC_V2))
    assert rewrite_segment(log, RewriteSpec(target_magic=MAGIC_V2), torn_tail_ok=True).prefix_state is not None


@pytest.mark.parametrize("damage", ["longer", "same size, other bytes", "index gone"])
def test_staged_files_not_as_written_are_refused_and_nothing_is_left(tmp_path: Path, damage: str) -> None:
    """The window falls back to a whole conversion on StagedPrefixChanged: the staged prefix's
    .log must be the bytes its state says (size and checksum), its indexes there; a refused
    carry-on leaves no output behind."""
    data = _mixed_segment(seed=9)
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / f"{NAME}.log").write_bytes(data[: len(data) // 2])
    spec = RewriteSpec(target_magic=MAGIC_V2)
    state = rewrite_segment(stage / f"{NAME}.log", spec, torn_tail_ok=True).prefix_state
    assert state is not None
    staged_log = stage / f"{NAME}.log.cleaned"
    if damage == "longer":
        with open(staged_log, "ab") as f:
            f.write(b"\0" * 10)
    elif damage == "index gone":
        (stage / f"{NAME}.index.cleaned").unlink()
    else:
        raw = bytearray(staged_log.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        staged_log.write_bytes(bytes(raw))
    run = tmp_path / "run"
    run.mkdir()
    (run / f"{NAME}.log").write_bytes(data)
    with pytest.raises(StagedPrefixChanged):
        rewrite_segment(run / f"{NAME}.log", spec, resume=Resume(state, stage))
    assert _files(run) == {}


@pytest.mark.parametrize("core_name", ["python", "compiled"])
def test_splits_and_warnings_of_the_first_bytes_are_counted_as_a_whole_conversion_counts_them(
        tmp_path: Path, core_name: str) -> None:
    """Batches split for max.message.bytes before the cut and after it: the carried-on result
    counts both (the report's BATCH_SPLIT and oversized-record findings come from them)."""
    if core_name == "compiled" and core.compiled is None:
        pytest.skip("compiled core not built")
    big = [Record(BASE + i, 1_700_000_200_000 + i, b"k", random.Random(i).randbytes(900))
           for i in range(8)]
    wrappers = [build_wrapper([r._replace(offset=r.offset + 100 * k) for r in big], magic=MAGIC_V1,
                              compression=Compression.GZIP) for k in range(4)]
    lone = build_wrapper([Record(BASE + 150, 1_700_000_300_000, b"k", random.Random(5).randbytes(3000))],
                         magic=MAGIC_V1, compression=Compression.GZIP)  # one record above the limit: a warning
    data = wrappers[0] + wrappers[1] + lone + wrappers[2] + wrappers[3]
    spec = RewriteSpec(target_magic=MAGIC_V2, max_message_bytes=2500)
    whole_dir, stage, run = (tmp_path / n for n in ("whole", "stage", "run"))
    for d in (whole_dir, stage, run):
        d.mkdir()
    (whole_dir / f"{NAME}.log").write_bytes(data)
    (run / f"{NAME}.log").write_bytes(data)
    cut = len(wrappers[0]) + len(wrappers[1]) + len(lone) + 3
    (stage / f"{NAME}.log").write_bytes(data[:cut])
    with core.use(core_name):
        whole = rewrite_segment(whole_dir / f"{NAME}.log", spec)
        state = rewrite_segment(stage / f"{NAME}.log", spec, torn_tail_ok=True).prefix_state
        assert state is not None and state.split_batches and state.warnings
        carried = rewrite_segment(run / f"{NAME}.log", spec, resume=Resume(state, stage))
    assert whole.split_batches > state.split_batches
    assert (carried.split_batches, carried.warnings) == (whole.split_batches, whole.warnings)
    assert _files(run) == _files(whole_dir)


@pytest.mark.parametrize("core_name", ["python", "compiled"])
def test_an_offset_going_back_after_the_first_bytes_fails_as_in_a_whole_conversion(tmp_path: Path,
                                                                                   core_name: str) -> None:
    """The offset checks carry on from the first bytes' last offset: a batch after them whose
    offset goes back fails the carried-on conversion where it fails a whole one."""
    if core_name == "compiled" and core.compiled is None:
        pytest.skip("compiled core not built")
    data = _mixed_segment(seed=11)
    last = [b for b in FileRecords_of(data, tmp_path)][-1]
    bad = encode_message(last.last_offset - 3, MAGIC_V1, 0, 1_700_000_300_000, b"k", b"back")
    spec = RewriteSpec(target_magic=MAGIC_V2)
    whole_dir, stage, run = (tmp_path / n for n in ("whole", "stage", "run"))
    for d in (whole_dir, stage, run):
        d.mkdir()
    (whole_dir / f"{NAME}.log").write_bytes(data + bad)
    (run / f"{NAME}.log").write_bytes(data + bad)
    (stage / f"{NAME}.log").write_bytes(data)
    with core.use(core_name):
        with pytest.raises(KafkaFormatError) as whole:
            rewrite_segment(whole_dir / f"{NAME}.log", spec)
        state = rewrite_segment(stage / f"{NAME}.log", spec, torn_tail_ok=True).prefix_state
        assert state is not None
        with pytest.raises(KafkaFormatError) as carried:
            rewrite_segment(run / f"{NAME}.log", spec, resume=Resume(state, stage))
    assert (type(carried.value), carried.value.position, carried.value.message) == \
        (type(whole.value), whole.value.position, whole.value.message) and whole.value.position == len(data)
    assert _files(run) == {}


def FileRecords_of(data: bytes, tmp_path: Path) -> list:
    p = tmp_path / "peek" / f"{NAME}.log"
    p.parent.mkdir()
    p.write_bytes(data)
    return list(FileRecords(p).batches())
