"""Export the JSON Schemas of our persisted documents into ``schemas/``.

``python -m migration.audit.schema_export`` rewrites them; ``--check`` exits 1 when a committed schema
is out of date (CI and a test run it). Register further documents in ``SCHEMAS``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from migration.audit.model import RunReport
from migration.audit.store import write_report_file

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas"
SCHEMA_ID_BASE = "https://kmigrate.invalid/schemas/"

# file stem -> model. The schema describes the document as written (serialization mode), so
# derived fields such as totals and exit_code are included (read-only).
SCHEMAS: dict[str, type[BaseModel]] = {
    "run-report": RunReport,
}


def schema_of(name: str, model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(mode="serialization", by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{SCHEMA_ID_BASE}{name}.schema.json",
        **schema,
    }


def render(name: str, model: type[BaseModel]) -> str:
    return json.dumps(schema_of(name, model), indent=2, ensure_ascii=False) + "\n"


def stale(out_dir: Path = SCHEMA_DIR, schemas: dict[str, type[BaseModel]] | None = None) -> list[Path]:
    """Schema files that are missing or differ from what the models produce."""
    out = []
    for name, model in (SCHEMAS if schemas is None else schemas).items():
        path = out_dir / f"{name}.schema.json"
        if not path.is_file() or path.read_text(encoding="utf-8") != render(name, model):
            out.append(path)
    return out


def write_all(out_dir: Path = SCHEMA_DIR, schemas: dict[str, type[BaseModel]] | None = None) -> list[Path]:
    written = []
    for name, model in (SCHEMAS if schemas is None else schemas).items():
        path = out_dir / f"{name}.schema.json"
        write_report_file(path, render(name, model).encode())
        written.append(path)
    return written


def main(argv: list[str] | None = None, schemas: dict[str, type[BaseModel]] | None = None,
         command: str = "python -m migration.audit.schema_export") -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=SCHEMA_DIR, help="directory of the schema files")
    parser.add_argument("--check", action="store_true", help="exit 1 if a schema file is out of date")
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale(args.out, schemas)
        for path in out_of_date:
            print(f"out of date: {path} (run {command})", file=sys.stderr)
        return 1 if out_of_date else 0
    for path in write_all(args.out, schemas):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
