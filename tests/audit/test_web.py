"""The reports app behind the Airflow plugin, through FastAPI's TestClient."""

from __future__ import annotations

import json
import os
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
    monkeypatch.setenv("KMIGRATE_PROJECT_ROOT", str(tmp_path))
    monkeypatch.delenv("KMIGRATE_REPORT_ROOT", raising=False)
    ReportStore(tmp_path / "out" / "reports").save(make_report())
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
