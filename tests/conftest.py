"""Fixtures shared by the whole suite.

- ``spark``: one local Spark session for every test that needs one (a JVM starts in ~5 s).
- ``sample_cluster_template`` builds the sample legacy cluster once; ``sample_cluster``
  gives each test its own copy (tests rewrite files in place).
- ``record_core``: runs a test once per record core this installation has (compiled and pure
  Python, docs/architecture.md); a module opts in with
  ``pytestmark = pytest.mark.usefixtures("record_core")``.

``make test`` runs the suite on two pytest-xdist workers: every test is self-contained (its own
temporary directory, free ports, its own servers; each worker its own Spark session and its own
copy of the Airflow database, tests/airflow/conftest.py).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

import pytest

from migration.formats import core as record_cores

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("KMIGRATE_PROJECT_ROOT", str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# py4j logs from finalizers at interpreter exit, after pytest closed the streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(params=record_cores.available())
def record_core(request, monkeypatch):
    """The test runs on this record core; child processes (Spark, workers) follow it through
    the environment."""
    monkeypatch.setenv(record_cores.PURE_PYTHON_ENV, "1" if request.param == record_cores.PYTHON else "0")
    with record_cores.use(request.param):
        yield request.param


@pytest.fixture(scope="session")
def spark():
    from migration.runtime.engine import spark_session

    session = spark_session("local[2]", app_name="kmigrate-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def sample_cluster_template(tmp_path_factory):
    from migration.demo.sample_cluster import build_sample_cluster

    root = tmp_path_factory.mktemp("sample-template") / "cluster"
    return build_sample_cluster(root)


@pytest.fixture
def sample_cluster(sample_cluster_template, tmp_path):
    """A private copy of the sample cluster (mtimes preserved), with paths rewritten."""
    from migration.demo.sample_cluster import SampleCluster
    from migration.orchestration.cluster import ClusterDescription

    src = sample_cluster_template.root
    dst = tmp_path / "cluster"
    shutil.copytree(src, dst, copy_function=shutil.copy2)

    def moved(p: Path) -> Path:
        return dst / Path(p).relative_to(src)

    desc = ClusterDescription.model_validate_json(
        (dst / "cluster.json").read_text().replace(str(src), str(dst))
    )
    desc.dump(dst / "cluster.json")
    t = sample_cluster_template
    return SampleCluster(
        root=dst,
        description_path=dst / "cluster.json",
        description=desc,
        broker_log_dirs={b: moved(p) for b, p in t.broker_log_dirs.items()},
        controller_dir=moved(t.controller_dir),
        topic_ids=dict(t.topic_ids),
        records=dict(t.records),
    )


@pytest.fixture(scope="session")
def strace_installed() -> None:
    """The power-loss tests record runs with strace, which ``make test`` installs (``make
    system-tools``): without it they fail with the command, never skip."""
    from support.powerloss import STRACE

    assert os.access(STRACE, os.X_OK), f"{STRACE} is missing: run 'make system-tools' (apt-get install strace)"
