"""``python -m bench.run [--scale N] [--quick] [--only NAME] [--allow-python-core]``: every
benchmark with its baseline measured side by side in the same run; a table of MB/s, records/s,
ratios and the targets of issue #14 (docs/benchmarks.md, "Targets (issue #14)"), each PASS or
MISS, a MISS with the measured ceiling that explains it where one exists ("MISS (ceiling
N.NNx)": the best any implementation could reach against that baseline); then
"targets: N PASS, M MISS" and ``out/bench/results.json``; the run's target rows are appended
to ``bench/history.jsonl`` (bench.history; ``--no-history`` skips it). Data is generated under
``out/bench/`` (reused across runs when complete: generating the multi-GB cluster costs more
than benchmarking it).

Exit status: 2 at once, before any work, when the compiled record core is not active (it says
why; ``--allow-python-core`` runs anyway, the run marked as such in the table and
results.json); 1 when a benchmark crashed (the others still run); else 0, MISS or not: a MISS
is a measurement, reported, not an error.

Benchmarks (names for ``--only``; all but ``spark`` by default with ``--quick``):
  validate  deep validation of the sample cluster (``validate_paths``) vs its decompression
            floor (bench.codec_floor decompress: every compressed v0/v1 wrapper and v2 batch
            decompressed once with the validator's codec functions)     target >= 0.8x floor
            ``cat`` of the segments: report only
  upgrade   full inline upgrade (prepare, rewrite, digests, indexes, backups, fsync) of the
            sample cluster --to v1 and v2 vs the cluster's codec floor (bench.codec_floor:
            decompress + recompress of every wrapper the target converts)  target >= 0.6x floor
            ceiling: floor / the longer of the upgrade's two threads. The writer thread copies
            the outputs into the page cache and checksums them (the writes of the durable-write
            floor and the outputs' part of the proof floor); the converting thread does the rest:
            floor + read-back decompression + decompression of the wrappers the target keeps,
            whose records the report counts + the fsyncs and read-back of the durable-write
            floor + the rest of the proof floor (the run's record digests, the originals'
            checksums and CRCs, hashed alone: bench.workers proof). The durable-write floor
            writes through the page cache into fresh pages and with direct I/O; the way that
            makes the longer thread shorter counts. The one-core ceiling (all of it summed, the
            durable write's cheaper way) beside it
            ``cp -a`` of the cluster: report only
  kp-mix    the mixed legacy subset (a batch-aligned prefix of the first segment of every legacy
            topic, in a log dir of its own): full inline upgrade vs the kafka-python converter
            (bench/kafka_python_converter.py) on the same files, each side the median of 3 runs
                                                                   target >= 4x (v1), >= 2.5x (v2)
            ceiling: kafka-python seconds / (codec floor + read-back + kept wrappers + durable
            write + proof) seconds of the subset, two threads as for ``upgrade`` (the durable
            write's pages recycled, as each run's are from the run before); the unit's core
            (``rewrite_segment`` + read-back digest) and the floor: report only
  kp-plain  uncompressed legacy segments (bench.core's v0-plain, and v1-plain for --to v2) in a
            log dir: full inline upgrade vs the kafka-python converter, each side the median of 3
            runs              target >= 10x (no codec: the durable write, its pages recycled as
            for ``kp-mix``, and the proof, two threads as for ``upgrade``, are the ceiling)
  spark     the upgrade --to v2 of the sample cluster with the Spark engine, local[2] vs
            local[1], each on a fresh copy, Spark's start included      target >= 1.7x local[1]
            ceiling: Amdahl's bound from local[1]'s serial part (everything outside the units
            phase), capped by its largest partition (one partition's segments run in order)
  small-partitions
            the upgrade --to v2 of a log dir of 500 small legacy partitions (3 segments of ~60 KB,
            bench.small_partitions), inline vs Spark local[2] on a session already started (its
            start shown beside), each on a fresh copy                  target <= 1.3x inline
            per-segment cost of an upgrade, 2,000 such partitions inline, split into the fixed
            steps (journal, backup, replace protocol) and the rewrite, fsyncs counted: report only
            (--quick: 100 and 200 partitions, said in the rows)
  window    the stop window of an upgrade after a prestage (bench.window), on copies of one log dir:
            the sample cluster's 8 legacy partitions, each rolled into 4 closed segments of 16 MiB
            and an active one of ~1 MiB (--quick: 256 KiB, ~64 KiB): the full offline upgrade
            --to v2 (baseline);
            the prestage (no --io-rate)                        target >= 0.9x offline MB/s
            the window after it (upgrade --stage)             target <= 0.05x offline
            the window with 2x the bytes per closed segment  target <= 1.2x the window
            a prestage with --io-rate a third of the unthrottled bytes/s (read + written) on a
            third of the closed segments (--budget)             target within 10% of the rate
            (--quick: 3 rounds, medians; the --io-rate prestage on all the closed segments)
  rss       peak RSS of the worker rewriting one big segment (1 GiB; --quick: 64 MiB)  < 300 MB
  sessions  planning a run with nothing dirty on 10,000 partitions (--quick: 1,000, target
            scaled to 1 s) vs os.scandir listing                        target < 10 s
  core      the compiled record core vs the pure-Python one, side by side (bench.core): deep
            validation, digest and rewrite of uncompressed v2, uncompressed v0 and a legacy mix;
            deep validation of uncompressed v2: target >= 25x the Python core and >= 1000 MB/s
            (one core), next to reading the same file in the reader's chunks (ceiling) and ``cat``
  cleaner   the upgrade --to v2 of legacy partitions with unique keys (48 MiB; --quick 12 MiB) vs
            a real Kafka 4.4.0 log cleaner converting the same segments (bench/cleaner.py): report only
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import cleaner as cleaner_bench

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "out" / "bench"
MB = 1e6
Row = dict[str, Any]
NAMES = ["validate", "upgrade", "kp-mix", "kp-plain", "spark", "small-partitions", "window", "rss", "sessions", "core",
         "cleaner"]
# Targets of issue #14 (docs/benchmarks.md, "Targets (issue #14)").
VALIDATE_FLOOR = 0.8  # deep validation, x its decompression floor
UPGRADE_FLOOR = 0.6  # full upgrade of the sample mix, x its codec floor
KP_MIX = {"v1": 4.0, "v2": 2.5}  # full upgrade of the mixed legacy subset, x kafka-python
KP_PLAIN = 10.0  # full upgrade of uncompressed legacy segments, x kafka-python
# The kafka-python rows time a third of a second to a few seconds: each side is the median of
# this many runs (each upgrade on a fresh copy of its log dir), so one slow run moves neither.
KP_REPEATS = 3
SPARK_SPEEDUP = 1.7  # local[2] over local[1]
V2_VS_PYTHON = 25.0  # deep validation of uncompressed v2, compiled core x Python core
V2_MB_S = 1000.0  # the same, MB/s on one core
RSS_MB = 300.0
PLAN_S_PER_10K = 10.0


def _env() -> dict[str, str]:
    # Run directories, reports and backups of the benchmarked jobs stay under out/bench.
    return os.environ | {
        "KMIGRATE_PROJECT_ROOT": str(ROOT),
        "KMIGRATE_OUT": str(OUT / "kmigrate"),
        "PYTHONPATH": str(ROOT),
    }


def _child(args: list[str]) -> dict[str, Any]:
    res = subprocess.run([sys.executable, *args], env=_env(), cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{args[:3]} failed: {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _median_child(args: list[str], n: int, before: Callable[[], object] | None = None) -> dict[str, Any]:
    """The child run of median ``seconds`` among ``n`` (its whole document, so that its other
    figures belong to it), with every run's seconds in ``runs_s``. ``before`` runs before each
    (a fresh copy of the log dir for an upgrade), then ``sync``: no run starts with the dirty
    pages of another."""
    done = []
    for _ in range(n):
        if before is not None:
            before()
            subprocess.run(["sync"], check=True)
        done.append(_child(args))
    done.sort(key=lambda r: r["seconds"])
    return done[len(done) // 2] | {"runs_s": [round(r["seconds"], 4) for r in done]}


def _fresh_log_dir(log_dir: Path, backups: Path, partitions: dict[str, list[tuple[Path, int | None]]],
                   files_from: dict[str, Path] | None = None) -> int:
    from bench.logdir import make_log_dir

    shutil.rmtree(backups, ignore_errors=True)
    return make_log_dir(log_dir, partitions, partition_files_from=files_from)


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _logs(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("broker-*/kafka-logs/*/*.log"))


def sample_cluster(scale: int) -> Path:
    """The pristine cluster for ``scale`` (built once; a marker says it is complete)."""
    from migration.demo.sample_cluster import build_sample_cluster

    path = OUT / f"cluster-s{scale}"
    if (path / ".complete").exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    t = time.perf_counter()
    build_sample_cluster(path, scale=scale)
    (path / ".complete").write_text(f"built in {time.perf_counter() - t:.1f}s\n")
    print(
        f"  built {path} ({sum(p.stat().st_size for p in _logs(path)) / MB:.0f} MB of segments) "
        f"in {time.perf_counter() - t:.0f}s",
        flush=True,
    )
    return path


def _row(name: str, seconds: float, nbytes: int, records: int | None = None, **extra: Any) -> Row:
    return {
        "name": name,
        "seconds": round(seconds, 4),
        "bytes": nbytes,
        "mb_s": round(nbytes / MB / seconds, 2),
        "records": records,
        "records_s": round(records / seconds) if records else None,
    } | extra


def _info(row: Row, ratio: str | None = None) -> Row:
    """A report-only row: a baseline or a figure that explains a target."""
    return row | {"target": "report only", "status": "INFO"} | ({"ratio": ratio} if ratio is not None else {})


def _target(row: Row, value: float, threshold: float, *, key: str, target: str, ratio: str,
            ceiling: float | None = None, unit: str = "x", below: bool = False) -> Row:
    """A target row: PASS when ``value`` reaches ``threshold`` (is below it with ``below``), else
    MISS, with ``ceiling`` (the best value any implementation could reach, measured in this run)
    when the ceiling itself is short of the threshold: then the MISS is explained by it. ``key``
    is the target's stable name (one of bench.history.KEYS), kept in results.json and the
    history."""
    from bench.history import KEYS

    if key not in KEYS:
        raise ValueError(f"unknown target key {key!r}: one of {', '.join(KEYS)}")
    ok = value < threshold if below else value >= threshold
    status = "PASS" if ok else "MISS"
    if not ok and ceiling is not None and ceiling < threshold:
        # three significant digits: a ceiling just below the threshold must not print as equal to it
        status += f" (ceiling {ceiling:.0f} {unit})" if unit != "x" else f" (ceiling {ceiling:.3g}x)"
    return row | {"key": key, "ratio": ratio, "target": target, "status": status, "value": round(value, 4),
                  "threshold": threshold, "ceiling": None if ceiling is None else round(ceiling, 4)}


def _durable_write(up: dict[str, Any], sources: list[Path], name: str, *, recycled: bool = False) -> tuple[Row, float]:
    """The durable-write floor of an upgrade run ``up``: its output bytes written, made durable
    and read back alone (bench.workers durable-write), through the page cache or with direct
    I/O, whichever is cheaper here, as a report-only row and its seconds; the page cache's pages
    fresh, or ``recycled`` from the pass before, as the upgrade's were (bench.workers
    durable_write). Any upgrade must persist its outputs (crash safety) and read them back for
    their digests, so this is part of every upgrade target's ceiling."""
    written = int(up.get("bytes_written") or up["bytes_rewritten"])
    subprocess.run(["sync"], check=True)  # no one else's dirty pages in the queue
    dw = _child(["-m", "bench.workers", "durable-write", str(written), *(["--recycled"] if recycled else []),
                 str(OUT / f"durable-{name}"), *map(str, sources)])
    direct = f"{dw['direct_s']:.2f}s" if dw["direct_s"] is not None else "refused by the file system"
    pages = "recycled" if recycled else "fresh"
    row = _info(_row(f"durable write + read-back of the upgrade's {written / MB:.0f} MB of output (page cache, "
                     f"{pages} pages: {dw['buffered_s']:.2f}s; direct I/O: {direct}; the cheaper counts on one core; "
                     "writes / fsyncs / read-back: " + ", ".join(
                         f"{'page cache' if w == 'buffered' else 'direct I/O'} " + " / ".join(f"{x:.2f}" for x in p)
                         for w, p in dw["parts"].items()) + " s)",
                     dw["seconds"], dw["bytes"], files=dw["files"], way=dw["way"], passes=dw["passes"],
                     parts=dw["parts"]),
                "baseline, part of the ceiling")
    return row, float(dw["seconds"])


def _proof_floor(up: dict[str, Any], nbytes: int, repeats: int) -> tuple[Row, float]:
    """The proof floor of an upgrade run ``up`` (bench.workers proof, from the run's ``proof``
    counts): its two record digests' BLAKE3 hashing, its whole-file checksums (BLAKE3) and its
    CRC-32/CRC-32C work, timed alone, as a report-only row and its seconds. An upgrade checks
    every message and batch it reads, writes Kafka's checksums, proves its outputs by the record
    digests before and after, and checksums the originals it backs up and the outputs it writes,
    by which a resume or rollback after a crash tells them apart (docs/benchmarks.md,
    "Targets"), so this is part of every upgrade target's ceiling. The outputs' checksums
    (``output_files_s``) are the writer thread's part of it (``_ceilings``)."""
    c = up["proof"]
    pf = _child(["-m", "bench.workers", "proof", str(c["digest_bytes"]), str(c["original_file_bytes"]),
                 str(c["output_file_bytes"]), str(c["crc32_bytes"]), str(c["crc32_calls"]), str(c["crc32c_bytes"]),
                 str(c["crc32c_calls"]), str(max(repeats, 3))])
    file_bytes = c["original_file_bytes"] + c["output_file_bytes"]
    hashed = c["digest_bytes"] + file_bytes + c["crc32_bytes"] + c["crc32c_bytes"]
    row = _info(_row(f"proof floor: record digests over {c['digest_bytes'] / MB:.0f} MB and file checksums over "
                     f"{file_bytes / MB:.0f} MB (BLAKE3), CRC-32 over {c['crc32_bytes'] / MB:.0f} MB, "
                     f"CRC-32C over {c['crc32c_bytes'] / MB:.0f} MB",
                     max(pf["seconds"], 1e-9), nbytes, digest_s=pf["digest_s"], files_s=pf["files_s"],
                     output_files_s=pf["output_files_s"], crc32_s=pf["crc32_s"], crc32c_s=pf["crc32c_s"],
                     hashed_bytes=hashed),
                "baseline, part of the ceiling")
    return row, float(pf["seconds"])


def _ceilings(baseline_s: float, serial: float, dw_row: Row, dw_s: float, proof_row: Row,
              proof_s: float) -> tuple[float, float, float, float]:
    """An upgrade target's ceilings, ``serial`` seconds of its work (codecs, read-back, kept
    wrappers) besides the durable write and the proof floor: (ceiling, one-core ceiling,
    converting thread's seconds, writer thread's seconds).

    The ceiling is that of an upgrade divided as this one is between two threads
    (fileio.BackgroundWriter), the longer of which it takes at least on two cores. The writer
    thread copies each output into the page cache and checksums it; the converting thread does
    ``serial``, waits for the fsyncs (the writer's close fsyncs once the thread has written
    everything), reads the outputs back and does the rest of the proof work. Of the two ways to
    write (page cache, direct I/O), the one that makes the longer thread shorter counts. The
    one-core ceiling is all of it summed, the durable write's cheaper way (``dw_s``)."""
    outputs = proof_row["output_files_s"]
    rest = proof_row["seconds"] - outputs
    ways = [(serial + fsync_s + read_s + rest, write_s + outputs)
            for write_s, fsync_s, read_s in dw_row["parts"].values()]
    converting, writer = min(ways, key=max)
    return baseline_s / max(converting, writer), baseline_s / (serial + dw_s + proof_s), converting, writer


def _kept_floor(target: str, segments: list[str], repeats: int, nbytes: int, where: str) -> tuple[Row, float]:
    """The decompression floor of the compressed legacy wrappers ``target`` keeps as they are
    (bench.codec_floor ``kept``), its row and seconds: the upgrade reads them to count their
    records for the report (a wrapper's count is inside its compressed value) or, in a
    rewritten segment, to digest them; none for v2 (a v2 batch's header gives its count)."""
    kept = _child(["-m", "bench.codec_floor", "--repeat", str(repeats), "kept", target, *segments])
    seconds = float(kept["seconds"])
    row = _info(_row(f"decompression floor of the {kept['wrappers']} compressed wrappers --to {target} keeps "
                     f"({where})", max(seconds, 1e-9), nbytes, wrappers=kept["wrappers"], by_codec=kept["by_codec"]),
                "baseline, part of the ceiling")
    if not kept["wrappers"]:
        row["mb_s"] = None  # nothing decompressed: no rate
    return row, seconds


def _readback_s(floor: dict[str, Any]) -> float:
    """The read-back's codec work: the upgrade reads every output back to digest it, which
    decompresses each converted wrapper once more; the outputs have the wrappers' codecs and
    about their sizes, so the floor's own decompress share measures it."""
    return float(sum(d["decompress_s"] for d in floor["by_codec_detail"].values()))


def bench_validate(cluster: Path, repeats: int) -> list[Row]:
    from migration.logdir.validation import validate_paths

    logs = _logs(cluster)
    size = sum(p.stat().st_size for p in logs)
    subprocess.run(["cat", *map(str, logs)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    cat_s = _timed(lambda: subprocess.run(["cat", *map(str, logs)], stdout=subprocess.DEVNULL, check=True))
    floor = _child(["-m", "bench.codec_floor", "--repeat", str(repeats), "decompress", *map(str, logs)])
    dirs = [str(d) for d in sorted(cluster.glob("broker-*/kafka-logs"))]
    times: list[float] = []
    res: Any = None
    for _ in range(repeats):
        t = time.perf_counter()
        res = validate_paths(dirs, deep=True)
        times.append(time.perf_counter() - t)
    val_s = statistics.median(times)
    errors = [str(f) for f in res.findings if f.severity == "error"]
    if errors:
        raise RuntimeError(f"validation found errors in the sample cluster: {errors[:3]}")
    cat = _info(_row("cat > /dev/null of the segments (baseline)", cat_s, size))
    floor_row = _info(
        _row(f"decompression floor: {floor['wrappers']} wrappers + {floor['batches']} v2 batches, decompress only",
             floor["seconds"], size, payloads=floor["payloads"], by_codec=floor["by_codec"],
             compressed_bytes=floor["compressed_bytes"], uncompressed_bytes=floor["uncompressed_bytes"]),
        f"baseline of deep validation; {cat_s / max(floor['seconds'], 1e-9):.2f}x cat")
    val = _row(f"deep validation (validate_paths), median of {repeats}", val_s, size, res.records_checked,
               bytes_checked=res.bytes_checked)
    r = floor["seconds"] / val_s  # = validation MB/s / floor MB/s, over the same bytes
    val = _target(val, r, VALIDATE_FLOOR, key="validate", target=f">= {VALIDATE_FLOOR}x decompression floor",
                  ratio=f"{r:.2f}x floor, {val['mb_s'] / cat['mb_s']:.4f}x cat")
    return [cat, floor_row, val]


def _check_upgrade(name: str, up: dict[str, Any], units: int | None = None) -> None:
    """Raise unless the upgrade worker's run ``up`` succeeded: no unit failed, no digest
    mismatch, exit code 0 and, when ``units`` is given, that many units done."""
    if (up["units_failed"] or up["digest_mismatches"] or up["exit_code"] != 0
            or (units is not None and up["units_ok"] != units)):
        raise RuntimeError(f"{name} did not succeed: {up}")


def _upgrade_row(name: str, up: dict[str, Any], nbytes: int) -> Row:
    _check_upgrade(name, up)
    ph = up["phases"]
    print(f"  {name}: {up['seconds']:.3f}s" + (f" (Spark start {up['startup']:.2f}s)" if "startup" in up else "")
          + f"; prepare {ph.get('prepare', 0):.3f}s, units {ph.get('units', 0):.3f}s, "
          f"finalize {ph.get('finalize', 0):.3f}s; CPU user {up['cpu_user_s']:.3f}s, kernel {up['cpu_sys_s']:.3f}s",
          flush=True)
    return _row(name, up["seconds"], nbytes, up["records_rewritten"], bytes_rewritten=up["bytes_rewritten"],
                **({"runs_s": up["runs_s"]} if "runs_s" in up else {}),
                cpu_user_s=up["cpu_user_s"], cpu_sys_s=up["cpu_sys_s"],
                peak_rss_mb=round(up["peak_rss_mb"], 1), phases=up["phases"])


def bench_upgrade(cluster: Path, repeats: int) -> list[Row]:
    rows: list[Row] = []
    cluster_logs = sum(p.stat().st_size for p in _logs(cluster))
    for target in ("v1", "v2"):
        work = OUT / f"work-{target}"
        backups = OUT / f"backups-{target}"
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(backups, ignore_errors=True)
        copied = sum(p.stat().st_size for p in cluster.rglob("*") if p.is_file())
        cp_s = _timed(lambda w=work: subprocess.run(["cp", "-a", str(cluster), str(w)], check=True))
        subprocess.run(["sync"], check=True)  # the upgrade fsyncs: start it without cp's dirty pages
        cp = _info(_row(f"cp -a cluster (baseline {target})", cp_s, copied))
        # The codec floor of the whole cluster: decompress + recompress of every wrapper the
        # target converts, timed alone; the upgrade cannot run faster than its codec work.
        cfloor = _child(["-m", "bench.codec_floor", "--repeat", str(repeats), target, *map(str, _logs(cluster))])
        print(f"  codec floor --to {target}: {cfloor['seconds']:.3f}s over {cfloor['wrappers']} wrappers, "
              f"by codec {cfloor['by_codec']}", flush=True)
        floor_s = max(cfloor["seconds"], 1e-9)
        cfloor_row = _info(
            _row(f"codec floor of the cluster --to {target}: {cfloor['wrappers']} wrappers, decompress + recompress",
                 floor_s, cluster_logs, wrappers=cfloor["wrappers"], by_codec=cfloor["by_codec"]),
            f"baseline of the upgrade; {cluster_logs / MB / floor_s / cp['mb_s']:.2f}x cp")
        dirs = [str(d) for d in sorted(work.glob("broker-*/kafka-logs"))]
        up = _child(["-m", "bench.workers", "upgrade", target, str(backups), *dirs])
        # MB/s over every segment (all are read; the legacy ones rewritten); records/s over the
        # rewritten records.
        row = _upgrade_row(f"upgrade --to {target} (inline engine, whole cluster)", up, cluster_logs)
        r = floor_s / up["seconds"]
        # Besides the codec work, the upgrade must (a) read every output back and digest it, which
        # decompresses every converted wrapper once more (the floor's own decompress share, as the
        # outputs have the same codecs and about the same sizes), and (b) write its outputs
        # durably (fsync per file): that many bytes written and fsynced alone, measured here.
        # codec floor / (codec floor + read-back decompression + durable write) is the best ratio
        # any upgrade that verifies and persists its outputs can reach on this machine.
        # And (c) read the compressed wrappers it keeps as they are, to count their records for
        # the report: their decompression floor, measured here (none for v2).
        readback_s = _readback_s(cfloor)
        kept_row, kept_s = _kept_floor(target, [str(p) for p in _logs(cluster)], repeats, cluster_logs,
                                       "their records counted")
        dw_row, dw_s = _durable_write(up, _logs(cluster), f"cluster-{target}")
        # And (d) check what it reads, write Kafka's checksums and prove its outputs: the record
        # digests and CRCs it computed in this run, hashed alone.
        proof_row, proof_s = _proof_floor(up, cluster_logs, repeats)
        # The ceiling of an upgrade that writes and checksums its outputs on a thread of its own,
        # as this one does (the longer of its two threads), and that of one doing all on one core.
        ceiling, one_core, converting, writer = _ceilings(floor_s, floor_s + readback_s + kept_s, dw_row, dw_s,
                                                          proof_row, proof_s)
        row = _target(row, r, UPGRADE_FLOOR, key=f"upgrade-{target}", target=f">= {UPGRADE_FLOOR}x codec floor",
                      ceiling=ceiling,
                      ratio=f"{r:.2f}x floor (ceiling {ceiling:.3g}x: converting thread {converting:.2f}s = floor + "
                            f"read-back {readback_s:.2f}s + kept wrappers {kept_s:.2f}s + its part of durable write "
                            f"and proof, writer thread {writer:.2f}s; on one core {one_core:.3g}x: + durable write "
                            f"{dw_s:.2f}s + proof {proof_s:.2f}s), {row['mb_s'] / cp['mb_s']:.4f}x cp")
        row["ceiling_one_core"] = round(one_core, 4)
        rows += [cp, cfloor_row, kept_row, dw_row, proof_row, row]
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(backups, ignore_errors=True)
    return rows


def _kp_subset(cluster: Path, limit: int) -> list[tuple[Path, int]]:
    """The first segment of every legacy topic, each cut to a batch-aligned prefix of an equal
    share of ``limit`` bytes (a prefix of a segment is a valid segment): every legacy format
    and codec of the cluster is in the subset, whatever the segment size."""
    from migration.formats.file_records import FileRecords

    first: dict[str, Path] = {}
    for p in _logs(cluster):
        topic = p.parent.name.rsplit("-", 1)[0]
        if not topic.startswith(("events-v2", "payments-idempotent")):
            first.setdefault(topic, p)
    share = limit // max(len(first), 1)
    out: list[tuple[Path, int]] = []
    for _, p in sorted(first.items()):
        end = 0
        for b in FileRecords(p).batches():
            if end and b.position + b.size_in_bytes > share:
                break
            end = b.position + b.size_in_bytes
        out.append((p, end))
    return out


def bench_kp_mix(cluster: Path, kp_bytes: int, repeats: int) -> list[Row]:
    """Mixed legacy subset: the full inline upgrade against the kafka-python converter."""

    rows: list[Row] = []
    subset = _kp_subset(cluster, kp_bytes)
    for target in ("v1", "v2"):
        base = OUT / f"kp-mix-{target}"
        log_dir = base / "kafka-logs"
        backups = base / "backups"
        shutil.rmtree(base, ignore_errors=True)
        # One partition dir per source partition: the rewrite reads the base offset from the name.
        fresh = functools.partial(_fresh_log_dir, log_dir, backups, {p.parent.name: [(p, n)] for p, n in subset},
                                  {p.parent.name: p.parent for p, _ in subset})
        nbytes = fresh()
        copies = [str(log_dir / p.parent.name / p.name) for p, _ in subset]
        # Baseline, then the unit's core, then the floor, on the same copies (none changes them),
        # and the upgrade last (it rewrites them in place: a fresh copy for each run).
        kp = _median_child(["-m", "bench.kafka_python_converter", target, str(base / "kp-out"), *copies], KP_REPEATS)
        core = _child(["-m", "bench.workers", "rewrite", target, *copies])
        floor = _child(["-m", "bench.codec_floor", "--repeat", str(repeats), target, *copies])
        up = _median_child(["-m", "bench.workers", "upgrade", target, str(backups), str(log_dir)], KP_REPEATS, fresh)
        print(f"  codec floor --to {target} (subset): {floor['seconds']:.3f}s over {floor['wrappers']} wrappers, "
              f"by codec {floor['by_codec']}", flush=True)
        kp_row = _info(_row(f"kafka-python converter --to {target} (baseline, mixed legacy subset), median of "
                            f"{KP_REPEATS}", kp["seconds"], kp["bytes"], kp["records"], runs_s=kp["runs_s"]))
        core_row = _row(f"rewrite_segment + read-back digest --to {target} (same subset)",
                        core["seconds"], core["bytes"], core["records"])
        core_row = _info(core_row, f"{kp['seconds'] / core['seconds']:.2f}x kafka-python")
        # No converter that recompresses can beat kafka-python by more than kp / floor here; an
        # upgrade, which also reads its outputs back and writes them durably, by more than
        # kp / (floor + read-back + durable write).
        ceiling = kp["seconds"] / floor["seconds"] if floor["wrappers"] and floor["seconds"] > 0 else None
        floor_row = _row(f"codec floor --to {target}: {floor['wrappers']} wrappers, decompress + recompress (subset)",
                         max(floor["seconds"], 1e-9), floor["bytes"], wrappers=floor["wrappers"],
                         by_codec=floor["by_codec"], by_codec_detail=floor["by_codec_detail"],
                         kp_ceiling=None if ceiling is None else round(ceiling, 2),
                         share_of_core=round(floor["seconds"] / core["seconds"], 3))
        floor_row = _info(floor_row, f"ceiling {ceiling:.2f}x kafka-python" if ceiling
                          else "no wrapper to recompress: no ceiling")
        if ceiling is None:
            floor_row["mb_s"] = None
        row = _upgrade_row(f"upgrade --to {target} (inline engine, same subset in a log dir), median of {KP_REPEATS}",
                           up, nbytes)
        r = kp["seconds"] / up["seconds"]
        dw_row, dw_s = _durable_write(up, [Path(c) for c in copies], f"kp-mix-{target}", recycled=True)
        kept_row, kept_s = _kept_floor(target, copies, repeats, floor["bytes"], "subset")
        proof_row, proof_s = _proof_floor(up, nbytes, repeats)
        up_ceiling, one_core, converting, writer = _ceilings(
            kp["seconds"], floor["seconds"] + _readback_s(floor) + kept_s, dw_row, dw_s, proof_row, proof_s)
        row = _target(row, r, KP_MIX[target], key=f"kp-mix-{target}", target=f">= {KP_MIX[target]}x kafka-python",
                      ceiling=up_ceiling,
                      ratio=f"{r:.2f}x kafka-python (ceiling {up_ceiling:.3g}x with read-back, kept wrappers, "
                            f"durable write and proof: converting thread {converting:.3f}s, writer thread "
                            f"{writer:.3f}s; on one core {one_core:.3g}x)")
        row["ceiling_one_core"] = round(one_core, 4)
        rows += [kp_row, core_row, floor_row, kept_row, dw_row, proof_row, row]
        shutil.rmtree(base, ignore_errors=True)
    return rows


def bench_kp_plain(size: int) -> list[Row]:
    """Uncompressed legacy segments: the full inline upgrade against the kafka-python converter."""
    from bench import core as core_bench

    segs = core_bench.segments(size, ("v0-plain", "v1-plain"))
    rows: list[Row] = []
    # --to v1 converts v0 only (v1 data is left as it is): v0 alone; --to v2 converts both.
    for target, kinds in (("v1", ("v0-plain",)), ("v2", ("v0-plain", "v1-plain"))):
        base = OUT / f"kp-plain-{target}"
        log_dir = base / "kafka-logs"
        shutil.rmtree(base, ignore_errors=True)
        fresh = functools.partial(_fresh_log_dir, log_dir, base / "backups",
                                  {f"plain-{k.split('-')[0]}-0": [(segs[k], None)] for k in kinds})
        nbytes = fresh()
        copies = [str(p) for p in sorted(log_dir.glob("*/*.log"))]
        label = " + ".join(f"{size >> 20} MiB {k.split('-')[0]}" for k in kinds)
        kp = _median_child(["-m", "bench.kafka_python_converter", target, str(base / "kp-out"), *copies], KP_REPEATS)
        up = _median_child(["-m", "bench.workers", "upgrade", target, str(base / "backups"), str(log_dir)],
                           KP_REPEATS, fresh)
        kp_row = _info(_row(f"kafka-python converter --to {target} (baseline, uncompressed {label}), median of "
                            f"{KP_REPEATS}", kp["seconds"], kp["bytes"], kp["records"], runs_s=kp["runs_s"]))
        row = _upgrade_row(f"upgrade --to {target} (inline engine, same segments in a log dir), median of "
                           f"{KP_REPEATS}", up, nbytes)
        r = kp["seconds"] / up["seconds"]
        # Uncompressed: no codec work; what bounds any upgrade is writing its outputs durably
        # and its proof work (digests and CRCs).
        dw_row, dw_s = _durable_write(up, [Path(c) for c in copies], f"kp-plain-{target}", recycled=True)
        proof_row, proof_s = _proof_floor(up, nbytes, 3)
        ceiling, one_core, converting, writer = _ceilings(kp["seconds"], 0.0, dw_row, dw_s, proof_row, proof_s)
        row = _target(row, r, KP_PLAIN, key=f"kp-plain-{target}", target=f">= {KP_PLAIN:g}x kafka-python",
                      ceiling=ceiling,
                      ratio=f"{r:.2f}x kafka-python (ceiling {ceiling:.3g}x: converting thread {converting:.2f}s, "
                            f"writer thread {writer:.2f}s; on one core {one_core:.3g}x: durable write {dw_s:.2f}s + "
                            f"proof {proof_s:.2f}s)")
        row["ceiling_one_core"] = round(one_core, 4)
        rows += [kp_row, dw_row, proof_row, row]
        shutil.rmtree(base, ignore_errors=True)
    return rows


def bench_spark(cluster: Path) -> list[Row]:
    """The upgrade --to v2 on Spark, local[1] then local[2], each on a fresh copy."""
    cluster_logs = sum(p.stat().st_size for p in _logs(cluster))
    runs: dict[int, dict[str, Any]] = {}
    for cores in (1, 2):
        work = OUT / f"spark-{cores}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        subprocess.run(["cp", "-a", str(cluster), str(work / "cluster")], check=True)
        subprocess.run(["sync"], check=True)
        dirs = [str(d) for d in sorted((work / "cluster").glob("broker-*/kafka-logs"))]
        runs[cores] = _child(["-m", "bench.workers", "spark-upgrade", "v2", f"local[{cores}]",
                              str(work / "backups"), *dirs])
        print(f"  spark local[{cores}]: {runs[cores]['seconds']:.1f}s (start {runs[cores]['startup']:.1f}s, "
              f"phases {runs[cores]['phases']})", flush=True)
        shutil.rmtree(work, ignore_errors=True)
    one, two = runs[1], runs[2]

    def row(cores: int) -> Row:
        up = runs[cores]
        r = _upgrade_row(f"upgrade --to v2, Spark local[{cores}] (Spark start included)", up, cluster_logs)
        return r | {"startup_s": up["startup"], "units_s": up["phases"].get("units"),
                    "unit_seconds": up["unit_seconds"], "largest_partition_s": up["largest_partition_seconds"]}

    base = _info(row(1), f"baseline; start {one['startup']:.1f}s, units phase {one['phases'].get('units', 0):.1f}s")
    # Amdahl: everything outside the units phase (Spark's start, prepare, locks, finalize) runs
    # once whatever the cores; the units phase halves at best, and no faster than its largest
    # partition (a partition's segments run one after the other in one task).
    total = one["seconds"]
    par = one["phases"].get("units", 0.0)
    serial = total - par
    amdahl = total / (serial + par / 2)
    bound = total / (serial + max(par / 2, one["largest_partition_seconds"]))
    r = total / two["seconds"]
    units_r = par / two["phases"]["units"] if two["phases"].get("units") else 0.0
    # The units' own seconds, summed: equal in both runs when two cores really run two units at
    # once; more under local[2] when they share a core (a loaded machine) or memory bandwidth.
    stretch = two["unit_seconds"] / one["unit_seconds"] if one["unit_seconds"] else 0.0
    tgt = _target(row(2), r, SPARK_SPEEDUP, key="spark", target=f">= {SPARK_SPEEDUP}x local[1]", ceiling=bound,
                  ratio=f"{r:.2f}x local[1] (units phase {units_r:.2f}x, unit work x{stretch:.2f}); "
                        f"Amdahl {amdahl:.2f}x")
    return [base, tgt | {"amdahl_ceiling": round(amdahl, 3), "serial_s_local1": round(serial, 3),
                         "unit_work_stretch": round(stretch, 3)}]


def bench_rss(size: int) -> list[Row]:
    from bench.big_segment import write_big_segment

    d = OUT / "big" / "big-0"
    seg = d / "00000000000000000000.log"
    if not seg.exists() or abs(seg.stat().st_size - size) > (2 << 20):
        shutil.rmtree(d, ignore_errors=True)
        gen_s = _timed(lambda: write_big_segment(d, size))
        print(f"  generated {seg} ({seg.stat().st_size / MB:.0f} MB) in {gen_s:.1f}s", flush=True)
    nbytes = seg.stat().st_size
    cp_s = _timed(lambda: shutil.copyfile(seg, d.parent / "copy.log"))
    (d.parent / "copy.log").unlink()
    rows = [_info(_row("cp of the big segment (baseline)", cp_s, nbytes))]
    full = nbytes >= (1 << 30) - (2 << 20)
    for target in ("v2",):
        w = _child(["-m", "bench.workers", "rewrite", target, str(seg)])
        rss = w["peak_rss_mb"]
        row = _row(f"worker rewriting one {nbytes / 2**30:.2f} GiB segment --to {target}", w["seconds"], nbytes,
                   w["records"], peak_rss_mb=round(rss, 1))
        rows.append(_target(row, rss, RSS_MB, below=True, key="rss", ratio=f"peak RSS {rss:.0f} MB",
                            target=f"< {RSS_MB:.0f} MB" + ("" if full else " (for 1 GiB; smaller segment here)")))
    return rows


def _make_partitions(root: Path, n: int) -> list[Path]:
    marker = root / f".complete-{n}"
    dirs = [root / f"topic-{i // 100}-{i % 100}" for i in range(n)]
    if marker.exists():
        return dirs
    shutil.rmtree(root, ignore_errors=True)
    for i, d in enumerate(dirs):
        d.mkdir(parents=True)
        for base in (0, 1000 + i):
            for suffix in (".log", ".index", ".timeindex"):
                (d / f"{base:020d}{suffix}").write_bytes(b"")
        (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
        (d / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    marker.touch()
    return dirs


def bench_sessions(n: int) -> list[Row]:
    from migration.sessions import Outcome, SessionStore, fingerprint_partition_dir

    root = OUT / "sessions" / "kafka-logs"
    dirs = _make_partitions(root, n)
    db = OUT / "sessions" / "store.db"
    db.unlink(missing_ok=True)

    def listing() -> None:
        for d in dirs:
            with os.scandir(d) as it:
                for e in it:
                    e.stat(follow_symlinks=False)

    listing()  # warm the dentry cache for both
    list_s = _timed(listing)
    with SessionStore(f"sqlite:///{db}") as store:
        fps = [fingerprint_partition_dir(d) for d in dirs]
        first = store.begin_run("bench", 1, "r1", believed_epoch=None, fingerprints=fps)
        store.finish_run(first, {p.key: Outcome.ok() for p in first.selected})
        holder: dict[str, Any] = {}

        def plan() -> None:
            fp2 = [fingerprint_partition_dir(d) for d in dirs]
            holder["plan"] = store.begin_run("bench", 1, "r2", believed_epoch=first.epoch, fingerprints=fp2)

        plan_s = _timed(plan)
        p2 = holder["plan"]
        if p2.selected or len(p2.clean) != n:
            raise RuntimeError(f"expected nothing dirty, got {len(p2.selected)} selected")
        store.abandon_run(p2)
    base = _info(_row(f"os.scandir + stat of {n} partition dirs (baseline)", list_s, 0))
    row = _row(f"plan a run, nothing dirty, {n} partitions (fingerprints + begin_run)", plan_s, 0)
    # The target is for 10,000 partitions; a smaller run gets it scaled linearly.
    limit = PLAN_S_PER_10K * n / 10_000
    scaled = "" if n == 10_000 else f" ({PLAN_S_PER_10K:g} s per 10,000, scaled)"
    row = _target(row, plan_s, limit, below=True, key="sessions", target=f"< {limit:g} s{scaled}",
                  ratio=f"{plan_s / list_s:.1f}x the listing time")
    for r in (base, row):
        r["mb_s"] = None
        r["per_partition_us"] = round(r["seconds"] / n * 1e6, 1)
    return [base, row]


def bench_core(size: int) -> list[Row]:
    from bench import core as core_bench
    from migration.formats import core as record_core

    if record_core.compiled is None:  # only with --allow-python-core: nothing to compare
        return [{"name": "core: skipped, the compiled record core is not built", "status": "INFO",
                 "target": "report only", "ratio": record_core.describe()}]
    rows: list[Row] = []
    for r in core_bench.run(size):
        row = _row(f"compiled record core: {r['name']}", r["compiled_s"], r["bytes"], python_s=r["python_s"])
        row["mb_s"] = r["compiled_mb_s"]  # from the unrounded seconds: a quick run's are milliseconds
        if r["name"] != core_bench.VALIDATE_V2:
            rows.append(_info(row, f"{r['ratio']}x python ({r['python_mb_s']} MB/s)"))
            continue
        # Deep validation of uncompressed v2: nothing but the walker between the tool and the
        # page cache. Reading the file as the validator does (its chunks copied out of the page
        # cache) bounds it: read MB/s is the ceiling for 1 GB/s, read / Python MB/s for 25x.
        read_mb_s, cat_mb_s = r["read_mb_s"], r["cat_mb_s"]
        rows.append(_info(_row("read of the same uncompressed v2 file in the reader's chunks (baseline, ceiling)",
                               r["read_s"], r["bytes"]) | {"mb_s": read_mb_s}))
        rows.append(_info(_row("cat > /dev/null of the same file (baseline)", r["cat_s"], r["bytes"])
                          | {"mb_s": cat_mb_s}))
        ratio = r["python_s"] / r["compiled_s"]
        rows.append(_target(row, ratio, V2_VS_PYTHON, key="core-x-python", target=f">= {V2_VS_PYTHON:g}x python core",
                            ceiling=read_mb_s / r["python_mb_s"],
                            ratio=f"{ratio:.1f}x python ({r['python_mb_s']} MB/s)"))
        rows.append(_target(row | {"name": f"compiled record core: {r['name']}, one core"}, r["compiled_mb_s"],
                            V2_MB_S, key="core-mb-s", target=f">= {V2_MB_S:.0f} MB/s (1 GB/s per core)",
                            ceiling=read_mb_s,
                            unit="MB/s", ratio=f"{r['compiled_mb_s']:.0f} MB/s; read {read_mb_s:.0f}, "
                                               f"cat {cat_mb_s:.0f} MB/s"))
    return rows


def machine() -> dict[str, Any]:
    model = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    mem = next(
        (int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")), 0
    )
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "ram_gib": round(mem / 2**20, 1),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
    }


def print_table(rows: list[Row]) -> None:
    cols = ["name", "seconds", "mb_s", "records_s", "ratio", "target", "status"]
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in cols] for r in rows]
    widths = [max([len(c), *(len(line[i]) for line in cells)]) for i, c in enumerate(cols)]
    print("  ".join(f"{c:<{w}}" for c, w in zip(cols, widths, strict=True)).rstrip())
    for line in cells:
        print("  ".join(f"{v:<{w}}" for v, w in zip(line, widths, strict=True)).rstrip())


def summary(rows: list[Row]) -> dict[str, int]:
    statuses = [str(r.get("status", "")) for r in rows]
    return {k: sum(1 for s in statuses if s.startswith(k)) for k in ("PASS", "MISS", "ERROR")}


def _record_history(results: dict[str, Any], argv: list[str] | None, *, quick: bool, date: str) -> None:
    """Append the run to bench/history.jsonl; a failure to do so is said, not fatal (the run's
    results are in results.json)."""
    from bench import history

    command = ["python", "-m", "bench.run", *(argv if argv is not None else sys.argv[1:])]
    try:
        path = history.append(history.entry_from_results(results, argv=command, quick=quick, date=date))
    except Exception as exc:  # the measurement stands without its history line
        print(f"history: not recorded ({type(exc).__name__}: {exc})", file=sys.stderr)
        return
    print(f"history: appended to {path}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run")
    ap.add_argument("--scale", type=int, default=None, help="sample-cluster scale (default 1300, ~2.1 GB; quick 20)")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every benchmark but spark")
    ap.add_argument("--only", choices=NAMES, action="append")
    ap.add_argument("--allow-python-core", action="store_true",
                    help="run even when the compiled record core is not active (the run is marked)")
    ap.add_argument("--no-history", action="store_true",
                    help="do not append this run to bench/history.jsonl (python -m bench.history reads it)")
    args = ap.parse_args(argv)
    from bench import small_partitions, window
    from migration.formats import core as record_core

    python_core = record_core.name() != record_core.COMPILED
    if python_core and not args.allow_python_core:
        print(f"bench: the compiled record core is not active: {record_core.reason}. The targets are the "
              "compiled core's: nothing was run (--allow-python-core measures the Python core, marked as such).",
              file=sys.stderr)
        return 2
    scale = args.scale or (20 if args.quick else 1300)
    big = (64 << 20) if args.quick else (1 << 30)
    kp_bytes = (8 << 20) if args.quick else (16 << 20)
    plain = (16 if args.quick else 128) << 20
    partitions = 1000 if args.quick else 10_000
    repeats = 3 if args.quick else 1  # codec floors and validation of the cluster: median of
    only = set(args.only or [n for n in NAMES if not (args.quick and n == "spark")])
    OUT.mkdir(parents=True, exist_ok=True)
    info = machine() | {
        "record_core": record_core.describe(),
        "python_core": python_core,  # True: run on the Python core, --allow-python-core
        "scale": scale,
        "big_segment_bytes": big,
        "kafka_python_subset_bytes": kp_bytes,
        "plain_segment_bytes": plain,
        "partitions": partitions,
        "command": " ".join(["python -m bench.run", *(argv if argv is not None else sys.argv[1:])]),
    }
    print(f"machine: {info}", flush=True)
    if python_core:
        print(f"NOTE: {record_core.describe()}: measuring the Python core (--allow-python-core)", flush=True)
    if args.quick and not args.only:
        print("spark: skipped in --quick (the scale-20 cluster's upgrade takes about a second, Spark's start "
              "several: run --only spark)", flush=True)
    rows: list[Row] = []
    crashed: list[str] = []
    t0 = time.perf_counter()
    cluster: Path | None = None

    def cl() -> Path:
        nonlocal cluster
        cluster = cluster or sample_cluster(scale)
        return cluster

    steps: list[tuple[str, Callable[[], list[Row]]]] = [
        ("validate", lambda: bench_validate(cl(), repeats)),
        ("upgrade", lambda: bench_upgrade(cl(), repeats)),
        ("kp-mix", lambda: bench_kp_mix(cl(), kp_bytes, repeats)),
        ("kp-plain", lambda: bench_kp_plain(plain)),
        ("spark", lambda: bench_spark(cl())),
        ("small-partitions", lambda: small_partitions.bench(args.quick)),
        # sub-second windows move by a third between runs here: medians of three in every run
        ("window", lambda: window.bench(cl(), args.quick, 3)),
        ("rss", lambda: bench_rss(big)),
        ("sessions", lambda: bench_sessions(partitions)),
        ("core", lambda: bench_core(plain)),
        ("cleaner", lambda: cleaner_bench.bench((12 if args.quick else 48) << 20, (2 if args.quick else 8) << 20)),
    ]
    for name, step in steps:
        if name not in only:
            continue
        print(f"{name} ...", flush=True)
        try:
            rows += step()
        except Exception as exc:  # report it, run the others, exit non-zero
            traceback.print_exc()
            crashed.append(name)
            # the last line of the error (a worker's: its own last line, the exception it died of)
            last = next((ln for ln in reversed(str(exc).splitlines()) if ln.strip()), "")
            rows.append({"name": f"{name}: crashed", "ratio": f"{type(exc).__name__}: {last.strip()}"[:120],
                         "error": str(exc), "target": "", "status": "ERROR"})
    info["total_seconds"] = round(time.perf_counter() - t0, 1)
    counts = summary(rows)
    print()
    if python_core:
        print(f"NOTE: Python record core ({record_core.reason}); the targets are for the compiled core")
    print_table(rows)
    line = f"targets: {counts['PASS']} PASS, {counts['MISS']} MISS"
    if counts["ERROR"]:
        line += f", {counts['ERROR']} ERROR (crashed: {', '.join(crashed)})"
    print(f"\n{line}" + (" (Python record core)" if python_core else ""))
    results = {"machine": info, "summary": counts | {"crashed": crashed}, "rows": rows}
    (OUT / "results.json").write_text(json.dumps(results, indent=2, default=str))
    print(f"results: {OUT / 'results.json'} ({info['total_seconds']}s)")
    if not args.no_history:
        _record_history(results, argv, quick=args.quick, date=info["date"])
    return 1 if crashed else 0


if __name__ == "__main__":
    raise SystemExit(main())
