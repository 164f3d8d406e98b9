"""The seed corpus of the fuzz targets, built with the project's own encoders.

``tests/fuzz/corpus/<target>/`` holds these files (committed, a few KB each); run
``.venv/bin/python tests/fuzz/seeds.py`` to rebuild them after a format change (saved
``crash-*`` files are kept). Everything is deterministic: no clock, fixed random seeds.
"""

from __future__ import annotations

import random
import struct
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from migration.formats import compression as codecs
from migration.formats.checkpoint_files import EpochEntry, LeaderEpochCheckpointFile, OffsetCheckpointFile
from migration.formats.checkpoint_files import TopicPartitionOffset as TPO
from migration.formats.clean_shutdown import CleanShutdownFile
from migration.formats.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    encode_control_key,
    encode_control_value,
    kraft_version_value,
    snapshot_footer_value,
    snapshot_header_value,
)
from migration.formats.file_records import iterate_batches
from migration.formats.index_builder import build_indexes
from migration.formats.kafka_uuid import Uuid
from migration.formats.kraft_checkpoint import build_checkpoint
from migration.formats.legacy import build_messages, build_wrapper
from migration.formats.message_schema import default_registry
from migration.formats.meta_properties import MetaProperties
from migration.formats.metadata_records import encode_metadata_record
from migration.formats.model import Compression, Header, Record, TimestampType
from migration.formats.offset_index import OffsetIndex
from migration.formats.partition_metadata import PartitionMetadataFile
from migration.formats.producer_snapshot import EMPTY_SNAPSHOT, ProducerSnapshot, ProducerSnapshotEntry
from migration.formats.record_batch import build_record_batch
from migration.formats.time_index import TimeIndex
from migration.formats.transaction_index import AbortedTxn, TransactionIndex

T0 = 1_700_000_000_000  # a fixed "now", in ms
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
TOPIC_ID = Uuid(0x1234_5678_9ABC_DEF0, 0x0FED_CBA9_8765_4321)
DIR_ID = Uuid(0x0A0B_0C0D_0E0F_1011, 0x1213_1415_1617_1819)
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def _records(first: int, n: int, *, headers: bool = False, nulls: bool = False, step: int = 1) -> list[Record]:
    out = []
    for i in range(n):
        key = None if nulls and i % 3 == 0 else b"key-%d" % i
        value = None if nulls and i % 4 == 1 else b'{"id":%d,"page":"/checkout","pad":"abcabcabc"}' % i
        hs = (Header("trace", b"t-%d" % i), Header("empty", None)) if headers and i % 2 == 0 else ()
        out.append(Record(first + i * step, T0 + 10 * i, key, value, hs))
    return out


# --------------------------------------------------------------------------- segments


def v2_segments() -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    out["v2-plain.log"] = b"".join((
        build_record_batch(_records(0, 3, headers=True), partition_leader_epoch=0),
        build_record_batch(_records(3, 2, nulls=True), partition_leader_epoch=1,
                           timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=T0 + 999),
        build_record_batch(_records(5, 2, step=3), partition_leader_epoch=1),  # compacted: holes
        build_record_batch([], base_offset=9, last_offset_delta=2, partition_leader_epoch=1),  # empty batch
        build_record_batch(_records(12, 1), delete_horizon_ms=T0 + 5000, partition_leader_epoch=1),
    ))
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        out[f"v2-{codec.label}.log"] = b"".join((
            build_record_batch(_records(0, 4, headers=True), compression=codec, partition_leader_epoch=2),
            build_record_batch(_records(4, 2, nulls=True), compression=codec, partition_leader_epoch=2),
        ))
    commit = EndTransactionMarker(ControlRecordType.COMMIT, 5)
    abort = EndTransactionMarker(ControlRecordType.ABORT, 5)
    out["v2-txn.log"] = b"".join((
        build_record_batch(_records(0, 2), producer_id=7, producer_epoch=1, base_sequence=0, is_transactional=True,
                           partition_leader_epoch=3),
        build_record_batch([Record(2, T0 + 50, commit.encode_key(), commit.encode_value())], producer_id=7,
                           producer_epoch=1, is_transactional=True, is_control=True, partition_leader_epoch=3),
        build_record_batch(_records(3, 2), producer_id=8, producer_epoch=0, base_sequence=2**31 - 2,
                           is_transactional=True, compression=Compression.LZ4, partition_leader_epoch=3),
        build_record_batch([Record(5, T0 + 60, abort.encode_key(), abort.encode_value())], producer_id=8,
                           producer_epoch=0, is_transactional=True, is_control=True, partition_leader_epoch=3),
    ))
    lc = encode_control_value(ControlRecordType.LEADER_CHANGE, {
        "Version": 0, "LeaderId": 9, "Voters": [{"VoterId": 9}], "GrantingVoters": [{"VoterId": 9}]})
    values = [Record(1 + i, T0, None, v) for i, v in enumerate(metadata_values()[:6])]
    out["v2-kraft.log"] = b"".join((
        build_record_batch([Record(0, T0, encode_control_key(ControlRecordType.LEADER_CHANGE), lc)], is_control=True,
                           partition_leader_epoch=1),
        build_record_batch(values, partition_leader_epoch=1, base_timestamp=T0, max_timestamp=T0),
    ))
    return out


def legacy_segments() -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    out["v0-plain.log"] = build_messages(_records(0, 4, nulls=True), magic=0)
    out["v1-plain.log"] = build_messages(_records(0, 4, nulls=True), magic=1)
    for magic in (0, 1):
        for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4):
            out[f"v{magic}-{codec.label}.log"] = b"".join((
                build_wrapper(_records(0, 3), magic=magic, compression=codec),
                build_wrapper(_records(3, 3, nulls=True, step=2), magic=magic, compression=codec),
            ))
    out["v1-lat-gzip.log"] = build_wrapper(_records(0, 3), magic=1, compression=Compression.GZIP,
                                           timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=T0 + 7)
    out["mixed.log"] = b"".join((
        build_messages(_records(0, 2), magic=0),
        build_wrapper(_records(2, 2), magic=1, compression=Compression.SNAPPY),
        build_record_batch(_records(4, 2), compression=Compression.GZIP),
    ))
    return out


_ENTRY_PREFIX = struct.Struct(">qi")


def _unpack_legacy(entry: bytes) -> bytes:
    """A wrapper whose value is stored decompressed (the ``*_inner`` targets' input form)."""
    batch = next(iterate_batches(entry))
    raw_value = batch.value
    assert raw_value is not None
    inner = codecs.decompress(batch.compression, raw_value, batch.magic)
    head = entry[12 : 12 + (14 if batch.magic == 1 else 6)]  # crc, magic, attributes, [timestamp]
    body = head + b"\xff\xff\xff\xff" + struct.pack(">i", len(inner)) + inner
    return _ENTRY_PREFIX.pack(batch.offset, len(body)) + body


def legacy_inner() -> dict[str, bytes]:
    out = {}
    for name, data in legacy_segments().items():
        if "plain" in name or name == "mixed.log":
            continue
        out[name.replace(".log", ".unpacked")] = _unpack_legacy(next(iter(iterate_batches(data))).raw_bytes().tobytes())
    return out


def _unpack_v2(batch_bytes: bytes) -> bytes:
    batch = next(iterate_batches(batch_bytes))
    payload = batch.records_payload()
    header = bytearray(batch_bytes[:61])
    struct.pack_into(">i", header, 8, 49 + len(payload))
    return bytes(header) + payload


def v2_inner() -> dict[str, bytes]:
    out = {}
    for name, data in v2_segments().items():
        for i, b in enumerate(iterate_batches(data)):
            out[f"{name.removesuffix('.log')}-{i}.unpacked"] = _unpack_v2(b.raw_bytes().tobytes())
    return out


def compression() -> dict[str, bytes]:
    text = b"".join(b'{"id":%d,"user":%d,"page":"/search?q=kafka"}\n' % (i, i * 7919 % 1000) for i in range(40))
    noise = random.Random(3).randbytes(300)
    big = (text * 30)[:40_000]  # more than one snappy block, compresses to a few KB
    out = {
        "gzip.v1": codecs.gzip_compress(text),
        "gzip-two-members.v1": codecs.gzip_compress(text[:500]) + codecs.gzip_compress(text[500:]),
        "snappy.v1": codecs.snappy_compress(text),
        "snappy-blocks.v1": codecs.snappy_compress(big),
        "snappy-raw.v1": codecs.snappy_compress(text)[20:],  # raw snappy, no xerial header
        "lz4.v0": codecs.lz4_compress(text, 0),
        "lz4.v1": codecs.lz4_compress(text, 1),
        "lz4-stored.v2": codecs.lz4_compress(noise, 2),  # a block stored uncompressed
        "lz4-blocks.v2": codecs.lz4_compress(bytes(70_000), 2),
        "zstd.v2": codecs.zstd_compress(text),
    }
    assert codecs.snappy_decompress(out["snappy-raw.v1"]) == text
    return out


# --------------------------------------------------------------------------- indexes, snapshots


def _indexes(data: bytes, base: int, interval: int) -> tuple[OffsetIndex, TimeIndex]:
    return build_indexes(list(iterate_batches(data)), base, interval)


def offset_index() -> dict[str, bytes]:
    seg = v2_segments()["v2-plain.log"]
    oi, _ = _indexes(seg, 0, 0)
    legacy = legacy_segments()["v1-gzip.log"]
    oi2, _ = _indexes(legacy, 0, 0)
    shifted = OffsetIndex(100, [(100 + o - 0, p) for o, p in oi.entries])
    return {
        "base-0.index": oi.to_bytes(),
        "base-0-legacy.index": oi2.to_bytes(),
        "base-100.index": shifted.to_bytes(),
        "base-0-preallocated.index": oi.to_bytes() + bytes(64),  # an active segment's zero tail
    }


def time_index() -> dict[str, bytes]:
    seg = v2_segments()["v2-plain.log"]
    _, ti = _indexes(seg, 0, 0)
    shifted = TimeIndex(100, [(t, 100 + o) for t, o in ti.entries])
    return {
        "base-0.timeindex": ti.to_bytes(),
        "base-100.timeindex": shifted.to_bytes(),
        "base-0-preallocated.timeindex": ti.to_bytes() + bytes(48),
    }


def txn_index() -> dict[str, bytes]:
    idx = TransactionIndex(0, [AbortedTxn(7, 0, 5, 0), AbortedTxn(8, 3, 9, 3), AbortedTxn(2**40, 10, 12, 10)])
    return {"base-0.txnindex": idx.to_bytes(), "base-5.txnindex": TransactionIndex(5, idx.entries[1:]).to_bytes()}


def producer_snapshot() -> dict[str, bytes]:
    two = ProducerSnapshot([
        ProducerSnapshotEntry(7, 1, 1, 1, 1, T0, -1, -1),
        ProducerSnapshotEntry(8, 0, 2**31 - 1, 4, 1, T0 + 60, 5, 3),
    ])
    return {"empty.snapshot": EMPTY_SNAPSHOT, "two-producers.snapshot": two.to_bytes()}


# --------------------------------------------------------------------------- text files


def checkpoint_files() -> dict[str, bytes]:
    return {
        "leader-epoch-checkpoint": LeaderEpochCheckpointFile([EpochEntry(0, 0), EpochEntry(3, 120),
                                                              EpochEntry(4, 2**40)]).to_bytes(),
        "leader-epoch-checkpoint-empty": LeaderEpochCheckpointFile([]).to_bytes(),
        "recovery-point-offset-checkpoint": OffsetCheckpointFile([TPO("orders", 0, 120), TPO("orders", 1, 7),
                                                                  TPO("__consumer_offsets", 49, 0)]).to_bytes(),
        "replication-offset-checkpoint": b"0\r\n2\r\nclicks 0 5\r\nclicks\t1   -1\r\n",
    }


def meta_properties() -> dict[str, bytes]:
    v0 = MetaProperties(0, CLUSTER_ID, 3, None).to_bytes(now=NOW)
    v1 = MetaProperties(1, CLUSTER_ID, 9, DIR_ID).to_bytes(now=NOW, sort_keys=True)
    escapes = (b"# comment\n! other comment\n  version : 1\nnode.id=4\\\n  2\ncluster.id  \\u004dkU3OEVBNTcw\\\r\n"
               b"   NTJENDM2Qg\nkey\\ with\\=escapes=\\t\\u00e9\xe9\\\\\n")
    return {"v0.properties": v0, "v1.properties": v1, "escapes.properties": escapes}


def partition_metadata() -> dict[str, bytes]:
    text = PartitionMetadataFile(TOPIC_ID).to_bytes()
    return {"basic.metadata": text, "crlf.metadata": text.replace(b"\n", b"\r\n") + b"\r\nignored line"}


def clean_shutdown() -> dict[str, bytes]:
    return {"epoch.json": CleanShutdownFile(42).to_bytes(), "legacy-empty.json": b"",
            "null-epoch.json": b'{"version":0,"brokerEpoch":null,"extra":[1,{"a":"b"}]}'}


# --------------------------------------------------------------------------- KRaft


def metadata_values() -> list[bytes]:
    rng = random.Random(11)
    return [
        encode_metadata_record("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": 21}),
        encode_metadata_record("UserScramCredentialRecord", 0, {
            "Name": "admin", "Mechanism": 2, "Salt": rng.randbytes(24), "StoredKey": rng.randbytes(64),
            "ServerKey": rng.randbytes(64), "Iterations": 8192}),
        encode_metadata_record("RegisterBrokerRecord", 3, {
            "BrokerId": 1, "IncarnationId": DIR_ID.to_string(), "BrokerEpoch": 101,
            "EndPoints": [{"Name": "PLAINTEXT", "Host": "broker-1", "Port": 9092, "SecurityProtocol": 0}],
            "Features": [{"Name": "metadata.version", "MinSupportedVersion": 1, "MaxSupportedVersion": 21}],
            "Rack": "r1", "Fenced": True, "LogDirs": [DIR_ID.to_string()]}),
        encode_metadata_record("TopicRecord", 0, {"Name": "orders", "TopicId": TOPIC_ID.to_string()}),
        encode_metadata_record("PartitionRecord", 2, {
            "PartitionId": 0, "TopicId": TOPIC_ID.to_string(), "Replicas": [1, 2], "Isr": [1, 2],
            "RemovingReplicas": [], "AddingReplicas": [], "Leader": 1, "LeaderEpoch": 1, "PartitionEpoch": 1,
            "Directories": [DIR_ID.to_string(), DIR_ID.to_string()], "EligibleLeaderReplicas": [2],
            "LastKnownElr": [1]}),
        encode_metadata_record("PartitionChangeRecord", 2, {
            "PartitionId": 0, "TopicId": TOPIC_ID.to_string(), "Isr": [1], "Leader": 1, "LeaderRecoveryState": 0}),
        encode_metadata_record("ConfigRecord", 0, {"ResourceType": 2, "ResourceName": "orders",
                                                   "Name": "cleanup.policy", "Value": "compact"}),
        encode_metadata_record("ClientQuotaRecord", 0, {
            "Entity": [{"EntityType": "user", "EntityName": None}], "Key": "producer_byte_rate",
            "Value": 1024.5, "Remove": False}),
    ]


def metadata_records() -> dict[str, bytes]:
    out = {}
    reg = default_registry()
    for schema in sorted(reg.metadata_by_api_key.values(), key=lambda s: s.api_key or 0):
        for version in schema.versions:
            out[f"{schema.name}-v{version}.default"] = encode_metadata_record(
                schema.name, version, schema.defaults(version))
    for i, value in enumerate(metadata_values()):
        out[f"realistic-{i}.record"] = value
    return out


def _control(ctype: ControlRecordType, value: bytes) -> bytes:
    key = encode_control_key(ctype)
    return bytes([len(key)]) + key + value


def control_records() -> dict[str, bytes]:
    voters = encode_control_value(ControlRecordType.KRAFT_VOTERS, {"Version": 0, "Voters": [{
        "VoterId": 9, "VoterDirectoryId": DIR_ID.to_string(),
        "Endpoints": [{"Name": "CONTROLLER", "Host": "localhost", "Port": 9093}],
        "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}}]})
    lc = encode_control_value(ControlRecordType.LEADER_CHANGE, {
        "Version": 1, "LeaderId": 9, "Voters": [{"VoterId": 9}], "GrantingVoters": [{"VoterId": 9}]}, version=1)
    return {
        "abort.control": _control(ControlRecordType.ABORT, EndTransactionMarker(ControlRecordType.ABORT, 3)
                                  .encode_value()),
        "commit.control": _control(ControlRecordType.COMMIT, EndTransactionMarker(ControlRecordType.COMMIT, 3)
                                   .encode_value()),
        "leader-change.control": _control(ControlRecordType.LEADER_CHANGE, lc),
        "snapshot-header.control": _control(ControlRecordType.SNAPSHOT_HEADER, snapshot_header_value(T0)),
        "snapshot-footer.control": _control(ControlRecordType.SNAPSHOT_FOOTER, snapshot_footer_value()),
        "kraft-version.control": _control(ControlRecordType.KRAFT_VERSION, kraft_version_value(1)),
        "voters.control": _control(ControlRecordType.KRAFT_VOTERS, voters),
    }


def kraft_checkpoint() -> dict[str, bytes]:
    values = metadata_values()
    voters = control_records()["voters.control"][5:]
    return {
        "bootstrap.checkpoint": build_checkpoint(values[:2], header_timestamp=0, append_time=T0),
        "00000000000000000000-0000000000.checkpoint": build_checkpoint(
            [], header_timestamp=T0, append_time=T0,
            kraft_records=[(ControlRecordType.KRAFT_VERSION, kraft_version_value(1)),
                           (ControlRecordType.KRAFT_VOTERS, voters)]),
        "00000000000000000042-0000000003.checkpoint": build_checkpoint(
            values, header_timestamp=T0, append_time=T0 + 1, epoch=3, max_batch_bytes=400),
    }


# --------------------------------------------------------------------------- a log dir


def _partition(files: dict[str, bytes], d: str, segments: dict[int, bytes], *, aborted: list[AbortedTxn] = (),
               epochs: list[EpochEntry] = (), snapshot: bytes | None = None) -> None:
    for base, data in segments.items():
        oi, ti = _indexes(data, base, 0)
        files[f"{d}/{base:020d}.log"] = data
        files[f"{d}/{base:020d}.index"] = oi.to_bytes()
        files[f"{d}/{base:020d}.timeindex"] = ti.to_bytes()
    first = min(segments)
    if aborted:
        files[f"{d}/{first:020d}.txnindex"] = TransactionIndex(first, aborted).to_bytes()
    if snapshot is not None:
        files[f"{d}/{max(segments):020d}.snapshot"] = snapshot
    files[f"{d}/leader-epoch-checkpoint"] = LeaderEpochCheckpointFile(epochs).to_bytes()
    files[f"{d}/partition.metadata"] = PartitionMetadataFile(TOPIC_ID).to_bytes()


def log_dir() -> dict[str, bytes]:
    """A small broker log dir (relative path -> bytes): v2 and legacy partitions, the KRaft
    metadata partition and the root files. Paths use ``/``; the corpus names use ``+``."""
    files: dict[str, bytes] = {
        "meta.properties": MetaProperties(0, CLUSTER_ID, 1, None).to_bytes(now=NOW),
        "recovery-point-offset-checkpoint": OffsetCheckpointFile([TPO("orders", 0, 6), TPO("legacy", 0, 6)])
        .to_bytes(),
        "bootstrap.checkpoint": kraft_checkpoint()["bootstrap.checkpoint"],
    }
    txn = v2_segments()["v2-txn.log"]
    gz = build_record_batch(_records(6, 3, headers=True), compression=Compression.GZIP, partition_leader_epoch=4)
    _partition(files, "orders-0", {0: txn, 6: gz}, aborted=[AbortedTxn(8, 3, 5, 3)],
               epochs=[EpochEntry(3, 0), EpochEntry(4, 6)],
               snapshot=ProducerSnapshot([ProducerSnapshotEntry(7, 1, 1, 2, 0, T0 + 50, 5, -1)]).to_bytes())
    legacy = legacy_segments()
    _partition(files, "legacy-0", {0: legacy["v1-lz4.log"]})
    kraft = v2_segments()["v2-kraft.log"]
    _partition(files, "__cluster_metadata-0", {0: kraft}, epochs=[EpochEntry(1, 0)])
    files["__cluster_metadata-0/00000000000000000000-0000000000.checkpoint"] = kraft_checkpoint()[
        "00000000000000000000-0000000000.checkpoint"]
    return files


def validate() -> dict[str, bytes]:
    return {path.replace("/", "+"): data for path, data in log_dir().items()}


CORPUS: dict[str, Callable[[], dict[str, bytes]]] = {
    "segment_v2": v2_segments,
    "segment_legacy": legacy_segments,
    "v2_inner": v2_inner,
    "legacy_inner": legacy_inner,
    "compression": compression,
    "offset_index": offset_index,
    "time_index": time_index,
    "txn_index": txn_index,
    "producer_snapshot": producer_snapshot,
    "checkpoint_files": checkpoint_files,
    "meta_properties": meta_properties,
    "partition_metadata": partition_metadata,
    "clean_shutdown": clean_shutdown,
    "metadata_records": metadata_records,
    "control_records": control_records,
    "kraft_checkpoint": kraft_checkpoint,
    "validate": validate,
}


def write_corpus(root: Path) -> None:
    """Rewrite every seed file (other files, e.g. saved failures, are left alone)."""
    for target, build in CORPUS.items():
        d = root / target
        d.mkdir(parents=True, exist_ok=True)
        for name, data in build().items():
            assert len(data) <= 8192, f"{target}/{name}: {len(data)} bytes, keep seeds small"
            (d / name).write_bytes(data)


if __name__ == "__main__":
    write_corpus(Path(__file__).resolve().parent / "corpus")
    sys.exit(0)
