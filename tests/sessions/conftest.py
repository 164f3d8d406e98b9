"""The session store runs on SQLite by default and on PostgreSQL in Airflow deployments: the
store tests take ``store_url`` and run once on each, PostgreSQL being a real server started
for the test session (tests/support/postgres.py). Without PostgreSQL's binaries the
PostgreSQL half is skipped, unless ``KMIGRATE_REQUIRE_POSTGRES=1`` (CI) makes that a failure."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.postgres import DIR_PREFIX, PostgresServer, PostgresUnavailable, find_bin_dir, remove_stale_dirs


def _unavailable(reason: str) -> None:
    if os.environ.get("KMIGRATE_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"PostgreSQL is required here (KMIGRATE_REQUIRE_POSTGRES=1): {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        _unavailable("PostgreSQL server binaries (initdb, postgres, pg_ctl) are not installed")
    remove_stale_dirs()
    # Under /tmp, not pytest's private temporary root: the server may run as another user.
    root = Path(tempfile.mkdtemp(prefix=DIR_PREFIX))
    root.chmod(0o755)  # mkdtemp makes it private to its owner
    try:
        server = PostgresServer(root / "pg", bin_dir)
    except PostgresUnavailable as exc:
        shutil.rmtree(root, ignore_errors=True)
        _unavailable(str(exc))
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
