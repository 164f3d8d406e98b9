"""The product's codec functions next to the bare library calls and to zlib, side by side.

For every compressed payload of the given segments (v0/v1 wrapper values and v2 records
regions), decompressed once before timing, three ways of doing the same work are timed in turn,
``--repeat`` rounds, median per way:

``product``  :func:`compression.decompress` and :func:`compression.compress` (target magic 2 for
             lz4, the payload's own otherwise): the functions the validator, the rewrite and
             ``bench.codec_floor`` call, with the libraries this process selected
             (:func:`compression.codec_libraries`).
``bare``     the library calls alone on pre-located blocks, no framing, no checks and no copy to
             ``bytes``: ISA-L one-shot inflate and libdeflate for gzip, cramjam's raw snappy and
             lz4 block calls (lz4 into one reused buffer). What compiled framing could approach.
``zlib``     gzip only: the zlib fallback of the same module (what ran before ISA-L/libdeflate).

``product - bare`` per payload is the price of the Python framing and checks. Reading and
walking the files happen before any timing; garbage collection is off while timing.

``python -m bench.codec_compare [--repeat N] SEGMENT...`` prints one JSON line: ``libraries``,
and per codec: payloads, compressed and uncompressed bytes, and for each way and direction
seconds, MB/s of uncompressed bytes and µs per payload.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import struct
import time
from collections.abc import Callable
from pathlib import Path

import cramjam
import deflate
from isal import isal_zlib

from migration.formats import compression as codecs
from migration.formats.file_records import FileRecords
from migration.formats.legacy import LegacyBatch
from migration.formats.model import MAGIC_V2, Compression
from migration.formats.record_batch import RECORD_BATCH_OVERHEAD

Payload = tuple[int, bytes, bytes, object]  # magic, compressed, uncompressed, pre-located blocks


def payloads(segments: list[Path]) -> dict[Compression, list[Payload]]:
    out: dict[Compression, list[Payload]] = {}
    for seg in segments:
        for b in FileRecords(seg).batches():
            if not b.is_compressed:
                continue
            if isinstance(b, LegacyBatch):
                _, value, _ = b._key_value()
                assert value is not None
                magic, raw = b.magic, bytes(value)
            else:
                magic, raw = MAGIC_V2, bytes(b.raw_bytes()[RECORD_BATCH_OVERHEAD:])
            data = codecs.decompress(b.compression, raw, magic)
            out.setdefault(b.compression, []).append((magic, raw, data, _blocks(b.compression, raw)))
    return out


def _blocks(codec: Compression, raw: bytes) -> object:
    """What the bare calls take: the raw blocks of a xerial or LZ4 frame (Kafka's own frames)."""
    if codec is Compression.SNAPPY:
        blocks, pos = [], 16
        while pos < len(raw):
            (n,) = struct.unpack_from(">i", raw, pos)
            blocks.append(raw[pos + 4 : pos + 4 + n])
            pos += 4 + n
        return blocks
    if codec is Compression.LZ4:
        lz4_blocks, pos = [], 7
        while (word := struct.unpack_from("<I", raw, pos)[0]) != 0:
            n = word & 0x7FFFFFFF
            lz4_blocks.append((bool(word & codecs.LZ4_UNCOMPRESSED_FLAG), raw[pos + 4 : pos + 4 + n]))
            pos += 4 + n
        return lz4_blocks
    return raw


def _bare(codec: Compression) -> tuple[Callable[[Payload], object], Callable[[Payload], object]]:
    scratch = bytearray(codecs.LZ4_BLOCK_SIZE)
    if codec is Compression.GZIP:
        return (lambda p: isal_zlib.decompress(p[1], 31)), (lambda p: deflate.gzip_compress(p[2], codecs.GZIP_LEVEL))
    if codec is Compression.SNAPPY:
        def snappy_in(p: Payload) -> None:
            for block in p[3]:  # type: ignore[attr-defined]
                cramjam.snappy.decompress_raw(block)

        def snappy_out(p: Payload) -> None:
            if len(p[2]) <= codecs.SNAPPY_BLOCK_SIZE:
                cramjam.snappy.compress_raw(p[2])
                return
            data = memoryview(p[2])
            for start in range(0, len(data), codecs.SNAPPY_BLOCK_SIZE):
                cramjam.snappy.compress_raw(data[start : start + codecs.SNAPPY_BLOCK_SIZE])

        return snappy_in, snappy_out
    if codec is Compression.LZ4:
        def lz4_in(p: Payload) -> None:
            for stored, block in p[3]:  # type: ignore[attr-defined]
                if not stored:
                    cramjam.lz4.decompress_block_into(block, scratch)

        def lz4_out(p: Payload) -> None:
            if len(p[2]) <= codecs.LZ4_BLOCK_SIZE:
                cramjam.lz4.compress_block(p[2], store_size=False)
                return
            data = memoryview(p[2])
            for start in range(0, len(data), codecs.LZ4_BLOCK_SIZE):
                cramjam.lz4.compress_block(data[start : start + codecs.LZ4_BLOCK_SIZE], store_size=False)

        return lz4_in, lz4_out
    return (lambda p: cramjam.zstd.decompress(p[1])), (lambda p: cramjam.zstd.compress(p[2], level=3))


def ways(codec: Compression) -> dict[str, tuple[Callable[[Payload], object], Callable[[Payload], object]]]:
    out_magic = (lambda m: MAGIC_V2) if codec is Compression.LZ4 else (lambda m: m)
    w = {
        "product": (
            lambda p: codecs.decompress(codec, p[1], p[0]),
            lambda p: codecs.compress(codec, p[2], out_magic(p[0])),
        ),
        "bare": _bare(codec),
    }
    if codec is Compression.GZIP:
        w["zlib"] = (lambda p: codecs.gzip_decompress_zlib(p[1]), lambda p: codecs.gzip_compress_zlib(p[2]))
    return w


def _time(fn: Callable[[Payload], object], items: list[Payload]) -> float:
    perf = time.perf_counter
    t = perf()
    for p in items:
        fn(p)
    return perf() - t


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.codec_compare")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("segments", nargs="+", type=Path)
    args = ap.parse_args(argv)
    result: dict[str, object] = {"libraries": codecs.codec_libraries(), "repeat": args.repeat}
    for codec, items in sorted(payloads(args.segments).items()):
        variants = ways(codec)
        times: dict[str, list[float]] = {f"{w}_{d}": [] for w in variants for d in ("decompress", "compress")}
        gc.disable()
        try:
            for _ in range(args.repeat):  # the ways take turns: the machine's drift hits them all alike
                for w, (inflate, deflate_) in variants.items():
                    times[f"{w}_decompress"].append(_time(inflate, items))
                    times[f"{w}_compress"].append(_time(deflate_, items))
        finally:
            gc.enable()
        n = len(items)
        size = sum(len(p[2]) for p in items)
        row: dict[str, object] = {
            "payloads": n,
            "compressed_bytes": sum(len(p[1]) for p in items),
            "uncompressed_bytes": size,
        }
        for key, samples in times.items():
            s = statistics.median(samples)
            row[key] = {"s": round(s, 4), "MB/s": round(size / s / 1e6, 1), "us_per_payload": round(s / n * 1e6, 2)}
        result[codec.name.lower()] = row
    print(json.dumps(result))


if __name__ == "__main__":
    main()
