"""``make ui`` (``python -m migration.demo.ui``): the api-server, scheduler, dag-processor and triggerer on an
Airflow home, with kmigrate's home given by ``--home``. In headless Chromium the DAG list shows
the DAGs with the DAG run, the DAG run's "Migration report" tab frames the plugin's page and that
page is the DAG run's merged report; Ctrl-C (SIGINT to the launcher's process group, as a
terminal sends it) stops every process it started, and none is left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

import pytest
from audit.test_html_browser import FLAGS, ensure_chromium

from migration.audit.model import RunReport, UnitResult, UnitStatus
from migration.audit.store import ReportStore
from migration.demo.ui import login_hint
from migration.orchestration.common import merge_reports, run_id_for

ROOT = Path(__file__).resolve().parents[2]
DAG = "message_format_upgrade"
DAG_RUN = "manual__2026-11-22T01:00:00+00:00"
T = TypeVar("T")
STATE_ENV = ("KMIGRATE_HOME", "KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_SESSIONS_URL")


def _rollout(home: Path) -> tuple[list[str], str]:
    """Brokers 1-3 upgraded one after the other and the DAG run's report merging them, as the
    DAG's final task writes it (``merge_reports``)."""
    store = ReportStore(home / "reports")
    t0 = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)
    steps = []
    for b in (1, 2, 3):
        step = RunReport.start("upgrade", run_id=run_id_for(DAG_RUN, "upgrade", f"b{b}"), dag_id=DAG,
                               dag_run_id=DAG_RUN, now=t0 + timedelta(minutes=b))
        step.add_unit(b, "orders", 0, UnitResult(unit="00000000000000000000.log", status=UnitStatus.OK,
                                                 bytes_before=100, bytes_after=120, records_before=5, records_after=5))
        store.save(step.finish(now=t0 + timedelta(minutes=b, seconds=9)))
        steps.append(step.run_id)
    merged = merge_reports("upgrade", steps, run_id=run_id_for(DAG_RUN), params={"target_format": "v2"}, dag_id=DAG,
                           dag_run_id=DAG_RUN, store=store)
    return steps, merged.run_id


def _call(url: str, *, method: str = "GET", token: str | None = None, body: dict | None = None) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, method=method, headers=headers,
                                 data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _until(what: str, check: Callable[[], T | None], timeout: float, launcher: subprocess.Popen[bytes], out: Path) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        assert launcher.poll() is None, f"launcher exited before {what}:\n{out.read_text()[-3000:]}"
        time.sleep(0.5)
    raise AssertionError(f"no {what} within {timeout:g}s:\n{out.read_text()[-3000:]}")


def _dump_dom(chromium: Path, tmp: Path, url: str) -> str:
    """The DOM after the page's scripts ran (the UI is a single-page app; virtual time lets its
    API calls finish before the dump)."""
    done = subprocess.run([str(chromium), *FLAGS, f"--user-data-dir={tmp / 'profile'}", "--virtual-time-budget=20000",
                           "--dump-dom", url], capture_output=True, text=True, timeout=90,
                          env={**os.environ, "HOME": str(tmp)})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _procs() -> dict[int, tuple[int, int, int]]:
    """pid → (ppid, session id, start time) of every living process, from /proc."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # state ppid pgrp session ... starttime (20th)
            if fields[0] != "Z":
                out[int(entry.name)] = (int(fields[1]), int(fields[3]), int(fields[19]))
    return out


def _descendants(root: int) -> dict[int, tuple[int, int, int]]:
    """Every living descendant of ``root``, as :func:`_procs` gives it."""
    procs = _procs()
    found: dict[int, tuple[int, int, int]] = {}
    todo = [root]
    while todo:
        parent = todo.pop()
        for pid, info in procs.items():
            if info[0] == parent and pid not in found:
                found[pid] = info
                todo.append(pid)
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process checks read /proc")
def test_make_ui_shows_the_dag_runs_report_and_stops_everything(airflow_base_env, private_airflow_home, tmp_path):
    chromium = ensure_chromium()
    home = tmp_path / "kmigrate-home"
    steps, merged = _rollout(home)
    env = {k: v for k, v in airflow_base_env.items() if k not in STATE_ENV}
    env.update({"AIRFLOW_HOME": str(private_airflow_home), "KMIGRATE_CLUSTER": str(tmp_path / "no-cluster.json")})
    out = tmp_path / "ui.out"
    started = time.monotonic()
    with open(out, "wb") as f:
        # Its own session, as a shell gives a foreground job: SIGINT to the group is Ctrl-C.
        launcher = subprocess.Popen([sys.executable, "-m", "migration.demo.ui", "--port", "0", "--home", str(home),
                                     "--stop-timeout", "15"], env=env, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                    start_new_session=True)
    try:
        origin = _until("URL", lambda: re.search(r"Airflow UI: (http://127\.0\.0\.1:\d+)/", out.read_text()), 150,
                        launcher, out).group(1)
        text = out.read_text()
        assert f"kmigrate home: {home} (reports: {home / 'reports'}, 4 run report(s))" in text
        assert "no login: [core] simple_auth_manager_all_admins is on" in text
        assert _call(origin + "/api/v2/monitor/health")[0] == 200
        # As printed: no credentials needed, the token endpoint hands anyone an admin's token.
        status, body = _call(origin + "/auth/token")
        assert status == 201, body
        token = json.loads(body)["access_token"]
        # The dag-processor parses the DAGs into the private database.
        _until("DAG message_format_upgrade", lambda: _call(f"{origin}/api/v2/dags/{DAG}", token=token)[0] == 200, 60,
               launcher, out)
        # The DAG run the report belongs to, queued behind a paused DAG so the scheduler leaves it.
        status, body = _call(f"{origin}/api/v2/dags/{DAG}", method="PATCH", token=token, body={"is_paused": True})
        assert status == 200, body
        status, body = _call(f"{origin}/api/v2/dags/{DAG}/dagRuns", method="POST", token=token,
                             body={"dag_run_id": DAG_RUN, "logical_date": None})
        assert status == 200, body

        dags = _dump_dom(chromium, tmp_path, origin + "/dags")
        for dag_id in (DAG, "zero_checkpoint_unification", "tiered_storage_readiness"):
            assert re.search(f'<a data-testid="dag-id" [^>]*href="/dags/{dag_id}"[^>]*>{dag_id}</a>', dags), dag_id
        assert f'href="/dags/{DAG}/runs/{DAG_RUN}"' in dags  # its latest run
        run = quote(DAG_RUN, safe="")
        tab = _dump_dom(chromium, tmp_path, f"{origin}/dags/{DAG}/runs/{run}/plugin/kmigrate-report")
        page = f"/kmigrate-reports/dag-runs/{DAG}/{run}"
        assert 'title="Migration report"' in tab and f'src="{page}"' in tab
        report = _dump_dom(chromium, tmp_path, origin + page)
        assert f'data-run-id="{merged}"' in report and 'data-units-total="3"' in report
        for step in steps:
            assert f'<a href="{page}/reports/{step}">{step}</a>' in report

        # Scheduled runs are off while the UI runs (the hourly DAG would start one at once).
        status, body = _call(f"{origin}/api/v2/dags/tiered_storage_readiness/dagRuns?run_type=scheduled", token=token)
        assert status == 200 and json.loads(body)["total_entries"] == 0, body

        started_procs = _descendants(launcher.pid)
        # The triggerer runs: Airflow's home page shows it healthy (deferred tasks resume in it).
        _until("a healthy triggerer", lambda: json.loads(_call(origin + "/api/v2/monitor/health")[1])
               .get("triggerer", {}).get("status") == "healthy", 120, launcher, out)
        # The api-server, the scheduler, the dag-processor, the triggerer (each in a session of its own), and
        # what they started in turn (in those sessions: a process group may change, a session
        # only by setsid, which no Airflow component here calls).
        children = [pid for pid, (ppid, _, _) in started_procs.items() if ppid == launcher.pid]
        assert len(children) == 4 and all(started_procs[pid][1] == pid for pid in children)  # and the triggerer
        sessions = {launcher.pid, *children}
        assert {sid for _, sid, _ in started_procs.values()} <= sessions
    finally:
        os.killpg(launcher.pid, signal.SIGINT)
        try:
            rc = launcher.wait(timeout=40)
        finally:
            if launcher.poll() is None:
                os.killpg(launcher.pid, signal.SIGKILL)
    text = out.read_text()
    assert rc == 0, text[-3000:]
    assert "Traceback" not in text and "stopped: api-server, scheduler, dag-processor, triggerer" in text, text[-3000:]
    now = _procs()
    assert [p for p, (_, _, start) in started_procs.items() if p in now and now[p][2] == start] == []
    assert [p for p, (_, sid, _) in now.items() if sid in sessions] == []
    assert time.monotonic() - started < 120


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "migration.demo.ui", "--port", str(port),
                               "--airflow-home", str(tmp_path / "ah"), "--home", str(tmp_path / "home")],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr == f"make ui: port {port} on 127.0.0.1 is in use: pass another --port, or --port 0 for a free " \
                          "one\n"
    assert done.stdout == "" and not (tmp_path / "ah").exists()


def test_login_hint_follows_the_auth_manager_settings(tmp_path):
    cfg = tmp_path / "airflow.cfg"
    cfg.write_text((ROOT / "airflow.cfg").read_text())
    env = {"AIRFLOW_HOME": str(tmp_path)}
    assert login_hint(cfg, env).startswith("no login: [core] simple_auth_manager_all_admins is on")
    off = {**env, "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "ops:admin"}
    assert login_hint(cfg, off) == (f"log in as one of ops:admin (user:role); passwords in "
                                    f"{tmp_path / 'simple_auth_manager_passwords.json.generated'}, generated at the "
                                    "first start")
    other = {**env, "AIRFLOW__CORE__AUTH_MANAGER": "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"}
    assert login_hint(cfg, other) == ("log in with the users of the auth manager "
                                      "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager")
