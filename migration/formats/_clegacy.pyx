# cython: language_level=3
"""The legacy (v0/v1) kernels compiled, the twin of ``legacy.py``'s calls into the record core
(``_pycore.scan_inner``, ``legacy_digest``, ``v0_entry_to_v1``, ``v0_entries_to_v1``): the same
signatures and results. Each handles the regular case and answers None on anything else, and
``legacy.py`` hands the batch to its careful parser (``legacy._parse_inner``); arguments
outside the C ranges go to the Python twin whole (tests/formats/test_core_differential.py)."""

from cpython.buffer cimport PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.string cimport memcpy

from migration.formats._cbytes cimport (
    INT32_MAX, Buf, buf_free, buf_reserve, get_view, kb_add_ovf, kb_i32, kb_i64, kb_put_i32, kb_put_i64, kb_put_u32,
    kb_sub_ovf, kb_u32,
)
from migration.formats._ccrc cimport crc32_of
from migration.formats._clayout cimport *

from migration.formats import _pycore as _py

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
        if (crc32_of(0, d + pos + LEGACY_MAGIC_AT, <size_t>(mend - pos - LEGACY_MAGIC_AT))
                != kb_u32(d + pos + LEGACY_CRC_AT)):
            return 0
        kp = pos + kfield
        if not legacy_key_value(d, kp, mend, &klen, &vp, &vlen):
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


cdef inline int entry_span(tuple e, Py_ssize_t end_at, Py_ssize_t data_len, int64_t *off, Py_ssize_t *kp,
                           Py_ssize_t *end) except -1:
    """The offset, key position and ``e[end_at]`` of an entry of scan_inner: 1 when one is beyond
    the C types or the span beyond the data (the reference then takes the call whole), else 0."""
    try:
        off[0] = e[0]
        kp[0] = e[2]
        end[0] = e[end_at]
    except OverflowError:
        return 1
    return kp[0] < 0 or end[0] < kp[0] or end[0] > data_len


def legacy_digest(data, entries, list parts, list stamps):
    """See ``_pycore.legacy_digest``; appends one piece for all the entries."""
    cdef Py_buffer v
    cdef Py_ssize_t total = 0, i, n, kp, vend
    cdef int64_t off
    cdef unsigned char *w
    cdef object out
    n = len(entries)
    get_view(data, &v)
    try:
        # sizes and ranges first: anything odd goes to the reference whole
        for i in range(n):
            if entry_span(<tuple>entries[i], 5, v.len, &off, &kp, &vend):
                return _py.legacy_digest(data, entries, parts, stamps)
            total += RECORD_HEAD + vend - kp
        out = PyBytes_FromStringAndSize(NULL, total)
        w = <unsigned char *>PyBytes_AS_STRING(out)
        for i in range(n):
            entry_span(<tuple>entries[i], 5, v.len, &off, &kp, &vend)  # 0: checked above
            w = put_legacy_digest(w, off, <const unsigned char *>v.buf + kp, vend - kp)
        if n:
            parts.append(out)
            for i in range(n):
                stamps.append((<tuple>entries[i])[1])
    finally:
        PyBuffer_Release(&v)


cdef inline int v1_head_of(attributes, timestamp, unsigned char *head) except -1:
    """put_v1_head of the arguments of a v0 -> v1 call: 1 when they are beyond int8 and int64
    (the reference then takes the call whole), else 0."""
    cdef int64_t ts
    cdef int attr
    try:
        ts = timestamp
        attr = attributes
    except OverflowError:
        return 1
    if attr < -128 or attr > 127:
        return 1
    put_v1_head(head, attr, ts)
    return 0


def v0_entry_to_v1(buf, at, offset, attributes, timestamp):
    """See ``_pycore.v0_entry_to_v1``."""
    cdef Py_buffer v
    cdef Py_ssize_t a, rest_len
    cdef int64_t off
    cdef int32_t size
    cdef unsigned char head[V1_HEAD]
    cdef unsigned char *w
    cdef uint32_t crc
    cdef object out
    try:
        a = at
        off = offset
    except OverflowError:
        return _py.v0_entry_to_v1(buf, at, offset, attributes, timestamp)
    if v1_head_of(attributes, timestamp, head):
        return _py.v0_entry_to_v1(buf, at, offset, attributes, timestamp)
    get_view(buf, &v)
    try:
        if a < 0 or v.len - a < V0_KEY_LENGTH_AT:
            return _py.v0_entry_to_v1(buf, at, offset, attributes, timestamp)
        size = kb_i32(<const unsigned char *>v.buf + a + SIZE_OFFSET)
        if size < KEY_SIZE_OFFSET_V0 or size > v.len - a - LOG_OVERHEAD or size > INT32_MAX - V1_MINUS_V0_SIZE:
            return _py.v0_entry_to_v1(buf, at, offset, attributes, timestamp)
        rest_len = size - KEY_SIZE_OFFSET_V0  # key length .. end of value
        crc = crc32_of(crc32_of(0, head, V1_HEAD), <const unsigned char *>v.buf + a + V0_KEY_LENGTH_AT, <size_t>rest_len)
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
    cdef int64_t b, off, rel
    cdef unsigned char head[V1_HEAD]
    cdef unsigned char *w
    cdef uint32_t seed
    cdef object out
    try:
        b = base
    except OverflowError:
        return _py.v0_entries_to_v1(data, entries, base, attributes, timestamp)
    if v1_head_of(attributes, timestamp, head):
        return _py.v0_entries_to_v1(data, entries, base, attributes, timestamp)
    n = len(entries)
    get_view(data, &v)
    try:
        for i in range(n):
            if (entry_span(<tuple>entries[i], 6, v.len, &off, &kp, &mend) or kb_sub_ovf(off, b, &rel)
                    or mend - kp > INT32_MAX - KEY_SIZE_OFFSET_V1):
                return _py.v0_entries_to_v1(data, entries, base, attributes, timestamp)
            total += V1_KEY_LENGTH_AT + mend - kp
        seed = crc32_of(0, head, V1_HEAD)
        out = PyBytes_FromStringAndSize(NULL, total)
        w = <unsigned char *>PyBytes_AS_STRING(out)
        for i in range(n):
            entry_span(<tuple>entries[i], 6, v.len, &off, &kp, &mend)  # 0: checked above
            kb_put_i64(w + OFFSET_OFFSET, off - b)
            kb_put_i32(w + SIZE_OFFSET, <int32_t>(KEY_SIZE_OFFSET_V1 + mend - kp))  # v1 header + rest
            kb_put_u32(w + LEGACY_CRC_AT, crc32_of(seed, <const unsigned char *>v.buf + kp, <size_t>(mend - kp)))
            memcpy(w + LEGACY_MAGIC_AT, head, V1_HEAD)
            memcpy(w + V1_KEY_LENGTH_AT, <const unsigned char *>v.buf + kp, <size_t>(mend - kp))
            w += V1_KEY_LENGTH_AT + mend - kp
        return out
    finally:
        PyBuffer_Release(&v)
