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

Libraries: in Python, gzip is read with ISA-L (``isal``) and written with libdeflate (``deflate``)
at Kafka's default level, zlib standing in for either when its package cannot be imported. The
functions that run are chosen once into a :class:`Codecs` object per record core:
:data:`PYTHON_CODECS` here, and the compiled core's (``_ccompression.CODECS``), whose gzip pair
calls libdeflate (the deflate package's copy) from C and hands every stream it does not take,
and every error, to this module's reader; ``core.py`` binds the active core's functions to this
module's codec names (:func:`activate`), which :func:`compress` and :func:`decompress` call
(:func:`codec_libraries` says which run). snappy, lz4 and zstd are cramjam's raw block calls,
framed here (and for one-block frames in the compiled core). Kafka needs any valid gzip stream,
not zlib's bytes: its reader is ``GZIPInputStream`` (GzipCompression.java).

Source of the facts: docs/formats.md §1.8.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable
from typing import Protocol

import cramjam
import xxhash

from migration.formats.errors import CorruptRecordError, KafkaFormatError, UnsupportedCodecError
from migration.formats.model import MAGIC_V0, MAGIC_V2, Compression
from migration.formats.varint import decode_unsigned_varint

try:
    import isal
    from isal import isal_zlib
except ImportError:  # no wheel for this platform: zlib reads gzip
    isal = None  # type: ignore[assignment]  # a module or None: what uses it is chosen only when it is there
    isal_zlib = None  # type: ignore[assignment]  # a module or None: what uses it is chosen only when it is there
try:
    import deflate
except ImportError:  # no wheel for this platform: zlib writes gzip
    deflate = None  # type: ignore[assignment]  # a module or None: what uses it is chosen only when it is there

Data = bytes | memoryview

# Kafka's default gzip level is Deflater.DEFAULT_COMPRESSION (CompressionType.java, GzipCompression.java),
# which zlib maps to 6. libdeflate's level 6 compresses about twice as fast to about the same size:
# 0.3-0.7% smaller in total on the sample cluster (tested), a few bytes larger on some payloads.
GZIP_LEVEL = 6
# libdeflate stores inputs of up to 55 - 4 * level bytes uncompressed (31 at level 6), 3 bytes
# and more above zlib's output: those go to zlib, which costs nothing at that size.
LIBDEFLATE_STORED_MAX = 55 - 4 * GZIP_LEVEL
GZIP_RESERVED_FLAGS = 0xE0  # FLG bits 5-7 (RFC 1952 §2.3.1)

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
# The whole 7-byte header of the frames Kafka writes, by magic.
LZ4_HEADER = LZ4_FRAME_MAGIC + bytes((LZ4_FLG, LZ4_BD, LZ4_HC_CORRECT))
LZ4_HEADER_V0 = LZ4_FRAME_MAGIC + bytes((LZ4_FLG, LZ4_BD, LZ4_HC_BROKEN))
_LZ4_PREFIX = LZ4_FRAME_MAGIC + bytes((LZ4_FLG, LZ4_BD))  # all a magic-0 reader checks of the header


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


class _Inflater(Protocol):
    """What zlib's and isal_zlib's ``decompressobj`` return (the part used here)."""

    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: Data, /) -> bytes: ...


def gzip_compress_zlib(data: Data) -> bytes:
    c = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def gzip_compress_libdeflate(data: Data) -> bytes:
    if len(data) <= LIBDEFLATE_STORED_MAX:
        return gzip_compress_zlib(data)
    return bytes(deflate.gzip_compress(data, GZIP_LEVEL))  # a bytearray: callers hash and slice bytes


def _gzip_reader(decompressobj: Callable[[int], _Inflater], error: type[Exception]) -> Callable[[Data], bytes]:
    """A gzip reader over one inflate library; both libraries give the same verdicts (tested), the
    text after "bad gzip stream:" is the library's."""

    def member(buf: Data, start: int) -> tuple[bytes, bytes]:
        """Inflate the member at ``start`` (of the whole stream) from ``buf``: (data, what follows)."""
        d = decompressobj(31)
        try:
            out = d.decompress(buf)
        except error as exc:
            raise CorruptRecordError(f"bad gzip stream: {exc}", position=start) from None
        if len(buf) > 3 and buf[3] & GZIP_RESERVED_FLAGS:
            # a header the library took: zlib refuses these flags, ISA-L does not; both readers must
            raise CorruptRecordError(
                "bad gzip stream: reserved header flags set",
                position=start + 3,
                expected="FLG bits 5-7 clear",
                found=hex(buf[3]),
            )
        if not d.eof:
            raise CorruptRecordError(
                "gzip stream ends before its trailer", position=start, expected="complete gzip member"
            )
        return out, d.unused_data

    def gzip_decompress(data: Data) -> bytes:
        out, rest = member(data, 0)
        if not rest:  # one member: what Kafka writes
            return out
        parts = [out]
        end = len(data)
        while rest:
            out, rest = member(rest, end - len(rest))
            parts.append(out)
        return b"".join(parts)

    return gzip_decompress


gzip_decompress_zlib = _gzip_reader(zlib.decompressobj, zlib.error)
gzip_decompress_isal = None if isal_zlib is None else _gzip_reader(
    isal_zlib.decompressobj, isal_zlib.error)  # type: ignore[arg-type]  # isal's stub types the class error as an instance

# The Python pair, chosen once at import: the fastest importable (the compiled core's gzip pair
# falls back to these two names, looked up at each call: tests swap them).
gzip_decompress_py = gzip_decompress_zlib if gzip_decompress_isal is None else gzip_decompress_isal
gzip_compress_py = gzip_compress_zlib if deflate is None else gzip_compress_libdeflate


# ---------------------------------------------------------------- snappy (xerial)


def snappy_compress_py(data: Data) -> bytes:
    n = len(data)
    if 0 < n <= SNAPPY_BLOCK_SIZE:  # one block: nearly every wrapper
        block = cramjam.snappy.compress_raw(data)
        return b"".join((SNAPPY_XERIAL_HEADER, _I32.pack(len(block)), block))
    view = memoryview(data)
    parts: list[Data | cramjam.Buffer] = [SNAPPY_XERIAL_HEADER]
    for start in range(0, n, SNAPPY_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + SNAPPY_BLOCK_SIZE])
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_decompress(block: memoryview, position: int) -> bytes:
    """One raw snappy block at ``position`` of the stream: the careful path, every error."""
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


def snappy_decompress_py(data: Data) -> bytes:
    view = memoryview(data)
    end = len(view)
    if end > 22 and view[:8] == SNAPPY_XERIAL_MAGIC and _I32.unpack_from(view, 16)[0] == end - 20:
        # The header, then one block whose length is declared in one or two bytes (up to 16 KiB):
        # nearly every wrapper. Anything else, or any error, takes the careful path below.
        b0 = view[20]
        length = b0 if b0 < 0x80 else -1 if view[21] >= 0x80 else (b0 & 0x7F) | (view[21] << 7)
        if 0 <= length <= SNAPPY_MAX_EXPANSION * (end - 20):
            try:
                return bytes(cramjam.snappy.decompress_raw(view[20:]))
            except Exception:
                pass  # the careful path says why, in the same words as ever
    return _snappy_stream(view)


def _snappy_stream(view: memoryview) -> bytes:
    end = len(view)
    if view[:8] != SNAPPY_XERIAL_MAGIC:
        return _snappy_raw_decompress(view, 0)
    out = []
    pos = 16
    while pos < end:
        if end - pos >= 16 and view[pos : pos + 8] == SNAPPY_XERIAL_MAGIC:
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


def lz4_compress_py(data: Data, magic: int) -> bytes:
    header = LZ4_HEADER_V0 if magic == MAGIC_V0 else LZ4_HEADER
    n = len(data)
    if 0 < n <= LZ4_BLOCK_SIZE:  # one block: nearly every wrapper
        block = cramjam.lz4.compress_block(data, store_size=False)
        if len(block) < n:
            return b"".join((header, _U32_LE.pack(len(block)), block, LZ4_END_MARK))
        return b"".join((header, _U32_LE.pack(n | LZ4_UNCOMPRESSED_FLAG), data, LZ4_END_MARK))
    view = memoryview(data)
    parts: list[Data | cramjam.Buffer] = [header]
    for start in range(0, n, LZ4_BLOCK_SIZE):
        chunk = view[start : start + LZ4_BLOCK_SIZE]
        block = cramjam.lz4.compress_block(chunk, store_size=False)
        if len(block) >= len(chunk):  # Kafka stores a block raw when compression does not pay
            parts.append(_U32_LE.pack(len(chunk) | LZ4_UNCOMPRESSED_FLAG))
            parts.append(chunk)
        else:
            parts.append(_U32_LE.pack(len(block)))
            parts.append(block)
    parts.append(LZ4_END_MARK)
    return b"".join(parts)


# An LZ4 block does not say its decompressed size: it is inflated into a buffer of the frame's
# maximum block size and copied out. Buffers are kept per thread, not allocated per block
# (allocating 64 KiB costs about as much as inflating a typical wrapper).
_lz4_buffers = threading.local()


def _lz4_scratch(size: int) -> memoryview:
    """``size`` bytes exactly: a block that inflates to more than the frame's maximum must fail."""
    if size == LZ4_BLOCK_SIZE:  # Kafka's frames: their own buffer, looked up inline by the callers
        kafka = _lz4_buffers.kafka = memoryview(bytearray(size))
        return kafka
    view: memoryview = getattr(_lz4_buffers, "other", None) or memoryview(b"")
    if len(view) < size:
        view = _lz4_buffers.other = memoryview(bytearray(size))
    return view if len(view) == size else view[:size]


def lz4_decompress_py(data: Data, magic: int) -> bytes:
    view = memoryview(data)
    end = len(view)
    if end > 15 and (view[:7] == LZ4_HEADER if magic != MAGIC_V0 else view[:6] == _LZ4_PREFIX):
        # Kafka's own header (its HC right, or skipped for magic 0), one block, the end mark:
        # nearly every wrapper. Anything else takes the careful path below.
        (word,) = _U32_LE.unpack_from(view, 7)
        n = word & 0x7FFFFFFF
        if n + 15 == end and n <= LZ4_BLOCK_SIZE and view[end - 4 :] == LZ4_END_MARK:
            if word & LZ4_UNCOMPRESSED_FLAG:
                return bytes(view[11 : end - 4])
            scratch = getattr(_lz4_buffers, "kafka", None) or _lz4_scratch(LZ4_BLOCK_SIZE)
            try:
                size = cramjam.lz4.decompress_block_into(view[11 : end - 4], scratch)
            except Exception as exc:
                raise CorruptRecordError(f"bad LZ4 block: {exc}", position=11) from None
            return bytes(scratch[:size])
    return _lz4_frame(view, magic)


def _lz4_frame(view: memoryview, magic: int) -> bytes:
    end = len(view)
    if end < 7 or view[:4] != LZ4_FRAME_MAGIC:
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
    scratch = getattr(_lz4_buffers, "kafka", None) if max_block == LZ4_BLOCK_SIZE else None
    scratch = scratch or _lz4_scratch(max_block)
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


def zstd_compress(data: Data) -> bytes:
    return bytes(cramjam.zstd.compress(data, level=3))


def zstd_decompress(data: Data) -> bytes:
    try:
        return bytes(cramjam.zstd.decompress(data))
    except Exception as exc:
        raise CorruptRecordError(f"bad zstd frame: {exc}", position=0) from None


# ---------------------------------------------------------------- the codec functions that run


class Codecs:
    """The codec functions one record core runs, chosen once when it is built: the gzip pair,
    the snappy and LZ4 framing, and what the gzip pair calls from C (``gzip_library``:
    ``"libdeflate"``, or None for the Python pair). :data:`PYTHON_CODECS` is the Python core's;
    the compiled core fills its own (``_ccompression.CODECS``). :func:`activate` binds one's
    functions to the module's names, which :func:`compress` and :func:`decompress` call."""

    __slots__ = ("gzip_compress", "gzip_decompress", "gzip_library", "lz4_compress", "lz4_decompress",
                 "snappy_compress", "snappy_decompress")

    def __init__(self, *, gzip_decompress: Callable[[Data], bytes], gzip_compress: Callable[[Data], bytes],
                 snappy_decompress: Callable[[Data], bytes], snappy_compress: Callable[[Data], bytes],
                 lz4_decompress: Callable[[Data, int], bytes], lz4_compress: Callable[[Data, int], bytes],
                 gzip_library: str | None = None) -> None:
        self.gzip_decompress = gzip_decompress
        self.gzip_compress = gzip_compress
        self.snappy_decompress = snappy_decompress
        self.snappy_compress = snappy_compress
        self.lz4_decompress = lz4_decompress
        self.lz4_compress = lz4_compress
        self.gzip_library = gzip_library

    def __repr__(self) -> str:
        return f"Codecs(gzip_library={self.gzip_library!r})"


PYTHON_CODECS = Codecs(gzip_decompress=gzip_decompress_py, gzip_compress=gzip_compress_py,
                       snappy_decompress=snappy_decompress_py, snappy_compress=snappy_compress_py,
                       lz4_decompress=lz4_decompress_py, lz4_compress=lz4_compress_py)

# The active core's codec functions, bound as this module's globals by :func:`activate` (read by
# :func:`compress`, :func:`decompress` and the compiled core at each call, so a test may swap one).
gzip_decompress: Callable[[Data], bytes]
gzip_compress: Callable[[Data], bytes]
snappy_decompress: Callable[[Data], bytes]
snappy_compress: Callable[[Data], bytes]
lz4_decompress: Callable[[Data, int], bytes]
lz4_compress: Callable[[Data, int], bytes]
_gzip_library: str | None


def activate(codecs: Codecs) -> None:
    """Bind ``codecs``' functions to this module's names, which :func:`compress` and
    :func:`decompress` call (``core.py``, with the record core it selects)."""
    global gzip_decompress, gzip_compress, snappy_decompress, snappy_compress, lz4_decompress, lz4_compress
    global _gzip_library
    gzip_decompress, gzip_compress = codecs.gzip_decompress, codecs.gzip_compress
    snappy_decompress, snappy_compress = codecs.snappy_decompress, codecs.snappy_compress
    lz4_decompress, lz4_compress = codecs.lz4_decompress, codecs.lz4_compress
    _gzip_library = codecs.gzip_library


activate(PYTHON_CODECS)


# ---------------------------------------------------------------- dispatch

# Module-level aliases: an enum attribute lookup costs about 80 ns, a global 10.
_GZIP, _SNAPPY, _LZ4, _ZSTD = Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD


def compress(codec: Compression, data: Data, magic: int) -> bytes:
    if codec is _GZIP:
        return gzip_compress(data)
    if codec is _SNAPPY:
        return snappy_compress(data)
    if codec is _LZ4:
        return lz4_compress(data, magic)
    if codec is _ZSTD:
        if magic < MAGIC_V2:
            raise UnsupportedCodecError("zstd is not allowed below magic 2", found="zstd")
        return zstd_compress(data)
    raise UnsupportedCodecError("cannot compress with codec", found=codec)


def decompress(codec: Compression, data: Data, magic: int) -> bytes:
    """Decompress a wrapper value (v0/v1) or the records of a v2 batch. Positions in raised
    errors are relative to ``data``."""
    if codec is _GZIP:
        return gzip_decompress(data)
    if codec is _SNAPPY:
        return snappy_decompress(data)
    if codec is _LZ4:
        return lz4_decompress(data, magic)
    if codec is _ZSTD:
        return zstd_decompress(data)
    raise UnsupportedCodecError("cannot decompress with codec", found=codec)


def codec_libraries() -> dict[str, str]:
    """The library behind each codec as this process runs it, with versions (for ``--version``
    and bench results)."""
    zlib_name = f"zlib {zlib.ZLIB_RUNTIME_VERSION}"
    cram = f"cramjam {cramjam.__version__}"
    isal_name = None if isal is None else f"isal {isal.__version__} (ISA-L {isal.ISAL_VERSION})"
    libdeflate_name = None if deflate is None else f"libdeflate (deflate {deflate.__version__})"
    gunzip, gzip, compiled = gzip_decompress, gzip_compress, _gzip_library
    reader = isal_name if gunzip is gzip_decompress_isal and isal_name else zlib_name
    writer = f"{libdeflate_name if gzip is gzip_compress_libdeflate and libdeflate_name else zlib_name}, " \
             f"level {GZIP_LEVEL}"
    if compiled and libdeflate_name and gunzip not in (gzip_decompress_zlib, gzip_decompress_isal):
        fallback = isal_name if gzip_decompress_py is gzip_decompress_isal and isal_name else zlib_name
        reader = f"{libdeflate_name} from the compiled core, {fallback} for other streams"
    if compiled and libdeflate_name and gzip not in (gzip_compress_zlib, gzip_compress_libdeflate):
        writer = f"{libdeflate_name} from the compiled core, level {GZIP_LEVEL}"
    return {
        "gzip read": reader,
        "gzip write": writer,
        "snappy": f"{cram}, xerial framing",
        "lz4": f"{cram}, Kafka frame (xxhash {xxhash.VERSION})",
        "zstd": cram,
    }
