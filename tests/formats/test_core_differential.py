"""Differential tests of the record core (docs/architecture.md, "The record core"): the compiled
and the pure-Python core must give identical records, digests, converted bytes, index entries,
verdicts and error positions, on valid data and on damaged data.

Hypothesis builds segments of every format and codec (v0/v1 messages, v0/v1 wrappers with
gzip/snappy/lz4, v1 LogAppendTime, v2 batches with every codec, headers, transactional
flags), then damages them: inside a batch before it is compressed and checksummed (so the
damage reaches the record parsers behind the codec and the CRC: byte flips, truncations,
varints written over fields), and on the finished bytes (flips, truncations). Every
observation is made on each core and compared; errors by type, message, position, expected
and found.
"""

from __future__ import annotations

import random
import struct
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migration.formats import compression as codecs
from migration.formats import core
from migration.formats.digest import RecordDigester
from migration.formats.errors import KafkaFormatError
from migration.formats.file_records import FileRecords, iterate_batches
from migration.formats.index_builder import IndexBuilder, build_indexes
from migration.formats.legacy import LegacyBatch, build_wrapper, encode_message, v0_entries_to_v1
from migration.formats.model import MAGIC_V0, MAGIC_V1, Compression, Header, Record, TimestampType
from migration.formats.record_batch import RecordBatch, build_record_batch, build_single_record_batch
from migration.formats.varint import decode_varint, encode_varint
from migration.logdir.validate import validate_segment
from migration.migrations.upgrade.rewrite import REWRITE_WALKER, RewriteSpec, digest_log, rewrite_segment

pytestmark = pytest.mark.skipif(core.compiled is None, reason=core.describe())

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None)
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
V2_HEADER = 61
LEGACY_CODECS = (Compression.GZIP, Compression.SNAPPY, Compression.LZ4)
V2_CODECS = (Compression.NONE, *LEGACY_CODECS, Compression.ZSTD)


# ------------------------------------------------------------------ observing on both cores


def error_key(exc: BaseException) -> tuple[Any, ...]:
    if isinstance(exc, KafkaFormatError):
        return (type(exc).__name__, str(exc), exc.position, exc.to_dict())
    return (type(exc).__name__, str(exc))


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", result) or ("error", error key): KafkaFormatError and the ValueErrors of the
    writers are both part of the contract."""
    try:
        return "ok", fn()
    except (KafkaFormatError, ValueError, OverflowError) as exc:
        return "error", error_key(exc)


def on_both(observe: Callable[[], Any]) -> Any:
    """The observation on each core; they must be equal. Returns the Python one."""
    seen = {}
    for name in (core.PYTHON, core.COMPILED):
        with core.use(name):
            seen[name] = observe()
    assert seen[core.COMPILED] == seen[core.PYTHON]
    return seen[core.PYTHON]


def digest_of(b: LegacyBatch | RecordBatch) -> tuple[Any, ...]:
    parts: list[bytes | memoryview] = []
    stamps: list[int] = []
    span = b.digest_parts(parts, stamps)
    return span, b"".join(parts), stamps


def observe_batch(b: LegacyBatch | RecordBatch) -> list[Any]:
    obs: list[Any] = [b.position, b.compute_checksum(), b.is_valid(), outcome(b.ensure_valid)]
    obs.append(outcome(lambda: [tuple(r) for r in b.records()]))
    obs.append(outcome(lambda: digest_of(b)))
    d = RecordDigester()
    obs.append(outcome(lambda: (d.add_batch(b), d.result().model_dump())))
    if isinstance(b, RecordBatch):
        obs.append(outcome(b.check_records))
        records = outcome(b.records)
        if records[0] == "ok" and records[1]:
            recs = records[1]
            obs.append(outcome(lambda: build_record_batch(recs)))
            obs.append(outcome(lambda: build_record_batch(recs, base_offset=recs[0].offset - 3,
                                                          partition_leader_epoch=7)))
        return obs
    scan = outcome(b.scan)
    obs.append(("ok", (bytes(scan[1][0]), scan[1][1])) if scan[0] == "ok" else scan)
    obs.append(outcome(lambda: [(m.offset, m.key, m.value) for m in b.inner()]))
    if scan[0] == "ok":
        data, entries = scan[1]
        if b.magic == MAGIC_V0 and not b.is_compressed:
            obs.append(outcome(lambda: b.upconvert_to_v1(b.offset, 0, -1)))
            obs.append(outcome(lambda: b.upconvert_to_v1(b.offset - 1, 0x08, 1_700_000_000_000)))
        if b.magic == MAGIC_V0:
            obs.append(outcome(lambda: v0_entries_to_v1(data, entries, entries[0][0], 0, -1)))
        for off, ts, kp, klen, vlen, vend, _ in entries:
            key = None if klen < 0 else data[kp + 4 : kp + 4 + klen]
            value = None if vlen < 0 else data[vend - vlen : vend]
            obs.append(outcome(lambda o=off, t=ts, k=key, v=value: build_single_record_batch(
                o, t, k, v, log_append_time=t % 2 == 0, partition_leader_epoch=3)))
    return obs


def observe_segment(data: bytes) -> list[Any]:
    obs: list[Any] = []
    batches: list[LegacyBatch | RecordBatch] = []
    try:
        batches.extend(iterate_batches(data))
        obs.append("complete")
    except KafkaFormatError as exc:
        obs.append(error_key(exc))
    for b in batches:
        obs.append(observe_batch(b))
    return obs


# ------------------------------------------------------------------ building segments


@st.composite
def record_lists(draw: Any, first_offset: int, *, v2: bool, timestamps: bool = True) -> list[Record]:
    n = draw(st.integers(1, 6))
    out = []
    offset = first_offset
    ts = draw(st.sampled_from((0, 1_700_000_000_000))) if timestamps else -1
    for _ in range(n):
        key = draw(st.none() | st.binary(max_size=12))
        value = draw(st.none() | st.binary(max_size=90))
        headers: tuple[Header, ...] = ()
        if v2 and draw(st.integers(0, 3)) == 0:
            headers = tuple(Header(draw(st.text(max_size=4)), draw(st.none() | st.binary(max_size=6)))
                            for _ in range(draw(st.integers(1, 2))))
        out.append(Record(offset, ts + draw(st.integers(0, 5000)) if timestamps else -1, key, value, headers))
        offset += draw(st.integers(1, 3))
    return out


def legacy_plain_wrapper(records: list[Record], magic: int, codec: Compression, lat: int | None) -> bytes:
    """A wrapper whose value holds its inner entries uncompressed (the codec bits set): damage
    goes in here, :func:`finish` compresses it afterwards."""
    base = records[0].offset
    inner_attr = 0x08 if lat is not None else 0
    inner = b"".join(
        encode_message(r.offset if magic == MAGIC_V0 else r.offset - base, magic, inner_attr,
                       -1 if magic == MAGIC_V0 else (lat if lat is not None else r.timestamp), r.key, r.value)
        for r in records)
    ts = -1 if magic == MAGIC_V0 else (lat if lat is not None else max(r.timestamp for r in records))
    return encode_message(records[-1].offset, magic, int(codec) | inner_attr, ts, None, inner)


@st.composite
def plain_batches(draw: Any) -> tuple[list[bytes], int]:
    """(batches, segment base offset): each batch in its plain form (see :func:`finish`)."""
    base = draw(st.sampled_from((0, 100, 2**31 - 4)))
    offset = base
    out = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(("v0", "v1", "v0w", "v1w", "v2")))
        if kind in ("v0", "v1"):
            magic = MAGIC_V0 if kind == "v0" else MAGIC_V1
            r = draw(record_lists(offset, v2=False, timestamps=magic == MAGIC_V1))[0]
            out.append(encode_message(r.offset, magic, 0, r.timestamp, r.key, r.value))
            offset = r.offset + 1
        elif kind in ("v0w", "v1w"):
            magic = MAGIC_V0 if kind == "v0w" else MAGIC_V1
            recs = draw(record_lists(offset, v2=False, timestamps=magic == MAGIC_V1))
            lat = draw(st.none() | st.just(1_800_000_000_000)) if magic == MAGIC_V1 else None
            out.append(legacy_plain_wrapper(recs, magic, draw(st.sampled_from(LEGACY_CODECS)), lat))
            offset = recs[-1].offset + 1
        else:
            recs = draw(record_lists(offset, v2=True))
            lat = draw(st.booleans())
            codec = draw(st.sampled_from(V2_CODECS))
            plain = build_record_batch(
                recs, timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
                max_timestamp=1_800_000_000_000 if lat else None, is_transactional=draw(st.booleans()),
                producer_id=draw(st.sampled_from((-1, 42))), partition_leader_epoch=draw(st.sampled_from((0, 5))))
            attributes = struct.unpack_from(">h", plain, 21)[0] | int(codec)
            out.append(plain[:21] + struct.pack(">h", attributes) + plain[23:])
            offset = recs[-1].offset + 1
    return out, base


def fix_inner_crcs(inner: bytes) -> bytes:
    """Recompute the CRC-32 of every inner entry whose frame fits (damage then reaches the
    structure checks behind the inner checksums)."""
    buf = bytearray(inner)
    pos = 0
    while pos + 17 <= len(buf):
        (size,) = _I32.unpack_from(buf, pos + 8)
        if size < 5 or pos + 12 + size > len(buf):
            break
        _U32.pack_into(buf, pos + 12, zlib.crc32(bytes(buf[pos + 16 : pos + 12 + size])))
        pos += 12 + size
    return bytes(buf)


def finish(plain: bytes, *, fix_inner: bool = False) -> bytes:
    """Compress a plain batch's value or records with the codec its attributes name, then fix
    its size and checksum (what a producer would have written); with ``fix_inner``, also the
    checksums of a wrapper's inner entries."""
    if len(plain) < 22:
        return plain
    magic = plain[16]
    if magic == 2 and len(plain) >= V2_HEADER:
        codec = plain[22] & 0x07
        records = plain[V2_HEADER:]
        if codec in (1, 2, 3, 4):
            records = codecs.compress(Compression(codec), records, 2)
        out = bytearray(plain[:V2_HEADER] + records)
        _I32.pack_into(out, 8, len(out) - 12)
        _U32.pack_into(out, 17, crc32c.crc32c(bytes(out[21:])))
        return bytes(out)
    if magic in (0, 1):
        codec = plain[17] & 0x07
        key_at = 26 if magic == 1 else 18
        if not codec or len(plain) < key_at + 8:
            return plain
        (klen,) = _I32.unpack_from(plain, key_at)
        value_at = key_at + 4 + max(klen, 0)
        if klen < -1 or value_at + 4 > len(plain):
            return plain
        value = fix_inner_crcs(plain[value_at + 4 :]) if fix_inner else plain[value_at + 4 :]
        if codec in (1, 2, 3):
            value = codecs.compress(Compression(codec), value, magic)
        out = bytearray(plain[:value_at] + _I32.pack(len(value)) + value)
        _I32.pack_into(out, 8, len(out) - 12)
        _U32.pack_into(out, 12, zlib.crc32(bytes(out[16:])))
        return bytes(out)
    return plain


def hot_fields(plain: bytes) -> list[tuple[int, str]]:
    """(position, kind) of the fields of a plain batch worth damaging: "varint" record fields
    of a v2 batch, "i32" / "i64" / "byte" fields of the batch header and of a wrapper's inner
    entries. Off-by-one values there keep the structure parseable and reach the checks that
    random damage rarely does (sizes that do not match their fields, offsets, counts)."""
    out: list[tuple[int, str]] = []
    magic = plain[16] if len(plain) > 16 else -1
    if magic == 2:
        out += [(8, "i32"), (23, "i32"), (27, "i64"), (35, "i64"), (57, "i32"), (0, "i64"), (21, "byte")]
        pos = V2_HEADER
        while pos < len(plain):
            start = pos
            try:
                length, pos = decode_varint(plain, pos)
                out.append((start, "varint"))
                rec_end = pos + length
                pos += 1  # attributes
                for _ in range(4):  # timestamp delta, offset delta, key length (+ key), value length (+ value)
                    out.append((pos, "varint"))
                    n, pos = decode_varint(plain, pos, 10)
                    if _ >= 2 and n > 0:
                        pos += n
                out.append((pos, "varint"))  # header count
            except KafkaFormatError:
                break
            pos = rec_end
    elif magic in (0, 1):
        key_at = 18 if magic == 0 else 26
        out += [(key_at, "i32"), (8, "i32")]
        if key_at + 4 <= len(plain):
            out.append((key_at + 4 + max(_I32.unpack_from(plain, key_at)[0], 0), "i32"))  # value length
        pos = (26 if magic == 1 else 18) + 8  # a plain wrapper's first inner entry (null key)
        while pos + 26 <= len(plain):
            out += [(pos, "i64"), (pos + 8, "i32"), (pos + 16, "byte"), (pos + 17, "byte")]
            key_at = pos + (26 if plain[pos + 16] == 1 else 18)
            if key_at + 4 <= len(plain):
                out.append((key_at, "i32"))
            (size,) = _I32.unpack_from(plain, pos + 8)
            if size < 14:
                break
            pos += 12 + size
    return out


def nudge(buf: bytearray, at: int, kind: str, delta: int) -> None:
    """Add ``delta`` to the field at ``at`` (a varint re-encoded in place, which may change its
    length: the bytes after it move)."""
    if kind == "varint":
        try:
            n, end = decode_varint(bytes(buf), at, 10)
        except KafkaFormatError:
            return
        buf[at:end] = encode_varint(n + delta)
    elif kind == "byte" and at < len(buf):
        buf[at] = (buf[at] + delta) % 256
    elif kind in ("i32", "i64"):
        width = 4 if kind == "i32" else 8
        if at + width <= len(buf):
            n = int.from_bytes(buf[at : at + width], "big", signed=True) + delta
            buf[at : at + width] = (n % (1 << (8 * width))).to_bytes(width, "big")


@st.composite
def damage(draw: Any, data: bytes, start: int = 0, hot: list[tuple[int, str]] | None = None) -> bytes:
    """1-3 changes at or after ``start``: a field of ``hot`` nudged by a small amount, bit
    flips, byte writes, a varint written over a field, a truncation."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        if len(buf) <= start:
            break
        op = draw(st.integers(0, 6))
        if hot and op < 3:
            at, kind = draw(st.sampled_from(hot))
            nudge(buf, at, kind, draw(st.sampled_from((-1, 1, -1, 1, 2, -64, 64, 2**31))))
            continue
        at = draw(st.integers(start, len(buf) - 1))
        if op == 3:
            buf[at] ^= 1 << draw(st.integers(0, 7))
        elif op == 4:
            buf[at] = draw(st.sampled_from((0x00, 0x01, 0x7F, 0x80, 0xFF)))
        elif op == 5:
            raw = encode_varint(draw(st.sampled_from((-2, -1, 0, 1, 64, 2**31 - 1, 2**34, -(2**63)))))
            if draw(st.booleans()):
                raw = b"\xff" * draw(st.integers(5, 11))  # over-long
            buf[at : at + len(raw)] = raw
        else:
            del buf[at + 1 :]
    return bytes(buf)


@st.composite
def segments(draw: Any) -> tuple[bytes, bytes, int]:
    """(damaged segment, the same segment undamaged, base offset)."""
    plain, base = draw(plain_batches())
    clean = b"".join(finish(p) for p in plain)
    mode = draw(st.integers(0, 3))
    if mode == 0:
        return clean, clean, base
    if mode in (1, 2):  # inside one batch, behind its codec (mode 2: keep its checksum valid)
        i = draw(st.integers(0, len(plain) - 1))
        hit = draw(damage(plain[i], start=17, hot=hot_fields(plain[i])))
        batch = finish(hit, fix_inner=draw(st.booleans())) if mode == 2 else finish(plain[i])[:17] + finish(hit)[17:]
        return b"".join([*map(finish, plain[:i]), batch, *map(finish, plain[i + 1 :])]), clean, base
    return draw(damage(clean)), clean, base


# ------------------------------------------------------------------ the tests


@SETTINGS
@given(segments())
def test_batches_read_the_same_on_both_cores(case: tuple[bytes, bytes, int]) -> None:
    data, _, _ = case
    on_both(lambda: observe_segment(data))


def _write_segment(d: Path, name: str, data: bytes, clean: bytes, base: int, interval: int,
                   index_damage: tuple[int, int, int] = (0, 0, 0)) -> Path:
    """The segment and indexes built for its undamaged form; ``index_damage`` = (which file:
    0 none, 1 offset index, 2 time index; entry; field change) moves one index field."""
    log = d / name
    log.write_bytes(data)
    offsets, times = build_indexes(iterate_batches(clean), base, interval)
    index, timeindex = bytearray(offsets.to_bytes()), bytearray(times.to_bytes())
    which, entry, change = index_damage
    target, width = (index, 8) if which == 1 else (timeindex, 12)
    if which and len(target) >= width:
        at = (entry % (len(target) // width)) * width + (change % 2) * (width - 4)  # offset/ts or position/offset
        nudge(target, at, "i32" if (which == 1 or change % 2) else "i64", (-1, 1, -40, 40)[change // 2])
    prefix = name[: -len(".log")]
    (d / (prefix + ".index")).write_bytes(bytes(index))
    (d / (prefix + ".timeindex")).write_bytes(bytes(timeindex))
    return log


@SETTINGS
@given(segments(), st.sampled_from((0, 40, 100000)), st.booleans(), st.integers(0, 3),
       st.sampled_from((3, 64, 1 << 20)), st.tuples(st.integers(0, 2), st.integers(0, 50), st.integers(0, 7)))
def test_validation_judges_the_same_on_both_cores(case: tuple[bytes, bytes, int], interval: int, deep: bool,
                                                  bounds: int, chunk: int, index_damage: tuple[int, int, int]) -> None:
    """validate_segment (the compiled core's SegmentWalker judges runs of batches, the Python
    one batch by batch): the same findings, counts and summary; indexes written for the
    undamaged segment, with small and large reader chunks."""
    data, clean, base = case
    with tempfile.TemporaryDirectory() as tmp:
        log = _write_segment(Path(tmp), f"{base:020d}.log", data, clean, base, interval, index_damage)
        last = max((b.last_offset for b in iterate_batches(clean)), default=base)
        next_base = (None, last + 1, last, base + 2)[bounds]  # last and base+2: offsets beyond the next segment
        epochs = [(0, base), (5, base + 3)] if bounds % 2 else None
        saved = FileRecords.__init__.__kwdefaults__
        FileRecords.__init__.__kwdefaults__ = {"chunk_size": chunk}
        try:
            def observe() -> tuple[dict[str, Any], dict[str, Any]]:
                res, summary = validate_segment(log, next_base_offset=next_base, deep=deep, leader_epochs=epochs)
                return res.model_dump(), summary.model_dump()

            on_both(observe)
        finally:
            FileRecords.__init__.__kwdefaults__ = saved


@settings(SETTINGS, max_examples=80)
@given(segments(), st.sampled_from((1, 2)), st.booleans(), st.sampled_from((3, 64, 1 << 20)),
       st.sampled_from((250, 1 << 30)), st.integers(0, 3))
def test_rewrite_and_digest_are_the_same_on_both_cores(case: tuple[bytes, bytes, int], target: int,
                                                       stamp: bool, chunk: int, segment_bytes: int,
                                                       bounds: int) -> None:
    """rewrite_segment (conversion, digests, index entries, output checksum, rolls of the
    output, leader epochs) and the read-back digest of its output: identical results or the
    identical error, with small and large reader chunks (the compiled core's walker takes runs
    of batches whole; the Python one goes batch by batch)."""
    data, clean, base = case
    last = max((b.last_offset for b in iterate_batches(clean)), default=base)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        name = f"{base:020d}.log"
        _write_segment(d, name, data, clean, base, 100000)

        def observe() -> Any:
            res = outcome(lambda: rewrite_segment(d / name, RewriteSpec(
                target_magic=target, index_interval_bytes=60, stamp_v0_ms=1_650_000_000_000 if stamp else None,
                max_message_bytes=400, segment_bytes=segment_bytes,
                leader_epochs=[(0, base), (7, base + 3)] if bounds % 2 else (),
                next_base_offset=(None, last + 1, last, None)[bounds])))
            out: list[Any] = [res[0], res[1].model_dump() if res[0] == "ok" else res[1]]
            for p in sorted(d.glob("*.cleaned")):
                out.append((p.name, p.read_bytes()))
                if p.name.endswith(".log.cleaned"):
                    out.append(outcome(lambda p=p: [x.model_dump() if hasattr(x, "model_dump") else x
                                                    for x in digest_log(p)]))
                p.unlink()
            out.append(outcome(lambda: [x.model_dump() if hasattr(x, "model_dump") else x
                                        for x in digest_log(d / name)]))
            return out

        saved = FileRecords.__init__.__kwdefaults__
        FileRecords.__init__.__kwdefaults__ = {"chunk_size": chunk}
        try:
            on_both(observe)
        finally:
            FileRecords.__init__.__kwdefaults__ = saved


@settings(SETTINGS, max_examples=60)
@given(st.binary(max_size=300), st.integers(0, 2**32 - 1))
def test_crcs_match_zlib_and_crc32c_with_and_without_cpu_instructions(data: bytes, seed: int) -> None:
    compiled = core.compiled
    assert compiled is not None
    try:
        for use_hw in (True, False):
            compiled.crc_features(use_hw)
            for at in range(min(len(data), 9)):
                assert compiled.crc32(data[at:], seed) == zlib.crc32(data[at:], seed)
                assert compiled.crc32c(data[at:], seed) == crc32c.crc32c(data[at:], seed)
    finally:
        compiled.crc_features(True)


def test_crcs_of_long_buffers_and_the_check_values() -> None:
    """Lengths around the 64-byte folding blocks of the PCLMUL path and the spec's check values
    (docs/formats.md §0.2)."""
    compiled = core.compiled
    assert compiled is not None
    assert compiled.crc32(b"123456789") == 0xCBF43926
    assert compiled.crc32c(b"123456789") == 0xE3069283
    blob = bytes(random.Random(32).getrandbits(8) for _ in range(80_000))
    # ... and around the CRC-32C lanes: 3 x 256 and 3 x 8192 bytes, joined by shift tables
    for n in (63, 64, 65, 79, 80, 127, 128, 129, 767, 768, 769, 775, 776, 1543, 1544, 4095, 4096, 10_240,
              24_575, 24_576, 24_577, 24_583, 25_344, 49_152, 49_920, 79_000):
        assert compiled.crc32(blob[:n]) == zlib.crc32(blob[:n])
        assert compiled.crc32(blob[3 : 3 + n], 77) == zlib.crc32(blob[3 : 3 + n], 77)
        assert compiled.crc32c(blob[1 : 1 + n]) == crc32c.crc32c(blob[1 : 1 + n])


def test_crc32_of_every_length_and_alignment_with_and_without_cpu_instructions() -> None:
    """Every length up to 300 bytes (and 1,024-1,040) at 16 alignments, chained from a seed: the
    folding path takes every length from 16 bytes up, its last partial block (1-15 bytes) folded
    with byte shuffles, so each remainder and each way into it (one lane or four) is covered."""
    compiled = core.compiled
    assert compiled is not None
    blob = bytes(random.Random(16).getrandbits(8) for _ in range(1_100))
    lengths = [*range(301), *range(1_024, 1_041)]
    try:
        for use_hw in (True, False):
            compiled.crc_features(use_hw)
            for at in range(16):
                for n in lengths:
                    data = blob[at : at + n]
                    assert compiled.crc32(data) == zlib.crc32(data), (use_hw, at, n)
                    assert compiled.crc32(data, 0x9E3779B9) == zlib.crc32(data, 0x9E3779B9), (use_hw, at, n)
    finally:
        compiled.crc_features(True)


def test_the_crc_counts_are_every_call_since_the_last_take() -> None:
    """What the benchmarks' proof floor is made of: each call's bytes, per function."""
    compiled = core.compiled
    assert compiled is not None
    compiled.take_crc_counts()
    compiled.crc32(b"x" * 100)
    compiled.crc32(b"x" * 100, 5)
    compiled.crc32c(b"y" * 50)
    compiled.crc32c(b"")
    names = ("crc32_bytes", "crc32_calls", "crc32c_bytes", "crc32c_calls")
    assert compiled.take_crc_counts() == dict(zip(names, (200, 2, 50, 2), strict=True))
    assert compiled.take_crc_counts() == dict.fromkeys(names, 0)
    # the walker's checks are counted too: a v0 message is CRC-32'd over its bytes from the magic on
    msg = encode_message(0, MAGIC_V0, 0, -1, b"k", b"v" * 20)
    compiled.take_crc_counts()
    walker = core.segment_walker(deep=True, base_offset=0, next_base_offset=None)
    assert walker.advance(msg, 0, 0) == len(msg)
    assert compiled.take_crc_counts()["crc32_bytes"] == len(msg) - 16  # offset, size and CRC are not covered


def test_crc_pieces_is_each_piece_checksummed_in_turn() -> None:
    compiled = core.compiled
    assert compiled is not None
    data = random.Random(3).randbytes(1_000)
    for piece in (1, 7, 300, 1_000, 5_000):
        want32 = want32c = 0
        for at in range(0, len(data), piece):
            want32 ^= zlib.crc32(data[at : at + piece])
            want32c ^= crc32c.crc32c(data[at : at + piece])
        assert compiled.crc_pieces(data, piece, False) == want32
        assert compiled.crc_pieces(memoryview(data), piece, True) == want32c
    with pytest.raises(ValueError, match="at least 1 byte"):
        compiled.crc_pieces(data, 0, False)


@st.composite
def damaged_records(draw: Any) -> tuple[bytes, int, int, int]:
    """(records region of a v2 batch, damaged through its hot fields, record count, base
    offset, base timestamp) or random bytes."""
    if draw(st.integers(0, 5)) == 0:
        return draw(st.binary(max_size=300)), draw(st.integers(-3, 5)), 0, 0
    recs = draw(record_lists(draw(st.sampled_from((0, 0, 0, 1000, 2**63 - 3))), v2=True))
    plain = build_record_batch(recs)
    hot = [(at - V2_HEADER, kind) for at, kind in hot_fields(plain) if at >= V2_HEADER]
    region = draw(damage(plain[V2_HEADER:], hot=hot)) if draw(st.integers(0, 4)) else plain[V2_HEADER:]
    return region, len(recs) + draw(st.sampled_from((0, 0, 0, -1, 1))), recs[0].offset, recs[0].timestamp


@st.composite
def damaged_inner(draw: Any) -> tuple[bytes, int, int]:
    """(inner entries of a wrapper, damaged through their hot fields, magic, wrapper offset)."""
    magic = draw(st.sampled_from((MAGIC_V0, MAGIC_V1)))
    recs = draw(record_lists(draw(st.sampled_from((0, 40))), v2=False, timestamps=magic == MAGIC_V1))
    plain = legacy_plain_wrapper(recs, magic, Compression.GZIP, None)
    start = (26 if magic == MAGIC_V1 else 18) + 8
    hot = [(at - start, kind) for at, kind in hot_fields(plain) if at >= start]
    inner = draw(damage(plain[start:], hot=hot)) if draw(st.integers(0, 4)) else plain[start:]
    if draw(st.booleans()):
        inner = fix_inner_crcs(inner)
    return inner, magic, draw(st.sampled_from((recs[-1].offset, 0, recs[-1].offset + 1, 2**63 - 1)))


@settings(SETTINGS, max_examples=400)
@given(damaged_records(), st.none() | st.just(99), damaged_inner(), st.none() | st.just(77))
def test_record_walk_kernels_never_accept_what_the_reference_refuses(
        records: tuple[bytes, int, int, int], lat: int | None, inner: tuple[bytes, int, int],
        inner_lat: int | None) -> None:
    """Kernel by kernel, on damaged records and inner messages: the compiled walk may refuse
    more than the reference (the careful parser then decides), never less, and what both
    accept is reported identically."""
    compiled = core.compiled
    assert compiled is not None
    data, count, base_offset, base_ts = records
    py_parts: list[bytes | memoryview] = []
    py_stamps: list[int] = []
    c_parts: list[bytes | memoryview] = []
    c_stamps: list[int] = []
    py = core._pycore.digest_v2(data, 0, len(data), count, base_offset, base_ts, lat, py_parts, py_stamps)
    c = compiled.digest_v2(data, 0, len(data), count, base_offset, base_ts, lat, c_parts, c_stamps)
    if py is None:
        assert c is None
    if c is not None:
        assert c == py and b"".join(c_parts) == b"".join(py_parts) and c_stamps == py_stamps
    assert compiled.check_v2(data, 0, len(data), count, base_offset, base_ts) == c
    data, magic, wrapper_offset = inner
    py_scan = core._pycore.scan_inner(data, magic, wrapper_offset, inner_lat)
    c_scan = compiled.scan_inner(data, magic, wrapper_offset, inner_lat)
    assert c_scan is None or c_scan == py_scan
    if py_scan is None:
        assert c_scan is None


def test_inner_scan_agrees_on_valid_wrappers_of_every_codec() -> None:
    recs = [Record(10, 1000, b"k", b"v"), Record(12, 1001, None, b""), Record(15, 1002, b"", None)]
    for magic in (MAGIC_V0, MAGIC_V1):
        for codec in LEGACY_CODECS:
            data = build_wrapper(recs, magic=magic, compression=codec)
            (b,) = iterate_batches(data)
            assert isinstance(b, LegacyBatch)
            scanned = on_both(lambda b=b: (lambda s: (bytes(s[0]), s[1]))(LegacyBatch(b._buf, 0, 0).scan()))
            assert [e[0] for e in scanned[1]] == [10, 12, 15]


# ------------------------------------------------------------------ every finding, deterministically


def _v2(first: int, n: int = 2, **kw: Any) -> bytes:
    return build_record_batch([Record(first + i, 1000 + first + i, b"k%d" % i, b"v" * i) for i in range(n)], **kw)


def _v0(offset: int) -> bytes:
    return encode_message(offset, 0, 0, -1, b"k", b"v%d" % offset)


def _refix(batch: bytes) -> bytes:
    """Fix the CRC of a damaged batch (the damage then reaches the structure checks)."""
    buf = bytearray(batch)
    if batch[16] == 2:
        _U32.pack_into(buf, 17, crc32c.crc32c(bytes(buf[21:])))
    else:
        _U32.pack_into(buf, 12, zlib.crc32(bytes(buf[16:])))
    return bytes(buf)


def _with(batch: bytes, at: int, raw: bytes, *, fix: bool = True) -> bytes:
    out = batch[:at] + raw + batch[at + len(raw) :]
    return _refix(out) if fix else out


_WRAPPER = build_wrapper([Record(4, 9, b"a", b"b"), Record(6, 9, None, b"c")], magic=MAGIC_V1,
                         compression=Compression.GZIP)
_WRAPPER_V0 = build_wrapper([Record(4, -1, b"a", b"b"), Record(6, -1, None, b"c")], magic=MAGIC_V0,
                            compression=Compression.SNAPPY)
# (name, segment, validate_segment keyword arguments, index change (entry, +position, +offset),
#  time index change (entry, +timestamp), the finding code expected)
SCENARIOS: list[tuple[str, bytes, dict[str, Any], tuple[int, int, int] | None, tuple[int, int] | None, str | None]] = [
    ("valid mix", _v0(0) + _v0(1) + _WRAPPER + _v2(7) + encode_message(9, 1, 0, 5, None, b"x"), {}, None, None,
     None),
    ("valid v0 wrapper", _v0(0) + _WRAPPER_V0 + _v0(7), {}, None, None, None),
    ("valid, shallow", _v0(0) + _v0(1) + _WRAPPER + _v2(7), {"deep": False}, None, None, None),
    ("offset order", _v2(0) + _v2(1), {}, None, None, "OFFSET_ORDER"),
    ("offset order, shallow wrapper", _v0(0) + _v0(6) + _WRAPPER_V0, {"deep": False}, None, None, "OFFSET_ORDER"),
    ("record offsets outside the batch", _v2(0) + _v2(2, last_offset_delta=0), {}, None, None, "RECORD_OFFSET"),
    ("offset beyond int32 of the base", _v2(0) + _v2(2**31 + 3), {}, None, None, "OFFSET_OVERFLOW"),
    ("offset beyond the next segment", _v2(0) + _v2(2), {"next_base_offset": 3}, None, None,
     "OFFSET_BEYOND_SEGMENT"),
    ("leader epoch", _v2(0) + _v2(2, partition_leader_epoch=4), {"leader_epochs": [(-1, 0), (3, 2)]}, None, None,
     "LEADER_EPOCH_MISMATCH"),
    # a batch without an epoch (-1) under a checkpoint entry is no conflict (LogSegment.recover)
    ("leader epoch -1", _v2(0) + _v2(2, partition_leader_epoch=-1), {"leader_epochs": [(0, 0)]}, None, None, None),
    ("index entry inside a batch", _v2(0) + _v2(2) + _v2(4), {}, (0, 1, 0), None, "INDEX_POSITION"),
    ("index offset below the batch", _v2(0) + _v2(2) + _v2(4), {}, (0, 0, -2), None, "INDEX_OFFSET"),
    ("index entry of a multi-batch append", _v2(0) + _v2(2) + _v2(4), {}, (0, 0, -1), None, "INDEX_MULTI_BATCH"),
    ("time index ahead", _v2(0) + _v2(2) + _v2(4), {}, None, (-1, 1), "TIMEINDEX_AHEAD"),
    ("v2 crc", _v2(0) + _with(_v2(2), 70, b"\x00", fix=False), {}, None, None, "CORRUPT_BATCH"),
    ("v2 record length", _v2(0) + _with(_v2(2), 61, b"\x02"), {}, None, None, "CORRUPT_BATCH"),
    ("v2 negative count", _v2(0) + _with(_v2(2), 57, b"\xff\xff\xff\xff"), {}, None, None, "CORRUPT_BATCH"),
    ("v0 crc", _v0(0) + _with(_v0(1), 27, b"\x00", fix=False), {}, None, None, "CORRUPT_BATCH"),
    ("v0 key overruns", _v0(0) + _with(_v0(1), 18, b"\x00\x00\x00\x09"), {}, None, None, "CORRUPT_BATCH"),
    ("v0 bytes after the value", _v0(0) + _with(_v0(1), 23, b"\x00\x00\x00\x01"), {}, None, None, "CORRUPT_BATCH"),
    ("v1 null wrapper value", _v0(0) + encode_message(1, 1, 1, 5, None, None), {}, None, None, "CORRUPT_BATCH"),
    ("v1 null wrapper value, shallow", _v0(0) + encode_message(1, 1, 1, 5, None, None), {"deep": False}, None, None,
     "CORRUPT_BATCH"),
    ("v0 wrapper offset", _v0(0) + _with(_WRAPPER_V0, 7, b"\x07"), {}, None, None, "CORRUPT_BATCH"),
    ("v1 wrapper inner crc", _v0(0) + finish(_with(legacy_plain_wrapper(
        [Record(4, 9, b"a", b"b"), Record(6, 9, None, b"c")], MAGIC_V1, Compression.LZ4, None), 60, b"\x01",
        fix=False)), {}, None, None, "CORRUPT_BATCH"),
    ("trailing bytes", _v2(0) + _v2(2)[:30], {}, None, None, "TRAILING_BYTES"),
]


@pytest.mark.parametrize("chunk", [5, 1 << 20])
@pytest.mark.parametrize(("name", "data", "kwargs", "index_change", "time_change", "code"), SCENARIOS,
                         ids=[s[0] for s in SCENARIOS])
def test_each_finding_is_the_same_on_both_cores(tmp_path, monkeypatch, chunk, name, data, kwargs, index_change,
                                                time_change, code) -> None:
    """Every rule the segment walker must not skip, with the compiled walker shown to do its
    part: it judges the valid batches before the finding, the Python loop the rest."""
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(data)
    builder = IndexBuilder(0, 0)  # indexes of the prefix a broker could have written: valid, increasing
    last = -1
    for b in iterate_batches(data):
        if not b.is_valid() or b.position != builder.valid_bytes or b.last_offset >= 2**31 or (
                builder.valid_bytes and b.last_offset <= last):
            break
        builder.append(b.position, b.size_in_bytes, b.last_offset, b.max_timestamp)
        last = b.last_offset
    offsets, times = builder.finish()
    index = bytearray(offsets.to_bytes())
    if index_change:
        entry, dpos, doff = index_change
        nudge(index, entry * 8 + 4, "i32", dpos) if dpos else None
        nudge(index, entry * 8, "i32", doff) if doff else None
    timeindex = bytearray(times.to_bytes())
    if time_change:
        entry, dts = time_change
        nudge(timeindex, (entry % (len(timeindex) // 12)) * 12, "i64", dts)
    (tmp_path / "00000000000000000000.index").write_bytes(bytes(index))
    (tmp_path / "00000000000000000000.timeindex").write_bytes(bytes(timeindex))
    walkers: list[Any] = []
    make = core.segment_walker

    def spy(**kw: Any) -> Any:
        walker = make(**kw)
        walkers.append(walker)
        return walker

    monkeypatch.setattr(core, "segment_walker", spy)
    monkeypatch.setattr(FileRecords.__init__, "__kwdefaults__", {"chunk_size": chunk})

    def observe() -> tuple[dict[str, Any], dict[str, Any]]:
        res, summary = validate_segment(log, **kwargs)
        return res.model_dump(), summary.model_dump()

    result, _ = on_both(observe)
    codes = [f["code"] for f in result["findings"] if f["code"] not in ("INDEX_MISSING", "TIMEINDEX_MISSING")]
    assert code in codes if code else not codes
    compiled_walker = walkers[-1]
    assert compiled_walker is not None and compiled_walker.batches >= 1  # the fast path did run


# ------------------------------------------------------------------ the rewrite's bulk path, deterministically


def _v1(offset: int, ts: int, *, lat: bool = False) -> bytes:
    return encode_message(offset, MAGIC_V1, 0x08 if lat else 0, ts, b"k%d" % offset, b"v" * (offset % 7))


def _v0_run(first: int, n: int) -> bytes:
    return b"".join(encode_message(o, MAGIC_V0, 0, -1, None if o % 5 == 0 else b"k", b"x" * (o % 40))
                    for o in range(first, first + n))


def _v1_wrapper(first: int, n: int, codec: Compression) -> bytes:
    return build_wrapper([Record(o, 5000 + o, b"k", b"w%d" % o) for o in range(first, first + n)], magic=MAGIC_V1,
                         compression=codec)


# (name, segment bytes, base offset, RewriteSpec keywords, least batches the walker must take)
REWRITES: list[tuple[str, bytes, int, dict[str, Any], int]] = [
    ("v0 run to v1", _v0_run(0, 60), 0, {"target_magic": 1}, 50),
    ("v0 run to v1, stamped", _v0_run(0, 60), 0, {"target_magic": 1, "stamp_v0_ms": 1_650_000_000_000}, 50),
    ("v0 run to v2 with epochs", _v0_run(10, 60), 10,
     {"target_magic": 2, "leader_epochs": [(0, 0), (4, 30), (9, 55)]}, 50),
    ("v0 run to v2, stamped", _v0_run(0, 40), 0, {"target_magic": 2, "stamp_v0_ms": 1_650_000_000_000}, 30),
    ("v1 messages (CreateTime, LogAppendTime) to v2",
     b"".join(_v1(o, 1000 + (o * 37) % 11, lat=o % 3 == 0) for o in range(50)), 0, {"target_magic": 2}, 40),
    ("v1 wrappers and v2 batches copied for v1",
     _v0_run(0, 10) + _v1_wrapper(10, 4, Compression.GZIP) + _v2(14, 3) + _v0_run(17, 10), 0,
     {"target_magic": 1}, 12),
    ("wrappers to convert interleaved", _v0_run(0, 20) + build_wrapper(
        [Record(o, -1, None, b"z") for o in range(20, 25)], magic=MAGIC_V0, compression=Compression.SNAPPY)
     + _v0_run(25, 20), 0, {"target_magic": 2}, 30),
    ("v0 wrappers of every codec to v1",
     b"".join(build_wrapper([Record(o, -1, b"k", b"w%d" % o) for o in range(i * 4, i * 4 + 4)], magic=MAGIC_V0,
                            compression=LEGACY_CODECS[i % 3]) for i in range(12)), 0, {"target_magic": 1}, 10),
    ("v0 wrappers to v2, stamped",
     b"".join(build_wrapper([Record(o, -1, None, b"w") for o in range(i * 3, i * 3 + 3)], magic=MAGIC_V0,
                            compression=LEGACY_CODECS[i % 3]) for i in range(9)), 0,
     {"target_magic": 2, "stamp_v0_ms": 1_650_000_000_000, "leader_epochs": [(2, 0), (3, 10)]}, 8),
    ("v1 wrappers (CreateTime, LogAppendTime) to v2",
     b"".join(_v1_wrapper(i * 4, 4, LEGACY_CODECS[i % 3]) for i in range(6))
     + legacy_plain_wrapper([Record(o, 7, b"k", b"l") for o in range(24, 28)], MAGIC_V1, Compression.NONE, 9)
     + build_wrapper([Record(o, 0, b"k", b"m") for o in range(28, 31)], magic=MAGIC_V1, compression=Compression.LZ4,
                     timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=1_700_000_000_000),
     0, {"target_magic": 2}, 7),
    ("a wrapper above max.message.bytes is split by the loop",
     _v0_run(0, 10) + build_wrapper([Record(o, -1, b"k", random.Random(o).randbytes(300)) for o in range(10, 20)],
                                    magic=MAGIC_V0, compression=Compression.GZIP) + _v0_run(20, 10), 0,
     {"target_magic": 2, "max_message_bytes": 1500}, 18),
    ("rolls on segment.bytes", _v0_run(0, 120), 0, {"target_magic": 2, "segment_bytes": 2000}, 80),
    # beyond int32 of the input's base the walker leaves the batches to the loop (validation's
    # OFFSET_OVERFLOW, which the rewrite tolerates by splitting)
    ("rolls on int32 relative offsets", _v0_run(0, 20) + _v0_run(2**31 + 5, 20), 0, {"target_magic": 1}, 19),
    ("offsets up to the next segment", _v0_run(0, 30), 0, {"target_magic": 1, "next_base_offset": 20}, 15),
    ("corrupt message in a run", _v0_run(0, 20) + _v0(20)[:-1] + b"?" + _v0_run(21, 5), 0,  # its CRC fails
     {"target_magic": 2}, 15),
    ("index entries every few batches", _v0_run(0, 80) + _v2(80, 5) + _v0_run(85, 40), 0,
     {"target_magic": 2, "index_interval_bytes": 90}, 100),
]


@pytest.mark.parametrize("chunk", [64, 1 << 20])
@pytest.mark.parametrize(("name", "data", "base", "spec", "least"), REWRITES, ids=[r[0] for r in REWRITES])
def test_the_rewrite_walker_does_its_part(tmp_path, monkeypatch, chunk, name, data, base, spec, least) -> None:
    """rewrite_segment on both cores gives the same output segments, indexes, digests and
    errors; and on the compiled core the segment walker converted runs of batches itself."""
    log = tmp_path / f"{base:020d}.log"
    log.write_bytes(bytes(data))
    walkers: list[Any] = []
    make = core.segment_walker

    def spy(**kw: Any) -> Any:
        walker = make(**kw)
        if kw.get("target_magic"):
            walkers.append(walker)
        return walker

    monkeypatch.setattr(core, "segment_walker", spy)
    monkeypatch.setattr(FileRecords.__init__, "__kwdefaults__", {"chunk_size": chunk})

    def observe() -> list[Any]:
        res = outcome(lambda: rewrite_segment(log, RewriteSpec(**spec)))
        out: list[Any] = [res[0], res[1].model_dump() if res[0] == "ok" else res[1]]
        for p in sorted(tmp_path.glob("*.cleaned")):
            out.append((p.name, p.read_bytes()))
            p.unlink()
        return out

    seen = on_both(observe)
    assert walkers and walkers[-1].batches >= least, name
    if name.startswith("rolls"):
        assert len([x for x in seen[2:] if x[0].endswith(".log.cleaned")]) >= 2
    if name.startswith("corrupt"):
        assert seen[0] == "error"
    if "split" in name:
        assert seen[1]["split_batches"] >= 1
    if name.startswith("index entries"):
        assert len([x for x in seen if isinstance(x, tuple) and x[0].endswith(".index.cleaned")][0][1]) >= 5 * 8


# ------------------------------------------------------------------ snappy and LZ4 framing


@st.composite
def framing_payloads(draw: Any) -> bytes:
    """Empty, small, one block, several blocks; compressible and not."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=2000))
    return draw(st.binary(min_size=1, max_size=40)) * draw(st.sampled_from((1, 50, 900, 1700, 4000)))


@settings(SETTINGS, max_examples=300)
@given(framing_payloads(), st.sampled_from((Compression.SNAPPY, Compression.LZ4)), st.sampled_from((0, 1, 2)),
       st.data())
def test_snappy_and_lz4_framing_is_the_same_on_both_cores(payload: bytes, codec: Compression, magic: int,
                                                          data: st.DataObject) -> None:
    """The compiled core frames one-block snappy and LZ4 streams in C (around cramjam's raw
    block calls); the Python framing does the rest: the same frames, the same decompressed
    bytes, and on damaged frames the same error, message and position."""
    frame = on_both(lambda: codecs.compress(codec, payload, magic))
    with core.use(core.COMPILED):
        assert codecs.snappy_decompress is core.compiled.snappy_decompress  # the C framing is the one tested
    hit = data.draw(damage(frame, hot=[(0, "byte"), (7, "byte"), (16, "i32"), (20, "byte")]))
    for candidate in (frame, hit):
        seen = on_both(lambda c=candidate: outcome(lambda: codecs.decompress(codec, c, magic)))
        if candidate is frame:
            assert seen == ("ok", payload)


# ------------------------------------------------------------------ the upgrade's survey during validation


@SETTINGS
@given(segments(), st.sampled_from((1, 2)), st.booleans())
def test_the_upgrade_survey_is_the_same_on_both_cores(case: tuple[bytes, bytes, int], target: int,
                                                      deep: bool) -> None:
    """The prepare step's survey (bytes per format, records of the batches already in the
    target format) gathered while validating: by the loop batch by batch on the Python core,
    by the segment walker for the runs it judges on the compiled core (count_from)."""
    from migration.migrations.upgrade.plan import _SegmentSurvey

    data, clean, base = case
    with tempfile.TemporaryDirectory() as tmp:
        log = _write_segment(Path(tmp), f"{base:020d}.log", data, clean, base, 100000)

        def observe() -> tuple[Any, ...]:
            survey = _SegmentSurvey(target, estimate_growth=False)
            res, summary = validate_segment(log, deep=deep, on_batch=survey)
            return survey.bytes_by_magic, survey.records, res.model_dump(), summary.model_dump()

        on_both(observe)


def test_the_survey_lets_the_walker_judge(tmp_path, monkeypatch) -> None:
    """With a survey the compiled walker still takes the runs (it once stood aside for any
    on_batch), counting the records of target-format batches, wrappers included, until a batch
    below the target: the segment is then rewritten (its unit counts), so the survey has no
    count and the walker decompresses no wrapper for one after that batch."""
    from migration.migrations.upgrade.plan import _SegmentSurvey

    walkers: list[Any] = []
    make = core.segment_walker
    monkeypatch.setattr(core, "segment_walker", lambda **kw: walkers.append(make(**kw)) or walkers[-1])
    inflated: list[int] = []
    with core.use(core.COMPILED):  # first: selecting a core installs its gzip calls
        gunzip = codecs.gzip_decompress
        monkeypatch.setattr(codecs, "gzip_decompress", lambda data: inflated.append(len(data)) or gunzip(data))
        _survey_rounds(tmp_path, walkers, inflated, _SegmentSurvey)


def _survey_rounds(tmp_path: Path, walkers: list[Any], inflated: list[int], survey_type: Any) -> None:
    for deep in (False, True):
        in_target = tmp_path / "00000000000000000000.log"
        in_target.write_bytes(_v1_wrapper(0, 4, Compression.GZIP) + _v2(4, 3) + _v2(7, 2))
        del inflated[:]
        survey = survey_type(1, estimate_growth=False)
        validate_segment(in_target, deep=deep, on_batch=survey)
        assert walkers[-1].batches == 3 and walkers[-1].counted == 4 + 3 + 2 and len(inflated) == 1
        assert survey.records == 9 and set(survey.bytes_by_magic) == {"v1", "v2"}
        mixed = tmp_path / "00000000000000000010.log"
        mixed.write_bytes(_v0_run(10, 10) + _v1_wrapper(20, 4, Compression.GZIP) + _v2(24, 3) + _v0_run(27, 5))
        del inflated[:]
        survey = survey_type(1, estimate_growth=False)
        validate_segment(mixed, deep=deep, on_batch=survey)
        assert walkers[-1].batches == 17 and walkers[-1].counted == 0
        assert survey.records is None and set(survey.bytes_by_magic) == {"v0", "v1", "v2"}
        assert len(inflated) == (1 if deep else 0)  # deep validation decompresses it anyway


# ------------------------------------------------------------------ the walker's state after odd batches


def _odd_offset_segments() -> list[tuple[str, bytes]]:
    def msg(off: int) -> bytes:
        return encode_message(off, MAGIC_V0, 0, -1, b"k", b"v" * 10)

    inner = msg(5) + msg(6)
    # A v0 wrapper at offset 0 holding offsets 5 and 6 (the "last inner offset is the wrapper's"
    # rule is not applied at offset 0): its last offset is below its first.
    wrapper = encode_message(0, MAGIC_V0, int(Compression.GZIP), -1, None,
                             codecs.compress(Compression.GZIP, inner, MAGIC_V0))
    top = 2**63 - 1
    first = build_record_batch([Record(0, 1000, b"k", b"v")])
    after = build_record_batch([Record(top - 3, 1000, b"k", b"v")])
    return [
        ("a wrapper whose last offset is below its first", msg(0) + msg(3) + wrapper + msg(2) + msg(4)),
        *[(f"a v2 batch ending beyond int64 (timestamp {ts})", first + build_record_batch(
            [Record(top - 5, ts, b"k", b"v")], last_offset_delta=10) + after) for ts in (-1, 1000)],
    ]


@pytest.mark.parametrize("target", [1, 2])
@pytest.mark.parametrize(("name", "data"), _odd_offset_segments(), ids=[n for n, _ in _odd_offset_segments()])
def test_the_walker_keeps_the_loops_offset_state(tmp_path, name, data, target) -> None:
    """After a batch whose last offset is below its first, or one that ends beyond int64, the
    walker must carry the offset the loop carries (the larger one), or stand aside: the same
    error, outputs and findings on both cores."""
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(data)

    def observe() -> list[Any]:
        res = outcome(lambda: rewrite_segment(log, RewriteSpec(target_magic=target)))
        out: list[Any] = [res[0], res[1].model_dump() if res[0] == "ok" else res[1]]
        for p in sorted(tmp_path.glob("*.cleaned")):
            out.append((p.name, p.read_bytes()))
            p.unlink()
        found, _ = validate_segment(log)
        out.append(sorted((f.code, f.message) for f in found.findings))
        return out

    seen = on_both(observe)
    assert seen[0] == "error"  # offsets out of order: the rewrite refuses, on both cores


def test_feed_digest_of_a_walker_that_does_not_digest_is_refused() -> None:
    """A validation walker (no digest duty) collects no digest bytes: asking for them is an
    error, not a read of a buffer it never filled (in a child process: it crashed once)."""
    code = (
        "from migration.formats import core\n"
        "from migration.formats.model import Record\n"
        "from migration.formats.record_batch import build_record_batch\n"
        "seg = b''.join(build_record_batch([Record(i * 100 + j, 1000, b'k', b'v') for j in range(100)])"
        " for i in range(50))\n"
        "with core.use('compiled'):\n"
        "    w = core.segment_walker(deep=True, base_offset=0, next_base_offset=None)\n"
        "assert w.advance(seg, 0, 0) == len(seg)\n"
        "try:\n"
        "    w.feed_digest(None)\n"
        "except ValueError as exc:\n"
        "    print('refused:', exc)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith("refused:")


def _legacy_segment() -> bytes:
    """v0 wrappers of every legacy codec between plain v0 messages: the walker converts all of it."""
    parts = []
    offset = 0
    for i, codec in enumerate([Compression.GZIP, Compression.SNAPPY, Compression.LZ4] * 4):
        records = [Record(offset + j, -1, b"k%d" % j, b"value %d " % (i * 10 + j) * 20) for j in range(30)]
        parts.append(build_wrapper(records, magic=MAGIC_V0, compression=codec))
        offset += 30
        parts.append(encode_message(offset, MAGIC_V0, 0, -1, None, b"plain %d" % i))
        offset += 1
    return b"".join(parts)


def _rewriting_walker() -> Any:
    with core.use(core.COMPILED):
        w = core.segment_walker(deep=True, base_offset=0, next_base_offset=None, walker_class=REWRITE_WALKER,
                                digest=True, target_magic=2,
                                stamp_v0=None, segment_bytes=1 << 30, max_message_bytes=1 << 20,
                                index_interval_bytes=4096, output_leader_epochs=())
    w.open_output(0, *IndexBuilder(0, 4096).state())
    return w


class _Recorder:
    """What ``feed_packed`` and an output sink are given: a real digest, the output copied while
    the call lasts, and every view it was handed."""

    def __init__(self) -> None:
        self.digester = RecordDigester()
        self.output = b""
        self.kept: list[memoryview] = []

    def feed_packed(self, content: Any, *rest: Any) -> None:
        self.kept.append(content)
        self.digester.feed_packed(content, *rest)

    def sink(self, run: tuple[Any, ...]) -> None:
        self.kept.append(run[0])
        self.output += bytes(run[0])


@pytest.mark.skipif(core.COMPILED not in core.available(), reason="the compiled record core is not built")
def test_feed_digest_and_write_output_give_the_python_cores_results_without_keeping_a_view(tmp_path: Path) -> None:
    """The walker hands its digest and output bytes over in place (no copy): the digest and the
    converted segment are the Python core's, and a view kept past the call is released, so it
    can never show bytes the walker writes later."""
    seg = _legacy_segment()
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(seg)
    with core.use(core.PYTHON):
        expected_digest, _ = digest_log(log)
        rr = rewrite_segment(log, RewriteSpec(target_magic=2))
    expected_output = (tmp_path / (rr.outputs[0].files[0] + ".cleaned")).read_bytes()
    walker = _rewriting_walker()
    assert walker.advance(seg, 0, 0) == len(seg)
    rec = _Recorder()
    assert walker.feed_digest(rec) is True
    walker.write_output(rec.sink)
    assert rec.digester.result() == expected_digest
    assert rec.output == expected_output and len(rr.outputs) == 1
    assert rr.outputs[0].batches == 24  # every wrapper and message became a v2 batch
    for view in rec.kept:
        with pytest.raises(ValueError):
            bytes(view)
    assert walker.feed_digest(rec) is False  # nothing left to hand over
