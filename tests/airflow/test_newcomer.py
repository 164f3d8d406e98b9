"""A newcomer replays what ``make demo`` prints, in a terminal that has only what the demo says
to set: every ``$ ...`` line must work as printed.

What is covered, honestly: the demo's own printing code (``migration.demo.run``: the environment
line, the connection it writes into Airflow's database with ``airflow connections add``, the
``airflow dags test`` lines of step 3 (message_format_upgrade) and step 4
(zero_checkpoint_unification) with the demo's own params, and the closing hints: ``kmigrate
report --list`` and the api-server command) on the sample cluster, with a fresh kmigrate home and
an Airflow database without connections. The demo's own DAG runs are stubbed (a full demo is
minutes too slow for the suite): the replay runs each printed command for real, once, from that
fresh home, in a shell whose environment is HOME, a system PATH and the printed ``export`` line,
and requires each to succeed; the api-server is started as printed, except on a free port
instead of 8080, and must serve the replayed DAG run's report. Not replayed: step 5's
tiered_storage_readiness lines, which need the demo's S3 server (the demo says so when it prints
them; tests/airflow/test_tiered_dag.py runs that DAG)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import socket
import subprocess
import time
import types
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from rich.console import Console

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _printed_commands(monkeypatch, cluster: Path, home: Path) -> tuple[list[str], str]:
    """Drive the demo's printing code (steps 3, 4 and the closing hints) with its DAG runs stubbed."""
    from migration.demo import run

    out = io.StringIO()
    monkeypatch.setattr(run, "console", Console(file=out, width=100, force_terminal=False))

    def no_dag_run(cmd, **kwargs):  # the replay runs the DAGs (and starts and stops the stand-ins)
        return 0

    monkeypatch.setattr(run, "subprocess", types.SimpleNamespace(call=no_dag_run, run=no_dag_run,
                                                                 STDOUT=subprocess.STDOUT))
    env = run.airflow_env(cluster)
    run.set_connections(env, {run.SPARK_CONN_ID: run.DEMO_SPARK})
    run.console.print("Every command printed as `$ ...` replays in a terminal at the checkout, with:")
    run.say(run.replay_env(env))
    logs = home.parent / "demo-logs"
    logs.mkdir()
    running = run.run_brokers(cluster)
    run.dags_test("message_format_upgrade", run.upgrade_conf(cluster), env, log=logs / "upgrade.log")
    run.stop_brokers(running)
    run.dags_test("zero_checkpoint_unification", run.unify_conf(cluster), env, log=logs / "unify.log")
    run.closing_hints(home, env)
    text = out.getvalue()
    return [line[2:] for line in text.splitlines() if line.startswith("$ ")], text


@pytest.mark.slow
def test_a_newcomer_replays_every_command_the_demo_prints(airflow_base_env, private_airflow_home, sample_cluster,
                                                          tmp_path, monkeypatch):
    import sqlite3

    with sqlite3.connect(private_airflow_home / "airflow.db") as db:
        db.execute("DELETE FROM connection")  # a fresh Airflow: nobody created spark_default
    home = tmp_path / "fresh-home"
    for name in ("KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_SESSIONS_URL",
                 "AIRFLOW_CONN_SPARK_DEFAULT", "AIRFLOW_CONN_KMIGRATE_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KMIGRATE_HOME", str(home))
    monkeypatch.setenv("AIRFLOW_HOME", str(private_airflow_home))
    monkeypatch.setenv("AIRFLOW_CONFIG", str(ROOT / "airflow.cfg"))
    commands, text = _printed_commands(monkeypatch, sample_cluster.description_path, home)

    exports, *rest = commands
    assert exports.startswith("export ") and "AIRFLOW_HOME=" in exports and "AIRFLOW_CONFIG=" in exports, text
    assert "AIRFLOW_CONN_" not in text and "demo-secret" not in text
    assert "[kmigrate] home" in text, text  # not eaten as Rich markup
    dag_lines = [c for c in rest if c.startswith("airflow dags test ")]
    assert [c.split()[3] for c in dag_lines] == ["message_format_upgrade", "zero_checkpoint_unification"], text
    server = [c for c in rest if "airflow api-server" in c]
    assert len(server) == 1 and "AIRFLOW_HOME=" in server[0] and "AIRFLOW_CONFIG=" in server[0], text
    assert any(c.startswith("kmigrate --home ") and c.endswith(" report --list") for c in rest), text

    # the stand-in brokers: started before the upgrade's DAG run, stopped after it
    stand_ins = [c for c in rest if "migration.demo.live_broker" in c]
    brokers = len(sample_cluster.broker_log_dirs)
    assert [c.split()[3] for c in stand_ins] == ["start"] * brokers + ["stop"] * brokers, text
    assert rest.index(stand_ins[brokers - 1]) < rest.index(dag_lines[0]) < rest.index(stand_ins[brokers]), text

    shell_env = {"HOME": str(tmp_path), "PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}
    try:
        for i, command in enumerate(rest):
            if command in server:
                continue
            log = tmp_path / f"replay-{i}.log"
            with open(log, "w") as f:
                rc = subprocess.call(["bash", "-c", f"{exports}\n{command}"], env=shell_env, cwd=ROOT, stdout=f,
                                     stderr=subprocess.STDOUT, timeout=900)
            output = log.read_text()
            assert rc == 0, f"$ {command}\n{output[-5000:]}"
            if command.startswith("airflow dags test "):
                assert re.search(r"DagRun Finished: .* state=success", output), f"$ {command}\n{output[-5000:]}"
    finally:
        for command in stand_ins[brokers:]:  # no stand-in outlives the test, whatever failed
            subprocess.call(["bash", "-c", command], env=shell_env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, timeout=120)
    listing = (tmp_path / f"replay-{rest.index(next(c for c in rest if 'report --list' in c))}.log").read_text()
    dag_runs = listing.split("DAG runs (their merged reports):", 1)[-1].split("runs (DAG steps and commands):", 1)[0]
    # the DAG run's own report, listed with the DAG runs: started, run id, kind, status, exit
    assert re.search(r"^  \S+ \S+  manual__\S+ +upgrade +ok +0$", dag_runs, re.M), listing

    # The api-server as printed, on its own (on a free port: 8080 may be taken on a shared machine).
    port = _free_port()
    command = server[0].replace("--port 8080", f"--port {port}")
    with open(tmp_path / "api-server.log", "w") as f:
        proc = subprocess.Popen(["bash", "-c", command], env=shell_env, cwd=ROOT,
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    origin = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                if _get(origin + "/api/v2/monitor/health")[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "api-server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "api-server.log").read_text()[-3000:]
            time.sleep(1)
        status, body = _get(origin + "/auth/token")
        assert status == 201, body
        token = json.loads(body)["access_token"]
        status, body = _get(origin + "/kmigrate-reports/runs.json", token)
        assert status == 200, body
        runs = json.loads(body)
        dags = {r.get("dag_id") for r in runs}
        assert {"message_format_upgrade", "zero_checkpoint_unification"} <= dags, runs
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
