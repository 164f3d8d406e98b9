"""Run documents are typed and versioned: an older (unversioned) document is read, a newer one
is refused with a message saying so, never guessed at; the Spark application refuses too."""

from __future__ import annotations

import json

import pytest

from migration.orchestration import spark_app
from migration.runtime.documents import DocumentError, JobDocument, PrepareDocument, ResultsDocument
from migration.runtime.engine import Unit
from migration.runtime.runs import RunDir


def test_round_trip_and_version_written(tmp_path):
    rd = RunDir("doc-test", root=tmp_path / "run")
    units = [Unit(kind="k", id="u1", log_dir="/x", path="/x/t-0")]
    rd.write_job(units, {"a": 1})
    assert json.loads(rd.job_path.read_text())["version"] == JobDocument.VERSION
    assert rd.read_job() == (units, {"a": 1})
    rd.write_results([{"unit_id": "u1", "status": "ok"}])
    assert json.loads(rd.results_path.read_text())["version"] == ResultsDocument.VERSION
    assert rd.read_results() == [{"unit_id": "u1", "status": "ok"}]
    rd.write_prepare({"run_id": "doc-test", "warnings": ["w"], "skipped": [1]})
    prep = rd.read_prepare(PrepareDocument)
    assert prep is not None and prep.warnings == ["w"] and prep.version == PrepareDocument.VERSION
    assert rd.read_prepare()["skipped"] == [1]


def test_unversioned_documents_of_older_runs_are_read(tmp_path):
    (tmp_path / "job.json").write_text(json.dumps({"run_id": "old", "units": [], "options": {"x": 1}}))
    job = JobDocument.read(tmp_path / "job.json")
    assert job.version == 0 and job.options == {"x": 1}


@pytest.mark.parametrize("model", [JobDocument, ResultsDocument, PrepareDocument])
def test_a_newer_version_is_refused(tmp_path, model):
    p = tmp_path / "doc.json"
    p.write_text(json.dumps({"version": model.VERSION + 1, "run_id": "x", "units": [], "results": []}))
    with pytest.raises(DocumentError, match=rf"version {model.VERSION + 1} was written by a newer kmigrate"):
        model.read(p)


def test_not_a_document(tmp_path):
    p = tmp_path / "job.json"
    p.write_text("[1, 2]")
    with pytest.raises(DocumentError, match="not a JSON object"):
        JobDocument.read(p)
    p.write_text('{"version": 1, "units": []}')
    with pytest.raises(DocumentError, match="run_id"):
        JobDocument.read(p)


def test_spark_app_refuses_a_job_it_cannot_read(tmp_path, capsys):
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"version": 99, "run_id": "x", "units": []}))
    assert spark_app.main(["--job", str(job), "--results", str(tmp_path / "r.json"), "--engine", "inline"]) == 2
    assert "newer kmigrate" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_a_unit_journal_of_a_newer_kmigrate_is_refused(tmp_path):
    from migration.migrations.upgrade.journal import JournalState, UnitJournal, load_journal, save_journal

    j = UnitJournal(unit_id="u", partition_dir="/p", log_file="0.log", base_offset=0, state=JournalState.STARTED)
    save_journal(tmp_path, j)
    assert load_journal(tmp_path, "u") == j.model_copy(update={"updated_at": load_journal(tmp_path, "u").updated_at})
    path = tmp_path / "journal" / "u.json"
    path.write_text(path.read_text().replace(f'"version": {UnitJournal.VERSION}', '"version": 7'))
    with pytest.raises(DocumentError, match="unit journal version 7 was written by a newer kmigrate"):
        load_journal(tmp_path, "u")
