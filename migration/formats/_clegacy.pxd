# cython: language_level=3
"""What the other modules of the compiled core take from ``_clegacy``: the inner-message scan
in C, the key and value framing of a message, the v1 message head and a message's digest bytes."""

from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy

from migration.formats._cbytes cimport Buf, kb_i32, kb_put_i32, kb_put_i64
from migration.formats._clayout cimport (
    DIGEST_OFFSET_LENGTH, KEY_SIZE_LENGTH, LEGACY_ATTRIBUTES_OFFSET, LEGACY_MAGIC_OFFSET, LEGACY_TIMESTAMP_OFFSET,
    RECORD_HEAD, VALUE_SIZE_LENGTH,
)

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


cdef inline bint legacy_key_value(const unsigned char *d, Py_ssize_t kp, Py_ssize_t mend, int32_t *klen,
                                  Py_ssize_t *vp, int32_t *vlen) noexcept nogil:
    """The key and value lengths (-1: null, §1.5) of the v0/v1 message of ``d`` whose key length
    is at ``kp`` and which ends at ``mend``, and ``vp``, where its value length lies (§1.2): False
    unless both are valid and key and value fill the message exactly."""
    klen[0] = kb_i32(d + kp)
    vp[0] = kp + KEY_SIZE_LENGTH + (klen[0] if klen[0] > 0 else 0)
    if klen[0] < -1 or vp[0] + VALUE_SIZE_LENGTH > mend:
        return False
    vlen[0] = kb_i32(d + vp[0])
    return vlen[0] >= -1 and vp[0] + VALUE_SIZE_LENGTH + (vlen[0] if vlen[0] > 0 else 0) == mend


cdef inline unsigned char *put_legacy_digest(unsigned char *w, int64_t offset, const unsigned char *tail,
                                             Py_ssize_t n) noexcept nogil:
    """The canonical digest bytes (digest.py) of a v0/v1 message at ``w``: its offset, no headers,
    then its ``n`` bytes from the key length on, ``tail``, as they are. Returns the end."""
    kb_put_i64(w, offset)
    kb_put_i32(w + DIGEST_OFFSET_LENGTH, 0)
    memcpy(w + RECORD_HEAD, tail, <size_t>n)
    return w + RECORD_HEAD + n
