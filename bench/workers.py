"""Child processes of the benchmarks: each measures itself (wall time, peak RSS) and prints
one JSON line, so a benchmark's memory is that of the worker alone, not of the runner.

  python -m bench.workers upgrade TARGET BACKUP_ROOT LOG_DIR...      execute_upgrade, inline engine
  python -m bench.workers spark-upgrade TARGET MASTER BACKUP_ROOT LOG_DIR...
                                                                    the same on a new Spark session
  python -m bench.workers rewrite TARGET SEGMENT...                 rewrite_segment + read-back digest

The two upgrade workers report the run's phases as the driver runs them (``phases``: prepare,
units, finalize; the driver's functions wrapped with timers, nothing else changed):
everything outside ``units`` runs in the driver, one after the other, on any engine.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


@contextlib.contextmanager
def _phases(times: dict[str, float]) -> Iterator[None]:
    """Time the driver's phases of ``execute_upgrade`` into ``times`` (seconds)."""
    from migration.migrations.upgrade import driver

    saved = driver.prepare_upgrade, driver.finalize_upgrade, driver.get_engine

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                times[name] = times.get(name, 0.0) + time.perf_counter() - t

        return wrapper

    def get_engine(*args: Any, **kwargs: Any) -> Any:
        engine = saved[2](*args, **kwargs)
        engine.run = timed("units", engine.run)
        return engine

    driver.prepare_upgrade = timed("prepare", saved[0])  # type: ignore[assignment]
    driver.finalize_upgrade = timed("finalize", saved[1])  # type: ignore[assignment]
    driver.get_engine = get_engine  # type: ignore[assignment]
    try:
        yield
    finally:
        driver.prepare_upgrade, driver.finalize_upgrade, driver.get_engine = saved


def _upgrade(target: str, backup_root: str, log_dirs: list[str], engine: str, spark: Any = None) -> dict[str, Any]:
    # Modules load outside the timer, as every baseline's imports are outside its own: the report
    # page's module (jinja2 and the page's template) is otherwise first loaded by the report's save.
    import migration.audit.html  # noqa: F401
    from migration.audit.model import UnitStatus
    from migration.migrations.upgrade.driver import execute_upgrade
    from migration.migrations.upgrade.options import UpgradeOptions

    opts = UpgradeOptions(target=target, backup_root=backup_root)  # type: ignore[arg-type]
    phases: dict[str, float] = {}
    t = time.perf_counter()
    with _phases(phases):
        report = execute_upgrade(log_dirs, options=opts, engine=engine, spark=spark)
    seconds = time.perf_counter() - t
    tot = report.totals
    # Totals count skipped segments (already in the target format) too: sum the rewritten ones.
    rewritten = [u for u in report.iter_results() if u.status is UnitStatus.OK]
    # Unit seconds per partition directory: the units of one partition run one after the other.
    by_partition: dict[str, float] = {}
    for u in rewritten:
        key = str(Path(u.path or u.unit).parent)
        by_partition[key] = by_partition.get(key, 0.0) + (u.duration_s or 0.0)
    return {"seconds": seconds, "units_ok": tot.units_ok, "units_failed": tot.units_failed,
            "digest_mismatches": tot.digest_mismatches,
            "bytes_rewritten": sum(u.bytes_before or 0 for u in rewritten),
            "bytes_written": sum(u.bytes_after or 0 for u in rewritten),
            "records_rewritten": sum(u.records_before or 0 for u in rewritten), "exit_code": report.exit_code(),
            "phases": {k: round(v, 4) for k, v in phases.items()},
            "unit_seconds": round(sum(by_partition.values()), 4),
            "largest_partition_seconds": round(max(by_partition.values(), default=0.0), 4),
            "peak_rss_mb": _peak_rss_mb()}


def upgrade(target: str, backup_root: str, log_dirs: list[str]) -> dict[str, Any]:
    return _upgrade(target, backup_root, log_dirs, "inline")


def spark_upgrade(target: str, master: str, backup_root: str, log_dirs: list[str]) -> dict[str, Any]:
    """The upgrade on a Spark session started here on ``master``: ``seconds`` counts the session's
    start (``startup``) and the run; Spark's own output goes to ``<backup_root>.spark.log``."""
    from migration.runtime.engine import spark_log_file, spark_session

    t = time.perf_counter()
    with spark_log_file(backup_root.rstrip("/") + ".spark.log"):
        spark = spark_session(master, app_name="kmigrate-bench")
        spark.sparkContext.parallelize([0], 1).count()  # the JVM and the scheduler up, as a job's first task
    startup = time.perf_counter() - t
    try:
        out = _upgrade(target, backup_root, log_dirs, "spark", spark)
    finally:
        spark.stop()
    return out | {"seconds": startup + out["seconds"], "startup": round(startup, 3), "master": master,
                  "run_seconds": out["seconds"]}


def rewrite(target: str, segments: list[str]) -> dict[str, object]:
    """The unit's core on each segment: streaming rewrite, then the read-back digest check."""
    from migration.migrations.upgrade.rewrite import RewriteSpec, cleaned_paths, rewrite_segment
    from migration.migrations.upgrade.unit import _digest_outputs

    spec = RewriteSpec(target_magic=int(target.lstrip("v")))
    records = size = 0
    t = time.perf_counter()
    for seg in segments:
        p = Path(seg)
        rr = rewrite_segment(p, spec)
        after = _digest_outputs(p.parent, rr.outputs, staged=True)
        if not after.matches(rr.digest_before):
            raise SystemExit(f"digest mismatch on {p}")
        records += rr.digest_before.records
        size += rr.bytes_before
        for c in cleaned_paths(p.parent, rr.outputs):
            c.unlink()
    return {"seconds": time.perf_counter() - t, "bytes": size, "records": records, "peak_rss_mb": _peak_rss_mb()}


def durable_write(nbytes: int, directory: str, sources: list[str], repeats: int = 3) -> dict[str, object]:
    """Write ``nbytes`` taken from ``sources`` (in order, again from the first when they run out)
    into files of the sources' sizes under ``directory``, each as the upgrade writes its
    outputs: in steps growing from ``rewrite.WRITEBACK_FIRST_BYTES`` to ``WRITEBACK_BYTES``, each
    step's writeback started at once (``fileio.start_writeback``; the last step goes with the
    fsync), then flushed and fsynced: the durable-write floor of an upgrade that writes that
    much. The reading happens before the timer; the files are removed after each pass, and the
    median of ``repeats`` passes counts (fsync times on this machine's virtual disk vary
    severalfold from one pass to the next)."""
    from migration.formats.fileio import start_writeback
    from migration.migrations.upgrade.rewrite import WRITEBACK_BYTES, WRITEBACK_FIRST_BYTES

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    pieces: list[bytes] = []
    left = nbytes
    while left > 0 and sources:
        for src in sources:
            data = Path(src).read_bytes()[:left]
            pieces.append(data)
            left -= len(data)
            if left <= 0:
                break
    passes = []
    for _ in range(repeats):
        t = time.perf_counter()
        for i, data in enumerate(pieces):
            with open(out / f"{i:06d}.log", "wb") as f:
                view = memoryview(data)
                at, step = 0, WRITEBACK_FIRST_BYTES
                while at < len(view):
                    f.write(view[at : at + step])
                    if at + step < len(view):
                        f.flush()
                        start_writeback(f.fileno(), at, step)
                    at, step = at + step, min(2 * step, WRITEBACK_BYTES)
                f.flush()
                os.fsync(f.fileno())
        fd = os.open(out, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        passes.append(time.perf_counter() - t)
        for i in range(len(pieces)):
            (out / f"{i:06d}.log").unlink()
        os.sync()
    return {"seconds": sorted(passes)[len(passes) // 2], "passes": [round(x, 4) for x in passes],
            "bytes": sum(len(d) for d in pieces), "files": len(pieces)}


if __name__ == "__main__":
    cmd, target, *rest = sys.argv[1:]
    if cmd == "durable-write":
        print(json.dumps(durable_write(int(target), rest[0], rest[1:])))
        sys.exit(0)
    if cmd == "upgrade":
        out = upgrade(target, rest[0], rest[1:])
    elif cmd == "spark-upgrade":
        out = spark_upgrade(target, rest[0], rest[1], rest[2:])
    elif cmd == "rewrite":
        out = rewrite(target, rest)
    else:
        raise SystemExit(f"unknown worker {cmd}")
    print(json.dumps(out))
