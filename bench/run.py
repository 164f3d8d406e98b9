"""``python -m bench.run [--scale N] [--quick] [--only NAME]``: every benchmark with its baseline
measured side by side in the same run; a table of MB/s, records/s, ratios and targets
(PASS/MISS), and ``out/bench/results.json``. Data is generated under ``out/bench/`` (reused
across runs when complete: generating the multi-GB cluster costs more than benchmarking it).

Benchmarks (names for ``--only``):
  validate  deep validation of a sample cluster vs ``cat`` of its segments   target >= 0.5x
  upgrade   inline upgrade --to v1 and v2 vs ``cp -a`` of the cluster (>= 1/3x, one core each)
            and vs a kafka-python converter on a subset of its segments (>= 10x); on the same
            subset a codec-floor row (bench.codec_floor: decompress + recompress every legacy
            wrapper the target converts, nothing else) and the ceiling it implies,
            kafka-python seconds / floor seconds: the best ratio any recompressing converter
            can reach (``kp_ceiling``; a MISS below it reads "MISS (ceiling N.Nx)"); and the
            floor over the whole cluster, whose cluster MB/s bounds the upgrade against cp
            (``cp_ceiling``)
  rss       peak RSS of the worker rewriting one big segment (1 GiB)       target < 300 MB
  sessions  planning a run with nothing dirty on 10,000 partitions vs os.scandir listing
  core      the compiled record core vs the pure-Python one, side by side (bench.core): deep
            validation, digest and rewrite of uncompressed v2, uncompressed v0 and a legacy mix
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "out" / "bench"
MB = 1e6
Row = dict[str, Any]


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
        "seconds": round(seconds, 3),
        "bytes": nbytes,
        "mb_s": round(nbytes / MB / seconds, 2),
        "records": records,
        "records_s": round(records / seconds) if records else None,
    } | extra


def bench_validate(cluster: Path) -> list[Row]:
    from migration.logdir.validation import validate_paths

    logs = _logs(cluster)
    size = sum(p.stat().st_size for p in logs)
    subprocess.run(["cat", *map(str, logs)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    cat_s = _timed(lambda: subprocess.run(["cat", *map(str, logs)], stdout=subprocess.DEVNULL, check=True))
    dirs = [str(d) for d in sorted(cluster.glob("broker-*/kafka-logs"))]
    holder: dict[str, Any] = {}
    val_s = _timed(lambda: holder.setdefault("r", validate_paths(dirs, deep=True)))
    res = holder["r"]
    errors = [str(f) for f in res.findings if f.severity == "error"]
    if errors:
        raise RuntimeError(f"validation found errors in the sample cluster: {errors[:3]}")
    cat = _row("cat > /dev/null (baseline)", cat_s, size)
    val = _row("deep validation (validate_paths)", val_s, res.bytes_checked, res.records_checked)
    ratio = val["mb_s"] / cat["mb_s"]
    val |= {"ratio": f"{ratio:.4f}x cat", "target": ">= 0.5x cat", "status": "PASS" if ratio >= 0.5 else "MISS"}
    return [cat, val]


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


def bench_upgrade(cluster: Path, kp_bytes: int) -> list[Row]:
    rows: list[Row] = []
    cluster_logs = sum(p.stat().st_size for p in _logs(cluster))
    subset = _kp_subset(cluster, kp_bytes)
    for target in ("v1", "v2"):
        work = OUT / f"work-{target}"
        backups = OUT / f"backups-{target}"
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(backups, ignore_errors=True)
        copied = sum(p.stat().st_size for p in cluster.rglob("*") if p.is_file())
        cp_s = _timed(lambda w=work: subprocess.run(["cp", "-a", str(cluster), str(w)], check=True))
        subprocess.run(["sync"], check=True)  # the upgrade fsyncs: start it without cp's dirty pages
        cp = _row(f"cp -a cluster (baseline {target})", cp_s, copied)
        dirs = [str(d) for d in sorted(work.glob("broker-*/kafka-logs"))]
        up = _child(["-m", "bench.workers", "upgrade", target, str(backups), *dirs])
        if up["units_failed"] or up["digest_mismatches"] or up["exit_code"] != 0:
            raise RuntimeError(f"upgrade --to {target} did not succeed: {up}")
        row = _row(
            f"upgrade --to {target} (inline engine)",
            up["seconds"],
            cluster_logs,
            up["records_rewritten"],
            bytes_rewritten=up["bytes_rewritten"],
            peak_rss_mb=round(up["peak_rss_mb"], 1),
        )
        # records/s over the rewritten records; MB/s over every segment (all are read, validated)
        # Subset: kafka-python converter vs the same rewrite core, on copies of the same files.
        sub_dir = OUT / f"kp-{target}"
        shutil.rmtree(sub_dir, ignore_errors=True)
        copies = []
        for i, (p, nbytes) in enumerate(subset):
            # one partition dir per copy: the rewrite reads the base offset from the name
            q = sub_dir / "in" / f"part-{i}" / p.name
            q.parent.mkdir(parents=True)
            with open(p, "rb") as src:
                q.write_bytes(src.read(nbytes))
            copies.append(str(q))
        kp = _child(["-m", "bench.kafka_python_converter", target, str(sub_dir / "out"), *copies])
        core = _child(["-m", "bench.workers", "rewrite", target, *copies])
        kp_row = _row(
            f"kafka-python converter --to {target} (baseline, subset)", kp["seconds"], kp["bytes"], kp["records"]
        )
        core_row = _row(
            f"rewrite_segment + read-back digest --to {target} (same subset)",
            core["seconds"],
            core["bytes"],
            core["records"],
        )
        core_row |= {"ratio": f"{core_row['mb_s'] / kp_row['mb_s']:.1f}x kafka-python"}
        # The codec floor on the same copies: decompress + recompress of every wrapper the target
        # converts, timed alone. No converter that recompresses can beat kafka-python by more
        # than kp / floor on these files.
        floor = _child(["-m", "bench.codec_floor", target, *copies])
        print(
            f"  codec floor --to {target}: {floor['seconds']:.3f}s over {floor['wrappers']} wrappers, "
            f"by codec {floor['by_codec']}",
            flush=True,
        )
        # No wrapper to convert (e.g. --to v1 on v1 data): no codec work, no ceiling.
        ceiling = kp["seconds"] / floor["seconds"] if floor["wrappers"] and floor["seconds"] > 0 else None
        kp_ceiling = None if ceiling is None else round(ceiling, 2)
        floor_row = _row(
            f"codec floor: decompress + recompress only --to {target} (same subset)",
            max(floor["seconds"], 1e-9),
            floor["bytes"],
            wrappers=floor["wrappers"],
            compressed_bytes=floor["compressed_bytes"],
            uncompressed_bytes=floor["uncompressed_bytes"],
            by_codec=floor["by_codec"],
            by_codec_detail=floor["by_codec_detail"],
            kp_ceiling=kp_ceiling,
            share_of_core=round(floor["seconds"] / core["seconds"], 3),
            ratio=f"ceiling {ceiling:.1f}x kafka-python" if ceiling else "no wrapper to recompress: no ceiling",
            target="report only",
            status="INFO",
        )
        if ceiling is None:
            floor_row["mb_s"] = None
        kp_row["kp_ceiling"] = core_row["kp_ceiling"] = kp_ceiling
        # The same floor over every segment of the cluster: the upgrade cannot run faster than
        # its codec work alone, so cluster bytes / floor seconds bounds its MB/s against cp.
        cfloor = _child(["-m", "bench.codec_floor", target, *map(str, _logs(cluster))])
        cp_ceiling = cluster_logs / MB / cfloor["seconds"] / cp["mb_s"] if cfloor["seconds"] > 0 else None
        cfloor_row = _row(
            f"codec floor of the whole cluster --to {target} (every wrapper it converts)",
            max(cfloor["seconds"], 1e-9),
            cluster_logs,
            wrappers=cfloor["wrappers"],
            by_codec=cfloor["by_codec"],
            cp_ceiling=None if cp_ceiling is None else round(cp_ceiling, 3),
            ratio=f"ceiling {cp_ceiling:.2f}x cp" if cp_ceiling else "no wrapper to recompress: no ceiling",
            target="report only",
            status="INFO",
        )
        r_kp = row["mb_s"] / kp_row["mb_s"]
        r_cp = row["mb_s"] / cp["mb_s"]
        kp_status = "PASS" if r_kp >= 10 else "MISS"
        if kp_status == "MISS" and ceiling is not None and ceiling < 10:
            kp_status = f"MISS (ceiling {ceiling:.1f}x)"
        cp_status = "PASS" if r_cp >= 1 / 3 else "MISS"
        if cp_status == "MISS" and cp_ceiling is not None and cp_ceiling < 1:
            cp_status = f"MISS (ceiling {cp_ceiling:.2f}x)"
        row |= {
            "ratio": f"{r_kp:.1f}x kafka-python, {r_cp:.4f}x cp",
            "target": ">= 10x kafka-python; >= 0.333x cp per core",
            "status": kp_status + "/" + cp_status,
            "kp_ceiling": kp_ceiling,
            "cp_ceiling": cfloor_row["cp_ceiling"],
        }
        rows += [cp, kp_row, core_row, floor_row, cfloor_row, row]
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(backups, ignore_errors=True)
        shutil.rmtree(sub_dir, ignore_errors=True)
    return rows


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
    rows = [_row("cp of the big segment (baseline)", cp_s, nbytes)]
    for target in ("v2",):
        w = _child(["-m", "bench.workers", "rewrite", target, str(seg)])
        rss = w["peak_rss_mb"]
        rows.append(
            _row(
                f"worker rewriting one {nbytes / 2**30:.2f} GiB segment --to {target}",
                w["seconds"],
                nbytes,
                w["records"],
                peak_rss_mb=round(rss, 1),
                ratio=f"peak RSS {rss:.0f} MB",
                target="< 300 MB",
                status="PASS" if rss < 300 else "MISS",
            )
        )
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
    base = _row(f"os.scandir + stat of {n} partition dirs (baseline)", list_s, 0)
    row = _row(f"plan a run, nothing dirty, {n} partitions (fingerprints + begin_run)", plan_s, 0)
    ratio = plan_s / list_s
    row |= {"ratio": f"{ratio:.1f}x the listing time", "target": "report only", "status": "INFO"}
    for r in (base, row):
        r["mb_s"] = None
        r["per_partition_us"] = round(r["seconds"] / n * 1e6, 1)
    return [base, row]


def bench_core(size: int) -> list[Row]:
    from bench import core as core_bench

    rows: list[Row] = []
    for r in core_bench.run(size):
        row = _row(f"compiled record core: {r['name']}", r["compiled_s"], r["bytes"])
        row |= {"ratio": f"{r['ratio']}x python ({r['python_mb_s']} MB/s)", "target": "report only",
                "status": "INFO", "python_s": r["python_s"]}
        rows.append(row)
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
    cols = [("name", 66), ("seconds", 9), ("mb_s", 9), ("records_s", 10), ("ratio", 34), ("target", 40), ("status", 9)]
    print("  ".join(f"{c:<{w}}" for c, w in cols))
    for r in rows:
        print("  ".join(f"{'' if r.get(c) is None else str(r.get(c)):<{w}}" for c, w in cols))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run")
    ap.add_argument("--scale", type=int, default=None, help="sample-cluster scale (default 1300, ~2.1 GB; quick 20)")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every benchmark")
    ap.add_argument("--only", choices=["validate", "upgrade", "rss", "sessions", "core"], action="append")
    args = ap.parse_args(argv)
    scale = args.scale or (20 if args.quick else 1300)
    big = (64 << 20) if args.quick else (1 << 30)
    kp_bytes = (2 << 20) if args.quick else (16 << 20)
    partitions = 1000 if args.quick else 10_000
    only = set(args.only or ["validate", "upgrade", "rss", "sessions", "core"])
    OUT.mkdir(parents=True, exist_ok=True)
    info = machine() | {
        "scale": scale,
        "big_segment_bytes": big,
        "kafka_python_subset_bytes": kp_bytes,
        "partitions": partitions,
        "command": " ".join(["python -m bench.run", *(argv or sys.argv[1:])]),
    }
    print(f"machine: {info}", flush=True)
    rows: list[Row] = []
    t0 = time.perf_counter()
    if only & {"validate", "upgrade"}:
        cluster = sample_cluster(scale)
        if "validate" in only:
            print("validate ...", flush=True)
            rows += bench_validate(cluster)
        if "upgrade" in only:
            print("upgrade ...", flush=True)
            rows += bench_upgrade(cluster, kp_bytes)
    if "rss" in only:
        print("rss ...", flush=True)
        rows += bench_rss(big)
    if "sessions" in only:
        print("sessions ...", flush=True)
        rows += bench_sessions(partitions)
    if "core" in only:
        print("core ...", flush=True)
        rows += bench_core((16 if args.quick else 128) << 20)
    info["total_seconds"] = round(time.perf_counter() - t0, 1)
    print()
    print_table(rows)
    (OUT / "results.json").write_text(json.dumps({"machine": info, "rows": rows}, indent=2))
    print(f"\nresults: {OUT / 'results.json'} ({info['total_seconds']}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
