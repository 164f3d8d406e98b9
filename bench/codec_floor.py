"""The codec floors: of the upgrade, what any converter that recompresses must spend at least
(below); of deep validation, decompression alone (``decompress`` mode, at the end).

A compressed legacy wrapper (v0/v1 message whose value is the compressed inner messages)
cannot be copied into the target format: its inner messages change (magic, timestamps,
relative offsets), so the value is decompressed and the converted inner data compressed
again with the same codec. This worker measures only that: for every compressed wrapper the
target would convert (``v1``: magic-0 wrappers, v1 data is kept as is; ``v2``: magic 0 and 1
wrappers), decompress its value and compress the decompressed bytes again, with the
project's own codec functions and the settings the rewrite uses (:func:`compression.compress`
with the target magic: gzip level 6, xerial snappy in 32 KiB blocks, Kafka's LZ4 frame with
64 KiB blocks). The converted inner data differs a little in size from the decompressed
bytes (v0 -> v1 adds 8 bytes per message, v2 records are smaller), so this is the floor of
the codec work, not an exact replica of it.

Reading the files and walking the batches (``FileRecords``) happen before the timed loop; the
reported ``seconds`` is the codec loop alone (garbage collection off during it). Uncompressed
messages and v2 batches cost nothing here: a converter needs no codec for them.

The codec functions are the product's, as the active record core installs them (gzip read and
written with libdeflate called from the compiled core, ISA-L reading the streams it leaves; on
the Python core ISA-L and the deflate package, else zlib): ``libraries`` in the output names them
(:func:`compression.codec_libraries`).

``python -m bench.codec_floor [--repeat N] TARGET SEGMENT...`` prints one JSON line: seconds, bytes (of the
segments), wrappers, compressed_bytes (their values), uncompressed_bytes, and ``by_codec``
(seconds per codec) with ``by_codec_detail`` (decompress/compress seconds, wrappers, bytes),
and ``libraries``.

``python -m bench.codec_floor [--repeat N] decompress SEGMENT...``: the decompression floor of deep
validation instead. Validation decompresses every compressed payload once, whatever the
format: the value of every compressed v0/v1 wrapper and the records region of every
compressed v2 batch. This mode times only that, with the same function the validator calls
(:func:`compression.decompress`, with the payload's magic), on payloads read and copied out
before the timed loop. Same JSON, ``wrappers`` counting the legacy wrappers and ``batches``
the v2 batches (``payloads`` both); no compress times.

``python -m bench.codec_floor [--repeat N] kept TARGET SEGMENT...``: the decompression floor of
the compressed legacy wrappers an upgrade to TARGET keeps as they are (``v1``: the magic-1
wrappers; ``v2``: none). The upgrade cannot leave them compressed and unread: the report counts
the records of every segment, also of those it does not rewrite, and a wrapper's record count
is inside its compressed value (a v2 batch says it in its header); a rewritten segment's digest
reads the wrappers it copies as well. Same JSON as ``decompress``.

``--repeat N``: the codec loop of each segment runs N times and the median pass counts
(``repeats`` in the output); one pass by default.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from migration.formats import compression as codecs
from migration.formats.file_records import FileRecords
from migration.formats.layout import RECORD_BATCH_OVERHEAD
from migration.formats.legacy import LegacyBatch
from migration.formats.model import MAGIC_V2, Compression


def wrapper_values(segment: Path, target: int) -> list[tuple[Compression, int, bytes]]:
    """(codec, wrapper magic, compressed value) of every wrapper ``target`` converts."""
    out: list[tuple[Compression, int, bytes]] = []
    for b in FileRecords(segment).batches():
        if not isinstance(b, LegacyBatch) or not b.is_compressed or b.magic >= target:
            continue
        _, value, _ = b._key_value()
        if value is None:
            raise SystemExit(f"{segment}: compressed wrapper with a null value at {b.position}")
        out.append((b.compression, b.magic, bytes(value)))
    return out


def compressed_payloads(segment: Path, kept_from: int | None = None) -> list[tuple[Compression, int, bytes]]:
    """(codec, magic, compressed bytes) of every compressed payload deep validation decompresses:
    v0/v1 wrapper values and v2 records regions. With ``kept_from`` (a target magic), only the
    legacy wrappers that target keeps as they are (magic ``kept_from`` and above)."""
    out: list[tuple[Compression, int, bytes]] = []
    for b in FileRecords(segment).batches():
        if not b.is_compressed:
            continue
        if kept_from is not None and (not isinstance(b, LegacyBatch) or b.magic < kept_from):
            continue
        if isinstance(b, LegacyBatch):
            _, value, _ = b._key_value()
            if value is None:
                raise SystemExit(f"{segment}: compressed wrapper with a null value at {b.position}")
            out.append((b.compression, b.magic, bytes(value)))
        else:
            out.append((b.compression, MAGIC_V2, bytes(b.raw_bytes()[RECORD_BATCH_OVERHEAD:])))
    return out


Payload = tuple[Compression, int, bytes]
Detail = dict[str, dict[str, float]]


def _median_pass(payloads: list[Payload], one: Callable[[Payload, Detail], None], repeats: int) -> tuple[float, Detail]:
    """Time ``one`` over every payload, ``repeats`` times (garbage collection off while timed);
    return the median pass: its seconds and the detail it accumulated."""
    perf = time.perf_counter
    passes: list[tuple[float, Detail]] = []
    for _ in range(repeats):
        detail: Detail = {}
        gc.disable()
        t = perf()
        for p in payloads:
            one(p, detail)
        passes.append((perf() - t, detail))
        gc.enable()
    passes.sort(key=lambda x: x[0])
    return passes[len(passes) // 2]


def _merge(into: Detail, detail: Detail) -> None:
    for codec, d in detail.items():
        acc = into.setdefault(codec, dict.fromkeys(d, 0))
        for k, v in d.items():
            acc[k] += v


def _decompress_one(payload: Payload, detail: Detail) -> None:
    codec, magic, value = payload
    perf = time.perf_counter
    t0 = perf()
    data = codecs.decompress(codec, value, magic)
    t1 = perf()
    d = detail.setdefault(codec.name.lower(), dict.fromkeys(("decompress_s", "payloads", "compressed_bytes",
                                                             "uncompressed_bytes"), 0))
    d["decompress_s"] += t1 - t0
    d["payloads"] += 1
    d["compressed_bytes"] += len(value)
    d["uncompressed_bytes"] += len(data)


def _recompress_one(target: int) -> Callable[[Payload, Detail], None]:
    def one(payload: Payload, detail: Detail) -> None:
        codec, magic, value = payload
        perf = time.perf_counter
        t0 = perf()
        data = codecs.decompress(codec, value, magic)
        t1 = perf()
        codecs.compress(codec, data, target)  # what the rewrite writes: same codec, target magic
        t2 = perf()
        d = detail.setdefault(codec.name.lower(), dict.fromkeys(("decompress_s", "compress_s", "wrappers",
                                                                 "compressed_bytes", "uncompressed_bytes"), 0))
        d["decompress_s"] += t1 - t0
        d["compress_s"] += t2 - t1
        d["wrappers"] += 1
        d["compressed_bytes"] += len(value)
        d["uncompressed_bytes"] += len(data)

    return one


def decompress_floor(segments: list[str], repeats: int = 1, kept_from: int | None = None) -> dict[str, object]:
    """Seconds of decompressing every compressed payload of ``segments`` once (see the module);
    with ``kept_from``, only the legacy wrappers an upgrade to that magic keeps (``kept`` mode)."""
    detail: Detail = {}
    seconds = 0.0
    size = wrappers = batches = 0
    for seg in segments:
        p = Path(seg)
        size += p.stat().st_size
        payloads = compressed_payloads(p, kept_from)  # untimed: reading and walking the batches
        s, d = _median_pass(payloads, _decompress_one, repeats)
        seconds += s
        _merge(detail, d)
        legacy = sum(1 for _, magic, _ in payloads if magic < MAGIC_V2)
        wrappers += legacy
        batches += len(payloads) - legacy
    for d in detail.values():
        d["decompress_s"] = round(d["decompress_s"], 4)
    return {
        "seconds": seconds,
        "bytes": size,
        "payloads": wrappers + batches,
        "wrappers": wrappers,
        "batches": batches,
        "compressed_bytes": int(sum(d["compressed_bytes"] for d in detail.values())),
        "uncompressed_bytes": int(sum(d["uncompressed_bytes"] for d in detail.values())),
        "by_codec": {name: d["decompress_s"] for name, d in sorted(detail.items())},
        "by_codec_detail": dict(sorted(detail.items())),
        "repeats": repeats,
        "libraries": codecs.codec_libraries(),
    }


def recompress_floor(target: int, segments: list[str], repeats: int = 1) -> dict[str, object]:
    """Seconds of decompressing and recompressing every wrapper ``target`` converts."""
    detail: Detail = {}
    seconds = 0.0
    size = wrappers = compressed = 0
    for seg in segments:
        p = Path(seg)
        size += p.stat().st_size
        values = wrapper_values(p, target)  # untimed: reading and walking the batches
        s, d = _median_pass(values, _recompress_one(target), repeats)
        seconds += s
        _merge(detail, d)
        wrappers += len(values)
        compressed += sum(len(v) for _, _, v in values)
    uncompressed = int(sum(d["uncompressed_bytes"] for d in detail.values()))
    for d in detail.values():
        d["decompress_s"] = round(d["decompress_s"], 4)
        d["compress_s"] = round(d["compress_s"], 4)
    by_codec = {name: round(d["decompress_s"] + d["compress_s"], 4) for name, d in sorted(detail.items())}
    return {
        "seconds": seconds,
        "bytes": size,
        "wrappers": wrappers,
        "compressed_bytes": compressed,
        "uncompressed_bytes": uncompressed,
        "by_codec": by_codec,
        "by_codec_detail": dict(sorted(detail.items())),
        "repeats": repeats,
        "libraries": codecs.codec_libraries(),
    }


def main(argv: list[str]) -> None:
    repeats = 1
    if "--repeat" in argv:
        i = argv.index("--repeat")
        repeats = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    if argv and argv[0] == "decompress":
        print(json.dumps(decompress_floor(argv[1:], repeats)))
        return
    if argv and argv[0] == "kept":
        print(json.dumps(decompress_floor(argv[2:], repeats, kept_from=int(argv[1].lstrip("v")))))
        return
    target = int(argv[0].lstrip("v"))
    if target not in (1, 2):
        raise SystemExit(f"target must be v1 or v2, not {argv[0]}")
    print(json.dumps(recompress_floor(target, argv[1:], repeats)))


if __name__ == "__main__":
    main(sys.argv[1:])
