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
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import kafka as realkafka
from support.kafka import (
    ConsumedRecord,
    JudgeError,
    KafkaNode,
    Load,
    PartitionFiles,
    as_consumed,
    expected_first,
    expected_offset_for_time,
    index_differences,
    judge_load,
    pick_timestamps,
    read_files,
    seek_targets,
    upgraded,
)
from support.kafka import record_diff as _diff
from support.upgraded_copies import upgrade_copies

from migration.demo.sample_cluster import TOPICS
from migration.migrations.upgrade.driver import UpgradeOptions

pytestmark = pytest.mark.realkafka

ORIG, MIGR, BAD = "orig-", "migr-", "bad-"
# topic prefix -> the upgrade whose output it serves
UPGRADES = {
    MIGR: UpgradeOptions(target="v2"),
    "epoch-": UpgradeOptions(target="v2", assign_leader_epoch=True),
    "v1-": UpgradeOptions(target="v1"),
}
BROKEN = "legacy-v0-0"  # the partition whose upgraded copy gets a flipped byte


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
    sources: dict[str, Path]  # partition -> the dir whose files were installed
    rewritten: set[str]  # "<prefix>topic-N" whose segments kmigrate rewrote (the others were at the target)
    rebuilt: dict[str, dict[str, bytes]]  # Kafka's index and snapshot files after its recovery
    clean_log: str  # server.log of the second, clean start on the installed indexes and snapshots
    consumed_clean: dict[str, list[ConsumedRecord]]
    seeks: dict[tuple[str, int, int], int | None]  # (topic, partition, offset) -> first offset served
    times: dict[tuple[str, int, int], tuple[int, int] | None]  # offsetsForTimes answers

    def expected(self, prefix: str) -> dict[str, Load]:
        return {tp: f.load for tp, f in self.files.items() if tp.startswith(prefix)}

    def judge(self, prefix: str) -> None:
        judge_load(self.load_log, self.expected(prefix), log_path=self.node.server_log, all_partitions=self.files)


@pytest.fixture(scope="module", params=realkafka.VERSIONS)
def scenario(request, sample_cluster_template, tmp_path_factory, kafka_node_factory) -> Scenario:
    return realkafka.shared_across_workers(
        tmp_path_factory, f"sample-{request.param}",
        lambda: _build_scenario(request.param, sample_cluster_template, tmp_path_factory, kafka_node_factory))


def _build_scenario(version, sample_cluster_template, tmp_path_factory, kafka_node_factory) -> Scenario:
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    work = tmp_path_factory.mktemp(f"judged-{version}-")
    src_root = sample_cluster_template.root
    roots = {prefix: work / prefix.rstrip("-") for prefix in (ORIG, *UPGRADES)}
    for root in roots.values():
        shutil.copytree(src_root, root, copy_function=shutil.copy2)
    rels = [d.relative_to(src_root) for d in sample_cluster_template.log_dirs]

    upgraded = upgrade_copies(work, roots, UPGRADES, rels)
    report_leo, rewritten = upgraded.report_leo, upgraded.rewritten
    timings.update(upgraded.timings)

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
    # the second, clean start: every intact partition gets its source's own indexes and snapshots back
    # (the broken one keeps what Kafka's recovery left: its .log was truncated)
    intact = {tp: p for tp, p in sources.items() if tp != BAD + BROKEN}
    rebuilt = node.install_indexes(intact)
    node.start()
    clean_log = node.run_log()
    consumed_clean = node.consume(sorted(topics))
    split = [(tp, *tp.rsplit("-", 1)) for tp in sorted(intact) if tp in rewritten]
    seeks = node.seek_first([t for tp, topic, part in split
                             for t in seek_targets(topic, int(part), intact[tp], files[tp], limit=24)])
    time_targets = [(prefix + tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1]), ts)
                    for tp in sorted(t[len(ORIG):] for t in files if t.startswith(ORIG))
                    for ts in pick_timestamps(files[ORIG + tp].records) for prefix in (ORIG, *UPGRADES)]
    times = node.offsets_for_times(time_targets)
    node.stop()
    timings.update(node.timings)
    timings["scenario"] = time.monotonic() - t0
    print(f"\nKafka {version} judged the upgrade in {timings['scenario']:.1f}s: "
          + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + f"; logs in {node.logs}")
    return Scenario(version, node, load_log, files, consumed, report_leo, timings, logs_before, logs_after, sources,
                    rewritten, rebuilt, clean_log, consumed_clean, seeks, times)


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
        # the log end the run report gives, where its last segment was rewritten
        if tp in scenario.report_leo:
            assert files.load.log_end_offset == scenario.report_leo[tp], (tp, scenario.report_leo.get(tp))
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


# --- the second, clean load: kmigrate's own indexes and snapshots, as they are ---------------
def test_the_clean_load_uses_the_installed_files_without_a_complaint(scenario):
    """The clean-shutdown marker and the recovery points Kafka wrote were kept: no recovery, no
    corrupted-index or producer-snapshot line, the Completed-load numbers of the files, the same
    records served as after the recovery."""
    assert not any(d == str(scenario.node.data) for _, d in realkafka.RECOVERING.findall(scenario.clean_log))
    judge_load(scenario.clean_log, {tp: f.load for tp, f in scenario.files.items() if tp != BAD + BROKEN},
               log_path=scenario.node.server_log)
    for tp, recs in scenario.consumed.items():
        if not tp.startswith(BAD):
            assert scenario.consumed_clean[tp] == recs, tp


@pytest.mark.parametrize("prefix", list(UPGRADES), ids=lambda p: {MIGR: "v2", "epoch-": "v2-assign-leader-epoch",
                                                                  "v1-": "v1"}[p])
def test_kmigrates_indexes_equal_the_ones_kafka_rebuilds(scenario, prefix):
    """Every partition kmigrate rewrote: its .index and .timeindex entries equal those of Kafka's
    recovery of the same segments."""
    mine = sorted(tp for tp in scenario.rewritten if tp.startswith(prefix))
    assert mine
    diffs = [d for tp in mine for d in index_differences(scenario.sources[tp], scenario.rebuilt[tp])]
    assert not diffs, "\n".join(diffs)


@pytest.mark.parametrize("prefix", list(UPGRADES), ids=lambda p: {MIGR: "v2", "epoch-": "v2-assign-leader-epoch",
                                                                  "v1-": "v1"}[p])
def test_kmigrates_snapshots_equal_the_ones_kafka_writes(scenario, prefix):
    """Every partition kmigrate rewrote: its .snapshot files (names and bytes) equal the ones Kafka
    left after its recovery and clean stop. The sample's legacy partitions have no snapshot (a log
    dir from before 2.8) and kmigrate adds none; Kafka's are then empty (no producer ids in the
    data), which ``snapshot_differences`` accepts."""
    mine = {tp: scenario.sources[tp] for tp in scenario.rewritten if tp.startswith(prefix)}
    assert mine and not (diffs := realkafka.snapshot_differences(mine, scenario.rebuilt)), "\n".join(diffs)


@pytest.mark.parametrize("prefix", list(UPGRADES), ids=lambda p: {MIGR: "v2", "epoch-": "v2-assign-leader-epoch",
                                                                  "v1-": "v1"}[p])
def test_every_index_lookup_serves_the_right_record(scenario, prefix):
    """A fetch at every index entry's offset and at the offset before its batch, served from
    kmigrate's indexes by the clean load, starts where a full read says that offset is."""
    checked, wrong = 0, []
    for (topic, p, target), first in scenario.seeks.items():
        if topic.startswith(prefix):
            checked += 1
            if first != (want := expected_first(scenario.files[f"{topic}-{p}"].records, target)):
                wrong.append(f"{topic}-{p}: seek {target} served {first}, expected {want}")
    assert checked and not wrong, "\n".join(wrong)


@pytest.mark.parametrize("prefix", list(UPGRADES), ids=lambda p: {MIGR: "v2", "epoch-": "v2-assign-leader-epoch",
                                                                  "v1-": "v1"}[p])
def test_offsets_for_times_answers_as_on_the_original(scenario, prefix):
    """The Java consumer's offsetsForTimes on the upgraded copies (kmigrate's time indexes) = on the
    originals = the earliest offset whose timestamp is at or after the target."""
    checked, wrong = 0, []
    for (topic, p, ts), got in scenario.times.items():
        if not topic.startswith(prefix):
            continue
        name = f"{topic[len(prefix):]}-{p}"
        orig = scenario.times[(ORIG + topic[len(prefix):], p, ts)]
        want = expected_offset_for_time(scenario.files[ORIG + name].records, ts)
        if not got == orig == want:
            wrong.append(f"{name} at {ts}: upgraded {got}, original {orig}, by definition {want}")
        checked += 1
    assert checked >= 20 and not wrong, "\n".join(wrong)
