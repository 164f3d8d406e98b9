"""The upgrade job runs unchanged on a Spark standalone cluster: a master and a worker on
loopback (spark-class from the pyspark package), the job submitted to spark://127.0.0.1:PORT."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest

from migration.logdir.validation import validate_paths
from migration.migrations.upgrade.driver import UpgradeOptions, finalize_upgrade, prepare_upgrade
from migration.orchestration.common import RUN_UNITS_APP

SPARK_HOME = Path(pyspark.__file__).parent


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path: Path, text: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        assert proc.poll() is None, path.read_text(errors="replace")[-3000:]
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not seen in {path}: {path.read_text(errors='replace')[-3000:]}")


@pytest.fixture
def standalone(tmp_path):
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_WORKER_DIR": str(tmp_path / "work"),
           "SPARK_LOCAL_DIRS": str(tmp_path / "local")}
    port = _port()
    master_url = f"spark://127.0.0.1:{port}"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    logs = []
    procs = []
    try:
        mlog = tmp_path / "master.log"
        logs.append(mlog)
        with open(mlog, "w") as f:
            master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                       "--port", str(port), "--webui-port", str(_port())], env=env, stdout=f,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(master)
        _wait_for(mlog, "I have been elected leader", master)
        wlog = tmp_path / "worker.log"
        with open(wlog, "w") as f:
            worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                       "--cores", "2", "--memory", "1g", "--webui-port", str(_port()), master_url],
                                      env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(worker)
        _wait_for(mlog, "Registering worker", master)
        yield master_url, env
    finally:
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 15)
            p.wait(timeout=30)


def test_upgrade_job_on_a_standalone_cluster(standalone, sample_cluster, tmp_path, monkeypatch):
    master_url, env = standalone
    monkeypatch.setenv("KMIGRATE_OUT", str(tmp_path / "out"))
    log_dir = str(sample_cluster.broker_log_dirs[2])
    rd = prepare_upgrade([log_dir], run_id="standalone-1", options=UpgradeOptions(target="v2"),
                         broker_id=2).run_dir
    out = subprocess.run(
        [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master_url,
         "--conf", f"spark.pyspark.python={sys.executable}", "--conf", "spark.speculation=false",
         RUN_UNITS_APP, "--job", str(rd.job_path), "--results", str(rd.results_path)],
        env={**env, "KMIGRATE_OUT": str(tmp_path / "out")}, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    master_log = (tmp_path / "master.log").read_text(errors="replace")
    assert "Registering app" in master_log  # the master, not a local master, ran the job
    report = finalize_upgrade("standalone-1")
    assert report.exit_code() == 0, [str(e) for u in report.iter_results() for e in u.errors]
    t = report.totals
    assert t.units_ok > 0 and t.records_before == t.records_after and t.digest_mismatches == 0
    assert validate_paths([log_dir]).ok
