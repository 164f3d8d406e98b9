"""Build of the compiled record core (the ``_c*.pyx`` modules of ``migration/formats`` and the
rewrite's ``migration/migrations/upgrade/_crewrite.pyx``, docs/architecture.md, "The record core").

Everything else of the package is declared in pyproject.toml. The extensions are optional: when
they cannot be compiled (no C compiler, no Python headers) the install goes on without them, says
so, and the package runs on its pure-Python core (``migration.formats.core`` picks the core at
import). Only a C compiler and the Python headers are needed: the CRC code is vendored in
``migration/formats/_cvendor`` (linked into ``_ccrc`` only: every other module checksums through
it). The C that Cython generates goes to ``build/`` (never committed).

The layout constants of the compiled core (``_clayout.pxd``, and ``_clayout.pyx``, which hands
them to tests/formats/test_layout.py) are written here from ``migration/formats/layout.py``, the
one place the byte layouts are spelled, so C and Python cannot drift apart; both files are
generated, never committed.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, CompileError, ExecError, LinkError, PlatformError

VENDOR = "migration/formats/_cvendor"
# Every compiled module, with the C sources it links besides its .pyx.
EXTENSIONS: dict[str, list[str]] = {
    "migration.formats._clayout": [],
    "migration.formats._ccrc": [f"{VENDOR}/kcrc.c"],
    "migration.formats._clegacy": [],
    "migration.formats._crecord_batch": [],
    "migration.formats._ccompression": [],
    "migration.formats._cwalker": [],
    "migration.migrations.upgrade._crewrite": [],
}
# Set to 1 to install without the compiled core (as on a machine without a compiler).
SKIP_ENV = "KMIGRATE_NO_EXTENSION"
LAYOUT_SOURCE = Path("migration/formats/layout.py")
INT32_MAX = 2**31 - 1


def _say(message: str) -> None:
    # stderr reaches the user of pip/uv on a failure or with -v; the import says it again
    # (``python -m migration.formats.core``, ``kmigrate --version``).
    print(f"kmigrate: {message}", file=sys.stderr)


class OptionalBuildExt(build_ext):
    """build_ext that lets the compiled core fail to build instead of the whole install."""

    def run(self) -> None:
        try:
            super().run()
        except (PlatformError, ExecError, OSError) as exc:
            _say(f"compiled record core not built ({exc}); the pure-Python core will be used")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except (CCompilerError, CompileError, LinkError, ExecError, PlatformError, OSError) as exc:
            _say(f"compiled record core not built ({exc}); the pure-Python core will be used")


def _write_if_changed(path: Path, text: str) -> None:
    # Rewriting an unchanged file would move its mtime and make uv and make rebuild the core.
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def write_layout_modules(source: Path = LAYOUT_SOURCE) -> None:
    """Write ``_clayout.pxd`` (every upper-case int of layout.py as a C constant) and
    ``_clayout.pyx`` (the same as a dict under the same names) next to layout.py. layout.py
    imports nothing, so it is read by path: the build needs no package."""
    constants = {k: v for k, v in runpy.run_path(str(source)).items()
                 if k.isupper() and isinstance(v, int) and not isinstance(v, bool)}
    small = {k: v for k, v in constants.items() if -INT32_MAX - 1 <= v <= INT32_MAX}
    wide = {k: v for k, v in constants.items() if k not in small}
    head = (f"# Generated from {source.name} by setup.py at build time: edit {source.name}, not this file.\n"
            "# cython: language_level=3\n")
    pxd = [head, "from libc.stdint cimport int64_t\n\n", "cdef enum:\n"]
    pxd += [f"    {k} = {v}\n" for k, v in small.items()]
    if wide:  # a C enum holds an int: wider values are int64_t macros
        pxd.append('\ncdef extern from *:\n    """\n')
        pxd += [f"    #define KMIGRATE_{k} ((int64_t){v}LL)\n" for k, v in wide.items()]
        pxd.append('    """\n')
        pxd += [f'    int64_t {k} "KMIGRATE_{k}"\n' for k in wide]
    pyx = [head, "LAYOUT = {\n"] + [f'    "{k}": {k},\n' for k in constants] + ["}\n"]
    _write_if_changed(source.with_name("_clayout.pxd"), "".join(pxd))
    _write_if_changed(source.with_name("_clayout.pyx"), "".join(pyx))


def _extensions() -> list[Extension]:
    if os.environ.get(SKIP_ENV, "") not in ("", "0"):
        _say(f"{SKIP_ENV} is set: the compiled record core is not built")
        return []
    write_layout_modules()
    from Cython.Build import cythonize

    modules = [
        Extension(name, sources=[name.replace(".", "/") + ".pyx", *c_sources], include_dirs=[VENDOR],
                  extra_compile_args=["-O3", "-Wno-unused-function"])
        for name, c_sources in EXTENSIONS.items()
    ]
    directives = {
        "language_level": 3,
        "boundscheck": False,
        "wraparound": False,
        "cdivision": True,
        "initializedcheck": False,
        "embedsignature": True,
    }
    return cythonize(modules, build_dir="build/cython", compiler_directives=directives, quiet=True)


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
