"""The reports app behind the Airflow plugin, through FastAPI's TestClient."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from migration.audit.model import RunReport
from migration.audit.store import ReportStore
from migration.audit.web import create_app


@pytest.fixture
def store(tmp_path: Path, make_report) -> ReportStore:
    s = ReportStore(tmp_path / "reports")
    s.save(make_report())
    other = RunReport.start("validate", run_id="validate-1", dag_id="kafka_validate", dag_run_id="scheduled__1")
    other.finish()
    s.save(other, html=False)
    return s


@pytest.fixture
def client(store: ReportStore) -> TestClient:
    return TestClient(create_app(store))


def test_index_lists_runs(client: TestClient, store: ReportStore) -> None:
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "upgrade-20250301T120000Z-abcdef01" in r.text and "validate-1" in r.text
    assert 'href="/runs/upgrade-20250301T120000Z-abcdef01"' in r.text
    runs = client.get("/runs.json").json()
    assert {x["run_id"] for x in runs} == {"upgrade-20250301T120000Z-abcdef01", "validate-1"}
    assert "default-src 'none'" in r.headers["content-security-policy"]


def test_index_links_respect_mount_prefix(store: ReportStore) -> None:
    from fastapi import FastAPI

    outer = FastAPI()
    outer.mount("/kmigrate-reports", create_app(store))
    r = TestClient(outer).get("/kmigrate-reports/")
    assert r.status_code == 200
    assert 'href="/kmigrate-reports/runs/validate-1"' in r.text


def test_run_html_and_json(client: TestClient, store: ReportStore) -> None:
    run_id = "upgrade-20250301T120000Z-abcdef01"
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    assert page.text == store.html_path(run_id).read_text()
    assert 'data-units-failed="1"' in page.text
    data = client.get(f"/runs/{run_id}.json")
    assert data.status_code == 200 and data.headers["content-type"] == "application/json"
    assert data.json() == json.loads(store.json_path(run_id).read_text())
    # Saved without HTML: the page is rendered from the JSON.
    page2 = client.get("/runs/validate-1")
    assert page2.status_code == 200 and 'data-run-id="validate-1"' in page2.text


def test_dag_run_lookup(client: TestClient) -> None:
    # The Airflow UI URL-encodes the run id ({RUN_ID} -> encodeURIComponent).
    r = client.get("/dag-runs/kafka_upgrade/manual__2025-03-01T12%3A00%3A00%2B00%3A00")
    assert r.status_code == 200
    assert 'data-run-id="upgrade-20250301T120000Z-abcdef01"' in r.text
    j = client.get("/dag-runs/kafka_validate/scheduled__1.json")
    assert j.status_code == 200 and j.json()["run_id"] == "validate-1"
    missing = client.get("/dag-runs/kafka_upgrade/manual__other")
    assert missing.status_code == 404 and "No migration report" in missing.text
    assert client.get("/dag-runs/kafka_validate/nope.json").status_code == 404


def test_newest_report_of_dag_run_wins(store: ReportStore, client: TestClient) -> None:
    from datetime import timedelta

    old = store.load("validate-1")
    newer = RunReport.start(
        "validate",
        run_id="validate-2",
        dag_id="kafka_validate",
        dag_run_id="scheduled__1",
        now=old.started_at + timedelta(hours=1),
    )
    store.save(newer)
    assert client.get("/dag-runs/kafka_validate/scheduled__1.json").json()["run_id"] == "validate-2"


def test_unknown_run_404(client: TestClient) -> None:
    assert client.get("/runs/upgrade-nope").status_code == 404
    assert client.get("/runs/upgrade-nope.json").status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/runs/..%2F..%2Fetc%2Fpasswd",
        "/runs/..%2F..%2Fetc%2Fpasswd.json",
        "/runs/%2Fetc%2Fpasswd",
        "/runs/%2Fetc%2Fpasswd.json",
        # (A literal "/runs/.." is normalised to "/" by the client itself, as browsers do.)
        "/runs/..%2Freports",
        "/runs/%2E%2E",
        "/runs/.hidden",
        "/runs/a%00b",
        "/runs/..%5C..%5Cetc%5Cpasswd",
        "/runs/" + "a" * 300,
        "/dag-runs/..%2F..%2Fetc/passwd",
        "/dag-runs/x/..%2F..%2Fetc%2Fpasswd",
        "/dag-runs/%2Fetc/passwd",
    ],
)
def test_path_traversal_refused(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.status_code in (400, 404), (path, r.status_code)
    assert "root:" not in r.text


def test_absolute_path_never_read(tmp_path: Path, client: TestClient) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "report.json").write_text('{"leak": "SECRET-123"}')
    for p in (f"/runs/{secret}", f"/runs/{os.fspath(secret).replace('/', '%2F')}", f"/runs/{secret}.json"):
        r = client.get(p)
        assert r.status_code in (400, 404) and "SECRET-123" not in r.text


def test_symlinked_run_dir_refused(tmp_path: Path, store: ReportStore, client: TestClient) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "report.json").write_text('{"leak": "SECRET-456"}')
    (store.root / "linked").symlink_to(outside, target_is_directory=True)
    r = client.get("/runs/linked.json")
    assert r.status_code == 400 and "SECRET-456" not in r.text
    # A symlinked report file inside a genuine run dir is refused as well.
    run_dir = store.root / "sneaky"
    run_dir.mkdir()
    (run_dir / "report.json").symlink_to(outside / "report.json")
    r = client.get("/runs/sneaky.json")
    assert r.status_code == 400 and "SECRET-456" not in r.text
    assert "linked" not in {x["run_id"] for x in client.get("/runs.json").json()}


def test_invalid_run_id_is_400(client: TestClient) -> None:
    assert client.get("/runs/.hidden").status_code == 400
    assert client.get("/runs/a%20b.json").status_code == 400


def test_corrupt_report_not_served(store: ReportStore, client: TestClient) -> None:
    path = store.json_path("validate-1")
    data = json.loads(path.read_text())
    data["totals"]["units"] = 42
    path.write_text(json.dumps(data))
    assert client.get("/runs/validate-1.json").status_code == 500


def test_default_store_reads_env_per_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_report) -> None:
    app = create_app()
    monkeypatch.setenv("KMIGRATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KMIGRATE_REPORT_ROOT", raising=False)
    ReportStore(tmp_path / "home" / "reports").save(make_report())
    r = TestClient(app).get("/runs.json")
    assert [x["run_id"] for x in r.json()] == ["upgrade-20250301T120000Z-abcdef01"]


def test_plugin_wiring() -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "plugins" / "kmigrate_reports.py"
    spec = importlib.util.spec_from_file_location("kmigrate_reports_plugin_under_test", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plugin = module.KmigrateReportsPlugin
    (app,) = plugin.fastapi_apps
    assert app["url_prefix"] == "/kmigrate-reports"
    (view,) = [v for v in plugin.external_views if v["destination"] == "dag_run"]
    # The placeholders the Airflow 3 UI substitutes for DAG run views.
    assert view["href"] == "/kmigrate-reports/dag-runs/{DAG_ID}/{RUN_ID}"
    client = TestClient(app["app"])
    assert client.get("/runs/..%2F..%2Fetc%2Fpasswd").status_code in (400, 404)


def _dag_run(store: ReportStore, *, record_steps: bool = True) -> list[str]:
    """A rollout's DAG run: preflight, brokers 1-3 one after the other, the merged report last
    (started with its first step). Broker 3's report is the newest."""
    from datetime import UTC, datetime, timedelta

    from migration.audit.model import StepRef, UnitResult, UnitStatus

    t0 = datetime(2026, 11, 23, 3, 44, tzinfo=UTC)
    dag, run = "message_format_upgrade", "manual__2026-11-23T03:44:27+00:00"
    steps = []
    pre = RunReport.start("validate", run_id="manual__2026-11-23T03-44-27-00-00-preflight", dag_id=dag,
                          dag_run_id=run, task_id="preflight.check", now=t0)
    store.save(pre.finish(now=t0 + timedelta(seconds=5)))
    for b in (1, 2, 3):
        r = RunReport.start("upgrade", run_id=f"manual__2026-11-23T03-44-27-00-00-upgrade-b{b}", dag_id=dag,
                            dag_run_id=run, task_id="rolling.finalize", now=t0 + timedelta(minutes=b))
        r.add_unit(b, "orders", b, UnitResult(unit="00000000000000000000.log", status=UnitStatus.OK,
                                              bytes_before=100, bytes_after=90, input_format="v0", output_format="v2"))
        store.save(r.finish(now=t0 + timedelta(minutes=b, seconds=30)))
        steps.append(r)
    merged = RunReport.start("upgrade", run_id="manual__2026-11-23T03-44-27-00-00", dag_id=dag, dag_run_id=run,
                             task_id="report", now=t0 + timedelta(minutes=1))
    for r in steps:
        for b in r.brokers:
            for p in b.partitions:
                for u in p.units:
                    merged.add_unit(b.broker_id, p.topic, p.partition, u)
        if record_steps:
            merged.steps.append(StepRef.of(r))
    store.save(merged.finish(now=t0 + timedelta(minutes=4)))
    return [pre.run_id, *(r.run_id for r in steps), merged.run_id]


def test_dag_run_tab_shows_the_merged_report_not_the_last_broker(store: ReportStore) -> None:
    """The tab showed the newest report of the DAG run: the last broker's (12 of 34 units)."""
    *_, b3, merged = _dag_run(store)
    client = TestClient(create_app(store))
    r = client.get("/dag-runs/message_format_upgrade/manual__2026-11-23T03%3A44%3A27%2B00%3A00.json")
    assert r.json()["run_id"] == merged and r.json()["totals"]["units"] == 3
    assert store.summary(b3).started_at > store.summary(merged).started_at  # the newest is a step's


def test_merged_report_without_recorded_steps_found_by_its_run_id(tmp_path: Path) -> None:
    """A DAG run's report written before reports named their steps is still the run's report:
    its run id is the one the orchestration gives the DAG run (``run_id_for``)."""
    from migration.orchestration.common import run_id_for

    plain = ReportStore(tmp_path / "reports")
    *_, b3, merged = _dag_run(plain, record_steps=False)
    assert plain.find_by_dag_run("message_format_upgrade", "manual__2026-11-23T03:44:27+00:00").run_id == b3
    store = ReportStore(tmp_path / "reports", dag_run_report_id=run_id_for)
    assert store.find_by_dag_run("message_format_upgrade", "manual__2026-11-23T03:44:27+00:00").run_id == merged


def test_served_pages_link_every_report_of_the_dag_run(store: ReportStore) -> None:
    pre, b1, b2, b3, merged = _dag_run(store)
    served = ReportStore(store.root, page_href=lambda report, run_id: f"/mount/{report.dag_id}/{run_id}")
    client = TestClient(create_app(lambda: served))
    page = client.get("/dag-runs/message_format_upgrade/manual__2026-11-23T03%3A44%3A27%2B00%3A00").text
    rows = re.findall(r'<tr class="report-link[^"]*" data-run-id="([^"]+)" data-role="([^"]+)" data-status="[^"]*" '
                      r'data-href="([^"]*)"', page)
    href = "/mount/message_format_upgrade/"
    assert rows == [(b1, "step", href + b1), (b2, "step", href + b2), (b3, "step", href + b3),
                    (pre, "other report of this DAG run", href + pre)]
    for b, step in ((1, b1), (2, b2), (3, b3)):  # and each broker's section links its own report
        assert re.search(rf'<h3>Broker {b} <span class="broker-report">\(<a href="{href}{step}"', page)
    # A step's page links back to the DAG run's report.
    step_page = client.get(f"/runs/{b2}").text
    assert f'data-run-id="{merged}" data-role="dag-run report" data-status="ok" data-href="{href}{merged}"' \
        in step_page
    # Without page_href the stored page is served, its links in the store's layout.
    stored = TestClient(create_app(store)).get(f"/runs/{merged}").text
    assert stored == store.html_path(merged).read_text() and f'<a href="../{b1}/report.html"' in stored


def test_plugin_links_reports_under_their_dag_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's tab links each report under the DAG run's path, where the access check is the
    DAG's (``/runs/<id>`` needs every DAG's); a report of another DAG run is not served there."""
    module = _plugin_module()
    monkeypatch.setenv("KMIGRATE_REPORT_ROOT", str(tmp_path / "reports"))
    _, b1, *_ = _dag_run(ReportStore(tmp_path / "reports"))
    (plugin_app,) = module.KmigrateReportsPlugin.fastapi_apps
    app = plugin_app["app"]
    app.dependency_overrides[module.may_read_dag_runs] = lambda: None  # Airflow's login is tested in tests/airflow
    client = TestClient(app)
    tab = "/dag-runs/message_format_upgrade/manual__2026-11-23T03%3A44%3A27%2B00%3A00"
    link = f"/kmigrate-reports{tab}/reports/{b1}"
    assert f'<a href="{link}">{b1}</a>' in client.get(tab).text
    page = client.get(link.removeprefix("/kmigrate-reports"))
    assert page.status_code == 200 and f'data-run-id="{b1}"' in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    other = "/dag-runs/message_format_upgrade/manual__other/reports/" + b1
    assert client.get(other).status_code == 404
    assert client.get("/dag-runs/zero_checkpoint_unification/manual__2026-11-23T03%3A44%3A27%2B00%3A00/reports/"
                      + b1).status_code == 404
    assert client.get(tab + "/reports/..%2F..%2Fetc%2Fpasswd").status_code in (400, 404)


def _plugin_module():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "plugins" / "kmigrate_reports.py"
    spec = importlib.util.spec_from_file_location("kmigrate_reports_plugin_links_under_test", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
