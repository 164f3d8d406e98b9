# cython: language_level=3
"""Deep validation of whole runs of batches compiled: :class:`SegmentWalker`, which judges in C
the regular batches ``logdir.validate``'s per-batch loop would pass without a finding, and
stops before the first one that might give one (docs/architecture.md, "The record core")."""

from cpython.buffer cimport PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from migration.formats._cbytes cimport (
    INT32_MAX, INT64_MAX_, INT64_MIN_, Buf, buf_bytes, buf_free, buf_reserve, buf_view, get_view, kb_add_ovf, kb_i16,
    kb_i32, kb_i64, kb_put_i16, kb_put_i32, kb_put_i64, kb_put_u32, kb_sub_ovf, kb_u32,
)
from migration.formats._ccompression cimport codec_compress, codec_decompress
from migration.formats._ccrc cimport crc32_of, crc32c_of
from migration.formats._clayout cimport *
from migration.formats._clegacy cimport Entry, put_v1_head, scan_inner_c
from migration.formats._crecord_batch cimport put_single_record_batch, single_record_batch_size, walk_v2
from migration.formats._cvarint cimport put_varint, varint_size

# ---------------------------------------------------------------- deep validation of a segment


cdef int64_t *int64_array(object values, Py_ssize_t *n) except? NULL:
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



cdef class SegmentWalker:
    """The regular batches of a segment, walked and judged in C for ``logdir.validate``.

    :meth:`advance` consumes consecutive complete batches of a buffer as long as each one is
    regular and would give no finding at all: CRC, framing, deep structure (v2 records; the
    inner messages of v0/v1 wrappers, after ``codec_decompress``), the offset rules of
    ``validate.batch_offset_problems``, the leader epoch, and the offset and time index
    entries that fall on it. It stops before the first batch it cannot vouch for, which the
    caller then handles batch by batch (same findings and errors as without the walker). The
    state the caller's loop carries (``prev_last``, ``max_ts``, ``oi``, ``ti``) is read and
    written through the attributes; ``batches`` and ``records`` count what was consumed here.

    Two more duties, for the digest and the rewrite (``migrations/upgrade/rewrite.py``):
    - ``digest=True``: the canonical digest bytes and timestamps of every record it consumes
      (``digest.py``'s layout, as ``digest_v2``/``legacy_digest`` make them), collected until
      :meth:`feed_digest` hands them to ``RecordDigester.feed_packed``;
    - ``target_magic`` 1 or 2: every batch it consumes is also converted as
      ``rewrite.Converter`` converts it (copied when already in the target format; an
      uncompressed v0/v1 message up-converted; a compressed wrapper that needs converting is
      left to the caller) and appended to the output segment opened by :meth:`open_output`,
      with the index entries ``IndexBuilder.append`` would make (:meth:`write_output`). A piece
      that would roll the output segment (``segment_bytes``, int32 relative offsets) is left to
      the caller too, so every roll and every warning happens where it happens without it.
    """

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
    # target_magic 1/2: the output segment (IndexBuilder's state) and the converted bytes
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

    def __cinit__(self):
        self.idx_off = self.idx_pos = self.time_ts = self.time_off = self.epoch_start = self.epoch = NULL
        self.out_epoch_start = self.out_epoch = NULL
        self.ents = Buf(NULL, 0, 0)
        self.dg = Buf(NULL, 0, 0)
        self.dts = Buf(NULL, 0, 0)
        self.conv = Buf(NULL, 0, 0)
        self.out = Buf(NULL, 0, 0)
        self.oix = Buf(NULL, 0, 0)
        self.tix = Buf(NULL, 0, 0)

    def __init__(self, *, bint deep, base_offset, next_base_offset, offset_entries, time_entries, leader_epochs,
                 bint digest=False, int target_magic=0, stamp_v0=None,
                 output_leader_epochs=(), segment_bytes=INT64_MAX_, max_message_bytes=INT64_MAX_,
                 index_interval_bytes=4096, int count_from=3):
        """``offset_entries`` (offset, position) and ``time_entries`` (timestamp, offset) as
        read from the indexes, ``leader_epochs`` (epoch, start offset) or None. The codecs are
        ``codec_decompress``/``codec_compress``: snappy and LZ4 framed here, gzip and zstd by
        compression.py. OverflowError when a value does not fit int64 (the caller then
        validates without the walker). ``digest`` and ``target_magic`` (with ``stamp_v0``,
        ``output_leader_epochs``, ``segment_bytes``, ``max_message_bytes`` and
        ``index_interval_bytes`` of ``rewrite.RewriteSpec``) need ``deep``. ``count_from``: the records
        of batches of this magic and above are counted in ``counted`` (a v2 batch by its
        header, a wrapper by its inner messages, decompressed even when not ``deep``), until a
        batch below that magic: counting stops there (the upgrade rewrites such a segment, and
        its unit counts the records), so ``counted`` is then the count before that batch."""
        if (digest or target_magic) and not deep:
            raise ValueError("the digest and the conversion walk records: deep=True")
        if target_magic not in (0, 1, 2):
            raise ValueError(f"target magic must be 1 or 2, not {target_magic}")
        self.digesting = digest
        self.count_from = count_from
        self.counted = 0
        self.target = target_magic
        self.has_stamp = stamp_v0 is not None
        self.stamp = stamp_v0 if self.has_stamp else -1
        self.segment_bytes = segment_bytes
        self.max_message = max_message_bytes
        self.ix_interval = index_interval_bytes
        self.out_epoch = int64_array([e[0] for e in output_leader_epochs], &self.n_out_epochs)
        self.out_epoch_start = int64_array([e[1] for e in output_leader_epochs], &self.n_out_epochs)
        self.in_bytes[0] = self.in_bytes[1] = self.in_bytes[2] = 0
        self.out_bytes[0] = self.out_bytes[1] = self.out_bytes[2] = 0
        self.deep = deep
        self.base = base_offset
        self.prev_last = self.base - 1
        self.has_next = next_base_offset is not None
        self.next_base = next_base_offset if self.has_next else 0
        self.max_ts = -1
        self.oi = self.ti = self.batches = self.records = 0
        self.enabled = True
        self.idx_off = int64_array([e[0] for e in offset_entries], &self.n_idx)
        self.idx_pos = int64_array([e[1] for e in offset_entries], &self.n_idx)
        self.time_ts = int64_array([e[0] for e in time_entries], &self.n_time)
        self.time_off = int64_array([e[1] for e in time_entries], &self.n_time)
        epochs = leader_epochs or ()
        self.epoch = int64_array([e[0] for e in epochs], &self.n_epochs)
        self.epoch_start = int64_array([e[1] for e in epochs], &self.n_epochs)

    def __dealloc__(self):
        free(self.idx_off)
        free(self.idx_pos)
        free(self.time_ts)
        free(self.time_off)
        free(self.epoch_start)
        free(self.epoch)
        free(self.out_epoch_start)
        free(self.out_epoch)
        buf_free(&self.ents)
        buf_free(&self.dg)
        buf_free(&self.conv)
        buf_free(&self.dts)
        buf_free(&self.out)
        buf_free(&self.oix)
        buf_free(&self.tix)

    def advance(self, buf, Py_ssize_t at, int64_t file_pos):
        """Consume the regular batches of ``buf`` from ``at`` (file position ``file_pos`` of
        ``buf[0]``); return where the first batch not consumed starts."""
        cdef Py_buffer v
        cdef const unsigned char *d
        cdef int32_t size
        cdef unsigned char magic
        cdef int ok
        cdef Py_ssize_t dg_n, dts_n, out_n
        if not self.enabled or (self.target and not self.out_open):
            return at
        get_view(buf, &v)
        self._mv = buf
        try:
            d = <const unsigned char *>v.buf
            while v.len - at > HEADER_SIZE_UP_TO_MAGIC:
                size = kb_i32(d + at + SIZE_OFFSET)
                if size < MIN_MESSAGE_SIZE or size > v.len - at - LOG_OVERHEAD:
                    break  # corrupt or not complete in this buffer: the caller's loop decides
                magic = d[at + MAGIC_OFFSET]
                dg_n, dts_n, out_n = self.dg.n, self.dts.n, self.out.n
                self.p_n = 0
                self.p_count = 0
                self.pp_size = 0
                if magic == 2:
                    ok = self._v2(d + at, at, size, file_pos + at)
                elif magic <= 1:
                    ok = self._legacy(d + at, at, size, magic, file_pos + at)
                else:
                    ok = 0
                if ok <= 0:
                    self.dg.n, self.dts.n, self.out.n = dg_n, dts_n, out_n  # what this batch added
                    break
                self._apply()
                self.in_bytes[magic] += LOG_OVERHEAD + size
                at += LOG_OVERHEAD + size
            return at
        finally:
            self._mv = None
            PyBuffer_Release(&v)

    cdef object _decompressed(self, Py_ssize_t start, Py_ssize_t n, int codec, int magic):
        """The codec's output for ``n`` bytes at ``start`` of the walked buffer, or None on any
        error (the caller's careful path then raises it, with its position)."""
        if not isinstance(self._mv, memoryview):
            self._mv = memoryview(self._mv)
        try:
            return codec_decompress(codec, self._mv[start : start + n], magic)
        except Exception:
            return None

    cdef int _v2(self, const unsigned char *p, Py_ssize_t at, int32_t size, int64_t pos) except -1:
        cdef int64_t first, last, sfirst = 0, slast = 0, base_ts, max_ts
        cdef int32_t lod, count, ple
        cdef int16_t attributes
        cdef int codec, rc
        cdef Py_ssize_t nrec = 0, n = 0
        cdef Py_buffer dv
        cdef bint lat
        cdef Buf *dg
        cdef Buf *dts
        if size + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD:
            return 0
        if crc32c_of(0, p + ATTRIBUTES_OFFSET, <size_t>(size + LOG_OVERHEAD - ATTRIBUTES_OFFSET)) != kb_u32(p + CRC_OFFSET):
            return 0
        count = kb_i32(p + RECORDS_COUNT_OFFSET)
        lod = kb_i32(p + LAST_OFFSET_DELTA_OFFSET)
        if count < 0 or lod < 0:
            return 0
        first = kb_i64(p + BASE_OFFSET_OFFSET)
        if kb_add_ovf(first, lod, &last):
            return 0
        attributes = kb_i16(p + ATTRIBUTES_OFFSET)
        base_ts = kb_i64(p + BASE_TIMESTAMP_OFFSET)
        max_ts = kb_i64(p + MAX_TIMESTAMP_OFFSET)
        if self.deep:
            codec = attributes & V2_CODEC_MASK
            # a LogAppendTime batch's time is every record's (record_batch.digest_parts)
            lat = (attributes & V2_TIMESTAMP_TYPE_MASK) != 0
            dg = &self.dg if self.digesting else NULL
            dts = &self.dts if self.digesting else NULL
            if codec == 0:
                rc = walk_v2(p + RECORD_BATCH_OVERHEAD, size + LOG_OVERHEAD - RECORD_BATCH_OVERHEAD, count, first,
                             base_ts, lat, max_ts, dg, dts, &sfirst, &slast, &nrec)
            elif codec <= V2_MAX_CODEC:
                data = self._decompressed(at + RECORD_BATCH_OVERHEAD, size + LOG_OVERHEAD - RECORD_BATCH_OVERHEAD,
                                          codec, 2)
                if data is None:
                    return 0
                get_view(data, &dv)
                try:
                    rc = walk_v2(<const unsigned char *>dv.buf, dv.len, count, first, base_ts, lat, max_ts, dg, dts,
                                 &sfirst, &slast, &nrec)
                finally:
                    PyBuffer_Release(&dv)
            else:
                return 0
            if rc < 0:
                raise MemoryError()
            if rc == 0:
                return 0
            n = count
            # the record offsets must lie in the batch's range (validate's "record-offset")
            if nrec and (sfirst < first or slast > last):
                return 0
            if self.digesting:
                self.p_n, self.p_first, self.p_last = nrec, sfirst, slast
        if self.count_from <= 2:
            self.p_count = count
        ple = kb_i32(p + PARTITION_LEADER_EPOCH_OFFSET)
        if not self._offsets_ok(first, last, False):
            return 0
        if self.n_epochs and not self._epoch_ok(first, ple):
            return 0
        if self.target and not self._emit(p, LOG_OVERHEAD + size, last, max_ts, 2):
            return 0  # a v2 batch is copied as it is, whatever the target
        return self._commit(pos, first, last, max_ts, n)

    cdef int _legacy(self, const unsigned char *p, Py_ssize_t at, int32_t size, int magic, int64_t pos) except -1:
        cdef bint v1 = magic == 1
        cdef Py_ssize_t mend = LOG_OVERHEAD + size, kp, vp
        cdef int32_t klen, vlen
        cdef int attributes, codec, rc
        cdef int64_t offset, ts, first, wrapper_ts
        cdef Py_ssize_t n = 0
        cdef bint shallow = False
        cdef Py_buffer dv
        if size < (RECORD_OVERHEAD_V1 if v1 else RECORD_OVERHEAD_V0):
            return 0
        if crc32_of(0, p + LEGACY_MAGIC_AT, <size_t>(mend - LEGACY_MAGIC_AT)) != kb_u32(p + LEGACY_CRC_AT):
            return 0
        if magic < self.count_from <= 2:
            self.count_from = 3  # below the counted formats: no more counting (see __init__)
        kp = V1_KEY_LENGTH_AT if v1 else V0_KEY_LENGTH_AT
        klen = kb_i32(p + kp)
        vp = kp + KEY_SIZE_LENGTH + (klen if klen > 0 else 0)
        if klen < -1 or vp + VALUE_SIZE_LENGTH > mend:
            return 0
        vlen = kb_i32(p + vp)
        if vlen < -1 or vp + VALUE_SIZE_LENGTH + (vlen if vlen > 0 else 0) != mend:
            return 0
        attributes = p[LEGACY_ATTRIBUTES_AT]
        codec = attributes & LEGACY_CODEC_MASK
        offset = kb_i64(p + OFFSET_OFFSET)
        ts = kb_i64(p + V1_TIMESTAMP_AT) if v1 else -1
        first = offset
        data = None
        if codec:
            if vlen < 0:
                return 0  # a wrapper without a value
            if not self.deep:
                shallow = True  # judged by its last offset, as Kafka's recovery does
                if magic >= self.count_from:
                    # counted for the survey: its inner messages decompressed and scanned (what
                    # legacy.scan does for record_count; anything irregular is the loop's)
                    if codec > LEGACY_MAX_CODEC:
                        return 0
                    data = self._decompressed(at + vp + VALUE_SIZE_LENGTH, vlen, codec, magic)
                    if data is None:
                        return 0
                    get_view(data, &dv)
                    try:
                        rc = scan_inner_c(<const unsigned char *>dv.buf, dv.len, magic, offset, False, 0, &self.ents)
                    finally:
                        PyBuffer_Release(&dv)
                    if rc < 0:
                        raise MemoryError()
                    if rc == 0:
                        return 0
                    self.p_count = self.ents.n // sizeof(Entry)
            elif codec > LEGACY_MAX_CODEC:
                return 0
            else:
                data = self._decompressed(at + vp + VALUE_SIZE_LENGTH, vlen, codec, magic)
                if data is None:
                    return 0
                get_view(data, &dv)
                try:
                    # a v1 LogAppendTime wrapper's time is its inner messages' (legacy.scan)
                    rc = scan_inner_c(<const unsigned char *>dv.buf, dv.len, magic, offset,
                                      v1 and (attributes & LEGACY_TIMESTAMP_TYPE_MASK) != 0, ts, &self.ents)
                    if rc > 0 and self.digesting and self._digest_entries(<const unsigned char *>dv.buf) < 0:
                        raise MemoryError()
                finally:
                    PyBuffer_Release(&dv)
                if rc < 0:
                    raise MemoryError()
                if rc == 0:
                    return 0
                first = (<Entry *>self.ents.p)[0].off
                n = self.ents.n // sizeof(Entry)
                if first > offset:
                    return 0  # inner offsets above the wrapper's (only possible at offset 0): the loop's
        elif self.deep:
            n = 1
            if self.digesting:
                # one record: its canonical bytes are a head and the message's tail (digest.py)
                if buf_reserve(&self.dg, RECORD_HEAD + mend - kp) < 0 or buf_reserve(&self.dts, 8) < 0:
                    raise MemoryError()
                kb_put_i64(self.dg.p + self.dg.n, offset)
                kb_put_i32(self.dg.p + self.dg.n + DIGEST_OFFSET_LENGTH, 0)
                memcpy(self.dg.p + self.dg.n + RECORD_HEAD, p + kp, <size_t>(mend - kp))
                self.dg.n += RECORD_HEAD + mend - kp
                (<int64_t *>(self.dts.p + self.dts.n))[0] = ts
                self.dts.n += 8
                self.p_n, self.p_first, self.p_last = 1, offset, offset
        if magic >= self.count_from and not shallow:
            self.p_count = n if self.deep else 1
        if not self._offsets_ok(first, offset, shallow):
            return 0
        if self.target:
            if codec and magic < self.target:
                if not self._emit_wrapper(data, magic, attributes, codec, ts):
                    return 0
            elif not self._emit_legacy(p, size, magic, attributes, codec, offset, ts, kp, klen, vlen):
                return 0
        return self._commit(pos, (self.prev_last + 1) if shallow else first, offset, ts, n)

    cdef int _digest_entries(self, const unsigned char *d) except -1:
        """The canonical bytes and timestamps of the inner messages in ``self.ents`` (``d``: the
        decompressed value they lie in); 0, or -1 when memory runs out."""
        cdef Entry *e = <Entry *>self.ents.p
        cdef Py_ssize_t count = self.ents.n // sizeof(Entry), i
        for i in range(count):
            if buf_reserve(&self.dg, RECORD_HEAD + e[i].mend - e[i].kp) < 0 or buf_reserve(&self.dts, 8) < 0:
                return -1
            kb_put_i64(self.dg.p + self.dg.n, e[i].off)
            kb_put_i32(self.dg.p + self.dg.n + DIGEST_OFFSET_LENGTH, 0)
            memcpy(self.dg.p + self.dg.n + RECORD_HEAD, d + e[i].kp, <size_t>(e[i].mend - e[i].kp))
            self.dg.n += RECORD_HEAD + e[i].mend - e[i].kp
            (<int64_t *>(self.dts.p + self.dts.n))[0] = e[i].ts
            self.dts.n += 8
        self.p_n, self.p_first, self.p_last = count, e[0].off, e[count - 1].off
        return 0

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
                    w = put_varint(w, klen)
                    if klen > 0:
                        memcpy(w, d + e[i].kp + KEY_SIZE_LENGTH, <size_t>klen)
                        w += klen
                    w = put_varint(w, vlen)
                    if vlen > 0:
                        memcpy(w, d + e[i].mend - vlen, <size_t>vlen)
                        w += vlen
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
                kb_put_i32(w + V1_KEY_LENGTH_AT, -1)  # no key
                kb_put_i32(w + V1_KEY_LENGTH_AT + KEY_SIZE_LENGTH, <int32_t>plen)
                memcpy(w + V1_KEY_LENGTH_AT + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH, pv.buf, <size_t>plen)
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
        cdef Py_ssize_t lo = 0, hi = self.n_out_epochs, mid
        while lo < hi:
            mid = (lo + hi) // 2
            if offset < self.out_epoch_start[mid]:
                hi = mid
            else:
                lo = mid + 1
        return <int32_t>self.out_epoch[lo - 1] if lo else -1

    cdef void _apply(self):
        """The batch just consumed: its records into the digest's span, its piece into the
        output segment with the entries IndexBuilder.append and TimeIndex.maybe_append would
        make (room for them was reserved)."""
        cdef int64_t *e
        self.counted += self.p_count
        if self.p_n:
            if self.dg_records == 0:
                self.dg_first = self.p_first
            self.dg_last = self.p_last
            self.dg_records += self.p_n
        if self.pp_size:
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

    def bytes_by_magic(self):
        """Bytes consumed so far per magic: (v0, v1, v2)."""
        return self.in_bytes[0], self.in_bytes[1], self.in_bytes[2]

    def feed_digest(self, digester):
        """The digest bytes collected since the last call, handed to ``digester.feed_packed``:
        the canonical bytes read in place (a view of the walker's buffer, released when
        ``feed_packed`` returns: the stream is as large as the records, and is not copied), the
        timestamps as big-endian int64s, records, first and last offset. False when no record
        was consumed."""
        if self._digest_pending() == 0:
            return False
        view = buf_view(&self.dg)
        try:
            digester.feed_packed(view, self._digest_stamps(), self.dg_records, self.dg_first, self.dg_last)
        finally:
            view.release()
            self._digest_taken()
        return True

    cdef Py_ssize_t _digest_pending(self) except -1:
        if not self.digesting:
            raise ValueError("this walker was made without digest=True: it collects no digest")
        return self.dg_records

    cdef bytes _digest_stamps(self):
        """The collected timestamps as big-endian int64s."""
        cdef Py_ssize_t i, n = self.dg_records
        cdef int64_t *t = <int64_t *>self.dts.p
        cdef bytes stamps = PyBytes_FromStringAndSize(NULL, n * 8)
        cdef unsigned char *w = <unsigned char *>PyBytes_AS_STRING(stamps)
        for i in range(n):
            kb_put_i64(w + 8 * i, t[i])
        return stamps

    cdef void _digest_taken(self):
        self.dg.n = self.dts.n = 0
        self.dg_records = 0

    def open_output(self, base_offset, valid_bytes, last_index_entry, max_timestamp, offset_of_max_timestamp,
                    time_index_last_timestamp):
        """The output segment the next pieces go to, as ``IndexBuilder``'s state says it is."""
        if self.target == 0:
            raise ValueError("a walker without a target magic has no output")
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

    cdef bint _offsets_ok(self, int64_t first, int64_t last, bint shallow):
        """No finding of validate.batch_offset_problems (without its span rule, checked by _v2)."""
        cdef int64_t rel
        if (last if shallow else first) <= self.prev_last:
            return False
        if kb_sub_ovf(last, self.base, &rel) or rel > INT32_MAX:
            return False
        if self.has_next and last >= self.next_base:
            return False
        return True

    cdef bint _epoch_ok(self, int64_t first, int32_t ple):
        """The batch's leader epoch is the checkpoint's for its base offset (bisect_right - 1), or
        -1 (no epoch: Kafka's LogSegment.recover builds cache entries only from batches with one)."""
        cdef Py_ssize_t lo = 0, hi = self.n_epochs, mid
        if ple == -1:
            return True
        while lo < hi:
            mid = (lo + hi) // 2
            if first < self.epoch_start[mid]:
                hi = mid
            else:
                lo = mid + 1
        return lo == 0 or self.epoch[lo - 1] == ple

    cdef int _commit(self, int64_t pos, int64_t floor, int64_t last, int64_t batch_max_ts, Py_ssize_t n):
        """Index entries on this batch, all without a finding, then the new state; 0 when an
        entry would give one (nothing is changed then)."""
        cdef Py_ssize_t oi = self.oi, ti = self.ti
        cdef int64_t max_ts = batch_max_ts if batch_max_ts > self.max_ts else self.max_ts
        if oi < self.n_idx and self.idx_pos[oi] < pos:
            return 0  # an entry pointing inside the previous batch
        while oi < self.n_idx and self.idx_pos[oi] == pos:
            if self.idx_off[oi] < floor or self.idx_off[oi] != last:
                return 0  # an error, or the info finding of a multi-batch append
            oi += 1
        while ti < self.n_time and self.time_off[ti] <= last:
            if self.time_ts[ti] > max_ts:
                return 0
            ti += 1
        self.oi = oi
        self.ti = ti
        if last > self.prev_last:  # the loops carry the larger one (validate, rewrite._check_offsets)
            self.prev_last = last
        self.max_ts = max_ts
        self.batches += 1
        if self.deep:
            self.records += n
        return 1
