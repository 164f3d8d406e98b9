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


class AwsConnection(BaseModel):
    """An Airflow ``aws`` connection as the amazon provider resolves it (its
    ``AwsConnectionWrapper`` and the session its ``AwsBaseHook`` builds): the key pair, a shared
    config profile, a role to assume (assumed here: the keys are then the role's temporary
    ones), the service's endpoint (``service_config`` or the global ``endpoint_url``), the
    region, ``verify`` and the botocore config's addressing style. The secrets stay secret."""

    conn_id: str
    endpoint_url: str | None = None
    region: str | None = None
    addressing_style: str | None = None
    verify: bool | str | None = None
    profile: str | None = None
    role_arn: str | None = None
    access_key_id: SecretStr | None = Field(default=None, exclude=True, repr=False)
    secret_access_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    session_token: SecretStr | None = Field(default=None, exclude=True, repr=False)


def aws_connection(conn_id: str, service: str = "s3") -> AwsConnection:
    """Airflow's ``aws`` connection ``conn_id`` for ``service``, resolved by the amazon
    provider, never parsed here: what the provider supports (keys, ``profile_name``,
    ``role_arn`` with ``assume_role_method``/``assume_role_kwargs``, ``service_config``
    endpoints, ``verify``, ``config_kwargs``), kmigrate supports."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    if find_connection(conn_id) is None:  # the provider would fall back to the default chain, silently
        raise LookupError(f"Airflow has no connection {conn_id!r} (docs/operations.md, \"Connections\", says how "
                          "to create it)")
    hook = AwsBaseHook(aws_conn_id=conn_id, client_type=service)
    wrapper = hook.conn_config
    session = hook.get_session(region_name=wrapper.region_name)
    credentials = session.get_credentials()
    frozen = credentials.get_frozen_credentials() if credentials is not None else None
    s3_config = (wrapper.botocore_config.s3 or {}) if wrapper.botocore_config is not None else {}

    def secret(value: str | None) -> SecretStr | None:
        return SecretStr(value) if value else None

    return AwsConnection(
        conn_id=conn_id, endpoint_url=wrapper.get_service_endpoint_url(service), region=session.region_name,
        addressing_style=s3_config.get("addressing_style"), verify=wrapper.verify, profile=wrapper.profile_name,
        role_arn=wrapper.role_arn,
        access_key_id=secret(frozen.access_key if frozen else None),
        secret_access_key=secret(frozen.secret_key if frozen else None),
        session_token=secret(frozen.token if frozen else None))


def connection_env(conn_id: str) -> dict[str, str]:
    """``AIRFLOW_CONN_<ID>`` holding the connection ``conn_id`` as the running task sees it, for
    a process that runs outside the task's context and so cannot read Airflow's connections
    itself: spark-submit, its driver and its executors (the tiered job resolves its ``aws``
    connection there). It goes into that process's environment only, never into a file."""
    from airflow.sdk import BaseHook

    return {f"AIRFLOW_CONN_{conn_id.upper()}": BaseHook.get_connection(conn_id).as_json()}


def skip_task(reason: str) -> NoReturn:
    """End the running Airflow task as *skipped* with ``reason`` (shown in its log and state)."""
    from airflow.sdk.exceptions import AirflowSkipException

    raise AirflowSkipException(reason)


def triggerer_queues_enabled() -> bool:
    """Whether deferred tasks hand their queue to their trigger (``[triggerer] queues_enabled``),
    so that a triggerer started for that queue alone runs it; False outside Airflow."""
    try:
        from airflow.configuration import conf
    except ImportError:
        return False
    return conf.getboolean("triggerer", "queues_enabled", fallback=False)
