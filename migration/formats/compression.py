"""Compression codecs as Kafka frames them.

gzip    RFC 1952 members (java.util.zip); the reader accepts concatenated members.
snappy  xerial snappy-java stream framing, not raw snappy nor the official framing:
          magic   82 53 4E 41 50 50 59 00   (0x82 "SNAPPY" 0x00)
          version int32 BE = 1, compatible version int32 BE = 1
          block*  int32 BE compressed length n, n bytes of raw snappy (<= 32 KiB of input each)
        The reader also takes a repeated header mid-stream and input without the magic
        (decoded as one raw snappy block), as snappy-java does. A raw snappy block starts
        with its uncompressed length (uvarint); no block expands more than 64/3 times (a
        3-byte copy of 64 bytes), so a larger declared length is corrupt and is refused
        before anything is allocated for it.
lz4     Kafka's subset of the LZ4 frame format v1.5.1:
          magic 04 22 4D 18 | FLG 0x60 | BD 0x40 | HC | block* | end mark 00 00 00 00
          block: uint32 LE, low 31 bits = n, high bit = stored uncompressed; n bytes
          HC = (XXH32(FLG, BD) >> 8) & 0xFF for magic 1 and 2 (0x82 for 60 40);
          magic 0 frames carry the broken HC computed over magic+FLG+BD (0x1A) (KIP-57).
        The magic-0 reader skips HC; the magic-1/2 reader verifies it.
zstd    standard zstd frames, only inside v2 batches.

Source of the facts: docs/formats.md §1.8.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import xxhash

from migration.formats.errors import CorruptRecordError, KafkaFormatError, UnsupportedCodecError
from migration.formats.model import MAGIC_V0, MAGIC_V2, Compression
from migration.formats.varint import decode_unsigned_varint

SNAPPY_XERIAL_MAGIC = b"\x82SNAPPY\x00"
SNAPPY_XERIAL_HEADER = SNAPPY_XERIAL_MAGIC + struct.pack(">ii", 1, 1)
SNAPPY_BLOCK_SIZE = 32 * 1024
SNAPPY_MAX_EXPANSION = 22  # output bytes per input byte, at most: a 3-byte copy yields 64 bytes

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
LZ4_FLG = 0x60  # version 01, block independence, no checksums, no content size
LZ4_BD = 0x40  # block max size code 4 = 64 KiB
LZ4_BLOCK_SIZE = 64 * 1024
LZ4_UNCOMPRESSED_FLAG = 0x80000000
LZ4_END_MARK = b"\x00\x00\x00\x00"

_I32 = struct.Struct(">i")
_U32_LE = struct.Struct("<I")


def lz4_header_checksum(descriptor: bytes) -> int:
    return (xxhash.xxh32_intdigest(descriptor, seed=0) >> 8) & 0xFF


# The two header checksums Kafka writes for its fixed FLG/BD.
LZ4_HC_CORRECT = lz4_header_checksum(bytes((LZ4_FLG, LZ4_BD)))
LZ4_HC_BROKEN = lz4_header_checksum(LZ4_FRAME_MAGIC + bytes((LZ4_FLG, LZ4_BD)))


def check_codec(codec: int, magic: int, position: int | None = None) -> Compression:
    """Map a codec id to :class:`Compression`, rejecting what Kafka rejects."""
    try:
        compression = Compression(codec)
    except ValueError:
        raise UnsupportedCodecError(
            "unknown compression type id", position=position, expected="0..4", found=codec
        ) from None
    if compression is Compression.ZSTD and magic < MAGIC_V2:
        raise UnsupportedCodecError(
            "zstd is not allowed below magic 2", position=position, expected="codec 0..3", found="zstd"
        )
    return compression


# ---------------------------------------------------------------- gzip


def gzip_compress(data: bytes | memoryview) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def gzip_decompress(data: bytes | memoryview) -> bytes:
    out = []
    buf = data
    while True:
        d = zlib.decompressobj(31)
        out.append(d.decompress(buf))
        if not d.eof:
            raise CorruptRecordError("gzip stream ends before its trailer", expected="complete gzip member")
        rest = d.unused_data
        if not rest:
            break
        buf = rest
    return b"".join(out)


# ---------------------------------------------------------------- snappy (xerial)


def snappy_compress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    parts = [SNAPPY_XERIAL_HEADER]
    for start in range(0, len(view), SNAPPY_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + SNAPPY_BLOCK_SIZE]))
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_decompress(block: memoryview, position: int) -> bytes:
    """One raw snappy block at ``position`` of the stream."""
    try:
        length, _ = decode_unsigned_varint(block, 0)  # the uncompressed length
    except KafkaFormatError as exc:
        raise exc.located(None, position) from None
    if length > SNAPPY_MAX_EXPANSION * len(block):
        raise CorruptRecordError(
            "snappy uncompressed length larger than the block can hold",
            position=position,
            expected=f"<= {SNAPPY_MAX_EXPANSION * len(block)}",
            found=length,
        )
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise CorruptRecordError(f"bad snappy block: {exc}", position=position) from None


def snappy_decompress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != SNAPPY_XERIAL_MAGIC:
        return _snappy_raw_decompress(view, 0)
    out = []
    pos = 16
    end = len(view)
    while pos < end:
        if end - pos >= 16 and bytes(view[pos : pos + 8]) == SNAPPY_XERIAL_MAGIC:
            pos += 16  # a concatenated stream's header
            continue
        if end - pos < 4:
            raise CorruptRecordError(
                "snappy block length cut short", position=pos, expected="4-byte block length"
            )
        (n,) = _I32.unpack_from(view, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(
                "snappy block overruns the stream",
                position=pos - 4,
                expected=f"<= {end - pos} bytes",
                found=n,
            )
        out.append(_snappy_raw_decompress(view[pos : pos + n], pos))
        pos += n
    return b"".join(out)


# ---------------------------------------------------------------- lz4 (Kafka frame)


def lz4_compress(data: bytes | memoryview, magic: int) -> bytes:
    view = memoryview(data)
    hc = LZ4_HC_BROKEN if magic == MAGIC_V0 else LZ4_HC_CORRECT
    parts = [LZ4_FRAME_MAGIC, bytes((LZ4_FLG, LZ4_BD, hc))]
    for start in range(0, len(view), LZ4_BLOCK_SIZE):
        chunk = view[start : start + LZ4_BLOCK_SIZE]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):  # Kafka stores a block raw when compression does not pay
            parts.append(_U32_LE.pack(len(chunk) | LZ4_UNCOMPRESSED_FLAG))
            parts.append(bytes(chunk))
        else:
            parts.append(_U32_LE.pack(len(block)))
            parts.append(block)
    parts.append(LZ4_END_MARK)
    return b"".join(parts)


def lz4_decompress(data: bytes | memoryview, magic: int) -> bytes:
    view = memoryview(data)
    end = len(view)
    if end < 7 or bytes(view[:4]) != LZ4_FRAME_MAGIC:
        raise CorruptRecordError("not an LZ4 frame", position=0, expected="magic 04 22 4D 18")
    flg, bd = view[4], view[5]
    if (flg >> 6) != 1:
        raise CorruptRecordError("unsupported LZ4 frame version", position=4, expected=1, found=flg >> 6)
    if flg & 0x03 or bd & 0x8F:
        raise CorruptRecordError("LZ4 reserved bits set", position=4)
    if not flg & 0x20:
        raise CorruptRecordError("LZ4 dependent blocks are not supported", position=4, expected="independent")
    code = (bd >> 4) & 0x07
    if code < 4:
        raise CorruptRecordError("bad LZ4 block size code", position=5, expected="4..7", found=code)
    max_block = 1 << (2 * code + 8)
    pos = 6
    if flg & 0x08:  # content size present: 8 bytes, included in the header checksum
        pos += 8
    if pos >= end:
        raise CorruptRecordError("LZ4 frame header cut short", position=pos)
    hc = view[pos]
    if magic != MAGIC_V0:
        expected_hc = lz4_header_checksum(bytes(view[4:pos]))
        if hc != expected_hc:
            raise CorruptRecordError(
                "LZ4 frame header checksum mismatch", position=pos, expected=hex(expected_hc), found=hex(hc)
            )
    pos += 1
    block_checksum = bool(flg & 0x10)
    out = []
    scratch = bytearray(max_block)
    while True:
        if pos + 4 > end:
            raise CorruptRecordError(
                "LZ4 frame has no end mark", position=pos, expected="end mark 00 00 00 00"
            )
        (word,) = _U32_LE.unpack_from(view, pos)
        pos += 4
        if word == 0:
            break
        n = word & 0x7FFFFFFF
        if n > max_block or pos + n > end:
            raise CorruptRecordError(
                "LZ4 block larger than allowed or cut short",
                position=pos - 4,
                expected=f"<= {max_block}",
                found=n,
            )
        block = view[pos : pos + n]
        if word & LZ4_UNCOMPRESSED_FLAG:
            out.append(bytes(block))
        else:
            try:
                size = cramjam.lz4.decompress_block_into(block, scratch)
            except Exception as exc:
                raise CorruptRecordError(f"bad LZ4 block: {exc}", position=pos) from None
            out.append(bytes(scratch[:size]))
        pos += n
        if block_checksum:
            if pos + 4 > end:
                raise CorruptRecordError("LZ4 block checksum cut short", position=pos)
            (stored,) = _U32_LE.unpack_from(view, pos)
            actual = xxhash.xxh32_intdigest(block, seed=0)
            if stored != actual:
                raise CorruptRecordError(
                    "LZ4 block checksum mismatch", position=pos, expected=hex(actual), found=hex(stored)
                )
            pos += 4
    return b"".join(out)


# ---------------------------------------------------------------- zstd


def zstd_compress(data: bytes | memoryview) -> bytes:
    return bytes(cramjam.zstd.compress(data, level=3))


def zstd_decompress(data: bytes | memoryview) -> bytes:
    try:
        return bytes(cramjam.zstd.decompress(data))
    except Exception as exc:
        raise CorruptRecordError(f"bad zstd frame: {exc}", position=0) from None


# ---------------------------------------------------------------- dispatch


def compress(codec: Compression, data: bytes | memoryview, magic: int) -> bytes:
    if codec is Compression.GZIP:
        return gzip_compress(data)
    if codec is Compression.SNAPPY:
        return snappy_compress(data)
    if codec is Compression.LZ4:
        return lz4_compress(data, magic)
    if codec is Compression.ZSTD:
        if magic < MAGIC_V2:
            raise UnsupportedCodecError("zstd is not allowed below magic 2", found="zstd")
        return zstd_compress(data)
    raise UnsupportedCodecError("cannot compress with codec", found=codec)


def decompress(codec: Compression, data: bytes | memoryview, magic: int) -> bytes:
    """Decompress a wrapper value (v0/v1) or the records of a v2 batch. Positions in raised
    errors are relative to ``data``."""
    try:
        if codec is Compression.GZIP:
            return gzip_decompress(data)
        if codec is Compression.SNAPPY:
            return snappy_decompress(data)
        if codec is Compression.LZ4:
            return lz4_decompress(data, magic)
        if codec is Compression.ZSTD:
            return zstd_decompress(data)
    except zlib.error as exc:
        raise CorruptRecordError(f"bad gzip stream: {exc}", position=0) from None
    raise UnsupportedCodecError("cannot decompress with codec", found=codec)
