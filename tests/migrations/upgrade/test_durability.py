"""The upgrade's steps are recorded only after what they rely on is durable (docs/architecture.md,
"Durability"): a power cut keeps a directory entry only once its directory is fsynced. The
power-loss test replays whole runs on a model of the file system; these pin the two orders
that it found broken, one by one, so a regression names itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from migration.cli.app import app
from migration.formats import fileio
from migration.migrations.upgrade import journal as journal_module
from migration.migrations.upgrade import unit as unit_module
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade
from migration.migrations.upgrade.journal import JournalState
from migration.settings import runs_dir


@pytest.fixture
def log_dir(sample_cluster_template, tmp_path) -> Path:
    d = tmp_path / "kafka-logs"
    shutil.copytree(sample_cluster_template.broker_log_dirs[1], d, copy_function=shutil.copy2)
    return d


def test_the_journal_says_cleaned_only_after_the_cleaned_names_are_durable(log_dir, monkeypatch) -> None:
    events: list[tuple[str, str]] = []
    real_fsync_dir, real_save = fileio.fsync_dir, journal_module.save_journal

    def fsync_dir(path) -> None:
        events.append(("fsync", str(Path(path))))
        real_fsync_dir(path)

    def save_journal(run_dir, j) -> None:
        cleaned = sorted(p.name for p in Path(j.partition_dir).glob("*.cleaned"))
        events.append((f"journal {j.state.value}", f"{j.partition_dir}|{','.join(cleaned)}"))
        real_save(run_dir, j)

    for module in (fileio, unit_module, journal_module):
        if hasattr(module, "fsync_dir"):
            monkeypatch.setattr(module, "fsync_dir", fsync_dir)
    monkeypatch.setattr(unit_module, "save_journal", save_journal)
    report = execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2", segment_bytes=24 * 1024),
                             engine="inline", run_id="durable-cleaned")
    assert report.exit_code() == 0
    checked = 0
    for i, (what, where) in enumerate(events):
        if what != f"journal {JournalState.CLEANED.value}":
            continue
        pdir, cleaned = where.split("|")
        assert cleaned, "the journal says cleaned while no .cleaned file is staged"
        # since this unit's files were staged (its "started" journal), its directory was fsynced
        started = max(k for k, (w, at) in enumerate(events[:i])
                      if w == f"journal {JournalState.STARTED.value}" and at.split("|")[0] == pdir)
        assert ("fsync", pdir) in events[started + 1 : i], f"{pdir}: journal 'cleaned' before an fsync of the " \
                                                           f"directory holding {cleaned}"
        checked += 1
    assert checked >= 5


def test_a_rollback_of_a_run_that_never_changed_a_log_dir_succeeds_and_says_so(private_out) -> None:
    """A power cut before the job file was durable leaves the run's directory only: nothing to
    undo, and the operator is told so (exit 0), not 'no upgrade job' (exit 2)."""
    run_id = "upgrade-20261127-cut-before-job"
    (runs_dir() / run_id).mkdir(parents=True)
    res = CliRunner().invoke(app, ["rollback", run_id])
    assert res.exit_code == 0, res.output
    assert "never changed a log dir" in " ".join(res.output.split())
    # an id of no run at all is still a usage error
    res = CliRunner().invoke(app, ["rollback", "upgrade-20261127-no-such-run"])
    assert res.exit_code == 2, res.output
