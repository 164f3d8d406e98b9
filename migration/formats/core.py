"""The record core: the hot loops of the format layer behind one interface, in two
implementations (docs/architecture.md, "The record core"):

- ``migration.formats._ccore``, compiled (Cython + vendored C CRCs, built by setup.py): the
  default when it is built;
- ``migration.formats._pycore``, pure Python: the reference, and the fallback when the
  compiled core is not built or ``KMIGRATE_PURE_PYTHON=1`` is set.

Kernels: CRC-32 and CRC-32C; the fast walk of a wrapper's inner messages (``scan_inner``) and
of a v2 batch's records (``digest_v2``, ``check_v2``); the digest's canonical bytes of legacy
messages (``legacy_digest``); the conversions v0→v1 (``v0_entry_to_v1``, ``v0_entries_to_v1``)
and to v2 (``single_record_batch``, ``encode_records``). Each handles the regular case and
answers None on anything else; the format modules (``legacy.py``, ``record_batch.py``) then
hand the batch to their careful Python parser, so every error message and byte position is the
Python one whichever core is active. The compiled core adds :class:`SegmentWalker` (deep
validation of whole runs of regular batches, see :func:`segment_walker`).

The format modules call through :data:`impl` at each call (``core.impl.scan_inner(...)``), so
:func:`use` switches the core for the differential tests.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

from migration.formats import _pycore
from migration.formats import compression as codecs

PURE_PYTHON_ENV = "KMIGRATE_PURE_PYTHON"
COMPILED = "compiled"
PYTHON = "python"


def _load() -> tuple[ModuleType | None, str]:
    """The compiled module (or None) and why the Python core would be used instead."""
    try:
        from migration.formats import _ccore
    except ImportError as exc:
        return None, f"the compiled core is not built ({exc}); run `make venv` with gcc installed"
    return _ccore, ""


compiled, _unavailable = _load()
impl: ModuleType
reason: str  # why the Python core is active ("" when the compiled one is)


def _select(name: str) -> None:
    global impl, reason
    if name == COMPILED:
        if compiled is None:
            raise RuntimeError(_unavailable)
        impl, reason = compiled, ""
    elif name == PYTHON:
        impl = _pycore
        forced = os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")
        reason = f"{PURE_PYTHON_ENV}=1" if forced or compiled is not None else _unavailable
    else:
        raise ValueError(f"record core must be {COMPILED!r} or {PYTHON!r}, not {name!r}")
    _install_framing(impl is compiled)


def _install_framing(compiled_framing: bool) -> None:
    """The snappy and LZ4 framing and the gzip calls of the active core into compression.py's
    names (the compiled one frames one-block frames in C and calls libdeflate from C, and falls
    back to the Python ones for the rest)."""
    src: Any = compiled if compiled_framing else None
    codecs.snappy_compress = src.snappy_compress if src else codecs.snappy_compress_py
    codecs.snappy_decompress = src.snappy_decompress if src else codecs.snappy_decompress_py
    codecs.lz4_compress = src.lz4_compress if src else codecs.lz4_compress_py
    codecs.lz4_decompress = src.lz4_decompress if src else codecs.lz4_decompress_py
    gzip = src.gzip_library() if src else None
    codecs.gzip_decompress = src.gzip_decompress if gzip else codecs.gzip_decompress_py
    codecs.gzip_compress = src.gzip_compress if gzip else codecs.gzip_compress_py
    codecs.gzip_compiled = gzip


_select(PYTHON if compiled is None or os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0") else COMPILED)


def name() -> str:
    """``"compiled"`` or ``"python"``: the active core."""
    return str(impl.NAME)


def describe() -> str:
    """One line for ``kmigrate --version`` and ``make venv``."""
    if impl is compiled:
        hw = compiled.crc_features()
        return f"record core: compiled (CRC-32C {hw['crc32c']}, CRC-32 {hw['crc32']})"
    return f"record core: python ({reason})"


@contextlib.contextmanager
def use(core_name: str) -> Iterator[ModuleType]:
    """Run a block on one core (tests): ``with core.use("python"): ...``."""
    saved = impl, reason
    _select(core_name)
    try:
        yield impl
    finally:
        _restore(saved)


def _restore(saved: tuple[ModuleType, str]) -> None:
    global impl, reason
    impl, reason = saved
    _install_framing(impl is compiled)


def available() -> list[str]:
    """The cores this installation can run (the Python one always)."""
    return [PYTHON] + ([COMPILED] if compiled is not None else [])


def segment_walker(*, deep: bool, base_offset: int, next_base_offset: int | None,
                   offset_entries: Sequence[tuple[int, int]] = (), time_entries: Sequence[tuple[int, int]] = (),
                   leader_epochs: Sequence[tuple[int, int]] | None = None, **duties: Any) -> Any:
    """A :class:`_ccore.SegmentWalker` for ``logdir.validate.validate_segment`` (and, with the
    ``duties`` ``digest=True`` or ``target_magic=…``, for the digest and the rewrite in
    ``migrations/upgrade/rewrite.py``), or None on the Python core (or when a value does not
    fit int64): the caller then walks batch by batch."""
    walker_type = getattr(impl, "SegmentWalker", None)
    if walker_type is None:
        return None
    try:
        return walker_type(deep=deep, base_offset=base_offset, next_base_offset=next_base_offset,
                           offset_entries=offset_entries, time_entries=time_entries, leader_epochs=leader_epochs,
                           **duties)
    except OverflowError:
        return None


if __name__ == "__main__":  # `python -m migration.formats.core`: make venv says which core is active
    print(f"kmigrate {describe()}")
