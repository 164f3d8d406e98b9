"""Fuzz targets share the time budget of a long run (``make fuzz``) equally."""

from __future__ import annotations

from pathlib import Path

from fuzz import harness

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    harness.SELECTED_TARGETS = sum(
        1 for item in items if item.name == "test_fuzz" and _HERE in Path(str(item.path)).resolve().parents
    )
