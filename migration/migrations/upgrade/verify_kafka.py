"""Apache Kafka's own ``kafka-dump-log`` as the verifier of an upgrade run (``kmigrate verify
--kafka-home DIR``; docs/operations.md, "Verify with the Kafka you upgrade to").

The operator points at the Kafka distribution the cluster is upgrading to (a directory with
``libs/*.jar``, as Kafka's binary tarball unpacks). Its DumpLogSegments (the main class
``bin/kafka-dump-log.sh`` runs: ``org.apache.kafka.tools.DumpLogSegments`` from 4.3,
``kafka.tools.DumpLogSegments`` before; whichever the jars hold) reads every segment the run
rewrote with ``--deep-iteration``, in one JVM; each unit's batches must all be valid, its records
as many as the report's ``records_after``, its first and last offsets the report's, its offsets
increasing, every batch at the run's target magic, and the batch count what kmigrate's own reader
finds in the same files. The report then says ``verified by Apache Kafka X.Y.Z``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from migration.audit.model import RunReport, UnitStatus

MAIN_CLASSES = ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments")
VERIFIED_BY = "verified_by"  # the key in the report's formats.other
_VERSION_JAR = re.compile(r"^kafka-clients-(\d+\.\d+\.\d+[\w.-]*)\.jar$")
_BATCH = re.compile(r"^baseOffset: (-?\d+) lastOffset: (-?\d+) count: (\d+) .* magic: (\d) .*isvalid: (true|false)")
_RECORD = re.compile(r"^\| offset: (\d+) ")
_FILES_PER_JVM = 400


class KafkaHomeError(ValueError):
    """--kafka-home does not hold a usable Kafka distribution, or no java runs it (one line)."""


@dataclass(frozen=True)
class KafkaDistribution:
    home: Path
    version: str
    java: str
    main_class: str

    @property
    def label(self) -> str:
        return f"Apache Kafka {self.version}"

    def command(self, *args: str) -> list[str]:
        return [self.java, "-Xmx512m", "-cp", str(self.home / "libs" / "*"), self.main_class, *args]


def find_kafka(home: str | os.PathLike[str]) -> KafkaDistribution:
    """The distribution under ``home`` (``libs/kafka-clients-X.Y.Z.jar`` names the version) and
    the ``java`` that runs it ($JAVA_HOME/bin/java, else java on PATH)."""
    root = Path(home)
    if not root.is_dir():
        raise KafkaHomeError(f"--kafka-home {home}: {'not a directory' if root.exists() else 'no such directory'} "
                             "(give the Kafka distribution you upgrade to: the directory with libs/*.jar)")
    libs = root / "libs"
    jars = sorted(libs.glob("*.jar")) if libs.is_dir() else []
    if not jars:
        raise KafkaHomeError(f"--kafka-home {home}: no libs/*.jar: not a Kafka distribution (as its tarball unpacks)")
    versions = [m[1] for j in jars if (m := _VERSION_JAR.match(j.name))]
    if not versions:
        raise KafkaHomeError(f"--kafka-home {home}: no libs/kafka-clients-<version>.jar: which Kafka is it?")
    main = _main_class(jars)
    if main is None:
        raise KafkaHomeError(f"--kafka-home {home}: no DumpLogSegments class in libs/*.jar (kafka-dump-log): "
                             "give the full distribution (kafka_2.13 and kafka-tools jars)")
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home and (Path(java_home) / "bin" / "java").is_file() \
        else shutil.which("java")
    if java is None:
        raise KafkaHomeError("no java to run Kafka's kafka-dump-log: set JAVA_HOME or put java on PATH")
    return KafkaDistribution(root, versions[0], java, main)


def _main_class(jars: list[Path]) -> str | None:
    wanted = {c.replace(".", "/") + ".class": c for c in MAIN_CLASSES}
    found = set()
    for jar in jars:
        if not jar.name.startswith("kafka"):
            continue
        try:
            with zipfile.ZipFile(jar) as z:
                found |= {wanted[n] for n in z.namelist() if n in wanted}
        except (OSError, zipfile.BadZipFile):
            continue
    return next((c for c in MAIN_CLASSES if c in found), None)


@dataclass
class DumpedSegment:
    batches: list[tuple[int, int, int, int, bool]] = field(default_factory=list)  # base, last, count, magic, valid
    records: list[int] = field(default_factory=list)  # offsets, in file order
    error: str | None = None  # what kafka-dump-log threw reading it


def dump_segments(dist: KafkaDistribution, files: list[Path], timeout: float = 600) -> dict[str, DumpedSegment]:
    """``kafka-dump-log --deep-iteration`` over ``files``: per file (as given), its batches and
    records. A file the tool stops on (an exception: a batch it cannot read) gets its ``error``
    and the files after it are dumped by a new JVM."""
    out: dict[str, DumpedSegment] = {}
    pending = list(files)
    while pending:
        chunk = pending[:_FILES_PER_JVM]
        try:
            proc = subprocess.run(dist.command("--deep-iteration", "--files", ",".join(map(str, chunk))),
                                  capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise KafkaHomeError(f"{dist.label}'s kafka-dump-log did not run: {exc}") from None
        current: str | None = None
        for line in proc.stdout.splitlines():
            if line.startswith("Dumping "):
                current = line[len("Dumping "):]
                out.setdefault(current, DumpedSegment())
            elif current is not None and (m := _BATCH.match(line)):
                out[current].batches.append((int(m[1]), int(m[2]), int(m[3]), int(m[4]), m[5] == "true"))
            elif current is not None and (m := _RECORD.match(line)):
                out[current].records.append(int(m[1]))
        if not proc.returncode:
            pending = pending[len(chunk):]
            continue
        first = (proc.stderr.strip().splitlines() or ["no output"])[0]
        if current is None or current not in map(str, chunk):
            raise KafkaHomeError(f"{dist.label}'s kafka-dump-log exited {proc.returncode}: {first}")
        out[current].error = first
        pending = pending[[str(f) for f in pending].index(current) + 1:]
    return out


@dataclass
class Verification:
    kafka: str
    segments: int = 0
    batches: int = 0
    records: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        head = f"verified by {self.kafka}" if self.ok else f"NOT verified by {self.kafka}"
        return (f"{head}: kafka-dump-log --deep-iteration read {self.segments} rewritten segments, "
                f"{self.batches} batches, {self.records} records"
                + ("" if self.ok else f"; {len(self.problems)} problem(s)"))


def _unit_files(path: Path, unit: str, last: int) -> list[Path]:
    """The .log files a unit became: its own and the pieces a split wrote, bases in [unit base, last]."""
    base = int(unit.split(".")[0])
    return sorted(f for f in path.parent.glob("*.log") if base <= int(f.name.split(".")[0]) <= last)


def verify_run(report: RunReport, dist: KafkaDistribution) -> Verification:
    """Compare kafka-dump-log's reading of every segment ``report``'s run rewrote with the report."""
    from migration.formats.file_records import read_batches

    target = report.formats.target_magic
    result = Verification(dist.label)
    units = []
    for _b, topic, partition, u in report.iter_units():
        if u.status is UnitStatus.OK and u.path and u.offsets is not None and u.output_format:
            files = _unit_files(Path(u.path), u.unit, u.offsets.last)
            if not files:
                result.problems.append(f"{topic}-{partition} {u.unit}: no rewritten segment at {u.path}")
                continue
            units.append((topic, partition, u, u.offsets, files))
    dumped = dump_segments(dist, [f for *_, files in units for f in files])
    for topic, partition, u, offsets, files in units:
        where = f"{topic}-{partition} {u.unit}"
        batches, records = [], []
        for f in files:
            d = dumped.get(str(f))
            if d is None:
                result.problems.append(f"{where}: kafka-dump-log did not dump {f}")
                continue
            batches += d.batches
            records += d.records
            if d.error is not None:
                result.problems.append(f"{where}: kafka-dump-log fails reading {f}: {d.error}")
                continue
            ours = sum(1 for _ in read_batches(f))
            if ours != len(d.batches):
                result.problems.append(f"{where}: {f.name}: kafka-dump-log reads {len(d.batches)} batches, "
                                       f"kmigrate {ours}")
        result.segments += len(files)
        result.batches += len(batches)
        result.records += len(records)
        invalid = [b[0] for b in batches if not b[4]]
        if invalid:
            result.problems.append(f"{where}: kafka-dump-log finds {len(invalid)} invalid batch(es) (CRC), the "
                                   f"first at base offset {invalid[0]}")
        if target is not None and (magics := sorted({b[3] for b in batches} - {target})):
            result.problems.append(f"{where}: batches of magic {magics}, the run's target is {target}")
        if u.records_after is not None and len(records) != u.records_after:
            result.problems.append(f"{where}: kafka-dump-log reads {len(records)} records, the report says "
                                   f"{u.records_after}")
        if records and (records[0], records[-1]) != (offsets.first, offsets.last):
            result.problems.append(f"{where}: kafka-dump-log reads offsets {records[0]}..{records[-1]}, the report "
                                   f"says {offsets.first}..{offsets.last}")
        if any(b <= a for a, b in zip(records, records[1:], strict=False)):
            result.problems.append(f"{where}: offsets do not increase in kafka-dump-log's reading")
    return result


def record_verification(report: RunReport, result: Verification) -> None:
    """Say on the report who verified it (formats.other["verified_by"]); a failed check is a run error."""
    if result.ok:
        report.formats.other[VERIFIED_BY] = result.kafka
    else:
        report.formats.other.pop(VERIFIED_BY, None)
        report.error(f"{result.summary()}: {result.problems[0]}")
