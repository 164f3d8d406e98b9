"""``--only cleaner``: kmigrate's conversion rate against Apache Kafka's own, side by side.

Kafka 4.x's log cleaner converts every legacy entry of a compacted topic it cleans to v2, as
``kmigrate upgrade --to v2`` does (tests/realkafka/test_cleaner_reference.py shows the batches
are the same). This benchmark gives both the same legacy partitions: v0 and v1, uncompressed and
gzip, snappy and lz4 wrappers of 10-50 records, every record with a key of its own (so the
cleaner removes nothing), written with kmigrate's format layer (``encode_message``,
``build_wrapper``) into segments of 8 MiB (``--quick``: 2 MiB).

- **kmigrate**: the full inline upgrade ``--to v2`` of a log dir holding them (bench.workers
  upgrade: prepare, rewrite, digests, indexes, backups, fsync), median of 3, each on a fresh copy.
- **Kafka's cleaner**: a real single-node Kafka 4.4.0 (tests/support/kafka.py) on the JVM options
  of ``bin/kafka-run-class.sh`` (G1, C2: not the tests' fast-start C1 only) with one cleaner
  thread, the partitions installed under compacted topics (``min.cleanable.dirty.ratio=0``) with
  an empty active segment at the log end, so every legacy segment is cleanable at the start. Its
  time is the sum over the partitions of the cleaner's own figure, ``LogCleaner``'s "N MB of log
  processed in S seconds" (0.1 s resolution; it covers building the offset map, reading,
  converting, writing and flushing the cleaned segment and swapping it in), and, beside it, the
  span between the log4j timestamps of the first "Beginning cleaning of log" and the last
  cleaner-statistics message (ms resolution; it also counts the thread's moves from one log to
  the next). The JVM's start, the load and the topics' creation are not counted.

Report only: the cleaner also deduplicates (an offset map of every key) and kmigrate also proves
its work (digests, backups, fsync); the row says how the two rates compare on this machine.
"""

from __future__ import annotations

import random
import re
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KINDS = (  # partition -> (magic, codec)
    ("v0-none", 0, "none"), ("v1-none", 1, "none"), ("v0-gzip", 0, "gzip"), ("v1-gzip", 1, "gzip"),
    ("v1-snappy", 1, "snappy"), ("v1-lz4", 1, "lz4"),
)
PREFIX = "clean-"


def write_partition(pdir: Path, magic: int, codec: str, size: int, segment: int, rng: random.Random) -> int:
    """Legacy segments of ``size`` bytes in all, rolled at ``segment`` bytes; every key unique.
    Returns the log end offset (offsets start at 0 with no gap: also the records written).
    Each segment is fsynced, and the directory with their names before it returns."""
    from migration.formats.fileio import durable_mkdir, fsync_dir, write_and_fsync
    from migration.formats.legacy import build_wrapper, encode_message
    from migration.formats.model import Compression, Record

    if pdir.exists():
        raise FileExistsError(pdir)
    durable_mkdir(pdir)
    words = [b"click", b"view", b"order", b"refund", b"login", b"search", b"cart"]
    offset, total = 0, 0
    out: bytearray = bytearray()
    base = 0

    def flush() -> None:
        nonlocal out, base
        if out:
            write_and_fsync(pdir / f"{base:020d}.log", out, exclusive=True)
        out, base = bytearray(), offset

    while total < size:
        n = 1 if codec == "none" else rng.randint(10, 50)
        recs = []
        for _ in range(n):
            value = b'{"seq":%d,"event":"%s","session":"%s","amount":%d}' % (
                offset, rng.choice(words), rng.randbytes(rng.randint(4, 24)).hex().encode(), rng.randrange(100000))
            recs.append(Record(offset, -1 if magic == 0 else 1_600_000_000_000 + offset, b"key-%010d" % offset, value))
            offset += 1
        entry = (encode_message(recs[0].offset, magic, 0, recs[0].timestamp, recs[0].key, recs[0].value)
                 if codec == "none" else build_wrapper(recs, magic=magic, compression=Compression[codec.upper()]))
        if len(out) + len(entry) > segment:
            flush()
            base = recs[0].offset
        out += entry
        total += len(entry)
    flush()
    fsync_dir(pdir)
    return offset


def build(root: Path, size: int, segment: int) -> dict[str, int]:
    """The legacy partitions under ``root`` (built once; a marker, written durably once they are,
    says complete and holds their log end offsets): name -> log end offset."""
    from migration.formats.fileio import durable_replace

    done = root / ".complete"
    if done.exists():
        return {k: int(v) for k, v in (ln.split() for ln in done.read_text().splitlines())}
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(7)
    leo = {f"{name}-0": write_partition(root / f"{name}-0", magic, codec, size // len(KINDS), segment, rng)
           for name, magic, codec in KINDS}
    durable_replace(done, "".join(f"{k} {v}\n" for k, v in leo.items()).encode())
    return leo


def _realkafka() -> ModuleType:
    """The tests' real Kafka node (tests/support/kafka.py), tests/ put on ``sys.path`` once."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from support import kafka

    return kafka


_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ")


def _stamp(line: str) -> float:
    m = _STAMP.match(line)
    assert m, line
    return datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def run_cleaner(legacy: Path, leo: dict[str, int], work: Path) -> dict[str, Any]:
    """The real cleaner over copies of the partitions: its own seconds and the log's span."""
    realkafka = _realkafka()
    shutil.rmtree(work, ignore_errors=True)
    sources = {}
    for tp in leo:
        src = work / "install" / tp
        shutil.copytree(legacy / tp, src)
        (src / f"{leo[tp]:020d}.log").touch()  # the empty active segment: every legacy one is cleanable
        sources[PREFIX + tp] = src
    node = realkafka.KafkaNode(realkafka.LATEST, work / "node", properties=realkafka.CLEANER_ON, heap="-Xmx1g",
                                jvm_opts=realkafka.KAFKA_JVM_PERFORMANCE_OPTS)
    try:
        node.format()
        node.start()
        node.create_topics({PREFIX + tp.rsplit("-", 1)[0]: (1, realkafka.COMPACT_NOW) for tp in leo})
        node.stop()
        node.install_segments(sources)
        node.start()
        realkafka.wait_for_cleaner(node, {PREFIX + tp: n for tp, n in leo.items()}, timeout=600)
        node.stop()
    finally:
        node.kill()
    log = node.run_log()
    runs = {r.log: r for r in realkafka.cleaner_runs(log)}
    missing = sorted(PREFIX + tp for tp in leo if PREFIX + tp not in runs)
    if missing:
        raise RuntimeError(f"no cleaner statistics for {missing}; logs in {node.logs}")
    for tp, n in leo.items():
        r = runs[PREFIX + tp]
        if (r.first_dirty, r.end, r.end_messages) != (0, n, n):
            raise RuntimeError(f"the cleaner did not convert {tp} whole: {r}")
    lines = log.splitlines()
    begin = min(_stamp(ln) for ln in lines if "Beginning cleaning of log" in ln)
    stats = [i for i, ln in enumerate(lines) if "Log cleaner thread" in ln and "cleaned log" in ln]
    # the statistics message starts on the line before its first tab-indented line
    end = max(_stamp(next(lines[j] for j in range(i, -1, -1) if _STAMP.match(lines[j]))) for i in stats)
    nbytes = sum(f.stat().st_size for tp in leo for f in (legacy / tp).glob("*.log"))
    shutil.rmtree(work / "install", ignore_errors=True)
    return {"seconds": sum(r.seconds for r in runs.values()), "span_s": end - begin, "bytes": nbytes,
            "records": sum(leo.values()), "mb_by_cleaner": sum(r.mb for r in runs.values()),
            "per_log_s": {k: r.seconds for k, r in sorted(runs.items())}, "logs": str(node.logs)}


def bench(size: int, segment: int) -> list[dict[str, Any]]:
    import functools

    from bench.run import OUT, _check_upgrade, _fresh_log_dir, _info, _median_child, _row

    base = OUT / "cleaner"
    legacy = base / f"legacy-{size >> 20}m"
    leo = build(legacy, size, segment)
    log_dir = base / "kafka-logs"
    parts = {tp: [(f, None) for f in sorted((legacy / tp).glob("*.log"))] for tp in leo}
    fresh = functools.partial(_fresh_log_dir, log_dir, base / "backups", parts)
    nbytes = fresh()
    up = _median_child(["-m", "bench.workers", "upgrade", "v2", str(base / "backups"), str(log_dir)], 3, fresh)
    _check_upgrade("the upgrade", up)
    t = time.perf_counter()
    cl = run_cleaner(legacy, leo, base / "cleaner")
    setup_s = time.perf_counter() - t
    shutil.rmtree(log_dir, ignore_errors=True)
    shutil.rmtree(base / "backups", ignore_errors=True)
    label = f"{nbytes / 1e6:.0f} MB legacy, {len(leo)} partitions (v0/v1 none, gzip; v1 snappy, lz4), unique keys"
    kafka_row = _info(_row(f"Kafka {_kafka_version()} log cleaner (1 thread): its own 'processed in' seconds, "
                           f"{label}", cl["seconds"], nbytes, cl["records"], span_s=round(cl["span_s"], 3),
                           per_log_s=cl["per_log_s"], broker_total_s=round(setup_s, 1)),
                      f"baseline; log4j span of the cleaning {cl['span_s']:.2f}s")
    row = _row("upgrade --to v2 (inline engine, same segments in a log dir), median of 3", up["seconds"], nbytes,
               up["records_rewritten"], runs_s=up["runs_s"])
    r, r_span = cl["seconds"] / up["seconds"], cl["span_s"] / up["seconds"]
    row = _info(row, f"{r:.2f}x Kafka's cleaner ({r_span:.2f}x its log4j span)")
    return [kafka_row, row]


def _kafka_version() -> str:
    return str(_realkafka().LATEST)
