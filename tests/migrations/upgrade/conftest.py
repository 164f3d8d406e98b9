"""Fixtures of the upgrade tests: a private output root per test (runs, reports, backups
outside the log dirs) and helpers to snapshot a log dir tree."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # kafka_loader, crash_job: plain helper modules


@pytest.fixture(autouse=True)
def private_out(tmp_path, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setenv("KMIGRATE_OUT", str(out))
    monkeypatch.setenv("KMIGRATE_REPORT_ROOT", str(out / "reports"))
    monkeypatch.setenv("KMIGRATE_BACKUP_ROOT", str(out / "backups"))
    return out


def tree_state(root: str | os.PathLike[str]) -> dict[str, tuple[int, str, int]]:
    """relative path -> (size, sha256, mtime_ns) of every file under ``root``."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            if f == ".lock":
                continue  # the lock file is opened (not written) by the tool
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_size, hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns)
    return out
