"""``python -m bench.core [--quick] [--mb N]``: the compiled record core against the pure-Python
one, side by side in one process and one run (``core.use``), on the same files: deep
validation (``validate_segment``), the record digest of a segment (``digest_log``) and the
rewrite with its read-back digest (``rewrite_segment`` + ``digest_log`` of the output, as in
bench.run's subset rows). Median of three timings each (seven for the deep validation of
uncompressed data, a few milliseconds in a quick run), page cache warm; the table gives MB/s
of segment bytes and the compiled/Python ratio. Ratios, not targets: ``make bench`` holds those.

Segments (built once under ``out/bench/core/``, by replicating an encoded template and patching
only the offset fields, which no CRC covers):
  v2-plain     uncompressed v2 batches of 1-100 records (keys, values of 40-640 bytes, some headers)
  v0-plain     uncompressed v0 messages (the era before 0.10: one message a batch)
  v1-plain     uncompressed v1 messages (0.10 and later, before 0.11; CreateTime); not timed
               here: bench.run's kafka-python comparison on uncompressed legacy segments uses it
  legacy-mix   bench.big_segment's mix: v0 and v1 messages, v1 gzip/snappy/lz4 wrappers

Next to the deep validation of ``v2-plain`` two report-only baselines on the same file:
``read_rate`` (the file read in the reader's chunks (1 MiB) in this process, the copy out of the
page cache every reader pays: a ceiling on any validator of the file) and ``cat_rate``
(``cat > /dev/null``, a process of its own).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from migration.formats import core, names
from migration.formats.file_records import DEFAULT_CHUNK_SIZE
from migration.formats.legacy import encode_message
from migration.formats.model import Header, Record
from migration.formats.record_batch import build_record_batch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "out" / "bench" / "core"
MB = 1e6
_OFFSET = struct.Struct(">q")
TEMPLATE_BYTES = 1 << 20
REPEATS = 3
FAST_REPEATS = 7  # for cases of a few milliseconds (deep validation of uncompressed data, reads)
READ_CHUNK = DEFAULT_CHUNK_SIZE  # the reader's (FileRecords)
KINDS = ("v2-plain", "v0-plain", "legacy-mix")


def _values(rng: random.Random) -> Callable[[int], bytes]:
    pad = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz     ") for _ in range(8192))

    def value(i: int) -> bytes:
        n = rng.choice((40, 80, 160, 320, 640))
        s = rng.randrange(len(pad) - n)
        return b'{"id":%d,"pad":"' % i + pad[s : s + n] + b'"}'

    return value


def _template_v2(rng: random.Random) -> tuple[bytes, list[tuple[int, int]], int]:
    """(block, [(batch position, base offset)], records): uncompressed v2 batches."""
    value = _values(rng)
    parts, marks, pos, offset = [], [], 0, 0
    while pos < TEMPLATE_BYTES:
        k = rng.randrange(1, 101)
        recs = [Record(offset + i, 1_700_000_000_000 + offset + i, b"user-%d" % rng.randrange(1000), value(offset + i),
                       (Header("trace", b"%08x" % i),) if rng.random() < 0.2 else ())
                for i in range(k)]
        data = build_record_batch(recs)
        marks.append((pos, offset))
        parts.append(data)
        pos += len(data)
        offset += k
    return b"".join(parts), marks, offset


def _template_v0(rng: random.Random) -> tuple[bytes, list[tuple[int, int]], int]:
    """(block, [(entry position, offset)], records): uncompressed v0 messages."""
    value = _values(rng)
    parts, marks, pos, offset = [], [], 0, 0
    while pos < TEMPLATE_BYTES:
        key = None if rng.random() < 0.3 else b"user-%d" % rng.randrange(1000)
        data = encode_message(offset, 0, 0, -1, key, value(offset))
        marks.append((pos, offset))
        parts.append(data)
        pos += len(data)
        offset += 1
    return b"".join(parts), marks, offset


def _template_v1(rng: random.Random) -> tuple[bytes, list[tuple[int, int]], int]:
    """(block, [(entry position, offset)], records): uncompressed v1 messages, CreateTime."""
    value = _values(rng)
    parts, marks, pos, offset = [], [], 0, 0
    while pos < TEMPLATE_BYTES:
        key = None if rng.random() < 0.3 else b"user-%d" % rng.randrange(1000)
        data = encode_message(offset, 1, 0, 1_500_000_000_000 + offset, key, value(offset))
        marks.append((pos, offset))
        parts.append(data)
        pos += len(data)
        offset += 1
    return b"".join(parts), marks, offset


def _replicate(path: Path, template: tuple[bytes, list[tuple[int, int]], int], size: int) -> None:
    block, marks, per_block = template
    buf = bytearray(block)
    with open(path, "wb") as f:
        for c in range(max(1, size // len(block))):
            for pos, off in marks:
                _OFFSET.pack_into(buf, pos, off + c * per_block)
            f.write(buf)


def segments(size: int, kinds: tuple[str, ...] = KINDS) -> dict[str, Path]:
    """The segments of about ``size`` bytes (rebuilt when the size changes), by kind."""
    from bench.big_segment import write_big_segment

    out: dict[str, Path] = {}
    for kind in kinds:
        d = OUT / f"{kind}-{size >> 20}m" / f"{kind}-0"
        path = d / names.log_file_name(0)
        out[kind] = path
        if path.exists():
            continue
        shutil.rmtree(d.parent, ignore_errors=True)
        d.mkdir(parents=True)
        rng = random.Random(14)
        if kind == "v2-plain":
            _replicate(path, _template_v2(rng), size)
        elif kind == "v0-plain":
            _replicate(path, _template_v0(rng), size)
        elif kind == "v1-plain":
            _replicate(path, _template_v1(rng), size)
        else:
            write_big_segment(d, size)
    return out


def _median(fn: Callable[[], object], repeats: int = REPEATS) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def _validate(path: Path) -> Callable[[], object]:
    from migration.logdir.validate import validate_segment

    def run() -> object:
        res, summary = validate_segment(path)
        if not summary.valid:
            raise RuntimeError(f"{path} does not validate: {[str(f) for f in res.problems][:3]}")
        return res.records_checked, summary.last_offset

    return run


def _digest(path: Path) -> Callable[[], object]:
    from migration.migrations.upgrade.rewrite import digest_log

    return lambda: digest_log(path)[0]


def _rewrite(path: Path, target: int) -> Callable[[], object]:
    from migration.migrations.upgrade.rewrite import RewriteSpec, digest_log, rewrite_segment

    def run() -> object:
        res = rewrite_segment(path, RewriteSpec(target_magic=target))
        out = path.parent / (res.outputs[0].files[0] + names.CLEANED_FILE_SUFFIX)
        after, _ = digest_log(out)  # the read-back digest of the upgrade's verification
        for p in path.parent.glob("*" + names.CLEANED_FILE_SUFFIX):
            p.unlink()
        if not after.matches(res.digest_before, timestamps=True):
            raise RuntimeError(f"{path}: digest changed by the rewrite")
        return res.digest_before.content, res.outputs[0].log_checksum

    return run


def read_rate(path: Path) -> tuple[float, float]:
    """(median seconds, MB/s) of reading ``path`` in the reader's chunks, unbuffered, in this process."""

    def run() -> int:
        n = 0
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(READ_CHUNK):
                n += len(chunk)
        return n

    s, _ = _median(run, FAST_REPEATS)
    return s, path.stat().st_size / MB / s


def cat_rate(path: Path) -> tuple[float, float]:
    """(median seconds, MB/s) of ``cat path > /dev/null`` (a process start included)."""
    s, _ = _median(lambda: subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True), FAST_REPEATS)
    return s, path.stat().st_size / MB / s


# The case bench.run turns into targets (issue #14: >= 25x the Python core, >= 1 GB/s).
VALIDATE_V2 = "deep validation, uncompressed v2"


def cases(segs: dict[str, Path]) -> list[tuple[str, Path, Callable[[], object]]]:
    return [
        (VALIDATE_V2, segs["v2-plain"], _validate(segs["v2-plain"])),
        ("deep validation, uncompressed v0", segs["v0-plain"], _validate(segs["v0-plain"])),
        ("deep validation, legacy mix (v0/v1, v1 wrappers)", segs["legacy-mix"], _validate(segs["legacy-mix"])),
        ("record digest, uncompressed v2", segs["v2-plain"], _digest(segs["v2-plain"])),
        ("record digest, uncompressed v0", segs["v0-plain"], _digest(segs["v0-plain"])),
        ("rewrite v0 -> v1 + read-back digest, uncompressed", segs["v0-plain"], _rewrite(segs["v0-plain"], 1)),
        ("rewrite v0 -> v2 + read-back digest, uncompressed", segs["v0-plain"], _rewrite(segs["v0-plain"], 2)),
        ("rewrite legacy mix -> v2 + read-back digest", segs["legacy-mix"], _rewrite(segs["legacy-mix"], 2)),
    ]


def run(size: int) -> list[dict[str, Any]]:
    if core.compiled is None:
        raise RuntimeError(f"the compiled core is not available: {core.describe()}")
    segs = segments(size)
    rows: list[dict[str, Any]] = []
    for name, path, fn in cases(segs):
        nbytes = path.stat().st_size
        path.read_bytes()  # warm the page cache
        timings: dict[str, float] = {}
        results = {}
        repeats = FAST_REPEATS if name.startswith("deep validation, uncompressed") else REPEATS
        for which in (core.PYTHON, core.COMPILED):
            with core.use(which):
                timings[which], results[which] = _median(fn, repeats)
        if results[core.PYTHON] != results[core.COMPILED]:
            raise RuntimeError(f"{name}: the cores disagree: {results}")
        py_s, c_s = timings[core.PYTHON], timings[core.COMPILED]
        rows.append({
            "name": name,
            "bytes": nbytes,
            "python_s": round(py_s, 4),
            "compiled_s": round(c_s, 4),
            "python_mb_s": round(nbytes / MB / py_s, 1),
            "compiled_mb_s": round(nbytes / MB / c_s, 1),
            "ratio": round(py_s / c_s, 1),
            "repeats": repeats,
        })
        if name == VALIDATE_V2:
            read_s, read_mb_s = read_rate(path)
            cat_s, cat_mb_s = cat_rate(path)
            rows[-1] |= {"read_s": round(read_s, 4), "read_mb_s": round(read_mb_s, 1),
                         "cat_s": round(cat_s, 4), "cat_mb_s": round(cat_mb_s, 1)}
        print(f"  {name}: python {rows[-1]['python_mb_s']} MB/s, compiled {rows[-1]['compiled_mb_s']} MB/s, "
              f"{rows[-1]['ratio']}x", flush=True)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'path':<52} {'MB':>6} {'python MB/s':>12} {'compiled MB/s':>14} {'ratio':>7}")
    for r in rows:
        print(f"{r['name']:<52} {r['bytes'] / MB:>6.0f} {r['python_mb_s']:>12} {r['compiled_mb_s']:>14} "
              f"{r['ratio']:>6}x")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.core")
    ap.add_argument("--quick", action="store_true", help="16 MB segments instead of 128 MB")
    ap.add_argument("--mb", type=int, default=None, help="segment size in MiB")
    args = ap.parse_args(argv)
    size = (args.mb or (16 if args.quick else 128)) << 20
    print(f"{core.describe()}; segments of {size >> 20} MiB, median of {REPEATS} "
          f"({FAST_REPEATS} for uncompressed deep validation)", flush=True)
    rows = run(size)
    print()
    print_table(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps({"core": core.describe(), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
