# cython: language_level=3
"""What the other modules of the compiled core take from ``_ccompression``: compression.py's
``decompress`` and ``compress`` by codec number, with this core's codec functions."""

cdef object codec_decompress(int codec, object data, int magic)
cdef object codec_compress(int codec, object data, int magic)
