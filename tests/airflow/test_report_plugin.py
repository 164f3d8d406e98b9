"""The report plugin served by a real ``airflow api-server`` with login required and a per-DAG
policy (one_dag_auth_manager.py): anonymous and forged requests refused; a user who may read
one DAG sees that DAG's run reports (token in the header, or the cookie the UI's iframe sends)
and nothing else, whatever the query string says; a user who may read every DAG sees the
pages of runs, their JSON and the list; paths outside the report root are refused. The tab of
a rollout's DAG run shows the DAG run's merged report, not its newest step's, and links every
step's report where a reader of that DAG may follow the link."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from migration.audit.model import RunReport, StepRef, UnitResult, UnitStatus
from migration.audit.store import ReportStore
from migration.orchestration.common import run_id_for

ROLLOUT_RUN = "manual__2026-11-22T01:00:00+00:00"


def _rollout(store: ReportStore) -> tuple[list[str], str]:
    """Brokers 1-3 upgraded one after the other, then the merged report (it starts with the
    first step, so the last broker's report is the newest of the DAG run)."""
    t0 = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)
    merged = RunReport.start("upgrade", run_id=run_id_for(ROLLOUT_RUN), dag_id="message_format_upgrade",
                             dag_run_id=ROLLOUT_RUN, task_id="report", now=t0)
    for b in (1, 2, 3):
        step = RunReport.start("upgrade", run_id=run_id_for(ROLLOUT_RUN, "upgrade", f"b{b}"),
                               dag_id="message_format_upgrade", dag_run_id=ROLLOUT_RUN, now=t0 + timedelta(minutes=b))
        step.add_unit(b, "orders", 0, UnitResult(unit="00000000000000000000.log", status=UnitStatus.OK))
        store.save(step.finish(now=t0 + timedelta(minutes=b, seconds=9)))
        merged.add_unit(b, "orders", 0, UnitResult(unit="00000000000000000000.log", status=UnitStatus.OK))
        merged.steps.append(StepRef.of(step))
    store.save(merged.finish(now=t0 + timedelta(minutes=4)))
    return [s.run_id for s in merged.steps], merged.run_id


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _token(origin: str, username: str, password: str) -> str:
    req = urllib.request.Request(origin + "/auth/token", method="POST",
                                 data=json.dumps({"username": username, "password": password}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())["access_token"]


def test_api_server_serves_the_report_of_a_dag_run(airflow_base_env, tmp_path):
    root = tmp_path / "reports"
    report = RunReport.start("upgrade", {"target": "v2"}, run_id="demo-run-1", dag_id="message_format_upgrade",
                             dag_run_id="manual__2026-11-22T00:00:00+00:00")
    report.add_unit(1, "orders", 0, UnitResult(unit="00000000000000000000.log", status=UnitStatus.OK,
                                               bytes_before=100, bytes_after=120, records_before=5, records_after=5))
    report.finish()
    ReportStore(root).save(report)
    steps, merged = _rollout(ReportStore(root))
    port = _port()
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"reader": "reader-pass", "ops": "ops-pass"}))
    env = {**airflow_base_env, "KMIGRATE_REPORT_ROOT": str(root),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), airflow_base_env.get("PYTHONPATH", "")]),
           # Login required (the demo's config lets everyone in as admin), per-DAG policy.
           "AIRFLOW__CORE__AUTH_MANAGER": "one_dag_auth_manager.OneDagAuthManager",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "reader:viewer,ops:viewer",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords)}
    with open(tmp_path / "api.log", "w") as log:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "airflow"), "api-server", "--port", str(port),
                                 "--host", "127.0.0.1"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    origin = f"http://127.0.0.1:{port}"
    base = origin + "/kmigrate-reports"
    dag_run = "/dag-runs/message_format_upgrade/manual__2026-11-22T00%3A00%3A00%2B00%3A00"
    other_dag_run = "/dag-runs/zero_checkpoint_unification/manual__2026-11-22T00%3A00%3A00%2B00%3A00"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                status, _ = _get(origin + "/api/v2/monitor/health")
                if status == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "api.log").read_text()[-3000:]
            time.sleep(1)
        for path in ("/", "/runs.json", "/runs/demo-run-1.json", "/runs/demo-run-1", dag_run, dag_run + ".json"):
            status, body = _get(base + path)
            assert status == 401 and b"demo-run-1" not in body, path
            status, body = _get(base + path, {"Authorization": "Bearer not-a-token"})
            assert status in (401, 403) and b"demo-run-1" not in body, path
        # A reader of message_format_upgrade only.
        reader = {"Authorization": "Bearer " + _token(origin, "reader", "reader-pass")}
        status, body = _get(base + dag_run + ".json", reader)
        assert status == 200 and RunReport.from_json(body.decode()).run_id == "demo-run-1"
        status, body = _get(base + dag_run, {"Cookie": "_token=" + reader["Authorization"].split()[1]})
        assert status == 200 and b"demo-run-1" in body  # the tab's iframe authenticates with the UI's cookie
        # The rollout's tab: the merged report, linking each broker's report under the DAG run.
        tab = "/dag-runs/message_format_upgrade/manual__2026-11-22T01%3A00%3A00%2B00%3A00"
        status, body = _get(base + tab, reader)
        assert status == 200 and f'data-run-id="{merged}"'.encode() in body and b'data-units-total="3"' in body
        for step in steps:
            link = f"/kmigrate-reports{tab}/reports/{step}"
            assert f'<a href="{link}">{step}</a>'.encode() in body
            status, page = _get(origin + link, reader)
            assert status == 200 and f'data-run-id="{step}"'.encode() in page
        status, body = _get(base + tab + "/reports/" + steps[0])
        assert status == 401 and steps[0].encode() not in body
        for path in (other_dag_run, "/", "/runs.json", "/runs.json?dag_id=message_format_upgrade",
                     f"/dag-runs/zero_checkpoint_unification/manual__2026-11-22T01%3A00%3A00%2B00%3A00/reports/{steps[0]}",
                     "/runs/demo-run-1.json?dag_id=message_format_upgrade", "/runs/demo-run-1"):
            status, body = _get(base + path, reader)
            assert status == 403 and b"demo-run-1" not in body, path
        # A reader of every DAG.
        ops = {"Authorization": "Bearer " + _token(origin, "ops", "ops-pass")}
        status, body = _get(base + "/runs/demo-run-1.json", ops)
        assert status == 200 and RunReport.from_json(body.decode()).run_id == "demo-run-1"
        status, body = _get(base + "/runs/demo-run-1", ops)
        assert status == 200 and b"<svg" in body and b"demo-run-1" in body
        status, body = _get(base + "/", ops)
        assert status == 200 and b"demo-run-1" in body
        for bad in ("/runs/..%2F..%2Fetc%2Fpasswd", "/runs/%2Fetc%2Fpasswd.json", "/runs/nope-run"):
            status, _ = _get(base + bad, ops)
            assert status in (400, 404, 422), bad
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
