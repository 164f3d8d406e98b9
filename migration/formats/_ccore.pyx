# cython: language_level=3
"""The record core, compiled: the kernels of ``_pycore.py`` (the reference) with the same
signatures and results, plus :class:`SegmentWalker`, the deep validation of whole runs of
regular batches in one call.

Layouts (docs/formats.md; every offset is the previous one plus the previous field's length, with
the names of ``layout.py``, which tests/formats/test_layout.py pins this module's :data:`LAYOUT` to):
  v0/v1 log entry (§1.2)  offset int64 | size int32 | crc uint32 | magic int8 | attributes int8
                          | [v1: timestamp int64] | key_length int32 | key | value_length int32 | value
                          CRC-32 over [magic, end)
  v2 batch (§2.1)         base offset int64 @0 | length int32 @8 | leader epoch int32 @12 | magic @16
                          | crc uint32 @17 (CRC-32C over [21, end)) | attributes int16 @21
                          | last offset delta int32 @23 | base timestamp int64 @27
                          | max timestamp int64 @35 | producer id int64 @43 | producer epoch int16 @51
                          | base sequence int32 @53 | records count int32 @57 | records @61
  v2 record (§2.4)        length varint | attributes int8 | timestamp delta varlong
                          | offset delta varint | key length varint | key | value length varint
                          | value | header count varint | (key length varint, key, value length
                          varint, value)*

Every kernel handles the regular case and answers None (or stops) on anything else, and the
caller hands the batch to the careful Python parser: error messages and positions are the
Python ones by construction. A kernel refuses at least everything its Python twin refuses, and
what it accepts it reports exactly as the twin does (tests/formats/test_core_differential.py).
Arguments outside the C ranges (ints beyond int64, odd buffers) go to the Python twin whole.
"""

from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.long cimport PyLong_FromLongLong
from cpython.tuple cimport PyTuple_GET_ITEM
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy

import os as _os

import cramjam as _cramjam

from migration.formats import _pycore as _py
from migration.formats import compression as _codecs
from migration.formats.model import Record

cdef extern from "kcrc.h":
    int KCRC_HW_CRC32C
    int KCRC_HW_CRC32
    int kcrc_init(int use_hw) nogil
    uint32_t kcrc32(uint32_t crc, const unsigned char *p, size_t n) nogil
    uint32_t kcrc32c(uint32_t crc, const unsigned char *p, size_t n) nogil
    ctypedef struct kcrc_counts:
        uint64_t crc32_bytes
        uint64_t crc32_calls
        uint64_t crc32c_bytes
        uint64_t crc32c_calls
    kcrc_counts kcrc_take_counts() nogil

cdef extern from "kbytes.h":
    int16_t kb_i16(const unsigned char *p) nogil
    int32_t kb_i32(const unsigned char *p) nogil
    uint32_t kb_u32(const unsigned char *p) nogil
    int64_t kb_i64(const unsigned char *p) nogil
    void kb_put_i16(unsigned char *p, int16_t x) nogil
    void kb_put_i32(unsigned char *p, int32_t x) nogil
    void kb_put_u32(unsigned char *p, uint32_t x) nogil
    void kb_put_i64(unsigned char *p, int64_t x) nogil
    int kb_add_ovf(int64_t a, int64_t b, int64_t *r) nogil
    int kb_sub_ovf(int64_t a, int64_t b, int64_t *r) nogil

NAME = "compiled"

cdef enum:
    # Every log entry (§0.3, Records.java): X_OFFSET = PREV_OFFSET + PREV_LENGTH
    OFFSET_OFFSET = 0
    OFFSET_LENGTH = 8
    SIZE_OFFSET = OFFSET_OFFSET + OFFSET_LENGTH
    SIZE_LENGTH = 4
    LOG_OVERHEAD = SIZE_OFFSET + SIZE_LENGTH
    CRC_OR_LEADER_EPOCH_LENGTH = 4   # v0/v1 message CRC, v2 PartitionLeaderEpoch
    MAGIC_OFFSET = LOG_OVERHEAD + CRC_OR_LEADER_EPOCH_LENGTH
    MAGIC_LENGTH = 1
    HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + MAGIC_LENGTH   # bytes every entry starts with
    # v0/v1 message (§1.2, LegacyRecord.java): positions in the message, which starts after LOG_OVERHEAD
    LEGACY_CRC_OFFSET = 0
    LEGACY_CRC_LENGTH = 4
    LEGACY_MAGIC_OFFSET = LEGACY_CRC_OFFSET + LEGACY_CRC_LENGTH
    LEGACY_MAGIC_LENGTH = 1
    LEGACY_ATTRIBUTES_OFFSET = LEGACY_MAGIC_OFFSET + LEGACY_MAGIC_LENGTH
    LEGACY_ATTRIBUTES_LENGTH = 1
    LEGACY_TIMESTAMP_OFFSET = LEGACY_ATTRIBUTES_OFFSET + LEGACY_ATTRIBUTES_LENGTH   # v1 only
    LEGACY_TIMESTAMP_LENGTH = 8
    KEY_SIZE_OFFSET_V0 = LEGACY_ATTRIBUTES_OFFSET + LEGACY_ATTRIBUTES_LENGTH
    KEY_SIZE_OFFSET_V1 = LEGACY_TIMESTAMP_OFFSET + LEGACY_TIMESTAMP_LENGTH
    KEY_SIZE_LENGTH = 4
    VALUE_SIZE_LENGTH = 4
    RECORD_OVERHEAD_V0 = KEY_SIZE_OFFSET_V0 + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH
    RECORD_OVERHEAD_V1 = KEY_SIZE_OFFSET_V1 + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH
    MIN_MESSAGE_SIZE = RECORD_OVERHEAD_V0
    V1_MINUS_V0_SIZE = KEY_SIZE_OFFSET_V1 - KEY_SIZE_OFFSET_V0   # the v1 timestamp field
    V1_HEAD = KEY_SIZE_OFFSET_V1 - LEGACY_MAGIC_OFFSET          # magic, attributes, timestamp: the CRC's first bytes
    # ... and as positions in the log entry
    LEGACY_CRC_AT = LOG_OVERHEAD + LEGACY_CRC_OFFSET
    LEGACY_MAGIC_AT = LOG_OVERHEAD + LEGACY_MAGIC_OFFSET   # the CRC covers [magic, end of message)
    LEGACY_ATTRIBUTES_AT = LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET
    V1_TIMESTAMP_AT = LOG_OVERHEAD + LEGACY_TIMESTAMP_OFFSET
    V0_KEY_LENGTH_AT = LOG_OVERHEAD + KEY_SIZE_OFFSET_V0
    V1_KEY_LENGTH_AT = LOG_OVERHEAD + KEY_SIZE_OFFSET_V1
    LEGACY_CODEC_MASK = 0x07
    LEGACY_TIMESTAMP_TYPE_MASK = 0x08   # attributes bit 3, v1 only (§1.9)
    # v2 batch (§2.1, DefaultRecordBatch.java)
    BASE_OFFSET_OFFSET = 0
    BASE_OFFSET_LENGTH = 8
    LENGTH_OFFSET = BASE_OFFSET_OFFSET + BASE_OFFSET_LENGTH
    LENGTH_LENGTH = 4
    PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + LENGTH_LENGTH
    PARTITION_LEADER_EPOCH_LENGTH = 4
    # MAGIC_OFFSET, MAGIC_LENGTH: as above (PARTITION_LEADER_EPOCH_OFFSET + PARTITION_LEADER_EPOCH_LENGTH)
    CRC_OFFSET = MAGIC_OFFSET + MAGIC_LENGTH
    CRC_LENGTH = 4
    ATTRIBUTES_OFFSET = CRC_OFFSET + CRC_LENGTH
    ATTRIBUTES_LENGTH = 2
    LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH
    LAST_OFFSET_DELTA_LENGTH = 4
    BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH
    BASE_TIMESTAMP_LENGTH = 8
    MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + BASE_TIMESTAMP_LENGTH
    MAX_TIMESTAMP_LENGTH = 8
    PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + MAX_TIMESTAMP_LENGTH
    PRODUCER_ID_LENGTH = 8
    PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH
    PRODUCER_EPOCH_LENGTH = 2
    BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + PRODUCER_EPOCH_LENGTH
    BASE_SEQUENCE_LENGTH = 4
    RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + BASE_SEQUENCE_LENGTH
    RECORDS_COUNT_LENGTH = 4
    RECORD_BATCH_OVERHEAD = RECORDS_COUNT_OFFSET + RECORDS_COUNT_LENGTH
    V2_CODEC_MASK = 0x07
    V2_TIMESTAMP_TYPE_MASK = 0x08
    V2_MAX_CODEC = 4
    LEGACY_MAX_CODEC = 3         # zstd (4) is refused below magic 2
    INT32_MAX = 2147483647
    # The digest's canonical record head (digest.py): offset int64, header count int32
    DIGEST_OFFSET_LENGTH = 8
    DIGEST_HEADER_COUNT_LENGTH = 4
    RECORD_HEAD = DIGEST_OFFSET_LENGTH + DIGEST_HEADER_COUNT_LENGTH

# The chains above under the names of layout.py, for tests/formats/test_layout.py.
LAYOUT = {
    "OFFSET_OFFSET": OFFSET_OFFSET, "OFFSET_LENGTH": OFFSET_LENGTH, "SIZE_OFFSET": SIZE_OFFSET,
    "SIZE_LENGTH": SIZE_LENGTH, "LOG_OVERHEAD": LOG_OVERHEAD, "CRC_OR_LEADER_EPOCH_LENGTH": CRC_OR_LEADER_EPOCH_LENGTH,
    "MAGIC_OFFSET": MAGIC_OFFSET, "MAGIC_LENGTH": MAGIC_LENGTH, "HEADER_SIZE_UP_TO_MAGIC": HEADER_SIZE_UP_TO_MAGIC,
    "LEGACY_CRC_OFFSET": LEGACY_CRC_OFFSET, "LEGACY_CRC_LENGTH": LEGACY_CRC_LENGTH,
    "LEGACY_MAGIC_OFFSET": LEGACY_MAGIC_OFFSET, "LEGACY_MAGIC_LENGTH": LEGACY_MAGIC_LENGTH,
    "LEGACY_ATTRIBUTES_OFFSET": LEGACY_ATTRIBUTES_OFFSET, "LEGACY_ATTRIBUTES_LENGTH": LEGACY_ATTRIBUTES_LENGTH,
    "LEGACY_TIMESTAMP_OFFSET": LEGACY_TIMESTAMP_OFFSET, "LEGACY_TIMESTAMP_LENGTH": LEGACY_TIMESTAMP_LENGTH,
    "KEY_SIZE_OFFSET_V0": KEY_SIZE_OFFSET_V0, "KEY_SIZE_OFFSET_V1": KEY_SIZE_OFFSET_V1,
    "KEY_SIZE_LENGTH": KEY_SIZE_LENGTH, "VALUE_SIZE_LENGTH": VALUE_SIZE_LENGTH,
    "RECORD_OVERHEAD_V0": RECORD_OVERHEAD_V0, "RECORD_OVERHEAD_V1": RECORD_OVERHEAD_V1,
    "MIN_MESSAGE_SIZE": MIN_MESSAGE_SIZE, "V1_MINUS_V0_SIZE": V1_MINUS_V0_SIZE,
    "BASE_OFFSET_OFFSET": BASE_OFFSET_OFFSET, "BASE_OFFSET_LENGTH": BASE_OFFSET_LENGTH,
    "LENGTH_OFFSET": LENGTH_OFFSET, "LENGTH_LENGTH": LENGTH_LENGTH,
    "PARTITION_LEADER_EPOCH_OFFSET": PARTITION_LEADER_EPOCH_OFFSET,
    "PARTITION_LEADER_EPOCH_LENGTH": PARTITION_LEADER_EPOCH_LENGTH,
    "CRC_OFFSET": CRC_OFFSET, "CRC_LENGTH": CRC_LENGTH, "ATTRIBUTES_OFFSET": ATTRIBUTES_OFFSET,
    "ATTRIBUTES_LENGTH": ATTRIBUTES_LENGTH, "LAST_OFFSET_DELTA_OFFSET": LAST_OFFSET_DELTA_OFFSET,
    "LAST_OFFSET_DELTA_LENGTH": LAST_OFFSET_DELTA_LENGTH, "BASE_TIMESTAMP_OFFSET": BASE_TIMESTAMP_OFFSET,
    "BASE_TIMESTAMP_LENGTH": BASE_TIMESTAMP_LENGTH, "MAX_TIMESTAMP_OFFSET": MAX_TIMESTAMP_OFFSET,
    "MAX_TIMESTAMP_LENGTH": MAX_TIMESTAMP_LENGTH, "PRODUCER_ID_OFFSET": PRODUCER_ID_OFFSET,
    "PRODUCER_ID_LENGTH": PRODUCER_ID_LENGTH, "PRODUCER_EPOCH_OFFSET": PRODUCER_EPOCH_OFFSET,
    "PRODUCER_EPOCH_LENGTH": PRODUCER_EPOCH_LENGTH, "BASE_SEQUENCE_OFFSET": BASE_SEQUENCE_OFFSET,
    "BASE_SEQUENCE_LENGTH": BASE_SEQUENCE_LENGTH, "RECORDS_COUNT_OFFSET": RECORDS_COUNT_OFFSET,
    "RECORDS_COUNT_LENGTH": RECORDS_COUNT_LENGTH, "RECORD_BATCH_OVERHEAD": RECORD_BATCH_OVERHEAD,
}

cdef int64_t SAFE_DELTA = 17179869184  # 2**34, as _pycore.SAFE_DELTA
cdef int64_t INT64_MAX_ = 9223372036854775807
cdef int64_t INT64_MIN_ = -INT64_MAX_ - 1

_features = kcrc_init(1)


def crc_features(use_hw=True):
    """Which CRC instructions are in use (``"crc32c": "sse4.2" | "table"``, ``"crc32":
    "pclmul" | "table"``); ``use_hw=False`` switches to the tables (tests compare both)."""
    global _features
    _features = kcrc_init(1 if use_hw else 0)
    return {"crc32c": "sse4.2" if _features & KCRC_HW_CRC32C else "table",
            "crc32": "pclmul" if _features & KCRC_HW_CRC32 else "table"}


def take_crc_counts():
    """The bytes and calls CRC-32 and CRC-32C have checksummed in this process since the last
    call, which starts the counts again from zero (``crc32_bytes``, ``crc32_calls``,
    ``crc32c_bytes``, ``crc32c_calls``): the CRC work of a job, for the benchmarks' ceilings
    (threads checksumming at once may lose a few counts)."""
    cdef kcrc_counts c = kcrc_take_counts()
    return {"crc32_bytes": c.crc32_bytes, "crc32_calls": c.crc32_calls,
            "crc32c_bytes": c.crc32c_bytes, "crc32c_calls": c.crc32c_calls}


def crc_pieces(data, Py_ssize_t piece, bint castagnoli):
    """CRC-32 (or CRC-32C) of each ``piece`` bytes of ``data`` in turn, the last piece shorter,
    XORed together: the cost of checksumming many messages of that size, in C (bench.workers
    ``proof``, the CRC part of an upgrade's ceiling)."""
    cdef Py_buffer v
    cdef const unsigned char *p
    cdef Py_ssize_t at = 0, n
    cdef uint32_t acc = 0
    if piece < 1:
        raise ValueError(f"piece must be at least 1 byte, not {piece}")
    get_view(data, &v)
    try:
        p = <const unsigned char *>v.buf
        with nogil:
            while at < v.len:
                n = piece if piece < v.len - at else v.len - at
                acc ^= kcrc32c(0, p + at, <size_t>n) if castagnoli else kcrc32(0, p + at, <size_t>n)
                at += n
    finally:
        PyBuffer_Release(&v)
    return acc


# ---------------------------------------------------------------- growable output


cdef struct Buf:
    unsigned char *p
    Py_ssize_t n
    Py_ssize_t cap


cdef int buf_reserve(Buf *b, Py_ssize_t extra) noexcept nogil:
    """Room for ``extra`` more bytes; -1 when memory runs out."""
    cdef Py_ssize_t need = b.n + extra
    cdef Py_ssize_t cap
    cdef unsigned char *q
    if need <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 4096
    if cap < need:
        cap = need
    q = <unsigned char *>realloc(b.p, <size_t>cap)
    if q == NULL:
        return -1
    b.p = q
    b.cap = cap
    return 0


cdef inline void buf_free(Buf *b) noexcept nogil:
    free(b.p)
    b.p = NULL
    b.n = 0
    b.cap = 0


cdef bytes buf_bytes(Buf *b):
    return PyBytes_FromStringAndSize(<char *>b.p if b.n else NULL, b.n)


cdef object buf_view(Buf *b):
    """A read-only memoryview of the buffer's bytes, no copy. Only for a call that does not
    keep it: the caller releases it when the call returns (after that, anything that kept it
    gets an error, never bytes the buffer holds by then)."""
    if not b.n:
        return memoryview(b"")
    return PyMemoryView_FromMemory(<char *>b.p, b.n, PyBUF_READ)


# ---------------------------------------------------------------- varints (§0.1)


cdef inline int rd_varint(const unsigned char *d, Py_ssize_t *pos, Py_ssize_t limit, int max_bytes,
                          int64_t *out) noexcept nogil:
    """A zig-zag varint of at most ``max_bytes`` bytes, all before ``limit``: 1 and the value,
    or 0 (cut short, too long, or a varlong whose value does not fit 64 bits)."""
    cdef Py_ssize_t p = pos[0]
    cdef uint64_t u = 0
    cdef uint64_t b
    cdef int shift = 0
    cdef int i
    for i in range(max_bytes):
        if p >= limit:
            return 0
        b = d[p]
        p += 1
        if shift == 63:
            if (b & 0x7F) > 1:
                return 0
            u |= (b & 0x7F) << 63
        elif shift > 63:
            if b & 0x7F:
                return 0
        else:
            u |= (b & 0x7F) << shift
        if b < 0x80:
            pos[0] = p
            out[0] = <int64_t>((u >> 1) ^ (<uint64_t>0 - (u & 1)))
            return 1
        shift += 7
    return 0


cdef inline int varint_size(int64_t n) noexcept nogil:
    cdef uint64_t u = (<uint64_t>n << 1) ^ <uint64_t>(n >> 63)
    cdef int size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


cdef inline unsigned char *put_varint(unsigned char *p, int64_t n) noexcept nogil:
    cdef uint64_t u = (<uint64_t>n << 1) ^ <uint64_t>(n >> 63)
    while u >= 0x80:
        p[0] = <unsigned char>((u & 0x7F) | 0x80)
        p += 1
        u >>= 7
    p[0] = <unsigned char>u
    return p + 1


# ---------------------------------------------------------------- buffers


cdef inline int get_view(object obj, Py_buffer *view) except -1:
    return PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)


ctypedef uint32_t (*crc_fn)(uint32_t, const unsigned char *, size_t) nogil


cdef object _crc(crc_fn fn, object py_fn, object data, object value):
    """One checksum over a buffer: a seed that does not fit uint32 goes to the Python twin,
    which raises as the library it mirrors does."""
    cdef Py_buffer v
    cdef uint32_t seed
    try:
        seed = value
    except OverflowError:
        return py_fn(data, value)
    get_view(data, &v)
    try:
        return fn(seed, <const unsigned char *>v.buf, <size_t>v.len)
    finally:
        PyBuffer_Release(&v)


def crc32(data, value=0):
    """CRC-32 (IEEE) of v0/v1 messages, as ``zlib.crc32``."""
    return _crc(kcrc32, _py.crc32, data, value)


def crc32c(data, value=0):
    """CRC-32C (Castagnoli) of v2 batches, as ``crc32c.crc32c``."""
    return _crc(kcrc32c, _py.crc32c, data, value)


# ---------------------------------------------------------------- v0/v1


cdef struct Entry:
    int64_t off       # absolute offset (after the v1 relative-offset resolution)
    int64_t ts        # effective timestamp
    Py_ssize_t kp     # position of the key length
    int32_t klen
    int32_t vlen
    Py_ssize_t mend   # end of the message (= end of the value)


cdef int scan_inner_c(const unsigned char *d, Py_ssize_t end, int magic, int64_t wrapper_offset,
                      bint has_lat, int64_t lat, Buf *ents) noexcept nogil:
    """_pycore.scan_inner over ``d[0:end]``: 1 with the entries in ``ents`` (an array of
    Entry), 0 when irregular, -1 out of memory."""
    cdef bint v1 = magic == 1
    cdef Py_ssize_t kfield = V1_KEY_LENGTH_AT if v1 else V0_KEY_LENGTH_AT
    cdef Py_ssize_t overhead = RECORD_OVERHEAD_V1 if v1 else RECORD_OVERHEAD_V0
    cdef Py_ssize_t pos = 0, mend, kp, vp, count = 0, i
    cdef int32_t size, klen, vlen
    cdef int64_t base, prev
    cdef Entry *e
    ents.n = 0
    while pos < end:
        if end - pos < LOG_OVERHEAD + overhead:
            return 0
        size = kb_i32(d + pos + SIZE_OFFSET)
        if (d[pos + LEGACY_MAGIC_AT] != magic or d[pos + LEGACY_ATTRIBUTES_AT] & LEGACY_CODEC_MASK
                or size < overhead or size > end - pos - LOG_OVERHEAD):
            return 0
        mend = pos + LOG_OVERHEAD + size
        if (kcrc32(0, d + pos + LEGACY_MAGIC_AT, <size_t>(mend - pos - LEGACY_MAGIC_AT))
                != kb_u32(d + pos + LEGACY_CRC_AT)):
            return 0
        kp = pos + kfield
        klen = kb_i32(d + kp)
        vp = kp + KEY_SIZE_LENGTH + (klen if klen > 0 else 0)
        if klen < -1 or vp + VALUE_SIZE_LENGTH > mend:
            return 0
        vlen = kb_i32(d + vp)
        if vlen < -1 or vp + VALUE_SIZE_LENGTH + (vlen if vlen > 0 else 0) != mend:
            return 0
        if buf_reserve(ents, sizeof(Entry)) < 0:
            return -1
        e = <Entry *>(ents.p + ents.n)
        ents.n += sizeof(Entry)
        e.off = kb_i64(d + pos + OFFSET_OFFSET)
        e.ts = lat if has_lat else (kb_i64(d + pos + V1_TIMESTAMP_AT) if v1 else -1)
        e.kp = kp
        e.klen = klen
        e.vlen = vlen
        e.mend = mend
        count += 1
        pos = mend
    if count == 0:
        return 0
    e = <Entry *>ents.p
    if v1 and wrapper_offset != 0:
        # v1 inner offsets are relative; the wrapper carries the last absolute one (§1.7)
        if kb_sub_ovf(wrapper_offset, e[count - 1].off, &base) or base < 0:
            return 0
        for i in range(count):
            if kb_add_ovf(base, e[i].off, &e[i].off):
                return 0
    prev = -1
    for i in range(count):
        if e[i].off <= prev:
            return 0
        prev = e[i].off
    if prev != wrapper_offset and wrapper_offset != 0:
        return 0
    return 1


def scan_inner(data, magic, wrapper_offset, lat):
    """See ``_pycore.scan_inner``."""
    cdef Py_buffer v
    cdef Buf ents = Buf(NULL, 0, 0)
    cdef int64_t woff, lat_v = 0
    cdef int m, rc
    cdef Py_ssize_t i, count
    cdef Entry *e
    cdef list out
    try:
        woff = wrapper_offset
        m = magic
        if lat is not None:
            lat_v = lat
    except OverflowError:
        return _py.scan_inner(data, magic, wrapper_offset, lat)
    if m != 0 and m != 1:
        return _py.scan_inner(data, magic, wrapper_offset, lat)
    get_view(data, &v)
    try:
        rc = scan_inner_c(<const unsigned char *>v.buf, v.len, m, woff, lat is not None, lat_v, &ents)
        if rc < 0:
            raise MemoryError()
        if rc == 0:
            return None
        count = ents.n // sizeof(Entry)
        e = <Entry *>ents.p
        out = [None] * count
        for i in range(count):
            out[i] = (e[i].off, e[i].ts, e[i].kp, e[i].klen, e[i].vlen, e[i].mend, e[i].mend)
        return out
    finally:
        buf_free(&ents)
        PyBuffer_Release(&v)


def legacy_digest(data, entries, list parts, list stamps):
    """See ``_pycore.legacy_digest``; appends one piece for all the entries."""
    cdef Py_buffer v
    cdef Py_ssize_t total = 0, i, n, kp, vend
    cdef int64_t off
    cdef unsigned char *w
    cdef tuple e
    cdef object out
    n = len(entries)
    get_view(data, &v)
    try:
        # sizes and ranges first: anything odd goes to the reference whole
        for i in range(n):
            e = <tuple>entries[i]
            try:
                off = e[0]
                kp = e[2]
                vend = e[5]
            except OverflowError:
                return _py.legacy_digest(data, entries, parts, stamps)
            if kp < 0 or vend < kp or vend > v.len:
                return _py.legacy_digest(data, entries, parts, stamps)
            total += RECORD_HEAD + vend - kp
        out = PyBytes_FromStringAndSize(NULL, total)
        w = <unsigned char *>PyBytes_AS_STRING(out)
        for i in range(n):
            e = <tuple>entries[i]
            off = e[0]
            kp = e[2]
            vend = e[5]
            kb_put_i64(w, off)
            kb_put_i32(w + DIGEST_OFFSET_LENGTH, 0)
            memcpy(w + RECORD_HEAD, <const unsigned char *>v.buf + kp, <size_t>(vend - kp))
            w += RECORD_HEAD + vend - kp
        if n:
            parts.append(out)
            for i in range(n):
                stamps.append((<tuple>entries[i])[1])
    finally:
        PyBuffer_Release(&v)


cdef inline void put_v1_head(unsigned char *h, int attributes, int64_t timestamp) noexcept nogil:
    # the V1_HEAD bytes of a v1 message from its magic to its key length: magic 1, attributes,
    # timestamp (§1.9); h is the message's LEGACY_MAGIC_OFFSET
    h[0] = 1
    h[LEGACY_ATTRIBUTES_OFFSET - LEGACY_MAGIC_OFFSET] = <unsigned char>attributes
    kb_put_i64(h + LEGACY_TIMESTAMP_OFFSET - LEGACY_MAGIC_OFFSET, timestamp)


def v0_entry_to_v1(buf, at, offset, attributes, timestamp):
    """See ``_pycore.v0_entry_to_v1``."""
    cdef Py_buffer v
    cdef Py_ssize_t a, rest_len
    cdef int64_t off, ts
    cdef int attr
    cdef int32_t size
    cdef unsigned char head[V1_HEAD]
    cdef unsigned char *w
    cdef uint32_t crc
    cdef object out
    try:
        a = at
        off = offset
        ts = timestamp
        attr = attributes
    except OverflowError:
        return _py.v0_entry_to_v1(buf, at, offset, attributes, timestamp)
    if attr < -128 or attr > 127:
        return _py.v0_entry_to_v1(buf, at, offset, attributes, timestamp)
    get_view(buf, &v)
    try:
        if a < 0 or v.len - a < V0_KEY_LENGTH_AT:
            return _py.v0_entry_to_v1(buf, at, offset, attributes, timestamp)
        size = kb_i32(<const unsigned char *>v.buf + a + SIZE_OFFSET)
        if size < KEY_SIZE_OFFSET_V0 or size > v.len - a - LOG_OVERHEAD or size > INT32_MAX - V1_MINUS_V0_SIZE:
            return _py.v0_entry_to_v1(buf, at, offset, attributes, timestamp)
        rest_len = size - KEY_SIZE_OFFSET_V0  # key length .. end of value
        put_v1_head(head, attr, ts)
        crc = kcrc32(kcrc32(0, head, V1_HEAD), <const unsigned char *>v.buf + a + V0_KEY_LENGTH_AT, <size_t>rest_len)
        out = PyBytes_FromStringAndSize(NULL, V1_KEY_LENGTH_AT + rest_len)
        w = <unsigned char *>PyBytes_AS_STRING(out)
        kb_put_i64(w + OFFSET_OFFSET, off)
        kb_put_i32(w + SIZE_OFFSET, size + V1_MINUS_V0_SIZE)
        kb_put_u32(w + LEGACY_CRC_AT, crc)
        memcpy(w + LEGACY_MAGIC_AT, head, V1_HEAD)
        memcpy(w + V1_KEY_LENGTH_AT, <const unsigned char *>v.buf + a + V0_KEY_LENGTH_AT, <size_t>rest_len)
        return out
    finally:
        PyBuffer_Release(&v)


def v0_entries_to_v1(data, entries, base, attributes, timestamp):
    """See ``_pycore.v0_entries_to_v1``."""
    cdef Py_buffer v
    cdef Py_ssize_t total = 0, i, n, kp, mend
    cdef int64_t b, ts, off, rel
    cdef int attr
    cdef unsigned char head[V1_HEAD]
    cdef unsigned char *w
    cdef uint32_t seed
    cdef tuple e
    cdef object out
    try:
        b = base
        ts = timestamp
        attr = attributes
    except OverflowError:
        return _py.v0_entries_to_v1(data, entries, base, attributes, timestamp)
    if attr < -128 or attr > 127:
        return _py.v0_entries_to_v1(data, entries, base, attributes, timestamp)
    n = len(entries)
    get_view(data, &v)
    try:
        for i in range(n):
            e = <tuple>entries[i]
            try:
                off = e[0]
                kp = e[2]
                mend = e[6]
            except OverflowError:
                return _py.v0_entries_to_v1(data, entries, base, attributes, timestamp)
            if (kp < 0 or mend < kp or mend > v.len or kb_sub_ovf(off, b, &rel)
                    or mend - kp > INT32_MAX - KEY_SIZE_OFFSET_V1):
                return _py.v0_entries_to_v1(data, entries, base, attributes, timestamp)
            total += V1_KEY_LENGTH_AT + mend - kp
        put_v1_head(head, attr, ts)
        seed = kcrc32(0, head, V1_HEAD)
        out = PyBytes_FromStringAndSize(NULL, total)
        w = <unsigned char *>PyBytes_AS_STRING(out)
        for i in range(n):
            e = <tuple>entries[i]
            off = e[0]
            kp = e[2]
            mend = e[6]
            kb_put_i64(w + OFFSET_OFFSET, off - b)
            kb_put_i32(w + SIZE_OFFSET, <int32_t>(KEY_SIZE_OFFSET_V1 + mend - kp))  # v1 header + rest
            kb_put_u32(w + LEGACY_CRC_AT, kcrc32(seed, <const unsigned char *>v.buf + kp, <size_t>(mend - kp)))
            memcpy(w + LEGACY_MAGIC_AT, head, V1_HEAD)
            memcpy(w + V1_KEY_LENGTH_AT, <const unsigned char *>v.buf + kp, <size_t>(mend - kp))
            w += V1_KEY_LENGTH_AT + mend - kp
        return out
    finally:
        PyBuffer_Release(&v)


# ---------------------------------------------------------------- v2 records


cdef int walk_v2(const unsigned char *d, Py_ssize_t end, int64_t count, int64_t base_offset, int64_t base_ts,
                 bint has_lat, int64_t lat, Buf *out, Buf *stamps, int64_t *first, int64_t *last,
                 Py_ssize_t *nrec) noexcept nogil:
    """_pycore.digest_v2 over ``d[0:end]``: 1 regular, 0 irregular, -1 out of memory. With
    ``out`` NULL, only the walk (deep validation). Every field must lie inside its record
    (the reference fails later on any that does not: its position only grows)."""
    cdef Py_ssize_t pos = 0, rec_end, kstart, vstart, hstart, need
    cdef int64_t length, ts_delta, off_delta, offset, klen, vlen, nheaders, hklen, hvlen, h
    cdef int64_t i
    cdef unsigned char nb
    cdef unsigned char *w
    nrec[0] = 0
    if base_ts < INT64_MIN_ + SAFE_DELTA or base_ts > INT64_MAX_ - SAFE_DELTA:
        return 0  # timestamps may leave int64: the careful decoder checks them
    i = 0
    while i < count:
        i += 1
        if not rd_varint(d, &pos, end, 5, &length):
            return 0
        if length < 0 or length > end - pos:
            return 0
        rec_end = pos + length
        pos += 1  # record attributes, unused
        if not rd_varint(d, &pos, rec_end, 10, &ts_delta):
            return 0
        if ts_delta < -SAFE_DELTA or ts_delta > SAFE_DELTA:
            return 0
        if not rd_varint(d, &pos, rec_end, 5, &off_delta):
            return 0
        if kb_add_ovf(base_offset, off_delta, &offset):
            return 0
        if not rd_varint(d, &pos, rec_end, 5, &klen):
            return 0
        kstart = pos
        if klen >= 0:
            if klen >= rec_end - pos:
                return 0
            pos += klen
        elif klen != -1 or pos >= rec_end:
            return 0
        if not rd_varint(d, &pos, rec_end, 5, &vlen):
            return 0
        vstart = pos
        if vlen >= 0:
            if vlen >= rec_end - pos:
                return 0
            pos += vlen
        elif vlen != -1 or pos >= rec_end:
            return 0
        nb = d[pos]  # header count: one byte in the regular case
        pos += 1
        if nb >= 0x80:
            return 0
        nheaders = (nb >> 1) ^ -(nb & 1)
        if nheaders < 0 or nheaders > rec_end - pos:
            return 0
        hstart = pos
        if out != NULL:
            need = RECORD_HEAD + 8 + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
            if buf_reserve(out, need) < 0:
                return -1
            w = out.p + out.n
            kb_put_i64(w, offset)
            kb_put_i32(w + DIGEST_OFFSET_LENGTH, <int32_t>nheaders)
            out.n += RECORD_HEAD
        h = 0
        while h < nheaders:
            h += 1
            if not rd_varint(d, &pos, rec_end, 5, &hklen):
                return 0
            if hklen < 0 or hklen > rec_end - pos:
                return 0
            # Keys are str in a Record; utf-8 with surrogateescape round-trips any bytes,
            # so the raw key bytes are its canonical encoding.
            if out != NULL:
                if buf_reserve(out, 8 + hklen) < 0:
                    return -1
                w = out.p + out.n
                kb_put_i32(w, <int32_t>hklen)
                memcpy(w + 4, d + pos, <size_t>hklen)
                out.n += 4 + hklen
            pos += hklen
            if not rd_varint(d, &pos, rec_end, 5, &hvlen):
                return 0
            if hvlen >= 0:
                if hvlen > rec_end - pos:
                    return 0
                if out != NULL:
                    if buf_reserve(out, 4 + hvlen) < 0:
                        return -1
                    w = out.p + out.n
                    kb_put_i32(w, <int32_t>hvlen)
                    memcpy(w + 4, d + pos, <size_t>hvlen)
                    out.n += 4 + hvlen
                pos += hvlen
            elif hvlen == -1:
                if out != NULL:
                    if buf_reserve(out, 4) < 0:
                        return -1
                    kb_put_i32(out.p + out.n, -1)
                    out.n += 4
            else:
                return 0
        if pos != rec_end:
            return 0
        if out != NULL:
            need = 8 + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
            if buf_reserve(out, need) < 0:
                return -1
            w = out.p + out.n
            kb_put_i32(w, <int32_t>klen)
            w += 4
            if klen > 0:
                memcpy(w, d + kstart, <size_t>klen)
                w += klen
            kb_put_i32(w, <int32_t>vlen)
            w += 4
            if vlen > 0:
                memcpy(w, d + vstart, <size_t>vlen)
                w += vlen
            out.n = w - out.p
        if stamps != NULL:
            if buf_reserve(stamps, 8) < 0:
                return -1
            (<int64_t *>(stamps.p + stamps.n))[0] = lat if has_lat else base_ts + ts_delta
            stamps.n += 8
        if nrec[0] == 0:
            first[0] = offset
        last[0] = offset
        nrec[0] += 1
    if pos != end:
        return 0
    return 1


def digest_v2(buf, start, end, count, base_offset, base_timestamp, lat, list parts, list stamps):
    """See ``_pycore.digest_v2``; appends one piece for the whole batch, nothing when irregular."""
    cdef Py_buffer v
    cdef Py_ssize_t s, e, i, nrec = 0
    cdef int64_t cnt, boff, bts, lat_v = 0, first = 0, last = 0
    cdef int rc
    cdef Buf out = Buf(NULL, 0, 0)
    cdef Buf ts = Buf(NULL, 0, 0)
    cdef int64_t *tsp
    try:
        s = start
        e = end
        cnt = count
        boff = base_offset
        bts = base_timestamp
        if lat is not None:
            lat_v = lat
    except OverflowError:
        return _py.digest_v2(buf, start, end, count, base_offset, base_timestamp, lat, parts, stamps)
    get_view(buf, &v)
    try:
        if s < 0 or e < s or e > v.len:
            return _py.digest_v2(buf, start, end, count, base_offset, base_timestamp, lat, parts, stamps)
        rc = walk_v2(<const unsigned char *>v.buf + s, e - s, cnt, boff, bts, lat is not None, lat_v, &out, &ts,
                     &first, &last, &nrec)
        if rc < 0:
            raise MemoryError()
        if rc == 0:
            return None
        if nrec == 0:
            return ()
        parts.append(buf_bytes(&out))
        tsp = <int64_t *>ts.p
        for i in range(nrec):
            stamps.append(PyLong_FromLongLong(tsp[i]))
        return (first, last)
    finally:
        buf_free(&out)
        buf_free(&ts)
        PyBuffer_Release(&v)


def check_v2(buf, start, end, count, base_offset, base_timestamp):
    """See ``_pycore.check_v2``."""
    cdef Py_buffer v
    cdef Py_ssize_t s, e, nrec = 0
    cdef int64_t cnt, boff, bts, first = 0, last = 0
    cdef int rc
    try:
        s = start
        e = end
        cnt = count
        boff = base_offset
        bts = base_timestamp
    except OverflowError:
        return _py.check_v2(buf, start, end, count, base_offset, base_timestamp)
    get_view(buf, &v)
    try:
        if s < 0 or e < s or e > v.len:
            return _py.check_v2(buf, start, end, count, base_offset, base_timestamp)
        rc = walk_v2(<const unsigned char *>v.buf + s, e - s, cnt, boff, bts, False, 0, NULL, NULL, &first, &last,
                     &nrec)
        if rc <= 0:
            return None
        return (first, last) if nrec else ()
    finally:
        PyBuffer_Release(&v)


# ---------------------------------------------------------------- v2 writers


cdef class _Blob:
    """A bytes-like argument (or None) held as a buffer for the writers."""

    cdef Py_buffer view
    cdef bint held

    def __cinit__(self, obj):
        self.held = False
        if obj is not None:
            get_view(obj, &self.view)
            self.held = True

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)

    cdef inline Py_ssize_t length(self):
        return self.view.len if self.held else -1


cdef inline Py_ssize_t single_record_batch_size(Py_ssize_t klen, Py_ssize_t vlen) noexcept nogil:
    """Bytes of a one-record uncompressed v2 batch with these key and value lengths (-1: null),
    or -1 when its length field would not fit int32."""
    cdef Py_ssize_t body = 3 + varint_size(klen) + (klen if klen > 0 else 0) + varint_size(vlen) \
        + (vlen if vlen > 0 else 0) + 1
    cdef Py_ssize_t after = RECORD_BATCH_OVERHEAD - ATTRIBUTES_OFFSET + varint_size(body) + body  # CRC'd bytes
    if after + PARTITION_LEADER_EPOCH_LENGTH + MAGIC_LENGTH + CRC_LENGTH > INT32_MAX:
        return -1
    return ATTRIBUTES_OFFSET + after


cdef void put_single_record_batch(unsigned char *w, Py_ssize_t total, int64_t off, int64_t ts,
                                  const unsigned char *key, Py_ssize_t klen, const unsigned char *value,
                                  Py_ssize_t vlen, bint log_append_time, int32_t epoch) noexcept nogil:
    """Write the ``total`` (:func:`single_record_batch_size`) bytes of one uncompressed record in
    its own v2 batch at ``w``: record attributes, timestamp delta and offset delta 0, no headers."""
    cdef unsigned char *start = w
    cdef Py_ssize_t after = total - ATTRIBUTES_OFFSET
    kb_put_i64(w + BASE_OFFSET_OFFSET, off)
    kb_put_i32(w + LENGTH_OFFSET, <int32_t>(after + PARTITION_LEADER_EPOCH_LENGTH + MAGIC_LENGTH + CRC_LENGTH))
    kb_put_i32(w + PARTITION_LEADER_EPOCH_OFFSET, epoch)
    w[MAGIC_OFFSET] = 2
    kb_put_i16(w + ATTRIBUTES_OFFSET, V2_TIMESTAMP_TYPE_MASK if log_append_time else 0)
    kb_put_i32(w + LAST_OFFSET_DELTA_OFFSET, 0)
    kb_put_i64(w + BASE_TIMESTAMP_OFFSET, ts)
    kb_put_i64(w + MAX_TIMESTAMP_OFFSET, ts)
    kb_put_i64(w + PRODUCER_ID_OFFSET, -1)
    kb_put_i16(w + PRODUCER_EPOCH_OFFSET, -1)
    kb_put_i32(w + BASE_SEQUENCE_OFFSET, -1)
    kb_put_i32(w + RECORDS_COUNT_OFFSET, 1)
    w = put_varint(w + RECORD_BATCH_OVERHEAD,
                   3 + varint_size(klen) + (klen if klen > 0 else 0) + varint_size(vlen) + (vlen if vlen > 0 else 0) + 1)
    w[0] = 0  # record attributes
    w[1] = 0  # timestamp delta
    w[2] = 0  # offset delta
    w = put_varint(w + 3, klen)
    if klen > 0:
        memcpy(w, key, <size_t>klen)
        w += klen
    w = put_varint(w, vlen)
    if vlen > 0:
        memcpy(w, value, <size_t>vlen)
        w += vlen
    w[0] = 0  # no headers
    kb_put_u32(start + CRC_OFFSET, kcrc32c(0, start + ATTRIBUTES_OFFSET, <size_t>after))


def single_record_batch(offset, timestamp, key, value, log_append_time, partition_leader_epoch):
    """See ``_pycore.single_record_batch``."""
    cdef int64_t off, ts
    cdef int32_t epoch
    cdef Py_ssize_t klen, vlen, total
    cdef object out
    try:
        off = offset
        ts = timestamp
        epoch = partition_leader_epoch
    except OverflowError:
        return _py.single_record_batch(offset, timestamp, key, value, log_append_time, partition_leader_epoch)
    k = _Blob(key)
    val = _Blob(value)
    klen = k.length()
    vlen = val.length()
    total = single_record_batch_size(klen, vlen)
    if total < 0:
        return _py.single_record_batch(offset, timestamp, key, value, log_append_time, partition_leader_epoch)
    out = PyBytes_FromStringAndSize(NULL, total)
    put_single_record_batch(<unsigned char *>PyBytes_AS_STRING(out), total, off, ts,
                            <const unsigned char *>k.view.buf if klen > 0 else NULL, klen,
                            <const unsigned char *>val.view.buf if vlen > 0 else NULL, vlen,
                            bool(log_append_time), epoch)
    return out


cdef class _RecordParts:
    """One record's pieces for :func:`encode_records`: buffers of key, value and headers."""

    cdef _Blob key
    cdef _Blob value
    cdef list headers  # [(_Blob utf-8 key, _Blob value)]
    cdef int64_t offset_delta
    cdef int64_t timestamp_delta
    cdef Py_ssize_t body


def encode_records(records, base_offset, base_timestamp):
    """See ``_pycore.encode_records``."""
    cdef int64_t boff, bts, off, ts, delta, prev = -1, max_ts = -1, tdelta
    cdef Py_ssize_t total = 0, body, hl, i, n
    cdef _RecordParts rp
    cdef _Blob hk, hv
    cdef list items = []
    cdef unsigned char *w
    cdef object out
    try:
        boff = base_offset
        bts = base_timestamp
    except OverflowError:
        return _py.encode_records(records, base_offset, base_timestamp)
    for r in records:
        if type(r) is not Record:
            return _py.encode_records(records, base_offset, base_timestamp)
        try:
            off = <object>PyTuple_GET_ITEM(r, 0)
            ts = <object>PyTuple_GET_ITEM(r, 1)
        except OverflowError:
            return _py.encode_records(records, base_offset, base_timestamp)
        if kb_sub_ovf(off, boff, &delta) or kb_sub_ovf(ts, bts, &tdelta):
            return _py.encode_records(records, base_offset, base_timestamp)
        if delta <= prev or delta > INT32_MAX:
            raise ValueError(f"record offset {off} does not fit the batch (delta {delta})")
        prev = delta
        if ts > max_ts:
            max_ts = ts
        rp = _RecordParts.__new__(_RecordParts)
        rp.offset_delta = delta
        rp.timestamp_delta = tdelta
        rp.key = _Blob(<object>PyTuple_GET_ITEM(r, 2))
        rp.value = _Blob(<object>PyTuple_GET_ITEM(r, 3))
        headers = <object>PyTuple_GET_ITEM(r, 4)
        body = 1 + varint_size(tdelta) + varint_size(delta)
        body += 1 if rp.key.length() < 0 else varint_size(rp.key.length()) + rp.key.length()
        body += 1 if rp.value.length() < 0 else varint_size(rp.value.length()) + rp.value.length()
        if not headers:
            rp.headers = None
            body += 1
        else:
            rp.headers = []
            body += varint_size(len(headers))
            for h in headers:
                hk = _Blob(h.key.encode("utf-8", "surrogateescape"))
                hv = _Blob(h.value)
                rp.headers.append((hk, hv))
                body += varint_size(hk.length()) + hk.length()
                body += 1 if hv.length() < 0 else varint_size(hv.length()) + hv.length()
        rp.body = body
        total += varint_size(body) + body
        items.append(rp)
    out = PyBytes_FromStringAndSize(NULL, total)
    w = <unsigned char *>PyBytes_AS_STRING(out)
    n = len(items)
    for i in range(n):
        rp = <_RecordParts>items[i]
        w = put_varint(w, rp.body)
        w[0] = 0  # record attributes
        w = put_varint(w + 1, rp.timestamp_delta)
        w = put_varint(w, rp.offset_delta)
        w = put_varint(w, rp.key.length())
        if rp.key.length() > 0:
            memcpy(w, rp.key.view.buf, <size_t>rp.key.length())
            w += rp.key.length()
        w = put_varint(w, rp.value.length())
        if rp.value.length() > 0:
            memcpy(w, rp.value.view.buf, <size_t>rp.value.length())
            w += rp.value.length()
        if rp.headers is None:
            w[0] = 0
            w += 1
        else:
            w = put_varint(w, len(rp.headers))
            for hk, hv in rp.headers:
                hl = hk.length()
                w = put_varint(w, hl)
                if hl > 0:
                    memcpy(w, hk.view.buf, <size_t>hl)
                    w += hl
                hl = hv.length()
                w = put_varint(w, hl)
                if hl > 0:
                    memcpy(w, hv.view.buf, <size_t>hl)
                    w += hl
    return out, max_ts, prev


# ---------------------------------------------------------------- deep validation of a segment


cdef int64_t *int64_array(object values, Py_ssize_t *n) except? NULL:
    cdef Py_ssize_t i
    cdef int64_t *a
    n[0] = len(values)
    a = <int64_t *>malloc(<size_t>(n[0] if n[0] else 1) * sizeof(int64_t))
    if a == NULL:
        raise MemoryError()
    try:
        for i in range(n[0]):
            a[i] = values[i]
    except BaseException:
        free(a)
        raise
    return a


# ---------------------------------------------------------------- snappy and lz4 framing (compression.py)
#
# The frames Kafka writes hold one block (a wrapper's or batch's records are rarely over 32 KiB):
# these functions frame that case in C around cramjam's raw block calls, and hand everything
# else, and every error, to compression.py's framing (``*_py``), so bytes and errors are the same.
# core.py installs them as compression.snappy_* / lz4_* while the compiled core is active.

cdef object _snappy_compress_raw = _cramjam.snappy.compress_raw
cdef object _snappy_decompress_raw = _cramjam.snappy.decompress_raw
cdef object _lz4_compress_block = _cramjam.lz4.compress_block
cdef object _lz4_decompress_block_into = _cramjam.lz4.decompress_block_into
cdef bytes _SNAPPY_HEADER = _codecs.SNAPPY_XERIAL_HEADER
cdef bytes _LZ4_HEADER = _codecs.LZ4_HEADER
cdef bytes _LZ4_HEADER_V0 = _codecs.LZ4_HEADER_V0

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
            one_block = 0 <= length <= _codecs.SNAPPY_MAX_EXPANSION * (end - SNAPPY_BLOCK_AT)
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
    if not 0 < n <= _codecs.SNAPPY_BLOCK_SIZE:
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
    scratch = getattr(_codecs._lz4_buffers, "kafka", None) or _codecs._lz4_scratch(LZ4_MAX_BLOCK)
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
    from here, else None (they then are compression.py's pair: core.py does not install them)."""
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


# gzip goes straight to compression.py's active reader and writer, looked up at each call
# (tests swap them): what its decompress and compress dispatch to for gzip, without building
# the Compression member on every wrapper.
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


cdef class SegmentWalker:
    """The regular batches of a segment, walked and judged in C for ``logdir.validate``.

    :meth:`advance` consumes consecutive complete batches of a buffer as long as each one is
    regular and would give no finding at all: CRC, framing, deep structure (v2 records; the
    inner messages of v0/v1 wrappers, after ``codec_decompress``), the offset rules of
    ``validate.batch_offset_problems``, the leader epoch, and the offset and time index
    entries that fall on it. It stops before the first batch it cannot vouch for, which the
    caller then handles batch by batch (same findings and errors as without the walker). The
    state the caller's loop carries (``prev_last``, ``max_ts``, ``oi``, ``ti``) is read and
    written through the attributes; ``batches`` and ``records`` count what was consumed here.

    Two more duties, for the digest and the rewrite (``migrations/upgrade/rewrite.py``):
    - ``digest=True``: the canonical digest bytes and timestamps of every record it consumes
      (``digest.py``'s layout, as ``digest_v2``/``legacy_digest`` make them), collected until
      :meth:`feed_digest` hands them to ``RecordDigester.feed_packed``;
    - ``target_magic`` 1 or 2: every batch it consumes is also converted as
      ``rewrite.Converter`` converts it (copied when already in the target format; an
      uncompressed v0/v1 message up-converted; a compressed wrapper that needs converting is
      left to the caller) and appended to the output segment opened by :meth:`open_output`,
      with the index entries ``IndexBuilder.append`` would make (:meth:`write_output`). A piece
      that would roll the output segment (``segment_bytes``, int32 relative offsets) is left to
      the caller too, so every roll and every warning happens where it happens without it.
    """

    cdef public int64_t prev_last
    cdef public int64_t max_ts
    cdef public Py_ssize_t oi
    cdef public Py_ssize_t ti
    cdef public Py_ssize_t batches
    cdef public Py_ssize_t records
    cdef public bint enabled  # False: advance() consumes nothing (the caller's state left int64)
    cdef bint deep
    cdef int64_t base
    cdef bint has_next
    cdef int64_t next_base
    cdef int64_t *idx_off
    cdef int64_t *idx_pos
    cdef Py_ssize_t n_idx
    cdef int64_t *time_ts
    cdef int64_t *time_off
    cdef Py_ssize_t n_time
    cdef int64_t *epoch_start
    cdef int64_t *epoch
    cdef Py_ssize_t n_epochs
    cdef Buf ents
    cdef object _mv  # the buffer being walked, for the codec's input slices
    cdef int64_t in_bytes[3]  # bytes consumed per magic
    cdef int count_from  # records of batches of this magic and above are counted (3: none)
    cdef public int64_t counted
    cdef Py_ssize_t p_count
    # digest=True: canonical bytes and (native) timestamps since the last feed_digest()
    cdef bint digesting
    cdef Buf dg
    cdef Buf dts
    cdef int64_t dg_first
    cdef int64_t dg_last
    cdef Py_ssize_t dg_records
    cdef int64_t p_first  # the batch being judged: its records' span and count
    cdef int64_t p_last
    cdef Py_ssize_t p_n
    # target_magic 1/2: the output segment (IndexBuilder's state) and the converted bytes
    cdef int target
    cdef bint has_stamp
    cdef int64_t stamp
    cdef int64_t *out_epoch_start
    cdef int64_t *out_epoch
    cdef Py_ssize_t n_out_epochs
    cdef int64_t segment_bytes
    cdef int64_t max_message
    cdef int64_t ix_interval
    cdef Buf conv  # a wrapper's converted inner data, before the codec
    cdef bint out_open
    cdef int64_t out_base
    cdef int64_t ix_valid
    cdef int64_t ix_last_entry
    cdef int64_t ix_max_ts
    cdef int64_t ix_off_max
    cdef Buf out
    cdef Buf oix  # offset index entries: (offset, position) int64 pairs
    cdef Buf tix  # time index entries: (timestamp, offset) int64 pairs
    cdef int64_t tix_last_ts  # the time index's last timestamp (TimeIndex.last_entry)
    cdef Py_ssize_t out_batches
    cdef int64_t out_last
    cdef int64_t out_bytes[3]
    cdef Py_ssize_t pp_size  # the piece of the batch being judged
    cdef int64_t pp_last
    cdef int64_t pp_max_ts
    cdef int pp_magic

    def __cinit__(self):
        self.idx_off = self.idx_pos = self.time_ts = self.time_off = self.epoch_start = self.epoch = NULL
        self.out_epoch_start = self.out_epoch = NULL
        self.ents = Buf(NULL, 0, 0)
        self.dg = Buf(NULL, 0, 0)
        self.dts = Buf(NULL, 0, 0)
        self.conv = Buf(NULL, 0, 0)
        self.out = Buf(NULL, 0, 0)
        self.oix = Buf(NULL, 0, 0)
        self.tix = Buf(NULL, 0, 0)

    def __init__(self, *, bint deep, base_offset, next_base_offset, offset_entries, time_entries, leader_epochs,
                 bint digest=False, int target_magic=0, stamp_v0=None,
                 output_leader_epochs=(), segment_bytes=INT64_MAX_, max_message_bytes=INT64_MAX_,
                 index_interval_bytes=4096, int count_from=3):
        """``offset_entries`` (offset, position) and ``time_entries`` (timestamp, offset) as
        read from the indexes, ``leader_epochs`` (epoch, start offset) or None. The codecs are
        ``codec_decompress``/``codec_compress``: snappy and LZ4 framed here, gzip and zstd by
        compression.py. OverflowError when a value does not fit int64 (the caller then
        validates without the walker). ``digest`` and ``target_magic`` (with ``stamp_v0``,
        ``output_leader_epochs``, ``segment_bytes``, ``max_message_bytes`` and
        ``index_interval_bytes`` of ``rewrite.RewriteSpec``) need ``deep``. ``count_from``: the records
        of batches of this magic and above are counted in ``counted`` (a v2 batch by its
        header, a wrapper by its inner messages, decompressed even when not ``deep``), until a
        batch below that magic: counting stops there (the upgrade rewrites such a segment, and
        its unit counts the records), so ``counted`` is then the count before that batch."""
        if (digest or target_magic) and not deep:
            raise ValueError("the digest and the conversion walk records: deep=True")
        if target_magic not in (0, 1, 2):
            raise ValueError(f"target magic must be 1 or 2, not {target_magic}")
        self.digesting = digest
        self.count_from = count_from
        self.counted = 0
        self.target = target_magic
        self.has_stamp = stamp_v0 is not None
        self.stamp = stamp_v0 if self.has_stamp else -1
        self.segment_bytes = segment_bytes
        self.max_message = max_message_bytes
        self.ix_interval = index_interval_bytes
        self.out_epoch = int64_array([e[0] for e in output_leader_epochs], &self.n_out_epochs)
        self.out_epoch_start = int64_array([e[1] for e in output_leader_epochs], &self.n_out_epochs)
        self.in_bytes[0] = self.in_bytes[1] = self.in_bytes[2] = 0
        self.out_bytes[0] = self.out_bytes[1] = self.out_bytes[2] = 0
        self.deep = deep
        self.base = base_offset
        self.prev_last = self.base - 1
        self.has_next = next_base_offset is not None
        self.next_base = next_base_offset if self.has_next else 0
        self.max_ts = -1
        self.oi = self.ti = self.batches = self.records = 0
        self.enabled = True
        self.idx_off = int64_array([e[0] for e in offset_entries], &self.n_idx)
        self.idx_pos = int64_array([e[1] for e in offset_entries], &self.n_idx)
        self.time_ts = int64_array([e[0] for e in time_entries], &self.n_time)
        self.time_off = int64_array([e[1] for e in time_entries], &self.n_time)
        epochs = leader_epochs or ()
        self.epoch = int64_array([e[0] for e in epochs], &self.n_epochs)
        self.epoch_start = int64_array([e[1] for e in epochs], &self.n_epochs)

    def __dealloc__(self):
        free(self.idx_off)
        free(self.idx_pos)
        free(self.time_ts)
        free(self.time_off)
        free(self.epoch_start)
        free(self.epoch)
        free(self.out_epoch_start)
        free(self.out_epoch)
        buf_free(&self.ents)
        buf_free(&self.dg)
        buf_free(&self.conv)
        buf_free(&self.dts)
        buf_free(&self.out)
        buf_free(&self.oix)
        buf_free(&self.tix)

    def advance(self, buf, Py_ssize_t at, int64_t file_pos):
        """Consume the regular batches of ``buf`` from ``at`` (file position ``file_pos`` of
        ``buf[0]``); return where the first batch not consumed starts."""
        cdef Py_buffer v
        cdef const unsigned char *d
        cdef int32_t size
        cdef unsigned char magic
        cdef int ok
        cdef Py_ssize_t dg_n, dts_n, out_n
        if not self.enabled or (self.target and not self.out_open):
            return at
        get_view(buf, &v)
        self._mv = buf
        try:
            d = <const unsigned char *>v.buf
            while v.len - at > HEADER_SIZE_UP_TO_MAGIC:
                size = kb_i32(d + at + SIZE_OFFSET)
                if size < MIN_MESSAGE_SIZE or size > v.len - at - LOG_OVERHEAD:
                    break  # corrupt or not complete in this buffer: the caller's loop decides
                magic = d[at + MAGIC_OFFSET]
                dg_n, dts_n, out_n = self.dg.n, self.dts.n, self.out.n
                self.p_n = 0
                self.p_count = 0
                self.pp_size = 0
                if magic == 2:
                    ok = self._v2(d + at, at, size, file_pos + at)
                elif magic <= 1:
                    ok = self._legacy(d + at, at, size, magic, file_pos + at)
                else:
                    ok = 0
                if ok <= 0:
                    self.dg.n, self.dts.n, self.out.n = dg_n, dts_n, out_n  # what this batch added
                    break
                self._apply()
                self.in_bytes[magic] += LOG_OVERHEAD + size
                at += LOG_OVERHEAD + size
            return at
        finally:
            self._mv = None
            PyBuffer_Release(&v)

    cdef object _decompressed(self, Py_ssize_t start, Py_ssize_t n, int codec, int magic):
        """The codec's output for ``n`` bytes at ``start`` of the walked buffer, or None on any
        error (the caller's careful path then raises it, with its position)."""
        if not isinstance(self._mv, memoryview):
            self._mv = memoryview(self._mv)
        try:
            return codec_decompress(codec, self._mv[start : start + n], magic)
        except Exception:
            return None

    cdef int _v2(self, const unsigned char *p, Py_ssize_t at, int32_t size, int64_t pos) except -1:
        cdef int64_t first, last, sfirst = 0, slast = 0, base_ts, max_ts
        cdef int32_t lod, count, ple
        cdef int16_t attributes
        cdef int codec, rc
        cdef Py_ssize_t nrec = 0, n = 0
        cdef Py_buffer dv
        cdef bint lat
        cdef Buf *dg
        cdef Buf *dts
        if size + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD:
            return 0
        if kcrc32c(0, p + ATTRIBUTES_OFFSET, <size_t>(size + LOG_OVERHEAD - ATTRIBUTES_OFFSET)) != kb_u32(p + CRC_OFFSET):
            return 0
        count = kb_i32(p + RECORDS_COUNT_OFFSET)
        lod = kb_i32(p + LAST_OFFSET_DELTA_OFFSET)
        if count < 0 or lod < 0:
            return 0
        first = kb_i64(p + BASE_OFFSET_OFFSET)
        if kb_add_ovf(first, lod, &last):
            return 0
        attributes = kb_i16(p + ATTRIBUTES_OFFSET)
        base_ts = kb_i64(p + BASE_TIMESTAMP_OFFSET)
        max_ts = kb_i64(p + MAX_TIMESTAMP_OFFSET)
        if self.deep:
            codec = attributes & V2_CODEC_MASK
            # a LogAppendTime batch's time is every record's (record_batch.digest_parts)
            lat = (attributes & V2_TIMESTAMP_TYPE_MASK) != 0
            dg = &self.dg if self.digesting else NULL
            dts = &self.dts if self.digesting else NULL
            if codec == 0:
                rc = walk_v2(p + RECORD_BATCH_OVERHEAD, size + LOG_OVERHEAD - RECORD_BATCH_OVERHEAD, count, first,
                             base_ts, lat, max_ts, dg, dts, &sfirst, &slast, &nrec)
            elif codec <= V2_MAX_CODEC:
                data = self._decompressed(at + RECORD_BATCH_OVERHEAD, size + LOG_OVERHEAD - RECORD_BATCH_OVERHEAD,
                                          codec, 2)
                if data is None:
                    return 0
                get_view(data, &dv)
                try:
                    rc = walk_v2(<const unsigned char *>dv.buf, dv.len, count, first, base_ts, lat, max_ts, dg, dts,
                                 &sfirst, &slast, &nrec)
                finally:
                    PyBuffer_Release(&dv)
            else:
                return 0
            if rc < 0:
                raise MemoryError()
            if rc == 0:
                return 0
            n = count
            # the record offsets must lie in the batch's range (validate's "record-offset")
            if nrec and (sfirst < first or slast > last):
                return 0
            if self.digesting:
                self.p_n, self.p_first, self.p_last = nrec, sfirst, slast
        if self.count_from <= 2:
            self.p_count = count
        ple = kb_i32(p + PARTITION_LEADER_EPOCH_OFFSET)
        if not self._offsets_ok(first, last, False):
            return 0
        if self.n_epochs and not self._epoch_ok(first, ple):
            return 0
        if self.target and not self._emit(p, LOG_OVERHEAD + size, last, max_ts, 2):
            return 0  # a v2 batch is copied as it is, whatever the target
        return self._commit(pos, first, last, max_ts, n)

    cdef int _legacy(self, const unsigned char *p, Py_ssize_t at, int32_t size, int magic, int64_t pos) except -1:
        cdef bint v1 = magic == 1
        cdef Py_ssize_t mend = LOG_OVERHEAD + size, kp, vp
        cdef int32_t klen, vlen
        cdef int attributes, codec, rc
        cdef int64_t offset, ts, first, wrapper_ts
        cdef Py_ssize_t n = 0
        cdef bint shallow = False
        cdef Py_buffer dv
        if size < (RECORD_OVERHEAD_V1 if v1 else RECORD_OVERHEAD_V0):
            return 0
        if kcrc32(0, p + LEGACY_MAGIC_AT, <size_t>(mend - LEGACY_MAGIC_AT)) != kb_u32(p + LEGACY_CRC_AT):
            return 0
        if magic < self.count_from <= 2:
            self.count_from = 3  # below the counted formats: no more counting (see __init__)
        kp = V1_KEY_LENGTH_AT if v1 else V0_KEY_LENGTH_AT
        klen = kb_i32(p + kp)
        vp = kp + KEY_SIZE_LENGTH + (klen if klen > 0 else 0)
        if klen < -1 or vp + VALUE_SIZE_LENGTH > mend:
            return 0
        vlen = kb_i32(p + vp)
        if vlen < -1 or vp + VALUE_SIZE_LENGTH + (vlen if vlen > 0 else 0) != mend:
            return 0
        attributes = p[LEGACY_ATTRIBUTES_AT]
        codec = attributes & LEGACY_CODEC_MASK
        offset = kb_i64(p + OFFSET_OFFSET)
        ts = kb_i64(p + V1_TIMESTAMP_AT) if v1 else -1
        first = offset
        data = None
        if codec:
            if vlen < 0:
                return 0  # a wrapper without a value
            if not self.deep:
                shallow = True  # judged by its last offset, as Kafka's recovery does
                if magic >= self.count_from:
                    # counted for the survey: its inner messages decompressed and scanned (what
                    # legacy.scan does for record_count; anything irregular is the loop's)
                    if codec > LEGACY_MAX_CODEC:
                        return 0
                    data = self._decompressed(at + vp + VALUE_SIZE_LENGTH, vlen, codec, magic)
                    if data is None:
                        return 0
                    get_view(data, &dv)
                    try:
                        rc = scan_inner_c(<const unsigned char *>dv.buf, dv.len, magic, offset, False, 0, &self.ents)
                    finally:
                        PyBuffer_Release(&dv)
                    if rc < 0:
                        raise MemoryError()
                    if rc == 0:
                        return 0
                    self.p_count = self.ents.n // sizeof(Entry)
            elif codec > LEGACY_MAX_CODEC:
                return 0
            else:
                data = self._decompressed(at + vp + VALUE_SIZE_LENGTH, vlen, codec, magic)
                if data is None:
                    return 0
                get_view(data, &dv)
                try:
                    # a v1 LogAppendTime wrapper's time is its inner messages' (legacy.scan)
                    rc = scan_inner_c(<const unsigned char *>dv.buf, dv.len, magic, offset,
                                      v1 and (attributes & LEGACY_TIMESTAMP_TYPE_MASK) != 0, ts, &self.ents)
                    if rc > 0 and self.digesting and self._digest_entries(<const unsigned char *>dv.buf) < 0:
                        raise MemoryError()
                finally:
                    PyBuffer_Release(&dv)
                if rc < 0:
                    raise MemoryError()
                if rc == 0:
                    return 0
                first = (<Entry *>self.ents.p)[0].off
                n = self.ents.n // sizeof(Entry)
                if first > offset:
                    return 0  # inner offsets above the wrapper's (only possible at offset 0): the loop's
        elif self.deep:
            n = 1
            if self.digesting:
                # one record: its canonical bytes are a head and the message's tail (digest.py)
                if buf_reserve(&self.dg, RECORD_HEAD + mend - kp) < 0 or buf_reserve(&self.dts, 8) < 0:
                    raise MemoryError()
                kb_put_i64(self.dg.p + self.dg.n, offset)
                kb_put_i32(self.dg.p + self.dg.n + DIGEST_OFFSET_LENGTH, 0)
                memcpy(self.dg.p + self.dg.n + RECORD_HEAD, p + kp, <size_t>(mend - kp))
                self.dg.n += RECORD_HEAD + mend - kp
                (<int64_t *>(self.dts.p + self.dts.n))[0] = ts
                self.dts.n += 8
                self.p_n, self.p_first, self.p_last = 1, offset, offset
        if magic >= self.count_from and not shallow:
            self.p_count = n if self.deep else 1
        if not self._offsets_ok(first, offset, shallow):
            return 0
        if self.target:
            if codec and magic < self.target:
                if not self._emit_wrapper(data, magic, attributes, codec, ts):
                    return 0
            elif not self._emit_legacy(p, size, magic, attributes, codec, offset, ts, kp, klen, vlen):
                return 0
        return self._commit(pos, (self.prev_last + 1) if shallow else first, offset, ts, n)

    cdef int _digest_entries(self, const unsigned char *d) except -1:
        """The canonical bytes and timestamps of the inner messages in ``self.ents`` (``d``: the
        decompressed value they lie in); 0, or -1 when memory runs out."""
        cdef Entry *e = <Entry *>self.ents.p
        cdef Py_ssize_t count = self.ents.n // sizeof(Entry), i
        for i in range(count):
            if buf_reserve(&self.dg, RECORD_HEAD + e[i].mend - e[i].kp) < 0 or buf_reserve(&self.dts, 8) < 0:
                return -1
            kb_put_i64(self.dg.p + self.dg.n, e[i].off)
            kb_put_i32(self.dg.p + self.dg.n + DIGEST_OFFSET_LENGTH, 0)
            memcpy(self.dg.p + self.dg.n + RECORD_HEAD, d + e[i].kp, <size_t>(e[i].mend - e[i].kp))
            self.dg.n += RECORD_HEAD + e[i].mend - e[i].kp
            (<int64_t *>(self.dts.p + self.dts.n))[0] = e[i].ts
            self.dts.n += 8
        self.p_n, self.p_first, self.p_last = count, e[0].off, e[count - 1].off
        return 0

    cdef int _emit_legacy(self, const unsigned char *p, int32_t size, int magic, int attributes, int codec,
                          int64_t offset, int64_t ts, Py_ssize_t kp, int32_t klen, int32_t vlen) except -1:
        """``rewrite.Converter.convert`` of a regular v0/v1 entry (a wrapper only when already in
        the target format): 1 with the piece in ``out``, 0 to leave it to the caller."""
        cdef Py_ssize_t mend = LOG_OVERHEAD + size, n
        cdef int64_t rts
        cdef bint lat
        cdef unsigned char *w
        cdef unsigned char head[V1_HEAD]
        if magic >= self.target:
            return self._emit(p, mend, offset, ts, magic)  # copied byte for byte
        if codec:
            return 0
        if self.target == 1:  # v0 message -> v1 (rewrite.Converter._v0_to_v1)
            if size > INT32_MAX - V1_MINUS_V0_SIZE:
                return 0
            rts = self.stamp if self.has_stamp else -1
            n = V1_KEY_LENGTH_AT + mend - kp
            if not self._room(n, offset):
                return 0
            if buf_reserve(&self.out, n) < 0:
                raise MemoryError()
            w = self.out.p + self.out.n
            put_v1_head(head, LEGACY_TIMESTAMP_TYPE_MASK if self.has_stamp else 0, rts)
            kb_put_i64(w + OFFSET_OFFSET, offset)
            kb_put_i32(w + SIZE_OFFSET, size + V1_MINUS_V0_SIZE)
            memcpy(w + LEGACY_MAGIC_AT, head, V1_HEAD)
            memcpy(w + V1_KEY_LENGTH_AT, p + kp, <size_t>(mend - kp))
            # one CRC call over the message as written: a 10-byte head alone would take the tables
            kb_put_u32(w + LEGACY_CRC_AT, kcrc32(0, w + LEGACY_MAGIC_AT, <size_t>(n - LEGACY_MAGIC_AT)))
            return self._piece(n, offset, rts, 1)
        # v0/v1 message -> a one-record v2 batch (rewrite.Converter._legacy_to_v2)
        if magic == 0:
            lat = self.has_stamp
            rts = self.stamp if lat else -1
        else:
            lat = (attributes & LEGACY_TIMESTAMP_TYPE_MASK) != 0
            rts = ts
        n = single_record_batch_size(klen, vlen)
        if n < 0 or not self._room(n, offset):
            return 0
        if buf_reserve(&self.out, n) < 0:
            raise MemoryError()
        put_single_record_batch(self.out.p + self.out.n, n, offset, rts, p + kp + KEY_SIZE_LENGTH, klen,
                                p + mend - (vlen if vlen > 0 else 0), vlen, lat, self._output_epoch(offset))
        return self._piece(n, offset, rts, 2)

    cdef int _emit_wrapper(self, object data, int magic, int attributes, int codec, int64_t wrapper_ts) except -1:
        """``rewrite.Converter`` of a regular compressed wrapper whose inner messages are in
        ``self.ents`` (in ``data``, its decompressed value): a v0 wrapper as a v1 wrapper of
        relative offsets, or a v0/v1 wrapper as one v2 batch, compressed again with its codec.
        1 with the piece in ``out``; 0 (nothing kept) when it would exceed max.message.bytes
        (the caller splits it), roll the output, or leave the ranges the encoders take."""
        cdef Entry *e = <Entry *>self.ents.p
        cdef Py_ssize_t count = self.ents.n // sizeof(Entry), i, n, plen, body, klen, vlen
        cdef int64_t first = e[0].off, last = e[count - 1].off, rel, ts, base_ts, tsd, header_max, piece_max
        cdef int64_t size
        cdef bint lat
        cdef unsigned char head[V1_HEAD]
        cdef unsigned char *w
        cdef const unsigned char *d
        cdef uint32_t seed
        cdef Py_buffer dv
        cdef Py_buffer pv
        self.conv.n = 0
        get_view(data, &dv)
        try:
            d = <const unsigned char *>dv.buf
            if self.target == 1:  # v0 wrapper -> v1 wrapper (rewrite.Converter._v0_to_v1)
                ts = self.stamp if self.has_stamp else -1
                put_v1_head(head, LEGACY_TIMESTAMP_TYPE_MASK if self.has_stamp else 0, ts)
                seed = kcrc32(0, head, V1_HEAD)
                for i in range(count):
                    n = e[i].mend - e[i].kp
                    if kb_sub_ovf(e[i].off, first, &rel) or n > INT32_MAX - KEY_SIZE_OFFSET_V1:
                        return 0
                    if buf_reserve(&self.conv, V1_KEY_LENGTH_AT + n) < 0:
                        raise MemoryError()
                    w = self.conv.p + self.conv.n
                    kb_put_i64(w + OFFSET_OFFSET, rel)
                    kb_put_i32(w + SIZE_OFFSET, <int32_t>(KEY_SIZE_OFFSET_V1 + n))
                    kb_put_u32(w + LEGACY_CRC_AT, kcrc32(seed, d + e[i].kp, <size_t>n))
                    memcpy(w + LEGACY_MAGIC_AT, head, V1_HEAD)
                    memcpy(w + V1_KEY_LENGTH_AT, d + e[i].kp, <size_t>n)
                    self.conv.n += V1_KEY_LENGTH_AT + n
                header_max = piece_max = ts
                lat = self.has_stamp
            else:  # v0/v1 wrapper -> one v2 batch (rewrite.Converter._legacy_to_v2)
                if magic == 0:
                    lat = self.has_stamp
                    wrapper_ts = self.stamp if lat else -1
                else:
                    lat = (attributes & LEGACY_TIMESTAMP_TYPE_MASK) != 0
                base_ts = wrapper_ts if (magic == 0 and lat) else e[0].ts
                header_max = -1  # encode_records' max starts at NO_TIMESTAMP
                piece_max = INT64_MIN_
                for i in range(count):
                    ts = wrapper_ts if (magic == 0 and lat) else e[i].ts
                    if ts > header_max:
                        header_max = ts
                    if ts > piece_max:
                        piece_max = ts
                    rel = e[i].off - first  # increasing and within the wrapper: no overflow
                    if rel > INT32_MAX or kb_sub_ovf(ts, base_ts, &tsd):
                        return 0
                    klen = e[i].klen
                    vlen = e[i].vlen
                    body = 1 + varint_size(tsd) + varint_size(rel) + varint_size(klen) + (klen if klen > 0 else 0) \
                        + varint_size(vlen) + (vlen if vlen > 0 else 0) + 1
                    if buf_reserve(&self.conv, 10 + body) < 0:
                        raise MemoryError()
                    w = put_varint(self.conv.p + self.conv.n, body)
                    w[0] = 0  # record attributes
                    w = put_varint(put_varint(w + 1, tsd), rel)
                    w = put_varint(w, klen)
                    if klen > 0:
                        memcpy(w, d + e[i].kp + KEY_SIZE_LENGTH, <size_t>klen)
                        w += klen
                    w = put_varint(w, vlen)
                    if vlen > 0:
                        memcpy(w, d + e[i].mend - vlen, <size_t>vlen)
                        w += vlen
                    w[0] = 0  # no headers
                    self.conv.n = w + 1 - self.conv.p
                if lat:
                    header_max = piece_max = wrapper_ts
        finally:
            PyBuffer_Release(&dv)
        payload = codec_compress(codec, buf_bytes(&self.conv), self.target)
        get_view(payload, &pv)
        try:
            plen = pv.len
            if self.target == 1:
                size = RECORD_OVERHEAD_V1 + plen
                n = LOG_OVERHEAD + size
            else:
                n = RECORD_BATCH_OVERHEAD + plen
                size = n - LOG_OVERHEAD
            if size > INT32_MAX or n > self.max_message or not self._room(n, last):
                return 0
            if buf_reserve(&self.out, n) < 0:
                raise MemoryError()
            w = self.out.p + self.out.n
            if self.target == 1:
                kb_put_i64(w + OFFSET_OFFSET, last)
                kb_put_i32(w + SIZE_OFFSET, <int32_t>size)
                put_v1_head(w + LEGACY_MAGIC_AT, codec | (LEGACY_TIMESTAMP_TYPE_MASK if lat else 0), header_max)
                kb_put_i32(w + V1_KEY_LENGTH_AT, -1)  # no key
                kb_put_i32(w + V1_KEY_LENGTH_AT + KEY_SIZE_LENGTH, <int32_t>plen)
                memcpy(w + V1_KEY_LENGTH_AT + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH, pv.buf, <size_t>plen)
                kb_put_u32(w + LEGACY_CRC_AT, kcrc32(0, w + LEGACY_MAGIC_AT, <size_t>(n - LEGACY_MAGIC_AT)))
            else:
                kb_put_i64(w + BASE_OFFSET_OFFSET, first)
                kb_put_i32(w + LENGTH_OFFSET, <int32_t>size)
                kb_put_i32(w + PARTITION_LEADER_EPOCH_OFFSET, self._output_epoch(first))
                w[MAGIC_OFFSET] = 2
                kb_put_i16(w + ATTRIBUTES_OFFSET, <int16_t>(codec | (V2_TIMESTAMP_TYPE_MASK if lat else 0)))
                kb_put_i32(w + LAST_OFFSET_DELTA_OFFSET, <int32_t>(last - first))
                kb_put_i64(w + BASE_TIMESTAMP_OFFSET, base_ts)
                kb_put_i64(w + MAX_TIMESTAMP_OFFSET, header_max)
                kb_put_i64(w + PRODUCER_ID_OFFSET, -1)
                kb_put_i16(w + PRODUCER_EPOCH_OFFSET, -1)
                kb_put_i32(w + BASE_SEQUENCE_OFFSET, -1)
                kb_put_i32(w + RECORDS_COUNT_OFFSET, <int32_t>count)
                memcpy(w + RECORD_BATCH_OVERHEAD, pv.buf, <size_t>plen)
                kb_put_u32(w + CRC_OFFSET, kcrc32c(0, w + ATTRIBUTES_OFFSET, <size_t>(n - ATTRIBUTES_OFFSET)))
        finally:
            PyBuffer_Release(&pv)
        return self._piece(n, last, piece_max, self.target)

    cdef int _emit(self, const unsigned char *p, Py_ssize_t n, int64_t last, int64_t max_ts, int magic) except -1:
        """The batch copied as it is into ``out``: 1, or 0 when it would roll the output."""
        if not self._room(n, last):
            return 0
        if buf_reserve(&self.out, n) < 0:
            raise MemoryError()
        memcpy(self.out.p + self.out.n, p, <size_t>n)
        return self._piece(n, last, max_ts, magic)

    cdef bint _room(self, Py_ssize_t n, int64_t last):
        """The piece fits the open output segment: ``_SplittingWriter.append`` would not roll it."""
        cdef int64_t size = self.ix_valid  # bytes in the segment so far
        if size and size + n > self.segment_bytes:
            return False
        return self.out_base <= last and last - self.out_base <= INT32_MAX

    cdef int _piece(self, Py_ssize_t n, int64_t last, int64_t max_ts, int magic) except -1:
        if buf_reserve(&self.oix, 16) < 0 or buf_reserve(&self.tix, 16) < 0:
            raise MemoryError()
        self.out.n += n
        self.pp_size, self.pp_last, self.pp_max_ts, self.pp_magic = n, last, max_ts, magic
        return 1

    cdef int32_t _output_epoch(self, int64_t offset):
        """``RewriteSpec.leader_epoch``: the epoch whose start is the last one <= offset, else -1."""
        cdef Py_ssize_t lo = 0, hi = self.n_out_epochs, mid
        while lo < hi:
            mid = (lo + hi) // 2
            if offset < self.out_epoch_start[mid]:
                hi = mid
            else:
                lo = mid + 1
        return <int32_t>self.out_epoch[lo - 1] if lo else -1

    cdef void _apply(self):
        """The batch just consumed: its records into the digest's span, its piece into the
        output segment with the entries IndexBuilder.append and TimeIndex.maybe_append would
        make (room for them was reserved)."""
        cdef int64_t *e
        self.counted += self.p_count
        if self.p_n:
            if self.dg_records == 0:
                self.dg_first = self.p_first
            self.dg_last = self.p_last
            self.dg_records += self.p_n
        if self.pp_size:
            if self.pp_max_ts > self.ix_max_ts:
                self.ix_max_ts = self.pp_max_ts
                self.ix_off_max = self.pp_last
            if self.ix_valid - self.ix_last_entry > self.ix_interval:  # strictly: never the first batch
                e = <int64_t *>(self.oix.p + self.oix.n)
                e[0], e[1] = self.pp_last, self.ix_valid
                self.oix.n += 16
                if self.ix_max_ts > self.tix_last_ts:  # maybe_append: only a larger timestamp
                    e = <int64_t *>(self.tix.p + self.tix.n)
                    e[0], e[1] = self.ix_max_ts, self.ix_off_max
                    self.tix.n += 16
                    self.tix_last_ts = self.ix_max_ts
                self.ix_last_entry = self.ix_valid
            self.ix_valid += self.pp_size
            self.out_batches += 1
            self.out_last = self.pp_last
            self.out_bytes[self.pp_magic] += self.pp_size

    def bytes_by_magic(self):
        """Bytes consumed so far per magic: (v0, v1, v2)."""
        return self.in_bytes[0], self.in_bytes[1], self.in_bytes[2]

    def feed_digest(self, digester):
        """The digest bytes collected since the last call, handed to ``digester.feed_packed``:
        the canonical bytes read in place (a view of the walker's buffer, released when
        ``feed_packed`` returns: the stream is as large as the records, and is not copied), the
        timestamps as big-endian int64s, records, first and last offset. False when no record
        was consumed."""
        if self._digest_pending() == 0:
            return False
        view = buf_view(&self.dg)
        try:
            digester.feed_packed(view, self._digest_stamps(), self.dg_records, self.dg_first, self.dg_last)
        finally:
            view.release()
            self._digest_taken()
        return True

    cdef Py_ssize_t _digest_pending(self) except -1:
        if not self.digesting:
            raise ValueError("this walker was made without digest=True: it collects no digest")
        return self.dg_records

    cdef bytes _digest_stamps(self):
        """The collected timestamps as big-endian int64s."""
        cdef Py_ssize_t i, n = self.dg_records
        cdef int64_t *t = <int64_t *>self.dts.p
        cdef bytes stamps = PyBytes_FromStringAndSize(NULL, n * 8)
        cdef unsigned char *w = <unsigned char *>PyBytes_AS_STRING(stamps)
        for i in range(n):
            kb_put_i64(w + 8 * i, t[i])
        return stamps

    cdef void _digest_taken(self):
        self.dg.n = self.dts.n = 0
        self.dg_records = 0

    def open_output(self, base_offset, valid_bytes, last_index_entry, max_timestamp, offset_of_max_timestamp,
                    time_index_last_timestamp):
        """The output segment the next pieces go to, as ``IndexBuilder``'s state says it is."""
        if self.target == 0:
            raise ValueError("a walker without a target magic has no output")
        if self.out.n or self.oix.n or self.tix.n or self.out_batches:
            raise ValueError("write_output() first")
        self.tix_last_ts = time_index_last_timestamp
        self.out_base = base_offset
        self.ix_valid = valid_bytes
        self.ix_last_entry = last_index_entry
        self.ix_max_ts = max_timestamp
        self.ix_off_max = offset_of_max_timestamp
        self.out_open = True

    def write_output(self, sink):
        """What was appended to the output since :meth:`open_output` (the output is closed),
        handed to ``sink(run)``: (bytes, batches, last offset, bytes per magic (v0, v1, v2),
        offset index entries and time index entries (native int64 pairs: (offset, position),
        (timestamp, offset), in increasing order), then IndexBuilder's state: valid bytes, last
        index entry, max timestamp, offset of max timestamp). The bytes are a view of the
        walker's buffer, released when ``sink`` returns: the output is not copied."""
        view = buf_view(&self.out)
        try:
            sink(self._output(view))
        finally:
            view.release()
            self._output_taken()

    cdef tuple _output(self, object data):
        return (data, self.out_batches, self.out_last,
                (self.out_bytes[0], self.out_bytes[1], self.out_bytes[2]), buf_bytes(&self.oix), buf_bytes(&self.tix),
                self.ix_valid, self.ix_last_entry, self.ix_max_ts, self.ix_off_max)

    cdef void _output_taken(self):
        self.out.n = self.oix.n = self.tix.n = 0
        self.out_batches = 0
        self.out_bytes[0] = self.out_bytes[1] = self.out_bytes[2] = 0
        self.out_open = False

    cdef bint _offsets_ok(self, int64_t first, int64_t last, bint shallow):
        """No finding of validate.batch_offset_problems (without its span rule, checked by _v2)."""
        cdef int64_t rel
        if (last if shallow else first) <= self.prev_last:
            return False
        if kb_sub_ovf(last, self.base, &rel) or rel > INT32_MAX:
            return False
        if self.has_next and last >= self.next_base:
            return False
        return True

    cdef bint _epoch_ok(self, int64_t first, int32_t ple):
        """The batch's leader epoch is the checkpoint's for its base offset (bisect_right - 1), or
        -1 (no epoch: Kafka's LogSegment.recover builds cache entries only from batches with one)."""
        cdef Py_ssize_t lo = 0, hi = self.n_epochs, mid
        if ple == -1:
            return True
        while lo < hi:
            mid = (lo + hi) // 2
            if first < self.epoch_start[mid]:
                hi = mid
            else:
                lo = mid + 1
        return lo == 0 or self.epoch[lo - 1] == ple

    cdef int _commit(self, int64_t pos, int64_t floor, int64_t last, int64_t batch_max_ts, Py_ssize_t n):
        """Index entries on this batch, all without a finding, then the new state; 0 when an
        entry would give one (nothing is changed then)."""
        cdef Py_ssize_t oi = self.oi, ti = self.ti
        cdef int64_t max_ts = batch_max_ts if batch_max_ts > self.max_ts else self.max_ts
        if oi < self.n_idx and self.idx_pos[oi] < pos:
            return 0  # an entry pointing inside the previous batch
        while oi < self.n_idx and self.idx_pos[oi] == pos:
            if self.idx_off[oi] < floor or self.idx_off[oi] != last:
                return 0  # an error, or the info finding of a multi-batch append
            oi += 1
        while ti < self.n_time and self.time_off[ti] <= last:
            if self.time_ts[ti] > max_ts:
                return 0
            ti += 1
        self.oi = oi
        self.ti = ti
        if last > self.prev_last:  # the loops carry the larger one (validate, rewrite._check_offsets)
            self.prev_last = last
        self.max_ts = max_ts
        self.batches += 1
        if self.deep:
            self.records += n
        return 1
