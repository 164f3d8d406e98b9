"""``kmigrate verify RUN --kafka-home DIR`` (issue #27, item 8): the Kafka distribution the
operator upgrades to reads every segment an upgrade run rewrote with its own ``kafka-dump-log
--deep-iteration``; the counts and offsets must be the report's. A real run of the sample
cluster's broker 1 (``--to v2``, split into small segments) is verified by Apache Kafka 4.4.0 (a
``libs/`` of symlinks to ``.tools/kafka/4.4.0/lib``, as the binary tarball unpacks); a byte
flipped in one rewritten batch makes it fail, naming the unit and the batch; bad input exits 2
in one line."""

from __future__ import annotations

import json
import os

import pytest
from support import kafka as realkafka
from typer.testing import CliRunner

from migration.cli.app import app

pytestmark = pytest.mark.realkafka
VERSION = "4.4.0"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(home, run id, log dir, kafka home): one upgrade run, shared by the module's tests."""
    from migration.demo.sample_cluster import build_sample_cluster

    work = tmp_path_factory.mktemp("verify-")
    sample = build_sample_cluster(work / "cluster", brokers=1)
    home = work / "home"
    kafka_home = work / f"kafka_2.13-{VERSION}"
    (kafka_home / "libs").mkdir(parents=True)
    for jar in realkafka.lib_dir(VERSION).glob("*.jar"):
        os.symlink(jar, kafka_home / "libs" / jar.name)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KMIGRATE_HOME", str(home))
        res = CliRunner().invoke(app, ["upgrade", str(sample.log_dirs[0]), "--to", "v2", "--engine", "inline",
                                       "--segment-bytes", "20000"])
        assert res.exit_code == 0, res.output
    run_id = next(p.name for p in (home / "reports").iterdir())
    return home, run_id, sample.log_dirs[0], kafka_home


def _verify(home, *args):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KMIGRATE_HOME", str(home))
        return CliRunner().invoke(app, ["verify", *args])


def test_a_real_run_is_verified_by_apache_kafka(run):
    home, run_id, _, kafka_home = run
    res = _verify(home, run_id, "--kafka-home", str(kafka_home))
    assert res.exit_code == 0, res.output
    assert f"verified by Apache Kafka {VERSION}: kafka-dump-log --deep-iteration read " in res.output
    report = json.loads((home / "reports" / run_id / "report.json").read_text())
    assert report["formats"]["other"]["verified_by"] == f"Apache Kafka {VERSION}"
    n = int(res.output.split(" read ")[1].split(" rewritten")[0])
    assert n > sum(1 for b in report["brokers"] for p in b["partitions"] for u in p["units"] if u["status"] == "ok")


def test_a_flipped_byte_in_a_rewritten_batch_fails_verification(run, tmp_path):
    home, run_id, log_dir, kafka_home = run
    seg = sorted((log_dir / "legacy-v0-0").glob("*.log"))[1]
    original = seg.read_bytes()
    try:
        data = bytearray(original)
        data[len(data) // 2] ^= 0xFF
        seg.write_bytes(bytes(data))
        res = _verify(home, run_id, "--kafka-home", str(kafka_home))
        assert res.exit_code == 1, res.output
        assert f"NOT verified by Apache Kafka {VERSION}" in res.output
        assert "legacy-v0-0" in res.output, res.output
        assert "invalid batch(es) (CRC)" in res.output or "kafka-dump-log fails reading" in res.output, res.output
        report = json.loads((home / "reports" / run_id / "report.json").read_text())
        assert "verified_by" not in report["formats"]["other"] and report["exit_code"] == 1
    finally:
        seg.write_bytes(original)
    assert _verify(home, run_id, "--kafka-home", str(kafka_home)).exit_code == 0


@pytest.mark.parametrize("case", ["missing", "no-jars", "no-java", "no-option"])
def test_bad_input_is_one_line_and_exit_2(run, tmp_path, case, monkeypatch):
    home, run_id, _, kafka_home = run
    args = [run_id, "--kafka-home", str(kafka_home)]
    if case == "missing":
        args[2] = str(tmp_path / "nope")
    elif case == "no-jars":
        args[2] = str(tmp_path)
    elif case == "no-java":
        monkeypatch.setenv("PATH", str(tmp_path))
        monkeypatch.delenv("JAVA_HOME", raising=False)
    else:
        args = [run_id]
    res = _verify(home, *args)
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.startswith("kmigrate verify:")]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    if case == "no-java":
        assert "no java" in lines[0] and "JAVA_HOME" in lines[0] and "java on PATH" in lines[0], lines[0]
