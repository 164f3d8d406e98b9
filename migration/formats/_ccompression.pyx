# cython: language_level=3
"""The codecs' framing compiled, the twin of ``compression.py``'s framing and gzip: Kafka's
one-block snappy (xerial) and LZ4 frames framed in C around cramjam's raw block calls, and gzip
by libdeflate called from C (looked up with ``dlsym`` in the deflate package's extension), with
a walk of small fixed-Huffman blocks for the codes libdeflate takes and zlib refuses. Anything
else, and every error, goes to compression.py's framing and reader, so bytes and errors are the
same. :data:`CODECS` is this core's choice of codec functions (``compression.Codecs``), which
``core.py`` makes active with the compiled core."""

from cpython.buffer cimport PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, uint32_t, uint64_t
from libc.stdlib cimport realloc
from libc.string cimport memcmp, memcpy

from migration.formats._cbytes cimport get_view, kb_i32, kb_put_i32

import os as _os

import cramjam as _cramjam

from migration.formats import compression as _codecs

# ---------------------------------------------------------------- snappy and lz4 framing (compression.py)
#
# The frames Kafka writes hold one block (a wrapper's or batch's records are rarely over 32 KiB):
# these functions frame that case in C around cramjam's raw block calls, and hand everything
# else, and every error, to compression.py's framing (``*_py``), so bytes and errors are the same.
# They are this core's snappy and LZ4 functions in :data:`CODECS`.

cdef object _snappy_compress_raw = _cramjam.snappy.compress_raw
cdef object _snappy_decompress_raw = _cramjam.snappy.decompress_raw
cdef object _lz4_compress_block = _cramjam.lz4.compress_block
cdef object _lz4_decompress_block_into = _cramjam.lz4.decompress_block_into
cdef bytes _SNAPPY_HEADER = _codecs.SNAPPY_XERIAL_HEADER
cdef bytes _LZ4_HEADER = _codecs.LZ4_HEADER
cdef bytes _LZ4_HEADER_V0 = _codecs.LZ4_HEADER_V0
cdef Py_ssize_t _snappy_max_expansion = _codecs.SNAPPY_MAX_EXPANSION
cdef Py_ssize_t _snappy_block_size = _codecs.SNAPPY_BLOCK_SIZE
cdef object _lz4_buffers = _codecs._lz4_buffers  # the framing's thread-local scratch, shared

cdef enum:
    SNAPPY_MAGIC_LENGTH = 8            # 0x82 "SNAPPY" 0x00
    SNAPPY_HEADER_LENGTH = 16          # magic, version, compatible version
    SNAPPY_BLOCK_AT = SNAPPY_HEADER_LENGTH + 4   # after the first block's length
    LZ4_DESCRIPTOR_LENGTH = 6          # magic, FLG, BD: what a magic-0 reader checks
    LZ4_HEADER_LENGTH = 7              # ... and HC
    LZ4_BLOCK_AT = LZ4_HEADER_LENGTH + 4
    LZ4_END_MARK_LENGTH = 4
    LZ4_MAX_BLOCK = 65536


cdef inline uint32_t le_u32(const unsigned char *p) noexcept nogil:
    return <uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef inline uint64_t le_u64(const unsigned char *p) noexcept nogil:
    return <uint64_t>le_u32(p) | (<uint64_t>le_u32(p + 4)) << 32


cdef inline void put_le_u32(unsigned char *p, uint32_t x) noexcept nogil:
    p[0] = x & 0xFF
    p[1] = (x >> 8) & 0xFF
    p[2] = (x >> 16) & 0xFF
    p[3] = x >> 24


cdef bytes _bytes_of(object buf, Py_ssize_t n):
    """The first ``n`` bytes of a buffer as bytes (one copy)."""
    cdef Py_buffer v
    get_view(buf, &v)
    try:
        return PyBytes_FromStringAndSize(<char *>v.buf, n if n < v.len else v.len)
    finally:
        PyBuffer_Release(&v)


def snappy_decompress(data):
    """compression.snappy_decompress: the xerial header and one block, else its framing."""
    cdef Py_buffer v
    cdef const unsigned char *d
    cdef Py_ssize_t end, length = -1
    cdef bint one_block = False
    get_view(data, &v)
    try:
        d = <const unsigned char *>v.buf
        end = v.len
        if (end > SNAPPY_BLOCK_AT + 2 and memcmp(d, <const char *>_SNAPPY_HEADER, SNAPPY_MAGIC_LENGTH) == 0
                and kb_i32(d + SNAPPY_HEADER_LENGTH) == end - SNAPPY_BLOCK_AT):
            # the block's uncompressed length, declared in one or two bytes (up to 16 KiB)
            if d[SNAPPY_BLOCK_AT] < 0x80:
                length = d[SNAPPY_BLOCK_AT]
            elif d[SNAPPY_BLOCK_AT + 1] < 0x80:
                length = (d[SNAPPY_BLOCK_AT] & 0x7F) | (<Py_ssize_t>d[SNAPPY_BLOCK_AT + 1] << 7)
            one_block = 0 <= length <= _snappy_max_expansion * (end - SNAPPY_BLOCK_AT)
    finally:
        PyBuffer_Release(&v)
    view = memoryview(data)
    if one_block:
        try:
            out = _snappy_decompress_raw(view[SNAPPY_BLOCK_AT:])
        except Exception:
            pass  # the careful path says why, in its own words
        else:
            return bytes(out)
    return _codecs._snappy_stream(view)


def snappy_compress(data):
    """compression.snappy_compress: one block written here, a longer input by its framing."""
    cdef Py_buffer v
    cdef Py_ssize_t n = len(data)
    cdef unsigned char *w
    cdef object out
    if not 0 < n <= _snappy_block_size:
        return _codecs.snappy_compress_py(data)
    block = _snappy_compress_raw(data)
    get_view(block, &v)
    try:
        out = PyBytes_FromStringAndSize(NULL, SNAPPY_BLOCK_AT + v.len)
        w = <unsigned char *>PyBytes_AS_STRING(out)
        memcpy(w, <const char *>_SNAPPY_HEADER, SNAPPY_HEADER_LENGTH)
        kb_put_i32(w + SNAPPY_HEADER_LENGTH, <int32_t>v.len)
        memcpy(w + SNAPPY_BLOCK_AT, v.buf, <size_t>v.len)
        return out
    finally:
        PyBuffer_Release(&v)


def lz4_decompress(data, int magic):
    """compression.lz4_decompress: Kafka's header (its HC checked, or skipped for magic 0), one
    block and the end mark, else its framing."""
    cdef Py_buffer v
    cdef const unsigned char *d
    cdef Py_ssize_t end, n = 0
    cdef uint32_t word = 0
    cdef bint one_block = False
    get_view(data, &v)
    try:
        d = <const unsigned char *>v.buf
        end = v.len
        if end > LZ4_BLOCK_AT + LZ4_END_MARK_LENGTH and (
                memcmp(d, <const char *>_LZ4_HEADER, LZ4_HEADER_LENGTH) == 0 if magic != 0
                else memcmp(d, <const char *>_LZ4_HEADER, LZ4_DESCRIPTOR_LENGTH) == 0):
            word = le_u32(d + LZ4_HEADER_LENGTH)
            n = word & 0x7FFFFFFF
            one_block = (n + LZ4_BLOCK_AT + LZ4_END_MARK_LENGTH == end and n <= LZ4_MAX_BLOCK
                         and le_u32(d + end - LZ4_END_MARK_LENGTH) == 0)
            if one_block and word & 0x80000000:
                return PyBytes_FromStringAndSize(<const char *>d + LZ4_BLOCK_AT, n)  # stored as is
    finally:
        PyBuffer_Release(&v)
    view = memoryview(data)
    if not one_block:
        return _codecs._lz4_frame(view, magic)
    scratch = getattr(_lz4_buffers, "kafka", None) or _codecs._lz4_scratch(LZ4_MAX_BLOCK)
    try:
        size = _lz4_decompress_block_into(view[LZ4_BLOCK_AT : end - LZ4_END_MARK_LENGTH], scratch)
    except Exception as exc:
        raise _codecs.CorruptRecordError(f"bad LZ4 block: {exc}", position=LZ4_BLOCK_AT) from None
    return _bytes_of(scratch, size)


def lz4_compress(data, int magic):
    """compression.lz4_compress: one block written here (stored raw when compression does not
    pay, as Kafka does), a longer input by its framing."""
    cdef Py_buffer v
    cdef Py_buffer b
    cdef Py_ssize_t n = len(data), m
    cdef unsigned char *w
    cdef object out
    cdef bint stored
    if not 0 < n <= LZ4_MAX_BLOCK:
        return _codecs.lz4_compress_py(data, magic)
    block = _lz4_compress_block(data, store_size=False)
    get_view(block, &b)
    get_view(data, &v)
    try:
        stored = b.len >= n
        m = n if stored else b.len
        out = PyBytes_FromStringAndSize(NULL, LZ4_BLOCK_AT + m + LZ4_END_MARK_LENGTH)
        w = <unsigned char *>PyBytes_AS_STRING(out)
        memcpy(w, <const char *>(_LZ4_HEADER_V0 if magic == 0 else _LZ4_HEADER), LZ4_HEADER_LENGTH)
        put_le_u32(w + LZ4_HEADER_LENGTH, <uint32_t>m | (0x80000000 if stored else 0))
        memcpy(w + LZ4_BLOCK_AT, v.buf if stored else b.buf, <size_t>m)
        put_le_u32(w + LZ4_BLOCK_AT + m, 0)
        return out
    finally:
        PyBuffer_Release(&v)
        PyBuffer_Release(&b)


# ---------------------------------------------------------------- gzip (libdeflate, from C)
#
# The deflate package links libdeflate into its extension and exports libdeflate's API
# (libdeflate.h); its Python functions allocate a compressor per call and cannot say how much
# input a stream used. The compiled core resolves the four calls it needs in that extension at
# import and calls them directly: one decompressor and one compressor for the process, used with
# the GIL held (so never by two threads at once), output written straight into the bytes object.
#
# Reading takes the one case Kafka writes: a single gzip member with no optional header fields
# (FLG 0; Java's GZIPOutputStream and libdeflate write that), its size from the trailer's ISIZE.
# libdeflate checks the trailer's CRC-32 and ISIZE; the call must also use the whole input and
# fill exactly ISIZE bytes. Anything else (several members, header fields, bytes after the
# member, an ISIZE beyond deflate's largest expansion) and every error go to compression.py's
# reader (``gzip_decompress_py``): same data, same errors as ever.
#
# libdeflate takes a few deflate codes that zlib (Java's Inflater, so Kafka's reader) and ISA-L
# refuse, to keep its decode loop free of the checks: it decodes the literal/length symbols 286
# and 287 as length 258 and the distance codes 30 and 31 as distances from 24,577, and takes a
# dynamic block header declaring more than 286 literal/length or 30 distance codes. So only a
# stream of one block, the final one, goes to libdeflate: a dynamic block whose header declares
# no more than those counts cannot use the reserved codes, and a fixed-Huffman block of up to
# 1 KiB is walked code by code after libdeflate has read it (``fixed_block_uses_reserved_codes``).
# A larger fixed block, and a stream of several blocks (finding the later blocks takes a full
# decode), go to the Python reader.
# docs/formats.md 1.8.1 says more.
#
# Writing gives libdeflate's
# bytes at Kafka's level, identical to the deflate package's ``gzip_compress`` (tested); the
# inputs libdeflate would store raw go to ``gzip_compress_py`` as before.

cdef extern from "<dlfcn.h>" nogil:
    void *dlopen(const char *filename, int flags)
    void *dlsym(void *handle, const char *symbol)
    int RTLD_NOW
    int RTLD_NOLOAD

ctypedef void *(*ld_alloc_decompressor_fn)() noexcept nogil
ctypedef void *(*ld_alloc_compressor_fn)(int level) noexcept nogil
ctypedef int (*ld_gzip_decompress_ex_fn)(void *d, const void *src, size_t n, void *out, size_t avail,
                                         size_t *used_in, size_t *used_out) noexcept nogil
ctypedef size_t (*ld_gzip_compress_fn)(void *c, const void *src, size_t n, void *out, size_t avail) noexcept nogil
ctypedef size_t (*ld_gzip_compress_bound_fn)(void *c, size_t n) noexcept nogil

cdef enum:
    GZIP_HEADER_LENGTH = 10            # ID1 ID2 CM FLG MTIME(4) XFL OS (RFC 1952 §2.3)
    GZIP_TRAILER_LENGTH = 8            # CRC32, ISIZE (uint32 LE, the size mod 2^32)
    GZIP_ID1 = 0x1F
    GZIP_ID2 = 0x8B
    GZIP_CM_DEFLATE = 8
    # Deflate cannot expand more than 1032:1 (its longest match, 258 bytes, costs at least 2
    # bits: 258 * 8 / 2); an ISIZE above that is not this stream's size.
    DEFLATE_MAX_EXPANSION = 1032
    LIBDEFLATE_SUCCESS = 0
    # Deflate block header (RFC 1951 §3.2.3, §3.2.7): BFINAL (1 bit), BTYPE (2 bits), then for
    # a dynamic block HLIT (5 bits, literal/length codes - 257) and HDIST (5 bits, distance codes - 1).
    DEFLATE_BFINAL = 1
    DEFLATE_BTYPE_SHIFT = 1
    DEFLATE_BTYPE_FIXED = 1
    DEFLATE_BTYPE_DYNAMIC = 2
    DEFLATE_HLIT_SHIFT = 3
    DEFLATE_FIELD5_MASK = 0x1F
    DEFLATE_BLOCK_HEADER_BITS = 3
    DEFLATE_MAX_HLIT = 286 - 257       # zlib: "too many length or distance symbols" above these
    DEFLATE_MAX_HDIST = 30 - 1
    DEFLATE_END_OF_BLOCK = 256
    DEFLATE_LAST_LENGTH_SYMBOL = 285   # 286 and 287 have fixed codes but are reserved
    DEFLATE_LAST_DISTANCE_CODE = 29    # 30 and 31 likewise
    FIXED_CODE_MAX_BITS = 9            # the fixed literal/length code's longest code
    FIXED_DISTANCE_BITS = 5
    FIXED_RESULT_BITS = 5              # a fixed table entry: symbol << 5 | the bits it takes
    FIXED_DROP_MASK = (1 << 5) - 1
    FIXED_MATCH_MAX_BITS = 8 + 5 + 5 + 13  # the longest match: code, extra bits, distance, extra bits
    # libdeflate's read and the walk of a fixed block cost more than ISA-L's read from about 1 KiB
    # of deflate data on (measured: 0.4 against 1.5 us at 87 bytes, 1.7 against 2.4 at 391, 10.0
    # against 8.0 at 2.7 KiB); zlib writes fixed blocks mostly for small inputs.
    FIXED_WALK_MAX_BYTES = 1024

cdef ld_gzip_decompress_ex_fn _gunzip = NULL
cdef ld_gzip_compress_fn _gzip = NULL
cdef ld_gzip_compress_bound_fn _gzip_bound = NULL
cdef void *_inflater = NULL
cdef void *_deflater = NULL
cdef Py_ssize_t _stored_max = _codecs.LIBDEFLATE_STORED_MAX


cdef str _bind_libdeflate():
    """Resolve libdeflate's calls in the deflate package's extension: "" when bound, else why not."""
    global _gunzip, _gzip, _gzip_bound, _inflater, _deflater
    cdef void *handle
    cdef void *found[5]
    cdef int i
    if _codecs.deflate is None:
        return "the deflate package is not importable"
    path = _os.fsencode(_codecs.deflate._deflate.__file__)
    handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD)  # loaded already: its import did it
    if handle == NULL:
        return f"{_codecs.deflate._deflate.__file__} is not loaded"
    names = (b"libdeflate_alloc_decompressor", b"libdeflate_alloc_compressor", b"libdeflate_gzip_decompress_ex",
             b"libdeflate_gzip_compress", b"libdeflate_gzip_compress_bound")
    for i in range(5):
        found[i] = dlsym(handle, <const char *>names[i])
        if found[i] == NULL:
            return f"{names[i].decode()} is not exported by the deflate package"
    _inflater = (<ld_alloc_decompressor_fn>found[0])()
    _deflater = (<ld_alloc_compressor_fn>found[1])(_codecs.GZIP_LEVEL)
    if _inflater == NULL or _deflater == NULL:
        return "libdeflate could not allocate its state"
    _gunzip = <ld_gzip_decompress_ex_fn>found[2]
    _gzip = <ld_gzip_compress_fn>found[3]
    _gzip_bound = <ld_gzip_compress_bound_fn>found[4]
    return ""


cdef str _libdeflate_unbound = _bind_libdeflate()


def gzip_library():
    """``"libdeflate"`` when :func:`gzip_decompress` and :func:`gzip_compress` call libdeflate
    from here, else None (:data:`CODECS` then holds compression.py's pair)."""
    return "libdeflate" if _gunzip != NULL else None


def gzip_unavailable():
    """Why libdeflate is not called from here ("" when it is)."""
    return _libdeflate_unbound


# The fixed-Huffman code (RFC 1951 §3.2.6) as two tables indexed by the stream's next bits,
# lowest bit first. A literal/length entry is the symbol << FIXED_RESULT_BITS | the bits to
# drop: the code's length, and for a length symbol its extra bits. A distance entry is the
# code << FIXED_RESULT_BITS | the code's 5 bits and its extra bits.
cdef unsigned short _fixed_litlen[1 << FIXED_CODE_MAX_BITS]
cdef unsigned short _fixed_distance[1 << FIXED_DISTANCE_BITS]


cdef unsigned int _reversed(unsigned int code, unsigned int length) noexcept:
    cdef unsigned int out = 0, i
    for i in range(length):  # Huffman codes go into the stream from their highest bit
        out |= ((code >> (length - 1 - i)) & 1) << i
    return out


cdef void _build_fixed_tables() noexcept:
    cdef unsigned int symbol, code, length, extra, k
    for symbol in range(288):
        if symbol < 144:
            code, length = 0x30 + symbol, 8
        elif symbol < 256:
            code, length = 0x190 + symbol - 144, 9
        elif symbol < 280:
            code, length = symbol - 256, 7
        else:
            code, length = 0xC0 + symbol - 280, 8
        # length symbols 265-284 carry one to five extra bits, four symbols each (257-264, 285: none)
        extra = (symbol - 261) >> 2 if 265 <= symbol <= 284 else 0
        for k in range(1 << (FIXED_CODE_MAX_BITS - length)):
            _fixed_litlen[_reversed(code, length) | (k << length)] = <unsigned short>(
                symbol << FIXED_RESULT_BITS | (length + extra))
    for code in range(32):
        # distance codes 4-29 carry one to thirteen extra bits, two codes each
        extra = (code - 2) >> 1 if 4 <= code <= DEFLATE_LAST_DISTANCE_CODE else 0
        _fixed_distance[_reversed(code, FIXED_DISTANCE_BITS)] = <unsigned short>(
            code << FIXED_RESULT_BITS | (FIXED_DISTANCE_BITS + extra))


_build_fixed_tables()


cdef bint fixed_block_uses_reserved_codes(const unsigned char *p, size_t n) noexcept nogil:
    """Whether the fixed-Huffman block starting at bit 3 of ``p`` (its header read) uses a
    literal/length symbol above 285 or a distance code above 29 before its end-of-block code.
    Called on what libdeflate has just read whole, so the codes are there; a walk that runs off
    the end says yes, and the Python reader decides."""
    cdef uint64_t bits
    cdef unsigned int have, entry, symbol
    cdef size_t at = 1, overrun = 0
    if n == 0:
        return True
    bits = p[0] >> DEFLATE_BLOCK_HEADER_BITS
    have = 8 - DEFLATE_BLOCK_HEADER_BITS
    while True:
        if at + 8 <= n:
            bits |= le_u64(p + at) << have
            at += (63 - have) >> 3
            have |= 56
        else:
            while have <= 56:
                if at < n:
                    bits |= (<uint64_t>p[at]) << have
                    at += 1
                else:
                    overrun += 1
                    if overrun > 8:
                        return True
                have += 8
        while have >= FIXED_MATCH_MAX_BITS:  # as many codes as the bits hold
            entry = _fixed_litlen[bits & ((1 << FIXED_CODE_MAX_BITS) - 1)]
            symbol = entry >> FIXED_RESULT_BITS
            bits >>= entry & FIXED_DROP_MASK
            have -= entry & FIXED_DROP_MASK
            if symbol < DEFLATE_END_OF_BLOCK:
                continue
            if symbol == DEFLATE_END_OF_BLOCK:
                return False
            if symbol > DEFLATE_LAST_LENGTH_SYMBOL:
                return True
            entry = _fixed_distance[bits & ((1 << FIXED_DISTANCE_BITS) - 1)]
            if (entry >> FIXED_RESULT_BITS) > DEFLATE_LAST_DISTANCE_CODE:
                return True
            bits >>= entry & FIXED_DROP_MASK
            have -= entry & FIXED_DROP_MASK


cdef enum GzipRoute:
    TO_PYTHON_READER        # what libdeflate could read otherwise than zlib, or not Kafka's member
    LIBDEFLATE              # one final block its header shows to be within zlib's rules
    LIBDEFLATE_THEN_WALK    # one final fixed block, walked for reserved codes after the read


cdef GzipRoute _gzip_route(const unsigned char *d, Py_ssize_t n) noexcept nogil:
    """Who reads the member ``d[:n]``: only Kafka's (one member, no header fields) whose deflate
    stream is one final block goes to libdeflate, and only if no code libdeflate takes and zlib
    refuses can hide in it unseen."""
    cdef unsigned char first
    cdef unsigned int block_type
    if not (n >= GZIP_HEADER_LENGTH + GZIP_TRAILER_LENGTH and d[0] == GZIP_ID1 and d[1] == GZIP_ID2
            and d[2] == GZIP_CM_DEFLATE and d[3] == 0):
        return TO_PYTHON_READER
    first = d[GZIP_HEADER_LENGTH]
    block_type = (first >> DEFLATE_BTYPE_SHIFT) & 3
    if not first & DEFLATE_BFINAL:
        return TO_PYTHON_READER
    if block_type == DEFLATE_BTYPE_DYNAMIC:
        if ((first >> DEFLATE_HLIT_SHIFT) <= DEFLATE_MAX_HLIT
                and (d[GZIP_HEADER_LENGTH + 1] & DEFLATE_FIELD5_MASK) <= DEFLATE_MAX_HDIST):
            return LIBDEFLATE
        return TO_PYTHON_READER
    if block_type == DEFLATE_BTYPE_FIXED:
        if n - GZIP_HEADER_LENGTH - GZIP_TRAILER_LENGTH <= FIXED_WALK_MAX_BYTES:
            return LIBDEFLATE_THEN_WALK
        return TO_PYTHON_READER
    return LIBDEFLATE  # stored (libdeflate checks LEN against NLEN as zlib does) or reserved (refused)


def gzip_decompress(data):
    """compression.gzip_decompress: Kafka's single member inflated by libdeflate in one call,
    anything else and every error by compression.py's reader."""
    cdef Py_buffer v
    cdef const unsigned char *d
    cdef Py_ssize_t n
    cdef size_t isize, used_in = 0, used_out = 0
    cdef GzipRoute route
    cdef object out
    if _gunzip != NULL:
        get_view(data, &v)
        try:
            d = <const unsigned char *>v.buf
            n = v.len
            route = _gzip_route(d, n)
            if route != TO_PYTHON_READER:
                isize = le_u32(d + n - 4)
                if isize <= <size_t>DEFLATE_MAX_EXPANSION * <size_t>n:
                    out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>isize)
                    if (_gunzip(_inflater, d, <size_t>n, PyBytes_AS_STRING(out), isize, &used_in, &used_out)
                            == LIBDEFLATE_SUCCESS and used_in == <size_t>n and used_out == isize
                            and not (route == LIBDEFLATE_THEN_WALK and fixed_block_uses_reserved_codes(
                                d + GZIP_HEADER_LENGTH, <size_t>(n - GZIP_HEADER_LENGTH - GZIP_TRAILER_LENGTH)))):
                        return out
        finally:
            PyBuffer_Release(&v)
    return _codecs.gzip_decompress_py(data)


cdef enum:
    GZIP_OUT_KEPT = 1 << 20            # the largest output buffer kept between calls
cdef unsigned char *_gzip_out = NULL  # libdeflate's output, grown to the largest bound yet (up to GZIP_OUT_KEPT)
cdef size_t _gzip_out_size = 0


def gzip_compress(data):
    """compression.gzip_compress: libdeflate at Kafka's level (the inputs it would store raw,
    and a failure, by compression.py's writer)."""
    global _gzip_out, _gzip_out_size
    cdef Py_buffer v
    cdef size_t bound, m = 0
    cdef void *grown
    cdef unsigned char *out
    cdef object big = None
    if _gzip == NULL:
        return _codecs.gzip_compress_py(data)
    get_view(data, &v)
    try:
        if v.len > _stored_max:
            bound = _gzip_bound(_deflater, <size_t>v.len)
            if bound > GZIP_OUT_KEPT:  # rare: written into an object of its own, not kept
                big = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>bound)
                out = <unsigned char *>PyBytes_AS_STRING(big)
            else:
                if bound > _gzip_out_size:
                    grown = realloc(_gzip_out, bound)
                    if grown == NULL:
                        raise MemoryError()
                    _gzip_out, _gzip_out_size = <unsigned char *>grown, bound
                out = _gzip_out
            m = _gzip(_deflater, v.buf, <size_t>v.len, out, bound)
            if m != 0:
                return big[:m] if big is not None else PyBytes_FromStringAndSize(<const char *>out, <Py_ssize_t>m)
    finally:
        PyBuffer_Release(&v)
    return _codecs.gzip_compress_py(data)


# The codec functions of the compiled core, chosen once here: the framing above, and the gzip pair
# above while libdeflate is bound, else compression.py's Python pair.
CODECS = _codecs.Codecs(
    gzip_decompress=gzip_decompress if _gunzip != NULL else _codecs.gzip_decompress_py,
    gzip_compress=gzip_compress if _gunzip != NULL else _codecs.gzip_compress_py,
    snappy_decompress=snappy_decompress, snappy_compress=snappy_compress,
    lz4_decompress=lz4_decompress, lz4_compress=lz4_compress,
    gzip_library=gzip_library())


# What compression.decompress and compress dispatch to, for the other modules of the core, without
# building the Compression member on every wrapper: snappy and LZ4 framed here, gzip by the gzip
# pair compression.py's names are bound to (the active core's, :data:`CODECS` here) looked up at
# each call (a test may swap it), zstd by compression.py.
cdef object codec_decompress(int codec, object data, int magic):
    if codec == 2:
        return snappy_decompress(data)
    if codec == 3:
        return lz4_decompress(data, magic)
    if codec == 1:
        return _codecs.gzip_decompress(data)
    return _codecs.decompress(_codecs.Compression(codec), data, magic)


cdef object codec_compress(int codec, object data, int magic):
    if codec == 2:
        return snappy_compress(data)
    if codec == 3:
        return lz4_compress(data, magic)
    if codec == 1:
        return _codecs.gzip_compress(data)
    return _codecs.compress(_codecs.Compression(codec), data, magic)
