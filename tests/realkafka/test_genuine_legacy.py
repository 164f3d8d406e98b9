"""Apache Kafka judges `kmigrate upgrade` of GENUINE legacy data (issue #27, items 2 and 3).

``tests/fixtures/legacy-kafka39`` is a log dir that a real Kafka 3.9.2 broker in ZooKeeper mode
(``inter.broker.protocol.version=2.8``) wrote for topics at ``message.format.version`` 0.9.0 (v0)
and 0.10.2 (v1): uncompressed, gzip, snappy, lz4 messages, keyed and null-keyed, several segments
per partition, a LogAppendTime topic and a compacted topic its cleaner compacted
(tools/kafka/legacy_fixtures.py; MANIFEST.json says what wrote what). One real Kafka 4.4 node
serves four copies of every partition: ``orig-`` (the fixtures as Kafka 3.9 left them: the
before), ``migr-`` (``--to v2``), ``epoch-`` (``--to v2 --assign-leader-epoch``) and ``v1-``
(``--to v1``), plus ``badidx-``, the ``--to v2`` copy of one partition with one wrong offset-index
entry.

Two loads:

1. recovery (no clean-shutdown marker, no recovery points): every segment re-read by
   ``LogSegment.recover``; no complaint, the "Completed load" numbers of the files and of the run
   report, every record served by the Java consumer equal to the original's (kafka-python on the
   files) modulo the documented v0 conversion, .log files untouched after the clean stop;
2. clean (the marker and the recovery points Kafka wrote are kept): kmigrate's own ``.index``,
   ``.timeindex`` and ``.snapshot`` files are put back and loaded as they are; no complaint, and
   they must equal what Kafka's recovery rebuilt; a seek to every index entry's offset and to the
   offset before its batch serves the record a full read says is there; ``offsetsForTimes`` answers
   on the upgraded copies as on the original and as its definition says. The wrong index entry
   makes a seek land in the wrong batch: that judge fails.

The upgrades use ``index_interval_bytes=1024`` and the node's topics ``index.interval.bytes=1024``
(the fixtures' segments are a few KB), so the indexes compared have entries.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from migrations.upgrade.kafka_loader import read_log_dir
from support import kafka as realkafka
from support.kafka import (
    ConsumedRecord,
    KafkaNode,
    Load,
    PartitionFiles,
    as_consumed,
    corrupt_index_entry,
    expected_first,
    expected_offset_for_time,
    index_differences,
    judge_load,
    pick_timestamps,
    read_files,
    record_diff,
    seek_targets,
    upgraded,
)
from support.upgraded_copies import upgrade_copies

from migration.migrations.upgrade.driver import UpgradeOptions

pytestmark = pytest.mark.realkafka

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "legacy-kafka39"
MANIFEST = json.loads((FIXTURES / "MANIFEST.json").read_text())
INDEX_INTERVAL = 1024
ORIG, BADIDX = "orig-", "badidx-"
UPGRADES = {
    "migr-": UpgradeOptions(target="v2", index_interval_bytes=INDEX_INTERVAL),
    "epoch-": UpgradeOptions(target="v2", assign_leader_epoch=True, index_interval_bytes=INDEX_INTERVAL),
    "v1-": UpgradeOptions(target="v1", index_interval_bytes=INDEX_INTERVAL),
}
IDS = {"migr-": "v2", "epoch-": "v2-assign-leader-epoch", "v1-": "v1"}
BROKEN_INDEX = "v1-none-0"  # the partition whose --to v2 copy gets a wrong index entry


def _partitions() -> list[tuple[str, int]]:
    return [(t, int(p)) for t, d in MANIFEST["topics"].items() for p in d["partitions"]]


@dataclass
class Genuine:
    node: KafkaNode
    sources: dict[str, Path]  # "<prefix>topic-N" -> partition dir installed
    files: dict[str, PartitionFiles]
    report_leo: dict[str, int]
    rewritten: set[str]  # "<prefix>topic-N" whose segments kmigrate rewrote (the others were at the target)
    recovery_log: str
    clean_log: str
    consumed: dict[str, list[ConsumedRecord]]  # after the recovery load
    consumed_clean: dict[str, list[ConsumedRecord]]  # after the clean load
    logs_before: dict[str, dict[str, bytes]]
    logs_after: dict[str, dict[str, bytes]]
    rebuilt: dict[str, dict[str, bytes]]  # Kafka's index/snapshot files after its recovery
    seeks: dict[tuple[str, int, int], int | None]
    times: dict[tuple[str, int, int], tuple[int, int] | None]
    time_targets: list[tuple[str, int, int]]
    broken_entry: tuple[str, int, int]
    index_mismatches: set[str]  # .index files kafka-dump-log --verify-index-only finds mismatches in
    python_before: dict[str, list[tuple]]  # kafka-python oracle on the whole log dir
    python_after: dict[str, dict[str, list[tuple]]]  # prefix -> the same on the upgraded log dir
    timings: dict[str, float]


def _time_targets(files: dict[str, PartitionFiles]) -> list[tuple[str, int, int]]:
    """A few timestamps per v1 partition (CreateTime and LogAppendTime), the same for every copy."""
    out = []
    for (topic, p) in _partitions():
        if MANIFEST["topics"][topic]["magic"] == 1:
            for prefix in (ORIG, *UPGRADES):
                out += [(prefix + topic, p, ts) for ts in pick_timestamps(files[f"{ORIG}{topic}-{p}"].records)]
    return out


@pytest.fixture(scope="module")
def genuine(tmp_path_factory, kafka_node_factory) -> Genuine:
    return realkafka.shared_across_workers(tmp_path_factory, "genuine",
                                           lambda: _build(tmp_path_factory, kafka_node_factory))


def _build(tmp_path_factory, kafka_node_factory) -> Genuine:
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    work = tmp_path_factory.mktemp("genuine-")
    roots = {prefix: work / prefix.rstrip("-") for prefix in (ORIG, *UPGRADES)}
    for root in roots.values():
        shutil.copytree(FIXTURES / "kafka-logs", root / "kafka-logs", copy_function=shutil.copy2)
    python_before = read_log_dir(roots[ORIG] / "kafka-logs")

    upgraded = upgrade_copies(work, roots, UPGRADES, [Path("kafka-logs")])
    report_leo, rewritten = upgraded.report_leo, upgraded.rewritten
    timings.update(upgraded.timings)
    python_after = {prefix: read_log_dir(roots[prefix] / "kafka-logs") for prefix in UPGRADES}

    sources = {prefix + f"{t}-{p}": roots[prefix] / "kafka-logs" / f"{t}-{p}"
               for prefix in roots for t, p in _partitions()}
    bad = work / "badidx" / BROKEN_INDEX
    shutil.copytree(sources["migr-" + BROKEN_INDEX], bad, copy_function=shutil.copy2)
    sources[BADIDX + BROKEN_INDEX] = bad
    files = {tp: read_files(d) for tp, d in sources.items()}
    broken_entry = corrupt_index_entry(bad, files[BADIDX + BROKEN_INDEX])
    # Kafka's own index check, kafka-dump-log --verify-index-only: every entry against the batch at its position
    t = time.monotonic()
    indexes = [str(f) for tp in sorted(rewritten | {BADIDX + BROKEN_INDEX})
               for f in sorted(sources[tp].glob("*.index"))]
    dump = realkafka.run_tool(realkafka.LATEST, "kafka-dump-log", "--verify-index-only", "--files", ",".join(indexes))
    index_mismatches = set(re.findall(r"Mismatches in :(\S+)", dump.stderr))  # it reports them on stderr
    timings["kafka-dump-log --verify-index-only"] = time.monotonic() - t

    topics: dict[str, tuple[int, dict[str, str]]] = {}
    for name, t in MANIFEST["topics"].items():
        cfg = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": t["cleanup.policy"],
               "index.interval.bytes": str(INDEX_INTERVAL)}
        for prefix in roots:
            topics[prefix + name] = (len(t["partitions"]), cfg)
    topics[BADIDX + BROKEN_INDEX.rsplit("-", 1)[0]] = (1, {"retention.ms": "-1", "retention.bytes": "-1",
                                                           "index.interval.bytes": str(INDEX_INTERVAL)})

    node = kafka_node_factory(realkafka.LATEST)
    node.start()
    node.create_topics(topics)
    node.stop()
    # load 1: full recovery of every segment
    node.install_segments(sources)
    node.start()
    recovery_log = node.run_log()
    consumed = node.consume(sorted(topics))
    node.stop()
    logs_after = {tp: {f.name: f.read_bytes() for f in sorted((node.data / tp).glob("*.log"))} for tp in sources}
    logs_before = {tp: {f.name: f.read_bytes() for f in sorted(p.glob("*.log"))} for tp, p in sources.items()}
    # load 2: clean, on the sources' own indexes and snapshots
    rebuilt = node.install_indexes(sources)
    node.start()
    clean_log = node.run_log()
    consumed_clean = node.consume(sorted(topics))
    targets = [t for tp, d in sorted(sources.items()) if not tp.startswith(ORIG)
               for t in seek_targets(tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1]), d, files[tp])]
    seeks = node.seek_first(targets)
    time_targets = _time_targets(files)
    times = node.offsets_for_times(time_targets)
    node.stop()
    timings.update(node.timings)
    timings["module"] = time.monotonic() - t0
    print(f"\nKafka {node.version} judged the genuine legacy fixtures in {timings['module']:.1f}s: "
          + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + f"; logs in {node.logs}")
    return Genuine(node, sources, files, report_leo, rewritten, recovery_log, clean_log, consumed, consumed_clean,
                   logs_before, logs_after, rebuilt, seeks, times, time_targets, broken_entry, index_mismatches,
                   python_before,
                   python_after, timings)


def _expected(g: Genuine, prefix: str) -> dict[str, Load]:
    return {tp: f.load for tp, f in g.files.items() if tp.startswith(prefix)}


def _of(g: Genuine, prefix: str) -> list[str]:
    return sorted(tp for tp in g.files if tp.startswith(prefix))


# --- the fixtures are what the manifest says -------------------------------------------------
def test_the_fixtures_are_genuine_v0_and_v1_as_the_manifest_says():
    from migration.formats.file_records import read_batches
    assert MANIFEST["written_by"]["kafka"].startswith("3.9.")
    assert MANIFEST["written_by"]["inter.broker.protocol.version"] == "2.8"
    seen = {}
    for topic, t in MANIFEST["topics"].items():
        for p, d in t["partitions"].items():
            logs = sorted((FIXTURES / "kafka-logs" / f"{topic}-{p}").glob("*.log"))
            assert len(logs) == d["segments"] >= 3
            batches = [b for log in logs for b in read_batches(log, strict=True)]
            assert {b.magic for b in batches} == {t["magic"]}, topic
            assert {b.compression.label for b in batches} == set(t["compression"]), topic
            seen[topic] = sum(b.record_count for b in batches)
            assert seen[topic] == d["records_in_files"]
    kinds = {(t["magic"], c) for t in MANIFEST["topics"].values() for c in t["compression"]}
    assert kinds >= {(m, c) for m in (0, 1) for c in ("none", "gzip", "snappy", "lz4")}
    assert any(t["timestamp.type"] == "LogAppendTime" for t in MANIFEST["topics"].values())
    assert any(t["cleanup.policy"] == "compact" for t in MANIFEST["topics"].values())
    for rel, digest in MANIFEST["files_sha256"].items():
        import hashlib
        assert hashlib.sha256((FIXTURES / rel).read_bytes()).hexdigest() == digest, f"{rel} changed since generated"


# --- load 1: full recovery -------------------------------------------------------------------
def test_kafka_recovers_the_original_genuine_legacy_dir(genuine):
    assert any(d == str(genuine.node.data) for _, d in realkafka.RECOVERING.findall(genuine.recovery_log))
    judge_load(genuine.recovery_log, _expected(genuine, ORIG), log_path=genuine.node.server_log,
               all_partitions=genuine.files)
    for tp in _of(genuine, ORIG):
        assert not (d := record_diff(genuine.consumed[tp], as_consumed(genuine.files[tp].records))), f"{tp}: {d}"


@pytest.mark.parametrize("prefix", list(UPGRADES), ids=IDS.get)
def test_kafka_recovers_and_serves_the_upgraded_genuine_dir(genuine, prefix):
    judge_load(genuine.recovery_log, _expected(genuine, prefix), log_path=genuine.node.server_log,
               all_partitions=genuine.files)
    assert any(tp in genuine.report_leo for tp in _of(genuine, prefix)), prefix  # the log-end check below runs
    for tp in _of(genuine, prefix):
        name = tp[len(prefix):]
        orig = genuine.files[ORIG + name]
        assert genuine.files[tp].load == orig.load, f"{name}: upgraded files load differently"
        # the log end the run report gives, where its last segment was rewritten
        if tp in genuine.report_leo:
            assert genuine.files[tp].load.log_end_offset == genuine.report_leo[tp], (tp, genuine.report_leo.get(tp))
        want = as_consumed(upgraded(orig.records))
        assert not (d := record_diff(genuine.consumed[tp], want)), f"{tp} served vs the original files: {d}"
        before = [ConsumedRecord(r.offset, r.timestamp, "CREATE_TIME" if r.timestamp_type == "NO_TIMESTAMP_TYPE"
                                 else r.timestamp_type, r.key, r.value, r.headers)
                  for r in genuine.consumed[ORIG + name]]
        assert genuine.consumed[tp] == before, f"{name}: Kafka serves the upgrade differently from the original"


@pytest.mark.parametrize("prefix", list(UPGRADES), ids=IDS.get)
def test_kafka_python_reads_the_same_records_before_and_after(genuine, prefix):
    """The kafka-python oracle on the whole log dirs: (offset, key, value, headers) equal; the
    timestamps equal for v1 data, -1 for v0 after (None before: v0 has none)."""
    before, after = genuine.python_before, genuine.python_after[prefix]
    assert sorted(after) == sorted(before)
    for tp, recs in before.items():
        assert [(o, k, v, h) for o, _, k, v, h in after[tp]] == [(o, k, v, h) for o, _, k, v, h in recs], tp
        assert [ts if ts is not None else -1 for _, ts, *_ in recs] == [ts for _, ts, *_ in after[tp]], tp


def test_kafka_leaves_every_genuine_log_file_as_written(genuine):
    changed = sorted(tp for tp in genuine.logs_before if genuine.logs_before[tp] != genuine.logs_after[tp])
    assert changed == [], changed


# --- load 2: clean, on kmigrate's own indexes and snapshots ----------------------------------
def test_the_clean_load_uses_the_installed_files_without_a_complaint(genuine):
    """No recovery (the marker was kept), no corrupted-index or producer-snapshot line, the same
    Completed-load numbers, and the same records served."""
    assert not any(d == str(genuine.node.data) for _, d in realkafka.RECOVERING.findall(genuine.clean_log))
    judge_load(genuine.clean_log, {tp: f.load for tp, f in genuine.files.items()}, log_path=genuine.node.server_log)
    assert genuine.consumed_clean == genuine.consumed


@pytest.mark.parametrize("prefix", list(UPGRADES), ids=IDS.get)
def test_kmigrates_indexes_equal_the_ones_kafka_rebuilds(genuine, prefix):
    """Every partition kmigrate rewrote: its .index and .timeindex entries equal those of Kafka's
    recovery (same index.interval.bytes). A partition already at the target (v1 data under --to v1)
    keeps Kafka 3.9's indexes, written at append time (one entry per produce request, not per batch)."""
    mine = [tp for tp in _of(genuine, prefix) if tp in genuine.rewritten]
    assert mine
    diffs = [d for tp in mine for d in index_differences(genuine.sources[tp], genuine.rebuilt[tp])]
    assert not diffs, "\n".join(diffs)


@pytest.mark.parametrize("prefix", list(UPGRADES), ids=IDS.get)
def test_every_index_lookup_serves_the_right_record(genuine, prefix):
    """A fetch at every index entry's offset and at the offset before the batch it points at
    starts where a full read says that offset is (the clean load serves from the installed indexes)."""
    assert any(t.startswith(prefix) for t, _, _ in genuine.seeks)
    _judge_lookups(genuine, prefix)


@pytest.mark.parametrize("prefix", list(UPGRADES), ids=IDS.get)
def test_offsets_for_times_answers_as_on_the_original(genuine, prefix):
    """The Java consumer's offsetsForTimes on the upgraded copy (kmigrate's time index) = on the
    original (Kafka 3.9's time index) = the earliest offset whose timestamp is at or after it.

    Kafka's documented exception: a segment without timestamps (the compacted topic's segments that
    the 3.9 cleaner emptied) reports its file's mtime as its largest timestamp
    (``LogSegment.largestTimestamp``), so a lookup before the mtime stops in the first empty segment
    and answers nothing, on the original as on the upgrade; there only before = after is required."""
    checked, wrong = 0, []
    for (topic, p, ts) in genuine.time_targets:
        if not topic.startswith(prefix):
            continue
        name = f"{topic[len(prefix):]}-{p}"
        got = genuine.times[(topic, p, ts)]
        orig = genuine.times[(ORIG + topic[len(prefix):], p, ts)]
        want = expected_offset_for_time(genuine.files[ORIG + name].records, ts)
        if got != orig or (got != want and not _before_an_empty_segment(genuine, prefix, name, ts)):
            wrong.append(f"{name} at {ts}: upgraded {got}, original {orig}, by definition {want}")
        checked += 1
    assert checked >= 40 and not wrong, "\n".join(wrong)


def _before_an_empty_segment(g: Genuine, prefix: str, name: str, ts: int) -> bool:
    """A lookup at ``ts`` stops in an empty segment of the partition (original or upgraded copy,
    as installed: copied with their mtimes): one whose mtime (ms), its largest timestamp for
    Kafka, is at or after ``ts``."""
    return any(f.stat().st_size == 0 and ts <= f.stat().st_mtime_ns // 1_000_000
               for d in (g.sources[ORIG + name], g.sources[prefix + name]) for f in d.glob("*.log"))


def test_a_wrong_index_entry_fails_the_judge(genuine):
    """One offset-index entry of the --to v2 copy claims its batch starts one offset early: Kafka's
    index check (kafka-dump-log --verify-index-only) reports it, and only it among every index
    kmigrate wrote; the broker loads it without a word (a clean load sanity-checks only the
    transaction index: LogSegment.sanityCheck), but a fetch at that offset is sent to the later
    batch, and the lookup judge fails."""
    name, entry, wrong = genuine.broken_entry
    tp = BADIDX + BROKEN_INDEX
    assert genuine.index_mismatches == {str(genuine.sources[tp] / name)}, genuine.index_mismatches
    topic, part = tp.rsplit("-", 1)
    judge_load(genuine.clean_log, {tp: genuine.files[tp].load}, log_path=genuine.node.server_log)
    served = genuine.seeks[(topic, int(part), wrong)]
    assert served is not None and served > wrong, (name, entry, wrong, served)
    with pytest.raises(AssertionError, match=rf"seek {wrong} served {served}, expected {wrong}"):
        _judge_lookups(genuine, BADIDX)


def _judge_lookups(g: Genuine, prefix: str) -> None:
    wrong = [f"{t}-{p}: seek {o} served {first}, expected {want}"
             for (t, p, o), first in g.seeks.items() if t.startswith(prefix)
             if first != (want := expected_first(g.files[f"{t}-{p}"].records, o))]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("prefix", list(UPGRADES), ids=IDS.get)
def test_kmigrates_snapshots_equal_the_ones_kafka_writes(genuine, prefix):
    """Every partition kmigrate rewrote: its .snapshot files (names = offsets, and bytes) equal the
    ones Kafka left after its recovery and clean stop (at the segment boundaries and the log end)."""
    mine = {tp: genuine.sources[tp] for tp in _of(genuine, prefix) if tp in genuine.rewritten}
    assert mine
    assert not (diffs := realkafka.snapshot_differences(mine, genuine.rebuilt)), "\n".join(diffs)
