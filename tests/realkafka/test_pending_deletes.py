"""`kmigrate upgrade` of a log dir in which a real Kafka 4.x broker, stopped cleanly, left
``.deleted`` files (kmigrate once refused such a log dir, exit 3, as if a replacement of its own
had not finished).

Retention renames an expired segment's files to ``.deleted`` and removes them
``file.delete.delay.ms`` later (``UnifiedLog.deleteRetentionMsBreachedSegments`` →
``LocalLog.deleteSegmentFiles``, a scheduled task); a clean stop drops the scheduled removals,
so the files stay beside the clean-shutdown marker, and the next start removes them
(``LogLoader.removeTempFilesAndCollectSwapFiles``). One node of the newest
Kafka gets two topics that roll a segment every 500 ms: ``expiring`` (2 s retention, the removal
delayed 10 minutes) and ``kept`` (no retention). A producer writes to both until ``.deleted``
files are there; the node stops cleanly. Then, as an operator runs it: a dry run exits 0, says
the run removes the ``.deleted`` files and changes nothing in the log dir; the run exits 0, warns
that it removed them and leaves every other file as it was (the data is v2 already). The node
starts again on the log dir: its load prints no complaint and the "Completed load" numbers of
the files, and the Java consumer reads every record of ``kept``, exactly as produced, in order.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaProducer
from support import kafka as realkafka
from support.kafka import RECOVERING, ConsumedRecord, judge_load, read_files, record_diff

from migration.audit.store import ReportStore

pytestmark = pytest.mark.realkafka

EXPIRING, KEPT = "expiring", "kept"
RUN_ID = "pending-deletes"
DRY_RUN_ID = "pending-deletes-dry"
MARKER = ".kafka_cleanshutdown"
# The retention task runs every 500 ms from the start (log.initial.task.delay.ms defaults to 30 s,
# LogManager.startup). The node's SERVER_PROPERTIES turn retention off broker-wide: the topics'
# own retention.ms overrides it.
BROKER = {"log.retention.check.interval.ms": "500", "log.initial.task.delay.ms": "0",
          "log.segment.delete.delay.ms": "600000"}
# Kafka 4.x's segment.bytes is at least 1 MiB (LogConfig): segments roll by age instead, at the
# first append 500 ms after their first (UnifiedLog.maybeRoll, LogSegment.shouldRoll).
TOPICS = {
    EXPIRING: (1, {"segment.ms": "500", "retention.ms": "2000", "retention.bytes": "-1",
                   "file.delete.delay.ms": "600000"}),
    KEPT: (1, {"segment.ms": "500", "retention.ms": "-1", "retention.bytes": "-1"}),
}
# segments of `expiring` renamed to .deleted (each with its .index and .timeindex) before the stop
MIN_DELETED_SEGMENTS = 4
PRODUCE_DEADLINE_S = 60


def _listing(d: Path) -> dict[str, tuple[int, int, str]]:
    """Every file and directory under ``d``: size, mtime (ns) and SHA-256 (files)."""
    out = {}
    for p in sorted(d.rglob("*")):
        st = p.stat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        out[str(p.relative_to(d))] = (st.st_size if p.is_file() else 0, st.st_mtime_ns, digest)
    return out


def _produce(node: realkafka.KafkaNode) -> list[ConsumedRecord]:
    """Records to both topics until retention has renamed segments of ``expiring`` to ``.deleted``
    (fails after PRODUCE_DEADLINE_S: a test whose premise did not happen must not pass). Returns
    what ``kept`` holds: offset, timestamp, key, value, headers of each record."""
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks="all", enable_idempotence=True,
                             linger_ms=5, request_timeout_ms=30000)
    sent: list[ConsumedRecord] = []
    expiring = node.data / f"{EXPIRING}-0"
    t0 = time.monotonic()
    try:
        while True:
            futures = []
            for _ in range(25):
                i = len(sent)
                ts = int(time.time() * 1000)
                key, value = f"key-{i:06d}".encode(), f"value-{i:06d}-".encode() + bytes(range(i % 97))
                headers = [("n", str(i).encode())]
                for topic in (EXPIRING, KEPT):
                    futures.append((topic, i, producer.send(topic, key=key, value=value, headers=headers,
                                                            timestamp_ms=ts)))
                sent.append(ConsumedRecord(i, ts, "CREATE_TIME", key, value, (("n", str(i).encode()),)))
            producer.flush()
            for topic, i, f in futures:
                md = f.get(timeout=30)
                assert md.offset == i, f"{topic}: record {i} written at offset {md.offset}"
            deleted = len(list(expiring.glob("*.log.deleted")))
            if deleted >= MIN_DELETED_SEGMENTS:
                break
            if time.monotonic() - t0 > PRODUCE_DEADLINE_S:
                raise AssertionError(f"{deleted} segment(s) of {EXPIRING} deleted by retention after "
                                     f"{PRODUCE_DEADLINE_S}s of producing; logs in {node.logs}\n{node.tail()}")
            time.sleep(0.05)
    finally:
        producer.close()
    return sent


def _kmigrate(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KMIGRATE_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "migration", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def test_an_upgrade_removes_the_deleted_files_a_clean_stop_left(tmp_path, kafka_node_factory, monkeypatch) -> None:
    t0 = time.monotonic()
    node = kafka_node_factory(realkafka.LATEST, properties=BROKER)
    node.start()
    node.create_topics(TOPICS)
    t_produce = time.monotonic()
    produced = _produce(node)
    t_produce = time.monotonic() - t_produce
    node.stop()

    data = node.data
    assert (data / MARKER).is_file(), f"no clean-shutdown marker after the SIGTERM; logs in {node.logs}"
    pending = sorted(data.rglob("*.deleted"))
    assert len([p for p in pending if p.name.endswith(".log.deleted")]) >= MIN_DELETED_SEGMENTS, (
        f"the clean stop left {[p.name for p in pending]}; logs in {node.logs}")
    assert {p.parent.name for p in pending} == {f"{EXPIRING}-0"}, pending
    assert len(list((data / f"{KEPT}-0").glob("*.log"))) > 1, "the kept topic did not roll"
    before = _listing(data)

    home = tmp_path / "kmigrate-home"
    dry = _kmigrate(home, "upgrade", str(data), "--to", "v2", "--engine", "inline", "--dry-run",
                    "--run-id", DRY_RUN_ID)
    assert dry.returncode == 0, f"dry run exited {dry.returncode}\n{dry.stdout[-4000:]}\n{dry.stderr[-4000:]}"
    assert _listing(data) == before, "the dry run changed the log dir"
    monkeypatch.setenv("KMIGRATE_HOME", str(home))
    dry_warnings = [w.message for w in ReportStore().load(DRY_RUN_ID).warnings]
    assert any(f"{len(pending)} .deleted file(s)" in w and "the run removes them first" in w
               for w in dry_warnings), dry_warnings
    assert f"{len(pending)} .deleted file(s)" in dry.stdout + dry.stderr, dry.stdout + dry.stderr

    run = _kmigrate(home, "upgrade", str(data), "--to", "v2", "--engine", "inline", "--run-id", RUN_ID)
    # before 2d4a349: exit 3, "leftover files of an interrupted segment replacement: ...deleted"
    assert run.returncode == 0, f"the run exited {run.returncode}\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    assert not list(data.rglob("*.deleted")), "the run left .deleted files"
    warnings = [w.message for w in ReportStore().load(RUN_ID).warnings]
    assert any(w.startswith(f"removed {len(pending)} .deleted file(s)") for w in warnings), warnings
    # v2 data is at the target: apart from the .deleted files (and the mtime of the directory
    # that held them) the run changed nothing, the marker and the checkpoints included. It held
    # the log dir's .lock as Kafka does and leaves it, empty; Kafka's clean stop had deleted
    # Kafka's own (FileLock.destroy, from LogManager.shutdown).
    removed = {str(p.relative_to(data)) for p in pending}
    after = _listing(data)
    assert set(before) - set(after) == removed, sorted(set(before) - set(after) ^ removed)
    assert set(after) - set(before) <= {".lock"}, sorted(set(after) - set(before))
    kept = set(before) - removed - {f"{EXPIRING}-0"}
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}, "the run changed more than the .deleted files"
    assert after.get(".lock", (0,))[0] == 0

    files = {tp: read_files(data / tp) for tp in (f"{EXPIRING}-0", f"{KEPT}-0")}
    node.start()
    load_log = node.run_log()
    consumed = node.consume([KEPT])
    node.stop()
    # the marker was kept: a clean load (hadCleanShutdown), no recovery of the data dir
    assert not [m for m in RECOVERING.finditer(load_log) if Path(m[2]) == data], load_log[-3000:]
    judge_load(load_log, {tp: f.load for tp, f in files.items()}, log_path=node.server_log)
    got = consumed.get(f"{KEPT}-0", [])
    assert not record_diff(got, produced), record_diff(got, produced)
    assert [r.offset for r in got] == list(range(len(produced)))
    print(f"\n{len(pending)} .deleted files ({len(produced)} records a topic, produced in {t_produce:.1f}s) "
          f"removed by the run, loaded by Kafka {node.version}; {time.monotonic() - t0:.1f}s "
          f"({', '.join(f'{k} {v:.1f}s' for k, v in node.timings.items())})")
