"""Airflow 3 plugin: the kmigrate run report of each DAG run, as a tab of the DAG run page.

Wiring only; the app lives in ``migration.audit.web``. The FastAPI app is mounted by the API
server under ``URL_PREFIX``; the external view adds a "Migration report" tab to every DAG run,
whose iframe loads ``/kmigrate-reports/dag-runs/<dag id>/<run id>`` (Airflow's UI substitutes
``{DAG_ID}`` and ``{RUN_ID}``, URL-encoded).

Airflow does not authenticate plugin apps (a mounted app inherits none of the core API's
dependencies), so every route here requires what the core API requires to read DAG runs:
a user from the ``Authorization: Bearer`` token or the UI's ``_token`` cookie (which the tab's
iframe sends), allowed by the auth manager to read the runs of the DAG named in the path (of
DAGs in general for the report list and reports looked up by run id).
"""

from __future__ import annotations

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import requires_access_dag
from airflow.plugins_manager import AirflowPlugin

from migration.audit.web import create_app

URL_PREFIX = "/kmigrate-reports"


class KmigrateReportsPlugin(AirflowPlugin):
    name = "kmigrate_reports"
    fastapi_apps = [
        {
            "app": create_app(dependencies=[requires_access_dag("GET", DagAccessEntity.RUN)]),
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
