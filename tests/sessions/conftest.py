"""The session store runs on SQLite by default and on PostgreSQL in Airflow deployments: the
store tests take ``store_url`` and run once on each, PostgreSQL being a real server started
for the test session (tests/support/postgres.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.postgres import PostgresServer, find_bin_dir


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries (initdb, postgres) are not installed")
    # Under /tmp, not pytest's private temporary root: the server may run as another user.
    root = Path(tempfile.mkdtemp(prefix="kmigrate-pg-"))
    root.chmod(0o755)  # mkdtemp makes it private to its owner
    server = PostgresServer(root / "pg", bin_dir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty session store database on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state' / 'sessions.sqlite'}"
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.new_database()
