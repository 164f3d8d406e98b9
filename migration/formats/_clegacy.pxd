# cython: language_level=3
"""What the other modules of the compiled core take from ``_clegacy``: the inner-message scan
in C and the v1 message head."""

from libc.stdint cimport int32_t, int64_t

from migration.formats._cbytes cimport Buf, kb_put_i64
from migration.formats._clayout cimport LEGACY_ATTRIBUTES_OFFSET, LEGACY_MAGIC_OFFSET, LEGACY_TIMESTAMP_OFFSET

cdef struct Entry:
    int64_t off       # absolute offset (after the v1 relative-offset resolution)
    int64_t ts        # effective timestamp
    Py_ssize_t kp     # position of the key length
    int32_t klen
    int32_t vlen
    Py_ssize_t mend   # end of the message (= end of the value)


cdef int scan_inner_c(const unsigned char *d, Py_ssize_t end, int magic, int64_t wrapper_offset,
                      bint has_lat, int64_t lat, Buf *ents) noexcept nogil


cdef inline void put_v1_head(unsigned char *h, int attributes, int64_t timestamp) noexcept nogil:
    # the V1_HEAD bytes of a v1 message from its magic to its key length: magic 1, attributes,
    # timestamp (§1.9); h is the message's LEGACY_MAGIC_OFFSET
    h[0] = 1
    h[LEGACY_ATTRIBUTES_OFFSET - LEGACY_MAGIC_OFFSET] = <unsigned char>attributes
    kb_put_i64(h + LEGACY_TIMESTAMP_OFFSET - LEGACY_MAGIC_OFFSET, timestamp)

