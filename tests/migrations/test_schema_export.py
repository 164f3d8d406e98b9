"""The JSON Schemas of the run documents are exported next to the report's and kept current."""

from __future__ import annotations

import json

from migration.migrations import schema_export


def test_run_document_schemas_up_to_date() -> None:
    stale = schema_export.schema_export.stale(schemas=schema_export.ALL)
    assert not stale, f"run `{schema_export.COMMAND}` (make schemas): {stale}"


def test_every_run_document_has_a_version(tmp_path) -> None:
    assert schema_export.main(["--out", str(tmp_path)]) == 0
    for name in schema_export.RUN_DOCUMENTS:
        schema = json.loads((tmp_path / f"{name}.schema.json").read_text())
        assert "version" in schema["properties"], name
    assert schema_export.main(["--check", "--out", str(tmp_path)]) == 0
    (tmp_path / "run-job.schema.json").write_text("{}")
    assert schema_export.main(["--check", "--out", str(tmp_path)]) == 1
