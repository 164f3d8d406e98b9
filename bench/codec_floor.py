"""The codec floor of the upgrade: what any converter that recompresses must spend, at least.

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

The codec functions are the product's (gzip read with ISA-L and written with libdeflate when
they import, else zlib): ``libraries`` in the output names them (:func:`compression.codec_libraries`).

``python -m bench.codec_floor TARGET SEGMENT...`` prints one JSON line: seconds, bytes (of the
segments), wrappers, compressed_bytes (their values), uncompressed_bytes, and ``by_codec``
(seconds per codec) with ``by_codec_detail`` (decompress/compress seconds, wrappers, bytes),
and ``libraries``.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path

from migration.formats import compression as codecs
from migration.formats.file_records import FileRecords
from migration.formats.legacy import LegacyBatch
from migration.formats.model import Compression


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


def main(argv: list[str]) -> None:
    target = int(argv[0].lstrip("v"))
    if target not in (1, 2):
        raise SystemExit(f"target must be v1 or v2, not {argv[0]}")
    detail: dict[str, dict[str, float]] = {}
    seconds = 0.0
    size = wrappers = compressed = uncompressed = 0
    perf = time.perf_counter
    for seg in argv[1:]:
        p = Path(seg)
        size += p.stat().st_size
        values = wrapper_values(p, target)  # untimed: reading and walking the batches
        gc.disable()
        t = perf()
        for codec, magic, value in values:
            t0 = perf()
            data = codecs.decompress(codec, value, magic)
            t1 = perf()
            codecs.compress(codec, data, target)  # what the rewrite writes: same codec, target magic
            t2 = perf()
            d = detail.setdefault(
                codec.name.lower(),
                dict.fromkeys(("decompress_s", "compress_s", "wrappers", "compressed_bytes", "uncompressed_bytes"), 0),
            )
            d["decompress_s"] += t1 - t0
            d["compress_s"] += t2 - t1
            d["wrappers"] += 1
            d["compressed_bytes"] += len(value)
            d["uncompressed_bytes"] += len(data)
        seconds += perf() - t
        gc.enable()
        wrappers += len(values)
        compressed += sum(len(v) for _, _, v in values)
    uncompressed = int(sum(d["uncompressed_bytes"] for d in detail.values()))
    for d in detail.values():
        d["decompress_s"] = round(d["decompress_s"], 4)
        d["compress_s"] = round(d["compress_s"], 4)
    by_codec = {name: round(d["decompress_s"] + d["compress_s"], 4) for name, d in sorted(detail.items())}
    print(
        json.dumps(
            {
                "seconds": seconds,
                "bytes": size,
                "wrappers": wrappers,
                "compressed_bytes": compressed,
                "uncompressed_bytes": uncompressed,
                "by_codec": by_codec,
                "by_codec_detail": dict(sorted(detail.items())),
                "libraries": codecs.codec_libraries(),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
