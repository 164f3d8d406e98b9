"""Child processes of the benchmarks: each measures itself (wall time, peak RSS) and prints
one JSON line, so a benchmark's memory is that of the worker alone, not of the runner.

  python -m bench.workers upgrade TARGET BACKUP_ROOT LOG_DIR...      execute_upgrade, inline engine
  python -m bench.workers spark-upgrade TARGET MASTER BACKUP_ROOT LOG_DIR...
                                                                    the same on a new Spark session
  python -m bench.workers rewrite TARGET SEGMENT...                 rewrite_segment + read-back digest
  python -m bench.workers proof DIGEST_BYTES ORIGINAL_FILE_BYTES OUTPUT_FILE_BYTES CRC32_BYTES CRC32_CALLS
                                CRC32C_BYTES CRC32C_CALLS           the proof floor of that much work
  python -m bench.workers durable-write NBYTES [--recycled] DIRECTORY SOURCE...
                                                                    the durable-write floor of NBYTES

The two upgrade workers report the run's phases as the driver runs them (``phases``: prepare,
units, finalize; the driver's functions wrapped with timers, nothing else changed):
everything outside ``units`` runs in the driver, one after the other, on any engine. The inline
one also reports its proof work (``proof``): the bytes of canonical records and timestamps its
record digests hashed (``RecordDigester.feed``/``feed_packed`` wrapped with counters), the
bytes its whole-file checksums hashed (``checksum.file_hasher`` wrapped: the originals backed
up; and ``rewrite.file_hasher``: the outputs, hashed by the writer thread), and the bytes and
calls of CRC-32 and CRC-32C the compiled core computed in its units (``take_crc_counts``, from
the end of the prepare step; the units run in this process), so that ``proof`` can time that
much hashing alone.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import resource
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def _peak_rss_mb() -> float:
    """This process's peak resident set size, in MB: ``VmHWM`` in /proc/self/status, the
    high-water mark of its own memory. Not getrusage's ``ru_maxrss``: Linux keeps that across
    execve, and a child spawned by vfork (as subprocess spawns) starts with its parent's, so a
    worker would report the runner's peak whenever that is the higher (a child of a process
    that had touched 300 MB reported 311 MB; its VmHWM was 11 MB)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def timed(name: str, fn: Callable[..., Any], times: dict[str, float], calls: dict[str, int] | None = None,
          then: Callable[[], object] | None = None) -> Callable[..., Any]:
    """``fn`` wrapped with a timer: each call adds its seconds to ``times[name]`` (and 1 to
    ``calls[name]``), then calls ``then``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            times[name] = times.get(name, 0.0) + time.perf_counter() - t
            if calls is not None:
                calls[name] = calls.get(name, 0) + 1
            if then is not None:
                then()

    return wrapper


@contextlib.contextmanager
def _phases(times: dict[str, float], after_prepare: Callable[[], object] | None = None) -> Iterator[None]:
    """Time the driver's phases of ``execute_upgrade`` into ``times`` (seconds); call
    ``after_prepare`` when the prepare step returns."""
    from migration.migrations.upgrade import driver

    saved = driver.prepare_upgrade, driver.finalize_upgrade, driver.get_engine

    def get_engine(*args: Any, **kwargs: Any) -> Any:
        engine = saved[2](*args, **kwargs)
        engine.run = timed("units", engine.run, times)
        return engine

    driver.prepare_upgrade = timed("prepare", saved[0], times, then=after_prepare)  # type: ignore[assignment]
    driver.finalize_upgrade = timed("finalize", saved[1], times)  # type: ignore[assignment]
    driver.get_engine = get_engine  # type: ignore[assignment]
    try:
        yield
    finally:
        driver.prepare_upgrade, driver.finalize_upgrade, driver.get_engine = saved


@contextlib.contextmanager
def _digest_bytes(counted: dict[str, int]) -> Iterator[None]:
    """Count into ``counted["digest_bytes"]`` what every record digest hashes: canonical record
    bytes and 8 bytes of timestamp per record (docs: migration/formats/digest.py)."""
    from migration.formats.digest import RecordDigester

    saved = RecordDigester.feed, RecordDigester.feed_packed

    def feed(self: Any, content: Any, timestamps: list[int], *args: Any) -> None:
        counted["digest_bytes"] += len(content) + 8 * len(timestamps)
        saved[0](self, content, timestamps, *args)

    def feed_packed(self: Any, content: Any, timestamps: bytes, *args: Any) -> None:
        counted["digest_bytes"] += len(content) + len(timestamps)
        saved[1](self, content, timestamps, *args)

    RecordDigester.feed, RecordDigester.feed_packed = feed, feed_packed  # type: ignore[method-assign]
    try:
        yield
    finally:
        RecordDigester.feed, RecordDigester.feed_packed = saved  # type: ignore[method-assign]


@contextlib.contextmanager
def _file_checksum_bytes(counted: dict[str, int]) -> Iterator[None]:
    """Count into ``counted`` what every whole-file checksum hashes: ``original_file_bytes``, the
    originals a unit backs up (migration/migrations/common/checksum.py), and
    ``output_file_bytes``, the output segments it writes (rewrite.py, hashed by the writer
    thread), by which a resume or rollback after a crash tells them apart. The two never run at
    once: a unit's backup precedes its rewrite, whose writers are joined before it returns."""
    from migration.migrations.common import checksum
    from migration.migrations.upgrade import rewrite

    saved = checksum.file_hasher

    class Counting:
        def __init__(self, inner: Any, key: str) -> None:
            self.inner, self.key = inner, key

        def update(self, data: Any, /) -> object:
            counted[self.key] += memoryview(data).nbytes
            return self.inner.update(data)

        def hexdigest(self) -> str:
            return str(self.inner.hexdigest())

    def original_hasher(algorithm: Any) -> Any:
        return Counting(saved(algorithm), "original_file_bytes")

    def output_hasher(algorithm: Any) -> Any:
        return Counting(saved(algorithm), "output_file_bytes")

    checksum.file_hasher, rewrite.file_hasher = original_hasher, output_hasher  # type: ignore[assignment]
    try:
        yield
    finally:
        checksum.file_hasher = rewrite.file_hasher = saved  # type: ignore[assignment]


def _upgrade(target: str, backup_root: str, log_dirs: list[str], engine: str, spark: Any = None) -> dict[str, Any]:
    # Modules load outside the timer, as every baseline's imports are outside its own: the report
    # page's module (jinja2 and the page's template) is otherwise first loaded by the report's save.
    import migration.audit.html  # noqa: F401
    from migration.audit.model import UnitStatus
    from migration.formats import core
    from migration.migrations.upgrade.driver import execute_upgrade
    from migration.migrations.upgrade.options import UpgradeOptions

    opts = UpgradeOptions(target=target, backup_root=backup_root)  # type: ignore[arg-type]
    phases: dict[str, float] = {}
    counted = {"digest_bytes": 0, "original_file_bytes": 0, "output_file_bytes": 0}
    # The CRCs of the units (each message read checked once, each written computed once, each
    # read back checked once): counted from the end of the prepare step, whose checks of the same
    # segments are a preflight, not the proof.
    restart = core.compiled.take_crc_counts if core.compiled is not None else None
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    with _phases(phases, after_prepare=restart), _digest_bytes(counted), _file_checksum_bytes(counted):
        report = execute_upgrade(log_dirs, options=opts, engine=engine, spark=spark)
    seconds = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    # The units ran in this thread on the inline engine (on Spark in other processes: no counts).
    crc = core.compiled.take_crc_counts() if core.compiled is not None and engine == "inline" else {}
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
            "proof": counted | crc if engine == "inline" else None,
            # This process's CPU time in the run, in user space and in the kernel (the kernel's
            # share is mostly the copies of reads and writes through the page cache); on Spark
            # the units' work is in the executors, not here.
            "cpu_user_s": round(r1.ru_utime - r0.ru_utime, 4), "cpu_sys_s": round(r1.ru_stime - r0.ru_stime, 4),
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
    from migration.migrations.upgrade.rewrite import RewriteSpec, cleaned_paths, digest_outputs, rewrite_segment

    spec = RewriteSpec(target_magic=int(target.lstrip("v")))
    records = size = 0
    t = time.perf_counter()
    for seg in segments:
        p = Path(seg)
        rr = rewrite_segment(p, spec)
        after = digest_outputs(p.parent, rr.outputs)
        if not after.matches(rr.digest_before):
            raise SystemExit(f"digest mismatch on {p}")
        records += rr.digest_before.records
        size += rr.bytes_before
        for c in cleaned_paths(p.parent, rr.outputs):
            c.unlink()
    return {"seconds": time.perf_counter() - t, "bytes": size, "records": records, "peak_rss_mb": _peak_rss_mb()}


# Direct I/O moves whole blocks between the disk and a buffer aligned to them; 4 KiB is a
# multiple of any logical block size Linux devices report.
_DIRECT_ALIGN = 4096


def _timed_pass(pieces: list[bytes], where: Path, open_file: Callable[[Path], int],
                write: Callable[[int, bytes], object], read: Callable[[Path], object]) -> tuple[float, float, float]:
    """Each piece written into a file of its own under ``where`` (``open_file``, then ``write``),
    fsynced, the directory fsynced, then each file read back (``read``): the seconds of the
    writes, of the fsyncs and of the read-back. The upgrade's writer thread does the writes; the
    fsyncs and the read-back keep its converting thread waiting."""
    from migration.formats.fileio import fsync_dir

    writes = fsyncs = 0.0
    for i, data in enumerate(pieces):
        t = time.perf_counter()
        fd = open_file(where / f"{i:06d}.log")
        try:
            write(fd, data)
            t1 = time.perf_counter()
            os.fsync(fd)
            fsyncs += time.perf_counter() - t1
            writes += t1 - t
        finally:
            os.close(fd)
    t = time.perf_counter()
    fsync_dir(where)
    fsyncs += time.perf_counter() - t
    t = time.perf_counter()
    for i in range(len(pieces)):
        read(where / f"{i:06d}.log")
    return writes, fsyncs, time.perf_counter() - t


def _buffered_pass(pieces: list[bytes], where: Path) -> tuple[float, float, float]:
    """The pieces written as the upgrade writes its outputs (``rewrite.WRITE_BUFFER_SIZE`` per
    write, each step's writeback started once it is written, steps growing from
    ``rewrite.WRITEBACK_FIRST_BYTES`` to ``WRITEBACK_BYTES``, fsync per file and of the
    directory), then read back through the page cache (``_timed_pass``)."""
    from migration.formats.fileio import start_writeback
    from migration.migrations.upgrade.rewrite import WRITE_BUFFER_SIZE, WRITEBACK_BYTES, WRITEBACK_FIRST_BYTES

    def write(fd: int, data: bytes) -> None:
        view = memoryview(data)
        written, sent, step = 0, 0, WRITEBACK_FIRST_BYTES
        while written < len(view):
            written += os.write(fd, view[written : written + WRITE_BUFFER_SIZE])
            if written - sent >= step and written < len(view):
                start_writeback(fd, sent, written - sent)
                sent, step = written, min(2 * step, WRITEBACK_BYTES)

    buf = bytearray(1 << 20)

    def read(path: Path) -> None:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass

    return _timed_pass(pieces, where, lambda path: os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
                       write, read)


def _direct_pass(pieces: list[bytes], where: Path) -> tuple[float, float, float] | None:
    """The pieces written with direct I/O (O_DIRECT: from an aligned buffer straight to the disk,
    no page cache), the last block padded and the file cut to its size, fsync per file and of
    the directory; then read back with direct I/O (``_timed_pass``). None where the file system
    refuses it."""
    from migration.migrations.upgrade.rewrite import WRITEBACK_BYTES

    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT
    try:
        os.close(os.open(where / "probe", flags, 0o644))
    except OSError:
        return None
    os.unlink(where / "probe")
    buf = mmap.mmap(-1, WRITEBACK_BYTES)  # page-aligned
    view = memoryview(buf)

    def write(fd: int, data: bytes) -> None:
        for at in range(0, len(data), WRITEBACK_BYTES):
            chunk = data[at : at + WRITEBACK_BYTES]
            view[: len(chunk)] = chunk
            padded = -(-len(chunk) // _DIRECT_ALIGN) * _DIRECT_ALIGN
            view[len(chunk) : padded] = bytes(padded - len(chunk))
            os.write(fd, view[:padded])
        os.ftruncate(fd, len(data))

    def read(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            while os.readv(fd, [view]) == len(view):
                pass
        finally:
            os.close(fd)

    try:
        return _timed_pass(pieces, where, lambda path: os.open(path, flags, 0o644), write, read)
    finally:
        view.release()
        buf.close()


def durable_write(nbytes: int, directory: str, sources: list[str], repeats: int = 3, *,
                  recycled: bool = False) -> dict[str, object]:
    """The durable-write floor of an upgrade that writes ``nbytes``: that many bytes taken from
    ``sources`` (in order, again from the first when they run out) written into files of the
    sources' sizes under ``directory``, made durable and read back, in the cheaper of two ways:
    as the upgrade writes (through the page cache, ``_buffered_pass``) and with direct I/O
    (``_direct_pass``). The reading of the sources happens before the timer, and the median of
    ``repeats`` passes of each way counts (fsync times on this machine's virtual disk vary
    severalfold from one pass to the next).

    The page cache's pages cost what the upgrade's cost, on a machine that charges for fresh
    pages, as this virtual machine does (docs/benchmarks.md, "Fresh pages"). By default every
    pass writes files of its own, all removed after the last pass: an upgrade keeps its inputs
    (they become the backup), so its outputs take pages that were free, as the whole cluster's
    upgrade does, tens of seconds after its copy was made. ``recycled``: each pass first removes
    the previous pass's files, as each of the benchmark's repeated upgrades of a small log dir
    runs right after the previous run's files were removed and the log dir copied again. Direct
    I/O takes no page-cache pages at all, but its read-back comes from the disk.

    Each way's median pass (by its total) is also given in parts, ``parts``: the seconds of its
    writes, of its fsyncs and of its read-back."""
    out = Path(directory)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    pieces: list[bytes] = []
    left = nbytes
    while left > 0 and sources:
        for src in sources:
            data = Path(src).read_bytes()[:left]
            pieces.append(data)
            left -= len(data)
            if left <= 0:
                break
    passes: dict[str, list[tuple[float, float, float]]] = {"buffered": [], "direct": []}
    for k in range(repeats):
        for way, run in (("buffered", _buffered_pass), ("direct", _direct_pass)):
            if recycled and k:
                shutil.rmtree(out / f"{way}-{k - 1}")
            where = out / f"{way}-{k}"
            where.mkdir()
            parts = run(pieces, where)
            if parts is not None:
                passes[way].append(parts)
            os.sync()
    shutil.rmtree(out)
    medians = {way: sorted(p, key=sum)[len(p) // 2] for way, p in passes.items() if p}
    way = min(medians, key=lambda w: sum(medians[w]))
    return {"seconds": sum(medians[way]), "way": way,
            "parts": {w: [round(x, 4) for x in m] for w, m in medians.items()}, "buffered_s": sum(medians["buffered"]),
            "direct_s": sum(medians["direct"]) if "direct" in medians else None,
            "passes": {w: [round(sum(x), 4) for x in p] for w, p in passes.items()},
            "bytes": sum(len(d) for d in pieces), "files": len(pieces), "recycled": recycled}


def proof(digest_bytes: int, original_file_bytes: int, output_file_bytes: int, crc32_bytes: int, crc32_calls: int,
          crc32c_bytes: int, crc32c_calls: int, repeats: int = 3) -> dict[str, object]:
    """The proof floor of an upgrade that did that much proof work (its ``proof`` counts): its
    record digests' hashing, BLAKE3 over ``digest_bytes`` fed 2 MiB at a time (the digests take
    a walker's run of canonical bytes per update); its whole-file checksums, BLAKE3 over
    ``original_file_bytes`` (the originals backed up) and over ``output_file_bytes`` (the
    outputs, which the upgrade's writer thread hashes: ``output_files_s`` apart) the same way;
    and its CRCs, CRC-32 over ``crc32_bytes`` and CRC-32C over
    ``crc32c_bytes`` in pieces of the run's mean size per call, with the compiled core's own
    functions (``_ccrc.crc_pieces``, a C loop). Data from ``os.urandom``, made before the
    timer; the median of ``repeats`` passes counts. Every upgrade that checks what it reads,
    writes Kafka's checksums, proves its outputs with these digests and can tell its outputs
    from the originals after a crash does at least this work."""
    import blake3

    from migration.formats import core

    if core.compiled is None:
        raise SystemExit("the proof floor needs the compiled record core")
    block = os.urandom(2 * 1024 * 1024)
    crc_data = os.urandom(8 * 1024 * 1024)

    def blake(nbytes: int) -> None:
        h = blake3.blake3()
        for _ in range(nbytes // len(block)):
            h.update(block)
        h.update(block[: nbytes % len(block)])
        h.digest()

    def crc(nbytes: int, calls: int, castagnoli: bool) -> None:
        piece = max(1, nbytes // calls) if calls else len(crc_data)
        left = nbytes
        while left > 0:
            chunk = crc_data if left >= len(crc_data) else crc_data[:left]
            core.compiled.crc_pieces(chunk, piece, castagnoli)
            left -= len(chunk)

    passes: list[tuple[float, float, float, float, float]] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        blake(digest_bytes)
        t1 = time.perf_counter()
        blake(original_file_bytes)
        t2 = time.perf_counter()
        blake(output_file_bytes)
        t3 = time.perf_counter()
        crc(crc32_bytes, crc32_calls, False)
        t4 = time.perf_counter()
        crc(crc32c_bytes, crc32c_calls, True)
        passes.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, time.perf_counter() - t4))
    passes.sort(key=sum)
    digest_s, originals_s, outputs_s, crc32_s, crc32c_s = passes[len(passes) // 2]
    return {"seconds": digest_s + originals_s + outputs_s + crc32_s + crc32c_s, "digest_s": round(digest_s, 4),
            "files_s": round(originals_s + outputs_s, 4), "output_files_s": round(outputs_s, 4),
            "crc32_s": round(crc32_s, 4), "crc32c_s": round(crc32c_s, 4),
            "passes": [round(sum(p), 4) for p in passes]}


if __name__ == "__main__":
    cmd, target, *rest = sys.argv[1:]
    if cmd == "proof":
        print(json.dumps(proof(int(target), *map(int, rest))))
        sys.exit(0)
    if cmd == "durable-write":
        recycled = rest[0] == "--recycled"
        rest = rest[1:] if recycled else rest
        print(json.dumps(durable_write(int(target), rest[0], rest[1:], recycled=recycled)))
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
