"""Build of the compiled record core (the ``_c*.pyx`` modules of ``migration/formats`` and the
rewrite's ``migration/migrations/upgrade/_crewrite.pyx``, docs/architecture.md, "The record core").

Everything else of the package is declared in pyproject.toml. The extensions are optional: when
they cannot be compiled (no C compiler, no Python headers) the install goes on without them, says
so, and the package runs on its pure-Python core (``migration.formats.core`` picks the core at
import). Only a C compiler and the Python headers are needed: the CRC code is vendored in
``migration/formats/_cvendor`` (linked into ``_ccrc`` only: every other module checksums through
it). The C that Cython generates goes to ``build/`` (never committed).
"""

from __future__ import annotations

import os
import sys

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


def _extensions() -> list[Extension]:
    if os.environ.get(SKIP_ENV, "") not in ("", "0"):
        _say(f"{SKIP_ENV} is set: the compiled record core is not built")
        return []
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
