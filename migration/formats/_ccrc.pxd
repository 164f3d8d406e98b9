# cython: language_level=3
"""CRC-32 and CRC-32C for the other modules of the compiled record core. Only ``_ccrc`` links
the vendored code (``_cvendor/kcrc.c``): the instruction choice (``crc_features``) and the
counts of checksummed bytes (``take_crc_counts``) are one state for the whole core, so every
module checksums through these two functions."""

from libc.stdint cimport uint32_t

cdef uint32_t crc32_of(uint32_t crc, const unsigned char *p, size_t n) noexcept nogil
cdef uint32_t crc32c_of(uint32_t crc, const unsigned char *p, size_t n) noexcept nogil
