"""Airflow 3 plugin: the kmigrate run report of each DAG run, as a tab of the DAG run page.

Wiring and Airflow's access check; the app lives in ``migration.audit.web``. The FastAPI
app is mounted by the API server under ``URL_PREFIX``; the external view adds a "Migration
report" tab to every DAG run, whose iframe loads ``/kmigrate-reports/dag-runs/<dag id>/<run id>``
(Airflow's UI substitutes ``{DAG_ID}`` and ``{RUN_ID}``, URL-encoded). That page is the DAG run's
own report, the one merging every step's (``merge_reports``; its run id is ``run_id_for`` of the
DAG run id), with a link to each step's report and to the other reports of the run (the
preflights, a rollback); before the final report step has run, the newest step's report. The
links go to ``/dag-runs/<dag id>/<run id>/reports/<report run id>``, added here, so a user who may
read that DAG's runs may follow them (``/runs/<run id>`` needs access to every DAG's runs).

Airflow does not authenticate plugin apps (a mounted app inherits none of the core API's
dependencies), so every route here requires what the core API requires to read DAG runs:
a user from the ``Authorization: Bearer`` token or the UI's ``_token`` cookie (which the tab's
iframe sends), whom the auth manager allows to read the runs of the DAG named in the path, or
of DAGs in general for the report list and reports looked up by run id. The DAG checked comes
from the path alone: Airflow's ``requires_access_dag`` would also take ``?dag_id=`` from the
query string, which would let a reader of one DAG list every report.
"""

from __future__ import annotations

from urllib.parse import quote

from airflow.api_fastapi.app import API_ROOT_PATH, get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.core_api.security import GetUserDep
from airflow.models.dag import DagModel
from airflow.plugins_manager import AirflowPlugin
from airflow.sdk import Variable, conf
from fastapi import FastAPI, HTTPException, Request, status
from fastapi.responses import HTMLResponse

from migration.audit.model import RunReport
from migration.audit.store import ReportNotFound, ReportStore, check_run_id, default_report_root
from migration.audit.web import DAG_ID_RE, DAG_RUN_ID_RE, SECURITY_HEADERS, create_app
from migration.orchestration.common import run_id_for
from migration.settings import airflow_home_lookups, resolve_home

URL_PREFIX = "/kmigrate-reports"


def may_read_dag_runs(request: Request, user: GetUserDep) -> None:
    """403 unless ``user`` may read the runs of the path's DAG (of every DAG without one)."""
    dag_id = request.path_params.get("dag_id")
    details = DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id)) if dag_id else None
    if not get_auth_manager().is_authorized_dag(method="GET", access_entity=DagAccessEntity.RUN, details=details,
                                                user=user):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "Forbidden")


def page_href(linked_from: RunReport, run_id: str) -> str:
    """The URL of run ``run_id``'s page as ``linked_from``'s page links it: under the DAG run
    both belong to (the same access check as the tab), else by run id. Absolute, below
    ``[api] base_url``'s path as Airflow mounts plugin apps, so the tab's page and
    ``/runs/<run id>`` link alike."""
    base = API_ROOT_PATH.rstrip("/") + URL_PREFIX
    if linked_from.dag_id is None or linked_from.dag_run_id is None:
        return f"{base}/runs/{run_id}"
    return f"{base}/dag-runs/{quote(linked_from.dag_id, safe='')}/{quote(linked_from.dag_run_id, safe='')}" \
           f"/reports/{run_id}"


def report_store() -> ReportStore:
    """Per request (the home may change under a long-running api-server): the reports of the
    home the DAGs write to, ``KMIGRATE_HOME``, else ``[kmigrate] home`` of the Airflow
    configuration, else the Variable ``kmigrate_home`` (docs/operations.md, "Where state lives").
    A DAG run's report is its merged one, and pages link the other reports of their DAG run."""
    home = resolve_home(airflow_home_lookups(conf, Variable)).path
    return ReportStore(default_report_root(home), dag_run_report_id=run_id_for, page_href=page_href)


def reports_app() -> FastAPI:
    app = create_app(report_store, dependencies=[may_read_dag_runs])

    # Added after create_app: the app's dependencies (the access check) apply to it as well.
    @app.get("/dag-runs/{dag_id}/{dag_run_id}/reports/{run_id}", response_class=HTMLResponse,
             name="dag_run_report_html")
    def dag_run_report_html(dag_id: str, dag_run_id: str, run_id: str) -> HTMLResponse:
        """The page of one report of that DAG run (a step's, the preflight's); 404 for a report
        of any other DAG run, so the DAG in the path is the one whose access was checked."""
        if not DAG_ID_RE.fullmatch(dag_id) or not DAG_RUN_ID_RE.fullmatch(dag_run_id):
            raise HTTPException(400, "invalid dag id or dag run id")
        check_run_id(run_id)
        store = report_store()
        report = store.load(run_id)
        if report.dag_id != dag_id or report.dag_run_id != dag_run_id:
            raise ReportNotFound(run_id)
        return HTMLResponse(store.load_html(run_id), headers=SECURITY_HEADERS)

    return app


class KmigrateReportsPlugin(AirflowPlugin):
    name = "kmigrate_reports"
    fastapi_apps = [
        {
            "app": reports_app(),
            "url_prefix": URL_PREFIX,
            "name": "kmigrate reports",
        },
    ]
    external_views = [
        {
            "name": "Migration report",
            "href": URL_PREFIX + "/dag-runs/{DAG_ID}/{RUN_ID}",
            "destination": "dag_run",
            "url_route": "kmigrate-report",
            "category": "kmigrate",
        },
        {
            "name": "Migration reports",
            "href": URL_PREFIX + "/",
            "destination": "nav",
            "url_route": "kmigrate-reports",
            "category": "browse",
        },
    ]
