"""Report files on disk: locations, atomic writes, listing, sinks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migration.audit.store import (
    InvalidRunId,
    ReportNotFound,
    ReportSink,
    ReportStore,
    default_report_root,
    write_report_file,
)


class _MemorySink:
    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.objects[key] = (data, content_type)


def test_default_root_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``<home>/reports``, the home never the working directory (docs/operations.md, "Where state
    lives"); ``$KMIGRATE_REPORT_ROOT`` moves it."""
    for name in ("KMIGRATE_REPORT_ROOT", "KMIGRATE_HOME", "KMIGRATE_OUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KMIGRATE_HOME", str(tmp_path / "home"))
    assert default_report_root() == tmp_path / "home" / "reports"
    monkeypatch.delenv("KMIGRATE_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    assert default_report_root() == tmp_path / "xdg" / "kmigrate" / "reports"
    assert default_report_root(tmp_path / "given") == tmp_path / "given" / "reports"
    monkeypatch.setenv("KMIGRATE_REPORT_ROOT", str(tmp_path / "elsewhere"))
    assert ReportStore().root == tmp_path / "elsewhere"


def test_save_load_list_and_sink(tmp_path: Path, make_report) -> None:
    sink = _MemorySink()
    assert isinstance(sink, ReportSink)
    store = ReportStore(tmp_path, sinks=[sink])
    report = make_report()
    path = store.save(report)
    assert path == tmp_path / report.run_id / "report.json"
    assert (tmp_path / report.run_id / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert store.load(report.run_id) == report
    assert json.loads(path.read_text())["totals"]["units"] == report.totals.units
    (summary,) = store.list_runs()
    assert (summary.run_id, summary.exit_code, summary.units_failed) == (report.run_id, 1, 1)
    assert set(sink.objects) == {f"{report.run_id}/{n}" for n in ("report.json", "report.html", "summary.json")}
    assert sink.objects[f"{report.run_id}/report.json"] == (path.read_bytes(), "application/json")
    # No temporaries left behind.
    assert sorted(p.name for p in (tmp_path / report.run_id).iterdir()) == [
        "report.html",
        "report.json",
        "summary.json",
    ]
    assert store.find_by_dag_run("kafka_upgrade", "manual__2025-03-01T12:00:00+00:00") == report
    with pytest.raises(ReportNotFound):
        store.find_by_dag_run("kafka_upgrade", "other")
    with pytest.raises(ReportNotFound):
        store.load("nope")


def test_listing_survives_missing_summary_and_junk(tmp_path: Path, make_report) -> None:
    store = ReportStore(tmp_path)
    report = make_report()
    store.save(report)
    (tmp_path / report.run_id / "summary.json").unlink()
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "report.json").write_text("{not json")
    (tmp_path / "not a run id").mkdir()
    assert [s.run_id for s in store.list_runs()] == [report.run_id]


@pytest.mark.parametrize("run_id", ["../x", "/etc", "..", "a/b", ""])
def test_run_dir_rejects_escapes(tmp_path: Path, run_id: str) -> None:
    with pytest.raises(InvalidRunId):
        ReportStore(tmp_path).run_dir(run_id)


def test_atomic_write_keeps_old_file_on_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "r.json"
    write_report_file(target, b"old")

    def boom(*_a: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("migration.formats.fileio.os.replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_report_file(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
