"""Many small legacy partitions: what an upgrade pays per segment and per Spark task rather than
per byte (issue 30, item 5).

A broker log dir of N partitions (``small-v0-<i>`` and ``small-v1-<i>``, alternating), each of 3
legacy segments of about 60 KB, built from the sample cluster's own generators
(``migration.demo.sample_cluster``: ``PartitionWriter`` fed by the legacy message stream of the
``legacy-v0`` and ``clicks-v1`` topics, uncompressed messages and gzip/snappy/lz4 wrappers); one
template partition per format is generated anew by each run (a fraction of a second) and copied
N times (``bench.logdir``).

  python -m bench.small_partitions upgrade TARGET BACKUP_ROOT LOG_DIR
        the inline upgrade with the unit's steps timed (``steps``): everything a unit does around
        its rewrite (journal writes, backup, the replace protocol, directory and file fsyncs) by
        wrapping the functions ``migration.migrations.upgrade.unit`` calls, nothing else changed;
        ``os.fsync`` counted and timed wherever it is called (the backup's, the journal's, the
        output's on the writer thread, the replace protocol's directories)

The Spark side runs ``bench.workers spark-upgrade`` on the same log dir (a fresh copy); its
target compares the run on a session already started (``run_seconds``) with the inline run,
Spark's start shown beside it. ``bench`` is ``make bench --only small-partitions`` (bench.run).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.logdir import Segment

SEGMENT_BYTES = 60_000
SEGMENTS = 3
KINDS = ("v0", "v1")


def _template(root: Path, kind: str, seed: int) -> Path:
    """One partition directory of ``SEGMENTS`` legacy segments of about ``SEGMENT_BYTES``, made
    anew (a fraction of a second; no marker to trust after a crash, nothing left from an older
    generator)."""
    from migration.demo.sample_cluster import T0_MS, PartitionWriter, _legacy_stream, _Values

    pdir = root / f"template-{kind}-0"
    shutil.rmtree(pdir, ignore_errors=True)
    rng = random.Random(seed)
    w = PartitionWriter(pdir, SEGMENT_BYTES)
    for data, first, nxt, mtime in _legacy_stream(kind, 10**9, rng, _Values(rng), T0_MS):
        w.append(data, first_offset=first, next_offset=nxt, mtime_s=mtime)
        if len(w.segments) == SEGMENTS:
            break  # the writer rolled: the last entry opened one segment more than wanted
    w.close()
    extra = w.segments[-1][0]  # that segment and its indexes go
    for f in pdir.glob(f"{extra:020d}.*"):
        f.unlink()
    return pdir


def _partitions(n: int, templates: Path) -> tuple[dict[str, list[Segment]], dict[str, Path]]:
    """A log dir of ``n`` small legacy partitions, for ``bench.run._fresh_log_dir``: each
    partition's segments (its format's template's, whole) and the directory its partition files
    are copied from."""
    tpl = {k: _template(templates, k, seed=30 + i) for i, k in enumerate(KINDS)}
    parts: dict[str, list[Segment]] = {}
    origin: dict[str, Path] = {}
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        name = f"small-{kind}-{i // len(KINDS)}"
        parts[name] = [(p, None) for p in sorted(tpl[kind].glob("*.log"))]
        origin[name] = tpl[kind]
    return parts, origin


def _fresh(base: Path, n: int) -> tuple[Callable[[], object], int]:
    """What makes a fresh log dir of ``n`` small partitions at ``base/kafka-logs`` (and removes
    the backups), for ``bench.run._median_child``; and the bytes of its segments."""
    from bench import run as R

    parts, origin = _partitions(n, base.parent / "small-partitions-templates")
    nbytes = sum(src.stat().st_size for segments in parts.values() for src, _ in segments)
    return functools.partial(R._fresh_log_dir, base / "kafka-logs", base / "backups", parts, origin), nbytes


@contextlib.contextmanager
def _timed_attrs(module: Any, names: list[str], times: dict[str, float], calls: dict[str, int]) -> Iterator[None]:
    """Wrap ``module.<name>`` for each name with a timer (seconds and calls per name)."""
    from bench.workers import timed

    saved = {n: getattr(module, n) for n in names}
    for n, fn in saved.items():
        setattr(module, n, timed(n, fn, times, calls))
    try:
        yield
    finally:
        for n, fn in saved.items():
            setattr(module, n, fn)


# What a unit of the upgrade calls (migration/migrations/upgrade/unit.py), by the name it calls.
# ``rewrite_segment`` and ``digest_outputs`` are the per-byte work (conversion, the output
# written and fsynced by the writer thread, the read-back digest); the rest is per segment.
PER_BYTE_STEPS = ["rewrite_segment", "digest_outputs"]
FIXED_STEPS = ["load_journal", "save_journal", "backup_unit", "remove_cleaned_in_range", "fsync_dir",
               "replace_segments"]


def upgrade(target: str, backup_root: str, log_dir: str) -> dict[str, Any]:
    """``bench.workers upgrade`` with the unit's steps and every ``os.fsync`` timed."""
    from bench import workers
    from migration.migrations.upgrade import unit

    steps: dict[str, float] = {}
    calls: dict[str, int] = {}
    fsync = {"calls": 0, "seconds": 0.0}
    real_fsync = os.fsync

    def counted_fsync(fd: int) -> None:
        t = time.perf_counter()
        try:
            real_fsync(fd)
        finally:
            fsync["calls"] += 1  # (the writer thread's too: a += of ints under the GIL)
            fsync["seconds"] += time.perf_counter() - t

    os.fsync = counted_fsync
    try:
        with _timed_attrs(unit, PER_BYTE_STEPS + FIXED_STEPS, steps, calls):
            out = workers.upgrade(target, backup_root, [log_dir])
    finally:
        os.fsync = real_fsync
    return out | {"steps": {k: round(v, 4) for k, v in steps.items()}, "step_calls": calls,
                  "fsync_calls": fsync["calls"], "fsync_s": round(fsync["seconds"], 4)}


# Target (issue 30, "Numbers to reach"): the Spark engine on local[2] within this factor of the
# inline engine for the upgrade of a log dir of many small partitions.
SPARK_VS_INLINE = 1.3
PARTITIONS = 500
FIXED_COST_PARTITIONS = 2000
QUICK_PARTITIONS = 100
QUICK_FIXED_COST_PARTITIONS = 200


def _fixed_cost(up: dict[str, Any], segments: int) -> dict[str, Any]:
    """Seconds per segment of the units phase, and its parts per segment: the unit's fixed steps
    (journal, backup, replace protocol, directory fsyncs) and the per-byte work (rewrite,
    read-back digest); ``os.fsync`` across all of them (the output's on the writer thread)."""
    st = up["steps"]
    journal = st.get("save_journal", 0.0) + st.get("load_journal", 0.0)
    backup = st.get("backup_unit", 0.0)
    replace = st.get("replace_segments", 0.0) + st.get("fsync_dir", 0.0) + st.get("remove_cleaned_in_range", 0.0)
    per_byte = st.get("rewrite_segment", 0.0) + st.get("digest_outputs", 0.0)
    units = up["phases"].get("units", 0.0)
    ms = 1000.0 / segments
    return {"units_ms_per_segment": round(units * ms, 3), "journal_ms": round(journal * ms, 3),
            "backup_ms": round(backup * ms, 3), "replace_ms": round(replace * ms, 3),
            "fixed_ms": round((journal + backup + replace) * ms, 3), "rewrite_ms": round(per_byte * ms, 3),
            "fsyncs_per_segment": round(up["fsync_calls"] / segments, 2),
            "fsync_ms": round(up["fsync_s"] * ms, 3)}


def bench(quick: bool) -> list[dict[str, Any]]:
    """``make bench --only small-partitions``: the upgrade --to v2 of a log dir of many small
    legacy partitions, inline vs Spark local[2] side by side (each on a fresh copy), and the
    per-segment fixed cost of an upgrade on a bigger one, inline."""
    from bench import run as R

    n = QUICK_PARTITIONS if quick else PARTITIONS
    n_fixed = QUICK_FIXED_COST_PARTITIONS if quick else FIXED_COST_PARTITIONS
    note = f" (--quick: {n} partitions, not {PARTITIONS})" if quick else ""
    base = R.OUT / "small-partitions"
    segments = n * SEGMENTS
    log_dir, backups = base / "kafka-logs", base / "backups"
    fresh, nbytes = _fresh(base, n)
    inline = R._median_child(["-m", "bench.small_partitions", "upgrade", "v2", str(backups), str(log_dir)], 1, fresh)
    R._check_upgrade("inline", inline, segments)
    spark = R._median_child(["-m", "bench.workers", "spark-upgrade", "v2", "local[2]", str(backups), str(log_dir)], 1,
                            fresh)
    R._check_upgrade("spark", spark, segments)
    print(f"  {n} small partitions: inline {inline['seconds']:.2f}s (units {inline['phases'].get('units', 0):.2f}s); "
          f"Spark local[2] {spark['run_seconds']:.2f}s after a start of {spark['startup']:.2f}s "
          f"(units {spark['phases'].get('units', 0):.2f}s)", flush=True)
    label = f"upgrade --to v2 of {n} small legacy partitions ({SEGMENTS} segments of ~{SEGMENT_BYTES // 1000} KB)"
    cost = _fixed_cost(inline, segments)
    inline_row = R._info(R._row(f"{label}, inline engine (baseline){note}", inline["seconds"], nbytes,
                                inline["records_rewritten"], phases=inline["phases"], **cost),
                         f"baseline; {cost['units_ms_per_segment']:.1f} ms per segment in the units phase")
    r = spark["run_seconds"] / inline["seconds"]
    spark_row = R._row(f"{label}, Spark local[2], session started before{note}", spark["run_seconds"], nbytes,
                       spark["records_rewritten"], startup_s=spark["startup"], phases=spark["phases"],
                       unit_seconds=spark["unit_seconds"])
    spark_row = R._target(spark_row, r, SPARK_VS_INLINE, below=True, key="small-partitions",
                          target=f"<= {SPARK_VS_INLINE}x inline",
                          ratio=f"{r:.2f}x inline (units phase {spark['phases'].get('units', 0):.2f}s vs "
                                f"{inline['phases'].get('units', 0):.2f}s; Spark start {spark['startup']:.1f}s "
                                "besides)")
    shutil.rmtree(base, ignore_errors=True)

    note = f" (--quick: {n_fixed} partitions, not {FIXED_COST_PARTITIONS})" if quick else ""
    segments = n_fixed * SEGMENTS
    fresh, nbytes = _fresh(base, n_fixed)
    big = R._median_child(["-m", "bench.small_partitions", "upgrade", "v2", str(backups), str(log_dir)], 1, fresh)
    R._check_upgrade("inline", big, segments)
    cost = _fixed_cost(big, segments)
    print(f"  {n_fixed} small partitions inline: {big['seconds']:.2f}s, per segment {cost}", flush=True)
    fixed_row = R._info(
        R._row(f"per-segment cost of an upgrade, {n_fixed} small partitions inline{note}", big["seconds"], nbytes,
               big["records_rewritten"], segments=segments, phases=big["phases"], **cost),
        f"{cost['units_ms_per_segment'] / 1000:.4f} s/segment: fixed {cost['fixed_ms']:.1f} ms (journal "
        f"{cost['journal_ms']:.1f}, backup {cost['backup_ms']:.1f}, replace {cost['replace_ms']:.1f}), rewrite "
        f"{cost['rewrite_ms']:.1f} ms; {cost['fsyncs_per_segment']:g} fsyncs, {cost['fsync_ms']:.1f} ms")
    shutil.rmtree(base, ignore_errors=True)
    return [inline_row, spark_row, fixed_row]


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    if cmd == "upgrade":
        print(json.dumps(upgrade(rest[0], rest[1], rest[2])))
    else:
        raise SystemExit(f"unknown command {cmd}")
