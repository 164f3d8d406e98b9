"""Codecs as Kafka frames them: corrupt compressed data is a format error with a position,
never the codec library's own exception (cases found by tests/fuzz). The libraries behind them
(ISA-L, libdeflate, cramjam; zlib as the fallback) are checked against kafka-python's codecs."""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kp

from migration.formats import compression as codecs
from migration.formats import core
from migration.formats.errors import CorruptRecordError, KafkaFormatError
from migration.formats.file_records import iterate_batches
from migration.formats.legacy import LegacyBatch, encode_message
from migration.formats.model import Compression

TEXT = b'{"id":1,"page":"/checkout"}' * 20


@pytest.mark.parametrize("data", [
    b"hello world",  # not snappy at all: the raw path (no xerial magic)
    codecs.gzip_compress(TEXT),
    codecs.snappy_compress(TEXT)[20:-3],  # a raw block cut short
], ids=["text", "gzip", "cut-raw-block"])
def test_snappy_without_xerial_magic_that_does_not_decode_is_corrupt(data):
    with pytest.raises(CorruptRecordError, match="bad snappy block") as exc:
        codecs.decompress(Compression.SNAPPY, data, 1)
    assert exc.value.position == 0


def test_snappy_declared_length_beyond_any_expansion_is_refused_before_decoding():
    # uncompressed length 2**32 - 1 in a 6-byte block: no snappy block expands 700 million times
    data = b"\xff\xff\xff\xff\x0f\x00"
    with pytest.raises(CorruptRecordError, match="uncompressed length larger") as exc:
        codecs.snappy_decompress(data)
    assert exc.value.found == 2**32 - 1


def test_snappy_bad_block_inside_a_xerial_stream_names_the_block_position():
    block = b"\xff\xff"  # an uncompressed length varint cut short
    data = codecs.SNAPPY_XERIAL_HEADER + codecs.snappy_compress(TEXT)[16:] + struct.pack(">i", len(block)) + block
    with pytest.raises(KafkaFormatError) as exc:
        codecs.snappy_decompress(data)
    assert exc.value.position == len(data) - len(block)


def test_snappy_expansion_bound_holds_for_the_most_compressible_input():
    zeros = bytes(codecs.SNAPPY_BLOCK_SIZE)
    assert codecs.snappy_decompress(codecs.snappy_compress(zeros)) == zeros


def test_corrupt_raw_snappy_wrapper_value_is_a_located_format_error():
    entry = encode_message(0, 0, int(Compression.SNAPPY), -1, None, b"not snappy")
    (wrapper,) = iterate_batches(entry, path="00000000000000000000.log")
    with pytest.raises(CorruptRecordError) as exc:
        wrapper.inner()
    assert exc.value.position == len(entry) - len(b"not snappy")


# ---------------------------------------------------------------- the libraries behind the codecs
# The product reads gzip with ISA-L and writes it with libdeflate, zlib standing in for either when
# it cannot be imported; snappy and lz4 are framed here over cramjam's raw block calls.
# kafka-python's codecs (kafka.codec) are the independent oracle both ways.

ROOT = Path(__file__).resolve().parents[2]


def _edge_payloads() -> list[bytes]:
    rnd = random.Random(14)
    noise = rnd.randbytes(70_000)  # incompressible: lz4 stores its blocks raw
    return [
        b"x",
        TEXT[:codecs.LIBDEFLATE_STORED_MAX],  # the largest input libdeflate would store raw
        TEXT[: codecs.LIBDEFLATE_STORED_MAX + 1],
        TEXT,
        (TEXT * 60)[: codecs.SNAPPY_BLOCK_SIZE],  # exactly one xerial block
        (TEXT * 60)[: codecs.SNAPPY_BLOCK_SIZE + 1],
        (TEXT * 120)[: codecs.LZ4_BLOCK_SIZE],  # exactly one lz4 block
        (TEXT * 120)[: codecs.LZ4_BLOCK_SIZE + 1],
        bytes(200_000),
        noise,
        bytes(50_000) + noise[:20_000],  # a compressed lz4 block, then a stored one
    ]


@pytest.fixture(scope="module")
def cluster_payloads(sample_cluster_template) -> list[bytes]:
    """Every compressed wrapper value and v2 records payload of the sample cluster, decompressed:
    the data the upgrade compresses again."""
    out = []
    for seg in sorted(Path(sample_cluster_template.root).glob("broker-*/kafka-logs/*/*.log")):
        for batch in iterate_batches(seg.read_bytes(), path=seg):
            if not batch.is_compressed:
                continue
            if isinstance(batch, LegacyBatch):
                _, value, _ = batch._key_value()
                out.append(codecs.decompress(batch.compression, value, batch.magic))
            else:
                out.append(batch.records_payload())
    assert len(out) > 500  # the edge payloads add the multi-block sizes
    return out


@pytest.fixture(scope="module")
def payloads(cluster_payloads) -> list[bytes]:
    return cluster_payloads[::5] + _edge_payloads()


def _zlib_gzip(data: bytes, level: int = 6) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def test_the_fast_libraries_are_active_here():
    with core.use(core.PYTHON):
        libs = codecs.codec_libraries()
        assert libs["gzip read"].startswith("isal ")
        assert libs["gzip write"].startswith("libdeflate ") and libs["gzip write"].endswith("level 6")
        assert codecs.gzip_decompress is codecs.gzip_decompress_isal is codecs.gzip_decompress_py
        assert codecs.gzip_compress is codecs.gzip_compress_libdeflate is codecs.gzip_compress_py
    with core.use(core.COMPILED):  # libdeflate called from C, ISA-L for the streams it leaves
        assert core.compiled.gzip_library() == "libdeflate" and core.compiled.gzip_unavailable() == ""
        assert codecs.gzip_decompress is core.compiled.gzip_decompress
        assert codecs.gzip_compress is core.compiled.gzip_compress
        libs = codecs.codec_libraries()
        assert libs["gzip read"].startswith("libdeflate (deflate ") and "core, isal " in libs["gzip read"]
        assert libs["gzip write"].startswith("libdeflate (deflate ") and libs["gzip write"].endswith("level 6")


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_kafka_python_decodes_what_we_write(payloads, magic):
    for data in payloads:
        assert kp.gzip_decode(codecs.compress(Compression.GZIP, data, magic)) == data
        assert kp.snappy_decode(codecs.compress(Compression.SNAPPY, data, magic)) == data
        lz4 = codecs.compress(Compression.LZ4, data, magic)
        # magic 0 carries the broken header checksum: lz4.frame refuses it, the old-Kafka decoder fixes it
        assert (kp.lz4_decode_old_kafka if magic == 0 else kp.lz4_decode)(lz4) == data
        if magic == 2:
            assert kp.zstd_decode(codecs.compress(Compression.ZSTD, data, magic)) == data


def test_we_decode_what_kafka_python_and_zlib_write(payloads):
    for data in payloads:
        assert codecs.decompress(Compression.GZIP, kp.gzip_encode(data), 1) == data  # level 9
        assert codecs.decompress(Compression.GZIP, _zlib_gzip(data), 1) == data
        assert codecs.decompress(Compression.SNAPPY, kp.snappy_encode(data), 1) == data
        assert codecs.decompress(Compression.SNAPPY, kp.snappy_encode(data, xerial_compatible=False), 1) == data
        # lz4.frame writes a content size (8 more header bytes, covered by the checksum)
        assert codecs.decompress(Compression.LZ4, kp.lz4_encode(data), 2) == data
        assert codecs.decompress(Compression.LZ4, kp.lz4_encode_old_kafka(data), 0) == data
        assert codecs.decompress(Compression.ZSTD, kp.zstd_encode(data), 2) == data


def test_a_memoryview_decodes_like_bytes(payloads):
    for data in payloads[::7]:
        for codec, magic in ((Compression.GZIP, 1), (Compression.SNAPPY, 1), (Compression.LZ4, 0),
                             (Compression.LZ4, 2), (Compression.ZSTD, 2)):
            framed = b"--" + codecs.compress(codec, data, magic)
            assert codecs.decompress(codec, memoryview(framed)[2:], magic) == data


def test_gzip_output_is_no_larger_than_zlib_level_6_on_the_sample_cluster(cluster_payloads):
    ours = sum(len(codecs.gzip_compress(p)) for p in cluster_payloads)
    theirs = sum(len(_zlib_gzip(p)) for p in cluster_payloads)
    assert ours <= theirs, f"libdeflate {ours} > zlib {theirs} bytes"


@pytest.mark.parametrize("size", range(codecs.LIBDEFLATE_STORED_MAX + 1))
def test_gzip_inputs_libdeflate_would_store_raw_go_to_zlib(size):
    data = (TEXT * 2)[:size]
    assert codecs.gzip_compress(data) == _zlib_gzip(data)


def test_gzip_output_is_level_6_not_zlib_bytes():
    # libdeflate's own stream: any valid gzip is what Kafka needs (GZIPInputStream reads it)
    data = TEXT * 50
    out = codecs.gzip_compress(data)
    assert type(out) is bytes and out != _zlib_gzip(data) and kp.gzip_decode(out) == data


# ---------------------------------------------------------------- zlib, the fallback


@pytest.fixture
def zlib_codecs(monkeypatch):
    """The module as it runs where isal and deflate cannot be imported."""
    monkeypatch.setattr(codecs, "gzip_decompress", codecs.gzip_decompress_zlib)
    monkeypatch.setattr(codecs, "gzip_compress", codecs.gzip_compress_zlib)
    return codecs


def test_zlib_fallback_round_trips_and_says_so(zlib_codecs, payloads):
    libs = zlib_codecs.codec_libraries()
    assert libs["gzip read"].startswith("zlib ") and libs["gzip write"].startswith("zlib ")
    for data in payloads[::3]:
        out = zlib_codecs.compress(Compression.GZIP, data, 1)
        assert out == _zlib_gzip(data)
        assert kp.gzip_decode(out) == data
        assert zlib_codecs.decompress(Compression.GZIP, out, 1) == data
        assert zlib_codecs.decompress(Compression.GZIP, bytes(codecs.gzip_compress_libdeflate(data)), 1) == data


@pytest.mark.parametrize("backend", ["isal", "zlib"])
def test_gzip_reader_strictness_holds_on_both_libraries(backend):
    read = codecs.gzip_decompress_isal if backend == "isal" else codecs.gzip_decompress_zlib
    one = codecs.gzip_compress(TEXT)
    two = one + codecs.gzip_compress_zlib(TEXT[:100])
    assert read(two) == TEXT + TEXT[:100]
    with pytest.raises(CorruptRecordError, match="ends before its trailer") as exc:
        read(one[:-4])
    assert exc.value.expected == "complete gzip member"
    with pytest.raises(CorruptRecordError, match="bad gzip stream") as exc:
        read(one[:-8] + bytes([one[-8] ^ 1]) + one[-7:])  # CRC32 of the data
    assert exc.value.position == 0
    with pytest.raises(CorruptRecordError, match="bad gzip stream") as exc:
        read(one + one[:-1] + bytes([one[-1] ^ 1]))  # ISIZE of the second member
    assert exc.value.position == len(one)
    reserved = one[:3] + bytes([one[3] | 0x20]) + one[4:]
    with pytest.raises(CorruptRecordError, match="bad gzip stream") as exc:
        read(one + reserved)  # ISA-L takes reserved FLG bits, zlib does not: neither reader may
    assert exc.value.position == len(one) + (3 if backend == "isal" else 0)
    with pytest.raises(CorruptRecordError):
        read(one + b"\x00\x00")  # bytes after the last member
    with pytest.raises(CorruptRecordError):
        read(b"")


def _mutations(seed: bytes, data: st.DataObject) -> bytes:
    out = bytearray(seed)
    for _ in range(data.draw(st.integers(1, 2))):
        kind = data.draw(st.sampled_from(["flip", "byte", "cut", "append"]))
        if kind == "cut":
            del out[data.draw(st.integers(0, len(out))):]
        elif kind == "append":
            out += data.draw(st.binary(min_size=1, max_size=24))
        elif out:  # half the time in the headers and first block length, where the framing is
            at = data.draw(st.one_of(st.integers(0, min(len(out), 24) - 1), st.integers(0, len(out) - 1)))
            out[at] = out[at] ^ (1 << data.draw(st.integers(0, 7))) if kind == "flip" else data.draw(
                st.integers(0, 255))
    return bytes(out)


def _verdict(fn, *args):
    try:
        return "ok", fn(*args)
    except KafkaFormatError as exc:
        return "error", (type(exc), exc.message, exc.position, exc.expected, exc.found)


GZIP_SEEDS = [
    codecs.gzip_compress(TEXT),
    codecs.gzip_compress_zlib(TEXT[:200]) + codecs.gzip_compress(TEXT[200:]),
    kp.gzip_encode(TEXT[:40]),
    codecs.gzip_compress(b""),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(GZIP_SEEDS), data=st.data())
def test_isal_and_zlib_readers_agree_on_damaged_streams(seed, data):
    damaged = _mutations(seed, data)
    isal_kind, isal_out = _verdict(codecs.gzip_decompress_isal, damaged)
    zlib_kind, zlib_out = _verdict(codecs.gzip_decompress_zlib, damaged)
    assert isal_kind == zlib_kind
    if isal_kind == "ok":
        assert isal_out == zlib_out
    else:  # the library's words may differ, never the kind of error
        assert isal_out[0] is zlib_out[0]


# ---------------------------------------------------------------- deflate codes zlib refuses
# libdeflate decodes a few codes RFC 1951 reserves instead of refusing them (its decode tables
# map the literal/length symbols 286 and 287 to length 258 and the distance codes 30 and 31 to
# distance 24,577 and up), and it takes a dynamic block header declaring more than 286
# literal/length or 30 distance codes. zlib, behind Java's Inflater and so Kafka's reader,
# refuses all of them, and so does ISA-L. The streams below are built bit by bit.


class _Bits:
    """Deflate's bit order: fields from the low bit up, Huffman codes from their high bit."""

    def __init__(self) -> None:
        self.value = 0
        self.count = 0

    def put(self, value: int, width: int) -> _Bits:
        self.value |= value << self.count
        self.count += width
        return self

    def code(self, code: int, width: int) -> _Bits:  # a Huffman code, first bit its highest
        return self.put(int(f"{code:0{width}b}"[::-1], 2), width)

    def fixed_literal_or_length(self, symbol: int) -> _Bits:  # RFC 1951 §3.2.6
        if symbol < 144:
            return self.code(0x30 + symbol, 8)
        if symbol < 256:
            return self.code(0x190 + symbol - 144, 9)
        if symbol < 280:
            return self.code(symbol - 256, 7)
        return self.code(0xC0 + symbol - 280, 8)

    def bytes(self) -> bytes:
        return self.value.to_bytes((self.count + 7) // 8, "little")


def _gzip_member(deflate: bytes, content: bytes) -> bytes:
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + deflate
            + struct.pack("<II", zlib.crc32(content), len(content)))


def _fixed_block(bits: _Bits, final: bool, symbols: list[tuple[int, int]]) -> _Bits:
    """A fixed-Huffman block of literals, as (byte, 0), and matches, as (length symbol, distance
    code): only length symbols without extra bits (257-264, 285-287), the distance's extra bits
    all zero."""
    bits.put(int(final), 1).put(1, 2)
    for symbol, distance in symbols:
        bits.fixed_literal_or_length(symbol)
        if symbol > 256:
            bits.code(distance, 5)
            if distance >= 4:
                bits.put(0, (distance - 2) // 2)
    return bits.fixed_literal_or_length(256)


def _a_then_258s(count: int, length_symbol: int = 285) -> list[tuple[int, int]]:
    return [(ord("a"), 0)] + [(length_symbol, 0)] * count


def _dynamic_two_literals(final: bool, hlit: int, hdist: int) -> _Bits:
    """A dynamic block coding 'a' and end-of-block in one bit each, declaring HLIT + 257
    literal/length and HDIST + 1 distance code lengths (all others zero), then "aa"."""
    bits = _Bits().put(int(final), 1).put(2, 2).put(hlit, 5).put(hdist, 5).put(15, 4)
    # code length code lengths in their stored order 16 17 18 0 8 7 9 6 10 5 11 4 12 3 13 2 14 1 15:
    # 0 and 1 get 2 bits, 18 (a run of 11-138 zeros) gets 1
    precode = {0: 2, 1: 2, 18: 1}
    for symbol in (16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15):
        bits.put(precode.get(symbol, 0), 3)
    codes = {18: (0, 1), 0: (2, 2), 1: (3, 2)}  # canonical: 18 -> 0, 0 -> 10, 1 -> 11

    def zeros(run: int) -> None:
        while run >= 11:
            step = min(run, 138)
            bits.code(*codes[18]).put(step - 11, 7)
            run -= step
        for _ in range(run):
            bits.code(*codes[0])

    zeros(97)
    bits.code(*codes[1])  # 'a': length 1
    zeros(256 - 98)
    bits.code(*codes[1])  # end of block: length 1
    zeros(hlit + hdist + 1)  # literal/length codes 257 and up, then every distance code
    return bits.code(0, 1).code(0, 1).code(1, 1)  # 'a' 'a' end of block


DIVERGING = {
    "fixed, length symbol 287 (the bit flip hypothesis found)": _gzip_member(
        _fixed_block(_Bits(), True, _a_then_258s(1, 287)).bytes(), b"a" * 259),
    "fixed, length symbol 286": _gzip_member(_fixed_block(_Bits(), True, _a_then_258s(2, 286)).bytes(), b"a" * 517),
    "fixed, distance code 30": _gzip_member(
        _fixed_block(_Bits(), True, _a_then_258s(96) + [(257, 30)]).bytes(), b"a" * (1 + 96 * 258 + 3)),
    "fixed, distance code 31": _gzip_member(
        _fixed_block(_Bits(), True, _a_then_258s(96) + [(257, 31)]).bytes(), b"a" * (1 + 96 * 258 + 3)),
    "dynamic, 287 literal/length code lengths": _gzip_member(_dynamic_two_literals(True, 30, 0).bytes(), b"aa"),
    "dynamic, 288 literal/length code lengths": _gzip_member(_dynamic_two_literals(True, 31, 0).bytes(), b"aa"),
    "dynamic, 31 distance code lengths": _gzip_member(_dynamic_two_literals(True, 0, 30).bytes(), b"aa"),
    "dynamic, 32 distance code lengths": _gzip_member(_dynamic_two_literals(True, 0, 31).bytes(), b"aa"),
    "a good block, then fixed with length symbol 287": _gzip_member(
        _fixed_block(_fixed_block(_Bits(), False, _a_then_258s(1)), True, _a_then_258s(1, 287)).bytes(),
        b"a" * 518),
    "a good dynamic block, then fixed with distance code 30": _gzip_member(
        _fixed_block(_dynamic_two_literals(False, 0, 0), True,
                     _a_then_258s(96) + [(257, 30)]).bytes(), b"aa" + b"a" * (1 + 96 * 258 + 3)),
}
# The same streams within the rules: what the compiled reader must still read in one call.
REGULAR = {
    "fixed, length symbol 285": _gzip_member(_fixed_block(_Bits(), True, _a_then_258s(2)).bytes(), b"a" * 517),
    "fixed, distance code 29": _gzip_member(
        _fixed_block(_Bits(), True, _a_then_258s(96) + [(257, 29)]).bytes(), b"a" * (1 + 96 * 258 + 3)),
    "dynamic, 286 and 30 code lengths": _gzip_member(_dynamic_two_literals(True, 29, 29).bytes(), b"aa"),
}


# ---------------------------------------------------------------- gzip from the compiled core
# It takes Kafka's single member (no header fields) in one libdeflate call and hands every
# other stream, and every error, to the Python reader: same data, same error, same position.


def _gzip_with_header_fields(data: bytes, flags: int) -> bytes:
    member = codecs.gzip_compress_zlib(data)
    extra = b"".join(field for bit, field in ((0x04, b"\x02\x00ab"), (0x08, b"name\x00"), (0x10, b"note\x00"))
                     if flags & bit)
    head = member[:3] + bytes([flags]) + member[4:10] + extra
    if flags & 0x02:  # FHCRC: the low 16 bits of the CRC-32 of the header
        head += struct.pack("<H", zlib.crc32(head) & 0xFFFF)
    return head + member[10:]


def _gzip_of_two_blocks(data: bytes) -> bytes:
    """One member whose deflate stream has two blocks (a full flush ends the first)."""
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    half = len(data) // 2
    return z.compress(data[:half]) + z.flush(zlib.Z_FULL_FLUSH) + z.compress(data[half:]) + z.flush()


GZIP_COMPILED_SEEDS = GZIP_SEEDS + [
    _gzip_with_header_fields(TEXT, 0x08),
    _gzip_with_header_fields(TEXT[:300], 0x02 | 0x04 | 0x10),
    codecs.gzip_compress_py(bytes(70_000)),
    _gzip_of_two_blocks(TEXT),
    *REGULAR.values(),  # fixed blocks: a flipped bit turns length symbol 285 into 287
]
needs_compiled = pytest.mark.skipif(core.compiled is None, reason="the compiled core is not built")


@needs_compiled
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(GZIP_COMPILED_SEEDS), data=st.data())
def test_compiled_gzip_reader_matches_the_python_reader_on_damaged_streams(seed, data):
    damaged = _mutations(seed, data)
    assert _verdict(core.compiled.gzip_decompress, damaged) == _verdict(codecs.gzip_decompress_py, damaged)


@needs_compiled
def test_compiled_gzip_reader_takes_kafkas_member_and_leaves_the_rest(monkeypatch):
    handed: list[bytes] = []
    python_reader = codecs.gzip_decompress_py
    monkeypatch.setattr(codecs, "gzip_decompress_py", lambda data: handed.append(bytes(data)) or python_reader(data))
    gunzip = core.compiled.gzip_decompress
    one = codecs.gzip_compress_py(TEXT)
    for taken in (one, codecs.gzip_compress_zlib(TEXT), kp.gzip_encode(TEXT), memoryview(b"--" + one)[2:]):
        assert gunzip(taken) == TEXT
    assert gunzip(codecs.gzip_compress_py(b"")) == b""
    small_fixed = REGULAR["fixed, distance code 29"]  # one fixed block, walked after libdeflate's read
    assert gunzip(small_fixed) == b"a" * (1 + 96 * 258 + 3)
    assert handed == []
    z = zlib.compressobj(6, zlib.DEFLATED, 31, 8, zlib.Z_FIXED)
    large_fixed = z.compress(bytes(random.Random(3).choices(b"abcd", k=6000))) + z.flush()  # one fixed block over 1 KiB
    left = [
        one + one,  # two members
        one + b"\x00",  # a byte after the member
        _gzip_with_header_fields(TEXT, 0x08),  # FNAME
        _gzip_with_header_fields(TEXT, 0x02),  # FHCRC: libdeflate skips the header CRC, zlib checks it
        one[:-4] + struct.pack("<I", len(TEXT) - 1),  # ISIZE smaller than the data
        one[:-4] + struct.pack("<I", len(TEXT) + 1),  # ... larger
        one[:-8] + bytes([one[-8] ^ 1]) + one[-7:],  # the CRC-32
        _gzip_of_two_blocks(TEXT),  # several deflate blocks
        large_fixed,
    ]
    verdicts = [_verdict(gunzip, stream) for stream in left]
    assert handed == left
    assert [kind for kind, _ in verdicts] == ["ok", "error", "ok", "ok", "error", "error", "error", "ok", "ok"]
    assert large_fixed[10] & 7 == 3 and len(large_fixed) > 1024 + 18
    assert _gzip_of_two_blocks(TEXT)[10] & 1 == 0


@needs_compiled
def test_compiled_gzip_reader_believes_no_isize_beyond_deflates_expansion():
    import tracemalloc

    one = codecs.gzip_compress_py(TEXT)
    lying = one[:-4] + struct.pack("<I", 0xFFFF_FFF0)  # 4 GiB from a 100-byte stream
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="bad gzip stream"):
            core.compiled.gzip_decompress(lying)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@needs_compiled
def test_compiled_gzip_writer_gives_the_deflate_packages_bytes(payloads):
    big = random.Random(5).randbytes(1 << 20) + TEXT * 2000  # beyond the output buffer it keeps
    for data in payloads + [b"", TEXT[: codecs.LIBDEFLATE_STORED_MAX], TEXT[: codecs.LIBDEFLATE_STORED_MAX + 1], big]:
        out = core.compiled.gzip_compress(data)
        assert type(out) is bytes and out == codecs.gzip_compress_py(data)
        assert core.compiled.gzip_compress(memoryview(b"--" + data)[2:]) == out


def test_without_isal_and_deflate_the_module_falls_back_to_zlib():
    # a fresh interpreter where both imports fail, as on a platform without their wheels
    code = (
        "import sys; sys.modules['isal'] = None; sys.modules['deflate'] = None\n"
        "from migration.formats import compression as c\n"
        "data = b'fallback' * 1000\n"
        "assert c.gzip_compress is c.gzip_compress_zlib and c.gzip_decompress is c.gzip_decompress_zlib\n"
        "assert c.gzip_decompress_isal is None\n"
        "assert c.decompress(c.Compression.GZIP, c.compress(c.Compression.GZIP, data, 1), 1) == data\n"
        "from migration.formats import core\n"  # the compiled core cannot call libdeflate either
        "assert c.gzip_compress is c.gzip_compress_zlib and c.gzip_decompress is c.gzip_decompress_zlib\n"
        "assert core.compiled is None or 'not importable' in core.compiled.gzip_unavailable()\n"
        "print(c.codec_libraries()['gzip read'], '|', c.codec_libraries()['gzip write'])\n"
    )
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    read, write = res.stdout.strip().split(" | ")
    assert read.startswith("zlib ") and write.startswith("zlib ")


# ---------------------------------------------------------------- the fast paths of the framing
# A one-block xerial stream and a one-block Kafka LZ4 frame skip the general loop; on any input
# they must do what the careful path does: same data, or the same error at the same position.

SNAPPY_SEEDS = [codecs.snappy_compress(TEXT), codecs.snappy_compress(bytes(20_000)), codecs.snappy_compress(b"ab")]
LZ4_SEEDS = [
    codecs.lz4_compress(TEXT, 0),
    codecs.lz4_compress(TEXT, 2),
    codecs.lz4_compress(random.Random(3).randbytes(300), 1),  # stored raw
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(SNAPPY_SEEDS), data=st.data())
def test_snappy_one_block_path_matches_the_careful_path(seed, data):
    damaged = _mutations(seed, data)
    assert _verdict(codecs.snappy_decompress, damaged) == _verdict(codecs._snappy_stream, memoryview(damaged))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(LZ4_SEEDS), magic=st.sampled_from([0, 1, 2]), data=st.data())
def test_lz4_one_block_path_matches_the_careful_path(seed, magic, data):
    damaged = _mutations(seed, data)
    assert _verdict(codecs.lz4_decompress, damaged, magic) == _verdict(codecs._lz4_frame, memoryview(damaged), magic)


def test_snappy_and_lz4_fast_paths_are_taken(monkeypatch):
    def careful(*args):
        raise AssertionError("careful path taken")

    monkeypatch.setattr(codecs, "_snappy_stream", careful)
    monkeypatch.setattr(codecs, "_lz4_frame", careful)
    assert codecs.snappy_decompress(codecs.snappy_compress(TEXT)) == TEXT
    for magic in (0, 1, 2):
        assert codecs.lz4_decompress(codecs.lz4_compress(TEXT, magic), magic) == TEXT


def test_lz4_block_larger_than_its_frame_allows_fails_after_a_larger_frame():
    # a 4 MiB-block frame grows this thread's buffer; a 64 KiB-block frame must still refuse a
    # block that inflates beyond 64 KiB
    data = bytes(100_000)
    block = bytes(cramjam.lz4.compress_block(data, store_size=False))
    body = struct.pack("<I", len(block)) + block + codecs.LZ4_END_MARK
    big = codecs.LZ4_FRAME_MAGIC + bytes((0x60, 0x70, codecs.lz4_header_checksum(b"\x60\x70"))) + body
    assert codecs.lz4_decompress(big, 2) == data
    with pytest.raises(CorruptRecordError, match="bad LZ4 block") as exc:
        codecs.lz4_decompress(codecs.LZ4_HEADER + body, 2)
    assert exc.value.position == 11


@pytest.mark.parametrize("stream", list(DIVERGING.values()), ids=list(DIVERGING))
def test_zlib_and_isal_refuse_the_reserved_deflate_codes(stream):
    with pytest.raises(zlib.error):
        zlib.decompress(stream, 31)
    kind, _ = _verdict(codecs.gzip_decompress_py, stream)
    assert kind == "error"


@pytest.mark.parametrize("stream", list(REGULAR.values()), ids=list(REGULAR))
def test_the_crafted_streams_within_the_rules_are_read_by_every_reader(stream):
    content = zlib.decompress(stream, 31)
    assert codecs.gzip_decompress_py(stream) == content
    if core.compiled is not None:
        assert core.compiled.gzip_decompress(stream) == content


@needs_compiled
@pytest.mark.parametrize("stream", list(DIVERGING.values()), ids=list(DIVERGING))
def test_compiled_gzip_reader_refuses_the_reserved_deflate_codes_as_the_python_reader_does(stream):
    assert _verdict(core.compiled.gzip_decompress, stream) == _verdict(codecs.gzip_decompress_py, stream)
