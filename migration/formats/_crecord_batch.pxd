# cython: language_level=3
"""What the other modules of the compiled core take from ``_crecord_batch``: the walk of a v2
batch's records and the writer of a one-record batch."""

from libc.stdint cimport int32_t, int64_t

from migration.formats._cbytes cimport INT32_MAX, Buf
from migration.formats._clayout cimport (
    ATTRIBUTES_OFFSET, CRC_LENGTH, MAGIC_LENGTH, PARTITION_LEADER_EPOCH_LENGTH, RECORD_BATCH_OVERHEAD,
)
from migration.formats._cvarint cimport varint_size


cdef int walk_v2(const unsigned char *d, Py_ssize_t end, int64_t count, int64_t base_offset, int64_t base_ts,
                 bint has_lat, int64_t lat, Buf *out, Buf *stamps, int64_t *first, int64_t *last,
                 Py_ssize_t *nrec) noexcept nogil

cdef void put_single_record_batch(unsigned char *w, Py_ssize_t total, int64_t off, int64_t ts,
                                  const unsigned char *key, Py_ssize_t klen, const unsigned char *value,
                                  Py_ssize_t vlen, bint log_append_time, int32_t epoch) noexcept nogil


cdef inline Py_ssize_t single_record_batch_size(Py_ssize_t klen, Py_ssize_t vlen) noexcept nogil:
    """Bytes of a one-record uncompressed v2 batch with these key and value lengths (-1: null),
    or -1 when its length field would not fit int32."""
    cdef Py_ssize_t body = 3 + varint_size(klen) + (klen if klen > 0 else 0) + varint_size(vlen) \
        + (vlen if vlen > 0 else 0) + 1
    cdef Py_ssize_t after = RECORD_BATCH_OVERHEAD - ATTRIBUTES_OFFSET + varint_size(body) + body  # CRC'd bytes
    if after + PARTITION_LEADER_EPOCH_LENGTH + MAGIC_LENGTH + CRC_LENGTH > INT32_MAX:
        return -1
    return ATTRIBUTES_OFFSET + after
