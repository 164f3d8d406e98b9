"""Reports on disk: ``<report root>/<run id>/report.json`` (+ ``report.html``, ``summary.json``).

Writes are atomic (temporary file, fsync, rename, fsync of the directory) so a crash mid-write
leaves either the previous report or the new one, never half a JSON document. Run ids are
validated with a strict regex *and* the resolved path is checked to lie under the root, so no
caller (CLI, web endpoint) can make the store read or write outside it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel, Field, ValidationError

from migration.audit.model import RUN_ID_RE, RunKind, RunReport, RunStatus
from migration.formats.fileio import durable_mkdir, durable_replace
from migration.settings import reports_dir

if TYPE_CHECKING:
    from migration.audit.html import ReportLink

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
SUMMARY_JSON = "summary.json"

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


def default_report_root(home: Path | None = None) -> Path:
    """``$KMIGRATE_REPORT_ROOT``, else ``<home>/reports``: ``home``, by default the one
    ``migration.settings`` resolves (docs/operations.md, "Where state lives")."""
    return reports_dir(home)


def write_report_file(path: Path, data: bytes) -> None:
    """One report file, durably (``fileio.durable_replace``), its directories created durably.
    The temporary name is random: two tasks may write the same DAG run's report at once."""
    durable_mkdir(path.parent)
    durable_replace(path, data, tmp_path=path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp"), exclusive=True)


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
    task_id: str | None = None
    broker_ids: list[int] = Field(default_factory=list)
    steps: list[str] = Field(default_factory=list, description="Run ids of the steps a DAG run's report merged")
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
            task_id=report.task_id,
            broker_ids=[b.broker_id for b in report.brokers],
            steps=[s.run_id for s in report.steps],
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
    """Reports of all runs under one root directory.

    ``dag_run_report_id`` names the run id a DAG run's own (merged) report has, from the DAG
    run id (the orchestration's ``run_id_for``; this layer may not import it): the report of a
    DAG run is that one when it exists. ``page_href(report, run_id)`` is the URL of run
    ``run_id``'s page linked from ``report``'s page where pages are served (the Airflow plugin's
    routes): pages are then rendered per request, linking the other reports of their DAG run as
    they are now; without it the stored page is served."""

    def __init__(
        self,
        root: Path | str | None = None,
        sinks: Iterable[ReportSink] = (),
        *,
        dag_run_report_id: Callable[[str], str] | None = None,
        page_href: Callable[[RunReport, str], str] | None = None,
    ) -> None:
        self.root = Path(root) if root is not None else default_report_root()
        self.sinks = list(sinks)
        self.dag_run_report_id = dag_run_report_id
        self.page_href = page_href

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

            # A DAG run's report links the other reports of its run (the preflights, rollbacks)
            # besides the steps it names; a step's stored page is written before its siblings.
            links = self.dag_run_links(report) if report.steps else []
            files.append((REPORT_HTML, render_html(report, links=links).encode(), "text/html; charset=utf-8"))
        files.append(
            (SUMMARY_JSON, RunSummary.of(report).model_dump_json(indent=2).encode() + b"\n", "application/json")
        )
        for name, data, _ in files:
            write_report_file(run_dir / name, data)
        for sink in self.sinks:
            for name, data, content_type in files:
                sink.put(f"{report.run_id}/{name}", data, content_type)
        return run_dir / REPORT_JSON

    def append_event(self, run_id: str, done: RunReport, summary: str) -> bool:
        """Add to run ``run_id``'s report that ``done`` (a rollback or commit of it) finished,
        saying ``summary``; False when that run left no readable report here (nothing to add to)."""
        from migration.audit.model import RunEvent

        try:
            report = self.load(run_id)
        except (ReportNotFound, InvalidRunId, OSError, ValueError):
            return False
        report.events.append(RunEvent(kind=done.kind, run_id=done.run_id, at=done.finished_at or done.started_at,
                                      status=done.status, summary=summary))
        self.save(report)
        return True

    def load(self, run_id: str) -> RunReport:
        path = self.json_path(run_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ReportNotFound(run_id) from None
        return RunReport.from_json(data)

    def load_html(self, run_id: str) -> str:
        """The stored page; rendered from the JSON when the run was saved without one. With
        ``page_href`` (pages served over HTTP) always rendered, linking the other reports of the
        run's DAG run as they are now."""
        from migration.audit.html import render_html  # jinja2, only for pages

        page_href = self.page_href
        if page_href is not None:
            report = self.load(run_id)
            return render_html(report, links=self.dag_run_links(report), href=lambda rid: page_href(report, rid))
        path = self.html_path(run_id)
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
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
        """The report of that Airflow DAG run: its own report, which merges every step's (run id
        ``dag_run_report_id(dag_run_id)``, or any report that names the steps it merged), when
        the run has one; else (a run still going, or one without a final report step) the
        newest report of the run. Never a single step's report when the merged one exists: a
        rollout's last broker finishes after the others, so "newest" would be that broker."""
        hits = self.find(lambda s: s.dag_id == dag_id and s.dag_run_id == dag_run_id)
        if not hits:
            raise ReportNotFound(f"{dag_id}/{dag_run_id}")
        own = self.dag_run_report_id(dag_run_id) if self.dag_run_report_id is not None else None
        # Stable sort: within each rank the newest stays first.
        hits.sort(key=lambda s: (s.run_id == own, bool(s.steps)), reverse=True)
        return self.load(hits[0].run_id)

    def dag_run_links(self, report: RunReport) -> list[ReportLink]:
        """The other reports of ``report``'s DAG run, oldest first (none outside a DAG run)."""
        from migration.audit.html import ReportLink  # html pulls in jinja2: only pages need it

        if report.dag_id is None or report.dag_run_id is None:
            return []
        hits = self.find(lambda s: s.dag_id == report.dag_id and s.dag_run_id == report.dag_run_id
                         and s.run_id != report.run_id)
        own = self.dag_run_report_id(report.dag_run_id) if self.dag_run_report_id is not None else None
        return [
            ReportLink(run_id=s.run_id, kind=s.kind.value, status=s.status.value, exit_code=s.exit_code, units=s.units,
                       task_id=s.task_id, broker_ids=tuple(s.broker_ids), merges_steps=bool(s.steps) or s.run_id == own)
            for s in sorted(hits, key=lambda s: (s.started_at, s.run_id))
        ]
