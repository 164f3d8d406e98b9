"""A rich progress bar over an engine's units, shared by the long-running commands."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@contextlib.contextmanager
def unit_progress(label: str, console: Console) -> Iterator[Any]:
    """Yields the callback to pass to an engine: (done, total, result) -> None."""
    with Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(label, total=None)

        def progress(done: int, total: int, result: dict[str, Any]) -> None:
            bar.update(task, completed=done, total=total)

        yield progress
