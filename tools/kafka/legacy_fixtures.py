"""Genuine legacy log dirs written by Apache Kafka's own code (issue #27, item 2).

Starts a real ZooKeeper (3.8.4) and a real Kafka 3.9.2 broker in ZooKeeper mode with
``inter.broker.protocol.version=2.8``, below 3.0, so the broker still honours the deprecated
``message.format.version`` (Kafka 3.9's ``LogConfig.shouldIgnoreMessageFormatVersion`` is
"IBP at least 3.0"). Topics at ``message.format.version`` 0.9.0 (magic 0) and 0.10.2 (magic 1)
get records from the real Java producer (tools/kafka/3.9.2/LegacyProducer.java, compiled here):
uncompressed, gzip, snappy, lz4; keyed and null-keyed (headers cannot exist in v0/v1); small
``segment.bytes`` so every partition has several segments; a LogAppendTime topic; a compacted
topic with repeated keys and tombstones whose log the broker's cleaner compacts (the run is
captured as it is: offset holes inside the legacy segments). The producer sends v2 batches and
the broker's LogValidator converts them to the topic's message format, so every byte of the
segments is Kafka's.

The broker is stopped with SIGTERM (a controlled shutdown: clean-shutdown marker, recovery
points, trimmed indexes), and its log dir is copied to ``tests/fixtures/legacy-kafka39/kafka-logs``
with ``MANIFEST.json`` (what wrote it, per topic the message format, codecs, timestamp type,
cleanup policy, per partition the records produced and in the files, segments and offsets). The
generator reads every batch back with kmigrate's format layer and fails unless the magic, codecs
and timestamp types are the ones asked for, the records match what the producer was told, and the
whole dir stays under 1 MB.

    make kafka-tools                                 # the 3.9.2 jars into .tools/kafka/3.9.2/lib
    .venv/bin/python tools/kafka/legacy_fixtures.py  # rewrites tests/fixtures/legacy-kafka39/

Options: ``--out DIR`` (default tests/fixtures/legacy-kafka39), ``--work DIR`` (keep the
ZooKeeper/Kafka dirs and logs there instead of a temporary dir), ``--seed N``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from migration.formats.file_records import read_batches  # noqa: E402

VERSION = "3.9.2"
ZOOKEEPER = "3.8.4"
IBP = "2.8"
LIB = ROOT / ".tools" / "kafka" / VERSION / "lib"
PRODUCER_SOURCE = ROOT / "tools" / "kafka" / VERSION / "LegacyProducer.java"
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "legacy-kafka39"
MAX_BYTES = 1_000_000
T0_MS = 1_600_000_000_000  # 2020-09-13: CreateTime timestamps the producer sets
JAVA = os.environ.get("KMIGRATE_JAVA", "java")
JAVAC = os.environ.get("KMIGRATE_JAVAC", "javac")
MAGIC = {"0.9.0": 0, "0.10.2": 1}


@dataclass
class TopicSpec:
    name: str
    message_format: str  # message.format.version
    codecs: tuple[str, ...]  # producer compression.type, one per produce phase, in turn
    records: int  # per partition
    segment_bytes: int
    partitions: int = 1
    timestamp_type: str = "CreateTime"
    compacted: bool = False
    null_key_every: int = 3  # every n-th record has a null key (0: none)

    @property
    def magic(self) -> int:
        return MAGIC[self.message_format]

    def configs(self) -> dict[str, str]:
        cfg = {"message.format.version": self.message_format, "message.timestamp.type": self.timestamp_type,
               "segment.bytes": str(self.segment_bytes), "retention.ms": "-1", "retention.bytes": "-1",
               "compression.type": "producer",
               "cleanup.policy": "compact" if self.compacted else "delete"}
        if self.compacted:
            cfg.update({"min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0",
                        "delete.retention.ms": "86400000000",
                        # the replaced segments' .deleted files go after 1 s, before the broker stops
                        "file.delete.delay.ms": "1000"})
        return cfg


TOPICS = [
    TopicSpec("v0-none", "0.9.0", ("none",), 240, 8192),
    TopicSpec("v0-gzip", "0.9.0", ("gzip",), 240, 3072),
    TopicSpec("v0-snappy", "0.9.0", ("snappy",), 240, 3072),
    TopicSpec("v0-lz4", "0.9.0", ("lz4",), 240, 3072),
    TopicSpec("v1-none", "0.10.2", ("none",), 240, 8192),
    TopicSpec("v1-gzip", "0.10.2", ("gzip",), 200, 3072, partitions=2),
    TopicSpec("v1-snappy", "0.10.2", ("snappy",), 240, 3072),
    TopicSpec("v1-lz4", "0.10.2", ("lz4",), 240, 3072),
    TopicSpec("v1-logappend", "0.10.2", ("none", "gzip", "lz4"), 240, 6144, timestamp_type="LogAppendTime"),
    TopicSpec("v1-compact", "0.10.2", ("none", "snappy"), 300, 3072, compacted=True, null_key_every=0),
]

LOG4J = """\
log4j.rootLogger=INFO, F
log4j.appender.F=org.apache.log4j.FileAppender
log4j.appender.F.File={log}
log4j.appender.F.layout=org.apache.log4j.PatternLayout
log4j.appender.F.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.kafka.controller=WARN
log4j.logger.state.change.logger=WARN
"""

ZOO_CFG = """\
tickTime=2000
dataDir={data}
clientPort={port}
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
"""

SERVER_PROPERTIES = """\
# Kafka {version} in ZooKeeper mode, written by tools/kafka/legacy_fixtures.py
broker.id=0
zookeeper.connect=127.0.0.1:{zk_port}
listeners=PLAINTEXT://127.0.0.1:{port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
log.dirs={data}
# below 3.0: message.format.version (deprecated) is honoured, so topics keep magic 0 and 1
inter.broker.protocol.version={ibp}
log.message.format.version=0.10.2
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
num.recovery.threads.per.data.dir=1
log.retention.ms=-1
log.retention.bytes=-1
# the compacted topic's cleaner runs soon after its segments roll (the others are cleanup.policy=delete)
log.cleaner.enable=true
log.cleaner.backoff.ms=500
zookeeper.session.timeout.ms=18000
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def java_cmd(main: str, *args: str, log_dir: Path, extra_cp: tuple[Path, ...] = ()) -> list[str]:
    log_dir.mkdir(parents=True, exist_ok=True)
    conf = log_dir / "log4j.properties"
    conf.write_text(LOG4J.format(log=log_dir / "server.log"))
    cp = os.pathsep.join([str(LIB / "*"), *map(str, extra_cp)])
    return [JAVA, "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{conf}", f"-Dkafka.logs.dir={log_dir}", "-cp", cp, main, *args]


class Server:
    """A JVM started in its own process group, ready when ``ready`` appears in its log."""

    def __init__(self, name: str, cmd: list[str], log_dir: Path) -> None:
        self.name, self.cmd, self.log_dir = name, cmd, log_dir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.log_dir / "server.log"

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def start(self, ready: re.Pattern[str] | None = None, port: int | None = None, timeout: float = 120) -> None:
        with open(self.log_dir / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if ready is not None and ready.search(self.text()):
                return
            if port is not None:
                with socket.socket() as s, contextlib.suppress(OSError):
                    s.settimeout(0.5)
                    s.connect(("127.0.0.1", port))
                    return
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited (rc={self.proc.returncode}); logs in {self.log_dir}\n"
                                 + self.tail())
            if time.monotonic() > deadline:
                self.kill()
                raise SystemExit(f"{self.name} did not start in {timeout:.0f}s; logs in {self.log_dir}\n" + self.tail())
            time.sleep(0.2)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (Kafka: a controlled shutdown); SIGKILL after ``timeout``. Returns the exit code."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise SystemExit(f"{self.name} ignored SIGTERM for {timeout:.0f}s; logs in {self.log_dir}") from None
        self.proc = None
        return rc

    def kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def tail(self, n: int = 40) -> str:
        out = []
        for p in (self.log, self.log_dir / "stdout.log"):
            if p.exists():
                out += [f"--- {p}", *p.read_text(errors="replace").splitlines()[-n:]]
        return "\n".join(out)


# --- what to produce ---------------------------------------------------------------------------
@dataclass
class Produced:
    """What the producer was told to send to one partition, in order."""
    records: list[tuple[bytes | None, bytes | None, int]] = field(default_factory=list)  # key, value, timestamp
    codecs: list[str] = field(default_factory=list)  # per record
    offsets: list[int] = field(default_factory=list)  # the broker's answers
    timestamps: list[int] = field(default_factory=list)


def plan(rng: random.Random) -> tuple[list[str], dict[str, Produced]]:
    """The lines of the producer's RECORDS_FILE and, per "topic-partition", what they send."""
    lines: list[str] = []
    produced: dict[str, Produced] = {}
    for t in TOPICS:
        for p in range(t.partitions):
            tp = produced.setdefault(f"{t.name}-{p}", Produced())
            i = 0
            phase = 0
            while i < t.records:
                codec = t.codecs[phase % len(t.codecs)]
                n = min(t.records - i, rng.randint(8, 45))
                for _ in range(n):
                    if t.compacted:
                        key = f"user-{rng.randrange(90):03d}".encode()
                        value = None if rng.random() < 0.08 else _value(rng, i)
                    else:
                        key = None if t.null_key_every and i % t.null_key_every == 1 else f"key-{i:05d}".encode()
                        value = None if t.name == "v0-none" and i % 50 == 17 else _value(rng, i)
                    # CreateTime: increasing, every 13th record 30 s in the past (the time index
                    # keeps the maximum so far); v0 drops it, LogAppendTime replaces it
                    ts = T0_MS + i * 997 - (30_000 if i % 13 == 5 else 0)
                    tp.records.append((key, value, ts))
                    tp.codecs.append(codec)
                    lines.append("\t".join([t.name, str(p), codec, str(ts), _b64(key), _b64(value)]))
                    i += 1
                lines.append("#flush")
                phase += 1
    return lines, produced


def _value(rng: random.Random, i: int) -> bytes:
    words = ["click", "view", "order", "refund", "login", "logout", "search", "cart"]
    body = {"seq": i, "event": rng.choice(words), "session": rng.randbytes(rng.randint(4, 24)).hex(),
            "amount": round(rng.random() * 1000, 2)}
    return json.dumps(body, separators=(",", ":")).encode()


def _b64(b: bytes | None) -> str:
    return "-" if b is None else base64.b64encode(b).decode()


# --- the run ----------------------------------------------------------------------------------
def compile_producer(work: Path) -> Path:
    out = work / "producer-classes"
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([JAVAC, "-nowarn", "-cp", str(LIB / "*"), "-d", str(out), str(PRODUCER_SOURCE)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode:
        raise SystemExit(f"javac {PRODUCER_SOURCE} failed:\n{proc.stderr}")
    return out


def wait_for_cleaner(data: Path, topics: list[TopicSpec], broker: Server, timeout: float = 90) -> dict[str, int]:
    """Until the cleaner has compacted every compacted partition (cleaner-offset-checkpoint > 0)
    and the segments it replaced are gone (no ``*.deleted`` file left)."""
    want = {f"{t.name}-{p}" for t in topics if t.compacted for p in range(t.partitions)}
    cp = data / "cleaner-offset-checkpoint"
    deadline = time.monotonic() + timeout
    while True:
        got: dict[str, int] = {}
        lines = cp.read_text().split("\n") if cp.exists() else []
        if len(lines) > 2 and lines[1].isdigit():
            for line in lines[2:2 + int(lines[1] or 0)]:
                topic, part, off = line.rsplit(" ", 2)
                got[f"{topic}-{part}"] = int(off)
        pending = [f.name for tp in want for f in (data / tp).glob("*.deleted")]
        if all(got.get(tp, 0) > 0 for tp in want) and not pending:
            return {tp: got[tp] for tp in sorted(want)}
        if time.monotonic() > deadline:
            raise SystemExit(f"the log cleaner did not compact {sorted(want)} in {timeout:.0f}s; "
                             f"logs in {broker.log_dir}")
        time.sleep(0.5)


def generate(out: Path, work: Path, seed: int) -> dict:
    if not (LIB / f"kafka_2.13-{VERSION}.jar").is_file():
        subprocess.run([str(ROOT / "tools" / "kafka" / "fetch.sh"), VERSION], check=True)
    started = time.monotonic()
    rng = random.Random(seed)
    lines, produced = plan(rng)
    classes = compile_producer(work)

    zk_port, port = free_port(), free_port()
    (work / "zk-data").mkdir(parents=True, exist_ok=True)
    zoo_cfg = work / "zoo.cfg"
    zoo_cfg.write_text(ZOO_CFG.format(data=work / "zk-data", port=zk_port))
    zk = Server("ZooKeeper", java_cmd("org.apache.zookeeper.server.quorum.QuorumPeerMain", str(zoo_cfg),
                                      log_dir=work / "zk-logs"), work / "zk-logs")
    data = work / "kafka-logs"
    props = work / "server.properties"
    props.write_text(SERVER_PROPERTIES.format(version=VERSION, zk_port=zk_port, port=port, data=data, ibp=IBP))
    broker = Server(f"Kafka {VERSION}", java_cmd("kafka.Kafka", str(props), log_dir=work / "kafka-run"),
                    work / "kafka-run")
    topics_file = work / "topics.tsv"
    topics_file.write_text("".join(f"{t.name}\t{t.partitions}\t{','.join(f'{k}={v}' for k, v in t.configs().items())}\n"
                                   for t in TOPICS))
    records_file = work / "records.tsv"
    records_file.write_text("\n".join(lines) + "\n")
    try:
        zk.start(port=zk_port)
        broker.start(ready=re.compile(r"\[KafkaServer id=0\] started"))
        proc = subprocess.run(java_cmd("LegacyProducer", f"127.0.0.1:{port}", str(topics_file), str(records_file),
                                       log_dir=work / "producer", extra_cp=(classes,)),
                              capture_output=True, text=True, timeout=600)
        if proc.returncode:
            raise SystemExit(f"LegacyProducer failed (rc={proc.returncode}):\n{proc.stderr[-4000:]}\n{broker.tail()}")
        for line in proc.stdout.splitlines():
            topic, part, off, ts = line.split("\t")
            tp = produced[f"{topic}-{part}"]
            tp.offsets.append(int(off))
            tp.timestamps.append(int(ts))
        cleaned = wait_for_cleaner(data, TOPICS, broker)
        rc = broker.stop()
        if rc not in (0, 143) or "[KafkaServer id=0] shut down completed" not in broker.text():
            raise SystemExit(f"Kafka did not shut down cleanly (rc={rc}); logs in {broker.log_dir}\n{broker.tail()}")
    finally:
        broker.kill()
        zk.stop()
        zk.kill()
    if not (data / ".kafka_cleanshutdown").exists():
        raise SystemExit(f"no clean-shutdown marker in {data}")

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copytree(data, out / "kafka-logs", copy_function=shutil.copy2,
                    ignore=shutil.ignore_patterns("__consumer_offsets-*", "__transaction_state-*"))
    manifest = describe(out, produced, cleaned, seed, time.monotonic() - started)
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    return manifest


# --- checking what Kafka wrote ----------------------------------------------------------------
def describe(out: Path, produced: dict[str, Produced], cleaned: dict[str, int], seed: int, seconds: float) -> dict:
    """Read every segment back with kmigrate's format layer; fail unless it is what was asked for."""
    log_dir = out / "kafka-logs"
    problems: list[str] = []
    topics: dict[str, dict] = {}
    for t in TOPICS:
        parts = {}
        for p in range(t.partitions):
            tp = f"{t.name}-{p}"
            pdir = log_dir / tp
            logs = sorted(pdir.glob("*.log"))
            magics: set[int] = set()
            codecs: dict[str, int] = {}
            ts_types: set[str] = set()
            records: list[tuple[int, bytes | None, bytes | None, int]] = []
            for log in logs:
                for batch in read_batches(log, strict=True):
                    batch.ensure_valid()
                    magics.add(batch.magic)
                    codecs[batch.compression.label] = codecs.get(batch.compression.label, 0) + 1
                    ts_types.add(batch.timestamp_type.label)
                    records += [(r.offset, r.key, r.value, r.timestamp) for r in batch.records()]
            sent = produced[tp]
            if magics != {t.magic}:
                problems.append(f"{tp}: magic {sorted(magics)}, expected {t.magic} (message.format.version "
                                f"{t.message_format})")
            want_ts = {"NoTimestampType"} if t.magic == 0 else {t.timestamp_type}
            if ts_types != want_ts:
                problems.append(f"{tp}: timestamp types {sorted(ts_types)}, expected {sorted(want_ts)}")
            if set(codecs) != set(t.codecs):
                problems.append(f"{tp}: codecs {sorted(codecs)}, expected {sorted(t.codecs)}")
            if len(logs) < 3:
                problems.append(f"{tp}: {len(logs)} segments, expected several")
            if sent.offsets != list(range(len(sent.records))):
                problems.append(f"{tp}: the broker gave offsets {sent.offsets[:5]}..., "
                                f"expected 0..{len(sent.records) - 1}")
            by_offset = {o: (k, v) for o, k, v, _ in records}
            if t.compacted:
                # the cleaner keeps the last record of each key (tombstones too, delete.retention.ms is long)
                # of the cleaned part, and everything from the cleaner's checkpoint on
                upto = cleaned[tp]
                want = {off: sent.records[off][:2] for off in range(len(sent.records))
                        if off >= upto or last_before(sent.records, off, upto)}
                if by_offset != want:
                    problems.append(f"{tp}: {len(by_offset)} records after compaction, expected {len(want)}")
                if len(by_offset) >= len(sent.records):
                    problems.append(f"{tp}: the cleaner removed nothing")
            elif by_offset != {off: r[:2] for off, r in enumerate(sent.records)}:
                problems.append(f"{tp}: the records in the files are not the ones produced")
            if (t.magic == 1 and t.timestamp_type == "CreateTime" and not t.compacted
                    and [ts for _, _, _, ts in records] != [r[2] for r in sent.records]):
                problems.append(f"{tp}: CreateTime timestamps differ from the producer's")
            leo = records[-1][0] + 1 if records else 0
            parts[str(p)] = {
                "records_produced": len(sent.records),
                "records_in_files": len(records),
                "keyed": sum(1 for _, k, _, _ in records if k is not None),
                "null_keyed": sum(1 for _, k, _, _ in records if k is None),
                "null_values": sum(1 for _, _, v, _ in records if v is None),
                "segments": len(logs),
                "log_start_offset": int(logs[0].name.split(".")[0]) if logs else 0,
                "log_end_offset": leo,
                "entries_by_codec": dict(sorted(codecs.items())),
                **({"cleaner_offset_checkpoint": cleaned[tp]} if tp in cleaned else {}),
            }
        topics[t.name] = {
            "message.format.version": t.message_format,
            "magic": t.magic,
            "compression": list(t.codecs),
            "timestamp.type": "NoTimestampType (v0)" if t.magic == 0 else t.timestamp_type,
            "cleanup.policy": "compact" if t.compacted else "delete",
            "configs": t.configs(),
            "partitions": parts,
        }
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    if total > MAX_BYTES:
        problems.append(f"{out}: {total} bytes, more than {MAX_BYTES}")
    if problems:
        raise SystemExit("the generated log dir is not what was asked for:\n  " + "\n  ".join(problems))
    meta = (log_dir / "meta.properties").read_text()
    java = subprocess.run([JAVA, "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    return {
        "what": "genuine legacy Kafka log dir (message format v0 and v1), written by Apache Kafka's own code",
        "written_by": {
            "kafka": VERSION,
            "mode": "ZooKeeper (broker.id=0, single node)",
            "zookeeper": ZOOKEEPER,
            "inter.broker.protocol.version": IBP,
            "log.message.format.version": "0.10.2",
            "producer": f"org.apache.kafka:kafka-clients:{VERSION} (tools/kafka/{VERSION}/LegacyProducer.java), "
                        "idempotence off, compression.type per topic phase, v2 batches converted by the broker",
            "java": java,
            "shutdown": "SIGTERM (controlled shutdown: .kafka_cleanshutdown, recovery points, trimmed indexes)",
        },
        "generator": ".venv/bin/python tools/kafka/legacy_fixtures.py"
                     + ("" if seed == 27 else f" --seed {seed}"),
        "seed": seed,
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seconds": round(seconds, 1),
        "meta.properties": dict(line.split("=", 1) for line in meta.splitlines() if "=" in line and not
                                line.startswith("#")),
        "log_dirs": ["kafka-logs"],
        "total_bytes": total,
        "files_sha256": {str(f.relative_to(out)): hashlib.sha256(f.read_bytes()).hexdigest()
                         for f in sorted(log_dir.rglob("*")) if f.is_file()},
        "topics": topics,
    }


def last_before(records: list[tuple[bytes | None, bytes | None, int]], off: int, upto: int) -> bool:
    """Whether record ``off`` (below the cleaner's checkpoint ``upto``) is the last of its key before ``upto``."""
    key = records[off][0]
    return all(records[o][0] != key for o in range(off + 1, upto))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--work", type=Path, default=None, help="keep ZooKeeper's and Kafka's dirs and logs here")
    ap.add_argument("--seed", type=int, default=27)
    args = ap.parse_args(argv)
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
        manifest = generate(args.out, args.work, args.seed)
    else:
        with tempfile.TemporaryDirectory(prefix="kafka39-legacy-") as work:
            manifest = generate(args.out, Path(work), args.seed)
    print(f"{args.out}: {manifest['total_bytes']} bytes, {len(manifest['files_sha256'])} files, "
          f"{manifest['seconds']}s; Kafka {VERSION} (ZooKeeper, IBP {IBP})")
    for name, t in manifest["topics"].items():
        for p, d in t["partitions"].items():
            print(f"  {name}-{p}: v{t['magic']} {'/'.join(t['compression'])} {t['timestamp.type']} "
                  f"{t['cleanup.policy']}: {d['records_in_files']}/{d['records_produced']} records, "
                  f"{d['segments']} segments, offsets {d['log_start_offset']}..{d['log_end_offset']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
