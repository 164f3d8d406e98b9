"""The harness of the real-Kafka judge: the toolchain is there (or the test fails with the
command to run), the log lines the judge looks for are Kafka's own words in the pinned jars, and a
broker that dies while starting is reported with its log."""

from __future__ import annotations

import functools
import zipfile

import pytest
from support import kafka as realkafka
from support.kafka import KafkaNode, ToolchainMissing

pytestmark = pytest.mark.realkafka


@functools.cache
def _classes(version: str) -> dict[str, bytes]:
    """Every class file of the version's Kafka jars (kafka_2.13, kafka-storage, kafka-tools, ...)."""
    out = {}
    for jar in sorted(realkafka.lib_dir(version).glob("kafka*.jar")):
        with zipfile.ZipFile(jar) as z:
            out.update((n, z.read(n)) for n in z.namelist() if n.endswith(".class"))
    return out


def _says(version: str, text: str) -> list[str]:
    return [n for n, code in _classes(version).items() if text.encode() in code]


@pytest.mark.parametrize("version", realkafka.VERSIONS)
def test_the_judged_lines_are_kafkas_own_words(version):
    """Every complaint the judge looks for, the start banner and the load line are string
    constants of Kafka's classes: a reworded message in a new version fails here instead of
    passing the judge silently."""
    missing = [p for ps in realkafka.LOAD_COMPLAINTS.values() for p in ps if not _says(version, p)]
    assert not missing, f"Kafka {version} no longer says {missing}"
    assert any("LogSegment" in n for n in _says(version, "Found invalid messages in log segment "))
    assert any("LogLoader" in n for n in _says(version, "Corruption found in segment "))
    assert any("LogManager" in n for n in _says(version, " segments, local-log-start-offset "))
    assert _says(version, "Completed load of ") and _says(version, "Kafka Server started")
    assert _says(version, "Recovering ") and _says(version, " since no clean shutdown file was found")


@pytest.mark.parametrize("version", realkafka.VERSIONS)
def test_main_classes_exist(version):
    for tool in ("kafka-server-start", "kafka-storage", "kafka-dump-log", "kafka-console-consumer"):
        path = realkafka.main_class(version, tool).replace(".", "/") + ".class"
        assert path in _classes(version), f"Kafka {version}: no {path} for {tool}"


def test_the_legacy_writers_main_classes_exist():
    """Kafka 3.9.2 with ZooKeeper (tools/kafka/3.9.2/pom.xml): what tools/kafka/legacy_fixtures.py runs."""
    classes = _classes(realkafka.WRITER)
    assert "kafka/Kafka.class" in classes and "kafka/tools/DumpLogSegments.class" in classes
    zk = list(realkafka.lib_dir(realkafka.WRITER).glob("zookeeper-3.8.*.jar"))
    assert len(zk) == 1, zk
    with zipfile.ZipFile(zk[0]) as z:
        assert "org/apache/zookeeper/server/quorum/QuorumPeerMain.class" in z.namelist()
    # the generator waits for "[KafkaServer id=0] started" and checks "... shut down completed"
    assert _says(realkafka.WRITER, "[KafkaServer id=") and _says(realkafka.WRITER, "shut down completed")


def test_a_missing_toolchain_fails_with_the_command_to_run(tmp_path, monkeypatch):
    monkeypatch.setattr(realkafka, "TOOLS", tmp_path / "nothing")
    with pytest.raises(ToolchainMissing, match=r"make kafka-tools"):
        KafkaNode(realkafka.LATEST, tmp_path / "node")


def test_a_broker_that_dies_while_starting_is_reported_with_its_log(tmp_path):
    """Not formatted: Kafka exits at once; the failure names the logs and quotes their tail."""
    node = KafkaNode(realkafka.LATEST, tmp_path / "node")
    with pytest.raises(AssertionError, match=r"exited \(rc=\d+\) before 'Kafka Server started'") as err:
        node.start(timeout=60)
    assert "meta.properties" in str(err.value) and str(node.logs) in str(err.value), str(err.value)[-2000:]
