"""Output a person reads (issue #13): help without typer's ``<bool>``, one ``--engine`` choice
for every command, no Python ``None`` in a summary, a live progress bar on a terminal only,
and Spark's own log lines in the run's log file instead of the terminal."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from rich.console import Console
from typer.testing import CliRunner

from migration.cli.app import app
from migration.cli.common import EngineName
from migration.cli.progress import unit_progress

COMMANDS = sorted(typer.main.get_command(app).commands)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    for var in ("KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_FAULT_AT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KMIGRATE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_shows_no_python_types(command) -> None:
    res = CliRunner().invoke(app, [*([command] if command else []), "--help"], env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    for python_type in ("<bool>", "<list[", "<str>", "<int>", "<path>"):
        assert python_type not in res.output, f"{python_type} in the help of {command}"


def test_help_names_values_as_click_does() -> None:
    out = CliRunner().invoke(app, ["upgrade", "--help"], env={"COLUMNS": "120"}).output
    assert re.search(r"LOG_DIR\s+PATH\.\.\.", out)  # the arguments: many paths
    assert re.search(r"--exclude-topic\s+TEXT\s", out)  # repeatable: one value per use
    assert re.search(r"--to\s+\[v1\|v2\]", out)
    assert re.search(r"--dry-run\s+Plan only", out)  # a flag: no value at all
    assert "{LOG_DIR}..." in out  # the usage line


def test_one_engine_choice_with_one_default() -> None:
    group = typer.main.get_command(app)
    engines = {name: p for name, c in group.commands.items() for p in c.params if p.name == "engine"}
    assert set(engines) == {"upgrade", "tier-prepare", "unify-bootstrap"}
    for name, p in engines.items():
        assert p.default is EngineName.SPARK, name
        assert [getattr(c, "value", c) for c in p.type_descriptor.choices] == ["spark", "inline"], name


def test_unify_dry_run_says_no_none(sample_cluster, home) -> None:
    res = CliRunner().invoke(app, ["unify-bootstrap", str(sample_cluster.controller_dir), "--dry-run",
                                   "--engine", "inline"])
    assert res.exit_code == 0, res.output
    assert "None" not in res.output
    line = next(x for x in res.stdout.splitlines() if x.startswith("node 3000"))
    assert "planned bootstrap.checkpoint, records 3, digest " in line


def test_progress_bar_on_a_terminal_counts_units_and_failures() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80, color_system=None)
    with unit_progress("upgrade", console) as progress:
        progress(1, 3, {"status": "failed"})
        progress(3, 3, {"status": "ok"})
    assert "3/3" in out.getvalue() and "1 failed" in out.getvalue()


def test_no_progress_bar_in_a_pipe() -> None:
    out = io.StringIO()
    with unit_progress("upgrade", Console(file=out, width=80)) as progress:
        progress(1, 1, {"status": "ok"})
    assert out.getvalue() == ""  # not even the blank line a live display leaves


@pytest.mark.slow
def test_spark_writes_its_own_lines_to_the_run_log(sample_cluster, tmp_path) -> None:
    """``kmigrate upgrade`` on Spark (the default engine), as a shell runs it: the terminal gets
    kmigrate's lines; Spark's WARN lines and log4j banner go to <home>/runs/<run>/spark.log."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KMIGRATE_") or k == "KMIGRATE_PROJECT_ROOT"}
    env["KMIGRATE_HOME"] = str(tmp_path / "home")
    res = subprocess.run([str(Path(sys.executable).with_name("kmigrate")), "upgrade",
                          str(sample_cluster.broker_log_dirs[1]), "--to", "v2", "--run-id", "spark-quiet"],
                         env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    log = tmp_path / "home" / "runs" / "spark-quiet" / "spark.log"
    terminal = res.stdout + res.stderr
    assert f"Spark's own log: {log}" in res.stderr
    assert not re.search(r"\bWARN\b|log4j|NativeCodeLoader|\[Stage \d", terminal), terminal
    assert "log4j" in log.read_text()
    assert "kmigrate upgrade spark-quiet: ok (exit 0)" in res.stdout
