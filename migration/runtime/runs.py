"""A run's working directory: ``<home>/runs/<run id>/`` (the home: ``migration.settings``).

Every migration runs in three steps, so the same code serves the CLI, the inline and Spark
engines, and Airflow tasks that hand work to ``spark-submit``:
  1. prepare (driver): safety gates, inventory, plan -> ``job.json`` (units + options) and
     ``prepare.json`` (what the plan decided: skipped units, warnings, refusal);
  2. run units (engine: inline, in-process Spark, or spark-submit of orchestration/spark_app.py)
     -> ``results.json``;
  3. finalize (driver): read results, verify, write the run report.
Files are written durably (temporary name, fsync, rename, directory fsync: a resume or a
rollback reads them after a crash); nothing here is inside a log dir.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any, Self, TypeVar, overload

from migration.formats.fileio import durable_mkdir, durable_replace, durable_unlink
from migration.runtime.documents import JobDocument, PrepareDocument, ResultsDocument
from migration.runtime.engine import Unit
from migration.settings import runs_dir, state_env


def _write_json(path: Path, data: Any) -> None:
    durable_replace(path, json.dumps(data, indent=1, default=str).encode(), tmp_suffix=".tmp")


P = TypeVar("P", bound=PrepareDocument)

JOURNAL_DIR = "journal"
# Unit journal states in which a replacement in a log dir may be half done: a migration that
# journals its units (migrations/upgrade/journal.py) uses these names for those states.
IN_FLIGHT_STATES = frozenset({"started", "cleaned", "rolling-back"})


# A unit's journal is never rewritten in place: each save is a new file, ``<unit id>.json``
# first, then ``<unit id>+1.json``, ``<unit id>+2.json``...; the highest number is the journal.
# Renaming over a file frees the old one's blocks, and on a file system mounted with online
# discard a free costs a millisecond and holds up every other file operation, several times a
# durable write (docs/benchmarks.md, "Stop window"); a new name frees nothing. A unit id
# never holds the separator (topic names are [a-zA-Z0-9._-]).
JOURNAL_SAVE_SEP = "+"


def journal_file_name(unit_id: str, save: int) -> str:
    """The name of a unit's ``save``-th journal file (0: its first)."""
    return f"{unit_id}.json" if save == 0 else f"{unit_id}{JOURNAL_SAVE_SEP}{save}.json"


def latest_journal_files(journal_dir: Path) -> list[Path]:
    """Each unit's latest journal file in ``journal_dir`` (by unit id)."""
    latest: dict[str, tuple[int, Path]] = {}
    for jf in journal_dir.glob("*.json"):
        unit, sep, save = jf.stem.rpartition(JOURNAL_SAVE_SEP)
        n = int(save) if sep and save.isdigit() else 0
        unit = unit if sep and save.isdigit() else jf.stem
        if unit not in latest or n > latest[unit][0]:
            latest[unit] = (n, jf)
    return [latest[u][1] for u in sorted(latest)]


def journal_states(run_dir: Path) -> list[str] | None:
    """The ``state`` of every unit journal of a run (an unreadable journal counts as in
    flight); None when the run has no job file, so nothing can be told."""
    if not (run_dir / "job.json").is_file():
        return None
    states = []
    for jf in latest_journal_files(run_dir / JOURNAL_DIR):
        try:
            states.append(str(json.loads(jf.read_text())["state"]))
        except (OSError, ValueError, KeyError, TypeError):
            states.append("started")
    return states


# The marks a rollback or a commit that went through leaves in the run's directory (by the
# report kind that did it): the next one finds it done and changes nothing.
DONE_FILES = {"rollback": "rolled-back.json", "commit": "committed.json"}


class RunDir:
    def __init__(self, run_id: str, root: str | os.PathLike[str] | None = None) -> None:
        self.run_id = run_id
        self.path = self.path_of(run_id, root)
        durable_mkdir(self.path)  # runs/ and the run dir's own name survive a power cut too

    @staticmethod
    def path_of(run_id: str, root: str | os.PathLike[str] | None = None) -> Path:
        """Where the run's directory is: ``root`` when given, else under the home's runs/."""
        return Path(root) if root is not None else runs_dir() / run_id

    @classmethod
    def existing(cls, run_id: str, root: str | os.PathLike[str] | None = None) -> Self | None:
        """The run's directory when it exists, else None (a ``RunDir`` creates its directory:
        a rollback or a commit of an unknown run must not)."""
        path = cls.path_of(run_id, root)
        if not path.is_dir():
            return None
        rd = cls.__new__(cls)
        rd.run_id, rd.path = run_id, path
        return rd

    def mark_done(self, kind: str, *, report_id: str, at: datetime, summary: str) -> Path:
        """Say, durably, that a ``kind`` (``rollback``, ``commit``) of this run went through, by
        report ``report_id``: :meth:`done_at` then tells the next one."""
        return self.write(DONE_FILES[kind], {"run_id": report_id, "at": at.isoformat(), "summary": summary})

    def done_at(self, kind: str) -> str | None:
        """When (and by which report) a ``kind`` of this run went through, as "<time> UTC
        (report <id>)"; None when its mark is missing or unreadable."""
        try:
            data = self.read(DONE_FILES[kind])
            return f"{datetime.fromisoformat(data['at']):%Y-%m-%d %H:%M:%S} UTC (report {data['run_id']})"
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def clear_done(self, kind: str) -> None:
        """Drop the mark of a ``kind`` (a re-run of the run changes the log dirs again, so its
        rollback has something to undo again); durable before the re-run's first change."""
        durable_unlink(self.path / DONE_FILES[kind])

    @property
    def job_path(self) -> Path:
        return self.path / "job.json"

    @property
    def results_path(self) -> Path:
        return self.path / "results.json"

    @property
    def prepare_path(self) -> Path:
        return self.path / "prepare.json"

    def write_job(self, units: list[Unit], options: dict[str, Any]) -> Path:
        # "state": the home (and overrides) this job belongs to, for the spark-submit driver that
        # runs it (orchestration/spark_app.py), whatever environment spark-submit was given.
        return JobDocument(run_id=self.run_id, units=units, options=options, state=state_env()).write(self.job_path)

    def read_job(self) -> tuple[list[Unit], dict[str, Any]]:
        job = JobDocument.read(self.job_path)
        return job.units, job.options

    def write_results(self, results: list[dict[str, Any]]) -> Path:
        return ResultsDocument(results=results).write(self.results_path)

    def read_results(self) -> list[dict[str, Any]]:
        if not self.results_path.exists():
            return []
        return ResultsDocument.read(self.results_path).results

    def write_prepare(self, data: PrepareDocument | dict[str, Any]) -> Path:
        doc = data if isinstance(data, PrepareDocument) else PrepareDocument.model_validate(
            {**data, "version": PrepareDocument.VERSION})
        return doc.write(self.prepare_path)

    @overload
    def read_prepare(self) -> dict[str, Any]: ...

    @overload
    def read_prepare(self, model: type[P]) -> P | None: ...

    def read_prepare(self, model: type[P] | None = None) -> P | dict[str, Any] | None:
        """The run's prepare.json: typed as ``model`` (None when there is none yet), or, for the
        callers that still read it field by field, as a dict (empty when there is none)."""
        if model is not None:
            return model.read(self.prepare_path) if self.prepare_path.exists() else None
        if not self.prepare_path.exists():
            return {}
        return PrepareDocument.read(self.prepare_path).model_dump(mode="json")

    def write(self, name: str, data: Any) -> Path:
        p = self.path / name
        _write_json(p, data)
        return p

    def read(self, name: str) -> Any:
        return json.loads((self.path / name).read_text())
