"""``--only window``: the stop window of an upgrade after a prestage (``kmigrate upgrade
--prestage``, then ``--stage`` with the broker stopped), side by side with the full offline
upgrade of the same log dir.

The data is the sample cluster's own (bench.run.sample_cluster, the ``--scale`` of the run):
its legacy partitions (``legacy-v0``, ``clicks-v1``, ``audit-lat``, ``orders-upgraded``, every
broker's; v0 and v1 messages, gzip/snappy/lz4 wrappers, log-append-time wrappers; not the
compacted topic), their entries from the start rolled again by the cluster builder's own
``PartitionWriter`` (indexes as recovery builds them) into one broker log dir laid out as a
broker leaves it: in each partition ``CLOSED`` closed segments of ``SEGMENT_BYTES`` and a small
active one of about ``ACTIVE_BYTES`` (the last segment is the active one: the prestage leaves it
to the window, which converts it). Two such log dirs, alike but for the closed segments' size
(the second's twice the first's, as many), are written once under ``out/bench/window/data``
(reused while the cluster and the sizes are the same) and copied (``cp -a``) for each measured
run, which gets a kmigrate home, a backup root and a stage root (``$KMIGRATE_STAGE_ROOT``) of
its own under ``out/bench/window/runs`` (the log dirs' file system: the window links the staged
files in, and backups are hard links).

  python -m bench.window upgrade TARGET BACKUP_ROOT LOG_DIR [STAGE_ID [PROFILE]]
        ``execute_upgrade`` on the inline engine: without STAGE_ID the full offline upgrade,
        with it the stop window after a prestage (its stage root: ``$KMIGRATE_STAGE_ROOT``, else
        settings.default_stage_root); the driver's phases and the unit's steps timed (``steps``,
        by the names unit.py calls), ``os.fsync`` counted; the report's per-broker ``window``.
        PROFILE: a cProfile of the call written there (slower; not for the figures)
  python -m bench.window prestage TARGET STAGE_ID LOG_DIR [IO_RATE [BUDGET]]
        ``prestage_upgrade`` (no --io-rate, no --budget unless given): its seconds, the bytes of
        its staged units (bytes_before read + bytes_after written, as its pacer counts them), those
        of the active segments' bytes so far it staged (``prefix_bytes``: read, copied and
        converted, as its pacer counts them) and the report's duration

``bench`` is ``make bench --only window`` (bench.run): three targets, each on copies of the
same log dirs in the same run (docs/benchmarks.md, "Stop window").
"""

from __future__ import annotations

import cProfile
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TARGET = "v2"
# Full run: every legacy partition of the sample cluster (8 at any scale: legacy-v0, clicks-v1,
# audit-lat, orders-upgraded; not the compacted one) as 4 closed segments of 16 MiB and an
# active one of ~1 MiB (the log dir with twice the bytes per segment: 4 of 32 MiB).
CLOSED = 4
SEGMENT_BYTES = 16 << 20
ACTIVE_BYTES = 1 << 20
# --quick (the scale-20 cluster: about 2.7 MB per partition): 4 closed segments of 256 KiB and
# an active one of ~64 KiB.
QUICK_SEGMENT_BYTES = 256 << 10
QUICK_ACTIVE_BYTES = 64 << 10
# Targets (the prestage issue's numbers).
WINDOW_VS_OFFLINE = 0.05  # the stop window, x the full offline upgrade of the same log dir
PRESTAGE_VS_OFFLINE = 0.9  # the prestage's MB/s of closed segments, x the offline upgrade's MB/s
WINDOW_GROWTH = 1.2  # the window with twice the bytes per closed segment, x the window
IO_RATE_TOLERANCE = 0.10  # the prestage's measured bytes/s with --io-rate R, within this of R
IO_RATE_FRACTION = 3  # R = the unthrottled prestage's bytes/s / this

# What a unit of the window calls (migration/migrations/upgrade/unit.py), by the name it calls:
# the stage's checks and links, the per-segment steps every unit takes, and the conversion of
# what was not staged whole (the active segments: their staged prefix checked, copied in and
# digested again, and whatever the broker appended after it converted).
STEPS = ["_usable_stage", "_link_staged", "_usable_prefix", "backup_unit", "load_journal", "save_journal",
         "fsync_dir", "replace_segments", "remove_cleaned_in_range", "rewrite_segment", "digest_outputs"]


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n % (1 << 20) == 0 else f"{n >> 10} KiB"


def _legacy_partitions(cluster: Path) -> list[Path]:
    """The sample cluster's legacy partitions, every broker's: its topics of v0 and v1 data but
    the compacted one (an operator keeps compacted topics out: Kafka's cleaner converts them)."""
    from migration.demo.sample_cluster import TOPICS

    legacy = [t.name for t in TOPICS if not t.compacted and t.kind not in ("v2", "idempotent")]
    return sorted((p for t in legacy for p in cluster.glob(f"broker-*/kafka-logs/{t}-*") if p.is_dir()),
                  key=lambda p: p.name)


def _entries(pdir: Path) -> Iterator[tuple[bytes, int, int, int]]:
    """A partition's log entries in offset order, across its segments, as the sample cluster's
    ``PartitionWriter`` takes them: (bytes, first offset, next offset, mtime seconds). A legacy
    entry names its last offset; the cluster's legacy streams have no gaps, so an entry's first
    offset is the one after its predecessor's last (a segment's base offset for its first)."""
    from migration.formats import names
    from migration.formats.file_records import iterate_batches

    for log in sorted(pdir.glob(f"*{names.LOG_FILE_SUFFIX}")):
        data = log.read_bytes()
        mtime = int(log.stat().st_mtime)
        first = int(log.name.split(".")[0])
        for b in iterate_batches(data, path=str(log)):
            yield data[b.position:b.position + b.size_in_bytes], first, b.last_offset + 1, mtime
            first = b.last_offset + 1


def _write_partition(src: Path, pdir: Path, segment_bytes: int, active_bytes: int) -> int:
    """``src``'s entries from its start into ``pdir``, rolled at ``segment_bytes`` by the sample
    cluster's ``PartitionWriter`` (indexes as recovery builds them, mtimes): ``CLOSED`` closed
    segments and an active one of about ``active_bytes``. Returns the bytes of its segments."""
    from migration.demo.sample_cluster import PartitionWriter
    from migration.formats import names

    w = PartitionWriter(pdir, segment_bytes)
    current = 0  # bytes of the segment being written
    for data, first, nxt, mtime in _entries(src):
        rolled = len(w.segments)
        w.append(data, first_offset=first, next_offset=nxt, mtime_s=mtime)
        current = len(data) if len(w.segments) != rolled else current + len(data)
        if len(w.segments) == CLOSED and current >= active_bytes:
            break
    else:
        raise ValueError(f"{src} holds too few bytes for {CLOSED} segments of {segment_bytes:,} bytes and an active "
                         f"one of {active_bytes:,}")
    w.close()
    if (src / names.PARTITION_METADATA_FILE).exists():
        shutil.copyfile(src / names.PARTITION_METADATA_FILE, pdir / names.PARTITION_METADATA_FILE)
    return sum(size for _, _, size in w.segments)


def _pristine(base: Path, cluster: Path, segment_bytes: int, active_bytes: int) -> Path:
    """The log dir of the cluster's legacy partitions rolled at ``segment_bytes`` (built once; a
    marker beside it, naming the cluster and the parameters, says it is complete)."""
    from bench.logdir import make_log_dir

    name = f"{segment_bytes >> 10}k"
    log_dir = base / "data" / name / "kafka-logs"
    params = {"cluster": str(cluster), "closed": CLOSED, "segment_bytes": segment_bytes, "active_bytes": active_bytes}
    marker = base / "data" / f"{name}.complete"
    if marker.exists() and json.loads(marker.read_text()) == params:
        return log_dir
    marker.unlink(missing_ok=True)
    t = time.perf_counter()
    make_log_dir(log_dir, {})  # meta.properties, the clean-shutdown marker, .lock
    total = sum(_write_partition(src, log_dir / src.name, segment_bytes, active_bytes)
                for src in _legacy_partitions(cluster))
    subprocess.run(["sync"], check=True)
    marker.write_text(json.dumps(params))
    print(f"  wrote {log_dir} ({total / 1e6:.0f} MB of segments) in {time.perf_counter() - t:.1f}s", flush=True)
    return log_dir


def _fitting(cluster: Path, segment_bytes: int, active_bytes: int) -> int:
    """``segment_bytes``, or less when the cluster's smallest legacy partition (a small --scale)
    cannot give ``CLOSED`` segments of twice that and an active one: a multiple of 64 KiB."""
    least = min(sum(p.stat().st_size for p in src.glob("*.log")) for src in _legacy_partitions(cluster))
    fits = (least - 2 * active_bytes) // (2 * CLOSED) // (64 << 10) * (64 << 10)
    if fits < (64 << 10):
        raise ValueError(f"the sample cluster {cluster} is too small for the window benchmark (--scale)")
    return min(segment_bytes, fits)


def _segments(log_dir: Path) -> tuple[int, int, int, int]:
    """(closed segments, their bytes, active segments, their bytes) of ``log_dir``."""
    closed = closed_bytes = active = active_bytes = 0
    for pdir in sorted(p for p in log_dir.iterdir() if p.is_dir()):
        logs = sorted(pdir.glob("*.log"))
        closed += len(logs) - 1
        closed_bytes += sum(p.stat().st_size for p in logs[:-1])
        active += 1
        active_bytes += logs[-1].stat().st_size
    return closed, closed_bytes, active, active_bytes


class _Run:
    """One measured run: a fresh ``cp -a`` of a pristine log dir and a home, backup root and stage
    root of its own (``<base>/runs/<name>``)."""

    def __init__(self, base: Path, name: str, pristine: Path) -> None:
        self.dir = base / "runs" / name
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.log_dir = self.dir / "kafka-logs"
        subprocess.run(["cp", "-a", str(pristine), str(self.log_dir)], check=True)
        subprocess.run(["sync"], check=True)  # no run starts with the copy's dirty pages
        self.backups = self.dir / "backups"
        self.env = {"KMIGRATE_HOME": str(self.dir / "home"), "KMIGRATE_STAGE_ROOT": str(self.dir / "stages")}

    def child(self, args: list[str]) -> dict[str, Any]:
        from bench import run as R

        res = subprocess.run([sys.executable, "-m", "bench.window", *args], env=R._env() | self.env, cwd=R.ROOT,
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"bench.window {args[:2]} failed: {res.stderr[-2000:]}")
        return dict(json.loads(res.stdout.strip().splitlines()[-1]))

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------- workers (child processes)


def upgrade(target: str, backup_root: str, log_dir: str, stage: str | None = None,
            profile: str | None = None) -> dict[str, Any]:
    """``execute_upgrade`` inline, offline (no ``stage``) or the stop window after a prestage,
    with the driver's phases and the unit's steps timed and ``os.fsync`` counted."""
    import migration.audit.html  # noqa: F401  (loaded outside the timer, as bench.workers does)
    from bench import workers
    from bench.small_partitions import _timed_attrs
    from migration.audit.model import UnitStatus
    from migration.migrations.upgrade import unit
    from migration.migrations.upgrade.driver import execute_upgrade
    from migration.migrations.upgrade.options import UpgradeOptions

    opts = UpgradeOptions(target=target, backup_root=backup_root, stage=stage)  # type: ignore[arg-type]
    run_id = f"bench-{'window' if stage else 'offline'}-{os.getpid()}"
    phases: dict[str, float] = {}
    steps: dict[str, float] = {}
    calls: dict[str, int] = {}
    fsync = {"calls": 0, "seconds": 0.0}
    real_fsync = os.fsync

    def counted_fsync(fd: Any) -> None:
        t0 = time.perf_counter()
        try:
            real_fsync(fd)
        finally:
            fsync["calls"] += 1
            fsync["seconds"] += time.perf_counter() - t0

    prof = cProfile.Profile() if profile else None
    os.fsync = counted_fsync
    try:
        # the steps unit.py has (a renamed one goes untimed: the figures are the run's seconds)
        with workers._phases(phases), _timed_attrs(unit, [n for n in STEPS if hasattr(unit, n)], steps, calls):
            t = time.perf_counter()
            if prof is not None:
                prof.enable()
            report = execute_upgrade([log_dir], options=opts, engine="inline", run_id=run_id)
            if prof is not None:
                prof.disable()
            seconds = time.perf_counter() - t
    finally:
        os.fsync = real_fsync
    if prof is not None and profile:
        prof.dump_stats(profile)
    tot = report.totals
    ok = [u for u in report.iter_results() if u.status is UnitStatus.OK]
    return {"seconds": seconds, "exit_code": report.exit_code(), "units_ok": tot.units_ok,
            "units_failed": tot.units_failed, "digest_mismatches": tot.digest_mismatches,
            "bytes_rewritten": sum(u.bytes_before or 0 for u in ok),
            "records_rewritten": sum(u.records_before or 0 for u in ok),
            "phases": {k: round(v, 4) for k, v in phases.items()},
            "steps": {k: round(v, 4) for k, v in steps.items()}, "step_calls": calls,
            "fsync_calls": fsync["calls"], "fsync_s": round(fsync["seconds"], 4),
            "windows": [b.window.model_dump(mode="json") | {"broker_id": b.broker_id}
                        for b in report.brokers if b.window is not None]}


def prestage(target: str, stage_id: str, log_dir: str, io_rate: int | None = None,
             budget: int | None = None) -> dict[str, Any]:
    """``prestage_upgrade``: seconds, staged units and their bytes, the report's duration."""
    import migration.audit.html  # noqa: F401
    from migration.audit.model import FindingCode, UnitStatus
    from migration.migrations.upgrade.options import UpgradeOptions
    from migration.migrations.upgrade.prestage import PrestageOptions, prestage_upgrade

    opts = PrestageOptions(upgrade=UpgradeOptions(target=target), stage_id=stage_id,  # type: ignore[arg-type]
                           io_rate=io_rate, budget=budget)
    t = time.perf_counter()
    report = prestage_upgrade([log_dir], options=opts)
    seconds = time.perf_counter() - t
    ok = [u for u in report.iter_results() if u.status is UnitStatus.OK]
    # the active segments' bytes so far, staged in this pass (one kept from an earlier pass took no time)
    prefixes = [u for u in report.iter_results() if u.duration_s is not None
                and any(w.code == FindingCode.PREFIX_STAGED for w in u.warnings)]
    return {"seconds": seconds, "exit_code": report.exit_code(), "refusal": report.refusal,
            "units_ok": len(ok), "units_failed": sum(1 for u in report.iter_results() if u.status is UnitStatus.FAILED),
            "bytes_before": sum(u.bytes_before or 0 for u in ok), "bytes_after": sum(u.bytes_after or 0 for u in ok),
            # read, written into the prestage's copy, and converted into bytes_after: as its pacer counts them
            "prefix_bytes": sum(2 * (u.bytes_before or 0) + (u.bytes_after or 0) for u in prefixes),
            "records": sum(u.records_before or 0 for u in ok), "report_s": report.duration_s}


# ---------------------------------------------------------------- the benchmark


def _check(name: str, out: dict[str, Any], units: int) -> None:
    if out["exit_code"] != 0 or out.get("units_failed") or out.get("digest_mismatches") or out["units_ok"] != units:
        raise RuntimeError(f"{name} did not succeed ({units} units expected): {out}")


def _check_window(name: str, out: dict[str, Any], swapped: int, converted: int) -> dict[str, Any]:
    _check(name, out, swapped + converted)
    (w,) = out["windows"]
    if (w["swapped"], w["converted"], w.get("prefixed"), w["discarded"]) != (swapped, converted, converted, 0):
        raise RuntimeError(f"{name}: expected {swapped} swapped, {converted} converted from their staged prefixes, "
                           f"0 discarded; got {w}")
    return dict(w)


def _explain(up: dict[str, Any]) -> str:
    """Where a run's seconds went: the driver's phases (what is outside them: the run lock's
    release and, after a window, the stage's cleanup); in the units, the conversion of what was
    not staged whole (the active segments, from their staged prefixes) and the steps every unit
    takes, per unit."""
    ph, st = up["phases"], up["steps"]
    convert = st.get("_usable_prefix", 0.0) + st.get("rewrite_segment", 0.0) + st.get("digest_outputs", 0.0)
    per_unit = (ph.get("units", 0.0) - convert) / max(up["units_ok"], 1) * 1000
    rest = up["seconds"] - sum(ph.values())
    return (f"prepare {ph.get('prepare', 0):.2f}s, units {ph.get('units', 0):.2f}s (converted {convert:.2f}s; the "
            f"rest {per_unit:.0f} ms per unit: backup {st.get('backup_unit', 0):.2f}s, journal "
            f"{st.get('save_journal', 0) + st.get('load_journal', 0):.2f}s, stage check + link "
            f"{st.get('_usable_stage', 0) + st.get('_link_staged', 0):.2f}s, replace "
            f"{st.get('replace_segments', 0):.2f}s), finalize {ph.get('finalize', 0):.2f}s, after them "
            f"{rest:.2f}s; {up['fsync_calls']} fsyncs {up['fsync_s']:.2f}s in all")


def _prestage_and_window(base: Path, name: str, pristine: Path, swapped: int, converted: int
                         ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A prestage of a fresh copy, then the window on it: (prestage, window, window record)."""
    run = _Run(base, name, pristine)
    pre = run.child(["prestage", TARGET, f"bench-{name}", str(run.log_dir)])
    _check(f"the prestage ({name})", pre, swapped)
    subprocess.run(["sync"], check=True)
    win = run.child(["upgrade", TARGET, str(run.backups), str(run.log_dir), f"bench-{name}"])
    w = _check_window(f"the window ({name})", win, swapped, converted)
    run.remove()
    return pre, win, w


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median seconds (its whole document), every run's seconds in ``runs_s``."""
    done = sorted(runs, key=lambda r: r["seconds"])
    return done[len(done) // 2] | {"runs_s": [round(r["seconds"], 3) for r in done]}


def _median_window(runs: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The window of median seconds and its record."""
    win = _median([r[1] for r in runs])
    return win, next(w for _, x, w in runs if x["seconds"] == win["seconds"])


def bench(cluster: Path, quick: bool, repeats: int = 1) -> list[dict[str, Any]]:
    """``make bench --only window``: offline upgrade, prestage, window; the window with twice the
    bytes per closed segment; a prestage with --io-rate."""
    from bench import run as R

    base = R.OUT / "window"
    active = QUICK_ACTIVE_BYTES if quick else ACTIVE_BYTES
    seg = _fitting(cluster, QUICK_SEGMENT_BYTES if quick else SEGMENT_BYTES, active)
    small = _pristine(base, cluster, seg, active)
    double = _pristine(base, cluster, 2 * seg, active)
    closed, closed_bytes, parts, active_bytes = _segments(small)
    closed2, closed_bytes2, _, active_bytes2 = _segments(double)
    total = closed_bytes + active_bytes
    note = " (--quick)" if quick else ""
    layout = (f"{parts} legacy partitions, {CLOSED} closed segments of {_size(seg)} + an active one of "
              f"~{_size(active)} each")
    rows: list[dict[str, Any]] = []

    # Each of the three runs of the log dir on a fresh copy, ``repeats`` rounds of the three in
    # turn; each figure the median of its runs (a window needs a prestage of its own before it).
    offs, staged, staged2 = [], [], []
    for _ in range(repeats):
        run = _Run(base, "offline", small)
        offs.append(run.child(["upgrade", TARGET, str(run.backups), str(run.log_dir)]))
        _check("the offline upgrade", offs[-1], closed + parts)
        run.remove()
        staged.append(_prestage_and_window(base, "staged", small, closed, parts))
        staged2.append(_prestage_and_window(base, "staged-2x", double, closed2, parts))
    off = _median(offs)
    pre = _median([p for p, _, _ in staged])
    win, w = _median_window(staged)
    pre2 = _median([p for p, _, _ in staged2])
    win2, w2 = _median_window(staged2)
    runs = f", median of {repeats}" if repeats > 1 else ""

    # 1. offline upgrade vs prestage vs window, on copies of the same log dir
    print(f"  offline {off['seconds']:.2f}s: {_explain(off)}\n  prestage {pre['seconds']:.2f}s; window "
          f"{win['seconds']:.2f}s (report {w['duration_s']:.2f}s): {_explain(win)}", flush=True)
    rows.append(R._info(R._row(f"offline upgrade --to {TARGET}, inline: {layout}{note} (baseline){runs}",
                               off["seconds"], total, off["records_rewritten"], runs_s=off["runs_s"],
                               phases=off["phases"], steps=off["steps"],
                               fsync_calls=off["fsync_calls"], fsync_s=off["fsync_s"]),
                        f"baseline; {_explain(off)}"))
    pre_mb_s = closed_bytes / pre["seconds"]
    off_mb_s = total / off["seconds"]
    r = pre_mb_s / off_mb_s
    rows.append(R._target(
        R._row(f"prestage (no --io-rate) of the same log dir's {closed} closed segments{note}{runs}", pre["seconds"],
               closed_bytes, pre["records"], runs_s=pre["runs_s"], report_s=pre["report_s"],
               bytes_after=pre["bytes_after"]),
        r, PRESTAGE_VS_OFFLINE, key="prestage", target=f">= {PRESTAGE_VS_OFFLINE}x offline MB/s",
        ratio=f"{r:.2f}x offline MB/s (time {pre['seconds'] / off['seconds']:.2f}x offline)"))
    r = win["seconds"] / off["seconds"]
    rows.append(R._target(
        R._row(f"stop window after the prestage (upgrade --stage, inline): {closed} swapped, {parts} active "
               f"converted from their staged prefixes (nothing appended since){note}{runs}", win["seconds"], total,
               win["records_rewritten"], runs_s=win["runs_s"],
               window=w, phases=win["phases"],
               steps=win["steps"], step_calls=win["step_calls"], fsync_calls=win["fsync_calls"],
               fsync_s=win["fsync_s"]),
        r, WINDOW_VS_OFFLINE, below=True, key="window", target=f"<= {WINDOW_VS_OFFLINE}x offline",
        ratio=f"{r:.3f}x offline (report's window {w['duration_s']:.2f}s; {_explain(win)})"))

    # 2. the window with twice the bytes per closed segment, as many segments
    print(f"  2x bytes per segment: prestage {pre2['seconds']:.2f}s; window {win2['seconds']:.2f}s "
          f"(report {w2['duration_s']:.2f}s): {_explain(win2)}", flush=True)
    rows.append(R._info(R._row(f"prestage of the log dir with {_size(2 * seg)} closed segments{note}{runs}",
                               pre2["seconds"], closed_bytes2, pre2["records"], runs_s=pre2["runs_s"],
                               report_s=pre2["report_s"]),
                        f"{pre2['seconds'] / pre['seconds']:.2f}x the prestage of {_size(seg)} segments"))
    # each round's 2x window over its 1x window (run one after the other), the median of those:
    # a drift of the machine between rounds cancels out
    r = sorted(b[1]["seconds"] / a[1]["seconds"] for a, b in zip(staged, staged2, strict=True))[repeats // 2]
    rows.append(R._target(
        R._row(f"stop window, {closed2} closed segments of {_size(2 * seg)} (2x bytes) + the same active "
               f"ones{note}{runs}", win2["seconds"], closed_bytes2 + active_bytes2, win2["records_rewritten"],
               runs_s=win2["runs_s"], window=w2,
               phases=win2["phases"], steps=win2["steps"], fsync_calls=win2["fsync_calls"], fsync_s=win2["fsync_s"]),
        r, WINDOW_GROWTH, below=True, key="window-growth", target=f"<= {WINDOW_GROWTH}x the window",
        ratio=f"{r:.2f}x the window of {_size(seg)} segments{' (median of the rounds)' if repeats > 1 else ''} "
              f"(report's {w2['duration_s']:.2f}s vs {w['duration_s']:.2f}s)"))

    # 3. --io-rate R, R a third of the unthrottled prestage's bytes/s; in a full run on a third of
    # the closed segments (--budget), so that it takes about as long as the unthrottled one; in a
    # quick one on all (a run of a fraction of a second would be mostly its survey)
    moved = pre["bytes_before"] + pre["bytes_after"] + pre["prefix_bytes"]
    rate = int(moved / pre["report_s"] / IO_RATE_FRACTION)
    budget = [] if quick else [str(closed_bytes // IO_RATE_FRACTION)]
    run = _Run(base, "io-rate", small)
    paced = run.child(["prestage", TARGET, "bench-io-rate", str(run.log_dir), str(rate), *budget])
    run.remove()
    if paced["exit_code"] != 0 or not paced["units_ok"] or paced["units_failed"]:
        raise RuntimeError(f"the prestage with --io-rate did not succeed: {paced}")
    paced_moved = paced["bytes_before"] + paced["bytes_after"] + paced["prefix_bytes"]
    measured = paced_moved / paced["report_s"]
    off_by = measured / rate - 1
    print(f"  --io-rate {rate / 1e6:.1f} MB/s: {paced['units_ok']} segments, {paced_moved / 1e6:.0f} MB moved in "
          f"{paced['report_s']:.2f}s = {measured / 1e6:.2f} MB/s", flush=True)
    unthrottled = moved / pre["report_s"]
    row = R._row(f"prestage --io-rate {rate / 1e6:.1f} MB/s (a third of the unthrottled {unthrottled / 1e6:.1f} MB/s "
                 f"read + written), {paced['units_ok']} segments{' (--budget)' if budget else ''}{note}",
                 paced["report_s"], paced["bytes_before"], paced["records"], io_rate=rate, moved_bytes=paced_moved,
                 measured_rate=round(measured))
    row["mb_s"] = round(measured / 1e6, 2)  # read + written, as the pacer counts them
    rows.append(R._target(row, abs(off_by), IO_RATE_TOLERANCE, below=True, key="prestage-io-rate",
                          target=f"within {IO_RATE_TOLERANCE:.0%} of --io-rate",
                          ratio=f"{measured / rate:.3f}x --io-rate ({off_by:+.1%})"))
    return rows


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    if cmd == "upgrade":
        out = upgrade(rest[0], rest[1], rest[2], *(rest[3:5]))
    elif cmd == "prestage":
        out = prestage(rest[0], rest[1], rest[2], *(int(x) for x in rest[3:5]))
    else:
        raise SystemExit(f"unknown command {cmd}")
    print(json.dumps(out))
