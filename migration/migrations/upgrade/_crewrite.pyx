# cython: language_level=3
"""The rewrite's conversion and index rules compiled, the twin of ``rewrite.py``'s ``Converter``
and of the ``IndexBuilder`` state its writer keeps (``absorb``/``state``):
:class:`RewriteWalker`, a segment walker (``migration.formats._cwalker``) that also converts
every batch it judges exactly as ``rewrite.Converter`` converts it (copied when in the target
format already; an uncompressed v0/v1 message up-converted; a wrapper decompressed, its inner
messages turned into a v1 wrapper's or a v2 batch's records and compressed again with its
codec) and appends it to the open output segment with the offset and time index entries
``IndexBuilder`` would make. A piece that would roll the output (``segment_bytes``, int32
relative offsets), one above ``max.message.bytes`` (the loop splits it) and the segment's first
piece (it names the first output) are left to ``rewrite_segment``'s loop, so every roll, split
and warning happens where it happens without the walker. ``rewrite.py`` names it to
``core.segment_walker`` (``walker_class``) with the duties it takes (docs/architecture.md, "The
record core")."""

from cpython.buffer cimport PyBuffer_Release
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t
from libc.stdlib cimport free
from libc.string cimport memcpy

from migration.formats._cbytes cimport (
    INT32_MAX, INT64_MAX_, INT64_MIN_, Buf, bisect_right_i64, buf_bytes, buf_free, buf_reserve, buf_view, get_view,
    int64_array, kb_put_i16, kb_put_i32, kb_put_i64, kb_put_u32, kb_sub_ovf, put_sized,
)
from migration.formats._ccompression cimport codec_compress
from migration.formats._ccrc cimport crc32_of, crc32c_of
from migration.formats._clayout cimport *
from migration.formats._clegacy cimport Entry, put_v1_head
from migration.formats._crecord_batch cimport put_single_record_batch, single_record_batch_size
from migration.formats._cvarint cimport put_varint, put_varint_sized, varint_size
from migration.formats._cwalker cimport SegmentWalker


cdef class RewriteWalker(SegmentWalker):
    """A :class:`~migration.formats._cwalker.SegmentWalker` with ``target_magic`` 1 or 2: every
    batch it consumes is also converted as ``rewrite.Converter`` converts it and appended to the
    output segment opened by :meth:`open_output`, with the index entries ``IndexBuilder.append``
    would make (:meth:`write_output`)."""

    # the output segment (IndexBuilder's state) and the converted bytes
    cdef int target
    cdef bint has_stamp
    cdef int64_t stamp
    cdef int64_t *out_epoch_start
    cdef int64_t *out_epoch
    cdef Py_ssize_t n_out_epochs
    cdef int64_t segment_bytes
    cdef int64_t max_message
    cdef int64_t ix_interval
    cdef Buf conv  # a wrapper's converted inner data, before the codec
    cdef bint out_open
    cdef int64_t out_base
    cdef int64_t ix_valid
    cdef int64_t ix_last_entry
    cdef int64_t ix_max_ts
    cdef int64_t ix_off_max
    cdef Buf out
    cdef Buf oix  # offset index entries: (offset, position) int64 pairs
    cdef Buf tix  # time index entries: (timestamp, offset) int64 pairs
    cdef int64_t tix_last_ts  # the time index's last timestamp (TimeIndex.last_entry)
    cdef Py_ssize_t out_batches
    cdef int64_t out_last
    cdef int64_t out_bytes[3]
    cdef Py_ssize_t pp_size  # the piece of the batch being judged
    cdef int64_t pp_last
    cdef int64_t pp_max_ts
    cdef int pp_magic
    cdef Py_ssize_t out_mark  # out.n before the batch being judged

    def __cinit__(self):
        self.out_epoch_start = self.out_epoch = NULL
        self.conv = Buf(NULL, 0, 0)
        self.out = Buf(NULL, 0, 0)
        self.oix = Buf(NULL, 0, 0)
        self.tix = Buf(NULL, 0, 0)

    def __init__(self, *, bint deep, base_offset, next_base_offset, offset_entries, time_entries, leader_epochs,
                 bint digest=False, int target_magic, stamp_v0=None, output_leader_epochs=(),
                 segment_bytes=INT64_MAX_, max_message_bytes=INT64_MAX_, index_interval_bytes=4096,
                 int count_from=3):
        """The segment walker's arguments, and ``target_magic`` with ``stamp_v0``,
        ``output_leader_epochs``, ``segment_bytes``, ``max_message_bytes`` and
        ``index_interval_bytes`` of ``rewrite.RewriteSpec``; the conversion walks records:
        ``deep`` must be set."""
        if not deep:
            raise ValueError("the conversion walks records: deep=True")
        if target_magic not in (1, 2):
            raise ValueError(f"target magic must be 1 or 2, not {target_magic}")
        SegmentWalker.__init__(self, deep=deep, base_offset=base_offset, next_base_offset=next_base_offset,
                               offset_entries=offset_entries, time_entries=time_entries,
                               leader_epochs=leader_epochs, digest=digest, count_from=count_from)
        self.target = target_magic
        self.has_stamp = stamp_v0 is not None
        self.stamp = stamp_v0 if self.has_stamp else -1
        self.segment_bytes = segment_bytes
        self.max_message = max_message_bytes
        self.ix_interval = index_interval_bytes
        self.out_epoch = int64_array([e[0] for e in output_leader_epochs], &self.n_out_epochs)
        self.out_epoch_start = int64_array([e[1] for e in output_leader_epochs], &self.n_out_epochs)
        self.out_bytes[0] = self.out_bytes[1] = self.out_bytes[2] = 0

    def __dealloc__(self):
        free(self.out_epoch_start)
        free(self.out_epoch)
        buf_free(&self.conv)
        buf_free(&self.out)
        buf_free(&self.oix)
        buf_free(&self.tix)

    # ---------------------------------------------------------------- the walker's hooks

    cdef bint _ready(self) noexcept:
        return self.out_open  # the caller names the output segment first (open_output)

    cdef void _begin(self) noexcept:
        self.out_mark = self.out.n
        self.pp_size = 0

    cdef void _abandon(self) noexcept:
        self.out.n = self.out_mark

    cdef int _take_v2(self, const unsigned char *p, Py_ssize_t n, int64_t last, int64_t max_ts) except -1:
        return self._emit(p, n, last, max_ts, 2)  # a v2 batch is copied as it is, whatever the target

    cdef int _take_legacy(self, const unsigned char *p, int32_t size, int magic, int attributes, int codec,
                          int64_t offset, int64_t ts, Py_ssize_t kp, int32_t klen, int32_t vlen,
                          object data) except -1:
        if codec and magic < self.target:
            return self._emit_wrapper(data, magic, attributes, codec, ts)
        return self._emit_legacy(p, size, magic, attributes, codec, offset, ts, kp, klen, vlen)

    cdef void _taken(self) noexcept:
        """The piece of the batch just consumed into the output segment, with the entries
        IndexBuilder.append and TimeIndex.maybe_append would make (room for them was reserved)."""
        cdef int64_t *e
        if not self.pp_size:
            return
        if self.pp_max_ts > self.ix_max_ts:
            self.ix_max_ts = self.pp_max_ts
            self.ix_off_max = self.pp_last
        if self.ix_valid - self.ix_last_entry > self.ix_interval:  # strictly: never the first batch
            e = <int64_t *>(self.oix.p + self.oix.n)
            e[0], e[1] = self.pp_last, self.ix_valid
            self.oix.n += 16
            if self.ix_max_ts > self.tix_last_ts:  # maybe_append: only a larger timestamp
                e = <int64_t *>(self.tix.p + self.tix.n)
                e[0], e[1] = self.ix_max_ts, self.ix_off_max
                self.tix.n += 16
                self.tix_last_ts = self.ix_max_ts
            self.ix_last_entry = self.ix_valid
        self.ix_valid += self.pp_size
        self.out_batches += 1
        self.out_last = self.pp_last
        self.out_bytes[self.pp_magic] += self.pp_size

    # ---------------------------------------------------------------- conversion (rewrite.Converter)

    cdef int _emit_legacy(self, const unsigned char *p, int32_t size, int magic, int attributes, int codec,
                          int64_t offset, int64_t ts, Py_ssize_t kp, int32_t klen, int32_t vlen) except -1:
        """``rewrite.Converter.convert`` of a regular v0/v1 entry (a wrapper only when already in
        the target format): 1 with the piece in ``out``, 0 to leave it to the caller."""
        cdef Py_ssize_t mend = LOG_OVERHEAD + size, n
        cdef int64_t rts
        cdef bint lat
        cdef unsigned char *w
        cdef unsigned char head[V1_HEAD]
        if magic >= self.target:
            return self._emit(p, mend, offset, ts, magic)  # copied byte for byte
        if codec:
            return 0
        if self.target == 1:  # v0 message -> v1 (rewrite.Converter._v0_to_v1)
            if size > INT32_MAX - V1_MINUS_V0_SIZE:
                return 0
            rts = self.stamp if self.has_stamp else -1
            n = V1_KEY_LENGTH_AT + mend - kp
            if not self._room(n, offset):
                return 0
            if buf_reserve(&self.out, n) < 0:
                raise MemoryError()
            w = self.out.p + self.out.n
            put_v1_head(head, LEGACY_TIMESTAMP_TYPE_MASK if self.has_stamp else 0, rts)
            kb_put_i64(w + OFFSET_OFFSET, offset)
            kb_put_i32(w + SIZE_OFFSET, size + V1_MINUS_V0_SIZE)
            memcpy(w + LEGACY_MAGIC_AT, head, V1_HEAD)
            memcpy(w + V1_KEY_LENGTH_AT, p + kp, <size_t>(mend - kp))
            # one CRC call over the message as written: a 10-byte head alone would take the tables
            kb_put_u32(w + LEGACY_CRC_AT, crc32_of(0, w + LEGACY_MAGIC_AT, <size_t>(n - LEGACY_MAGIC_AT)))
            return self._piece(n, offset, rts, 1)
        # v0/v1 message -> a one-record v2 batch (rewrite.Converter._legacy_to_v2)
        if magic == 0:
            lat = self.has_stamp
            rts = self.stamp if lat else -1
        else:
            lat = (attributes & LEGACY_TIMESTAMP_TYPE_MASK) != 0
            rts = ts
        n = single_record_batch_size(klen, vlen)
        if n < 0 or not self._room(n, offset):
            return 0
        if buf_reserve(&self.out, n) < 0:
            raise MemoryError()
        put_single_record_batch(self.out.p + self.out.n, n, offset, rts, p + kp + KEY_SIZE_LENGTH, klen,
                                p + mend - (vlen if vlen > 0 else 0), vlen, lat, self._output_epoch(offset))
        return self._piece(n, offset, rts, 2)

    cdef int _emit_wrapper(self, object data, int magic, int attributes, int codec, int64_t wrapper_ts) except -1:
        """``rewrite.Converter`` of a regular compressed wrapper whose inner messages are in
        ``self.ents`` (in ``data``, its decompressed value): a v0 wrapper as a v1 wrapper of
        relative offsets, or a v0/v1 wrapper as one v2 batch, compressed again with its codec.
        1 with the piece in ``out``; 0 (nothing kept) when it would exceed max.message.bytes
        (the caller splits it), roll the output, or leave the ranges the encoders take."""
        cdef Entry *e = <Entry *>self.ents.p
        cdef Py_ssize_t count = self.ents.n // sizeof(Entry), i, n, plen, body, klen, vlen
        cdef int64_t first = e[0].off, last = e[count - 1].off, rel, ts, base_ts, tsd, header_max, piece_max
        cdef int64_t size
        cdef bint lat
        cdef unsigned char head[V1_HEAD]
        cdef unsigned char *w
        cdef const unsigned char *d
        cdef uint32_t seed
        cdef Py_buffer dv
        cdef Py_buffer pv
        self.conv.n = 0
        get_view(data, &dv)
        try:
            d = <const unsigned char *>dv.buf
            if self.target == 1:  # v0 wrapper -> v1 wrapper (rewrite.Converter._v0_to_v1)
                ts = self.stamp if self.has_stamp else -1
                put_v1_head(head, LEGACY_TIMESTAMP_TYPE_MASK if self.has_stamp else 0, ts)
                seed = crc32_of(0, head, V1_HEAD)
                for i in range(count):
                    n = e[i].mend - e[i].kp
                    if kb_sub_ovf(e[i].off, first, &rel) or n > INT32_MAX - KEY_SIZE_OFFSET_V1:
                        return 0
                    if buf_reserve(&self.conv, V1_KEY_LENGTH_AT + n) < 0:
                        raise MemoryError()
                    w = self.conv.p + self.conv.n
                    kb_put_i64(w + OFFSET_OFFSET, rel)
                    kb_put_i32(w + SIZE_OFFSET, <int32_t>(KEY_SIZE_OFFSET_V1 + n))
                    kb_put_u32(w + LEGACY_CRC_AT, crc32_of(seed, d + e[i].kp, <size_t>n))
                    memcpy(w + LEGACY_MAGIC_AT, head, V1_HEAD)
                    memcpy(w + V1_KEY_LENGTH_AT, d + e[i].kp, <size_t>n)
                    self.conv.n += V1_KEY_LENGTH_AT + n
                header_max = piece_max = ts
                lat = self.has_stamp
            else:  # v0/v1 wrapper -> one v2 batch (rewrite.Converter._legacy_to_v2)
                if magic == 0:
                    lat = self.has_stamp
                    wrapper_ts = self.stamp if lat else -1
                else:
                    lat = (attributes & LEGACY_TIMESTAMP_TYPE_MASK) != 0
                base_ts = wrapper_ts if (magic == 0 and lat) else e[0].ts
                header_max = -1  # encode_records' max starts at NO_TIMESTAMP
                piece_max = INT64_MIN_
                for i in range(count):
                    ts = wrapper_ts if (magic == 0 and lat) else e[i].ts
                    if ts > header_max:
                        header_max = ts
                    if ts > piece_max:
                        piece_max = ts
                    rel = e[i].off - first  # increasing and within the wrapper: no overflow
                    if rel > INT32_MAX or kb_sub_ovf(ts, base_ts, &tsd):
                        return 0
                    klen = e[i].klen
                    vlen = e[i].vlen
                    body = 1 + varint_size(tsd) + varint_size(rel) + varint_size(klen) + (klen if klen > 0 else 0) \
                        + varint_size(vlen) + (vlen if vlen > 0 else 0) + 1
                    if buf_reserve(&self.conv, 10 + body) < 0:
                        raise MemoryError()
                    w = put_varint(self.conv.p + self.conv.n, body)
                    w[0] = 0  # record attributes
                    w = put_varint(put_varint(w + 1, tsd), rel)
                    w = put_varint_sized(w, d + e[i].kp + KEY_SIZE_LENGTH, klen)
                    w = put_varint_sized(w, d + e[i].mend - (vlen if vlen > 0 else 0), vlen)
                    w[0] = 0  # no headers
                    self.conv.n = w + 1 - self.conv.p
                if lat:
                    header_max = piece_max = wrapper_ts
        finally:
            PyBuffer_Release(&dv)
        payload = codec_compress(codec, buf_bytes(&self.conv), self.target)
        get_view(payload, &pv)
        try:
            plen = pv.len
            if self.target == 1:
                size = RECORD_OVERHEAD_V1 + plen
                n = LOG_OVERHEAD + size
            else:
                n = RECORD_BATCH_OVERHEAD + plen
                size = n - LOG_OVERHEAD
            if size > INT32_MAX or n > self.max_message or not self._room(n, last):
                return 0
            if buf_reserve(&self.out, n) < 0:
                raise MemoryError()
            w = self.out.p + self.out.n
            if self.target == 1:
                kb_put_i64(w + OFFSET_OFFSET, last)
                kb_put_i32(w + SIZE_OFFSET, <int32_t>size)
                put_v1_head(w + LEGACY_MAGIC_AT, codec | (LEGACY_TIMESTAMP_TYPE_MASK if lat else 0), header_max)
                put_sized(put_sized(w + V1_KEY_LENGTH_AT, NULL, -1), pv.buf, plen)  # no key; the compressed value
                kb_put_u32(w + LEGACY_CRC_AT, crc32_of(0, w + LEGACY_MAGIC_AT, <size_t>(n - LEGACY_MAGIC_AT)))
            else:
                kb_put_i64(w + BASE_OFFSET_OFFSET, first)
                kb_put_i32(w + LENGTH_OFFSET, <int32_t>size)
                kb_put_i32(w + PARTITION_LEADER_EPOCH_OFFSET, self._output_epoch(first))
                w[MAGIC_OFFSET] = 2
                kb_put_i16(w + ATTRIBUTES_OFFSET, <int16_t>(codec | (V2_TIMESTAMP_TYPE_MASK if lat else 0)))
                kb_put_i32(w + LAST_OFFSET_DELTA_OFFSET, <int32_t>(last - first))
                kb_put_i64(w + BASE_TIMESTAMP_OFFSET, base_ts)
                kb_put_i64(w + MAX_TIMESTAMP_OFFSET, header_max)
                kb_put_i64(w + PRODUCER_ID_OFFSET, -1)
                kb_put_i16(w + PRODUCER_EPOCH_OFFSET, -1)
                kb_put_i32(w + BASE_SEQUENCE_OFFSET, -1)
                kb_put_i32(w + RECORDS_COUNT_OFFSET, <int32_t>count)
                memcpy(w + RECORD_BATCH_OVERHEAD, pv.buf, <size_t>plen)
                kb_put_u32(w + CRC_OFFSET, crc32c_of(0, w + ATTRIBUTES_OFFSET, <size_t>(n - ATTRIBUTES_OFFSET)))
        finally:
            PyBuffer_Release(&pv)
        return self._piece(n, last, piece_max, self.target)

    cdef int _emit(self, const unsigned char *p, Py_ssize_t n, int64_t last, int64_t max_ts, int magic) except -1:
        """The batch copied as it is into ``out``: 1, or 0 when it would roll the output."""
        if not self._room(n, last):
            return 0
        if buf_reserve(&self.out, n) < 0:
            raise MemoryError()
        memcpy(self.out.p + self.out.n, p, <size_t>n)
        return self._piece(n, last, max_ts, magic)

    cdef bint _room(self, Py_ssize_t n, int64_t last):
        """The piece fits the open output segment: ``_SplittingWriter.append`` would not roll it."""
        cdef int64_t size = self.ix_valid  # bytes in the segment so far
        if size and size + n > self.segment_bytes:
            return False
        return self.out_base <= last and last - self.out_base <= INT32_MAX

    cdef int _piece(self, Py_ssize_t n, int64_t last, int64_t max_ts, int magic) except -1:
        if buf_reserve(&self.oix, 16) < 0 or buf_reserve(&self.tix, 16) < 0:
            raise MemoryError()
        self.out.n += n
        self.pp_size, self.pp_last, self.pp_max_ts, self.pp_magic = n, last, max_ts, magic
        return 1

    cdef int32_t _output_epoch(self, int64_t offset):
        """``RewriteSpec.leader_epoch``: the epoch whose start is the last one <= offset, else -1."""
        cdef Py_ssize_t lo = bisect_right_i64(self.out_epoch_start, self.n_out_epochs, offset)
        return <int32_t>self.out_epoch[lo - 1] if lo else -1

    def open_output(self, base_offset, valid_bytes, last_index_entry, max_timestamp, offset_of_max_timestamp,
                    time_index_last_timestamp):
        """The output segment the next pieces go to, as ``IndexBuilder``'s state says it is."""
        if self.out.n or self.oix.n or self.tix.n or self.out_batches:
            raise ValueError("write_output() first")
        self.tix_last_ts = time_index_last_timestamp
        self.out_base = base_offset
        self.ix_valid = valid_bytes
        self.ix_last_entry = last_index_entry
        self.ix_max_ts = max_timestamp
        self.ix_off_max = offset_of_max_timestamp
        self.out_open = True

    def write_output(self, sink):
        """What was appended to the output since :meth:`open_output` (the output is closed),
        handed to ``sink(run)``: (bytes, batches, last offset, bytes per magic (v0, v1, v2),
        offset index entries and time index entries (native int64 pairs: (offset, position),
        (timestamp, offset), in increasing order), then IndexBuilder's state: valid bytes, last
        index entry, max timestamp, offset of max timestamp). The bytes are a view of the
        walker's buffer, released when ``sink`` returns: the output is not copied."""
        view = buf_view(&self.out)
        try:
            sink(self._output(view))
        finally:
            view.release()
            self._output_taken()

    cdef tuple _output(self, object data):
        return (data, self.out_batches, self.out_last,
                (self.out_bytes[0], self.out_bytes[1], self.out_bytes[2]), buf_bytes(&self.oix), buf_bytes(&self.tix),
                self.ix_valid, self.ix_last_entry, self.ix_max_ts, self.ix_off_max)

    cdef void _output_taken(self):
        self.out.n = self.oix.n = self.tix.n = 0
        self.out_batches = 0
        self.out_bytes[0] = self.out_bytes[1] = self.out_bytes[2] = 0
        self.out_open = False
