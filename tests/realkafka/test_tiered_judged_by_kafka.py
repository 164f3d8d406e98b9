"""Apache Kafka's tiered storage judges `kmigrate tier-prepare` (issue #27, item 5).

A real Kafka 4.4 node with ``remote.log.storage.system.enable=true``, Kafka's own
``LocalTieredStorage`` (the storage module's test fixtures, ``kafka-storage:4.4.0:test-fixtures``,
pinned in tools/kafka/4.4.0/pom.xml) as the RemoteStorageManager and the default topic-based
RemoteLogMetadataManager, loads three copies of two legacy partitions of the sample cluster
(``legacy-v0-0``: v0, ``clicks-v1-0``: v1; segments of 16 KB, so each has several) in topics with
``remote.storage.enable=true``, ``remote.copy.lag.ms=0`` and ``local.retention.ms=1000``:

- ``bare-``: ``kmigrate upgrade --to v2`` only: the batches carry no leader epoch and the
  partition has no ``leader-epoch-checkpoint``; the RemoteLogManager's copy task fails with
  ``IllegalArgumentException: segmentLeaderEpochs can not be null or empty``
  (``RemoteLogSegmentMetadata``'s constructor) and copies nothing;
- ``nosnap-``: ``--to v2 --assign-leader-epoch``: epochs, but no producer snapshot at the next
  segment's base offset (the sample's legacy partitions have none, as a log dir from before
  Kafka 2.8); the copy task fails with a ``NullPointerException`` (``producerStateSnapshotFile``
  dereferenced in ``RLMCopyTask.copyLogSegment``) and copies nothing;
- ``prep-``: the same upgrade, then ``kmigrate tier-prepare --snapshots-only``: every closed
  segment is copied ("Copied <segment>.log to remote storage with segment-id"), LocalTieredStorage's
  directory holds each segment byte for byte, local retention then deletes the local copies, and
  the Java consumer reads every record, now served from the remote tier, equal to the original's.

The load is a CLEAN one (the clean-shutdown marker kept, the recovery points at the log end): an
unclean load would rebuild a producer snapshot at every recovered segment's boundary itself and
hide the missing ones (a clean load without snapshots takes empty ones only at the last two
segments' bases and the log end).
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
    KafkaNode,
    PartitionFiles,
    as_consumed,
    judge_load,
    read_files,
    read_offset_checkpoint,
    record_diff,
    upgraded,
    write_offset_checkpoint,
)

from migration.audit.model import UnitStatus
from migration.migrations.tier.driver import execute_tier
from migration.migrations.tier.options import TierOptions
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade

pytestmark = pytest.mark.realkafka

VERSION = "4.4.0"
RSM_CLASS = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
RSM_JAR = f"kafka-storage-{VERSION}-test-fixtures.jar"
PARTITIONS = ("legacy-v0-0", "clicks-v1-0")
VARIANTS = ("bare-", "nosnap-", "prep-")
SEGMENT_BYTES = 16 * 1024
WAIT_S = 60

# What the RemoteLogManager's copy task logs (Kafka 4.4 storage/.../RemoteLogManager.java,
# RLMCopyTask.copyLogSegmentsToRemote and copyLogSegment; RLMTask.run for the retries)
COPIED = re.compile(r"Copied (\d{20})\.log to remote storage with segment-id: \S+")
COPY_ERROR = "Error occurred while copying log segments of partition: "
NO_EPOCHS = "java.lang.IllegalArgumentException: segmentLeaderEpochs can not be null or empty"
NO_SNAPSHOT = "java.lang.NullPointerException"


@dataclass
class Tiered:
    node: KafkaNode
    remote_root: Path
    sources: dict[str, Path]
    files: dict[str, PartitionFiles]
    original: dict[str, PartitionFiles]
    run_log: str
    copy_errors: dict[str, list[str]]  # partition -> the copy task's error blocks (message + stack trace)
    copied: dict[str, list[int]]  # partition -> base offsets of the segments Kafka says it copied
    remote_logs: dict[str, dict[str, bytes]]  # partition -> LocalTieredStorage's .log files (start offset -> bytes)
    remote_snapshots: dict[str, dict[str, bytes]]  # the same for the producer snapshots shipped with them
    local_logs_left: dict[str, list[str]]  # partition -> .log files left locally after local retention
    consumed: dict[str, list[ConsumedRecord]]
    timings: dict[str, float]


def _copy_error_blocks(text: str, tp: str) -> list[str]:
    """Each "Error occurred while copying log segments of partition: <topicId>:<tp>" line with the
    stack trace log4j prints under it."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if COPY_ERROR in line and re.search(rf":{re.escape(tp)}(?![\w.-])", line):
            block = [line]
            for nxt in lines[i + 1:]:
                if nxt.startswith("["):  # the next log record
                    break
                block.append(nxt)
            out.append("\n".join(block))
    return out


def _copied(text: str, tp: str) -> list[int]:
    return sorted({int(m[1]) for line in text.splitlines() if f"{tp}]" in line or f":{tp}" in line
                   for m in [COPIED.search(line)] if m})


def _install_clean(node: KafkaNode, placements: dict[str, Path], files: dict[str, PartitionFiles]) -> None:
    """The node stopped cleanly: every file of each partition but partition.metadata replaced by the
    source's (.log, indexes, snapshots, leader-epoch-checkpoint), the clean-shutdown marker kept and
    the recovery point set to the log end, so the next start loads the files as they are."""
    assert node.proc is None and (node.data / ".kafka_cleanshutdown").is_file()
    for tp, src in placements.items():
        dst = node.data / tp
        assert (dst / "partition.metadata").is_file(), dst
        for f in dst.iterdir():
            if f.name != "partition.metadata":
                f.unlink()
        for f in sorted(src.iterdir()):
            if f.is_file() and (re.match(r"^\d{20}\.(log|index|timeindex|txnindex|snapshot)$", f.name)
                                or f.name == "leader-epoch-checkpoint"):
                shutil.copy2(f, dst / f.name)
    cp = node.data / "recovery-point-offset-checkpoint"
    entries = [e for e in read_offset_checkpoint(cp) if f"{e[0]}-{e[1]}" not in placements]
    entries += [(tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1]), files[tp].load.log_end_offset) for tp in placements]
    write_offset_checkpoint(cp, entries)


def _wait(what: str, node: KafkaNode, done, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if node.proc is None or node.proc.poll() is not None:
            raise AssertionError(f"Kafka exited while waiting for {what}; logs in {node.logs}\n{node.tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} in {timeout}s; logs in {node.logs}\n{node.tail(80)}")
        time.sleep(0.5)


def _build(tmp_path_factory) -> Tiered:
    from migration.demo.sample_cluster import TOPICS, build_sample_cluster

    timings: dict[str, float] = {}
    t0 = time.monotonic()
    work = tmp_path_factory.mktemp("tiered-")
    sample = build_sample_cluster(work / "sample", brokers=1, segment_bytes=SEGMENT_BYTES)
    log_dir = sample.log_dirs[0]
    original = {tp: read_files(log_dir / tp) for tp in PARTITIONS}
    roots = {}
    for variant in VARIANTS:
        roots[variant] = work / variant.rstrip("-") / "kafka-logs"
        shutil.copytree(log_dir, roots[variant], copy_function=shutil.copy2)
    others = {t.name: "not judged here" for t in TOPICS if t.name not in {tp.rsplit("-", 1)[0] for tp in PARTITIONS}}
    meta_dirs = [n.metadata_log_dir for n in sample.description.controllers if n.metadata_log_dir]
    store = work / "store"  # named, never written: --snapshots-only uploads nothing
    store.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for variant in VARIANTS:
            t = time.monotonic()
            out = work / "out" / variant.rstrip("-")
            mp.setenv("KMIGRATE_OUT", str(out))
            mp.setenv("KMIGRATE_REPORT_ROOT", str(out / "reports"))
            mp.setenv("KMIGRATE_BACKUP_ROOT", str(out / "backups"))
            report = execute_upgrade([str(roots[variant])], engine="inline", options=UpgradeOptions(
                target="v2", assign_leader_epoch=variant != "bare-", segment_bytes=SEGMENT_BYTES,
                excluded_topics=others))
            assert report.exit_code() == 0, (report.errors, report.refusal)
            if variant == "prep-":  # kmigrate tier-prepare --snapshots-only
                report = execute_tier([str(roots[variant])], engine="inline", options=TierOptions(
                    snapshots_only=True, store_url=store.as_uri(), excluded_topics=others,
                    metadata_log_dirs=meta_dirs))
                assert report.exit_code() == 0, (report.errors, report.refusal,
                                                 [(tp, p, u.errors) for _b, tp, p, u in report.problem_units()])
                assert any(u.status is UnitStatus.OK for _b, _t, _p, u in report.iter_units())
            timings[f"kmigrate ({variant.rstrip('-')})"] = time.monotonic() - t
    sources = {variant + tp: roots[variant] / tp for variant in VARIANTS for tp in PARTITIONS}
    files = {tp: read_files(d) for tp, d in sources.items()}
    for tp, d in sources.items():  # what each variant is made of
        snaps = {int(f.name[:20]) for f in d.glob("*.snapshot")}
        bases = sorted(int(f.name[:20]) for f in d.glob("*.log"))
        # what the copy of a closed segment needs: a snapshot at the next segment's base offset
        assert (set(bases[1:]) <= snaps) if tp.startswith("prep-") else not snaps, (tp, sorted(snaps), bases)
        epochs = d / "leader-epoch-checkpoint"
        assert (epochs.is_file() and len(epochs.read_text().split()) > 2) == (not tp.startswith("bare-")), tp
        assert files[tp].load.segments >= 4, (tp, files[tp].load)

    remote_root = work / "remote"
    remote_root.mkdir()
    node = KafkaNode(VERSION, work / "node")
    with open(node.props, "a") as f:
        f.write("\n".join([
            "# tiered storage: Kafka's LocalTieredStorage and the topic-based RLMM",
            "remote.log.storage.system.enable=true",
            f"remote.log.storage.manager.class.name={RSM_CLASS}",
            f"remote.log.storage.manager.class.path={realkafka.lib_dir(VERSION) / RSM_JAR}",
            f"rsm.config.dir={remote_root}",
            "remote.log.metadata.manager.listener.name=PLAINTEXT",
            "rlmm.config.remote.log.metadata.topic.replication.factor=1",
            "rlmm.config.remote.log.metadata.topic.num.partitions=1",
            "remote.log.manager.task.interval.ms=1000",
            "log.retention.check.interval.ms=1000",
            "log.initial.task.delay.ms=0",
            "log.segment.delete.delay.ms=0",
            ""]))
    try:
        node.format()
        node.start()
        cfg = {"retention.ms": "-1", "retention.bytes": "-1", "remote.storage.enable": "true",
               "remote.copy.lag.ms": "0", "local.retention.ms": "1000"}
        node.create_topics({variant + tp.rsplit("-", 1)[0]: (1, cfg) for variant in VARIANTS for tp in PARTITIONS})
        node.stop()
        _install_clean(node, sources, files)
        node.start()
        t = time.monotonic()

        def settled() -> bool:
            text = node.run_log()
            return all((_copied(text, tp) if tp.startswith("prep-") else _copy_error_blocks(text, tp))
                       for tp in sources) and all(
                len(_copied(text, tp)) >= files[tp].load.segments - 1 for tp in sources if tp.startswith("prep-"))

        _wait("copy of every closed prep- segment and a copy error for every other partition", node, settled)
        timings["tiering"] = time.monotonic() - t
        t = time.monotonic()

        def local_deleted() -> bool:
            return all(len(list((node.data / tp).glob("*.log"))) == 1 for tp in sources if tp.startswith("prep-"))

        _wait("local retention deleting the tiered prep- segments", node, local_deleted)
        timings["local retention"] = time.monotonic() - t
        run_log = node.run_log()
        local_logs_left = {tp: sorted(f.name for f in (node.data / tp).glob("*.log")) for tp in sources}
        consumed = node.consume(sorted({tp.rsplit("-", 1)[0] for tp in sources}))
        node.stop()
    except BaseException:
        node.kill()
        raise
    remote_logs: dict[str, dict[str, bytes]] = {}
    remote_snapshots: dict[str, dict[str, bytes]] = {}
    for tp in sources:  # <dir>/kafka-tiered-storage/<topic>-<partition>-<topic id>/<start offset>-<segment id>.<kind>
        found = [d for d in (remote_root / "kafka-tiered-storage").glob(f"{tp}-*") if d.is_dir()]
        remote_logs[tp] = {f.name.split("-", 1)[0]: f.read_bytes() for d in found for f in sorted(d.glob("*.log"))}
        remote_snapshots[tp] = {f.name.split("-", 1)[0]: f.read_bytes() for d in found
                                for f in sorted(d.glob("*.snapshot"))}
    timings.update(node.timings)
    timings["module"] = time.monotonic() - t0
    print(f"\nKafka {VERSION} tiered the prepared legacy partitions in {timings['module']:.1f}s: "
          + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + f"; logs in {node.logs}")
    return Tiered(node, remote_root, sources, files, original, run_log,
                  {tp: _copy_error_blocks(run_log, tp) for tp in sources}, {tp: _copied(run_log, tp) for tp in sources},
                  remote_logs, remote_snapshots, local_logs_left, consumed, timings)


@pytest.fixture(scope="module")
def tiered(tmp_path_factory) -> Tiered:
    return realkafka.shared_across_workers(tmp_path_factory, "tiered", lambda: _build(tmp_path_factory))


def _of(variant: str) -> list[str]:
    return [variant + tp for tp in PARTITIONS]


def test_the_clean_load_took_every_copy_as_it_is(tiered):
    judge_load(tiered.run_log, {tp: f.load for tp, f in tiered.files.items()}, log_path=tiered.node.server_log)
    assert not realkafka.RECOVERING.search(tiered.run_log), "the load recovered segments: snapshots rebuilt by Kafka"


def test_unprepared_without_leader_epochs_kafka_refuses_to_tier_and_copies_nothing(tiered):
    for tp in _of("bare-"):
        errors = tiered.copy_errors[tp]
        assert errors and all(NO_EPOCHS in e for e in errors), f"{tp}: {errors[:1]}"
        assert "RemoteLogSegmentMetadata.<init>" in errors[0], errors[0]
        assert not tiered.copied[tp] and not tiered.remote_logs[tp], tp
        assert {f.name for f in tiered.sources[tp].glob("*.log")} <= set(tiered.local_logs_left[tp]), \
            f"{tp}: local segments deleted untiered: {tiered.local_logs_left[tp]}"


def test_unprepared_without_producer_snapshots_kafka_fails_with_a_null_pointer_and_copies_nothing(tiered):
    for tp in _of("nosnap-"):
        errors = tiered.copy_errors[tp]
        assert errors and all(NO_SNAPSHOT in e for e in errors), f"{tp}: {errors[:1]}"
        assert "RLMCopyTask.copyLogSegment" in errors[0], errors[0]
        assert NO_EPOCHS not in "".join(errors), "--assign-leader-epoch gave the segments their epochs"
        assert not tiered.copied[tp] and not tiered.remote_logs[tp], tp
        assert {f.name for f in tiered.sources[tp].glob("*.log")} <= set(tiered.local_logs_left[tp]), \
            f"{tp}: local segments deleted untiered: {tiered.local_logs_left[tp]}"


def test_prepared_every_closed_segment_is_copied_byte_for_byte(tiered):
    for tp in _of("prep-"):
        assert not tiered.copy_errors[tp], tiered.copy_errors[tp][0]
        bases = sorted(int(f.name[:20]) for f in tiered.sources[tp].glob("*.log"))
        copied = tiered.copied[tp]
        # every closed segment; the last one too once local retention rolled the active segment
        # (UnifiedLog deletes an expired active segment by rolling it first)
        assert copied[:len(bases) - 1] == bases[:-1] and set(copied[len(bases) - 1:]) <= {bases[-1]}, \
            f"{tp}: Kafka copied {copied}, the segments are {bases}"
        remote = tiered.remote_logs[tp]
        assert sorted(int(k) for k in remote) == copied, (tp, sorted(remote))
        for base, data in remote.items():
            assert data == (tiered.sources[tp] / f"{base}.log").read_bytes(), f"{tp}/{base}.log differs in the tier"
        # the producer snapshot Kafka ships with each segment is kmigrate's, at the next segment's base
        assert sorted(int(b) for b in tiered.remote_snapshots[tp]) == copied, (tp, sorted(tiered.remote_snapshots[tp]))
        for base, data in tiered.remote_snapshots[tp].items():
            nxt = bases[bases.index(int(base)) + 1] if int(base) != bases[-1] else tiered.files[tp].load.log_end_offset
            ours = tiered.sources[tp] / f"{nxt:020d}.snapshot"
            if ours.exists():
                assert data == ours.read_bytes(), f"{tp}: the snapshot shipped with {base}.log is not kmigrate's"
            else:
                assert nxt == tiered.files[tp].load.log_end_offset, (tp, base)


def test_prepared_records_are_served_from_the_remote_tier_as_the_originals(tiered):
    for tp in _of("prep-"):
        # local retention left only the active segment: every record below it comes from the tier
        assert len(tiered.local_logs_left[tp]) == 1, tiered.local_logs_left[tp]
        local_base = int(tiered.local_logs_left[tp][0][:20])
        bases = sorted(int(f.name[:20]) for f in tiered.sources[tp].glob("*.log"))
        # the last original segment, or, once retention rolled it, an empty one at the log end
        assert local_base in (bases[-1], tiered.files[tp].load.log_end_offset), (tp, local_base)
        assert sum(r.offset < local_base for r in tiered.files[tp].records) > 0.8 * len(tiered.files[tp].records)
    for variant in VARIANTS:
        for name in PARTITIONS:
            want = as_consumed(upgraded(tiered.original[name].records))
            assert want and not (d := record_diff(tiered.consumed[variant + name], want)), f"{variant}{name}: {d}"
