"""A tier-prepare flag that cannot apply with another is a usage error (issue 31): exit 2, one
line naming both flags, nothing written; never silently ignored."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from migration.cli.app import app


@pytest.mark.parametrize(("extra", "said"), [
    (["--snapshots-only", "--assign-leader-epoch"], "--assign-leader-epoch cannot apply with --snapshots-only"),
    (["--region", "eu-west-1"], "--region cannot apply with --store-url"),
    (["--virtual-host"], "--path-style/--virtual-host cannot apply with --store-url"),
    (["--master", "local[2]"], "--master cannot apply with --engine inline"),
])
def test_flags_that_cannot_apply_together_exit_2(sample_cluster, tmp_path, monkeypatch, extra, said):
    home = tmp_path / "home"
    monkeypatch.setenv("KMIGRATE_HOME", str(home))
    store = tmp_path / "store"
    store.mkdir()
    before = {p: p.stat().st_mtime_ns for d in sample_cluster.log_dirs for p in d.rglob("*")}
    res = CliRunner().invoke(app, ["tier-prepare", *map(str, sample_cluster.log_dirs), "--store-url", store.as_uri(),
                                   "--engine", "inline", *extra])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kmigrate tier-prepare: ") and said in lines[0], res.output
    assert "Traceback" not in res.output
    assert {p: p.stat().st_mtime_ns for d in sample_cluster.log_dirs for p in d.rglob("*")} == before
    assert not list(store.iterdir()) and not (home / "runs").exists()
