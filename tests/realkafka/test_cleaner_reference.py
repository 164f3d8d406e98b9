"""Kafka's own conversion is the reference for ours (issue #27, item 7).

Kafka 4.x's log cleaner rewrites every legacy (v0/v1) entry of a compacted topic it cleans as a
v2 batch (``MemoryRecords.filterTo``: a batch of magic < 2 is never written back as it was;
``buildRetainedRecordsInto`` builds its retained records into one new batch of magic 2). Read in
the 4.1.2 and 4.4.0 jars (``javap -c``; the bytecode of both is the same), per legacy entry:

- one v2 batch: an uncompressed v0/v1 message (a shallow entry of one record) becomes a
  single-record batch, a compressed wrapper one batch of all its retained records with the
  wrapper's codec (``Compression.of(type).build()``: the codec's default level);
- BaseOffset = the first retained record's offset (for v2 input, the input's own), LastOffsetDelta
  = the last retained record's offset minus it (nothing is overridden for legacy input);
- timestamp type: the entry's, NoTimestampType (v0) becoming CreateTime; under LogAppendTime the
  batch's MaxTimestamp is the entry's (the wrapper's) timestamp; records keep their timestamps
  (-1 for v0; a LogAppendTime wrapper's inner records read as the wrapper's time);
- ProducerId/Epoch/BaseSequence, the transactional and control flags and the PartitionLeaderEpoch:
  the legacy entry's, i.e. -1, -1, -1, false, false and -1;
- a delete horizon (cleaning time + ``delete.retention.ms``) on a batch holding a tombstone:
  ``filterTo`` sets it on any rebuilt batch with a tombstone and none yet, whatever its magic.

So the data must survive compaction whole: the genuine legacy fixtures' generator
(tools/kafka/legacy_fixtures.py: Kafka 3.9.2 in ZooKeeper mode, IBP 2.8, the real Java producer,
the broker's LogValidator converting to v0/v1) is run with its own topics, seed and records, except
that every record gets its key (``null_key_every=0``: the fixtures leave one record in three
without a key, and the cleaner drops keyless records): unique keys ``key-00000``..., so nothing is
compacted away, five tombstones (v0-none) kept on the first cleaning. That is v0 and v1, none,
gzip, snappy, lz4, a LogAppendTime topic with none, gzip and lz4 phases, 2,120 records in 10
partitions, about 20 s.

One Kafka 4.4.0 node with the cleaner on (one thread, 100 ms backoff) creates a compacted topic per
legacy topic (``min.cleanable.dirty.ratio=0``, ``min.compaction.lag.ms=0``, retention off,
tombstones kept), stops, gets the legacy segments installed as the other real-Kafka tests install
them (unclean start: every segment recovered) plus an empty segment at the log end offset, so that
every legacy segment is closed and cleanable (the cleaner never touches the active segment; rolling
one by ``segment.ms`` would need an append), starts, and is stopped once the cleaner's checkpoint
has reached every log end offset. Then Kafka's cleaned batches and ``kmigrate upgrade --to v2``'s
output of the same legacy files must have the same base offsets, batch boundaries, attributes,
timestamps, producer fields, leader epochs and records; every uncompressed batch byte for byte,
every compressed one but for its compressed bytes (and so its length and CRC): the decompressed
records byte for byte.

Differences by design, asserted as such:
- tombstones: the cleaner gives every batch it rebuilds that holds a tombstone a delete horizon
  (attributes bit 6, BaseTimestamp = the cleaning's time + ``delete.retention.ms``), legacy
  input included; kmigrate, no cleaner, sets none (test_tombstones_get_the_cleaners_delete_horizon);
- ``--assign-leader-epoch``: kmigrate stamps the epoch covering each batch (0 where the partition
  has no leader-epoch checkpoint, as here); the cleaner keeps the legacy -1. Nothing else differs;
- the files: the cleaner groups consecutive segments into one cleaned segment up to
  ``segment.bytes`` (one file here), kmigrate writes one output segment per input segment.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka import codec as kcodec
from support import kafka as realkafka
from support.kafka import KafkaNode, read_files, upgraded

from migration.audit.model import UnitStatus
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade

pytestmark = pytest.mark.realkafka

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "tools" / "kafka" / "legacy_fixtures.py"
VERSION = realkafka.LATEST
PREFIX = "ref-"
VARIANTS = {"v2": UpgradeOptions(target="v2"), "epoch": UpgradeOptions(target="v2", assign_leader_epoch=True)}

# A v2 batch header (DefaultRecordBatch), 61 bytes, read here with struct, not kmigrate's parser.
HEADER = struct.Struct(">qiibIhiqqqhii")
FIELDS = ("base_offset", "length", "leader_epoch", "magic", "crc", "attributes", "last_offset_delta",
          "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "records")
DECOMPRESS = {0: bytes, 1: kcodec.gzip_decode, 2: kcodec.snappy_decode, 3: kcodec.lz4_decode,
              4: kcodec.zstd_decode}


@dataclass(frozen=True)
class Batch:
    file: str
    position: int
    header: dict[str, int]
    raw: bytes

    @property
    def codec(self) -> int:
        return self.header["attributes"] & 7

    def records_bytes(self) -> bytes:
        """The records: the bytes after the header, decompressed."""
        return DECOMPRESS[self.codec](self.raw[HEADER.size:])


def v2_batches(partition_dir: Path) -> list[Batch]:
    out = []
    for log in sorted(partition_dir.glob("*.log")):
        data, pos = log.read_bytes(), 0
        while pos + HEADER.size <= len(data):
            h = dict(zip(FIELDS, HEADER.unpack_from(data, pos), strict=True))
            assert h["magic"] == 2, f"{log} at {pos}: magic {h['magic']}"
            end = pos + 12 + h["length"]
            out.append(Batch(log.name, pos, h, data[pos:end]))
            pos = end
        assert pos == len(data), f"{log}: {len(data) - pos} bytes after the last batch"
    return out


def legacy_first_offsets(partition_dir: Path) -> list[int]:
    """The first record offset of every shallow legacy entry (kafka-python)."""
    out = []
    for log in sorted(partition_dir.glob("*.log")):
        for batch in realkafka._batches(log.read_bytes()):
            assert batch.magic < 2
            out.append(next(iter(batch)).offset)
    return out


DELETE_HORIZON = 0x40  # attributes bit 6: BaseTimestamp is the delete horizon (KIP-534)


def records_of(batch: Batch) -> list[tuple]:
    """The batch's records as kafka-python decodes them: absolute offsets and timestamps."""
    (b,) = list(realkafka._batches(batch.raw))
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in b]


def batch_differences(kafka: list[Batch], ours: list[Batch], *, ignore: tuple[str, ...] = (),
                      horizons: list[tuple[Batch, Batch]] | None = None) -> list[str]:
    """Where kmigrate's batches differ from the cleaner's: every header field (length and CRC
    only for uncompressed batches: a compressed batch's compressed bytes may differ), the
    decompressed records, and the whole batch's bytes where it is uncompressed.

    A batch to which the cleaner gave a delete horizon (a legacy entry holding a tombstone) is
    set apart into ``horizons`` when that is the only difference: same fields but the
    attributes' bit 6, BaseTimestamp (the horizon, not the first record's timestamp) and so the
    records' timestamp deltas, length and CRC; the same records decoded."""
    out: list[str] = []
    if len(kafka) != len(ours):
        out.append(f"{len(ours)} batches, the cleaner wrote {len(kafka)}")
    for k, m in zip(kafka, ours, strict=False):
        at = f"batch at offset {k.header['base_offset']}"
        skip = set(ignore) | ({"length", "crc"} if k.codec else set())
        horizon = horizons is not None and k.header["attributes"] == m.header["attributes"] | DELETE_HORIZON
        if horizon:
            skip |= {"length", "crc", "attributes", "base_timestamp"}
        for f in FIELDS:
            if f not in skip and k.header[f] != m.header[f]:
                out.append(f"{at}: {f} {m.header[f]}, the cleaner's {k.header[f]}")
        if horizon:
            if records_of(k) != records_of(m):
                out.append(f"{at}: the records differ")
            elif m.header["base_timestamp"] != records_of(m)[0][1]:
                out.append(f"{at}: BaseTimestamp {m.header['base_timestamp']}, not the first record's")
            else:
                horizons.append((k, m))
        elif k.records_bytes() != m.records_bytes():
            out.append(f"{at}: the (decompressed) records differ")
        elif not k.codec and not skip & {"leader_epoch", "crc"} and k.raw != m.raw:
            out.append(f"{at}: the uncompressed batch's bytes differ")
        if len(out) > 20:
            break
    return out


# --- the scenario --------------------------------------------------------------------------
def generate_unique_keyed(out: Path, work: Path) -> dict:
    """The genuine fixtures' generator, its topics with every record keyed (see the docstring)."""
    spec = importlib.util.spec_from_file_location("legacy_fixtures", GENERATOR)
    gen = importlib.util.module_from_spec(spec)
    sys.modules["legacy_fixtures"] = gen  # dataclasses look their module up
    try:
        spec.loader.exec_module(gen)
        gen.TOPICS = [dataclasses.replace(t, null_key_every=0) for t in gen.TOPICS if not t.compacted]
        return gen.generate(out, work, 27)
    finally:
        sys.modules.pop("legacy_fixtures", None)


@dataclass
class Reference:
    partitions: list[str]  # "topic-N" of the legacy log dir
    manifest: dict
    legacy: dict[str, Path]
    cleaned: dict[str, Path]  # Kafka's partition dirs after the cleaning
    ours: dict[str, dict[str, Path]]  # variant -> partition -> kmigrate's output
    runs: list[realkafka.CleanerRun]
    window_ms: tuple[int, int]  # wall clock around the cleaning
    timings: dict[str, float]
    logs: Path


@pytest.fixture(scope="module")
def ref(tmp_path_factory, kafka_node_factory) -> Reference:
    return realkafka.shared_across_workers(tmp_path_factory, "cleaner-reference",
                                           lambda: _build(tmp_path_factory, kafka_node_factory))


def _build(tmp_path_factory, kafka_node_factory) -> Reference:
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    work = tmp_path_factory.mktemp("cleaner-ref-")
    gen_work = work / "kafka39"
    gen_work.mkdir()
    manifest = generate_unique_keyed(work / "legacy", gen_work)
    timings["legacy data by Kafka 3.9.2"] = time.monotonic() - t0
    legacy_root = work / "legacy" / "kafka-logs"
    partitions = sorted(f"{t}-{p}" for t, d in manifest["topics"].items() for p in d["partitions"])
    leo = {tp: manifest["topics"][tp.rsplit("-", 1)[0]]["partitions"][tp.rsplit("-", 1)[1]]["log_end_offset"]
           for tp in partitions}

    ours: dict[str, dict[str, Path]] = {}
    for name, options in VARIANTS.items():
        t = time.monotonic()
        root = work / name
        shutil.copytree(legacy_root, root / "kafka-logs", copy_function=shutil.copy2)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("KMIGRATE_OUT", str(work / "out" / name))
            mp.setenv("KMIGRATE_REPORT_ROOT", str(work / "out" / name / "reports"))
            mp.setenv("KMIGRATE_BACKUP_ROOT", str(work / "out" / name / "backups"))
            report = execute_upgrade([str(root / "kafka-logs")], options=options, engine="inline")
        assert report.refusal is None and not report.errors, report.errors or report.refusal
        for b in report.brokers:
            for p in b.partitions:
                assert all(u.status == UnitStatus.OK for u in p.units), p
        ours[name] = {tp: root / "kafka-logs" / tp for tp in partitions}
        timings[f"kmigrate upgrade ({name})"] = time.monotonic() - t

    # the legacy partitions as installed: their files and an empty active segment at the log end
    sources: dict[str, Path] = {}
    for tp in partitions:
        src = work / "install" / tp
        shutil.copytree(legacy_root / tp, src, copy_function=shutil.copy2)
        (src / f"{leo[tp]:020d}.log").touch()
        sources[PREFIX + tp] = src

    node: KafkaNode = kafka_node_factory(VERSION, properties=realkafka.CLEANER_ON)
    node.start()
    node.create_topics({PREFIX + t: (len(d["partitions"]), realkafka.COMPACT_NOW | (
        {"message.timestamp.type": "LogAppendTime"} if d["timestamp.type"] == "LogAppendTime" else {}))
        for t, d in manifest["topics"].items()})
    node.stop()
    node.install_segments(sources)
    node.start()
    window = [int(time.time() * 1000)]
    timings["cleaner (wait)"] = realkafka.wait_for_cleaner(node, {PREFIX + tp: leo[tp] for tp in partitions})
    window.append(int(time.time() * 1000))
    node.stop()
    load_log = log = node.run_log()
    # the start that recovered the installed segments: no complaint, every partition loaded whole
    realkafka.judge_load(load_log, {PREFIX + tp: read_files(sources[PREFIX + tp]).load for tp in partitions},
                         log_path=node.server_log)
    cleaned = {}
    for tp in partitions:
        cleaned[tp] = work / "cleaned" / tp
        cleaned[tp].mkdir(parents=True)
        for f in (node.data / (PREFIX + tp)).glob("*.log"):
            shutil.copy2(f, cleaned[tp] / f.name)
    timings.update(node.timings)
    timings["module"] = time.monotonic() - t0
    print(f"\nKafka {VERSION}'s cleaner converted the legacy partitions in {timings['module']:.1f}s: "
          + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + f"; logs in {node.logs}")
    return Reference(partitions, manifest, {tp: legacy_root / tp for tp in partitions}, cleaned, ours,
                     realkafka.cleaner_runs(log), (window[0], window[1]), timings, node.logs)


# --- the tests -------------------------------------------------------------------------------
def test_the_cleaner_converted_every_legacy_segment_and_removed_nothing(ref: Reference) -> None:
    runs = {r.log: r for r in ref.runs}
    for tp in ref.partitions:
        leo = ref.manifest["topics"][tp.rsplit("-", 1)[0]]["partitions"][tp.rsplit("-", 1)[1]]["log_end_offset"]
        run = runs.get(PREFIX + tp)
        assert run is not None, f"{tp}: no 'Log cleaner thread ... cleaned log' line; logs in {ref.logs}"
        assert (run.first_dirty, run.end, run.start_messages, run.end_messages) == (0, leo, leo, leo), run
        batches = v2_batches(ref.cleaned[tp])  # magic 2 throughout: nothing legacy left
        assert sum(b.header["records"] for b in batches) == leo


def test_the_records_are_the_originals(ref: Reference) -> None:
    """Kafka's cleaned files and kmigrate's output hold the original records (kafka-python), v0
    timestamps as CreateTime -1."""
    for tp in ref.partitions:
        want = upgraded(read_files(ref.legacy[tp]).records)
        assert read_files(ref.cleaned[tp]).records == want, tp
        assert read_files(ref.ours["v2"][tp]).records == want, tp


def test_one_v2_batch_per_legacy_entry_at_its_first_offset(ref: Reference) -> None:
    """KIP-724's conversion: an uncompressed message a batch of one, a wrapper one batch."""
    for tp in ref.partitions:
        firsts = legacy_first_offsets(ref.legacy[tp])
        assert [b.header["base_offset"] for b in v2_batches(ref.cleaned[tp])] == firsts, tp


def test_kmigrate_writes_the_cleaners_batches(ref: Reference) -> None:
    horizons: list[tuple[Batch, Batch]] = []
    problems = {tp: d for tp in ref.partitions
                if (d := batch_differences(v2_batches(ref.cleaned[tp]), v2_batches(ref.ours["v2"][tp]),
                                           horizons=horizons))}
    assert not problems, "kmigrate upgrade --to v2 differs from Kafka's cleaner:\n" + "\n".join(
        f"  {tp}: {d}" for tp, d in problems.items())
    # by design: the tombstones' delete horizon (see test_tombstones_get_the_cleaners_delete_horizon)
    assert len(horizons) == 5


def test_tombstones_get_the_cleaners_delete_horizon(ref: Reference) -> None:
    """The one difference: Kafka 4.x's filterTo sets a delete horizon on every batch it rebuilds
    with a tombstone and none yet, legacy input included (the 4.1/4.4 bytecode has no magic check
    there; the 2024 trunk had one): attributes bit 6, BaseTimestamp = the cleaning's time +
    ``delete.retention.ms``, record timestamp deltas relative to it. kmigrate is no cleaner and
    writes none: BaseTimestamp is the first record's (-1 for v0). A cleaner that later finds such
    a batch without a horizon sets it then (the same rule), so the tombstone lives at least
    ``delete.retention.ms`` after the first cleaning after the migration, never less."""
    retention = int(realkafka.COMPACT_NOW["delete.retention.ms"])
    horizons: list[tuple[Batch, Batch]] = []
    for tp in ref.partitions:
        batch_differences(v2_batches(ref.cleaned[tp]), v2_batches(ref.ours["v2"][tp]), horizons=horizons)
    assert horizons
    for k, m in horizons:
        assert any(r[3] is None for r in records_of(k)), "a delete horizon on a batch without a tombstone"
        assert ref.window_ms[0] + retention <= k.header["base_timestamp"] <= ref.window_ms[1] + retention
        assert not m.header["attributes"] & DELETE_HORIZON and m.header["base_timestamp"] == -1  # v0-none
    tombstones = sum(1 for tp in ref.partitions for b in v2_batches(ref.ours["v2"][tp])
                     for r in records_of(b) if r[3] is None)
    assert tombstones == len(horizons)  # every tombstone's batch


def test_uncompressed_batches_are_byte_identical(ref: Reference) -> None:
    """Every uncompressed batch but the five with a tombstone (the delete horizon, above)."""
    n = 0
    for tp in ref.partitions:
        for k, m in zip(v2_batches(ref.cleaned[tp]), v2_batches(ref.ours["v2"][tp]), strict=True):
            if not k.codec and not k.header["attributes"] & DELETE_HORIZON:
                assert k.raw == m.raw, (tp, k.header, m.header)
                n += 1
    assert n == 240 - 5 + 240 + 83  # v0-none without its tombstones, v1-none, v1-logappend's uncompressed phases


def test_assign_leader_epoch_differs_only_by_the_epoch(ref: Reference) -> None:
    """By design: the cleaner keeps the legacy entry's -1, ``--assign-leader-epoch`` stamps the
    epoch covering the batch (0 without a leader-epoch checkpoint)."""
    for tp in ref.partitions:
        kafka, ours = v2_batches(ref.cleaned[tp]), v2_batches(ref.ours["epoch"][tp])
        assert not batch_differences(kafka, ours, ignore=("leader_epoch", "crc"), horizons=[]), tp
        assert {b.header["leader_epoch"] for b in kafka} == {-1}
        assert {b.header["leader_epoch"] for b in ours} == {0}


def test_files_differ_by_design(ref: Reference) -> None:
    """The cleaner groups the segments (one cleaned segment up to segment.bytes, plus the empty
    active one); kmigrate keeps one output segment per input segment."""
    for tp in ref.partitions:
        legacy = sorted(f.name for f in ref.legacy[tp].glob("*.log"))
        assert sorted(f.name for f in ref.ours["v2"][tp].glob("*.log")) == legacy
        assert sorted(f.name for f in ref.cleaned[tp].glob("*.log"))[0] == legacy[0]

