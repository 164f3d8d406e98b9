"""``kmigrate inspect`` = the real ``kafka-dump-log`` (issue #27, item 6), Kafka 4.1.2 and 4.4.0.

Every kind of file kmigrate writes or inspects, written by the test: the genuine legacy log dir
(Kafka 3.9's v0/v1 segments: none, gzip, snappy, lz4, LogAppendTime, a compacted partition with
offset holes; its indexes, time indexes and producer snapshots), the same dir upgraded by
``kmigrate upgrade --to v2 --assign-leader-epoch`` (kmigrate's v2 segments, indexes, snapshots),
and synthetic files for what neither holds: v2 batches with headers, a transaction (COMMIT and
ABORT markers), gzip, snappy, lz4 and zstd, LogAppendTime, a delete horizon; an offset index and a
time index whose entries disagree with their segment; a transaction index; a producer snapshot;
KRaft files (a ``__cluster_metadata-0`` segment, a snapshot, ``bootstrap.checkpoint``).

The real tool runs once per option set and version over all files (``--files a,b,…``: one JVM),
kmigrate's ``LogDump`` over the same paths with the same options; stdout and stderr must be
equal line for line, after the normalisations the tests name (the one text difference between
Kafka versions, and the SCRAM secrets kmigrate redacts).
"""

from __future__ import annotations

import base64
import difflib
import re
import shutil
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from support import kafka as realkafka

from migration.formats.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    encode_control_key,
    encode_control_value,
    kraft_version_value,
)
from migration.formats.kraft_checkpoint import build_checkpoint
from migration.formats.legacy import build_wrapper
from migration.formats.metadata_records import encode_metadata_record
from migration.formats.model import Compression, Header, Record, TimestampType
from migration.formats.offset_index import OffsetIndex
from migration.formats.producer_snapshot import ProducerSnapshot, ProducerSnapshotEntry
from migration.formats.record_batch import build_record_batch
from migration.formats.time_index import TimeIndex
from migration.formats.transaction_index import AbortedTxn, TransactionIndex
from migration.logdir.inspect import DumpOptions, LogDump
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade

pytestmark = pytest.mark.realkafka

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "legacy-kafka39" / "kafka-logs"
TOPIC_ID = "AAECAwQFBgcICQoLDA0ODw"
SEGMENT_FILE = re.compile(r"^\d{20}\.(log|index|timeindex|txnindex|snapshot)$")

# option set -> (kafka-dump-log flags, kmigrate DumpOptions, which files)
OPTION_SETS: dict[str, tuple[tuple[str, ...], dict, str]] = {
    "deep": (("--deep-iteration", "--print-data-log"), {"deep_iteration": True, "print_data_log": True}, "data"),
    "shallow": ((), {}, "logs"),
    "verify-index-only": (("--verify-index-only",), {"verify_index_only": True}, "indexes"),
    "index-sanity-check": (("--index-sanity-check",), {"index_sanity_check": True}, "indexes"),
    "cluster-metadata": (("--cluster-metadata-decoder",), {"cluster_metadata_decoder": True}, "kraft"),
}


# ------------------------------------------------------------------ the files


def _synthetic(d: Path) -> None:
    """What neither the genuine nor the upgraded dir holds."""
    legacy = d / "legacy-0"
    legacy.mkdir(parents=True)
    b = LegacyRecordBatchBuilder(0, 0, 1 << 20)  # kafka-python's v0 writer
    b.append(0, None, b"k0", b"v0")
    b.append(1, None, None, b"v1")
    v0_gzip = build_wrapper([Record(2, -1, b"a", b"1"), Record(3, -1, None, b"2")], magic=0,
                            compression=Compression.GZIP)
    (legacy / "00000000000000000000.log").write_bytes(bytes(b.build()) + v0_gzip)
    w1 = build_wrapper([Record(5, 1000, b"a", b"1"), Record(6, 1001, None, b"2"), Record(7, 1003, b"c", None)],
                       magic=1, compression=Compression.GZIP)
    w2 = build_wrapper([Record(8, 1100, b"h", b"x"), Record(9, 1101, b"i", b"y")], magic=1,
                       compression=Compression.SNAPPY, timestamp_type=TimestampType.LOG_APPEND_TIME,
                       log_append_time=5000)
    w3 = build_wrapper([Record(10, 1200, b"j", b"z")], magic=1, compression=Compression.LZ4)
    (legacy / "00000000000000000005.log").write_bytes(w1 + w2 + w3)

    v2 = d / "v2-0"
    v2.mkdir()
    producer = {"producer_id": 4711, "producer_epoch": 3, "is_transactional": True, "partition_leader_epoch": 5}
    commit = EndTransactionMarker(ControlRecordType.COMMIT, 100)
    abort = EndTransactionMarker(ControlRecordType.ABORT, 101)
    (v2 / "00000000000000000000.log").write_bytes(b"".join([
        build_record_batch([Record(0, 1000, b"k0", b"v0", (Header("trace", b"t"), Header("span", None))),
                            Record(1, 1005, b"k1", b"\xff1", ())], base_sequence=17, **producer),
        build_record_batch([Record(2, 1010, commit.encode_key(), commit.encode_value())], is_control=True, **producer),
        build_record_batch([Record(3, 1020, None, b"v3"), Record(4, 1021, b"k4", b"v4")], base_sequence=19,
                           compression=Compression.GZIP, **producer),
        build_record_batch([Record(5, 1030, abort.encode_key(), abort.encode_value())], is_control=True, **producer),
        build_record_batch([Record(6, 1040, b"k6", b"v6")], timestamp_type=TimestampType.LOG_APPEND_TIME,
                           max_timestamp=9999),
        build_record_batch([Record(7, 1050, b"k7", None)], delete_horizon_ms=86_400_000),
        *(build_record_batch([Record(8 + i, 1060 + i, b"c", b"compressed " * 5), Record(9 + i, 1061 + i, None, b"x")],
                             compression=c) for i, c in zip((0, 2, 4), (Compression.SNAPPY, Compression.LZ4,
                                                                       Compression.ZSTD), strict=True)),
    ]))
    TransactionIndex(0, [AbortedTxn(4711, 3, 5, 3), AbortedTxn(2001, 80, 90, 79)]).write(
        v2 / "00000000000000000000.txnindex")
    ProducerSnapshot([
        ProducerSnapshotEntry(4711, 3, last_sequence=20, last_offset=4, offset_delta=1, timestamp=1021),
        ProducerSnapshotEntry(9, 0, timestamp=500, coordinator_epoch=7, current_txn_first_offset=12),
        ProducerSnapshotEntry(8, 1, last_sequence=1, last_offset=30, offset_delta=3, timestamp=40),  # wrapped seq
    ]).write(v2 / "00000000000000000014.snapshot")

    # a segment at 10 with good indexes, and one at 20 whose indexes disagree with it
    for base, bad in ((10, False), (20, True)):
        batches = [build_record_batch([Record(base, 1000, None, b"a"), Record(base + 1, 1001, None, b"b"),
                                       Record(base + 2, 1002, None, b"c")]),
                   build_record_batch([Record(base + 3, 2000, None, b"d"), Record(base + 4, 2001, None, b"e")]),
                   build_record_batch([Record(base + 5, 3000, None, b"f")])]
        (v2 / f"{base:020d}.log").write_bytes(b"".join(batches))
        pos = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
        if not bad:
            OffsetIndex(base, [(base + 2, pos[0]), (base + 4, pos[1])]).write(v2 / f"{base:020d}.index")
            TimeIndex(base, [(1002, base + 2), (2001, base + 4)]).write(v2 / f"{base:020d}.timeindex")
        else:
            # offsets that are not the last of the batch at their position
            (v2 / f"{base:020d}.index").write_bytes(b"".join(
                struct.pack(">ii", rel, p) for rel, p in ((1, pos[0]), (4, pos[1]), (5, pos[1]))))
            # a wrong timestamp, one out of order, an offset that is no batch's last, one past the log
            (v2 / f"{base:020d}.timeindex").write_bytes(b"".join(
                struct.pack(">qi", t, rel) for t, rel in ((1500, 2), (900, 4), (3000, 3), (5000, 79))))

    meta = d / "__cluster_metadata-0"
    meta.mkdir()
    leader_change = encode_control_value(ControlRecordType.LEADER_CHANGE, {
        "Version": 0, "LeaderId": 3000, "Voters": [{"VoterId": 3000}], "GrantingVoters": [{"VoterId": 3000}]})
    values = [
        encode_metadata_record("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": 21}),
        encode_metadata_record("TopicRecord", 0, {"Name": "orders", "TopicId": TOPIC_ID}),
        encode_metadata_record("PartitionChangeRecord", 0, {"PartitionId": 0, "TopicId": TOPIC_ID, "Isr": [1, 2],
                                                            "Leader": 2}),
        encode_metadata_record("ClientQuotaRecord", 0, {
            "Entity": [{"EntityType": "user", "EntityName": "alice"}], "Key": "producer_byte_rate",
            "Value": 1048576.0, "Remove": False}),
        encode_metadata_record("ClientQuotaRecord", 0, {
            "Entity": [{"EntityType": "client-id", "EntityName": None}], "Key": "request_percentage",
            "Value": 1.5e7, "Remove": True}),
        encode_metadata_record("UserScramCredentialRecord", 0, {
            "Name": "admin", "Mechanism": 1, "Salt": b"s" * 24, "StoredKey": b"k" * 32, "ServerKey": b"v" * 32,
            "Iterations": 4096}),
    ]
    (meta / "00000000000000000000.log").write_bytes(
        build_record_batch([Record(0, 7000, encode_control_key(ControlRecordType.LEADER_CHANGE), leader_change)],
                           is_control=True, partition_leader_epoch=1)
        + build_record_batch([Record(1 + i, 7001, None, v) for i, v in enumerate(values)], partition_leader_epoch=1))
    voters = encode_control_value(ControlRecordType.KRAFT_VOTERS, {"Version": 0, "Voters": [{
        "VoterId": 3000, "VoterDirectoryId": TOPIC_ID,
        "Endpoints": [{"Name": "CONTROLLER", "Host": "ctl", "Port": 9093}],
        "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}}]})
    snapshot = build_checkpoint(values[:2], header_timestamp=10000, append_time=20000, epoch=2, kraft_records=[
        (ControlRecordType.KRAFT_VERSION, kraft_version_value(1)), (ControlRecordType.KRAFT_VOTERS, voters)])
    (meta / "00000000000000000007-0000000002.checkpoint").write_bytes(snapshot)
    (d / "bootstrap.checkpoint").write_bytes(build_checkpoint([values[0], values[5]], header_timestamp=0,
                                                              append_time=30000))


@dataclass
class FileSet:
    data: list[str]  # every segment file (.log, .index, .timeindex, .txnindex, .snapshot)
    logs: list[str]
    indexes: list[str]
    kraft: list[str]
    epoch_checkpoint: str
    timings: dict[str, float] = field(default_factory=dict)


def write_files(root: Path) -> FileSet:
    t0 = time.monotonic()
    genuine = root / "genuine"
    upgraded = root / "upgraded"
    shutil.copytree(FIXTURES, genuine / "kafka-logs", copy_function=shutil.copy2)
    shutil.copytree(FIXTURES, upgraded / "kafka-logs", copy_function=shutil.copy2)
    with pytest.MonkeyPatch.context() as mp:
        out = root / "kmigrate-out"
        mp.setenv("KMIGRATE_OUT", str(out))
        mp.setenv("KMIGRATE_REPORT_ROOT", str(out / "reports"))
        mp.setenv("KMIGRATE_BACKUP_ROOT", str(out / "backups"))
        report = execute_upgrade([str(upgraded / "kafka-logs")], engine="inline", options=UpgradeOptions(
            target="v2", assign_leader_epoch=True, index_interval_bytes=1024))
    assert report.refusal is None and not report.errors, report.errors or report.refusal
    upgrade_time = time.monotonic() - t0
    _synthetic(root / "synthetic")
    segment_files = sorted(str(p) for p in root.rglob("*") if p.is_file() and SEGMENT_FILE.match(p.name)
                           and "kmigrate-out" not in p.parts)
    kraft = sorted(str(p) for p in (root / "synthetic").rglob("*") if p.is_file()
                   and (p.suffix == ".checkpoint" or p.parent.name == "__cluster_metadata-0"))
    data = [f for f in segment_files if "__cluster_metadata-0" not in f]
    return FileSet(data=data, logs=[f for f in data if f.endswith(".log")],
                   indexes=[f for f in data if f.endswith((".index", ".timeindex"))], kraft=kraft,
                   epoch_checkpoint=str(genuine / "kafka-logs" / "v1-none-0" / "leader-epoch-checkpoint"),
                   timings={"kmigrate upgrade": upgrade_time})


# ------------------------------------------------------------------ the two dumps


@dataclass
class Dump:
    out: list[str]
    err: list[str]
    rc: int = 0
    seconds: float = 0.0


def kafka_dump(version: str, files: list[str], flags: tuple[str, ...], logs: Path) -> Dump:
    t0 = time.monotonic()
    proc = realkafka.run_tool(version, "kafka-dump-log", *flags, "--files", ",".join(files), logs_dir=logs,
                              check=False, timeout=180)
    return Dump(proc.stdout.splitlines(), proc.stderr.splitlines(), proc.returncode, time.monotonic() - t0)


def kmigrate_dump(files: list[str], options: dict) -> Dump:
    d = LogDump(DumpOptions(**options))
    out: list[str] = []
    err: list[str] = []
    for line in d.dump(files):
        if line.text is not None:
            (err if line.err else out).append(line.text)
    return Dump(out, err, d.errors)


_SECRET = re.compile(r'"(salt|storedKey|serverKey)":"([A-Za-z0-9+/=]*)"')


def normalise(version: str, lines: list[str]) -> list[str]:
    """Kafka's stdout as kmigrate prints it. Two differences between the versions, both in the
    Scala ``DumpLogSegments`` of 4.1 that the Java rewrite of 4.3 (KAFKA-14579) dropped; kmigrate
    prints 4.4's form:

    - the brace: 4.1 ends a legacy (v0/v1) record's metadata with a stray ``}`` after its CRC
      (``isValid: true crc: 2258072140} key: …``);
    - 4.1 ends a producer-snapshot line of a producer without batch metadata with a space
      (``lastTimestamp: 500 ``).
    And one difference on purpose: the SCRAM secrets of a UserScramCredentialRecord, base64 in
    Kafka's JSON, are always redacted by kmigrate (``"<redacted N bytes>"``): dumps get pasted into
    tickets."""
    out = []
    for line in lines:
        line = _SECRET.sub(lambda m: f'"{m[1]}":"<redacted {len(base64.b64decode(m[2]))} bytes>"', line)
        if realkafka._minor(version) < (4, 3):
            line = re.sub(r"( isValid: (?:true|false) crc: \d+)\}", r"\1", line)
            if line.startswith("producerId: "):
                line = line.rstrip(" ")
        out.append(line)
    return out


_SECTION = re.compile(r"^(Mismatches in :|Found timestamp mismatch in :|Found out of order timestamp in :"
                      r"|The following indexed offsets are not found in|Non-consecutive offsets in "
                      r"|Ignoring unknown file )")


def stderr_sections(lines: list[str], version: str, *, kafka: bool) -> list[tuple[str, ...]]:
    """What Kafka prints on stderr after the last file, as sorted sections (a header and its
    lines). Kafka keeps these findings in hash maps keyed by file, so the order of the files is
    the maps' (kmigrate's is the order of the files); the lines within a section keep their order.
    ``kafka``: the lines are Kafka ``version``'s (else kmigrate's, to compare with them):

    - 4.1 (Scala) prepends each non-consecutive pair to a list, so it prints them last first;
    - 4.1 says "The following indexed offsets are not found in the log." where 4.3+ (and kmigrate)
      name the file ("... not found in :FILE"): compared without the file for 4.1;
    - 4.3+ starts each file's previous offset at -1 and so reports "-1 is followed by N" for the
      first record of every segment that does not begin at offset 0 (4.1 does not: its Scala code
      skipped the first record). -1 is no offset: these pairs are dropped, and a section left
      without a pair with them."""
    sections: list[list[str]] = []
    for line in lines:
        if _SECTION.match(line) or not sections:
            sections.append([line])
        else:
            sections[-1].append(line)
    out = []
    for sec in sections:
        head, rest = sec[0], sec[1:]
        old = realkafka._minor(version) < (4, 3)
        if kafka and head.startswith("Non-consecutive offsets in "):
            rest = [r for r in (rest[::-1] if old else rest) if not r.startswith("  -1 is followed by ")]
            if not rest:
                continue
        if old and head.startswith("The following indexed offsets are not found in"):
            head = "The following indexed offsets are not found in <the file, or 'the log.' in 4.1>"
        out.append((head, *rest))
    return sorted(out)


def by_file(lines: list[str]) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = "(before the first file)"
    for line in lines:
        if line.startswith("Dumping "):
            current = line[len("Dumping "):]
        sections.setdefault(current, []).append(line)
    return sections


def first_differences(kafka: list[str], ours: list[str], limit: int = 5) -> list[str]:
    """Per file, the first lines where kmigrate's dump differs from Kafka's."""
    theirs, mine = by_file(kafka), by_file(ours)
    problems = []
    for name in sorted(set(theirs) | set(mine)):
        t, m = theirs.get(name, []), mine.get(name, [])
        if t == m:
            continue
        i = next((i for i, (a, b) in enumerate(zip(t, m, strict=False)) if a != b), min(len(t), len(m)))
        problems.append(f"{name}: line {i}: Kafka {t[i] if i < len(t) else '<end>'!r}\n"
                        f"    kmigrate {m[i] if i < len(m) else '<end>'!r} ({len(t)} vs {len(m)} lines)")
    return problems[:limit] + ([f"... {len(problems) - limit} more files"] if len(problems) > limit else [])


@dataclass
class Parity:
    files: FileSet
    kafka: dict[tuple[str, str], Dump]
    ours: dict[str, Dump]
    epoch_checkpoint: dict[str, Dump]
    timings: dict[str, float]


def build(root: Path) -> Parity:
    files = write_files(root)
    ours = {name: kmigrate_dump(getattr(files, which), options) for name, (_f, options, which) in OPTION_SETS.items()}
    jobs = [(v, name) for v in realkafka.VERSIONS for name in OPTION_SETS]
    t0 = time.monotonic()
    with ThreadPoolExecutor(2) as pool:  # two JVMs at a time: one per core
        futures = {(v, name): pool.submit(kafka_dump, v, getattr(files, OPTION_SETS[name][2]), OPTION_SETS[name][0],
                                          root / "logs" / v / name) for v, name in jobs}
        epoch = {v: pool.submit(kafka_dump, v, [files.epoch_checkpoint], (), root / "logs" / v / "epoch")
                 for v in realkafka.VERSIONS}
        kafka = {k: f.result() for k, f in futures.items()}
        epochs = {v: f.result() for v, f in epoch.items()}
    timings = {**files.timings, "kafka-dump-log (all runs, 2 at a time)": time.monotonic() - t0,
               **{f"kafka-dump-log {v} {n}": d.seconds for (v, n), d in kafka.items()}}
    return Parity(files, kafka, ours, epochs, timings)


@pytest.fixture(scope="module")
def parity(tmp_path_factory) -> Parity:
    root = tmp_path_factory.mktemp("dump-log-parity")
    return realkafka.shared_across_workers(tmp_path_factory, "dump-log-parity", lambda: build(root))


# ------------------------------------------------------------------ the tests


def test_the_file_set_has_every_kind(parity):
    f = parity.files
    suffixes = {Path(p).suffix for p in f.data}
    assert suffixes == {".log", ".index", ".timeindex", ".txnindex", ".snapshot"}, suffixes
    assert len(f.logs) > 100 and len(f.kraft) == 3
    assert any("/upgraded/" in p for p in f.logs) and any("/genuine/" in p for p in f.logs)


@pytest.mark.parametrize("option_set", list(OPTION_SETS))
@pytest.mark.parametrize("version", realkafka.VERSIONS)
def test_kmigrate_inspect_prints_what_kafka_dump_log_prints(parity, version, option_set):
    kafka, ours = parity.kafka[(version, option_set)], parity.ours[option_set]
    assert kafka.rc == 0, f"kafka-dump-log {version} exited {kafka.rc}:\n" + "\n".join(kafka.err[-30:])
    assert ours.rc == 0
    assert len(kafka.out) > 10
    out = first_differences(normalise(version, kafka.out), ours.out)
    assert not out, f"stdout differs from Kafka {version}'s:\n  " + "\n  ".join(out)
    theirs, mine = stderr_sections(kafka.err, version, kafka=True), stderr_sections(ours.err, version, kafka=False)
    assert theirs == mine, f"stderr differs from Kafka {version}'s:\n" + "\n".join(
        difflib.unified_diff(["\n".join(x) for x in theirs], ["\n".join(x) for x in mine], "kafka", "kmigrate",
                             lineterm=""))


def test_the_findings_on_stderr_are_there(parity):
    """The comparison above is not vacuous: Kafka reported index mismatches, timestamp problems
    and non-consecutive offsets for these files, and kmigrate the same."""
    err = "\n".join(parity.ours["deep"].err)
    for text in ("Mismatches in :", "Found timestamp mismatch in :", "Found out of order timestamp in :",
                 "The following indexed offsets are not found in :", "Non-consecutive offsets in "):
        assert text in err, text
    assert any("Mismatches in :" in line for line in parity.kafka[("4.4.0", "verify-index-only")].err)
    # Kafka 4.3+'s spurious first pair, dropped by stderr_sections: there, and not in 4.1's
    spurious = [line for line in parity.kafka[("4.4.0", "deep")].err if line.startswith("  -1 is followed by ")]
    assert spurious and not any(line.startswith("  -1 is followed by ")
                                for line in parity.kafka[("4.1.2", "deep")].err)
    assert any("Mismatches in :" in line for line in parity.ours["verify-index-only"].err)


def test_the_4_1_text_differences_are_the_crc_brace_and_a_trailing_space(parity):
    """On stdout, Kafka 4.1's dump differs from 4.4's in two ways only (``normalise``): legacy
    record lines with ``crc: N}`` (4.4: ``crc: N``) and a trailing space on producer-snapshot lines
    of producers without batch metadata."""
    old, new = parity.kafka[("4.1.2", "deep")].out, parity.kafka[("4.4.0", "deep")].out
    differ = [(a, b) for a, b in zip(old, new, strict=True) if a != b]
    assert differ and all(normalise("4.1.2", [a]) == [b] for a, b in differ), differ[:3]
    assert {("space" if a.endswith(" ") else "brace") for a, _b in differ} == {"brace", "space"}


def test_leader_epoch_checkpoint_is_no_dump_log_file(parity):
    """kafka-dump-log reads no ``leader-epoch-checkpoint``. Kafka 4.4 says so like kmigrate
    (``Ignoring unknown file`` on stderr); Kafka 4.1's Scala tool takes the text after the name's
    last ``.`` and, for a name without one, dies with StringIndexOutOfBoundsException."""
    name = parity.files.epoch_checkpoint
    ours = kmigrate_dump([name], {})
    new = parity.epoch_checkpoint["4.4.0"]
    assert (new.rc, new.out, new.err) == (0, ours.out, ours.err) == (0, [f"Dumping {name}"],
                                                                     [f"Ignoring unknown file {name}"])
    old = parity.epoch_checkpoint["4.1.2"]
    assert old.rc == 1 and any("StringIndexOutOfBoundsException" in line for line in old.err), old.err[-5:]
