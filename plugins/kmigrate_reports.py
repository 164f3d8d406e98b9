"""Airflow 3 plugin: the kmigrate run report of each DAG run, as a tab of the DAG run page.

Wiring only; the app lives in ``migration.audit.web``. The FastAPI app is mounted by the API
server under ``URL_PREFIX``; the external view adds a "Migration report" tab to every DAG run,
whose iframe loads ``/kmigrate-reports/dag-runs/<dag id>/<run id>`` (Airflow's UI substitutes
``{DAG_ID}`` and ``{RUN_ID}``, URL-encoded). Airflow does not guard plugin endpoints with its login.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from migration.audit.web import create_app

URL_PREFIX = "/kmigrate-reports"


class KmigrateReportsPlugin(AirflowPlugin):
    name = "kmigrate_reports"
    fastapi_apps = [
        {"app": create_app(), "url_prefix": URL_PREFIX, "name": "kmigrate reports"},
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
