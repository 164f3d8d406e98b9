"""The built wheel carries every data file the package loads: installed on its own (outside the
repository), it decodes a KRaft metadata record, which needs the message definitions that ship
as package data, and renders a run report, which needs the HTML templates. It carries the
compiled record core too (setup.py), which it runs from its own copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UV = ROOT / ".tools" / "uv" / "bin" / "uv"

CHECK = """
import sys
from pathlib import Path
import migration
from migration.formats.metadata_records import decode_metadata_record, encode_metadata_record
from migration.formats.message_schema import DEFAULT_SCHEMA_DIR
assert Path(migration.__file__).resolve().is_relative_to(Path(sys.argv[1]).resolve()), migration.__file__
assert DEFAULT_SCHEMA_DIR.is_relative_to(Path(sys.argv[1]).resolve()), DEFAULT_SCHEMA_DIR
data = encode_metadata_record("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": 21})
record = decode_metadata_record(data)
print(record.name, record.fields["FeatureLevel"])
from migration.audit.html import render_html
from migration.audit.model import RunKind, RunReport
report = RunReport.start(RunKind.UPGRADE, {}, run_id="wheel")
report.finish()
assert "<html" in render_html(report).lower()
from migration.formats import core
if sys.argv[2] == "compiled":  # built here, so built into the wheel too
    assert core.compiled is not None, core.describe()
    assert Path(core.compiled.__file__).resolve().is_relative_to(Path(sys.argv[1]).resolve()), core.compiled.__file__
"""


@pytest.mark.slow
def test_installed_wheel_decodes_a_metadata_record(tmp_path):
    if not UV.exists():
        pytest.skip("uv is installed by make (.tools/uv)")
    dist = tmp_path / "dist"
    subprocess.run([str(UV), "build", "--wheel", "--out-dir", str(dist), str(ROOT)], check=True,
                   capture_output=True, timeout=300)
    wheel = next(dist.glob("*.whl"))
    target = tmp_path / "site"
    subprocess.run([str(UV), "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    # the wheel's copy comes first on the path; run from elsewhere so the repository is not found
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MIGRATION_KAFKA_SCHEMA_DIR")}
    env["PYTHONPATH"] = str(target)
    from migration.formats import core

    expected = "compiled" if core.compiled is not None else "python"
    out = subprocess.run([sys.executable, "-c", CHECK, str(target), expected], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["FeatureLevelRecord", "21"]
    shutil.rmtree(dist)
