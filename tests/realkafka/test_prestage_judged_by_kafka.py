"""Apache Kafka judges `kmigrate upgrade --prestage` / `--stage` as an operator lives it.

1. A real Kafka 3.9.2 broker in ZooKeeper mode (``inter.broker.protocol.version=2.8``, what
   tools/kafka/legacy_fixtures.py runs, reused here: its servers, its configuration and its real
   Java producer, LegacyProducer.java) writes genuine legacy data: topics at
   ``message.format.version`` 0.9.0 (v0) and 0.10.2 (v1), uncompressed, gzip, lz4 and snappy, a
   LogAppendTime topic, keyed and null-keyed records, segments of a few KB so every partition has
   several closed segments; and one topic in v2 already (the broker's own format), as a log dir
   partly upgraded by Kafka itself holds.
2. While that broker RUNS (it holds the log dir's lock: a plain ``kmigrate upgrade`` is refused,
   exit 3, and changes nothing), ``kmigrate upgrade --prestage`` (the CLI, a home of the test's
   own) converts the closed segments into a stage: exit 0, nothing in the log dir changed (every
   file of every partition has the inode, size, mtimes and bytes it had; no new name, no
   ``.cleaned`` / ``.swap``; at the top level only Kafka's own checkpoint files may come and go),
   the report lists every closed legacy segment as staged with as many records after as before,
   and the stage (outside the log dir) holds a manifest and the ``.cleaned`` files of each; every
   closed v2 segment is checked (Kafka's recovery checks, its indexes) and recorded as verified.
3. A consumer reads every partition from the start (the broker maps the closed segments'
   indexes); the producer goes on, so that every partition rolls (its segment that was active at
   staging time is closed now); the broker restarts cleanly (SIGTERM: a controlled shutdown, the
   clean-shutdown marker; a start that loads the log dir), takes more records and stops cleanly.
   Every staged segment's files must still have the identity the prestage recorded (device,
   inode, size, mtime, ctime): a finding otherwise, named file and field. (The restart does
   rewrite the ``.snapshot`` files at the last two segment boundaries: Kafka's load of a log
   below v2 rebuilds its producer state there; no segment file, not in the identity.)
4. The stop window, ``kmigrate upgrade --to v2 --stage S --engine inline``: exit 0; the report's
   window says every staged segment was swapped in (the log dir's files ARE the staged files:
   same inodes), the rest (rolled after the prestage, active at the stop) converted, none
   discarded; every batch is v2 and the stage is gone. The v2 partition is left as it is, every
   file with the identity and bytes it had, each segment reported as already in the target.
5. A Kafka 4.4 node (KRaft) creates the topics and gets the upgraded partitions installed as the
   other real-Kafka tests install them (tests/support/kafka.py, ``install_segments``: a ZooKeeper
   log dir is not a KRaft one, its partitions are moved under topics the KRaft metadata knows).
   Its recovering load prints no complaint and the "Completed load" numbers of the files; the Java
   consumer reads every record produced, before and after the prestage, in order (offset, key,
   value, headers, timestamp and its type; v0's none becoming CreateTime -1). A second, clean load
   on kmigrate's own indexes (the staged ones included) is as quiet, serves the same, and those
   indexes equal the ones Kafka's recovery rebuilt; the producer snapshots too, but for the one
   Kafka 3.9's restart left inside a segment, which Kafka 4 removes as stray.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from support import kafka as realkafka
from support.kafka import ConsumedRecord, index_differences, judge_load, read_files, record_diff

from migration.audit.model import FindingCode, RunKind, UnitStatus
from migration.audit.store import ReportStore
from migration.migrations.upgrade.stage import Stage

pytestmark = pytest.mark.realkafka

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "tools" / "kafka" / "legacy_fixtures.py"
STAGE_ID, WINDOW_ID = "prestage-live", "prestage-window"
T0_MS = 1_600_000_000_000
# name, message.format.version, codecs (one per produce chunk, in turn), segment.bytes, partitions, timestamp type
TOPICS = [
    ("p-v0-none", "0.9.0", ("none",), 12288, 1, "CreateTime"),
    ("p-v0-gzip", "0.9.0", ("gzip",), 6144, 1, "CreateTime"),
    ("p-v1-none", "0.10.2", ("none",), 12288, 2, "CreateTime"),
    ("p-v1-lz4", "0.10.2", ("lz4",), 6144, 1, "CreateTime"),
    ("p-v1-logappend", "0.10.2", ("none", "snappy"), 8192, 1, "LogAppendTime"),
    # already v2 (the broker's own format at inter.broker.protocol 2.8): the prestage checks its
    # closed segments and the window leaves them as they are, unread
    ("p-v2-gzip", "2.8", ("none", "gzip"), 6144, 1, "CreateTime"),
]
MAGIC = {"0.9.0": 0, "0.10.2": 1, "2.8": 2}
# records per partition produced before the prestage, after it, and after the broker's restart
BEFORE, AFTER, AFTER_RESTART = 400, 120, 120
# what Kafka 3.9 itself writes at the top of a log dir while it runs (atomic writes go through .tmp)
KAFKA_TOP_FILES = {"recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint",
                   "cleaner-offset-checkpoint", "meta.properties", ".lock"}


def _generator():
    """tools/kafka/legacy_fixtures.py as a module: the 3.9.2 servers, configuration and producer."""
    spec = importlib.util.spec_from_file_location("legacy_fixtures", GENERATOR)
    gen = importlib.util.module_from_spec(spec)
    sys.modules["legacy_fixtures"] = gen  # dataclasses look their module up
    try:
        spec.loader.exec_module(gen)
    finally:
        sys.modules.pop("legacy_fixtures", None)
    return gen


def _topic_configs(fmt: str, segment_bytes: int, ts_type: str) -> dict[str, str]:
    return {"message.format.version": fmt, "message.timestamp.type": ts_type, "segment.bytes": str(segment_bytes),
            "retention.ms": "-1", "retention.bytes": "-1", "compression.type": "producer",
            "cleanup.policy": "delete",
            # Kafka 3.9's own indexes of these few-KB segments get entries (mapped, trimmed at the roll)
            "index.interval.bytes": "1024"}


def _plan(gen, rng: random.Random, first: int, last: int) -> tuple[list[str], dict[str, list[tuple]]]:
    """LegacyProducer's RECORDS_FILE lines for records ``first``..``last - 1`` of every partition,
    and per "topic-partition" what they send: (topic, key, value, timestamp), in order."""
    lines: list[str] = []
    sent: dict[str, list[tuple]] = {}
    for name, _fmt, codecs, _seg, partitions, _ts in TOPICS:
        for p in range(partitions):
            i, chunk = first, 0
            while i < last:
                codec = codecs[chunk % len(codecs)]
                for _ in range(min(last - i, rng.randint(8, 30))):
                    key = None if i % 3 == 1 else f"key-{i:05d}".encode()
                    value = None if name == "p-v0-none" and i % 50 == 17 else gen._value(rng, i)
                    ts = T0_MS + i * 997 - (30_000 if i % 13 == 5 else 0)
                    sent.setdefault(f"{name}-{p}", []).append((name, key, value, ts))
                    lines.append("\t".join([name, str(p), codec, str(ts), gen._b64(key), gen._b64(value)]))
                    i += 1
                lines.append("#flush")
                chunk += 1
    return lines, sent


def _produce(gen, classes: Path, work: Path, bootstrap: str, phase: str, topics_spec: str,
             lines: list[str]) -> list[tuple[str, int, int, int]]:
    """Run LegacyProducer (it creates the topics of ``topics_spec`` first); (topic, partition,
    offset, timestamp) per record, in the order of ``lines``."""
    (work / f"topics-{phase}.tsv").write_text(topics_spec)
    (work / f"records-{phase}.tsv").write_text("\n".join(lines) + "\n")
    proc = subprocess.run(gen.java_cmd("LegacyProducer", bootstrap, str(work / f"topics-{phase}.tsv"),
                                       str(work / f"records-{phase}.tsv"), log_dir=work / f"producer-{phase}",
                                       extra_cp=(classes,)), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"LegacyProducer ({phase}) failed (rc={proc.returncode}):\n{proc.stderr[-4000:]}"
    return [(t, int(p), int(o), int(ts)) for t, p, o, ts in (line.split("\t") for line in proc.stdout.splitlines())]


def _expected(sent: dict[str, list[tuple]], acks: list[tuple[str, int, int, int]]) -> dict[str, list[ConsumedRecord]]:
    """What Kafka 4 must serve after the upgrade: the broker's offsets; v0 has no timestamp (it
    becomes CreateTime -1), v1 the producer's CreateTime or the broker's LogAppendTime; no headers
    (v0/v1 cannot carry any)."""
    kinds = {name: (MAGIC[fmt], ts) for name, fmt, _c, _s, _p, ts in TOPICS}
    by_tp: dict[str, list[tuple[int, int]]] = {}
    for t, p, off, ts in acks:
        by_tp.setdefault(f"{t}-{p}", []).append((off, ts))
    out: dict[str, list[ConsumedRecord]] = {}
    for tp, recs in sent.items():
        assert [o for o, _ in by_tp[tp]] == list(range(len(recs))), f"{tp}: the broker's offsets {by_tp[tp][:5]}..."
        magic, ts_type = kinds[recs[0][0]]
        out[tp] = []
        for (_t, key, value, ts), (off, acked_ts) in zip(recs, by_tp[tp], strict=True):
            if magic == 0:
                stamp, kind = -1, "CREATE_TIME"
            elif ts_type == "LogAppendTime":
                stamp, kind = acked_ts, "LOG_APPEND_TIME"
            else:
                stamp, kind = ts, "CREATE_TIME"
            out[tp].append(ConsumedRecord(off, stamp, kind, key, value, ()))
    return out


def _identity(p: Path) -> dict[str, int]:
    st = os.stat(p)
    return {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns}


def _partition_state(data: Path, partitions: list[str]) -> dict[str, tuple]:
    """relative path -> (identity, SHA-256) of every file of the partitions."""
    return {f"{tp}/{f.name}": (tuple(_identity(f).items()), hashlib.sha256(f.read_bytes()).hexdigest())
            for tp in partitions for f in sorted((data / tp).iterdir())}


def _magics(log: Path) -> set[int]:
    """The magic byte of every batch of a segment (read with struct offsets, not kmigrate's parser)."""
    data, pos, out = log.read_bytes(), 0, set()
    while pos + 17 <= len(data):
        out.add(data[pos + 16])
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
    assert pos == len(data), f"{log}: {len(data) - pos} bytes after the last batch"
    return out


def _kmigrate(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KMIGRATE_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "migration", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def _read_all(bootstrap: str, partitions: list[str], expected: int) -> dict[str, int]:
    """kafka-python reads every partition from the start (the broker maps the closed segments'
    indexes to serve it), until ``expected`` records or 10 s without one: "topic-partition" ->
    records read."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000,
                             request_timeout_ms=30000)
    tps = [TopicPartition(tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1])) for tp in partitions]
    try:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out = dict.fromkeys(partitions, 0)
        for n, rec in enumerate(consumer, 1):
            out[f"{rec.topic}-{rec.partition}"] += 1
            if n == expected:
                break
        return out
    finally:
        consumer.close()


def _clean_stop(broker, data: Path) -> None:
    """SIGTERM: Kafka 3.9's controlled shutdown; it must end with its clean-shutdown line and marker."""
    rc = broker.stop()
    assert rc in (0, 143) and "[KafkaServer id=0] shut down completed" in broker.text(), (
        f"Kafka 3.9 did not shut down cleanly (rc={rc}); logs in {broker.log_dir}\n{broker.tail()}")
    assert (data / ".kafka_cleanshutdown").is_file(), f"{data}: no clean-shutdown marker after the SIGTERM"


def _snapshot_differences(data: Path, partitions: list[str], kafkas: dict[str, dict[str, bytes]],
                          snapshots_39: dict[str, dict[str, bytes]], stray_39: int) -> list[str]:
    """Where the upgraded partitions' ``.snapshot`` files differ from the ones Kafka 4 left after
    its recovery and clean stop. One difference is Kafka 3.9's, not kmigrate's, and allowed: its
    clean stop before the restart took a snapshot at the then log end (``stray_39``), which
    later records left inside a segment; kmigrate leaves Kafka's snapshots as they are, and Kafka
    4's load removes that one (``ProducerStateManager.removeStraySnapshots``: an offset that is no
    segment's base). Every other snapshot: the same names and bytes."""
    out = []
    stray = f"{stray_39:020d}.snapshot"
    for tp in partitions:
        mine = {f.name: f.read_bytes() for f in (data / tp).glob("*.snapshot")}
        theirs = {n: b for n, b in kafkas[tp].items() if n.endswith(".snapshot")}
        bases = {f.name[:20] for f in (data / tp).glob("*.log")}
        extra = set(mine) - set(theirs)
        if extra - {stray} or (extra and (stray[:20] in bases or mine[stray] != snapshots_39[tp].get(stray))):
            out.append(f"{tp}: kmigrate has {sorted(extra)} more than Kafka")
        if set(theirs) - set(mine) or any(mine[n] != theirs[n] for n in theirs if n in mine):
            out.append(f"{tp}: kmigrate {sorted(mine)}, Kafka {sorted(theirs)}, different bytes in "
                       f"{sorted(n for n in set(mine) & set(theirs) if mine[n] != theirs[n])}")
    return out


def _identity_changes(before: dict[str, dict[str, int]], data: Path) -> list[str]:
    """Files whose identity differs from ``before`` (relative path -> identity), field by field."""
    out = []
    for rel, was in sorted(before.items()):
        p = data / rel
        if not p.exists():
            out.append(f"{rel}: gone")
            continue
        now = _identity(p)
        out += [f"{rel}: {k} {was[k]} -> {now[k]}" for k in was if was[k] != now[k]]
    return out


def test_prestage_beside_a_live_kafka_39_then_the_window_judged_by_kafka_4(tmp_path, kafka_node_factory,
                                                                            monkeypatch) -> None:
    t_start = time.monotonic()
    timings: dict[str, float] = {}
    gen = _generator()
    classes = realkafka.java_classes(realkafka.WRITER, gen.PRODUCER_SOURCE)
    work = tmp_path / "kafka39"
    work.mkdir()
    data = work / "kafka-logs"
    home = tmp_path / "kmigrate-home"
    monkeypatch.setenv("KMIGRATE_HOME", str(home))
    partitions = sorted(f"{name}-{p}" for name, _f, _c, _s, n, _t in TOPICS for p in range(n))
    v2_partitions = {f"{name}-{p}" for name, f, _c, _s, n, _t in TOPICS for p in range(n) if MAGIC[f] == 2}
    legacy_partitions = [tp for tp in partitions if tp not in v2_partitions]
    rng = random.Random(27)
    lines1, sent = _plan(gen, rng, 0, BEFORE)
    lines2, sent2 = _plan(gen, rng, BEFORE, BEFORE + AFTER)
    lines3, sent3 = _plan(gen, rng, BEFORE + AFTER, BEFORE + AFTER + AFTER_RESTART)
    for more in (sent2, sent3):
        for tp, recs in more.items():
            sent[tp] += recs
    topics_spec = "".join(f"{name}\t{n}\t{','.join(f'{k}={v}' for k, v in _topic_configs(fmt, seg, ts).items())}\n"
                          for name, fmt, _c, seg, n, ts in TOPICS)

    # --- 1. Kafka 3.9.2 with ZooKeeper writes genuine v0/v1 data -----------------------------
    zk_port, port = gen.free_port(), gen.free_port()
    (work / "zk-data").mkdir()
    (work / "zoo.cfg").write_text(gen.ZOO_CFG.format(data=work / "zk-data", port=zk_port))
    zk = gen.Server("ZooKeeper", gen.java_cmd("org.apache.zookeeper.server.quorum.QuorumPeerMain",
                                              str(work / "zoo.cfg"), log_dir=work / "zk-logs"), work / "zk-logs")
    props = gen.SERVER_PROPERTIES.format(version=gen.VERSION, zk_port=zk_port, port=port, data=data, ibp=gen.IBP)
    # no compacted topic here: the cleaner has nothing to do
    (work / "server.properties").write_text(props.replace("log.cleaner.enable=true", "log.cleaner.enable=false"))
    broker = gen.Server(f"Kafka {gen.VERSION}", gen.java_cmd("kafka.Kafka", str(work / "server.properties"),
                                                             log_dir=work / "kafka-run"), work / "kafka-run")
    bootstrap = f"127.0.0.1:{port}"
    try:
        t = time.monotonic()
        zk.start(port=zk_port)
        broker.start(ready=re.compile(r"\[KafkaServer id=0\] started"))
        timings["ZooKeeper + Kafka 3.9 start"] = time.monotonic() - t
        t = time.monotonic()
        acks = _produce(gen, classes, work, bootstrap, "before", topics_spec, lines1)
        timings["produce before"] = time.monotonic() - t

        active_at_staging = {tp: sorted((data / tp).glob("*.log"))[-1].name for tp in partitions}
        all_closed = {tp: sorted((data / tp).glob("*.log"))[:-1] for tp in partitions}
        assert all(len(c) >= 2 for c in all_closed.values()), {tp: len(c) for tp, c in all_closed.items()}
        closed = {tp: c for tp, c in all_closed.items() if tp not in v2_partitions}  # the legacy ones: staged
        v2_closed = {tp: c for tp, c in all_closed.items() if tp in v2_partitions}  # checked, left as they are
        for tp in partitions:
            fmt = next(f for name, f, *_ in TOPICS if tp.startswith(name + "-"))
            for log in sorted((data / tp).glob("*.log")):
                assert _magics(log) == {MAGIC[fmt]}, f"{log}: magics {_magics(log)}, expected {MAGIC[fmt]}"
        # the broker holds the log dir's lock: kmigrate's gate sees it live and refuses a plain upgrade
        state_before = _partition_state(data, partitions)
        refused = _kmigrate(home, "upgrade", str(data), "--to", "v2", "--engine", "inline", "--run-id", "refused")
        assert refused.returncode == 3, f"exit {refused.returncode}\n{refused.stdout[-3000:]}\n{refused.stderr[-3000:]}"
        assert _partition_state(data, partitions) == state_before
        top_before = {f.name for f in data.iterdir() if f.is_file()}

        # --- 2. the prestage, beside the running broker --------------------------------------
        t = time.monotonic()
        pre = _kmigrate(home, "upgrade", str(data), "--to", "v2", "--prestage", "--run-id", STAGE_ID,
                        "--engine", "inline")
        timings["kmigrate --prestage"] = time.monotonic() - t
        assert broker.proc is not None and broker.proc.poll() is None, "the broker died during the prestage"
        assert pre.returncode == 0, f"--prestage exited {pre.returncode}\n{pre.stdout[-4000:]}\n{pre.stderr[-4000:]}"
        state_after = _partition_state(data, partitions)
        changed = sorted(k for k in set(state_before) | set(state_after) if state_before.get(k) != state_after.get(k))
        assert not changed, f"files of the partitions changed during the prestage: {changed}"
        everything = [str(p.relative_to(data)) for p in data.rglob("*")]
        assert not [n for n in everything if re.search(r"\.(cleaned|swap)$|kmigrate", n)], everything
        top_after = {f.name for f in data.iterdir() if f.is_file()}
        unknown = {n for n in top_after - top_before if n.removesuffix(".tmp") not in KAFKA_TOP_FILES}
        assert not unknown, f"new files at the top of the log dir: {sorted(unknown)}"
        assert {d.name for d in data.iterdir() if d.is_dir()} == set(partitions)

        report = ReportStore().load(STAGE_ID)
        assert report.kind is RunKind.PRESTAGE and report.refusal is None and not report.errors
        staged_units = [u for u in report.iter_results() if u.status is UnitStatus.OK]
        assert all(any(w.code == FindingCode.PRESTAGED for w in u.warnings) for u in staged_units)
        assert sorted(u.path for u in staged_units) == sorted(str(p) for c in closed.values() for p in c), (
            "every closed legacy segment staged, nothing else")
        assert all(u.records_before == u.records_after > 0 for u in staged_units)
        # no offset holes: a partition's closed segments hold the offsets below its active segment's base
        assert sum(u.records_before for u in staged_units) == sum(int(active_at_staging[tp][:20])
                                                                  for tp in legacy_partitions)
        verified_units = [u for u in report.iter_results()
                          if any(w.code == FindingCode.PRESTAGE_VERIFIED for w in u.warnings)]
        assert sorted(u.path for u in verified_units) == sorted(str(p) for c in v2_closed.values() for p in c), (
            "every closed v2 segment checked and found right, nothing else")
        assert all(u.status is UnitStatus.SKIPPED and u.records_before == u.records_after > 0
                   for u in verified_units)
        assert sum(u.records_before for u in verified_units) == sum(int(active_at_staging[tp][:20])
                                                                    for tp in v2_partitions)
        stage = Stage(report.params["stage_root"], STAGE_ID)
        assert not stage.path.is_relative_to(data)
        entries = {(Path(e.partition_dir).name, e.base_offset): e for e in stage.entries()}
        assert sorted(entries) == sorted((tp, int(log.name[:20])) for tp, c in closed.items() for log in c)
        # and the bytes so far of every legacy partition's active segment (the window then converts
        # only what Kafka appends after them)
        prefixes = {(Path(p.partition_dir).name, p.base_offset) for p in stage.prefixes()}
        assert sorted(prefixes) == sorted((tp, int(active_at_staging[tp][:20])) for tp in legacy_partitions)
        verified = {(Path(v.partition_dir).name, v.base_offset): v for v in stage.verified()}
        assert sorted(verified) == sorted((tp, int(log.name[:20])) for tp, c in v2_closed.items() for log in c)
        staged_files = {}
        for (tp, base), e in entries.items():
            fdir = stage.files_dir(e.partition_dir, base)
            for sid in e.staged_ids:
                assert (fdir / sid.name).is_file() and (fdir / sid.name).stat().st_ino == sid.ino, (tp, sid)
                staged_files[f"{tp}/{sid.name.removesuffix('.cleaned')}"] = sid.ino
            # the identities the prestage recorded are the files' as this test saw them
            for oid in e.original_ids:
                mine = dict(state_before[f"{tp}/{oid.name}"][0])
                assert (oid.dev, oid.ino, oid.size, oid.mtime_ns, oid.ctime_ns) == (
                    mine["dev"], mine["ino"], mine["size"], mine["mtime_ns"], mine["ctime_ns"]), (tp, oid)
        staged_ids = {f"{tp}/{oid.name}": {"dev": oid.dev, "ino": oid.ino, "size": oid.size,
                                           "mtime_ns": oid.mtime_ns, "ctime_ns": oid.ctime_ns}
                      for (tp, _b), e in entries.items() for oid in e.original_ids}

        # --- 3. a consumer reads everything, more records (every partition rolls), a clean
        # restart, more records, a clean stop -------------------------------------------------
        t = time.monotonic()
        assert _read_all(bootstrap, partitions, BEFORE * len(partitions)) == dict.fromkeys(partitions, BEFORE)
        timings["consumer on Kafka 3.9"] = time.monotonic() - t
        t = time.monotonic()
        acks += _produce(gen, classes, work, bootstrap, "after", "", lines2)
        timings["produce after"] = time.monotonic() - t
        t = time.monotonic()
        _clean_stop(broker, data)
        # a fresh server.log, so that the start waits for its own "started" line
        broker.log.rename(broker.log_dir / "server-before-restart.log")
        broker.start(ready=re.compile(r"\[KafkaServer id=0\] started"))
        clean_load = r"Skipping recovery of \d+ logs from \S+ since clean shutdown file was found"
        assert re.search(clean_load, broker.text()), (
            f"Kafka 3.9's restart did not load the log dir as cleanly stopped; logs in {broker.log_dir}")
        timings["Kafka 3.9 restart"] = time.monotonic() - t
        t = time.monotonic()
        acks += _produce(gen, classes, work, bootstrap, "after-restart", "", lines3)
        timings["produce after the restart"] = time.monotonic() - t
        t = time.monotonic()
        _clean_stop(broker, data)
        timings["Kafka 3.9 stop"] = time.monotonic() - t
    finally:
        broker.kill()
        zk.stop()
        zk.kill()
    assert (data / ".kafka_cleanshutdown").is_file(), "no clean-shutdown marker after the SIGTERM"
    rolled = {tp: [f.name for f in sorted((data / tp).glob("*.log")) if f.name >= active_at_staging[tp]]
              for tp in partitions}
    assert all(len(r) >= 2 for r in rolled.values()), f"a partition did not roll after the prestage: {rolled}"
    # Kafka 3.9's production, roll and clean stop left every staged segment's files as the prestage read them
    moved = _identity_changes(staged_ids, data)
    assert not moved, "Kafka 3.9 changed closed segments the prestage staged:\n  " + "\n  ".join(moved)
    expected = _expected(sent, acks)
    before_window = {tp: read_files(data / tp) for tp in partitions}
    snapshots_39 = {tp: {f.name: f.read_bytes() for f in (data / tp).glob("*.snapshot")} for tp in partitions}
    for tp in partitions:
        assert not (d := record_diff(realkafka.as_consumed(realkafka.upgraded(before_window[tp].records)),
                                     expected[tp])), f"{tp}: the 3.9 files vs what was produced: {d}"

    # --- 4. the stop window ------------------------------------------------------------------
    v2_before_window = _partition_state(data, sorted(v2_partitions))
    t = time.monotonic()
    win = _kmigrate(home, "upgrade", str(data), "--to", "v2", "--stage", STAGE_ID, "--engine", "inline",
                    "--run-id", WINDOW_ID)
    timings["kmigrate --stage (the window)"] = time.monotonic() - t
    assert win.returncode == 0, f"--stage exited {win.returncode}\n{win.stdout[-4000:]}\n{win.stderr[-4000:]}"
    wreport = ReportStore().load(WINDOW_ID)
    assert wreport.kind is RunKind.UPGRADE and wreport.refusal is None and not wreport.errors
    assert all(u.status in (UnitStatus.OK, UnitStatus.SKIPPED) for u in wreport.iter_results())
    (broker_report,) = wreport.brokers
    window = broker_report.window
    assert window is not None and window.stage_id == STAGE_ID, wreport.brokers
    not_staged = [f"{tp}/{f.name}" for tp in legacy_partitions for f in sorted((data / tp).glob("*.log"))
                  if int(f.name[:20]) not in {b for (p, b) in entries if p == tp} and f.stat().st_size]
    assert (window.swapped, window.converted, window.discarded) == (len(entries), len(not_staged), 0), (
        window, len(entries), not_staged)
    assert window.converted >= len(legacy_partitions) * 2
    assert window.prefixed == len(prefixes), window  # rolled since, each from its staged first bytes
    # the v2 partition is left as it is: every file, identity and bytes (its closed segments unread:
    # the prestage's check stands; its active one read, in the target format already)
    assert _partition_state(data, sorted(v2_partitions)) == v2_before_window
    v2_rows = {u.path: u for u in wreport.iter_results() if Path(u.path).parent.name in v2_partitions}
    assert sorted(v2_rows) == sorted(str(f) for tp in v2_partitions for f in (data / tp).glob("*.log")), v2_rows
    assert all(u.status is UnitStatus.SKIPPED and [w.code for w in u.warnings] == [FindingCode.ALREADY_IN_TARGET]
               for u in v2_rows.values()), v2_rows
    # the log dir's segments ARE the staged files (linked in, renamed through Kafka's protocol)
    wrong = {rel: (ino, (data / rel).stat().st_ino) for rel, ino in staged_files.items()
             if (data / rel).stat().st_ino != ino}
    assert not wrong, f"not the staged files: {wrong}"
    assert not stage.exists(), "the window left its stage behind"
    for tp in partitions:
        for log in sorted((data / tp).glob("*.log")):
            assert _magics(log) <= {2}, f"{log}: magics {_magics(log)} after the window"
    assert not [p for p in data.rglob("*") if re.search(r"\.(cleaned|swap|deleted)$", p.name)]

    # --- 5. Kafka 4.x on the upgraded partitions -----------------------------------------------
    files = {tp: read_files(data / tp) for tp in partitions}
    node = kafka_node_factory(realkafka.LATEST)
    node.start()
    node.create_topics({name: (n, {"retention.ms": "-1", "retention.bytes": "-1"}) for name, _f, _c, _s, n, _t
                        in TOPICS})
    node.stop()
    node.install_segments({tp: data / tp for tp in partitions})
    node.start()
    recovery_log = node.run_log()
    consumed = node.consume([name for name, *_ in TOPICS])
    node.stop()
    # Kafka's recovery, serving and clean stop left every .log file as kmigrate wrote it
    changed_logs = [f"{tp}/{f.name}" for tp in partitions for f in sorted((data / tp).glob("*.log"))
                    if f.read_bytes() != (node.data / tp / f.name).read_bytes()]
    assert not changed_logs and all(len(list((node.data / tp).glob("*.log"))) == files[tp].load.segments
                                    for tp in partitions), changed_logs
    assert any(d == str(node.data) for _, d in realkafka.RECOVERING.findall(recovery_log))
    judge_load(recovery_log, {tp: f.load for tp, f in files.items()}, log_path=node.server_log,
               all_partitions=partitions)
    for tp in partitions:
        assert files[tp].load.log_end_offset == len(expected[tp]), (tp, files[tp].load)
        assert not (d := record_diff(consumed.get(tp, []), expected[tp])), f"{tp} served by Kafka 4: {d}"
    # the clean load, on kmigrate's own indexes: the staged segments' and the window's
    rebuilt = node.install_indexes({tp: data / tp for tp in partitions})
    node.start()
    clean_log = node.run_log()
    consumed_clean = node.consume([name for name, *_ in TOPICS])
    node.stop()
    assert not any(d == str(node.data) for _, d in realkafka.RECOVERING.findall(clean_log))
    judge_load(clean_log, {tp: f.load for tp, f in files.items()}, log_path=node.server_log,
               all_partitions=partitions)
    assert consumed_clean == consumed
    # (the v2 partition's indexes are Kafka 3.9's own, made with index.interval.bytes=1024)
    diffs = [d for tp in legacy_partitions for d in index_differences(data / tp, rebuilt[tp])]
    diffs += _snapshot_differences(data, partitions, rebuilt, snapshots_39, stray_39=BEFORE + AFTER)
    assert not diffs, "\n".join(diffs)
    timings.update(node.timings)
    print(f"\n{len(entries)} segments staged beside Kafka {gen.VERSION}, {window.swapped} swapped and "
          f"{window.converted} converted in a {window.duration_s:.1f}s window, "
          f"{sum(map(len, expected.values()))} records served by Kafka {node.version}; "
          f"{time.monotonic() - t_start:.1f}s (" + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
          + f"); logs in {work} and {node.logs}")
