"""A realistic legacy cluster on disk, for demos, tests and benchmarks.

What a cluster that grew up on 0.9/0.10/2.x and was moved to KRaft leaves behind:
- ``legacy-v0``: message format v0, uncompressed messages (null keys and values among them)
  and wrappers with every legacy codec, gzip, snappy and lz4 (broken frame checksum);
- ``clicks-v1``: v1, CreateTime messages and wrappers;
- ``audit-lat``: v1 LogAppendTime wrappers, some rebuilt by the broker (inner messages carry
  the append time) and some validated in place (inner messages keep their create times);
  no ``partition.metadata`` and no topic record in the metadata log: its topic id is unknown;
- ``users-compacted``: a compacted topic, offset holes inside v0 and v1 wrappers, tombstones;
- ``orders-upgraded``: lived through the 0.10 upgrade, v0 segments then v1 (one mixed);
- ``events-v2``: v2 batches with every codec and headers, leader epochs 0 then 1, written
  before 2.8: no segment-aligned producer snapshots;
- ``payments-idempotent``: v2 batches of idempotent producers and of a transactional
  producer (a committed and an aborted transaction, control batches, a transaction index).
Broker log dirs carry meta.properties, clean-shutdown markers, offset checkpoints, leader-
epoch checkpoints; one broker keeps a stray ``bootstrap.checkpoint`` copy. A controller's
metadata log dir holds ``bootstrap.checkpoint`` (metadata.version and SCRAM credentials),
a pre-KIP-1170 zero checkpoint (KRaft control records only: a dynamic quorum) and a
metadata log segment. Everything is deterministic for a given seed.
"""

from __future__ import annotations

import json
import os
import random
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from migration.formats import names
from migration.formats.checkpoint_files import (
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    TopicPartitionOffset,
)
from migration.formats.clean_shutdown import CleanShutdownFile
from migration.formats.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    encode_control_key,
    encode_control_value,
    kraft_version_value,
)
from migration.formats.file_records import iterate_batches
from migration.formats.index_builder import build_indexes
from migration.formats.kafka_uuid import METADATA_TOPIC_ID, Uuid
from migration.formats.kraft_checkpoint import build_checkpoint, write_bootstrap_checkpoint, write_checkpoint_file
from migration.formats.legacy import build_wrapper, encode_message
from migration.formats.meta_properties import MetaProperties
from migration.formats.metadata_records import encode_metadata_record
from migration.formats.model import Compression, Header, Record, TimestampType
from migration.formats.partition_metadata import PartitionMetadataFile
from migration.formats.producer_snapshot import ProducerSnapshot
from migration.formats.record_batch import build_record_batch
from migration.formats.transaction_index import AbortedTxn, TransactionIndex
from migration.orchestration.cluster import ClusterDescription, NodeSpec, TopicExclusion

T0_MS = 1_488_326_400_000  # 2017-03-01: v1 era timestamps
V0_MTIME_S = 1_451_606_400  # 2016-01-01: v0 era file times
CONTROLLER_ID = 3000
METADATA_VERSION_3_9_IV0 = 21
CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"

LEGACY_CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
V2_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


@dataclass
class TopicSpec:
    name: str
    partitions: int
    kind: str
    compacted: bool = False
    has_partition_metadata: bool = True
    in_metadata_log: bool = True


TOPICS = [
    TopicSpec("legacy-v0", 3, "v0", has_partition_metadata=False),
    TopicSpec("clicks-v1", 2, "v1"),
    TopicSpec("audit-lat", 1, "v1-lat", has_partition_metadata=False, in_metadata_log=False),
    TopicSpec("users-compacted", 1, "compacted", compacted=True),
    TopicSpec("orders-upgraded", 2, "upgraded"),
    TopicSpec("events-v2", 2, "v2"),
    TopicSpec("payments-idempotent", 1, "idempotent"),
]


@dataclass
class SampleCluster:
    root: Path
    description_path: Path
    description: ClusterDescription
    broker_log_dirs: dict[int, Path]
    controller_dir: Path
    topic_ids: dict[str, str]
    records: dict[str, int] = field(default_factory=dict)  # "topic-partition" -> record count

    @property
    def log_dirs(self) -> list[Path]:
        return list(self.broker_log_dirs.values())


class _Values:
    """Compressible, varied payloads (JSON-like text), cheap to produce in bulk."""

    PAGES = ["/", "/cart", "/checkout", "/search?q=kafka", "/product/42", "/help", "/account"]

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.pad = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz     ") for _ in range(4096))

    def value(self, i: int) -> bytes:
        r = self.rng
        size = r.choice((40, 80, 160, 320, 640))
        head = (f'{{"id":{i},"user":{r.randrange(100000)},"page":"{r.choice(self.PAGES)}",'
                f'"ms":{r.randrange(1000)},"pad":"').encode()
        start = r.randrange(len(self.pad) - size)
        return head + self.pad[start : start + size] + b'"}'

    def key(self, i: int) -> bytes:
        return b"user-%d" % self.rng.randrange(max(10, i // 3 + 1))


class PartitionWriter:
    """Appends batches, rolls segments at ``segment_bytes``, writes indexes as recovery builds
    them, trims them as a clean shutdown leaves them, and backdates files."""

    def __init__(self, path: Path, segment_bytes: int) -> None:
        self.path = path
        self.segment_bytes = segment_bytes
        path.mkdir(parents=True, exist_ok=True)
        self.segments: list[tuple[int, Path, int]] = []  # base offset, log path, size
        self._file: BinaryIO | None = None
        self._size = 0
        self._base = 0
        self._max_ts = -1
        self._mtime_s = V0_MTIME_S
        self.next_offset = 0
        self.epochs: list[EpochEntry] = []
        self.aborted: dict[int, list[AbortedTxn]] = {}

    def append(self, data: bytes, *, first_offset: int, next_offset: int, mtime_s: int,
               leader_epoch: int | None = None) -> None:
        if self._file is None or (self._size and self._size + len(data) > self.segment_bytes):
            self._roll(first_offset)
        assert self._file is not None
        self._file.write(data)
        self._size += len(data)
        self._mtime_s = max(self._mtime_s, mtime_s)
        self.next_offset = next_offset
        if leader_epoch is not None and leader_epoch >= 0 and (not self.epochs or leader_epoch >
                                                                 self.epochs[-1].epoch):
            self.epochs.append(EpochEntry(leader_epoch, first_offset))

    def add_aborted(self, txn: AbortedTxn) -> None:
        self.aborted.setdefault(self._base, []).append(txn)

    def _roll(self, base: int) -> None:
        self._close_segment()
        self._base = base
        log = self.path / names.log_file_name(base)
        self._file = open(log, "wb")  # noqa: SIM115 - kept open across appends
        self._size = 0

    def _close_segment(self) -> None:
        if self._file is None:
            return
        self._file.close()
        log = self.path / names.log_file_name(self._base)
        batches = list(iterate_batches(log.read_bytes()))
        oi, ti = build_indexes(batches, self._base)
        oi.write(self.path / names.index_file_name(self._base))
        ti.write(self.path / names.time_index_file_name(self._base))
        files = [log, self.path / names.index_file_name(self._base), self.path / names.time_index_file_name(self._base)]
        if self._base in self.aborted:
            txn = TransactionIndex(self._base)
            for a in self.aborted[self._base]:
                txn.append(a)
            txn.write(self.path / names.txn_index_file_name(self._base))
            files.append(self.path / names.txn_index_file_name(self._base))
        for f in files:
            os.utime(f, (self._mtime_s, self._mtime_s))
        self.segments.append((self._base, log, self._size))
        self._file = None

    def close(self) -> None:
        self._close_segment()
        LeaderEpochCheckpointFile(self.epochs).write(self.path / names.LEADER_EPOCH_CHECKPOINT_FILE)


def _legacy_stream(kind: str, n: int, rng: random.Random, vals: _Values, start_ms: int) -> Iterator[
        tuple[bytes, int, int, int]]:
    """Yield (entry bytes, first offset, next offset, mtime seconds) for a v0/v1 partition."""
    offset = 0
    ts = start_ms
    magic_at = {"v0": lambda o: 0, "v1": lambda o: 1, "v1-lat": lambda o: 1, "compacted": lambda o: 0 if o < n // 2
                else 1, "upgraded": lambda o: 0 if o < n * 2 // 3 else 1}[kind]
    while offset < n:
        magic = magic_at(offset)
        ts += rng.randrange(1, 5000)
        mtime = V0_MTIME_S + offset * 30 if magic == 0 else (ts // 1000)
        choice = rng.random()
        if kind == "v1-lat":
            k = rng.randrange(3, 12)
            recs = [Record(offset + i, ts + i, vals.key(offset + i), vals.value(offset + i)) for i in range(k)]
            codec = rng.choice(LEGACY_CODECS)
            append_time = ts + 10_000
            if rng.random() < 0.5:
                data = build_wrapper(recs, magic=1, compression=codec, timestamp_type=TimestampType.LOG_APPEND_TIME,
                                     log_append_time=append_time)
            else:  # validated in place: only the wrapper's attributes, timestamp and CRC change
                buf = bytearray(build_wrapper(recs, magic=1, compression=codec))
                buf[17] |= 0x08
                struct.pack_into(">q", buf, 18, append_time)
                struct.pack_into(">I", buf, 12, zlib.crc32(memoryview(buf)[16:]))
                data = bytes(buf)
            yield data, offset, offset + k, append_time // 1000
            offset += k
            continue
        if kind == "compacted":
            # survivors of compaction: holes between retained offsets, tombstones, wrappers
            k = rng.randrange(2, 8)
            recs = []
            o = offset
            for _ in range(k):
                o += rng.randrange(1, 4)
                value = None if rng.random() < 0.2 else vals.value(o)
                recs.append(Record(o, ts if magic else -1, b"user-%d" % rng.randrange(50), value))
            data = build_wrapper(recs, magic=magic, compression=rng.choice(LEGACY_CODECS))
            yield data, recs[0].offset, recs[-1].offset + 1, mtime
            offset = recs[-1].offset + 1
            continue
        if choice < 0.55:
            key = None if rng.random() < 0.3 else vals.key(offset)
            value = None if rng.random() < 0.05 else vals.value(offset)
            yield encode_message(offset, magic, 0, ts if magic else -1, key, value), offset, offset + 1, mtime
            offset += 1
        else:
            k = rng.randrange(2, 20)
            recs = [Record(offset + i, (ts + i) if magic else -1, None if rng.random() < 0.2 else vals.key(offset + i),
                           vals.value(offset + i)) for i in range(k)]
            data = build_wrapper(recs, magic=magic, compression=rng.choice(LEGACY_CODECS))
            yield data, offset, offset + k, mtime
            offset += k


def _write_v2_partition(w: PartitionWriter, kind: str, n: int, rng: random.Random, vals: _Values) -> None:
    offset = 0
    ts = T0_MS + 400 * 86_400_000  # 2018
    producers = {1000: [0, 0], 1001: [2, 0]}  # producer id -> [epoch, next sequence]
    txn_pid, txn_epoch = 2000, 5
    epoch = 0
    while offset < n:
        if offset > n // 2:
            epoch = 1  # a leader change half way
        ts += rng.randrange(1, 5000)
        k = rng.randrange(1, 15)
        recs = [Record(offset + i, ts + i, vals.key(offset + i), vals.value(offset + i),
                       (Header("trace", b"%016x" % rng.getrandbits(64)),) if rng.random() < 0.3 else ())
                for i in range(k)]
        codec = rng.choice(V2_CODECS)
        if kind == "idempotent" and rng.random() < 0.15 and offset + k + 1 < n:
            # a transaction: its data batch, then a COMMIT or ABORT marker
            data = build_record_batch(recs, compression=codec, producer_id=txn_pid, producer_epoch=txn_epoch,
                                      base_sequence=0, is_transactional=True, partition_leader_epoch=epoch)
            w.append(data, first_offset=offset, next_offset=offset + k, mtime_s=ts // 1000, leader_epoch=epoch)
            first = offset
            offset += k
            abort = rng.random() < 0.5
            ctype = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
            marker = Record(offset, ts + k, encode_control_key(ctype),
                            EndTransactionMarker(ctype, coordinator_epoch=7).encode_value())
            data = build_record_batch([marker], producer_id=txn_pid, producer_epoch=txn_epoch, is_control=True,
                                      is_transactional=True, partition_leader_epoch=epoch)
            w.append(data, first_offset=offset, next_offset=offset + 1, mtime_s=ts // 1000, leader_epoch=epoch)
            if abort:
                w.add_aborted(AbortedTxn(txn_pid, first, offset, first))
            offset += 1
            txn_epoch += 1  # each transaction bumps the epoch in this sample (a new producer session)
            continue
        if kind == "idempotent":
            pid = rng.choice(list(producers))
            pepoch, seq = producers[pid]
            data = build_record_batch(recs, compression=codec, producer_id=pid, producer_epoch=pepoch,
                                      base_sequence=seq, partition_leader_epoch=epoch)
            producers[pid][1] = seq + k
        else:
            data = build_record_batch(recs, compression=codec, partition_leader_epoch=epoch)
        w.append(data, first_offset=offset, next_offset=offset + k, mtime_s=ts // 1000, leader_epoch=epoch)
        offset += k


def build_sample_cluster(out: str | os.PathLike[str], *, brokers: int = 3, scale: int = 1, seed: int = 7,
                         segment_bytes: int | None = None) -> SampleCluster:
    root = Path(out)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} exists and is not empty")
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    vals = _Values(rng)
    seg_bytes = segment_bytes or (64 * 1024 if scale == 1 else min(1 << 30, 64 * 1024 * scale))
    records_per_partition = 600 * scale

    broker_dirs = {b: root / f"broker-{b}" / "kafka-logs" for b in range(1, brokers + 1)}
    for d in broker_dirs.values():
        d.mkdir(parents=True)
    topic_ids = {t.name: Uuid.from_bytes(rng.randbytes(16)).to_string() for t in TOPICS}
    # Kafka never hands out ids whose string starts with '-': re-roll those.
    for topic in topic_ids:
        while topic_ids[topic].startswith("-"):
            topic_ids[topic] = Uuid.from_bytes(rng.randbytes(16)).to_string()

    placement: dict[int, list[tuple[TopicSpec, int]]] = {b: [] for b in broker_dirs}
    i = 0
    for t in TOPICS:
        for p in range(t.partitions):
            placement[(i % brokers) + 1].append((t, p))
            i += 1

    counts: dict[str, int] = {}
    checkpoints: dict[int, dict[str, list[TopicPartitionOffset]]] = {}
    for b, parts in placement.items():
        cps: dict[str, list[TopicPartitionOffset]] = {n: [] for n in names.OFFSET_CHECKPOINT_FILES}
        for t, p in parts:
            pdir = broker_dirs[b] / f"{t.name}-{p}"
            w = PartitionWriter(pdir, seg_bytes)
            n = records_per_partition
            if t.kind in ("v2", "idempotent"):
                _write_v2_partition(w, t.kind, n, rng, vals)
            else:
                for data, first, nxt, mtime in _legacy_stream(t.kind, n, rng, vals, T0_MS):
                    w.append(data, first_offset=first, next_offset=nxt, mtime_s=mtime)
            w.close()
            leo = w.next_offset
            counts[f"{t.name}-{p}"] = leo
            if t.has_partition_metadata:
                PartitionMetadataFile(Uuid.from_string(topic_ids[t.name])).write(pdir / names.PARTITION_METADATA_FILE)
            if t.kind in ("v2", "idempotent"):
                # Before 2.8, only the clean-shutdown snapshot at the log end offset is left.
                ProducerSnapshot(()).write(pdir / names.producer_snapshot_file_name(leo))
                if t.kind == "idempotent":
                    (pdir / names.producer_snapshot_file_name(leo)).unlink()  # rebuilt below by tier-prepare
            cps[names.RECOVERY_POINT_CHECKPOINT_FILE].append(TopicPartitionOffset(t.name, p, leo))
            cps[names.REPLICATION_OFFSET_CHECKPOINT_FILE].append(TopicPartitionOffset(t.name, p, leo))
            if t.compacted:
                cps[names.CLEANER_OFFSET_CHECKPOINT_FILE].append(TopicPartitionOffset(t.name, p, leo // 2))
        checkpoints[b] = cps

    directory_ids = {b: Uuid.from_bytes(rng.randbytes(16)) for b in broker_dirs}
    for b, d in broker_dirs.items():
        for name, entries in checkpoints[b].items():
            OffsetCheckpointFile(entries).write(d / name)
        MetaProperties(version=1, cluster_id=CLUSTER_ID, node_id=b, directory_id=directory_ids[b]).write(d /
                                                                                                 names.META_PROPERTIES_FILE)
        (d / names.LOCK_FILE).touch()
        CleanShutdownFile(broker_epoch=100 + b).write(d / names.CLEAN_SHUTDOWN_FILE)

    controller_dir = root / f"controller-{CONTROLLER_ID}" / "metadata"
    _write_controller(controller_dir, rng, topic_ids, placement, brokers)
    # kafka-storage format wrote bootstrap.checkpoint into every directory it formatted:
    # a broker-only node keeps a stray copy that nothing reads.
    if 2 in broker_dirs:
        write_bootstrap_checkpoint(broker_dirs[2], (controller_dir / names.BOOTSTRAP_CHECKPOINT_FILE).read_bytes())

    nodes = [NodeSpec(id=b, roles=["broker"], log_dirs=[str(d)]) for b, d in broker_dirs.items()]
    nodes.append(NodeSpec(id=CONTROLLER_ID, roles=["controller"], metadata_log_dir=str(controller_dir)))
    desc = ClusterDescription(name="sample-legacy", cluster_id=CLUSTER_ID, nodes=nodes,
                              compacted_topics=[t.name for t in TOPICS if t.compacted],
                              topic_configs={t.name: {"cleanup.policy": "compact" if t.compacted else "delete"}
                                             for t in TOPICS},
                              # What an operator decides for a topic the metadata log does not know: its
                              # directories are stray replicas to KRaft (KIP-858), so nothing can tier them.
                              excluded_topics=[TopicExclusion(
                                  topic=t.name, migrations=["tier"],
                                  reason="not in the metadata log (no topic id): KRaft treats its directories as "
                                         "stray replicas (KIP-858); recreate the topic before tiering it")
                                  for t in TOPICS if not t.in_metadata_log])
    desc_path = root / "cluster.json"
    desc.dump(desc_path)
    return SampleCluster(root=root, description_path=desc_path, description=desc, broker_log_dirs=broker_dirs,
                         controller_dir=controller_dir, topic_ids=topic_ids, records=counts)


def bootstrap_metadata_records(rng: random.Random) -> list[bytes]:
    """What ``kafka-storage format --add-scram`` wrote: metadata.version, then SCRAM users."""
    out = [encode_metadata_record("FeatureLevelRecord", 0, {"Name": "metadata.version",
                                                             "FeatureLevel": METADATA_VERSION_3_9_IV0})]
    for user, mech in (("admin", 2), ("alice", 1)):
        out.append(encode_metadata_record("UserScramCredentialRecord", 0, {
            "Name": user, "Mechanism": mech, "Salt": rng.randbytes(24), "StoredKey": rng.randbytes(32 * mech),
            "ServerKey": rng.randbytes(32 * mech), "Iterations": 8192}))
    return out


def _write_controller(d: Path, rng: random.Random, topic_ids: dict[str, str],
                      placement: dict[int, list[tuple[TopicSpec, int]]], brokers: int) -> None:
    d.mkdir(parents=True)
    voter_dir_id = Uuid.from_bytes(rng.randbytes(16))
    MetaProperties(version=1, cluster_id=CLUSTER_ID, node_id=CONTROLLER_ID, directory_id=voter_dir_id).write(
        d / names.META_PROPERTIES_FILE)
    (d / names.LOCK_FILE).touch()
    CleanShutdownFile(broker_epoch=None).write(d / names.CLEAN_SHUTDOWN_FILE)
    format_ms = T0_MS + 700 * 86_400_000
    boot = build_checkpoint(bootstrap_metadata_records(rng), header_timestamp=0, append_time=format_ms)
    write_bootstrap_checkpoint(d, boot)
    mdir = d / names.METADATA_PARTITION_DIR
    mdir.mkdir()
    voters = encode_control_value(ControlRecordType.KRAFT_VOTERS, {"Version": 0, "Voters": [{
        "VoterId": CONTROLLER_ID, "VoterDirectoryId": voter_dir_id.to_string(),
        "Endpoints": [{"Name": "CONTROLLER", "Host": "localhost", "Port": 9093}],
        "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}}]})
    zero = build_checkpoint([], header_timestamp=format_ms, append_time=format_ms,
                            kraft_records=[(ControlRecordType.KRAFT_VERSION, kraft_version_value(1)),
                                           (ControlRecordType.KRAFT_VOTERS, voters)])
    write_checkpoint_file(mdir, 0, 0, zero)
    PartitionMetadataFile(METADATA_TOPIC_ID).write(mdir / names.PARTITION_METADATA_FILE)
    # The metadata log: a leader change, then what the controller committed.
    w = PartitionWriter(mdir, 1 << 30)
    now_ms = format_ms + 60_000
    lc = encode_control_value(ControlRecordType.LEADER_CHANGE, {"Version": 0, "LeaderId": CONTROLLER_ID,
                                                                 "Voters": [{"VoterId": CONTROLLER_ID}],
                                                                 "GrantingVoters": [{"VoterId": CONTROLLER_ID}]})
    w.append(build_record_batch([Record(0, now_ms, encode_control_key(ControlRecordType.LEADER_CHANGE), lc)],
                                is_control=True, partition_leader_epoch=1),
             first_offset=0, next_offset=1, mtime_s=now_ms // 1000, leader_epoch=1)
    values = [encode_metadata_record("FeatureLevelRecord", 0, {"Name": "metadata.version",
                                                                "FeatureLevel": METADATA_VERSION_3_9_IV0})]
    for b in range(1, brokers + 1):
        values.append(encode_metadata_record("RegisterBrokerRecord", 0, {
            "BrokerId": b, "IncarnationId": Uuid.from_bytes(rng.randbytes(16)).to_string(), "BrokerEpoch": 100 + b,
            "EndPoints": [{"Name": "PLAINTEXT", "Host": f"broker-{b}", "Port": 9092, "SecurityProtocol": 0}],
            "Features": [], "Rack": None, "Fenced": True}))
    for topic in TOPICS:
        if not topic.in_metadata_log:
            continue
        values.append(encode_metadata_record("TopicRecord", 0, {"Name": topic.name, "TopicId": topic_ids[topic.name]}))
        for b, parts in placement.items():
            for spec, p in parts:
                if spec.name == topic.name:
                    values.append(encode_metadata_record("PartitionRecord", 0, {
                        "PartitionId": p, "TopicId": topic_ids[spec.name], "Replicas": [b], "Isr": [b],
                        "RemovingReplicas": [], "AddingReplicas": [], "Leader": b, "LeaderEpoch": 1,
                        "PartitionEpoch": 1}))
        if topic.compacted:
            values.append(encode_metadata_record("ConfigRecord", 0, {"ResourceType": 2, "ResourceName": topic.name,
                                                                     "Name": "cleanup.policy", "Value": "compact"}))
    recs = [Record(1 + i, now_ms, None, v) for i, v in enumerate(values)]
    w.append(build_record_batch(recs, partition_leader_epoch=1, base_timestamp=now_ms, max_timestamp=now_ms),
             first_offset=1, next_offset=1 + len(recs), mtime_s=now_ms // 1000, leader_epoch=1)
    w.close()
    (mdir / "quorum-state").write_text(json.dumps({
        "clusterId": "", "leaderId": CONTROLLER_ID, "leaderEpoch": 1, "votedId": -1,
        "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA", "data_version": 1}))
