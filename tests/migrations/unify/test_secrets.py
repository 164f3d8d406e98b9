"""SCRAM salts and keys never leave the checkpoint files: not in output, logs, run files or reports."""

from __future__ import annotations

import logging
from pathlib import Path

from typer.testing import CliRunner

from migration.cli.app import app


def _all_text(root: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file())


def test_no_scram_secret_in_any_output(tmp_path, kraft, caplog):
    values, secrets = kraft.bootstrap_values()
    kr = [(kraft.KRAFT_VERSION, kraft.kraft_version_value(1)), (kraft.KRAFT_VOTERS, kraft.default_voters())]
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=kraft.bootstrap(values), zero=kraft.checkpoint([], kraft=kr))
    broker = tmp_path / "broker"
    broker.mkdir()
    (broker / "meta.properties").write_text(f"version=1\ncluster.id={kraft.CLUSTER_ID}\nnode.id=2\n")
    (broker / "bootstrap.checkpoint").write_bytes(kraft.bootstrap(values))
    caplog.set_level(logging.DEBUG)
    runner = CliRunner()
    outputs = []
    for args in (["unify-bootstrap", str(d), "--dry-run", "--json"],
                 ["unify-bootstrap", str(d), "--retire-stray", str(broker)],
                 ["unify-bootstrap", str(d), "--json"],
                 ["inspect", "--deep", str(d / kraft.METADATA_DIR / kraft.ZERO)],
                 ["inspect", "--deep", "--json", str(d / kraft.METADATA_DIR / kraft.ZERO)],
                 ["validate", str(d)]):
        res = runner.invoke(app, [*args[:1], *args[1:]] if args[0] != "unify-bootstrap"
                            else [*args, "--engine", "inline", "--backup-root", str(tmp_path / "backups")])
        assert res.exit_code == 0, res.output
        outputs.append(res.output)
    assert "<redacted" in outputs[3]  # inspect shows that the fields exist, not what they hold
    everything = "\n".join(outputs) + caplog.text + _all_text(tmp_path / "out")
    assert "report.json" in "\n".join(str(p) for p in (tmp_path / "out").rglob("*"))
    assert "prepare.json" in "\n".join(str(p) for p in (tmp_path / "out").rglob("*"))
    for enc in secrets.encodings():
        assert enc not in everything, f"secret leaked as {enc[:12]}..."
    # The check can fail: the secrets are on disk, in the unified zero checkpoint.
    zero = (d / kraft.METADATA_DIR / kraft.ZERO).read_bytes()
    assert all(s in zero for s in secrets.values)
