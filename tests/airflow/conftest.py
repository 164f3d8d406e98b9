"""Airflow for tests: the project's airflow.cfg, a migrated SQLite database, and helpers
that run the real ``airflow`` CLI (``dags test``, ``api-server``) as subprocesses."""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def airflow_base_env(tmp_path_factory) -> dict[str, str]:
    """The environment of the real ``airflow`` CLI: the project's airflow.cfg, and an Airflow
    home of this test process's own holding a copy of the project's migrated database
    (``.airflow``, migrated once by ``make test``), so that pytest-xdist workers run DAGs side
    by side without sharing a SQLite file."""
    env = dict(os.environ)
    env.update({
        "AIRFLOW_CONFIG": str(ROOT / "airflow.cfg"),
        "KMIGRATE_PROJECT_ROOT": str(ROOT),
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    })
    shared = ROOT / ".airflow"
    shared.mkdir(exist_ok=True)
    with open(shared / ".migrate.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # workers started by hand on a fresh checkout: one migrates
        if not (shared / ".migrated").exists():
            subprocess.run([str(BIN / "airflow"), "db", "migrate"], env={**env, "AIRFLOW_HOME": str(shared)},
                           check=True, capture_output=True, timeout=600)
            (shared / ".migrated").touch()
        home = tmp_path_factory.mktemp("airflow-home")
        _copy_database(shared / "airflow.db", home / "airflow.db")
    env["AIRFLOW_HOME"] = str(home)
    return env


def _copy_database(src: Path, dst: Path) -> None:
    """``sqlite3``'s online backup: a consistent copy even while another process writes ``src``."""
    source = sqlite3.connect(src)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


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
    """An Airflow home of the test's own holding a copy of the migrated database, for a test
    that runs a scheduler, so it neither runs nor changes the other tests' DAG runs."""
    home = tmp_path / "airflow-home"
    home.mkdir()
    _copy_database(Path(airflow_base_env["AIRFLOW_HOME"]) / "airflow.db", home / "airflow.db")
    return home
