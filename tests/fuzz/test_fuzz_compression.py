"""Fuzz target: the codecs as Kafka frames them (gzip members, xerial snappy and raw snappy,
Kafka's LZ4 frame with the broken and the correct header checksum, zstd). The seed name says
the codec and the magic (``lz4.v0``); every input also goes through the other codecs."""

from __future__ import annotations

from fuzz.harness import Target, attempt
from migration.formats.compression import compress, decompress
from migration.formats.model import Compression


def _codec_and_magic(kind: str) -> tuple[Compression, int]:
    stem, magic = kind.rsplit(".v", 1)
    return Compression[stem.split("-")[0].upper()], int(magic)


def run(data: bytes, kind: str) -> None:
    codec, magic = _codec_and_magic(kind)
    out = attempt(decompress, codec, data, magic)
    attempt(decompress, codec, memoryview(data), magic)
    if out is not None:
        again = attempt(compress, codec, out, magic)
        if again is not None:
            assert decompress(codec, again, magic) == out, "compress/decompress round trip"
    for other in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        for m in (0, 2):
            if (other, m) != (codec, magic):
                attempt(decompress, other, data, m)


def seed_check(data: bytes, name: str) -> None:
    codec, magic = _codec_and_magic(name)
    decompress(codec, data, magic)


def hot(data: bytes) -> list[int]:
    return list(range(min(len(data), 24)))  # stream headers: magics, flags, first block length


TARGET = Target("compression", run, hot=hot, quick_examples=800, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
