"""The runbook's canary-only run, exactly as documented (docs/operations.md, "A canary-only run":
the REST example's lines, run by bash with curl and jq), against ``make ui``: the DAG run upgrades
(here: plans, the documented conf being a dry run) broker 2 alone and waits for an operator at
the approval step, in Airflow's Required Actions; the triggerer ``make ui`` starts is healthy."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

ROOT = Path(__file__).resolve().parents[2]
DAG = "message_format_upgrade"
STATE_ENV = ("KMIGRATE_HOME", "KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_SESSIONS_URL")


def documented_rest_example() -> str:
    text = (ROOT / "docs" / "operations.md").read_text()
    block = text.split("<!-- canary-rest-example -->", 1)[1]
    return block.split("```\n", 1)[1].split("```", 1)[0]


def _get(url: str, token: str) -> tuple[int, dict]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {}


def test_documented_rest_example_is_the_tested_one():
    example = documented_rest_example()
    assert "/api/v2/dags/message_format_upgrade/dagRuns" in example
    assert '"conf": {"canary_broker": 2, "brokers": [2], "approval": "human"}' in example
    doc = (ROOT / "docs" / "operations.md").read_text()
    cli = ("""airflow dags trigger -c '{"canary_broker": 2, "brokers": [2], "approval": "human"}' """
           "message_format_upgrade")
    assert cli in doc and cli in (ROOT / "README.md").read_text()


@pytest.mark.slow
def test_canary_only_run_through_the_rest_api_waits_for_approval(airflow_base_env, private_airflow_home,
                                                                   sample_cluster, tmp_path):
    home = tmp_path / "kmigrate-home"
    desc = json.loads(sample_cluster.description_path.read_text())
    for node in desc["nodes"]:
        node["queue"] = f"kafka-host-{node['id']}"  # one worker per broker host (LocalExecutor: any runs it)
    sample_cluster.description_path.write_text(json.dumps(desc))
    env = {k: v for k, v in airflow_base_env.items() if k not in STATE_ENV}
    env.update({"AIRFLOW_HOME": str(private_airflow_home), "KMIGRATE_CLUSTER": str(sample_cluster.description_path)})
    out = tmp_path / "ui.out"
    with open(out, "wb") as f:
        launcher = subprocess.Popen([sys.executable, "-m", "migration.demo.ui", "--port", "0", "--home", str(home),
                                     "--stop-timeout", "15"], env=env, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def until(what, check, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = check()
            except OSError:
                value = None
            if value:
                return value
            assert launcher.poll() is None, f"make ui exited before {what}:\n{out.read_text()[-3000:]}"
            time.sleep(1)
        raise AssertionError(f"no {what} within {timeout}s:\n{out.read_text()[-3000:]}")

    try:
        origin = until("URL", lambda: re.search(r"Airflow UI: (http://127\.0\.0\.1:\d+)/", out.read_text()),
                       180).group(1)
        with urllib.request.urlopen(origin + "/auth/token", timeout=10) as r:
            token = json.loads(r.read())["access_token"]
        until("the DAG parsed", lambda: _get(f"{origin}/api/v2/dags/{DAG}", token)[0] == 200, 120)
        # The triggerer make ui starts: healthy on the home page's health check.
        until("a healthy triggerer", lambda: _get(origin + "/api/v2/monitor/health", token)[1]
              .get("triggerer", {}).get("status") == "healthy", 120)

        script = documented_rest_example().replace("ORIGIN=http://127.0.0.1:8080", f"ORIGIN={origin}")
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)})
        assert done.returncode == 0, done.stderr + done.stdout
        dag_run_id = json.loads(done.stdout)["dag_run_id"]
        run = quote(dag_run_id, safe="")

        def approval_waits():
            status, ti = _get(f"{origin}/api/v2/dags/{DAG}/dagRuns/{run}/taskInstances/approve_human", token)
            assert ti.get("state") not in ("failed", "upstream_failed", "skipped"), ti
            return status == 200 and ti.get("state") in ("awaiting_input", "deferred")  # Airflow 3.3: awaiting_input

        until("the approval wait", approval_waits, 480)
        status, tis = _get(f"{origin}/api/v2/dags/{DAG}/dagRuns/{run}/taskInstances", token)
        states = {t["task_id"]: t["state"] for t in tis["task_instances"]}
        assert states["canary.upgrade"] == states["canary.verify"] == "success", states
        # The scheduler queued broker 2's tasks on its host's queue (the cluster policy), the rest
        # on the default queue.
        queues = {(t["task_id"], t["map_index"]): t["queue"] for t in tis["task_instances"]}
        for key in (("preflight.validate", 0), ("prestage", 0), ("canary.stop", 0), ("canary.upgrade", 0),
                    ("canary.verify", 0), ("canary.start", 0)):
            assert queues.get(key) == "kafka-host-2", (key, queues)
        assert queues[("plan", -1)] == queues[("approve_human", -1)] == "default", queues
        status, body = _get(f"{origin}/api/v2/dags/{DAG}/dagRuns/{run}", token)
        assert body["state"] == "running" and body["conf"] == {"canary_broker": 2, "brokers": [2],
                                                               "approval": "human"}, body
        # Required Actions: the approval is waiting for an operator.
        status, body = _get(f"{origin}/api/v2/dags/{DAG}/dagRuns/{run}/hitlDetails", token)
        assert status == 200, (status, body)
        assert any(d["task_instance"]["task_id"] == "approve_human" for d in body["hitl_details"]), body
    finally:
        os.killpg(launcher.pid, signal.SIGINT)
        try:
            launcher.wait(timeout=60)
        finally:
            if launcher.poll() is None:
                os.killpg(launcher.pid, signal.SIGKILL)
