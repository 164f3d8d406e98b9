"""The one module of the package that imports Airflow: what the runtime reads from an Airflow
deployment (connections), as plain typed values, and how a step tells Airflow it was skipped.
Imported lazily by its callers, so the CLI, the Spark executors outside Airflow and the tests
need no Airflow installation to run."""

from __future__ import annotations

from typing import Any, NoReturn

from pydantic import BaseModel, Field, SecretStr


class ConnectionInfo(BaseModel):
    """An Airflow connection, as much of it as kmigrate reads; the password stays secret."""

    conn_id: str
    conn_type: str | None = None
    host: str | None = None
    port: int | None = None
    login: str | None = None
    password: SecretStr | None = Field(default=None, exclude=True, repr=False)
    extra: dict[str, Any] = Field(default_factory=dict, exclude=True, repr=False)


def get_connection(conn_id: str) -> ConnectionInfo:
    """Airflow's connection ``conn_id`` (from its secrets backends, environment or database)."""
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(conn_id)
    return ConnectionInfo(conn_id=conn_id, conn_type=conn.conn_type or None, host=conn.host or None,
                          port=conn.port or None, login=conn.login or None,
                          password=SecretStr(conn.password) if conn.password else None,
                          extra=conn.extra_dejson or {})


def find_connection(conn_id: str) -> ConnectionInfo | None:
    """:func:`get_connection`, or None when Airflow has no connection ``conn_id`` anywhere."""
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return get_connection(conn_id)
    except AirflowNotFoundException:
        return None


def skip_task(reason: str) -> NoReturn:
    """End the running Airflow task as *skipped* with ``reason`` (shown in its log and state)."""
    from airflow.sdk.exceptions import AirflowSkipException

    raise AirflowSkipException(reason)
