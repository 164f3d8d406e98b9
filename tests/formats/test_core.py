"""The record core's selection: built by ``make venv`` (setup.py), importable from the editable
install, chosen at import, forced to Python by ``KMIGRATE_PURE_PYTHON=1``, reported by
``kmigrate --version``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from migration.formats import core

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, **env: str) -> str:
    full = {k: v for k, v in os.environ.items() if k != core.PURE_PYTHON_ENV} | env
    out = subprocess.run([sys.executable, "-c", code], env=full, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_compiled_core_is_built_where_a_compiler_is() -> None:
    if core.compiled is None and not shutil.which(sysconfig.get_config_var("CC").split()[0] or "cc"):
        pytest.skip("no C compiler on this machine: the package runs on its pure-Python core")
    assert core.compiled is not None, core.describe()
    # the editable install imports the extension built into the source tree
    assert Path(core.compiled.__file__).resolve().parent == ROOT / "migration" / "formats"


def test_the_core_is_chosen_at_import_and_the_environment_forces_python() -> None:
    if core.compiled is None:
        pytest.skip(core.describe())
    code = "from migration.formats import core; print(core.name(), core.describe())"
    assert _run(code).startswith("compiled record core: compiled (CRC-32C ")
    assert _run(code, KMIGRATE_PURE_PYTHON="1") == "python record core: python (KMIGRATE_PURE_PYTHON=1)"
    assert _run(code, KMIGRATE_PURE_PYTHON="0").startswith("compiled ")


def test_version_names_the_active_core() -> None:
    kmigrate = [sys.executable, "-m", "migration.cli.app", "--version"]
    env = {k: v for k, v in os.environ.items() if k != core.PURE_PYTHON_ENV}
    out = subprocess.run(kmigrate, env=env | {core.PURE_PYTHON_ENV: "1"}, cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1] == "record core: python (KMIGRATE_PURE_PYTHON=1)"
    # and the codec libraries that run (migration.formats.compression.codec_libraries)
    assert out.stdout.splitlines()[2].startswith("codecs: gzip read: ")


def test_use_switches_and_restores_the_core() -> None:
    before = core.name()
    with core.use(core.PYTHON) as impl:
        assert core.impl is impl and core.name() == core.PYTHON
        with pytest.raises(ValueError, match="record core must be"), core.use("fortran"):
            pass
        assert core.name() == core.PYTHON
    assert core.name() == before
