"""Reports on disk: ``<report root>/<run id>/report.json`` (+ ``report.html``, ``summary.json``).

Writes are atomic (temporary file, fsync, rename, fsync of the directory) so a crash mid-write
leaves either the previous report or the new one, never half a JSON document. Run ids are
validated with a strict regex *and* the resolved path is checked to lie under the root, so no
caller (CLI, web endpoint) can make the store read or write outside it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from migration.audit.model import RUN_ID_RE, RunKind, RunReport, RunStatus

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
SUMMARY_JSON = "summary.json"

ENV_PROJECT_ROOT = "KMIGRATE_PROJECT_ROOT"
ENV_REPORT_ROOT = "KMIGRATE_REPORT_ROOT"


class InvalidRunId(ValueError):
    """A run id that is not a single safe path component."""


class ReportNotFound(LookupError):
    pass


@runtime_checkable
class ReportSink(Protocol):
    """Where copies of reports go besides the local disk (e.g. an S3 bucket).

    Implementations live with the caller (a boto3 client wrapper, say); the store only needs
    ``put``. Keys look like ``<run id>/report.json``."""

    def put(self, key: str, data: bytes, content_type: str) -> None: ...


def project_root() -> Path:
    env = os.environ.get(ENV_PROJECT_ROOT)
    return Path(env) if env else Path.cwd()


def default_report_root() -> Path:
    """``$KMIGRATE_REPORT_ROOT``, else ``<out dir>/reports`` (``$KMIGRATE_OUT``, else
    ``<project root>/out``)."""
    from migration.settings import out_dir

    env = os.environ.get(ENV_REPORT_ROOT)
    return Path(env) if env else out_dir() / "reports"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    # The rename is durable only once the directory entry is on disk.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class RunSummary(BaseModel):
    """What an index of runs needs, without loading every full report."""

    run_id: str
    kind: RunKind
    status: RunStatus
    exit_code: int
    started_at: datetime
    finished_at: datetime | None = None
    dag_id: str | None = None
    dag_run_id: str | None = None
    units: int
    units_failed: int
    bytes_before: int
    bytes_after: int

    @classmethod
    def of(cls, report: RunReport) -> RunSummary:
        t = report.totals
        return cls(
            run_id=report.run_id,
            kind=report.kind,
            status=report.status,
            exit_code=report.exit_code(),
            started_at=report.started_at,
            finished_at=report.finished_at,
            dag_id=report.dag_id,
            dag_run_id=report.dag_run_id,
            units=t.units,
            units_failed=t.units_failed,
            bytes_before=t.bytes_before,
            bytes_after=t.bytes_after,
        )


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID_RE.fullmatch(run_id):
        raise InvalidRunId(f"invalid run id: {run_id!r}")
    return run_id


class ReportStore:
    """Reports of all runs under one root directory."""

    def __init__(self, root: Path | str | None = None, sinks: Iterable[ReportSink] = ()) -> None:
        self.root = Path(root) if root is not None else default_report_root()
        self.sinks = list(sinks)

    def run_dir(self, run_id: str) -> Path:
        """The run's directory; raises InvalidRunId for anything that would leave the root."""
        check_run_id(run_id)
        root = self.root.resolve()
        path = (root / run_id).resolve()
        # Belt and braces: the regex already forbids separators, but a symlinked run dir
        # pointing elsewhere must not be followed either.
        if path.parent != root:
            raise InvalidRunId(f"run id {run_id!r} resolves outside the report root")
        return path

    def _file(self, run_id: str, name: str) -> Path:
        run_dir = self.run_dir(run_id)
        path = (run_dir / name).resolve()
        # A report file that is a symlink to elsewhere (e.g. /etc/passwd) is not served.
        if path.parent != run_dir:
            raise InvalidRunId(f"{name} of run {run_id!r} resolves outside the run directory")
        return path

    def json_path(self, run_id: str) -> Path:
        return self._file(run_id, REPORT_JSON)

    def html_path(self, run_id: str) -> Path:
        return self._file(run_id, REPORT_HTML)

    def save(self, report: RunReport, *, html: bool = True) -> Path:
        """Write report.json (and report.html, summary.json); copy to every sink. Returns the JSON path."""
        run_dir = self.run_dir(report.run_id)
        files: list[tuple[str, bytes, str]] = [(REPORT_JSON, report.to_json().encode(), "application/json")]
        if html:
            from migration.audit.html import render_html  # html pulls in jinja2; JSON-only users skip it

            files.append((REPORT_HTML, render_html(report).encode(), "text/html; charset=utf-8"))
        files.append(
            (SUMMARY_JSON, RunSummary.of(report).model_dump_json(indent=2).encode() + b"\n", "application/json")
        )
        for name, data, _ in files:
            atomic_write_bytes(run_dir / name, data)
        for sink in self.sinks:
            for name, data, content_type in files:
                sink.put(f"{report.run_id}/{name}", data, content_type)
        return run_dir / REPORT_JSON

    def load(self, run_id: str) -> RunReport:
        path = self.json_path(run_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ReportNotFound(run_id) from None
        return RunReport.from_json(data)

    def load_html(self, run_id: str) -> str:
        """The stored page; rendered from the JSON when the run was saved without one."""
        path = self.html_path(run_id)
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            from migration.audit.html import render_html

            return render_html(self.load(run_id))

    def summary(self, run_id: str) -> RunSummary:
        path = self._file(run_id, SUMMARY_JSON)
        try:
            return RunSummary.model_validate_json(path.read_bytes())
        except (FileNotFoundError, ValidationError):
            # Missing or from an older writer: fall back to the full report (the source of truth).
            return RunSummary.of(self.load(run_id))

    def run_ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        root = self.root.resolve()
        return sorted(
            p.name
            for p in root.iterdir()
            if RUN_ID_RE.fullmatch(p.name) and p.is_dir() and not p.is_symlink() and (p / REPORT_JSON).is_file()
        )

    def list_runs(self) -> list[RunSummary]:
        """Summaries of all runs, newest first; unreadable reports are skipped, not fatal."""
        out: list[RunSummary] = []
        for run_id in self.run_ids():
            try:
                out.append(self.summary(run_id))
            except (ReportNotFound, ValidationError, ValueError, OSError):
                continue
        return sorted(out, key=lambda s: (s.started_at, s.run_id), reverse=True)

    def find(self, predicate: Callable[[RunSummary], bool]) -> list[RunSummary]:
        return [s for s in self.list_runs() if predicate(s)]

    def find_by_dag_run(self, dag_id: str, dag_run_id: str) -> RunReport:
        """The newest report of that Airflow DAG run."""
        hits = self.find(lambda s: s.dag_id == dag_id and s.dag_run_id == dag_run_id)
        if not hits:
            raise ReportNotFound(f"{dag_id}/{dag_run_id}")
        return self.load(hits[0].run_id)
