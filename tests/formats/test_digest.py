"""The record digest: BLAKE3 by default, BLAKE2b-256 still computable for what was persisted
before, both over the documented canonical bytes (pinned here, computed independently), equal
for the same records in v0, v1 and v2, and never compared across algorithms."""

from __future__ import annotations

import hashlib
import struct

import blake3
import pytest

from migration.formats import core
from migration.formats.digest import (
    CURRENT_ALGORITHM,
    RECORD_DIGEST_VERSION,
    DigestAlgorithm,
    RecordDigest,
    RecordDigester,
    digest_records,
)
from migration.formats.file_records import iterate_batches
from migration.formats.legacy import build_messages, build_wrapper
from migration.formats.model import MAGIC_V0, MAGIC_V1, Compression, Header, Record, TimestampType
from migration.formats.record_batch import build_record_batch

RECORDS = [
    Record(0, 1_700_000_000_000, None, b"v0"),
    Record(1, 1_700_000_000_001, b"", b""),
    Record(5, 1_700_000_000_007, b"k", None),
    Record(6, -1, b"key", b"value", (Header("h", b"x"), Header("n\u00e9", None))),
]
# Pinned: any change of the canonical bytes or of a hash shows here (and must bump the layout
# version or add an algorithm, since these hex strings are persisted in journals and reports).
BLAKE3_CONTENT = "3095a0d27903111ada5a7ca54151d98efa3065f538ae6d3a5b2fb9cf697c83b5"
BLAKE3_FULL = "9d508003073ba9c100330aacc2718c407250d59978ba7a53c5e0e8a099d0b218"
# What every kmigrate before BLAKE3 wrote for these records (hashlib.blake2b, 32 bytes).
BLAKE2B_CONTENT = "16cb3e448e2ef3460b7d9103f6bbed0b189cc21c6ece8d1b1503aea7bcf36f48"
BLAKE2B_FULL = "9adcf91ef617c251c9ffa7da5808b5a7c6efbd9708ccf05f46ae7526df18006b"

CORES = [core.PYTHON] + ([core.COMPILED] if core.compiled is not None else [])


def _length_and_bytes(b: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if b is None else struct.pack(">i", len(b)) + b


def canonical(r: Record) -> bytes:
    """The module docstring's layout, written out again: offset int64 | header count int32 |
    (key length, utf-8 key, value length or -1, value)* | key length or -1 | key | value
    length or -1 | value."""
    out = struct.pack(">qi", r.offset, len(r.headers))
    for h in r.headers:
        out += _length_and_bytes(h.key.encode()) + _length_and_bytes(h.value)
    return out + _length_and_bytes(r.key) + _length_and_bytes(r.value)


def _streams(records: list[Record]) -> tuple[bytes, bytes]:
    return (b"".join(canonical(r) for r in records),
            b"".join(struct.pack(">q", r.timestamp) for r in records))


def test_blake3_is_the_default_over_the_canonical_bytes() -> None:
    content, stamps = _streams(RECORDS)
    c, t = blake3.blake3(content), blake3.blake3(stamps)
    expected_full = blake3.blake3(c.digest() + t.digest()).hexdigest()
    assert (c.hexdigest(), expected_full) == (BLAKE3_CONTENT, BLAKE3_FULL)
    d = digest_records(RECORDS)
    assert CURRENT_ALGORITHM is DigestAlgorithm.BLAKE3 and RecordDigester().algorithm is DigestAlgorithm.BLAKE3
    assert (d.content, d.full) == (BLAKE3_CONTENT, BLAKE3_FULL)
    assert (d.algorithm, d.version) == (DigestAlgorithm.BLAKE3, RECORD_DIGEST_VERSION) and RECORD_DIGEST_VERSION == 1
    assert (d.records, d.first_offset, d.last_offset) == (4, 0, 6)


def test_blake2b_is_still_computable_and_gives_the_legacy_digest() -> None:
    content, stamps = _streams(RECORDS)
    c, t = hashlib.blake2b(content, digest_size=32), hashlib.blake2b(stamps, digest_size=32)
    assert c.hexdigest() == BLAKE2B_CONTENT
    assert hashlib.blake2b(c.digest() + t.digest(), digest_size=32).hexdigest() == BLAKE2B_FULL
    d = digest_records(RECORDS, DigestAlgorithm.BLAKE2B)
    assert (d.content, d.full, d.algorithm, d.version) == (BLAKE2B_CONTENT, BLAKE2B_FULL, DigestAlgorithm.BLAKE2B, 1)
    assert RecordDigester("blake2b-256").algorithm is DigestAlgorithm.BLAKE2B
    with pytest.raises(ValueError):
        RecordDigester("sha1")


@pytest.mark.parametrize("algorithm", list(DigestAlgorithm))
def test_the_digest_does_not_depend_on_how_the_stream_is_cut(algorithm: DigestAlgorithm) -> None:
    whole = digest_records(RECORDS, algorithm)
    d = RecordDigester(algorithm)
    for r in RECORDS:
        d.update([r])
    assert d.result() == whole
    d = RecordDigester(algorithm)
    content, _ = _streams(RECORDS[:2])
    d.feed(content[:5], [], 0, 0)  # no records: ignored
    d.feed(content, [r.timestamp for r in RECORDS[:2]], 0, 1)
    d.update(RECORDS[2:])
    assert d.result() == whole


def _encodings(records: list[Record]) -> dict[str, bytes]:
    """The same records as v0 and v1 messages, v0 and v1 gzip wrappers, v2 batches (plain and
    zstd, and split in two batches)."""
    return {
        "v0": build_messages(records, magic=MAGIC_V0),
        "v1": build_messages(records, magic=MAGIC_V1),
        "v0-gzip": build_wrapper(records, magic=MAGIC_V0, compression=Compression.GZIP),
        "v1-gzip": build_wrapper(records, magic=MAGIC_V1, compression=Compression.GZIP,
                                 timestamp_type=TimestampType.CREATE_TIME),
        "v2": build_record_batch(records),
        "v2-zstd": build_record_batch(records, compression=Compression.ZSTD),
        "v2-two-batches": build_record_batch(records[:1]) + build_record_batch(records[1:]),
    }


def _digest_segment(data: bytes, algorithm: DigestAlgorithm) -> RecordDigest:
    d = RecordDigester(algorithm)
    for b in iterate_batches(data, strict=True):
        b.ensure_valid()
        d.add_batch(b)
    return d.result()


@pytest.mark.parametrize("core_name", CORES)
@pytest.mark.parametrize("algorithm", list(DigestAlgorithm))
def test_v0_v1_v2_of_the_same_records_digest_equal(core_name: str, algorithm: DigestAlgorithm) -> None:
    # Legacy messages hold no headers, v0 no timestamps: records without either digest equal
    # in full; with timestamps, v1 and v2 in full and v0 by content.
    plain = [Record(r.offset, -1, r.key, r.value) for r in RECORDS]
    stamped = [Record(r.offset, 1_700_000_000_000 + i, r.key, r.value) for i, r in enumerate(RECORDS)]
    with core.use(core_name):
        expected = digest_records(plain, algorithm)
        for name, data in _encodings(plain).items():
            assert _digest_segment(data, algorithm) == expected, name
        expected = digest_records(stamped, algorithm)
        for name, data in _encodings(stamped).items():
            got = _digest_segment(data, algorithm)
            if name.startswith("v0"):
                assert got.full != expected.full and got.matches(expected, timestamps=False), name
            else:
                assert got == expected, name


def test_matches_refuses_to_compare_across_algorithms() -> None:
    new = digest_records(RECORDS)
    old = digest_records(RECORDS, DigestAlgorithm.BLAKE2B)
    assert new.matches(digest_records(RECORDS)) and old.matches(digest_records(RECORDS, "blake2b-256"))
    assert not new.matches(digest_records(RECORDS[:3]))
    for a, b in ((new, old), (old, new)):
        assert not a.comparable(b)
        with pytest.raises(ValueError, match="different algorithms or layouts: blake.* with blake"):
            a.matches(b)
        with pytest.raises(ValueError):
            a.matches(b, timestamps=False)
    # The way to check records against a stored digest: recompute with its algorithm.
    again = RecordDigester.like(old)
    again.update(RECORDS)
    assert again.result().matches(old)
    future = old.model_copy(update={"version": 2})
    with pytest.raises(ValueError, match="layout"):
        old.matches(future)
    with pytest.raises(ValueError, match="layout version 2"):
        RecordDigester.like(future)


def test_a_digest_persisted_before_blake3_reads_as_blake2b() -> None:
    stored = {"records": 4, "first_offset": 0, "last_offset": 6, "content": BLAKE2B_CONTENT, "full": BLAKE2B_FULL}
    old = RecordDigest.model_validate(stored)
    assert (old.algorithm, old.version) == (DigestAlgorithm.BLAKE2B, 1)
    assert old == digest_records(RECORDS, DigestAlgorithm.BLAKE2B)
    new = digest_records(RECORDS)
    dumped = new.model_dump(mode="json")
    assert dumped["algorithm"] == "blake3-256" and dumped["version"] == 1
    assert RecordDigest.model_validate_json(new.model_dump_json()) == new
