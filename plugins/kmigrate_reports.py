"""Airflow 3 plugin: the kmigrate run report of each DAG run, as a tab of the DAG run page.

Wiring and Airflow's access check only; the app lives in ``migration.audit.web``. The FastAPI
app is mounted by the API server under ``URL_PREFIX``; the external view adds a "Migration
report" tab to every DAG run, whose iframe loads ``/kmigrate-reports/dag-runs/<dag id>/<run id>``
(Airflow's UI substitutes ``{DAG_ID}`` and ``{RUN_ID}``, URL-encoded).

Airflow does not authenticate plugin apps (a mounted app inherits none of the core API's
dependencies), so every route here requires what the core API requires to read DAG runs:
a user from the ``Authorization: Bearer`` token or the UI's ``_token`` cookie (which the tab's
iframe sends), whom the auth manager allows to read the runs of the DAG named in the path, or
of DAGs in general for the report list and reports looked up by run id. The DAG checked comes
from the path alone: Airflow's ``requires_access_dag`` would also take ``?dag_id=`` from the
query string, which would let a reader of one DAG list every report.
"""

from __future__ import annotations

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.core_api.security import GetUserDep
from airflow.models.dag import DagModel
from airflow.plugins_manager import AirflowPlugin
from fastapi import HTTPException, Request, status

from migration.audit.web import create_app

URL_PREFIX = "/kmigrate-reports"


def may_read_dag_runs(request: Request, user: GetUserDep) -> None:
    """403 unless ``user`` may read the runs of the path's DAG (of every DAG without one)."""
    dag_id = request.path_params.get("dag_id")
    details = DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id)) if dag_id else None
    if not get_auth_manager().is_authorized_dag(method="GET", access_entity=DagAccessEntity.RUN, details=details,
                                                user=user):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "Forbidden")


class KmigrateReportsPlugin(AirflowPlugin):
    name = "kmigrate_reports"
    fastapi_apps = [
        {
            "app": create_app(dependencies=[may_read_dag_runs]),
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
