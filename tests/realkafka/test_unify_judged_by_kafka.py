"""Bootstrap unification judged by the real tools (issue #27, item 4).

Kafka 3.9.2's ``kafka-storage format`` (static quorum, ``--release-version 3.9-IV0``, SCRAM users
with ``--add-scram``) writes a genuine ``bootstrap.checkpoint``; ``kmigrate unify-bootstrap``
moves it into the zero checkpoint (KIP-1170); a real Kafka 4.4.0 broker+controller starts on the
result and reports, through the admin API, the metadata.version and the SCRAM credentials of the
bootstrap file, and every user authenticates with its password over SCRAM. The zero checkpoint
kmigrate wrote holds the records Kafka 4.4.0's own formatter writes for the same input.

One JVM start for the module (3.9 format, 4.4 format, one broker run, the admin client).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support import kafka as realkafka
from support.kafka import KafkaNode

from migration.formats.file_records import iterate_batches
from migration.formats.kraft_checkpoint import read_checkpoint

pytestmark = pytest.mark.realkafka

KMIGRATE = Path(sys.executable).parent / "kmigrate"
RELEASE = "3.9-IV0"
MV_3_9_IV0 = 21
# (mechanism, user, password, salt (base64, None: random), iterations (None: the default, 4096))
SCRAM_USERS = [
    ("SCRAM-SHA-256", "alice", "alice-secret", "c2FsdHNhbHRzYWx0", 8192),
    ("SCRAM-SHA-512", "alice", "alice-secret-512", "YWxpY2Utc2FsdC01MTI=", 4096),
    ("SCRAM-SHA-512", "bob", "bob-secret", None, None),
]
MECHANISM_CODE = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


def scram_args() -> list[str]:
    out = []
    for mech, user, password, salt, iterations in SCRAM_USERS:
        fields = [f"name={user}", f"password={password}"]
        if salt is not None:
            fields.append(f'salt="{salt}"')
        if iterations is not None:
            fields.append(f"iterations={iterations}")
        out += ["--add-scram", f"{mech}=[{','.join(fields)}]"]
    return out


SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
SASL_PROPERTIES = f"""\
# A SCRAM listener, so the credentials of the bootstrap records are proven by logging in.
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config={SCRAM_LOGIN}
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config={SCRAM_LOGIN}
"""


def with_sasl_listener(node: KafkaNode) -> int:
    """Add a SASL_PLAINTEXT listener to the node's server.properties; returns its port."""
    sport = realkafka.free_port()
    text = node.props.read_text()
    lines = []
    for line in text.splitlines():
        if line.startswith("listeners=") or line.startswith("advertised.listeners="):
            line += f",SASL_PLAINTEXT://127.0.0.1:{sport}"
        elif line.startswith("listener.security.protocol.map="):
            line += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        lines.append(line)
    node.props.write_text("\n".join(lines) + "\n" + SASL_PROPERTIES)
    return sport


@dataclass
class Scenario:
    cluster_id: str
    format39: str
    files_39: list[str]  # what 3.9's format wrote, relative to the node's work dir
    bootstrap_39: bytes
    report: dict
    files_unified: list[str]
    zero_unified: bytes
    format44: str
    files_44: list[str]
    zero_44: bytes
    features: list[list[str]]
    scram: list[list[str]]
    auth: dict[tuple[str, str], str] = field(default_factory=dict)
    wrong_password: str = ""
    zero_after_run: bytes = b""
    bootstrap_log: list[str] = field(default_factory=list)
    complaints: list[str] = field(default_factory=list)
    logs: str = ""
    timings: dict[str, float] = field(default_factory=dict)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.parent.name != "logs" and "logs" not in p.relative_to(root).parts
                  and p.name not in ("server.properties", ".lock"))


def _admin(node: KafkaNode, *args: str, bootstrap: str | None = None,
           check: bool = True) -> subprocess.CompletedProcess:
    classes = realkafka.java_classes(node.version, realkafka.ADMIN_SOURCE)
    cmd = realkafka.java_cmd(node.version, "RealKafkaAdmin", args[0], bootstrap or node.bootstrap, *args[1:],
                             logs_dir=node.logs / "admin", heap="-Xmx256m", extra_cp=[classes])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if check and proc.returncode:
        raise AssertionError(f"RealKafkaAdmin {args[0]} failed (rc={proc.returncode})\n{proc.stdout}\n"
                             f"{proc.stderr[-4000:]}\n{node.tail()}")
    return proc


def build(tmp: Path) -> Scenario:
    import time

    timings: dict[str, float] = {}
    node = KafkaNode(realkafka.LATEST, tmp / "unified")
    sport = with_sasl_listener(node)
    t0 = time.monotonic()
    fmt39 = realkafka.run_tool(realkafka.WRITER, "kafka-storage", "format", "-t", node.cluster_id, "-c",
                               str(node.props), "--release-version", RELEASE, *scram_args(),
                               logs_dir=node.logs / "tools39")
    timings["format 3.9.2"] = time.monotonic() - t0
    files_39 = _files(node.work)
    bootstrap_39 = (node.meta / "bootstrap.checkpoint").read_bytes()

    t0 = time.monotonic()
    env = {**os.environ, "KMIGRATE_HOME": str(tmp / "kmigrate-home")}
    res = subprocess.run([str(KMIGRATE), "unify-bootstrap", "--engine", "inline", "--json", "--backup-root",
                          str(tmp / "backups"), str(node.meta), "--retire-stray", str(node.data)],
                         capture_output=True, text=True, timeout=300, env=env)
    timings["kmigrate unify-bootstrap"] = time.monotonic() - t0
    assert res.returncode == 0, f"unify-bootstrap exited {res.returncode}\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    report = json.loads(res.stdout)
    files_unified = _files(node.work)
    zero = node.meta / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    zero_unified = zero.read_bytes()

    ref = KafkaNode(realkafka.LATEST, tmp / "formatted-by-4.4")
    ref.props.write_text(node.props.read_text().replace(str(node.work), str(ref.work)))
    t0 = time.monotonic()
    fmt44 = realkafka.run_tool(realkafka.LATEST, "kafka-storage", "format", "-t", node.cluster_id, "-c",
                               str(ref.props), "--release-version", RELEASE, *scram_args(),
                               logs_dir=ref.logs / "tools44")
    timings["format 4.4.0"] = time.monotonic() - t0
    files_44 = _files(ref.work)
    zero_44 = (ref.meta / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint").read_bytes()

    sc = Scenario(cluster_id=node.cluster_id, format39=fmt39.stdout, files_39=files_39, bootstrap_39=bootstrap_39,
                  report=report, files_unified=files_unified, zero_unified=zero_unified, format44=fmt44.stdout,
                  files_44=files_44, zero_44=zero_44, features=[], scram=[], logs=str(node.logs))
    try:
        node.start()
        t0 = time.monotonic()
        sc.features = [line.split("\t") for line in _admin(node, "features").stdout.splitlines()]
        sc.scram = [line.split("\t") for line in _admin(node, "scram").stdout.splitlines()]
        sasl = f"127.0.0.1:{sport}"
        for mech, user, password, _salt, _it in SCRAM_USERS:
            sc.auth[(mech, user)] = _admin(node, "auth", mech, user, password, bootstrap=sasl).stdout.strip()
        wrong = _admin(node, "auth", "SCRAM-SHA-256", "alice", "not-her-password", bootstrap=sasl, check=False)
        sc.wrong_password = f"rc={wrong.returncode} {wrong.stdout.strip()}"
        timings["admin client"] = time.monotonic() - t0
    finally:
        node.stop()
    log = node.run_log()
    sc.bootstrap_log = [line for line in log.splitlines() if "ootstrap" in line]
    sc.complaints = realkafka.complaints(log)
    sc.zero_after_run = zero.read_bytes()
    sc.timings = {**timings, **node.timings}
    return sc


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Scenario:
    tmp = tmp_path_factory.mktemp("unify-judged")
    return realkafka.shared_across_workers(tmp_path_factory, "unify-judged-by-kafka", lambda: build(tmp))


def _checkpoint(data: bytes, name: str):
    return read_checkpoint(data, path=name), list(iterate_batches(data, path=name, strict=True))


def test_kafka_39_wrote_a_bootstrap_checkpoint_with_the_scram_users(scenario):
    """Kafka 3.9's formatter, static quorum: bootstrap.checkpoint in the metadata dir and a copy in
    the data dir (the stray copy kmigrate retires with --retire-stray), no __cluster_metadata-0."""
    assert scenario.files_39 == ["data/bootstrap.checkpoint", "data/meta.properties", "meta/bootstrap.checkpoint",
                                 "meta/meta.properties"], scenario.files_39
    assert f"with metadata.version {RELEASE}" in scenario.format39
    contents, _ = _checkpoint(scenario.bootstrap_39, "bootstrap.checkpoint")
    assert [m.name for m in contents.metadata_records] == ["FeatureLevelRecord"] + ["UserScramCredentialRecord"] * 3
    assert not contents.kraft_records


def test_kmigrate_unified_the_bootstrap_into_the_zero_checkpoint(scenario):
    r = scenario.report
    assert r["status"] == "ok" and r["exit_code"] == 0, json.dumps(r)[:2000]
    assert scenario.files_unified == ["data/meta.properties",
                                      "meta/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint",
                                      "meta/meta.properties"], scenario.files_unified


def test_the_zero_checkpoint_holds_the_records_kafka_44s_formatter_writes(scenario):
    """Same cluster id, release version and SCRAM users given to Kafka 4.4.0's ``kafka-storage
    format``: its KIP-1170 zero checkpoint (the only bootstrap file it writes) and kmigrate's hold
    the same records in the same batches. What differs, and why:

    - every batch's timestamps (base and max timestamp, so the CRC) and the SnapshotHeader's
      ``lastContainedLogTimestamp``: Kafka stamps them with the clock while formatting (4.4: the
      header with one reading, each batch with its append time; 3.9's bootstrap file has
      ``lastContainedLogTimestamp`` 0), kmigrate with the bootstrap file's own append time, so a
      re-run writes the same bytes;
    - the salt, stored key and server key of a credential given without ``salt=``: each formatter
      draws a random salt (the keys derive from it); name, mechanism and iterations are equal.
    Everything else (record order, every other metadata record byte for byte, the control records,
    batch boundaries, offsets, producer fields, leader epochs) is equal."""
    ours, our_batches = _checkpoint(scenario.zero_unified, "kmigrate")
    theirs, their_batches = _checkpoint(scenario.zero_44, "kafka-4.4.0")
    assert scenario.files_44 == ["data/meta.properties",
                                 "meta/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint",
                                 "meta/meta.properties"], scenario.files_44

    def shape(b):
        return (b.base_offset, b.last_offset, b.records_count, b.magic, b.is_control, b.is_transactional,
                b.producer_id, b.producer_epoch, b.base_sequence, b.partition_leader_epoch, b.compression,
                b.timestamp_type)

    assert [shape(b) for b in our_batches] == [shape(b) for b in their_batches]
    assert [r.type for r in ours.kraft_records] == [r.type for r in theirs.kraft_records]
    assert ours.header["Version"] == theirs.header["Version"] == 0
    assert isinstance(theirs.header["LastContainedLogTimestamp"], int)

    random_salt = {(MECHANISM_CODE[m], u) for m, u, _p, salt, _i in SCRAM_USERS if salt is None}
    assert len(ours.metadata_records) == len(theirs.metadata_records) == 4
    for mine, kafkas in zip(ours.metadata_records, theirs.metadata_records, strict=True):
        assert (mine.name, mine.version) == (kafkas.name, kafkas.version)
        key = (mine.fields.get("Mechanism"), mine.fields.get("Name"))
        if mine.name == "UserScramCredentialRecord" and key in random_salt:
            same = ("Name", "Mechanism", "Iterations")
            assert {f: mine.fields[f] for f in same} == {f: kafkas.fields[f] for f in same}
            assert mine.fields["Salt"] != kafkas.fields["Salt"]
        else:
            assert mine.encode() == kafkas.encode(), mine.name
    # and the records are the 3.9 bootstrap file's, byte for byte
    boot, _ = _checkpoint(scenario.bootstrap_39, "bootstrap.checkpoint")
    assert [m.encode() for m in ours.metadata_records] == [m.encode() for m in boot.metadata_records]


def test_kafka_44s_formatter_prints_the_scram_keys(scenario):
    """A finding about Kafka, not kmigrate: 4.4.0's ``kafka-storage format`` prints the bootstrap
    records on stdout, the SCRAM salts, stored keys and server keys included (3.9.2's does not).
    kmigrate's outputs show them redacted."""
    assert "Bootstrap metadata: BootstrapMetadata(records=" in scenario.format44
    assert "storedKey=[" in scenario.format44 and "storedKey" not in scenario.format39


def test_kafka_44_starts_on_the_unified_dir_with_the_metadata_version(scenario):
    assert not scenario.complaints, scenario.complaints
    finalized = {f[1]: (int(f[2]), int(f[3])) for f in scenario.features if f[0] == "finalized"}
    assert finalized.get("metadata.version") == (MV_3_9_IV0, MV_3_9_IV0), (scenario.features, scenario.logs)
    # the controller's activation committed the zero checkpoint's records (no bootstrap.checkpoint
    # is left; without bootstrap records it would append the default: 1 record at the latest MV)
    activation = [line for line in scenario.bootstrap_log if "Performing controller activation" in line]
    assert len(activation) == 1 and (f"Appending {len(SCRAM_USERS) + 1} bootstrap record(s) in metadata "
                                     f"transaction at metadata.version {RELEASE}") in activation[0], activation
    # the node did not rewrite its bootstrap: the zero checkpoint stays as kmigrate wrote it
    assert scenario.zero_after_run == scenario.zero_unified


def test_kafka_44_describes_and_accepts_the_scram_credentials(scenario):
    described = sorted((u, m, int(i)) for u, m, i in scenario.scram)
    want = sorted((u, m, it or 4096) for m, u, _p, _s, it in SCRAM_USERS)
    assert described == want, (scenario.scram, scenario.logs)
    for mech, user, _p, _s, _i in SCRAM_USERS:
        assert scenario.auth[(mech, user)] == f"authenticated\t{user}\t{scenario.cluster_id}", scenario.auth
    assert scenario.wrong_password.startswith("rc=3 failed\talice\t") and "Authentication failed" in \
        scenario.wrong_password, scenario.wrong_password
