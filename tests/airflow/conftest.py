"""Airflow for tests: the project's airflow.cfg, a migrated SQLite database, and helpers
that run the real ``airflow`` CLI (``dags test``, ``api-server``) as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def airflow_base_env(tmp_path_factory) -> dict[str, str]:
    home = ROOT / ".airflow"
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW_CONFIG": str(ROOT / "airflow.cfg"),
        "KMIGRATE_PROJECT_ROOT": str(ROOT),
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    })
    if not (home / ".migrated").exists():
        home.mkdir(exist_ok=True)
        subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True,
                       timeout=600)
        (home / ".migrated").touch()
    return env


@pytest.fixture(scope="session")
def dags_test():
    return _dags_test


@pytest.fixture(scope="session")
def airflow_bin() -> Path:
    return BIN


def _dags_test(env: dict[str, str], dag_id: str, conf: dict, log: Path) -> tuple[int, str]:
    """Run ``airflow dags test``; return (exit code, final DAG run state)."""
    with open(log, "w") as f:
        rc = subprocess.call([str(BIN / "airflow"), "dags", "test", dag_id, "-c", json.dumps(conf)], env=env,
                             stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, timeout=900)
    state = "unknown"
    for line in log.read_text().splitlines():
        if "DagRun Finished" in line and " state=" in line:
            state = line.split(" state=")[1].split(",")[0]
    return rc, state


@pytest.fixture
def private_airflow_home(airflow_base_env, tmp_path) -> Path:
    """An Airflow home of the test's own holding a copy of the migrated database (``sqlite3``'s
    online backup: consistent while other tests write the original), for a test that runs a
    scheduler, so it neither runs nor changes the shared home's DAG runs."""
    import sqlite3

    home = tmp_path / "airflow-home"
    home.mkdir()
    src = sqlite3.connect(ROOT / ".airflow" / "airflow.db")
    dst = sqlite3.connect(home / "airflow.db")
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return home
