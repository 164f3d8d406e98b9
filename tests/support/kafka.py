"""The real Apache Kafka as a test oracle: its classpath per version, its main classes, and a
single-node KRaft broker+controller on loopback (docs/testing.md, "Apache Kafka as the judge").

The jars come from Maven Central through the committed POMs ``tools/kafka/<version>/pom.xml``
(``make kafka-tools`` copies them into ``.tools/kafka/<version>/lib/``). A test that needs them
and cannot find them fails with the command to run; it never skips.

``KafkaNode`` formats a node (static quorum, so ``kafka-storage format`` takes no
``--standalone``), starts ``kafka.Kafka`` with ``java -cp``, waits for the line
``Kafka Server started`` while watching for an early exit (the failure shows the last 50 lines of
``server.log`` and its path), stops with SIGTERM (a controlled shutdown that writes the
clean-shutdown marker) and SIGKILLs the process group only when that hangs. ``install_segments``
puts segment files written elsewhere under partition directories the broker created, so that the
next start recovers every segment (``LogLoader`` with ``hadCleanShutdown=false``).
``judge_load`` reads what that load printed: the lines of ``LogLoader``, ``LogSegment``,
``UnifiedLog``, ``ProducerStateManager`` and ``LogManager`` that say Kafka found something wrong,
and each partition's "Completed load of Log(...) with N segments, local-log-start-offset S and
log-end-offset E" line.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import pickle
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest
from kafka.record.memory_records import MemoryRecords

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools" / "kafka"
POMS = ROOT / "tools" / "kafka"
JAVA = os.environ.get("KMIGRATE_JAVA", "java")
JAVAC = os.environ.get("KMIGRATE_JAVAC", "javac")
CLIENT_SOURCE = ROOT / "tests" / "realkafka" / "RealKafkaClient.java"
ADMIN_SOURCE = ROOT / "tests" / "realkafka" / "RealKafkaAdmin.java"

# The pinned versions (one POM each): the latest 4.1 patch and the newest 4.x on Maven Central.
VERSIONS = ("4.1.2", "4.4.0")
LATEST = VERSIONS[-1]
# The Kafka that WROTE the genuine legacy fixtures (ZooKeeper mode; tools/kafka/legacy_fixtures.py)
WRITER = "3.9.2"

FETCH_HINT = "run `make kafka-tools` (it resolves tools/kafka/<version>/pom.xml from Maven Central into .tools/)"


_T = TypeVar("_T")


class ToolchainMissing(AssertionError):
    """The Kafka jars of a version are not in .tools/: the test fails (never skips)."""


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def lib_dir(version: str) -> Path:
    """``.tools/kafka/<version>/lib``; raises ToolchainMissing with the command to run."""
    lib = TOOLS / version / "lib"
    if not (POMS / version / "pom.xml").is_file():
        raise ToolchainMissing(f"no POM for Kafka {version} under {POMS}: pinned versions are {VERSIONS}")
    if not (lib / f"kafka_2.13-{version}.jar").is_file() or not (lib / f"kafka-clients-{version}.jar").is_file():
        raise ToolchainMissing(f"the Kafka {version} toolchain is missing from {lib}: {FETCH_HINT}")
    return lib


def classpath(version: str) -> str:
    """The JVM expands ``dir/*`` itself (quote it from a shell)."""
    return str(lib_dir(version) / "*")


def main_class(version: str, tool: str) -> str:
    """The main class of a Kafka command for a version (what its bin/*.sh script runs).

    kafka-dump-log moved from core (Scala, ``kafka.tools``) to the tools module in 4.3
    (KAFKA-14579); kafka-storage is still ``kafka.tools.StorageTool`` in 4.4."""
    four_three = _minor(version) >= (4, 3)
    classes = {
        "kafka-server-start": "kafka.Kafka",
        "kafka-storage": "kafka.tools.StorageTool",
        "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments" if four_three else "kafka.tools.DumpLogSegments",
        "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
        "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    }
    return classes[tool]


LOG4J2 = """\
# Written by tests/support/kafka.py: everything into ${sys:kafka.logs.dir}/server.log.
status = warn
appender.f.type = File
appender.f.name = F
appender.f.fileName = ${sys:kafka.logs.dir}/server.log
appender.f.layout.type = PatternLayout
appender.f.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.f.ref = F
logger.req.name = kafka.request.logger
logger.req.level = WARN
logger.ctl.name = org.apache.kafka.controller
logger.ctl.level = WARN
logger.raft.name = org.apache.kafka.raft
logger.raft.level = WARN
"""


# The tests' JVMs start fast (C1 only, serial GC); bin/kafka-run-class.sh's defaults
# (KAFKA_JVM_PERFORMANCE_OPTS) are for timing the broker's own work (bench/cleaner.py).
FAST_START = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
KAFKA_JVM_PERFORMANCE_OPTS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                              "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                              "-Djava.awt.headless=true")


def java_cmd(version: str, main: str, *args: str, logs_dir: Path | None = None, heap: str = "-Xmx512m",
             extra_cp: Iterable[Path] = (), jvm_opts: Iterable[str] = FAST_START) -> list[str]:
    cp = os.pathsep.join([classpath(version), *map(str, extra_cp)])
    cmd = [JAVA, heap, *jvm_opts]
    if logs_dir is not None:
        logs_dir.mkdir(parents=True, exist_ok=True)
        conf = logs_dir / "log4j2.properties"
        if not conf.exists():
            conf.write_text(LOG4J2)
        cmd += [f"-Dlog4j2.configurationFile={conf}", f"-Dkafka.logs.dir={logs_dir}"]
    return [*cmd, "-cp", cp, main, *args]


def run_tool(version: str, tool: str, *args: str, logs_dir: Path | None = None, timeout: float = 120,
             check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a Kafka command (by its script name) of ``version`` and capture its output."""
    cmd = java_cmd(version, main_class(version, tool), *args, logs_dir=logs_dir)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode:
        raise AssertionError(f"{tool} {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-4000:]}"
                             f"\n{proc.stderr[-4000:]}")
    return proc


def client_classes(version: str) -> Path:
    """RealKafkaClient.java compiled against ``version``'s clients, cached in .tools/ by source hash."""
    return java_classes(version, CLIENT_SOURCE)


def java_classes(version: str, source: Path) -> Path:
    """A one-file Java program of tests/realkafka/ (RealKafkaClient.java, RealKafkaAdmin.java)
    compiled against ``version``'s jars, cached in .tools/ by source hash; the class path entry."""
    lib_dir(version)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    out = TOOLS / version / "client" / digest
    if (out / f"{source.stem}.class").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".build-"))
    proc = subprocess.run([JAVAC, "-nowarn", "-cp", classpath(version), "-d", str(tmp), str(source)],
                          capture_output=True, text=True, timeout=180)
    if proc.returncode:
        shutil.rmtree(tmp, ignore_errors=True)
        raise AssertionError(f"javac {source} against Kafka {version} failed:\n{proc.stderr}")
    try:
        os.rename(tmp, out)
    except OSError:  # another worker won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def new_cluster_id() -> str:
    """Kafka's Uuid string: URL-safe base64 of 16 bytes, no padding."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


# --- what a load printed ---------------------------------------------------------------------
# Exact message texts (log4j placeholders cut) of Kafka 4.1 and 4.4, by the source that logs
# them; tests/realkafka/test_harness.py checks that each is still a string constant of the pinned
# jars, so a reworded message cannot pass the judge unnoticed.
LOAD_COMPLAINTS: dict[str, tuple[str, ...]] = {
    "LogSegment.recover: a batch failed its size or CRC check, the segment is truncated there": (
        "Found invalid messages in log segment ",
        "Truncated ",  # "Truncated {} invalid bytes at the end of segment {} during recovery"
    ),
    "LogLoader: recovery truncated or deleted data, or found bad indexes or leftovers": (
        "Corruption found in segment ",
        "Found invalid offset during recovery. Deleting the corrupt segment",
        "Caught segment overflow error: ",
        "Deleting all segments because logEndOffset (",
        "Found a corrupted index file corresponding to log file ",
        "Could not find offset index file corresponding to log file ",
        "Deleting segments as part of log recovery: ",
        "Found an orphaned index file ",
        "Deleting invalid swap file ",
        "Deleting stray temporary file ",
    ),
    "ProducerStateManager: a producer snapshot did not load": (
        "Failed to load producer snapshot from ",
    ),
    "LogManager (kafka.log up to 4.1, storage after) and BrokerMetadataPublisher: stray or failed logs": (
        "marked stray and renamed to ",
        "Loaded stray log: ",
        "Found stray log dir ",
        "treat it as a stray log",
        "Error while loading log dir ",
        "Error while loading logs in ",
        "There was an error in one of the threads during logs loading",
        "Shutdown broker because all log dirs in ",
        "Error occurred while reading log-start-offset-checkpoint file",
    ),
}
# "Truncated " alone is too wide for a log scan: the scan uses the full LogSegment sentence.
_SCAN = [re.escape(p) for ps in LOAD_COMPLAINTS.values() for p in ps if p != "Truncated "]
_SCAN.append(r"Truncated \d+ invalid bytes at the end of segment ")
COMPLAINT = re.compile("|".join(_SCAN))
COMPLETED = re.compile(
    r"Completed load of Log\(dir=(?P<dir>[^,]*), .*?, topic=(?P<topic>[^,]+), partition=(?P<partition>\d+),.*?\) "
    r"with (?P<segments>\d+) segments, local-log-start-offset (?P<lso>-?\d+) and log-end-offset (?P<leo>-?\d+)")
RECOVERING = re.compile(r"Recovering (\d+) logs from (\S+) since no clean shutdown file was found")
STARTED = re.compile(r"\[KafkaRaftServer nodeId=\d+\] Kafka Server started")


@dataclass(frozen=True)
class Load:
    segments: int
    log_start_offset: int
    log_end_offset: int


class JudgeError(AssertionError):
    """Kafka's load of a partition said something was wrong, or not what was expected."""


def partition_of(line: str, partitions: Iterable[str]) -> str | None:
    for tp in partitions:
        if re.search(rf"(?<![\w.-]){re.escape(tp)}(?![\w.-])", line):
            return tp
    return None


def complaints(text: str) -> list[str]:
    return [line for line in text.splitlines() if COMPLAINT.search(line)]


def completed_loads(text: str) -> dict[str, Load]:
    return {f"{m['topic']}-{m['partition']}": Load(int(m["segments"]), int(m["lso"]), int(m["leo"]))
            for m in COMPLETED.finditer(text)}


def judge_load(text: str, expected: dict[str, Load], *, log_path: Path | str = "server.log",
               all_partitions: Iterable[str] = ()) -> None:
    """Raise JudgeError unless Kafka's load (the log ``text`` of one start) of every partition in
    ``expected`` printed no complaint and a "Completed load" line with the expected numbers.
    A complaint naming none of ``all_partitions`` (e.g. the log dir failed) counts for all."""
    known = set(all_partitions) | set(expected)
    problems = []
    for line in complaints(text):
        tp = partition_of(line, sorted(known, key=len, reverse=True))
        if tp is None or tp in expected:
            problems.append(f"{tp or 'log dir'}: {line}")
    loads = completed_loads(text)
    for tp, want in sorted(expected.items()):
        got = loads.get(tp)
        if got is None:
            problems.append(f"{tp}: no 'Completed load of Log' line")
        elif got != want:
            problems.append(f"{tp}: loaded {got}, expected {want}")
    if problems:
        raise JudgeError(f"Kafka's load disagrees ({len(problems)} findings; log: {log_path}):\n  "
                         + "\n  ".join(problems))


# --- the node --------------------------------------------------------------------------------
SERVER_PROPERTIES = """\
# Single node, combined broker+controller, static quorum; written by tests/support/kafka.py.
process.roles=broker,controller
node.id={node_id}
controller.quorum.voters={node_id}@127.0.0.1:{cport}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
# the metadata log apart from the data dir the tests rewrite
log.dirs={data}
metadata.log.dir={meta}
num.recovery.threads.per.data.dir=1
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# migrated data is old: retention would delete it (first run log.initial.task.delay.ms after start)
log.retention.ms=-1
log.retention.bytes=-1
# the cleaner rewrites legacy batches of compacted topics as v2: not while Kafka judges them
log.cleaner.enable=false
"""


class KafkaNode:
    """A single-node KRaft broker+controller of ``version`` under ``workdir``."""

    def __init__(self, version: str, workdir: Path, *, node_id: int = 1, heap: str = "-Xmx768m",
                 properties: dict[str, str] | None = None, jvm_opts: Iterable[str] = FAST_START) -> None:
        lib_dir(version)
        self.jvm_opts = tuple(jvm_opts)
        self.version = version
        self.work = Path(workdir)
        self.node_id = node_id
        self.heap = heap
        self.data = self.work / "data"
        self.meta = self.work / "meta"
        self.logs = self.work / "logs"
        for d in (self.data, self.meta, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.cport = free_port()
        self.props = self.work / "server.properties"
        # ``properties`` come last: java.util.Properties keeps a key's last value (e.g.
        # log.cleaner.enable=true for the cleaner reference, tests/realkafka/test_cleaner_reference.py)
        self.props.write_text(SERVER_PROPERTIES.format(node_id=node_id, port=self.port, cport=self.cport,
                                                       data=self.data, meta=self.meta)
                              + "".join(f"{k}={v}\n" for k, v in (properties or {}).items()))
        self.cluster_id = new_cluster_id()
        self.proc: subprocess.Popen[bytes] | None = None
        self._run_start = 0  # server.log offset where the current / last run began
        self.timings: dict[str, float] = {}

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def server_log(self) -> Path:
        return self.logs / "server.log"

    def _time(self, what: str, t0: float) -> None:
        self.timings[what] = self.timings.get(what, 0.0) + time.monotonic() - t0

    def format(self) -> None:
        """``kafka-storage format`` of both dirs. Static quorum (controller.quorum.voters): no
        --standalone. Eligible leader replicas (KIP-966, on by default for clusters formatted by
        4.1+) are turned off: an unclean restart of the only replica would otherwise remove it
        from the ISR and the ELR, and leadership would come back only through an unclean election."""
        t0 = time.monotonic()
        run_tool(self.version, "kafka-storage", "format", "-t", self.cluster_id, "-c", str(self.props),
                 "--feature", "eligible.leader.replicas.version=0", logs_dir=self.logs / "tools")
        self._time("format", t0)

    def start(self, timeout: float = 120) -> None:
        assert self.proc is None, "already running"
        t0 = time.monotonic()
        self._run_start = self.server_log.stat().st_size if self.server_log.exists() else 0
        cmd = java_cmd(self.version, main_class(self.version, "kafka-server-start"), str(self.props),
                       logs_dir=self.logs, heap=self.heap, jvm_opts=self.jvm_opts)
        with open(self.logs / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if STARTED.search(self.run_log()):
                break
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self.proc = None
                raise AssertionError(f"Kafka {self.version} exited (rc={rc}) before 'Kafka Server started'; "
                                     f"logs in {self.logs}\n{self.tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"Kafka {self.version} did not start in {timeout:.0f}s; logs in {self.logs}\n"
                                     f"{self.tail()}")
            time.sleep(0.1)
        self._time("start", t0)

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM: a controlled shutdown that writes the clean-shutdown marker; SIGKILL after
        ``timeout``."""
        if self.proc is None:
            return
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._killpg()
        self.proc = None
        self._time("stop", t0)

    def kill(self) -> None:
        """SIGKILL the process group (a crash)."""
        if self.proc is not None:
            self._killpg()
            self.proc = None

    def _killpg(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def restart(self) -> None:
        """A clean stop and a start on the same dirs."""
        self.stop()
        self.start()

    def run_log(self) -> str:
        """server.log since the current (or last) start."""
        if not self.server_log.exists():
            return ""
        with open(self.server_log, "rb") as f:
            f.seek(self._run_start)
            return f.read().decode("utf-8", "replace")

    def tail(self, n: int = 50) -> str:
        lines: list[str] = []
        for p in (self.server_log, self.logs / "stdout.log"):
            if p.exists():
                lines += [f"--- {p} (last {n} lines)", *p.read_text(errors="replace").splitlines()[-n:]]
        return "\n".join(lines)

    # --- clients -----------------------------------------------------------------------------
    def client(self, *args: str, timeout: float = 180) -> str:
        classes = client_classes(self.version)
        cmd = java_cmd(self.version, "RealKafkaClient", args[0], self.bootstrap, *args[1:],
                       logs_dir=self.logs / "client", heap="-Xmx256m", extra_cp=[classes])
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        self._time(f"client {args[0]}", t0)
        if proc.returncode:
            raise AssertionError(f"RealKafkaClient {args[0]} failed (rc={proc.returncode}); logs in {self.logs}\n"
                                 f"{proc.stderr[-4000:]}\n{self.tail()}")
        return proc.stdout

    def create_topics(self, topics: dict[str, tuple[int, dict[str, str]]]) -> None:
        """name -> (partitions, configs); replication factor 1; returns when all have leaders."""
        spec = self.work / f"topics-{len(topics)}-{time.monotonic_ns()}.tsv"
        spec.write_text("".join(f"{t}\t{n}\t{','.join(f'{k}={v}' for k, v in cfg.items())}\n"
                                for t, (n, cfg) in topics.items()))
        self.client("create", str(spec))

    def await_leaders(self, topics: Iterable[str]) -> None:
        self.client("leaders", *topics)

    def consume(self, topics: Iterable[str]) -> dict[str, list[ConsumedRecord]]:
        """Every record of the topics, read by the real Java consumer: "topic-partition" -> records."""
        out: dict[str, list[ConsumedRecord]] = {}
        for line in self.client("consume", *topics).splitlines():
            f = line.split("\t")
            if f[0] == "#end":
                out.setdefault(f"{f[1]}-{f[2]}", [])
                continue
            out.setdefault(f"{f[0]}-{f[1]}", []).append(ConsumedRecord(
                offset=int(f[2]), timestamp=int(f[3]), timestamp_type=f[4], key=_unb64(f[5]), value=_unb64(f[6]),
                headers=tuple((base64.b64decode(k).decode(), _unb64(v)) for k, v in
                              (h.split(":") for h in f[7].split(";") if h))))
        return out

    def _spec_client(self, command: str, rows: Iterable[tuple]) -> list[list[str]]:
        spec = self.work / f"{command}-{time.monotonic_ns()}.tsv"
        spec.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))
        return [line.split("\t") for line in self.client(command, str(spec)).splitlines()]

    def seek_first(self, targets: Iterable[tuple[str, int, int]]) -> dict[tuple[str, int, int], int | None]:
        """(topic, partition, offset) -> the offset of the first record the broker serves after a
        seek there (an offset-index lookup), None when nothing is at or after it."""
        return {(f[0], int(f[1]), int(f[2])): None if f[3] == "-" else int(f[3])
                for f in self._spec_client("seek", targets)}

    def offsets_for_times(self, targets: Iterable[tuple[str, int, int]]) -> dict[tuple[str, int, int],
                                                                                tuple[int, int] | None]:
        """(topic, partition, timestamp) -> (offset, timestamp) of the Java consumer's offsetsForTimes
        (a time-index lookup), None when no record has a timestamp at or after it."""
        return {(f[0], int(f[1]), int(f[2])): None if f[3] == "-" else (int(f[3]), int(f[4]))
                for f in self._spec_client("times", targets)}

    # --- putting segments written elsewhere under the broker's partitions --------------------
    def install_segments(self, placements: dict[str, Path]) -> None:
        """Node stopped. ``placements``: partition dir name here ("topic-N", created by the broker)
        -> a partition dir written elsewhere. Every file of the broker's partition except
        ``partition.metadata`` (it holds the topic id the metadata knows) is replaced by the source's
        files; the partitions' recovery points are dropped and the clean-shutdown marker removed,
        so the next start recovers every segment."""
        assert self.proc is None, "stop the node first"
        for tp, src in placements.items():
            dst = self.data / tp
            if not (dst / "partition.metadata").is_file():
                raise AssertionError(f"{dst} has no partition.metadata: create the topic first")
            for f in dst.iterdir():
                if f.name != "partition.metadata":
                    f.unlink() if f.is_file() else shutil.rmtree(f)
            for f in sorted(Path(src).iterdir()):
                if f.is_file() and f.name != "partition.metadata" and _segment_file(f.name):
                    shutil.copy2(f, dst / f.name)
        cp = self.data / "recovery-point-offset-checkpoint"
        if cp.exists():
            entries = [e for e in read_offset_checkpoint(cp) if f"{e[0]}-{e[1]}" not in placements]
            write_offset_checkpoint(cp, entries)
        (self.data / ".kafka_cleanshutdown").unlink(missing_ok=True)


    def install_indexes(self, placements: dict[str, Path]) -> dict[str, dict[str, bytes]]:
        """Node stopped cleanly (marker and recovery points written by Kafka). Replace every
        ``.index``, ``.timeindex``, ``.txnindex`` and ``.snapshot`` of the partitions by the source's
        own files, keeping the clean-shutdown marker and the recovery-point checkpoint, so the next
        start loads them as they are (``LogLoader`` with ``hadCleanShutdown=true``, no recovery).
        Returns what Kafka had there (the files its recovery rebuilt): partition -> name -> bytes."""
        assert self.proc is None, "stop the node first"
        if not (self.data / ".kafka_cleanshutdown").is_file():
            raise AssertionError(f"{self.data}: no clean-shutdown marker: stop the node cleanly first")
        rebuilt: dict[str, dict[str, bytes]] = {}
        for tp, src in placements.items():
            dst = self.data / tp
            rebuilt[tp] = {}
            for f in sorted(dst.iterdir()):
                if _INDEX_FILE.match(f.name):
                    rebuilt[tp][f.name] = f.read_bytes()
                    f.unlink()
            for f in sorted(Path(src).iterdir()):
                if f.is_file() and _INDEX_FILE.match(f.name):
                    shutil.copy2(f, dst / f.name)
        return rebuilt


# --- the log cleaner (tests/realkafka/test_cleaner_reference.py, bench/cleaner.py) -----------
# The node's SERVER_PROPERTIES turn the cleaner off; these turn it on, one thread that looks for
# work every 100 ms (default 15 s).
CLEANER_ON = {"log.cleaner.enable": "true", "log.cleaner.threads": "1", "log.cleaner.backoff.ms": "100"}
# A compacted topic whose every closed segment is cleanable at once, nothing deleted by retention,
# tombstones kept, the replaced segments' files deleted after 1 s.
COMPACT_NOW = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0", "min.compaction.lag.ms": "0",
               "retention.ms": "-1", "retention.bytes": "-1", "delete.retention.ms": "86400000000",
               "file.delete.delay.ms": "1000"}
# LogCleaner.recordStats (4.1, 4.4): one INFO message of several lines per cleaning of a log.
CLEANER_STATS = re.compile(
    r"Log cleaner thread (?P<thread>\d+) cleaned log (?P<log>\S+) \(dirty section = \[(?P<first>\d+), (?P<end>\d+)\]\)"
    r"\s+(?P<mb>[\d,.]+) MB of log processed in (?P<seconds>[\d,.]+) seconds \((?P<mb_s>[\d,.]+) MB/sec\)\."
    r"(?:.|\n)*?Start size: (?P<start_mb>[\d,.]+) MB \((?P<start_messages>[\d,]+) messages\)"
    r"\s+End size: (?P<end_mb>[\d,.]+) MB \((?P<end_messages>[\d,]+) messages\)")
UNCLEANABLE = "Marking its partition"  # LogCleaner: "Unexpected exception thrown when cleaning log {}. ..."


@dataclass(frozen=True)
class CleanerRun:
    """What the cleaner printed for one cleaning of one log (its own figures, 0.1 s resolution)."""
    log: str  # "topic-partition"
    first_dirty: int
    end: int  # the dirty section is [first_dirty, end]
    mb: float
    seconds: float
    start_messages: int
    end_messages: int


def cleaner_runs(text: str) -> list[CleanerRun]:
    def num(s: str) -> float:
        return float(s.replace(",", ""))
    return [CleanerRun(m["log"], int(m["first"]), int(m["end"]), num(m["mb"]), num(m["seconds"]),
                       int(num(m["start_messages"])), int(num(m["end_messages"])))
            for m in CLEANER_STATS.finditer(text)]


def cleaner_checkpoint(data: Path) -> dict[str, int]:
    """``cleaner-offset-checkpoint`` of a data dir: "topic-partition" -> the first offset not cleaned."""
    cp = data / "cleaner-offset-checkpoint"
    if not cp.exists() or not cp.read_text().strip():
        return {}
    return {f"{t}-{p}": o for t, p, o in read_offset_checkpoint(cp)}


def wait_for_cleaner(node: KafkaNode, upto: dict[str, int], timeout: float = 60) -> float:
    """Node running with CLEANER_ON. Until the cleaner has cleaned every partition of ``upto`` up
    to the offset given (its checkpoint reached it) and left no ``.cleaned`` or ``.swap`` file;
    returns the seconds waited. Fails at once when the cleaner marks a partition uncleanable or
    the JVM exits."""
    t0 = time.monotonic()
    while True:
        got = cleaner_checkpoint(node.data)
        busy = [f for tp in upto for f in (node.data / tp).iterdir() if f.suffix in (".cleaned", ".swap")]
        if all(got.get(tp, -1) >= off for tp, off in upto.items()) and not busy:
            return time.monotonic() - t0
        log = node.run_log()
        if UNCLEANABLE in log or (node.proc is not None and node.proc.poll() is not None):
            raise AssertionError(f"the log cleaner failed; logs in {node.logs}\n"
                                 + "\n".join(ln for ln in log.splitlines() if "clean" in ln.lower())[-4000:])
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"the log cleaner did not clean {upto} in {timeout:.0f}s (checkpoint {got}); "
                                 f"logs in {node.logs}")
        time.sleep(0.1)


_INDEX_FILE = re.compile(r"^\d{20}\.(index|timeindex|txnindex|snapshot)$")
_SEGMENT_FILE = re.compile(r"^\d{20}\.(log|index|timeindex|txnindex|snapshot)$")


def _segment_file(name: str) -> bool:
    return bool(_SEGMENT_FILE.match(name)) or name == "leader-epoch-checkpoint"


@dataclass(frozen=True)
class ConsumedRecord:
    offset: int
    timestamp: int
    timestamp_type: str  # NO_TIMESTAMP_TYPE, CREATE_TIME, LOG_APPEND_TIME
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _unb64(s: str) -> bytes | None:
    return None if s == "-" else base64.b64decode(s)


def read_offset_checkpoint(path: Path) -> list[tuple[str, int, int]]:
    lines = path.read_text().split("\n")
    assert lines[0] == "0", f"{path}: version {lines[0]!r}"
    n = int(lines[1])
    out = []
    for line in lines[2:2 + n]:
        topic, part, off = line.rsplit(" ", 2)
        out.append((topic, int(part), int(off)))
    return out


def write_offset_checkpoint(path: Path, entries: list[tuple[str, int, int]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(f"{line}\n" for line in ["0", str(len(entries)), *(f"{t} {p} {o}" for t, p, o in entries)]))
    os.replace(tmp, path)


# --- index files, read independently of kmigrate's format layer -----------------------------
def offset_index_entries(data: bytes, *, trim: bool = True) -> list[tuple[int, int]]:
    """(relative offset, position) of every entry of a ``.index`` (8-byte entries). ``trim``: a
    trailing run of zero entries after the first is dropped, the preallocated space of a file
    Kafka has open (trimmed on close); a file kmigrate wrote is read with ``trim=False``."""
    entries = [struct.unpack_from(">ii", data, i) for i in range(0, len(data) - len(data) % 8, 8)]
    while trim and len(entries) > 1 and entries[-1] == (0, 0):
        entries.pop()
    return entries


def time_index_entries(data: bytes, *, trim: bool = True) -> list[tuple[int, int]]:
    """(timestamp, relative offset) of every entry of a ``.timeindex`` (12-byte entries); ``trim``
    as for ``offset_index_entries``."""
    entries = [struct.unpack_from(">qi", data, i) for i in range(0, len(data) - len(data) % 12, 12)]
    while trim and entries and entries[-1] == (0, 0):
        entries.pop()
    return entries


def index_differences(ours: Path, kafkas: dict[str, bytes]) -> list[str]:
    """Where the ``.index`` / ``.timeindex`` entries of a partition dir (kmigrate's) differ from
    the files Kafka's recovery rebuilt for the same segments. Only Kafka's files are trimmed of
    preallocated zero entries: kmigrate's are compared as written, so a trailing zero entry of
    its own is a difference."""
    out = []
    for name, theirs in sorted(kafkas.items()):
        kind = name.rsplit(".", 1)[1]
        if kind not in ("index", "timeindex"):
            continue
        parse = offset_index_entries if kind == "index" else time_index_entries
        mine = (ours / name).read_bytes() if (ours / name).exists() else None
        if mine is None:
            out.append(f"{ours.name}/{name}: kmigrate wrote none; Kafka's has {len(parse(theirs))} entries")
        elif parse(mine, trim=False) != parse(theirs):
            out.append(f"{ours.name}/{name}: kmigrate {parse(mine, trim=False)} != Kafka {parse(theirs)}")
    return out


EMPTY_SNAPSHOT_SIZE = 10  # version (int16), CRC (int32), producer entry count 0 (int32)


def snapshot_differences(ours: dict[str, Path], kafkas: dict[str, dict[str, bytes]]) -> list[str]:
    """Partition -> where kmigrate's ``.snapshot`` files (names and bytes) differ from Kafka's.
    Where kmigrate wrote none (its source had none) and every one of Kafka's is empty, there is no
    difference in producer state: Kafka's recovery of data without producer ids takes empty
    snapshots at segment boundaries and the log end itself."""
    out = []
    for tp, d in sorted(ours.items()):
        mine = {f.name: f.read_bytes() for f in d.glob("*.snapshot")}
        theirs = {n: b for n, b in kafkas[tp].items() if n.endswith(".snapshot")}
        if not mine and all(len(b) == EMPTY_SNAPSHOT_SIZE for b in theirs.values()):
            continue
        if mine != theirs:
            out.append(f"{tp}: kmigrate {sorted((n, len(b)) for n, b in mine.items())}, "
                       f"Kafka {sorted((n, len(b)) for n, b in theirs.items())}, different bytes in "
                       f"{sorted(n for n in set(mine) & set(theirs) if mine[n] != theirs[n])}")
    return out


# --- what the files hold, read by kafka-python (not kmigrate's codecs) -----------------------
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
    batch_bases: list[tuple[int, int, int]] = field(default_factory=list)  # (segment base, position, first offset)


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
        seg_base = int(log.name.split(".")[0])
        pos = 0
        data = log.read_bytes()
        for batch in _batches(data):
            assert batch.validate_crc(), f"{log}: bad batch CRC"
            magic = batch.magic
            size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
            if magic < 2:
                records = list(batch)
                last = records[-1].offset if records else batch.base_offset
                first = records[0].offset if records else batch.base_offset
            else:
                last = batch.base_offset + batch.last_offset_delta
                first = batch.base_offset
            out.batch_bases.append((seg_base, pos, first))
            pos += size
            if magic >= 2 and batch.is_control_batch:
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


def record_diff(got: list[ConsumedRecord], want: list[ConsumedRecord]) -> str:
    if len(got) != len(want):
        return f"{len(got)} records, expected {len(want)}"
    for g, w in zip(got, want, strict=True):
        if g != w:
            return f"first difference at offset {w.offset}: got {g}, expected {w}"
    return ""


def seek_targets(topic: str, partition: int, partition_dir: Path, files: PartitionFiles,
                 limit: int | None = None) -> list[tuple[str, int, int]]:
    """Offsets whose fetch goes through an offset-index entry: for every entry of every ``.index``
    of the dir, its offset and the offset just before the batch at its position (a fetch there must
    start in the batch before; an entry with too small an offset sends it to the later batch).
    ``limit``: at most that many, spread evenly over the partition."""
    first_at = {(seg, pos): first for seg, pos, first in files.batch_bases}
    out = set()
    for idx in sorted(partition_dir.glob("*.index")):
        seg = int(idx.name.split(".")[0])
        for rel, pos in offset_index_entries(idx.read_bytes()):
            out.add(seg + rel)
            if (seg, pos) in first_at and first_at[(seg, pos)] > 0:
                out.add(first_at[(seg, pos)] - 1)
    offsets = sorted(out)
    if limit is not None and len(offsets) > limit:
        offsets = [offsets[i * len(offsets) // limit] for i in range(limit)]
    return [(topic, partition, o) for o in offsets]


def expected_first(records: list[FileRecord], target: int) -> int | None:
    """The first offset at or after ``target`` (compacted logs have holes)."""
    return next((r.offset for r in records if r.offset >= target), None)


def pick_timestamps(records: list[FileRecord]) -> list[int]:
    """A few offsetsForTimes targets for a partition's records: before the first timestamp, at
    records' own timestamps (the sixth, which the fixtures put out of order, and the last), between
    two, at and after the largest. Empty when no record has a timestamp (v0)."""
    stamps = sorted({r.timestamp for r in records if r.timestamp >= 0})
    if not stamps:
        return []
    picks = {stamps[0] - 1, stamps[0], stamps[len(stamps) // 3], stamps[len(stamps) // 2] + 1, stamps[-1],
             stamps[-1] + 1, records[-1].timestamp}
    if len(records) > 5:
        picks.add(records[5].timestamp)
    return sorted(t for t in picks if t >= 0)


def expected_offset_for_time(records: list[FileRecord], ts: int) -> tuple[int, int] | None:
    """offsetsForTimes by its definition: the earliest offset whose timestamp is at or after ``ts``."""
    return next(((r.offset, r.timestamp) for r in records if r.timestamp >= ts), None)


def corrupt_index_entry(partition_dir: Path, files: PartitionFiles) -> tuple[str, int, int]:
    """Give one ``.index`` entry a wrong relative offset: the offset just before the batch it
    points at, so it claims that batch starts one offset early. Returns (file name, entry, wrong
    offset). Chosen where the previous entry is further back, so the entries stay increasing (what
    Kafka's own index sanity check looks at) and only a lookup tells."""
    first_at = {(seg, pos): first for seg, pos, first in files.batch_bases}
    for idx in sorted(partition_dir.glob("*.index")):
        seg = int(idx.name.split(".")[0])
        entries = offset_index_entries(idx.read_bytes())
        for i, (_rel, pos) in enumerate(entries):
            first = first_at.get((seg, pos))
            prev = entries[i - 1][0] + seg if i else seg - 1
            if first is not None and first - 1 > prev and first - 1 >= seg:
                data = bytearray(idx.read_bytes())
                struct.pack_into(">i", data, i * 8, first - 1 - seg)
                idx.write_bytes(bytes(data))
                return idx.name, i, first - 1
    raise AssertionError(f"{partition_dir}: no index entry to corrupt")


# --- fixtures (a conftest imports them where tests need them) --------------------------------
def shared_across_workers(tmp_path_factory: pytest.TempPathFactory, key: str, build: Callable[[], _T]) -> _T:
    """``build()`` once per test session. pytest-xdist hands a module's tests to whichever worker
    is free, so a module-scoped scenario would otherwise be built (brokers started, consumers run)
    on each worker that gets one of its tests: the first worker builds it under a file lock and
    pickles the result into the session's shared temporary directory; the others wait and load
    it (the broker's logs stay where the builder's node wrote them). Without xdist: ``build()``."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return build()
    root = tmp_path_factory.getbasetemp().parent / "realkafka-shared"
    root.mkdir(exist_ok=True)
    data = root / f"{key}.pickle"
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if data.exists():
            return pickle.loads(data.read_bytes())
        result = build()
        tmp = data.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(result))
        os.replace(tmp, data)
        return result


@pytest.fixture(scope="module")
def kafka_node_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """``make(version=LATEST, properties=None) -> KafkaNode`` (formatted, not started; ``properties``
    added to server.properties); every node is stopped at the end of the module. Logs stay under
    pytest's temporary directory (failures print the path)."""
    nodes: list[KafkaNode] = []

    def make(version: str = LATEST, properties: dict[str, str] | None = None) -> KafkaNode:
        node = KafkaNode(version, tmp_path_factory.mktemp(f"kafka-{version}-"), properties=properties)
        nodes.append(node)
        node.format()
        return node

    yield make
    for node in nodes:
        node.stop()
