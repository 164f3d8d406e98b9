"""The benchmark's run history: ``bench/history.jsonl``, one ``Entry`` (JSON) per line, oldest
first. ``python -m bench.run`` appends its run's entry (``--no-history`` skips it); the entries
before the rewrite of docs/benchmarks.md were taken from that notebook's tables (``source``
says so; what it did not state is null).

``python -m bench.history [KEY ...] [--full]`` prints the figures of the targets ``KEY`` (all
when none; ``KEYS`` lists them) run by run: date, commit, full or quick, value, status.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from migration.formats.fileio import durable_replace

ROOT = Path(__file__).resolve().parent.parent
HISTORY = ROOT / "bench" / "history.jsonl"

# A stable name for each target row, the same in every run (a row's ``name`` carries sizes and
# repeat counts that changed over time): bench.run gives each target row its key (``_target``'s
# ``key``), which results.json and the history keep.
KEYS: tuple[str, ...] = (
    "validate", "upgrade-v1", "upgrade-v2", "kp-mix-v1", "kp-mix-v2", "kp-plain-v1", "kp-plain-v2", "spark", "rss",
    "sessions", "core-mb-s", "core-x-python", "small-partitions", "prestage", "window", "window-growth",
    "prestage-io-rate",
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Machine(_Model):
    cpus: int | None = None
    model: str | None = None  # /proc/cpuinfo's model name
    memory_gib: float | None = None
    python: str | None = None
    core: str | None = None  # the record core that ran (migration.formats.core.describe())


class Summary(_Model):
    passed: int | None = Field(default=None, alias="pass")
    missed: int | None = Field(default=None, alias="miss")
    errors: int | None = Field(default=None, alias="error")


class Row(_Model):
    """A target row of the run, as bench.run gives it (results.json)."""

    key: str | None = None  # one of KEYS, as bench.run gave it to the row
    name: str
    target: str | None = None  # the target's text, e.g. ">= 0.6x codec floor"
    value: float | None = None  # what the target compares (a ratio, MB/s, MB or s)
    threshold: float | None = None
    ceiling: float | None = None  # the best any implementation could reach here, when measured
    ceiling_one_core: float | None = None
    status: str | None = None  # PASS, MISS, "MISS (ceiling N.NNx)" or ERROR
    ratio: str | None = None  # the row's ratio text


class Entry(_Model):
    """One run of ``python -m bench.run``: a line of bench/history.jsonl."""

    version: Literal[1] = 1
    date: str | None  # YYYY-MM-DD, local time of the run's start
    commit: str | None  # git rev-parse --short HEAD
    dirty: bool | None  # tracked files differed from the commit (bench/history.jsonl aside)
    command: list[str] | None  # argv
    quick: bool | None
    machine: Machine
    duration_s: float | None
    summary: Summary
    rows: list[Row]
    source: str | None = None  # where the entry comes from, when not from bench.run itself
    note: str | None = None

    def line(self) -> str:
        return self.model_dump_json(by_alias=True) + "\n"


def _git(*args: str) -> str | None:
    try:
        res = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout if res.returncode == 0 else None


def commit() -> tuple[str | None, bool | None]:
    """HEAD's short hash and whether tracked files differ from it (the history file aside, which
    every run changes), or (None, None) outside a git checkout."""
    head = _git("rev-parse", "--short", "HEAD")
    if head is None:
        return None, None
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/history.jsonl")
    return head.strip(), None if status is None else bool(status.strip())


def entry_from_results(results: Mapping[str, Any], *, argv: Sequence[str], quick: bool, date: str,
                       commit_dirty: tuple[str | None, bool | None] | None = None) -> Entry:
    """The history entry of a run, from the document bench.run writes to out/bench/results.json
    (``machine``, ``summary``, ``rows``): its target rows (those with a PASS, MISS or ERROR
    status; the report-only rows stay in results.json)."""
    info = results["machine"]
    counts = results["summary"]
    head, dirty = commit() if commit_dirty is None else commit_dirty
    rows = [
        Row(key=r.get("key"), name=str(r.get("name", "")), target=r.get("target") or None,
            value=r.get("value"), threshold=r.get("threshold"), ceiling=r.get("ceiling"),
            ceiling_one_core=r.get("ceiling_one_core"), status=r.get("status"), ratio=r.get("ratio"))
        for r in results["rows"]
        if str(r.get("status", "")).startswith(("PASS", "MISS", "ERROR"))
    ]
    return Entry(
        date=date, commit=head, dirty=dirty, command=list(argv), quick=quick,
        machine=Machine(cpus=info.get("cores"), model=info.get("cpu"), memory_gib=info.get("ram_gib"),
                        python=info.get("python"), core=info.get("record_core")),
        duration_s=info.get("total_seconds"),
        summary=Summary(passed=counts.get("PASS"), missed=counts.get("MISS"), errors=counts.get("ERROR")),
        rows=rows,
    )


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on ``directory`` (flock), so that two runs appending at once keep both
    lines."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def append(entry: Entry, path: Path | None = None) -> Path:
    """Add ``entry`` as the last line of ``path``, durably: the file is written anew with the
    line added under a temporary name, fsynced and renamed over the old one (fileio's
    ``durable_replace``), so a crash leaves the old history or the new one, never half a line.
    ``path``: bench/history.jsonl by default; its directory must exist."""
    path = HISTORY if path is None else path
    with _locked(path.parent):
        old = path.read_bytes() if path.exists() else b""
        if old and not old.endswith(b"\n"):
            old += b"\n"
        durable_replace(path, [old, entry.line().encode()], tmp_suffix=f".{os.getpid()}.tmp")
    return path


def load(path: Path | None = None) -> list[Entry]:
    """Every entry of ``path`` (bench/history.jsonl by default), oldest first, validated: a line
    that is no Entry raises."""
    path = HISTORY if path is None else path
    if not path.exists():
        return []
    return [Entry.model_validate_json(ln) for ln in path.read_text().splitlines() if ln.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.history",
                                 description="the targets' figures run by run, from bench/history.jsonl")
    ap.add_argument("keys", nargs="*", metavar="KEY", help=f"targets to show (default all): {', '.join(KEYS)}")
    ap.add_argument("--full", action="store_true", help="full runs only (no --quick runs)")
    ap.add_argument("--file", type=Path, default=None, help="default bench/history.jsonl")
    args = ap.parse_args(argv)
    unknown = [k for k in args.keys if k not in KEYS]
    if unknown:
        ap.error(f"unknown target {', '.join(unknown)}: one of {', '.join(KEYS)}")
    entries = [e for e in load(args.file) if not (args.full and e.quick)]
    for key in args.keys or list(KEYS):
        print(f"{key}:")
        for e in entries:
            for r in (r for r in e.rows if r.key == key):
                value = "" if r.value is None else f"{r.value:g}"
                ceiling = "" if r.ceiling is None else f"ceiling {r.ceiling:g}"
                kind = "quick" if e.quick else "full" if e.quick is not None else "?"
                dirty = "+" if e.dirty else ""
                print(f"  {e.date or '?':<10}  {(e.commit or '?') + dirty:<9}  {kind:<5}  {value:>8}  "
                      f"{r.status or '?':<22}  {ceiling}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
