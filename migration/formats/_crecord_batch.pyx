# cython: language_level=3
"""The v2 kernels compiled, the twin of ``record_batch.py``'s calls into the record core
(``_pycore.digest_v2``, ``check_v2``, ``single_record_batch``, ``encode_records``): the walk of a
batch's records and the writers of records and one-record batches, with the same signatures and
results. A walk answers None on anything irregular and ``record_batch.decode_records`` decides;
arguments outside the C ranges go to the Python twin whole."""

from cpython.buffer cimport PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.long cimport PyLong_FromLongLong
from cpython.tuple cimport PyTuple_GET_ITEM
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t

from migration.formats._cbytes cimport (
    INT32_MAX, INT64_MAX_, INT64_MIN_, Buf, buf_bytes, buf_free, buf_put_sized, buf_reserve, get_view, kb_add_ovf,
    kb_put_i16, kb_put_i32, kb_put_i64, kb_put_u32, kb_sub_ovf, put_sized,
)
from migration.formats._ccrc cimport crc32c_of
from migration.formats._clayout cimport *
from migration.formats._cvarint cimport put_varint, put_varint_sized, rd_length, rd_sized, rd_varint, varint_size

from migration.formats import _pycore as _py
from migration.formats.model import Record

cdef int walk_v2(const unsigned char *d, Py_ssize_t end, int64_t count, int64_t base_offset, int64_t base_ts,
                 bint has_lat, int64_t lat, Buf *out, Buf *stamps, int64_t *first, int64_t *last,
                 Py_ssize_t *nrec) noexcept nogil:
    """_pycore.digest_v2 over ``d[0:end]``: 1 regular, 0 irregular, -1 out of memory. With
    ``out`` NULL, only the walk (deep validation). Every field must lie inside its record
    (the reference fails later on any that does not: its position only grows)."""
    cdef Py_ssize_t pos = 0, rec_end, kstart, vstart, hstart, need
    cdef int64_t length, ts_delta, off_delta, offset, klen, vlen, nheaders, hklen, hvlen, h
    cdef int64_t i
    cdef unsigned char nb
    cdef unsigned char *w
    nrec[0] = 0
    if base_ts < INT64_MIN_ + SAFE_DELTA or base_ts > INT64_MAX_ - SAFE_DELTA:
        return 0  # timestamps may leave int64: the careful decoder checks them
    i = 0
    while i < count:
        i += 1
        if not rd_length(d, &pos, end, 0, &length):
            return 0
        rec_end = pos + length
        pos += 1  # record attributes, unused
        if not rd_varint(d, &pos, rec_end, 10, &ts_delta):
            return 0
        if ts_delta < -SAFE_DELTA or ts_delta > SAFE_DELTA:
            return 0
        if not rd_varint(d, &pos, rec_end, 5, &off_delta):
            return 0
        if kb_add_ovf(base_offset, off_delta, &offset):
            return 0
        if not rd_sized(d, &pos, rec_end, &klen, &kstart) or not rd_sized(d, &pos, rec_end, &vlen, &vstart):
            return 0
        nb = d[pos]  # header count: one byte in the regular case
        pos += 1
        if nb >= 0x80:
            return 0
        nheaders = (nb >> 1) ^ -(nb & 1)
        if nheaders < 0 or nheaders > rec_end - pos:
            return 0
        hstart = pos
        if out != NULL:
            need = RECORD_HEAD + 8 + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
            if buf_reserve(out, need) < 0:
                return -1
            w = out.p + out.n
            kb_put_i64(w, offset)
            kb_put_i32(w + DIGEST_OFFSET_LENGTH, <int32_t>nheaders)
            out.n += RECORD_HEAD
        h = 0
        while h < nheaders:
            h += 1
            if not rd_length(d, &pos, rec_end, 0, &hklen):
                return 0
            # Keys are str in a Record; utf-8 with surrogateescape round-trips any bytes,
            # so the raw key bytes are its canonical encoding.
            if out != NULL and buf_put_sized(out, d + pos, hklen) < 0:
                return -1
            pos += hklen
            if not rd_length(d, &pos, rec_end, -1, &hvlen):  # -1: a null value (docs/formats.md §2.5)
                return 0
            if out != NULL and buf_put_sized(out, d + pos, hvlen) < 0:
                return -1
            if hvlen > 0:
                pos += hvlen
        if pos != rec_end:
            return 0
        if out != NULL:
            need = 8 + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
            if buf_reserve(out, need) < 0:
                return -1
            out.n = put_sized(put_sized(out.p + out.n, d + kstart, klen), d + vstart, vlen) - out.p
        if stamps != NULL:
            if buf_reserve(stamps, 8) < 0:
                return -1
            (<int64_t *>(stamps.p + stamps.n))[0] = lat if has_lat else base_ts + ts_delta
            stamps.n += 8
        if nrec[0] == 0:
            first[0] = offset
        last[0] = offset
        nrec[0] += 1
    if pos != end:
        return 0
    return 1


cdef int _walk_args(object start, object end, object count, object base_offset, object base_timestamp,
                    Py_ssize_t *s, Py_ssize_t *e, int64_t *cnt, int64_t *boff, int64_t *bts) except -1:
    """A walk's arguments as C values: 1, or 0 when one does not fit (the reference decides)."""
    try:
        s[0] = start
        e[0] = end
        cnt[0] = count
        boff[0] = base_offset
        bts[0] = base_timestamp
    except OverflowError:
        return 0
    return 1


def digest_v2(buf, start, end, count, base_offset, base_timestamp, lat, list parts, list stamps):
    """See ``_pycore.digest_v2``; appends one piece for the whole batch, nothing when irregular."""
    cdef Py_buffer v
    cdef Py_ssize_t s, e, i, nrec = 0
    cdef int64_t cnt, boff, bts, lat_v = 0, first = 0, last = 0
    cdef int rc
    cdef Buf out = Buf(NULL, 0, 0)
    cdef Buf ts = Buf(NULL, 0, 0)
    cdef int64_t *tsp
    if not _walk_args(start, end, count, base_offset, base_timestamp, &s, &e, &cnt, &boff, &bts):
        return _py.digest_v2(buf, start, end, count, base_offset, base_timestamp, lat, parts, stamps)
    try:
        if lat is not None:
            lat_v = lat
    except OverflowError:
        return _py.digest_v2(buf, start, end, count, base_offset, base_timestamp, lat, parts, stamps)
    get_view(buf, &v)
    try:
        if s < 0 or e < s or e > v.len:
            return _py.digest_v2(buf, start, end, count, base_offset, base_timestamp, lat, parts, stamps)
        rc = walk_v2(<const unsigned char *>v.buf + s, e - s, cnt, boff, bts, lat is not None, lat_v, &out, &ts,
                     &first, &last, &nrec)
        if rc < 0:
            raise MemoryError()
        if rc == 0:
            return None
        if nrec == 0:
            return ()
        parts.append(buf_bytes(&out))
        tsp = <int64_t *>ts.p
        for i in range(nrec):
            stamps.append(PyLong_FromLongLong(tsp[i]))
        return (first, last)
    finally:
        buf_free(&out)
        buf_free(&ts)
        PyBuffer_Release(&v)


def check_v2(buf, start, end, count, base_offset, base_timestamp):
    """See ``_pycore.check_v2``."""
    cdef Py_buffer v
    cdef Py_ssize_t s, e, nrec = 0
    cdef int64_t cnt, boff, bts, first = 0, last = 0
    cdef int rc
    if not _walk_args(start, end, count, base_offset, base_timestamp, &s, &e, &cnt, &boff, &bts):
        return _py.check_v2(buf, start, end, count, base_offset, base_timestamp)
    get_view(buf, &v)
    try:
        if s < 0 or e < s or e > v.len:
            return _py.check_v2(buf, start, end, count, base_offset, base_timestamp)
        rc = walk_v2(<const unsigned char *>v.buf + s, e - s, cnt, boff, bts, False, 0, NULL, NULL, &first, &last,
                     &nrec)
        if rc <= 0:
            return None
        return (first, last) if nrec else ()
    finally:
        PyBuffer_Release(&v)


# ---------------------------------------------------------------- v2 writers


cdef class _Blob:
    """A bytes-like argument (or None) held as a buffer for the writers."""

    cdef Py_buffer view
    cdef bint held

    def __cinit__(self, obj):
        self.held = False
        if obj is not None:
            get_view(obj, &self.view)
            self.held = True

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)

    cdef inline Py_ssize_t length(self):
        return self.view.len if self.held else -1


cdef void put_single_record_batch(unsigned char *w, Py_ssize_t total, int64_t off, int64_t ts,
                                  const unsigned char *key, Py_ssize_t klen, const unsigned char *value,
                                  Py_ssize_t vlen, bint log_append_time, int32_t epoch) noexcept nogil:
    """Write the ``total`` (:func:`single_record_batch_size`) bytes of one uncompressed record in
    its own v2 batch at ``w``: record attributes, timestamp delta and offset delta 0, no headers."""
    cdef unsigned char *start = w
    cdef Py_ssize_t after = total - ATTRIBUTES_OFFSET
    kb_put_i64(w + BASE_OFFSET_OFFSET, off)
    kb_put_i32(w + LENGTH_OFFSET, <int32_t>(after + PARTITION_LEADER_EPOCH_LENGTH + MAGIC_LENGTH + CRC_LENGTH))
    kb_put_i32(w + PARTITION_LEADER_EPOCH_OFFSET, epoch)
    w[MAGIC_OFFSET] = 2
    kb_put_i16(w + ATTRIBUTES_OFFSET, V2_TIMESTAMP_TYPE_MASK if log_append_time else 0)
    kb_put_i32(w + LAST_OFFSET_DELTA_OFFSET, 0)
    kb_put_i64(w + BASE_TIMESTAMP_OFFSET, ts)
    kb_put_i64(w + MAX_TIMESTAMP_OFFSET, ts)
    kb_put_i64(w + PRODUCER_ID_OFFSET, -1)
    kb_put_i16(w + PRODUCER_EPOCH_OFFSET, -1)
    kb_put_i32(w + BASE_SEQUENCE_OFFSET, -1)
    kb_put_i32(w + RECORDS_COUNT_OFFSET, 1)
    w = put_varint(w + RECORD_BATCH_OVERHEAD,
                   3 + varint_size(klen) + (klen if klen > 0 else 0) + varint_size(vlen) + (vlen if vlen > 0 else 0) + 1)
    w[0] = 0  # record attributes
    w[1] = 0  # timestamp delta
    w[2] = 0  # offset delta
    w = put_varint_sized(put_varint_sized(w + 3, key, klen), value, vlen)
    w[0] = 0  # no headers
    kb_put_u32(start + CRC_OFFSET, crc32c_of(0, start + ATTRIBUTES_OFFSET, <size_t>after))


def single_record_batch(offset, timestamp, key, value, log_append_time, partition_leader_epoch):
    """See ``_pycore.single_record_batch``."""
    cdef int64_t off, ts
    cdef int32_t epoch
    cdef Py_ssize_t klen, vlen, total
    cdef object out
    try:
        off = offset
        ts = timestamp
        epoch = partition_leader_epoch
    except OverflowError:
        return _py.single_record_batch(offset, timestamp, key, value, log_append_time, partition_leader_epoch)
    k = _Blob(key)
    val = _Blob(value)
    klen = k.length()
    vlen = val.length()
    total = single_record_batch_size(klen, vlen)
    if total < 0:
        return _py.single_record_batch(offset, timestamp, key, value, log_append_time, partition_leader_epoch)
    out = PyBytes_FromStringAndSize(NULL, total)
    put_single_record_batch(<unsigned char *>PyBytes_AS_STRING(out), total, off, ts,
                            <const unsigned char *>k.view.buf if klen > 0 else NULL, klen,
                            <const unsigned char *>val.view.buf if vlen > 0 else NULL, vlen,
                            bool(log_append_time), epoch)
    return out


cdef class _RecordParts:
    """One record's pieces for :func:`encode_records`: buffers of key, value and headers."""

    cdef _Blob key
    cdef _Blob value
    cdef list headers  # [(_Blob utf-8 key, _Blob value)]
    cdef int64_t offset_delta
    cdef int64_t timestamp_delta
    cdef Py_ssize_t body


def encode_records(records, base_offset, base_timestamp):
    """See ``_pycore.encode_records``."""
    cdef int64_t boff, bts, off, ts, delta, prev = -1, max_ts = -1, tdelta
    cdef Py_ssize_t total = 0, body, i, n
    cdef _RecordParts rp
    cdef _Blob hk, hv
    cdef list items = []
    cdef unsigned char *w
    cdef object out
    try:
        boff = base_offset
        bts = base_timestamp
    except OverflowError:
        return _py.encode_records(records, base_offset, base_timestamp)
    for r in records:
        if type(r) is not Record:
            return _py.encode_records(records, base_offset, base_timestamp)
        try:
            off = <object>PyTuple_GET_ITEM(r, 0)
            ts = <object>PyTuple_GET_ITEM(r, 1)
        except OverflowError:
            return _py.encode_records(records, base_offset, base_timestamp)
        if kb_sub_ovf(off, boff, &delta) or kb_sub_ovf(ts, bts, &tdelta):
            return _py.encode_records(records, base_offset, base_timestamp)
        if delta <= prev or delta > INT32_MAX:
            raise ValueError(f"record offset {off} does not fit the batch (delta {delta})")
        prev = delta
        if ts > max_ts:
            max_ts = ts
        rp = _RecordParts.__new__(_RecordParts)
        rp.offset_delta = delta
        rp.timestamp_delta = tdelta
        rp.key = _Blob(<object>PyTuple_GET_ITEM(r, 2))
        rp.value = _Blob(<object>PyTuple_GET_ITEM(r, 3))
        headers = <object>PyTuple_GET_ITEM(r, 4)
        body = 1 + varint_size(tdelta) + varint_size(delta)
        body += 1 if rp.key.length() < 0 else varint_size(rp.key.length()) + rp.key.length()
        body += 1 if rp.value.length() < 0 else varint_size(rp.value.length()) + rp.value.length()
        if not headers:
            rp.headers = None
            body += 1
        else:
            rp.headers = []
            body += varint_size(len(headers))
            for h in headers:
                hk = _Blob(h.key.encode("utf-8", "surrogateescape"))
                hv = _Blob(h.value)
                rp.headers.append((hk, hv))
                body += varint_size(hk.length()) + hk.length()
                body += 1 if hv.length() < 0 else varint_size(hv.length()) + hv.length()
        rp.body = body
        total += varint_size(body) + body
        items.append(rp)
    out = PyBytes_FromStringAndSize(NULL, total)
    w = <unsigned char *>PyBytes_AS_STRING(out)
    n = len(items)
    for i in range(n):
        rp = <_RecordParts>items[i]
        w = put_varint(w, rp.body)
        w[0] = 0  # record attributes
        w = put_varint(w + 1, rp.timestamp_delta)
        w = put_varint(w, rp.offset_delta)
        w = put_varint_sized(w, rp.key.view.buf, rp.key.length())
        w = put_varint_sized(w, rp.value.view.buf, rp.value.length())
        if rp.headers is None:
            w[0] = 0
            w += 1
        else:
            w = put_varint(w, len(rp.headers))
            for hk, hv in rp.headers:
                w = put_varint_sized(w, hk.view.buf, hk.length())
                w = put_varint_sized(w, hv.view.buf, hv.length())
    return out, max_ts, prev
