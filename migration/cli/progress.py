"""A live progress bar over an engine's units, shared by the long-running commands, and where
Spark's own output goes while they run (docs/operations.md, "Engines")."""

from __future__ import annotations

# Imports of the migrations sit inside the commands: start-up cost, measured (migration/cli/__init__.py).
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from migration.runtime.engine import Progress as EngineProgress
from migration.runtime.engine import spark_log_file

FAILED_STATUSES = frozenset({"failed", "refused"})


@contextlib.contextmanager
def unit_progress(label: str, console: Console) -> Iterator[EngineProgress]:
    """Yields the callback to pass to an engine: (done, total, result) -> None. The inline
    engine calls it after every unit, the Spark engine while its tasks finish; the bar counts
    them and the failed units among the results it is shown. Not on a terminal (a pipe, a
    log, a test), no bar: a live display there leaves only a blank line behind."""
    if not console.is_terminal:
        yield _ignore
        return
    with Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[failed]}", style="red"), console=console, transient=True) as bar:
        task = bar.add_task(label, total=None, failed="")
        failed = 0

        def progress(done: int, total: int, result: dict[str, Any]) -> None:
            nonlocal failed
            if result.get("status") in FAILED_STATUSES:
                failed += 1
            bar.update(task, completed=done, total=total, failed=f"{failed} failed" if failed else "")

        yield progress


def _ignore(done: int, total: int, result: dict[str, Any]) -> None:
    pass


def spark_log_path(run_id: str) -> Path:
    """Where a run started from the shell keeps Spark's own output: in its run directory."""
    from migration.runtime.runs import RunDir

    return RunDir.path_of(run_id) / "spark.log"


@contextlib.contextmanager
def engine_progress(label: str, console: Console, *, engine: str, run_id: str,
                    notes: Console) -> Iterator[EngineProgress]:
    """:func:`unit_progress`, and with the Spark engine Spark's own output (its log lines, the
    JVM's warnings) sent to the run's ``spark.log``, whose path goes to ``notes`` when Spark
    wrote it (a dry run starts no Spark; an interrupted run still says where its log is)."""
    if engine != "spark":
        with unit_progress(label, console) as progress:
            yield progress
        return
    log = spark_log_path(run_id)
    try:
        with spark_log_file(log), unit_progress(label, console) as progress:
            yield progress
    finally:
        if log.exists():
            notes.print(f"Spark's own log: {log}", markup=False, highlight=False, soft_wrap=True)
