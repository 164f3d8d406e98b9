"""A run's working directory: ``out/runs/<run id>/``.

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
from pathlib import Path
from typing import Any

from migration.formats.fileio import atomic_write, fsync_dir
from migration.runtime.engine import Unit
from migration.settings import runs_dir


def _write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=1, default=str).encode(), tmp_suffix=".tmp")


JOURNAL_DIR = "journal"
# Unit journal states in which a replacement in a log dir may be half done: a migration that
# journals its units (migrations/upgrade/journal.py) uses these names for those states.
IN_FLIGHT_STATES = frozenset({"started", "cleaned", "rolling-back"})


def journal_states(run_dir: Path) -> list[str] | None:
    """The ``state`` of every unit journal of a run (an unreadable journal counts as in
    flight); None when the run has no job file, so nothing can be told."""
    if not (run_dir / "job.json").is_file():
        return None
    states = []
    for jf in sorted((run_dir / JOURNAL_DIR).glob("*.json")):
        try:
            states.append(str(json.loads(jf.read_text())["state"]))
        except (OSError, ValueError, KeyError, TypeError):
            states.append("started")
    return states


class RunDir:
    def __init__(self, run_id: str, root: str | os.PathLike[str] | None = None) -> None:
        self.run_id = run_id
        self.path = Path(root) if root is not None else runs_dir() / run_id
        if not self.path.is_dir():
            self.path.mkdir(parents=True, exist_ok=True)
            fsync_dir(self.path.parent)  # the run dir's own name survives a crash too

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
        _write_json(self.job_path, {"run_id": self.run_id, "units": [u.model_dump(mode="json") for u in units],
                                    "options": options})
        return self.job_path

    def read_job(self) -> tuple[list[Unit], dict[str, Any]]:
        data = json.loads(self.job_path.read_text())
        return [Unit.model_validate(u) for u in data["units"]], data.get("options", {})

    def write_results(self, results: list[dict[str, Any]]) -> Path:
        _write_json(self.results_path, {"results": results})
        return self.results_path

    def read_results(self) -> list[dict[str, Any]]:
        if not self.results_path.exists():
            return []
        return json.loads(self.results_path.read_text())["results"]

    def write_prepare(self, data: dict[str, Any]) -> Path:
        _write_json(self.prepare_path, data)
        return self.prepare_path

    def read_prepare(self) -> dict[str, Any]:
        return json.loads(self.prepare_path.read_text()) if self.prepare_path.exists() else {}

    def write(self, name: str, data: Any) -> Path:
        p = self.path / name
        _write_json(p, data)
        return p

    def read(self, name: str) -> Any:
        return json.loads((self.path / name).read_text())
