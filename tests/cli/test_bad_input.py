"""Every subcommand, given wrong paths, wrong files and wrong values, exits 2 (a usage error)
with one message naming what it found and what to pass, prints no traceback and writes
nothing: not into the inputs, not into the home, not into the working directory (issue #13,
docs/operations.md "Wrong paths are refused")."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import typer.main
from typer.testing import CliRunner

from migration.cli.app import app

# (id, arguments, exit code, what the output must say); "{name}" stands for a path of the layout.
CASES: list[tuple[str, list[str], int, list[str]]] = [
    # validate: log dirs, partition dirs or files; never "clean" over zero files
    ("validate-dir-of-log-dirs", ["validate", "{root}"], 2,
     ["{root} is a directory of log dirs", "broker-1/kafka-logs", "controller-3000/metadata", "pass them"]),
    ("validate-json-dir-of-log-dirs", ["validate", "--json", "{root}"], 2, ["broker-2/kafka-logs"]),
    ("validate-empty-dir", ["validate", "{empty}"], 2, ["{empty} is an empty directory"]),
    ("validate-other-dir", ["validate", "{other}"], 2, ["{other} is a directory without Kafka data"]),
    ("validate-missing", ["validate", "{missing}"], 2, ["{missing}: no such file or directory"]),
    ("validate-unknown-file", ["validate", "{notes}"], 2, ["nothing to check", "{notes}"]),
    # inventory: log dirs only
    ("inventory-dir-of-log-dirs", ["inventory", "{root}"], 2, ["broker-1/kafka-logs, broker-2/kafka-logs"]),
    ("inventory-json-dir-of-log-dirs", ["inventory", "--json", "{root}"], 2, ["pass them"]),
    ("inventory-partition-dir", ["inventory", "{part}"], 2, ["{part} is a partition directory", "pass {b1}"]),
    ("inventory-segment-file", ["inventory", "{seg}"], 2, ["partition directory events-v2-0", "pass {b1}"]),
    ("inventory-empty-dir", ["inventory", "{empty}"], 2, ["empty directory"]),
    # upgrade: broker log dirs only
    ("upgrade-partition-dir", ["upgrade", "{part}", "--to", "v2", "--engine", "inline"], 2,
     ["{part} is a partition directory of log dir {b1}: pass {b1}"]),
    ("upgrade-partition-dir-force", ["upgrade", "{part}", "--to", "v2", "--force", "--engine", "inline"], 2,
     ["pass {b1}"]),
    ("upgrade-dir-of-log-dirs", ["upgrade", "{root}", "--to", "v2"], 2,
     ["the broker log dirs broker-1/kafka-logs, broker-2/kafka-logs, broker-3/kafka-logs",
      "the metadata log dir controller-3000/metadata"]),
    ("upgrade-node-dir", ["upgrade", "{node}", "--to", "v2"], 2, ["the broker log dir kafka-logs: pass {b1}"]),
    ("upgrade-metadata-log-dir", ["upgrade", "{ctl}", "--to", "v2"], 2,
     ["{ctl} is a metadata log dir", "pass a broker log dir"]),
    ("upgrade-metadata-partition", ["upgrade", "{mpart}", "--to", "v2"], 2,
     ["metadata partition directory", "pass a broker log dir"]),
    ("upgrade-file", ["upgrade", "{desc}", "--to", "v2"], 2, ["{desc} is a file; pass a broker log dir"]),
    ("upgrade-meta-properties", ["upgrade", "{meta}", "--to", "v2"], 2, ["a file of log dir {b1}: pass {b1}"]),
    ("upgrade-empty-dir", ["upgrade", "{empty}", "--to", "v2"], 2, ["empty directory"]),
    ("upgrade-missing", ["upgrade", "{missing}", "--to", "v2"], 2, ["no such file or directory"]),
    ("upgrade-twice", ["upgrade", "{b1}", "{b1}/", "--to", "v2"], 2, ["{b1} is given twice"]),
    ("upgrade-bad-target", ["upgrade", "{b1}", "--to", "v3"], 2, ["--to"]),
    ("upgrade-bad-engine", ["upgrade", "{b1}", "--to", "v2", "--engine", "flink"], 2, ["--engine"]),
    ("upgrade-bad-run-id", ["upgrade", "{b1}", "--to", "v2", "--run-id", "../x"], 2, ["--run-id"]),
    ("upgrade-bad-segment-bytes", ["upgrade", "{b1}", "--to", "v2", "--segment-bytes", "0"], 2, ["--segment-bytes"]),
    ("upgrade-epoch-needs-v2", ["upgrade", "{b1}", "--to", "v1", "--assign-leader-epoch"], 2, ["needs --to v2"]),
    # tier-prepare: broker log dirs; --metadata-log-dir and the description's controllers: metadata log dirs
    ("tier-dir-of-log-dirs", ["tier-prepare", "{root}", "--bucket", "b", "--engine", "inline"], 2,
     ["broker-3/kafka-logs"]),
    ("tier-partition-dir", ["tier-prepare", "{part}", "--bucket", "b"], 2, ["pass {b1}"]),
    ("tier-metadata-as-broker", ["tier-prepare", "{ctl}", "--bucket", "b"], 2, ["{ctl} is a metadata log dir"]),
    ("tier-broker-as-metadata", ["tier-prepare", "{b1}", "--bucket", "b", "--metadata-log-dir", "{b2}"], 2,
     ["--metadata-log-dir {b2} is a broker log dir", "pass a metadata log dir"]),
    ("tier-cluster-not-a-description", ["tier-prepare", "{b1}", "--bucket", "b", "--cluster", "{meta}"], 2,
     ["--cluster {meta}: not a cluster description"]),
    ("tier-cluster-not-yaml", ["tier-prepare", "{b1}", "--bucket", "b", "--cluster", "{broken}"], 2,
     ["--cluster {broken}: cannot read it as JSON or YAML"]),
    ("tier-cluster-dir", ["tier-prepare", "{b1}", "--bucket", "b", "--cluster", "{root}"], 2,
     ["--cluster {root}: a directory"]),
    ("tier-cluster-missing", ["tier-prepare", "{b1}", "--bucket", "b", "--cluster", "{missing}"], 2,
     ["no such file"]),
    ("tier-bad-engine", ["tier-prepare", "{b1}", "--bucket", "b", "--engine", "flink"], 2, ["--engine"]),
    ("tier-bad-part-size", ["tier-prepare", "{b1}", "--bucket", "b", "--part-size", "0"], 2, ["--part-size"]),
    # unify-bootstrap: metadata log dirs; --retire-stray: log dirs without the metadata partition
    ("unify-broker-log-dir", ["unify-bootstrap", "{b1}"], 2,
     ["{b1} is a broker log dir", "pass a metadata log dir", "--retire-stray"]),
    ("unify-metadata-partition", ["unify-bootstrap", "{mpart}"], 2, ["pass {ctl}"]),
    ("unify-dir-of-log-dirs", ["unify-bootstrap", "{root}"], 2,
     ["the metadata log dir controller-3000/metadata", "pass {ctl}"]),
    ("unify-empty-dir", ["unify-bootstrap", "{empty}", "--engine", "inline"], 2, ["empty directory"]),
    ("unify-stray-is-metadata-dir", ["unify-bootstrap", "{ctl}", "--retire-stray", "{ctl}"], 2,
     ["--retire-stray {ctl} is a metadata log dir"]),
    ("unify-bad-engine", ["unify-bootstrap", "{ctl}", "--engine", "flink"], 2, ["--engine"]),
    ("unify-bad-run-id", ["unify-bootstrap", "{ctl}", "--run-id", "a/b"], 2, ["--run-id"]),
    # inspect: files
    ("inspect-dir", ["inspect", "{part}"], 2, ["is a directory"]),
    ("inspect-missing", ["inspect", "{missing}"], 2, ["no such file"]),
    ("inspect-bad-decoder", ["inspect", "--value-decoder", "avro", "{seg}"], 2, ["--value-decoder"]),
    # sample-cluster: an empty or new directory
    ("sample-cluster-file", ["sample-cluster", "{desc}"], 2, ["{desc} is a file"]),
    ("sample-cluster-not-empty", ["sample-cluster", "{other}"], 2, ["not empty"]),
    ("sample-cluster-bad-brokers", ["sample-cluster", "{missing}", "--brokers", "0"], 2, ["--brokers"]),
    # report, rollback, commit, sessions: run ids and values
    ("report-unknown-run", ["report", "no-such-run"], 2, ["no-such-run"]),
    ("report-bad-format", ["report", "no-such-run", "--format", "xml"], 2, ["xml"]),
    ("rollback-unknown-run", ["rollback", "no-such-run"], 2, ["no-such-run"]),
    ("commit-unknown-run", ["commit", "no-such-run"], 2, ["no-such-run"]),
    ("verify-no-kafka-home", ["verify", "no-such-run"], 2, ["--kafka-home"]),
    ("verify-unknown-run", ["verify", "no-such-run", "--kafka-home", "/no/such/kafka"], 2, ["no-such-run"]),
    ("sessions-bad-option", ["sessions", "--bogus"], 2, ["--bogus"]),
]


@pytest.fixture(scope="module")
def cluster(sample_cluster_template, tmp_path_factory) -> Path:
    """A copy of the sample cluster shared by the cases: none of them may change it."""
    dst = tmp_path_factory.mktemp("bad-input") / "cluster"
    shutil.copytree(sample_cluster_template.root, dst, copy_function=shutil.copy2)
    return dst


@pytest.fixture
def layout(cluster, tmp_path, monkeypatch) -> SimpleNamespace:
    """Wrong inputs beside the cluster, a home and a working directory of their own."""
    for var in ("KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_FAULT_AT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KMIGRATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("not Kafka data\n")
    (tmp_path / "broken.yaml").write_text("nodes: [unclosed\n")
    b1 = cluster / "broker-1" / "kafka-logs"
    part = b1 / "events-v2-0"
    ctl = cluster / "controller-3000" / "metadata"
    return SimpleNamespace(
        root=cluster, node=cluster / "broker-1", b1=b1, b2=cluster / "broker-2" / "kafka-logs", part=part,
        seg=part / "00000000000000000000.log", meta=b1 / "meta.properties", ctl=ctl,
        mpart=ctl / "__cluster_metadata-0", desc=cluster / "cluster.json",
        empty=tmp_path / "empty", other=tmp_path / "other", notes=tmp_path / "other" / "notes.txt",
        missing=tmp_path / "missing", broken=tmp_path / "broken.yaml", cwd=cwd, tmp=tmp_path,
    )


def tree(*roots: Path) -> dict[str, tuple[int, int, str]]:
    """Every file and directory under ``roots``: (size, mtime, content hash); "d" for a directory."""
    out: dict[str, tuple[int, int, str]] = {}
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            for name in dirs:
                out[os.path.join(dirpath, name)] = (0, 0, "d")
            for name in files:
                p = Path(dirpath) / name
                st = p.stat()
                out[str(p)] = (st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def _fill(text: str, layout: SimpleNamespace) -> str:
    return text.format(**{k: str(v) for k, v in vars(layout).items()})


@pytest.mark.parametrize(("args", "code", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_wrong_input_is_refused_before_anything_is_written(layout, args, code, says) -> None:
    argv = [_fill(a, layout) for a in args]
    before = tree(layout.root, layout.tmp)
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == code, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    for s in says:
        assert _fill(s, layout) in res.output, res.output
    if "--json" in argv:
        assert res.stdout == ""  # a usage error is no document: stdout stays empty, the message on stderr
    assert not (layout.cwd / "out").exists()
    assert tree(layout.root, layout.tmp) == before, "the command wrote something"


def test_every_subcommand_has_cases() -> None:
    """A new subcommand comes with its wrong-input cases here."""
    commands = set(typer.main.get_command(app).commands)  # what `kmigrate --help` lists
    assert commands == {c[1][0] for c in CASES}


def test_no_traceback_from_the_installed_command(layout) -> None:
    """The console script, as a shell runs it: the same refusal, no traceback, nothing written."""
    before = tree(layout.root, layout.tmp)
    res = subprocess.run([str(Path(sys.executable).with_name("kmigrate")), "upgrade", str(layout.part), "--to", "v2"],
                         capture_output=True, text=True, timeout=120, cwd=layout.cwd)
    assert res.returncode == 2, res.stderr
    assert f"pass {layout.b1}" in res.stderr and "Traceback" not in res.stderr and res.stdout == ""
    assert tree(layout.root, layout.tmp) == before
