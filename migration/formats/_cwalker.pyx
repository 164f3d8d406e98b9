# cython: language_level=3
"""Deep validation of whole runs of batches compiled: :class:`SegmentWalker`, which judges in C
the regular batches ``logdir.validate``'s per-batch loop would pass without a finding, and
stops before the first one that might give one (docs/architecture.md, "The record core")."""

from cpython.buffer cimport PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t
from libc.stdlib cimport free, malloc

from migration.formats._cbytes cimport (
    INT32_MAX, Buf, bisect_right_i64, buf_free, buf_reserve, buf_view, get_view, int64_array, kb_add_ovf, kb_i16,
    kb_i32, kb_i64, kb_put_i64, kb_sub_ovf, kb_u32,
)
from migration.formats._ccompression cimport codec_decompress
from migration.formats._ccrc cimport crc32_of, crc32c_of
from migration.formats._clayout cimport *
from migration.formats._clegacy cimport Entry, legacy_key_value, put_legacy_digest, scan_inner_c
from migration.formats._crecord_batch cimport walk_v2

# ---------------------------------------------------------------- deep validation of a segment


cdef inline int digest_record(Buf *dg, Buf *dts, int64_t offset, int64_t ts, const unsigned char *tail,
                              Py_ssize_t n) noexcept nogil:
    """A v0/v1 message's canonical bytes into ``dg`` (``tail``: its ``n`` bytes from the key
    length on, digest.py) and its timestamp into ``dts``; -1 when memory runs out."""
    if buf_reserve(dg, RECORD_HEAD + n) < 0 or buf_reserve(dts, 8) < 0:
        return -1
    dg.n = put_legacy_digest(dg.p + dg.n, offset, tail, n) - dg.p
    (<int64_t *>(dts.p + dts.n))[0] = ts
    dts.n += 8
    return 0


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

    Two more duties of this layer: ``digest=True``, the canonical digest bytes and timestamps
    of every record it consumes (``digest.py``'s layout, as ``digest_v2``/``legacy_digest``
    make them), collected until :meth:`feed_digest` hands them to
    ``RecordDigester.feed_packed``; and ``count_from`` (see ``__init__``).

    A layer above extends the walk by subclassing (``_cwalker.pxd``) and overriding the hooks
    below, which do nothing here: the rewrite's conversion and index entries
    (``migrations/upgrade/_crewrite.pyx``) take each batch judged through ``_take_v2`` and
    ``_take_legacy`` (0: leave the batch to the caller), and are told through ``_taken`` that it
    was consumed or through ``_abandon`` that it was not.
    """

    def __cinit__(self):
        self.idx_off = self.idx_pos = self.time_ts = self.time_off = self.epoch_start = self.epoch = NULL
        self.ents = Buf(NULL, 0, 0)
        self.dg = Buf(NULL, 0, 0)
        self.dts = Buf(NULL, 0, 0)

    def __init__(self, *, bint deep, base_offset, next_base_offset, offset_entries, time_entries, leader_epochs,
                 bint digest=False, int count_from=3):
        """``offset_entries`` (offset, position) and ``time_entries`` (timestamp, offset) as
        read from the indexes, ``leader_epochs`` (epoch, start offset) or None. The codecs are
        ``codec_decompress``/``codec_compress``: snappy and LZ4 framed here, gzip and zstd by
        compression.py. OverflowError when a value does not fit int64 (the caller then
        validates without the walker). ``digest`` needs ``deep``. ``count_from``: the records
        of batches of this magic and above are counted in ``counted`` (a v2 batch by its
        header, a wrapper by its inner messages, decompressed even when not ``deep``), until a
        batch below that magic: counting stops there (the upgrade rewrites such a segment, and
        its unit counts the records), so ``counted`` is then the count before that batch."""
        if digest and not deep:
            raise ValueError("the digest walks records: deep=True")
        self.digesting = digest
        self.count_from = count_from
        self.counted = 0
        self.in_bytes[0] = self.in_bytes[1] = self.in_bytes[2] = 0
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
        buf_free(&self.ents)
        buf_free(&self.dg)
        buf_free(&self.dts)

    def advance(self, buf, Py_ssize_t at, int64_t file_pos):
        """Consume the regular batches of ``buf`` from ``at`` (file position ``file_pos`` of
        ``buf[0]``); return where the first batch not consumed starts."""
        cdef Py_buffer v
        cdef const unsigned char *d
        cdef int32_t size
        cdef unsigned char magic
        cdef int ok
        cdef Py_ssize_t dg_n, dts_n
        if not self.enabled or not self._ready():
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
                dg_n, dts_n = self.dg.n, self.dts.n
                self.p_n = 0
                self.p_count = 0
                self._begin()
                if magic == 2:
                    ok = self._v2(d + at, at, size, file_pos + at)
                elif magic <= 1:
                    ok = self._legacy(d + at, at, size, magic, file_pos + at)
                else:
                    ok = 0
                if ok <= 0:
                    self.dg.n, self.dts.n = dg_n, dts_n  # what this batch added
                    self._abandon()
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
        if not self._take_v2(p, LOG_OVERHEAD + size, last, max_ts):
            return 0
        return self._commit(pos, first, last, max_ts, n)

    cdef int _legacy(self, const unsigned char *p, Py_ssize_t at, int32_t size, int magic, int64_t pos) except -1:
        cdef bint v1 = magic == 1
        cdef Py_ssize_t mend = LOG_OVERHEAD + size, kp, vp
        cdef int32_t klen, vlen
        cdef int attributes, codec
        cdef int64_t offset, ts, first
        cdef Py_ssize_t n = 0
        cdef bint shallow = False
        if size < (RECORD_OVERHEAD_V1 if v1 else RECORD_OVERHEAD_V0):
            return 0
        if crc32_of(0, p + LEGACY_MAGIC_AT, <size_t>(mend - LEGACY_MAGIC_AT)) != kb_u32(p + LEGACY_CRC_AT):
            return 0
        if magic < self.count_from <= 2:
            self.count_from = 3  # below the counted formats: no more counting (see __init__)
        kp = V1_KEY_LENGTH_AT if v1 else V0_KEY_LENGTH_AT
        if not legacy_key_value(p, kp, mend, &klen, &vp, &vlen):
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
                    data = self._inner(at + vp + VALUE_SIZE_LENGTH, vlen, codec, magic, offset, False, 0, False)
                    if data is None:
                        return 0
                    self.p_count = self.ents.n // sizeof(Entry)
            elif codec > LEGACY_MAX_CODEC:
                return 0
            else:
                # a v1 LogAppendTime wrapper's time is its inner messages' (legacy.scan)
                data = self._inner(at + vp + VALUE_SIZE_LENGTH, vlen, codec, magic, offset,
                                   v1 and (attributes & LEGACY_TIMESTAMP_TYPE_MASK) != 0, ts, self.digesting)
                if data is None:
                    return 0
                first = (<Entry *>self.ents.p)[0].off
                n = self.ents.n // sizeof(Entry)
                if first > offset:
                    return 0  # inner offsets above the wrapper's (only possible at offset 0): the loop's
        elif self.deep:
            n = 1
            if self.digesting:
                # one record: its canonical bytes are a head and the message's tail (digest.py)
                if digest_record(&self.dg, &self.dts, offset, ts, p + kp, mend - kp) < 0:
                    raise MemoryError()
                self.p_n, self.p_first, self.p_last = 1, offset, offset
        if magic >= self.count_from and not shallow:
            self.p_count = n if self.deep else 1
        if not self._offsets_ok(first, offset, shallow):
            return 0
        if not self._take_legacy(p, size, magic, attributes, codec, offset, ts, kp, klen, vlen, data):
            return 0
        return self._commit(pos, (self.prev_last + 1) if shallow else first, offset, ts, n)

    cdef object _inner(self, Py_ssize_t start, Py_ssize_t n, int codec, int magic, int64_t offset, bint lat,
                       int64_t ts, bint digest):
        """The value of the wrapper at ``offset`` (``n`` bytes at ``start`` of the walked buffer)
        decompressed, its inner messages scanned into ``self.ents`` (``lat``: ``ts`` is their
        time) and, with ``digest``, digested: the decompressed value, or None when irregular."""
        cdef Py_buffer dv
        cdef int rc
        data = self._decompressed(start, n, codec, magic)
        if data is None:
            return None
        get_view(data, &dv)
        try:
            rc = scan_inner_c(<const unsigned char *>dv.buf, dv.len, magic, offset, lat, ts, &self.ents)
            if rc > 0 and digest:
                self._digest_entries(<const unsigned char *>dv.buf)
        finally:
            PyBuffer_Release(&dv)
        if rc < 0:
            raise MemoryError()
        return data if rc else None

    cdef int _digest_entries(self, const unsigned char *d) except -1:
        """The canonical bytes and timestamps of the inner messages in ``self.ents`` (``d``: the
        decompressed value they lie in)."""
        cdef Entry *e = <Entry *>self.ents.p
        cdef Py_ssize_t count = self.ents.n // sizeof(Entry), i
        for i in range(count):
            if digest_record(&self.dg, &self.dts, e[i].off, e[i].ts, d + e[i].kp, e[i].mend - e[i].kp) < 0:
                raise MemoryError()
        self.p_n, self.p_first, self.p_last = count, e[0].off, e[count - 1].off
        return 0







    cdef void _apply(self) noexcept:
        """The batch just consumed: its records into the digest's span, and to the hooks."""
        self.counted += self.p_count
        if self.p_n:
            if self.dg_records == 0:
                self.dg_first = self.p_first
            self.dg_last = self.p_last
            self.dg_records += self.p_n
        self._taken()

    # ---------------------------------------------------------------- hooks (see the class)

    cdef bint _ready(self) noexcept:
        """Whether :meth:`advance` may consume batches now."""
        return True

    cdef void _begin(self) noexcept:
        """A batch is about to be judged."""
        pass

    cdef void _abandon(self) noexcept:
        """The batch judged since :meth:`_begin` is left to the caller: undo what it added."""
        pass

    cdef int _take_v2(self, const unsigned char *p, Py_ssize_t n, int64_t last, int64_t max_ts) except -1:
        """The v2 batch ``p[:n]``, judged regular: 1 to consume it, 0 to leave it to the caller."""
        return 1

    cdef int _take_legacy(self, const unsigned char *p, int32_t size, int magic, int attributes, int codec,
                          int64_t offset, int64_t ts, Py_ssize_t kp, int32_t klen, int32_t vlen,
                          object data) except -1:
        """The v0/v1 entry at ``p`` (a wrapper's inner messages in ``ents``, ``data`` its
        decompressed value), judged regular: 1 to consume it, 0 to leave it to the caller."""
        return 1

    cdef void _taken(self) noexcept:
        """The batch judged since :meth:`_begin` was consumed."""
        pass

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
        cdef Py_ssize_t lo
        if ple == -1:
            return True
        lo = bisect_right_i64(self.epoch_start, self.n_epochs, first)
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
