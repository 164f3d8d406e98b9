"""KIP-1170 "Compatibility", last state: bootstrap.checkpoint and the zero checkpoint both hold
metadata records. The controller uses the zero checkpoint's records and logs a WARN; a node
deletes bootstrap.checkpoint once it loaded a snapshot holding metadata records. So
``unify-bootstrap`` keeps the zero checkpoint byte for byte, retires bootstrap.checkpoint to the
backup root, and warns, on stderr and in the run's report, that it did so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from migration.audit.store import ReportStore
from migration.cli.app import app
from migration.migrations.unify import detect_state


def _dir(tmp_path: Path, kraft, *, same: bool) -> tuple[Path, bytes, bytes]:
    boot_values, _ = kraft.bootstrap_values(mv=20, seed=1)
    zero_values = boot_values if same else kraft.bootstrap_values(mv=21, seed=2)[0]
    boot = kraft.bootstrap(boot_values)
    kr = [(kraft.KRAFT_VERSION, kraft.kraft_version_value(1)), (kraft.KRAFT_VOTERS, kraft.default_voters())]
    zero = kraft.checkpoint(zero_values, kraft=kr)
    return kraft.make_metadata_dir(tmp_path / "ctl", boot=boot, zero=zero), boot, zero


def _invoke(d: Path, tmp_path: Path, run_id: str, *extra: str):
    return CliRunner().invoke(app, ["unify-bootstrap", str(d), "--engine", "inline", "--backup-root",
                                    str(tmp_path / "backups"), "--run-id", run_id, *extra])


def _says_kept_and_retired(text: str) -> bool:
    return ("zero checkpoint is kept" in text and "bootstrap.checkpoint is retired" in text
            and "KIP-1170" in text)


@pytest.mark.parametrize("same", [False, True], ids=["different-records", "same-records"])
def test_both_hold_records_keeps_zero_retires_bootstrap_and_warns_on_stderr(tmp_path, kraft, same):
    d, boot, zero = _dir(tmp_path, kraft, same=same)
    st = detect_state(d)
    assert (st.case, st.records_match) == (4, same)
    res = _invoke(d, tmp_path, f"unify-case4-{same}")
    assert res.exit_code == 0, res.output
    # On disk: the zero checkpoint untouched, bootstrap.checkpoint only in the backup root.
    assert (d / kraft.METADATA_DIR / kraft.ZERO).read_bytes() == zero
    assert not (d / "bootstrap.checkpoint").exists()
    kept = sorted((tmp_path / "backups").rglob("bootstrap.checkpoint"))
    assert [p.read_bytes() for p in kept] == [boot]
    # The warning is on stderr, not mixed into the outcome lines on stdout.
    assert _says_kept_and_retired(res.stderr), res.stderr
    assert "KIP-1170" not in res.stdout
    assert f"retired bootstrap.checkpoint, which held {'the same 4' if same else '4 other'} metadata records" \
        in res.stderr
    assert str(kept[0]) in res.stderr.replace("\n", "")
    # In the stored report: a run-level warning naming the dir, the unit's own with the backup path.
    report = ReportStore().load(f"unify-case4-{same}")
    assert report.exit_code() == 0
    assert any(_says_kept_and_retired(w.message) and w.message.startswith(str(d)) for w in report.warnings)
    (u,) = list(report.iter_results())
    assert u.status.value == "ok"
    assert any(f"to {kept[0]}" in w.message and w.file == str(d / "bootstrap.checkpoint") for w in u.warnings)
    html = ReportStore().load_html(f"unify-case4-{same}")
    assert "the zero checkpoint is kept as it is" in html


def test_both_hold_records_json_mode_warns_on_stderr(tmp_path, kraft):
    d, _, zero = _dir(tmp_path, kraft, same=False)
    res = _invoke(d, tmp_path, "unify-case4-json", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)  # stdout is the report and nothing else
    assert any(_says_kept_and_retired(w["message"]) for w in report["warnings"])
    assert _says_kept_and_retired(res.stderr), res.stderr
    assert (d / kraft.METADATA_DIR / kraft.ZERO).read_bytes() == zero


def test_both_hold_records_dry_run_warns_and_changes_nothing(tmp_path, kraft):
    d, _, _ = _dir(tmp_path, kraft, same=True)
    before = kraft.tree_digest(d)
    res = _invoke(d, tmp_path, "unify-case4-dry", "--dry-run")
    assert res.exit_code == 0, res.output
    assert _says_kept_and_retired(res.stderr), res.stderr
    assert kraft.tree_digest(d) == before
    assert not (tmp_path / "backups").exists()
