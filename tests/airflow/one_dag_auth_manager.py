"""An auth manager for the report plugin's test: Airflow's simple auth manager, except that
the user ``reader`` may read one DAG only, a per-DAG policy as FAB or Keycloak deployments
have. Loaded by a real ``airflow api-server`` through ``[core] auth_manager``."""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

RESTRICTED_USER = "reader"
ALLOWED_DAG = "message_format_upgrade"


class OneDagAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        if user.get_name() == RESTRICTED_USER and (details is None or details.id != ALLOWED_DAG):
            return False
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
