# cython: language_level=3
"""CRC-32 (v0/v1 messages) and CRC-32C (v2 batches), compiled: the twin of ``_pycore.crc32`` and
``_pycore.crc32c`` (zlib and the crc32c package), with the vendored code of ``_cvendor/``:
CRC-32C by the SSE4.2 instruction, CRC-32 by PCLMULQDQ folding, slicing-by-8 tables where the
CPU has neither. The other modules of the core checksum through :func:`crc32_of` and
:func:`crc32c_of` (``_ccrc.pxd``), so the counts below are the whole core's."""

from cpython.buffer cimport PyBuffer_Release
from libc.stdint cimport uint32_t, uint64_t

from migration.formats._cbytes cimport get_view

from migration.formats import _pycore as _py

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

ctypedef uint32_t (*crc_fn)(uint32_t, const unsigned char *, size_t) nogil


cdef uint32_t crc32_of(uint32_t crc, const unsigned char *p, size_t n) noexcept nogil:
    return kcrc32(crc, p, n)


cdef uint32_t crc32c_of(uint32_t crc, const unsigned char *p, size_t n) noexcept nogil:
    return kcrc32c(crc, p, n)


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
