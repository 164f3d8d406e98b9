"""FastAPI app serving run reports; the Airflow plugin mounts it (see ``plugins/kmigrate_reports.py``).

Endpoints (relative to the mount point):

* ``/``                                   HTML index of runs
* ``/runs.json``                          JSON index of runs
* ``/runs/{run_id}``                      the report page
* ``/runs/{run_id}.json``                 the report JSON
* ``/dag-runs/{dag_id}/{dag_run_id}``     the page of the report of an Airflow DAG run
* ``/dag-runs/{dag_id}/{dag_run_id}.json`` its JSON

Only files under the report root are read (through ``ReportStore``, which validates run ids and
resolved paths). Airflow does not put its login in front of plugin apps: deployments that need
access control pass ``dependencies`` (e.g. a token check) to ``create_app``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import ValidationError

from migration.audit.store import InvalidRunId, ReportNotFound, ReportStore, check_run_id

# Airflow's own rules: dag ids are KEY_REGEX; run ids are free-form in Airflow 3 but the UI
# only produces these characters. We never build paths from them, only compare.
DAG_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,250}$")
DAG_RUN_ID_RE = re.compile(r"^[A-Za-z0-9_.~:+ -]{1,250}$")

# No scripts, no network: the page is inline CSS and SVG only; framing only by the same origin
# (the Airflow UI shows it in an iframe).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

_ENV = Environment(
    loader=FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True,
    undefined=StrictUndefined,
)


def _html(body: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)


def _json(content: Any, status_code: int = 200) -> Response:
    return JSONResponse(content, status_code=status_code, headers=SECURITY_HEADERS)


def create_app(
    store: ReportStore | Callable[[], ReportStore] | None = None,
    *,
    dependencies: Sequence[Callable[..., Any]] = (),
) -> FastAPI:
    """The reports app. ``store`` may be a factory so the report root is read per request
    (the plugin is imported once by long-running Airflow processes; the env may differ per test)."""

    def get_store() -> ReportStore:
        if store is None:
            return ReportStore()
        return store() if callable(store) else store

    app = FastAPI(
        title="kmigrate reports",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(d) for d in dependencies],
    )

    @app.exception_handler(InvalidRunId)
    async def _bad_run_id(request: Request, exc: InvalidRunId) -> Response:
        return _json({"detail": "invalid run id"}, 400)

    @app.exception_handler(ReportNotFound)
    async def _not_found(request: Request, exc: ReportNotFound) -> Response:
        return _json({"detail": "report not found"}, 404)

    @app.exception_handler(ValidationError)
    async def _corrupt(request: Request, exc: ValidationError) -> Response:
        # A report file that fails validation is not served half-trusted.
        return _json({"detail": "report file is invalid"}, 500)

    @app.get("/", response_class=HTMLResponse, name="index")
    def index(request: Request) -> Response:
        runs = get_store().list_runs()
        rows = [
            {
                "run": r,
                "href": request.url_for("run_html", run_id=r.run_id).path,
                "json_href": request.url_for("run_json", run_id=r.run_id).path,
            }
            for r in runs
        ]
        return _html(_ENV.get_template("index.html.j2").render(rows=rows, root=str(get_store().root)))

    @app.get("/runs.json", name="index_json")
    def index_json() -> Response:
        return _json([r.model_dump(mode="json") for r in get_store().list_runs()])

    # Declared before /runs/{run_id}: that pattern would otherwise swallow "<id>.json".
    @app.get("/runs/{run_id}.json", name="run_json")
    def run_json(run_id: str) -> Response:
        check_run_id(run_id)
        return _json(get_store().load(run_id).model_dump(mode="json"))

    @app.get("/runs/{run_id}", response_class=HTMLResponse, name="run_html")
    def run_html(run_id: str) -> Response:
        check_run_id(run_id)
        return _html(get_store().load_html(run_id))

    def _check_dag_run(dag_id: str, dag_run_id: str) -> None:
        if not DAG_ID_RE.fullmatch(dag_id) or not DAG_RUN_ID_RE.fullmatch(dag_run_id):
            raise HTTPException(400, "invalid dag id or dag run id")

    @app.get("/dag-runs/{dag_id}/{dag_run_id}.json", name="dag_run_json")
    def dag_run_json(dag_id: str, dag_run_id: str) -> Response:
        _check_dag_run(dag_id, dag_run_id)
        return _json(get_store().find_by_dag_run(dag_id, dag_run_id).model_dump(mode="json"))

    @app.get("/dag-runs/{dag_id}/{dag_run_id}", response_class=HTMLResponse, name="dag_run_html")
    def dag_run_html(dag_id: str, dag_run_id: str) -> Response:
        _check_dag_run(dag_id, dag_run_id)
        try:
            report = get_store().find_by_dag_run(dag_id, dag_run_id)
        except ReportNotFound:
            # Shown inside the Airflow UI tab: a readable page, still a 404.
            body = _ENV.get_template("missing.html.j2").render(dag_id=dag_id, dag_run_id=dag_run_id)
            return _html(body, 404)
        return _html(get_store().load_html(report.run_id))

    return app
