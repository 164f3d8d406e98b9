"""The converter a user would write with kafka-python: the baseline of the upgrade benchmark.

Reads a segment with ``kafka.record.MemoryRecords`` and writes every legacy batch again in the
target format: v2 with ``DefaultRecordBatchBuilder`` (one batch per input batch, same codec),
v1 with ``LegacyRecordBatchBuilder`` (a wrapper keeps its codec, inner offsets relative).
Batches already in the target format are copied. No validation beyond what kafka-python
does while reading, no digest, no indexes: a lower bound of the work, not a product.
"""

from __future__ import annotations

import struct
import sys
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

_OFFSET = struct.Struct(">q")


def convert_segment(src: Path, dst: Path, target: int) -> tuple[int, int]:
    """Convert ``src`` into ``dst``; return (records, input bytes)."""
    data = src.read_bytes()
    mr = MemoryRecords(data)
    out = bytearray()
    records = 0
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        recs = list(batch)
        records += len(recs)
        if batch.magic >= target:
            out += batch._buffer  # the raw batch: nothing to convert
            continue
        codec = batch.compression_type
        base = recs[0].offset
        if target == 2:
            b2 = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, batch_size=1 << 30)
            for r in recs:
                ts = r.timestamp if r.timestamp is not None else -1
                b2.append(r.offset - base, ts, r.key, r.value, [])
            built = b2.build()
            _OFFSET.pack_into(built, 0, base)  # the builder writes base offset 0 (outside the CRC)
            out += built
        else:
            b1 = LegacyRecordBatchBuilder(1, codec, batch_size=1 << 30)
            for r in recs:
                ts = r.timestamp if r.timestamp is not None else -1
                b1.append(r.offset - base if codec else r.offset, ts, r.key, r.value)
            built = b1.build()
            if codec:
                _OFFSET.pack_into(built, 0, recs[-1].offset)  # wrapper offset = last inner offset
            out += built
    dst.write_bytes(out)
    return records, len(data)


def main(argv: list[str]) -> None:
    """``python -m bench.kafka_python_converter TARGET OUT_DIR SEGMENT...``: prints JSON."""
    import json

    target = int(argv[0].lstrip("v"))
    out_dir = Path(argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    records = size = 0
    t = time.perf_counter()
    for i, seg in enumerate(argv[2:]):
        r, n = convert_segment(Path(seg), out_dir / f"{i:05d}.log", target)
        records += r
        size += n
    print(json.dumps({"seconds": time.perf_counter() - t, "bytes": size, "records": records}))


if __name__ == "__main__":
    main(sys.argv[1:])
