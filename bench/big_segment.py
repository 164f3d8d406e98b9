"""A fast generator of one big legacy segment (1 GiB by default) for the memory benchmark.

The sample-cluster generator encodes every record in Python (~10 MB/s). Here a template
block of log entries is encoded once and replicated; per copy only the 8-byte offset field
of each entry is patched. The message CRC covers neither that field nor anything else that
changes, so every entry stays valid:
- uncompressed v0 and v1 messages: the offset is outside the message;
- v1 wrappers: inner offsets are relative to the first inner message (KIP-31), only the
  wrapper's absolute offset (= its last inner offset) changes.
v0 wrappers are not used: their inner offsets are absolute and live inside the compressed
value, so a copy would need re-encoding.
"""

from __future__ import annotations

import os
import random
import struct
import sys
from pathlib import Path

from migration.formats import names
from migration.formats.legacy import build_wrapper, encode_message
from migration.formats.model import Compression, Record

_OFFSET = struct.Struct(">q")
TEMPLATE_TARGET_BYTES = 1 << 20


def _template(seed: int) -> tuple[bytes, list[tuple[int, int]], int]:
    """(block, [(entry position, last relative offset of the entry)], records in the block)."""
    rng = random.Random(seed)
    pad = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz     ") for _ in range(8192))
    parts: list[bytes] = []
    marks: list[tuple[int, int]] = []
    pos = 0
    offset = 0
    ts = 1_488_326_400_000

    def value(i: int) -> bytes:
        n = rng.choice((40, 80, 160, 320, 640))
        s = rng.randrange(len(pad) - n)
        return b'{"id":%d,"pad":"' % i + pad[s : s + n] + b'"}'

    while pos < TEMPLATE_TARGET_BYTES:
        choice = rng.random()
        if choice < 0.4:  # uncompressed v0 message (the era before 0.10)
            key = None if rng.random() < 0.3 else b"user-%d" % rng.randrange(1000)
            data = encode_message(offset, 0, 0, -1, key, value(offset))
            marks.append((pos, offset))
            offset += 1
        elif choice < 0.55:  # uncompressed v1 message
            data = encode_message(offset, 1, 0, ts + offset, b"user-%d" % rng.randrange(1000), value(offset))
            marks.append((pos, offset))
            offset += 1
        else:  # v1 wrapper, relative inner offsets
            k = rng.randrange(2, 20)
            recs = [Record(offset + i, ts + offset + i, b"user-%d" % rng.randrange(1000), value(offset + i))
                    for i in range(k)]
            data = build_wrapper(recs, magic=1, compression=rng.choice(
                (Compression.GZIP, Compression.SNAPPY, Compression.LZ4)))
            offset += k
            marks.append((pos, offset - 1))
        parts.append(data)
        pos += len(data)
    return b"".join(parts), marks, offset


def write_big_segment(directory: str | os.PathLike[str], size: int = 1 << 30, *, seed: int = 11) -> tuple[Path, int]:
    """Write ``<directory>/00000000000000000000.log`` of about ``size`` bytes (whole template
    copies, at least one); return (path, record count)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    block, marks, per_block = _template(seed)
    copies = max(1, size // len(block))
    path = d / names.log_file_name(0)
    pack = _OFFSET.pack_into
    with open(path, "wb") as f:
        buf = bytearray(block)
        for c in range(copies):
            shift = c * per_block
            for pos, last in marks:
                pack(buf, pos, last + shift)
            f.write(buf)
    return path, copies * per_block


if __name__ == "__main__":
    p, n = write_big_segment(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30)
    print(p, n)
