# cython: language_level=3
"""Kafka's zig-zag varints (docs/formats.md §0.1) in C, the twin of ``varint.py``: inline
functions only, compiled into each module that cimports them."""

from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy


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


cdef inline int rd_length(const unsigned char *d, Py_ssize_t *pos, Py_ssize_t limit, int64_t lowest,
                          int64_t *length) noexcept nogil:
    """A length varint from ``lowest`` (0, or -1 where null is allowed) up to the bytes left
    before ``limit``: 1, or 0 when irregular."""
    if not rd_varint(d, pos, limit, 5, length):
        return 0
    return lowest <= length[0] <= limit - pos[0]


cdef inline int rd_sized(const unsigned char *d, Py_ssize_t *pos, Py_ssize_t rec_end, int64_t *length,
                         Py_ssize_t *start) noexcept nogil:
    """A record's key or value (docs/formats.md §2.4): its length varint (-1: null) and its
    bytes, skipped, from ``start``; 1, or 0 when irregular: the bytes leave the record, or no
    byte of the record follows them (the next field's)."""
    if not rd_varint(d, pos, rec_end, 5, length):
        return 0
    start[0] = pos[0]
    if length[0] >= 0:
        if length[0] >= rec_end - pos[0]:
            return 0
        pos[0] += length[0]
    elif length[0] != -1 or pos[0] >= rec_end:
        return 0
    return 1


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


cdef inline unsigned char *put_varint_sized(unsigned char *p, const void *src, int64_t n) noexcept nogil:
    """Bytes after their varint length at ``p`` (a v2 record's key, value, header key or value,
    docs/formats.md §2.4, §2.5): ``n``, then the ``n`` bytes of ``src``, none for -1 (null).
    Returns the end."""
    p = put_varint(p, n)
    if n > 0:
        memcpy(p, src, <size_t>n)
        p += n
    return p
