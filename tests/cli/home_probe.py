"""A unit function for tests/cli/test_home.py, shipped to Spark's executors by file (sc.addPyFile):
it reports the home the executor resolves."""

from __future__ import annotations

from typing import Any


def probe(unit: Any, options: dict[str, Any]) -> dict[str, Any]:
    from migration.settings import home

    return {"status": "ok", "home": str(home())}
