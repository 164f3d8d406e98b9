"""Apache Kafka judges `kmigrate upgrade` of the sample legacy cluster (issue #27, item 3).

One real single-node KRaft broker per Kafka version serves three copies of every partition of
the sample cluster (all three brokers' log dirs, every topic kind: v0, v1, LogAppendTime
wrappers, compacted with offset holes, v0→v1 mixed, v2 with leader epochs, idempotent and
transactional v2), each under a topic the broker created (same partition count, retention off,
compaction as the original had it):

- ``orig-<topic>``: the ORIGINAL legacy files (Kafka 4 still reads v0/v1): the before;
- ``migr-<topic>``: the same files after ``kmigrate upgrade --to v2``: the after; also
  ``epoch-<topic>`` (``--to v2 --assign-leader-epoch``) and ``v1-<topic>`` (``--to v1``);
- ``bad-legacy-v0``: the upgraded ``legacy-v0-0`` with one byte flipped inside a converted batch.

The node is formatted, the topics created, the node stopped; the files go under the new partition
directories (the broker's ``partition.metadata`` stays: its topic id is the metadata's), the
recovery points and the clean-shutdown marker go, and the next start recovers every segment
(``LogLoader.recoverLog`` → ``LogSegment.recover``: every batch's CRC and size, the offset, time
and transaction indexes and the producer state rebuilt). Then Kafka's log of that start must hold
no complaint and one "Completed load of Log" line per partition with the segment count, log start
and log end offset of the files, and the real Java consumer must read every record equal to what
kafka-python reads from the original files, modulo the documented v0→v2 conversion (a v0 message
has no timestamp: NO_TIMESTAMP_TYPE -1 before, CreateTime -1 after, in v1 as in v2;
docs/formats.md).
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords
from support import kafka as realkafka
from support.kafka import ConsumedRecord, JudgeError, KafkaNode, Load, judge_load

from migration.audit.model import UnitStatus
from migration.demo.sample_cluster import TOPICS
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade

pytestmark = pytest.mark.realkafka

ORIG, MIGR, BAD = "orig-", "migr-", "bad-"
# topic prefix -> the upgrade whose output it serves
UPGRADES = {
    MIGR: UpgradeOptions(target="v2"),
    "epoch-": UpgradeOptions(target="v2", assign_leader_epoch=True),
    "v1-": UpgradeOptions(target="v1"),
}
BROKEN = "legacy-v0-0"  # the partition whose upgraded copy gets a flipped byte


# --- what kafka-python reads from the files --------------------------------------------------
@dataclass(frozen=True)
class FileRecord:
    offset: int
    timestamp: int
    timestamp_type: str  # as the Java client names it
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass
class PartitionFiles:
    records: list[FileRecord] = field(default_factory=list)  # data records, control batches left out
    load: Load | None = None  # what Kafka's load must report for these files


def _batches(data: bytes):
    mr = MemoryRecords(data)
    while mr.has_next():
        b = mr.next_batch()
        if b is None:
            break
        yield b


def read_files(partition_dir: Path) -> PartitionFiles:
    """Every record with kafka-python (CRCs checked), and the load Kafka must report: one segment
    per .log file, the log start offset = the first file's base offset (the fresh topic's
    log-start-offset checkpoint says 0), the log end offset = the last batch's last offset + 1."""
    out = PartitionFiles()
    logs = sorted(partition_dir.glob("*.log"))
    last = None
    for log in logs:
        for batch in _batches(log.read_bytes()):
            assert batch.validate_crc(), f"{log}: bad batch CRC"
            magic = batch.magic
            if magic < 2:
                records = list(batch)
                last = records[-1].offset if records else batch.base_offset
            else:
                last = batch.base_offset + batch.last_offset_delta
                if batch.is_control_batch:
                    continue
            for rec in (records if magic < 2 else batch):
                if magic == 0:
                    ts, tt = -1, "NO_TIMESTAMP_TYPE"
                else:
                    ts = rec.timestamp
                    tt = "LOG_APPEND_TIME" if batch.timestamp_type == 1 else "CREATE_TIME"
                out.records.append(FileRecord(rec.offset, ts, tt, rec.key, rec.value,
                                              tuple((k, v) for k, v in (rec.headers or ()))))
    base = int(logs[0].name.split(".")[0]) if logs else 0
    out.load = Load(len(logs), base, (last + 1) if last is not None else base)
    return out


def as_consumed(recs: list[FileRecord]) -> list[ConsumedRecord]:
    return [ConsumedRecord(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers) for r in recs]


def upgraded(recs: list[FileRecord]) -> list[FileRecord]:
    """The documented timestamp conversion of v0 to v1 or v2: no timestamp (v0) becomes CreateTime -1."""
    return [FileRecord(r.offset, r.timestamp, "CREATE_TIME" if r.timestamp_type == "NO_TIMESTAMP_TYPE"
                       else r.timestamp_type, r.key, r.value, r.headers) for r in recs]


def flip_byte_in_middle_batch(log: Path) -> int:
    """Flip one byte inside the records of the middle batch of a v2 segment; return the batch's
    position. The batch CRC (CRC-32C from the attributes to the end) no longer matches."""
    data = bytearray(log.read_bytes())
    starts, pos = [], 0
    while pos + 12 <= len(data):
        starts.append(pos)
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
    at = starts[len(starts) // 2]
    assert data[at + 16] == 2, "a converted (v2) batch"
    data[at + 61 + 3] ^= 0xFF  # past the 61-byte batch header: inside the first record
    log.write_bytes(bytes(data))
    return at


# --- the scenario, once per Kafka version ----------------------------------------------------
@dataclass
class Scenario:
    version: str
    node: KafkaNode
    load_log: str  # server.log of the recovering start
    files: dict[str, PartitionFiles]  # "orig-topic-N" / "migr-topic-N" / "bad-..." -> files
    consumed: dict[str, list[ConsumedRecord]]
    report_leo: dict[str, int]  # "<prefix>topic-N" -> last offset + 1 per kmigrate's run report
    timings: dict[str, float]
    logs_before: dict[str, dict[str, bytes]]  # partition -> .log name -> bytes installed
    logs_after: dict[str, dict[str, bytes]]  # ... and after Kafka's recovery, serving and clean stop

    def expected(self, prefix: str) -> dict[str, Load]:
        return {tp: f.load for tp, f in self.files.items() if tp.startswith(prefix)}

    def judge(self, prefix: str) -> None:
        judge_load(self.load_log, self.expected(prefix), log_path=self.node.server_log, all_partitions=self.files)


@pytest.fixture(scope="module", params=realkafka.VERSIONS)
def scenario(request, sample_cluster_template, tmp_path_factory, kafka_node_factory) -> Scenario:
    version = request.param
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    work = tmp_path_factory.mktemp(f"judged-{version}-")
    src_root = sample_cluster_template.root
    roots = {prefix: work / prefix.rstrip("-") for prefix in (ORIG, *UPGRADES)}
    for root in roots.values():
        shutil.copytree(src_root, root, copy_function=shutil.copy2)
    rels = [d.relative_to(src_root) for d in sample_cluster_template.log_dirs]

    report_leo: dict[str, int] = {}
    for prefix, options in UPGRADES.items():
        t = time.monotonic()
        with pytest.MonkeyPatch.context() as mp:
            out = work / "out" / prefix.rstrip("-")
            mp.setenv("KMIGRATE_OUT", str(out))
            mp.setenv("KMIGRATE_REPORT_ROOT", str(out / "reports"))
            mp.setenv("KMIGRATE_BACKUP_ROOT", str(out / "backups"))
            report = execute_upgrade([str(roots[prefix] / r) for r in rels], options=options, engine="inline")
        timings[f"kmigrate upgrade ({prefix.rstrip('-')})"] = time.monotonic() - t
        assert report.refusal is None and not report.errors, report.errors or report.refusal
        for b in report.brokers:
            for p in b.partitions:
                assert all(u.status in (UnitStatus.OK, UnitStatus.SKIPPED) for u in p.units), p
                last = max(p.units, key=lambda u: u.unit)  # the last segment (names are base offsets)
                if last.offsets is not None:  # a skipped unit (already at the target) reports none
                    report_leo[f"{prefix}{p.topic}-{p.partition}"] = last.offsets.last + 1

    # partition dir name -> where its files are
    sources: dict[str, Path] = {}
    for rel in rels:
        for pdir in sorted((roots[ORIG] / rel).iterdir()):
            if pdir.is_dir():
                for prefix, root in roots.items():
                    sources[prefix + pdir.name] = root / rel / pdir.name
    bad = work / "bad" / BROKEN
    shutil.copytree(sources[MIGR + BROKEN], bad, copy_function=shutil.copy2)
    flip_byte_in_middle_batch(sorted(bad.glob("*.log"))[0])
    sources[BAD + BROKEN] = bad
    files = {tp: read_files(p) for tp, p in sources.items() if tp != BAD + BROKEN}
    files[BAD + BROKEN] = PartitionFiles(load=files[MIGR + BROKEN].load)  # what an intact copy loads as

    topics: dict[str, tuple[int, dict[str, str]]] = {}
    policies = sample_cluster_template.description.topic_configs
    for spec in TOPICS:
        cfg = {"retention.ms": "-1", "retention.bytes": "-1",
               "cleanup.policy": policies.get(spec.name, {}).get("cleanup.policy", "delete")}
        for prefix in roots:
            topics[prefix + spec.name] = (spec.partitions, cfg)
    topics[BAD + BROKEN.rsplit("-", 1)[0]] = (1, {"retention.ms": "-1", "retention.bytes": "-1"})

    node = kafka_node_factory(version)
    node.start()
    node.create_topics(topics)
    node.stop()
    node.install_segments(sources)
    node.start()
    load_log = node.run_log()
    consumed = node.consume(sorted(topics))
    node.stop()
    # after the clean stop: what Kafka left of each partition's .log files
    logs_after = {tp: {f.name: f.read_bytes() for f in sorted((node.data / tp).glob("*.log"))} for tp in sources}
    logs_before = {tp: {f.name: f.read_bytes() for f in sorted(p.glob("*.log"))} for tp, p in sources.items()}
    timings.update(node.timings)
    timings["scenario"] = time.monotonic() - t0
    print(f"\nKafka {version} judged the upgrade in {timings['scenario']:.1f}s: "
          + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + f"; logs in {node.logs}")
    return Scenario(version, node, load_log, files, consumed, report_leo, timings, logs_before, logs_after)


def _diff(got: list[ConsumedRecord], want: list[ConsumedRecord]) -> str:
    if len(got) != len(want):
        return f"{len(got)} records, expected {len(want)}"
    for g, w in zip(got, want, strict=True):
        if g != w:
            return f"first difference at offset {w.offset}: got {g}, expected {w}"
    return ""


def _partitions(prefix: str, scenario: Scenario) -> list[str]:
    return sorted(tp for tp in scenario.files if tp.startswith(prefix))


# --- the tests -------------------------------------------------------------------------------
def test_kafka_recovers_every_partition(scenario):
    """The recovering start saw no clean-shutdown marker in the data dir, and it loaded every partition."""
    recovering = realkafka.RECOVERING.findall(scenario.load_log)
    assert any(d == str(scenario.node.data) for _, d in recovering), recovering
    assert set(realkafka.completed_loads(scenario.load_log)) >= set(scenario.files)


def test_kafka_loads_the_original_legacy_dir(scenario):
    """The before: Kafka 4 recovers and serves the v0/v1 (and v2) originals."""
    scenario.judge(ORIG)
    for tp in _partitions(ORIG, scenario):
        assert not (d := _diff(scenario.consumed[tp], as_consumed(scenario.files[tp].records))), f"{tp}: {d}"


@pytest.mark.parametrize("prefix", list(UPGRADES), ids=lambda p: {MIGR: "v2", "epoch-": "v2-assign-leader-epoch",
                                                                  "v1-": "v1"}[p])
def test_kafka_loads_the_upgraded_dir(scenario, prefix):
    """The after: every upgraded partition recovers without a complaint, with the segment count and
    offsets of the files (and of kmigrate's run report), and serves the original records."""
    scenario.judge(prefix)
    assert scenario.report_leo and all(k.startswith(tuple(UPGRADES)) for k in scenario.report_leo)
    for tp in _partitions(prefix, scenario):
        name = tp[len(prefix):]
        files = scenario.files[tp]
        assert files.load == scenario.files[ORIG + name].load, f"{name}: upgraded files load differently"
        if tp in scenario.report_leo:
            assert files.load.log_end_offset == scenario.report_leo[tp], tp
        want = as_consumed(upgraded(scenario.files[ORIG + name].records))
        assert not (d := _diff(scenario.consumed[tp], want)), f"{tp} served by Kafka vs the original: {d}"
        # and what the same broker serves from the original, modulo the conversion
        before = [ConsumedRecord(r.offset, r.timestamp, "CREATE_TIME" if r.timestamp_type == "NO_TIMESTAMP_TYPE"
                                 else r.timestamp_type, r.key, r.value, r.headers)
                  for r in scenario.consumed[ORIG + name]]
        assert scenario.consumed[tp] == before, f"{name}: Kafka serves the upgrade differently from the original"


def test_kafka_leaves_every_log_file_as_written(scenario):
    """After recovery, serving and a clean stop, every .log file is byte-identical to what was
    installed (Kafka truncated nothing, appended nothing, rolled no segment): all but the broken one."""
    changed = sorted(tp for tp in scenario.logs_before if scenario.logs_before[tp] != scenario.logs_after[tp])
    assert changed == [BAD + BROKEN], changed


def test_a_flipped_byte_fails_the_judge(scenario):
    """One byte flipped inside a converted batch: Kafka's recovery finds the bad CRC, truncates
    the segment there and deletes the later ones, and the judge fails."""
    with pytest.raises(JudgeError) as err:
        scenario.judge(BAD)
    text = str(err.value)
    assert re.search(r"Found invalid messages in log segment \S+/bad-legacy-v0-0/0{20}\.log at byte offset \d+",
                     text), text
    assert "Corruption found in segment 0, truncating to offset" in text, text
    intact = scenario.files[MIGR + BROKEN].load
    got = realkafka.completed_loads(scenario.load_log)[BAD + BROKEN]
    assert got.segments < intact.segments and got.log_end_offset < intact.log_end_offset, got
    assert len(scenario.consumed[BAD + BROKEN]) < len(scenario.consumed[MIGR + BROKEN])
    # the good partitions of the same load are not blamed for it
    scenario.judge(MIGR)
