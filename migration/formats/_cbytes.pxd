# cython: language_level=3
"""Shared C declarations of the compiled record core: big-endian loads and stores
(``_cvendor/kbytes.h``), buffers of Python objects, the growable output buffer every writer
fills, int32 length-prefixed bytes, and arrays of int64. Declarations and inline functions
only: each module that cimports them gets its own inlined copy (docs/architecture.md, "The
record core")."""

from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

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

cdef enum:
    INT32_MAX = 2147483647

cdef extern from *:
    """
    #define KMIGRATE_INT64_MAX ((int64_t)9223372036854775807LL)
    #define KMIGRATE_INT64_MIN (-KMIGRATE_INT64_MAX - 1)
    """
    int64_t INT64_MAX_ "KMIGRATE_INT64_MAX"
    int64_t INT64_MIN_ "KMIGRATE_INT64_MIN"


cdef inline int get_view(object obj, Py_buffer *view) except -1:
    return PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)


# ---------------------------------------------------------------- growable output


cdef struct Buf:
    unsigned char *p
    Py_ssize_t n
    Py_ssize_t cap


cdef inline int buf_reserve(Buf *b, Py_ssize_t extra) noexcept nogil:
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


cdef inline unsigned char *put_sized(unsigned char *w, const void *src, Py_ssize_t n) noexcept nogil:
    """Bytes after their int32 length at ``w`` (a v0/v1 key or value, docs/formats.md §1.2, and
    digest.py's fields): ``n``, then the ``n`` bytes of ``src``, none for -1 (null, §1.5).
    Returns the end."""
    kb_put_i32(w, <int32_t>n)
    if n > 0:
        memcpy(w + 4, src, <size_t>n)
        return w + 4 + n
    return w + 4


cdef inline int buf_put_sized(Buf *b, const void *src, Py_ssize_t n) noexcept nogil:
    """:func:`put_sized` at the end of ``b``; -1 when memory runs out."""
    if buf_reserve(b, 4 + (n if n > 0 else 0)) < 0:
        return -1
    b.n = put_sized(b.p + b.n, src, n) - b.p
    return 0


cdef inline bytes buf_bytes(Buf *b):
    return PyBytes_FromStringAndSize(<char *>b.p if b.n else NULL, b.n)


cdef inline object buf_view(Buf *b):
    """A read-only memoryview of the buffer's bytes, no copy. Only for a call that does not
    keep it: the caller releases it when the call returns (after that, anything that kept it
    gets an error, never bytes the buffer holds by then)."""
    if not b.n:
        return memoryview(b"")
    return PyMemoryView_FromMemory(<char *>b.p, b.n, PyBUF_READ)


cdef inline int64_t *int64_array(object values, Py_ssize_t *n) except? NULL:
    """The ints of ``values`` in a malloc'ed array (``n``: how many); OverflowError beyond int64."""
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


cdef inline Py_ssize_t bisect_right_i64(const int64_t *a, Py_ssize_t n, int64_t x) noexcept nogil:
    """How many of the ``n`` ascending ``a`` are <= ``x`` (``bisect.bisect_right``)."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo
