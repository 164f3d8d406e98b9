# cython: language_level=3
"""The segment walker's declaration, for a layer above that extends the walk by subclassing it
(``migrations/upgrade/_crewrite.pyx``): its state and the hooks of ``_cwalker.pyx``."""

from libc.stdint cimport int32_t, int64_t

from migration.formats._cbytes cimport Buf


cdef class SegmentWalker:
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

    cdef object _decompressed(self, Py_ssize_t start, Py_ssize_t n, int codec, int magic)
    cdef int _v2(self, const unsigned char *p, Py_ssize_t at, int32_t size, int64_t pos) except -1
    cdef int _legacy(self, const unsigned char *p, Py_ssize_t at, int32_t size, int magic, int64_t pos) except -1
    cdef object _inner(self, Py_ssize_t start, Py_ssize_t n, int codec, int magic, int64_t offset, bint lat,
                       int64_t ts, bint digest)
    cdef int _digest_entries(self, const unsigned char *d) except -1
    cdef void _apply(self) noexcept
    cdef bint _ready(self) noexcept
    cdef void _begin(self) noexcept
    cdef void _abandon(self) noexcept
    cdef int _take_v2(self, const unsigned char *p, Py_ssize_t n, int64_t last, int64_t max_ts) except -1
    cdef int _take_legacy(self, const unsigned char *p, int32_t size, int magic, int attributes, int codec,
                          int64_t offset, int64_t ts, Py_ssize_t kp, int32_t klen, int32_t vlen,
                          object data) except -1
    cdef void _taken(self) noexcept
    cdef Py_ssize_t _digest_pending(self) except -1
    cdef bytes _digest_stamps(self)
    cdef void _digest_taken(self)
    cdef bint _offsets_ok(self, int64_t first, int64_t last, bint shallow)
    cdef bint _epoch_ok(self, int64_t first, int32_t ple)
    cdef int _commit(self, int64_t pos, int64_t floor, int64_t last, int64_t batch_max_ts, Py_ssize_t n)
