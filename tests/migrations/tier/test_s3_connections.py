"""The S3 settings of a DAG's ``aws`` connection come from Airflow's amazon provider (through
``runtime/airflow_adapter.aws_connection``): every form the provider resolves works, against a
real S3 API (moto's server on loopback; its STS answers the assumed role), and no secret reaches
a dump of the settings."""

from __future__ import annotations

import json

import pytest

from migration.migrations.tier.s3 import S3ObjectStore, resolve_settings, s3_settings_from_airflow_connection

from .conftest import BUCKET, FAKE_ACCESS_KEY, FAKE_SECRET_KEY

ROLE = "arn:aws:iam::123456789012:role/kmigrate-stager"


def _connection(monkeypatch, **conn) -> None:  # noqa: ANN001
    monkeypatch.setenv("AIRFLOW_CONN_KMIGRATE_S3", json.dumps({"conn_type": "aws", **conn}))


def _round_trip(settings) -> None:  # noqa: ANN001
    store = S3ObjectStore(settings, BUCKET)
    store.put_bytes("conn-check/k", b"staged through the provider's settings")
    assert store.get_bytes("conn-check/k") == b"staged through the provider's settings"


def test_a_key_pair_with_an_s3_endpoint_of_its_own(s3, monkeypatch) -> None:
    _connection(monkeypatch, login="AKIAFROMAIRFLOWCONN", password=FAKE_SECRET_KEY, extra={
        "region_name": "eu-west-1", "verify": False,
        "service_config": {"s3": {"endpoint_url": s3.endpoint}}})
    st = s3_settings_from_airflow_connection("kmigrate_s3")
    assert (st.endpoint_url, st.region, st.verify, st.path_style) == (s3.endpoint, "eu-west-1", False, True)
    assert st.access_key_id is not None and st.access_key_id.get_secret_value() == "AKIAFROMAIRFLOWCONN"
    assert FAKE_SECRET_KEY not in st.model_dump_json() + repr(st)
    _round_trip(st)


def test_a_shared_config_profile(s3, monkeypatch, tmp_path) -> None:
    creds = tmp_path / "aws-credentials"
    creds.write_text("[staging]\naws_access_key_id = AKIAFROMPROFILE\n"
                     f"aws_secret_access_key = {FAKE_SECRET_KEY}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    _connection(monkeypatch, extra={"profile_name": "staging", "endpoint_url": s3.endpoint})
    st = s3_settings_from_airflow_connection("kmigrate_s3")
    assert st.access_key_id is not None and st.access_key_id.get_secret_value() == "AKIAFROMPROFILE"
    _round_trip(st)


def test_an_assumed_role_uses_the_roles_temporary_keys(s3, monkeypatch) -> None:
    """Before, ``role_arn`` was ignored and the default chain's keys were used, silently."""
    _connection(monkeypatch, login=FAKE_ACCESS_KEY, password=FAKE_SECRET_KEY, extra={
        "role_arn": ROLE, "assume_role_kwargs": {"RoleSessionName": "kmigrate"},
        "service_config": {"sts": {"endpoint_url": s3.endpoint}, "s3": {"endpoint_url": s3.endpoint}}})
    st = s3_settings_from_airflow_connection("kmigrate_s3")
    assert st.access_key_id is not None and st.session_token is not None
    key = st.access_key_id.get_secret_value()
    assert key != FAKE_ACCESS_KEY and key.startswith("ASIA"), key  # STS's temporary keys
    dumped = st.model_dump_json() + repr(st)
    assert FAKE_SECRET_KEY not in dumped and key not in dumped and st.session_token.get_secret_value() not in dumped
    _round_trip(st)
    # an executor gets the connection's id only and resolves it again (assuming the role itself)
    again = resolve_settings(type(st).model_validate_json(st.model_dump_json()))
    assert again.access_key_id is not None and again.access_key_id.get_secret_value().startswith("ASIA")


def test_an_unknown_connection_names_itself(monkeypatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_KMIGRATE_MISSING", raising=False)
    with pytest.raises(LookupError, match="no connection 'kmigrate_missing'"):
        s3_settings_from_airflow_connection("kmigrate_missing")


def test_the_connection_handed_to_a_spark_job_resolves_the_same(s3, monkeypatch) -> None:
    """A Spark job's processes run outside the task's context and cannot read Airflow's
    database: the operator hands them the task's view of the connection in their environment
    (``airflow_adapter.connection_env``), which must resolve to the same settings."""
    from migration.runtime.airflow_adapter import connection_env

    _connection(monkeypatch, login="AKIAHANDEDTOSPARK", password=FAKE_SECRET_KEY, extra={
        "region_name": "eu-west-1", "service_config": {"s3": {"endpoint_url": s3.endpoint}}})
    handed = connection_env("kmigrate_s3")
    assert list(handed) == ["AIRFLOW_CONN_KMIGRATE_S3"]
    monkeypatch.delenv("AIRFLOW_CONN_KMIGRATE_S3")
    monkeypatch.setenv("AIRFLOW_CONN_KMIGRATE_S3", handed["AIRFLOW_CONN_KMIGRATE_S3"])
    st = s3_settings_from_airflow_connection("kmigrate_s3")
    assert (st.endpoint_url, st.region) == (s3.endpoint, "eu-west-1")
    assert st.access_key_id is not None and st.access_key_id.get_secret_value() == "AKIAHANDEDTOSPARK"
    _round_trip(st)
