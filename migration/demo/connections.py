"""The Airflow connections of the demo, written as a user writes them: ``airflow connections
add`` into the Airflow database of ``AIRFLOW_HOME`` (delete first, so a re-run replaces them),
so that an ``airflow dags test`` the demo prints replays by hand as printed. Secrets go on the
command line of the ``airflow`` process only: never printed, never logged (its output is
captured and only its last line shown on a failure, with the secret masked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

S3_CONN_ID = "kmigrate_s3"
# local Spark, two cores: the demo's master (a real deployment names its own, docs/operations.md)
DEMO_SPARK = {"conn_type": "spark", "host": "local[2]"}


class ConnectionSetupError(RuntimeError):
    """``airflow connections add`` failed: the message names the connection, never a secret."""


def s3_connection(endpoint: str, access_key: str, secret_key: str) -> dict[str, Any]:
    """The ``aws`` connection of an S3-compatible server (docs/operations.md, "Connections")."""
    return {"conn_type": "aws", "login": access_key, "password": secret_key,
            "extra": {"endpoint_url": endpoint, "region_name": "us-east-1",
                      "config_kwargs": {"s3": {"addressing_style": "path"}}}}


def describe(conn_id: str, spec: dict[str, Any]) -> str:
    """One line about a connection, without its secrets."""
    if spec.get("conn_type") == "aws":
        return f"{conn_id} (aws, endpoint {spec.get('extra', {}).get('endpoint_url')}, the demo's fake key pair)"
    return f"{conn_id} ({spec.get('conn_type')}, {spec.get('host')})"


def write_connections(env: dict[str, str], conns: dict[str, dict[str, Any]], *, missing_only: bool = False,
                      timeout: float = 300) -> list[str]:
    """Write each connection into the Airflow database ``env`` names (``AIRFLOW_HOME`` and
    ``AIRFLOW_CONFIG``): ``airflow connections delete`` (a missing one is fine), then ``add``;
    with ``missing_only``, only those ``airflow connections get`` does not find (one the user
    set is kept). Returns the ids written."""
    airflow = str(Path(sys.executable).parent / "airflow")
    written = []
    for conn_id, spec in conns.items():
        if missing_only:
            found = subprocess.run([airflow, "connections", "get", conn_id, "-o", "json"], env=env,
                                   capture_output=True, timeout=timeout)
            if found.returncode == 0:
                continue
        else:
            subprocess.run([airflow, "connections", "delete", conn_id], env=env, capture_output=True, timeout=timeout)
        done = subprocess.run([airflow, "connections", "add", conn_id, "--conn-json", json.dumps(spec)], env=env,
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            secret = spec.get("password")
            line = last[0].replace(secret, "***") if secret else last[0]
            raise ConnectionSetupError(f"airflow connections add {conn_id} failed (exit {done.returncode}): {line}")
        written.append(conn_id)
    return written
