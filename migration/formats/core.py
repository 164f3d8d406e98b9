"""The record core: the hot loops of the format layer behind one interface, in two
implementations (docs/architecture.md, "The record core"):

- compiled (Cython + vendored C CRCs, built by setup.py), one module per concern, each the twin
  of a Python module of this layer (``_protocols.py`` types each seam): ``_ccrc`` (CRC-32,
  CRC-32C), ``_clegacy`` (legacy.py's kernels), ``_crecord_batch`` (record_batch.py's),
  ``_ccompression`` (compression.py's framing and gzip), ``_cwalker`` (deep validation of runs
  of batches), ``_clayout`` (layout.py's constants); the default when it is built;
- ``migration.formats._pycore``, pure Python: the reference, and the fallback when the
  compiled core is not built or ``KMIGRATE_PURE_PYTHON=1`` is set.

Kernels: CRC-32 and CRC-32C; the fast walk of a wrapper's inner messages (``scan_inner``) and
of a v2 batch's records (``digest_v2``, ``check_v2``); the digest's canonical bytes of legacy
messages (``legacy_digest``); the conversions v0→v1 (``v0_entry_to_v1``, ``v0_entries_to_v1``)
and to v2 (``single_record_batch``, ``encode_records``). Each handles the regular case and
answers None on anything else; the format modules (``legacy.py``, ``record_batch.py``) then
hand the batch to their careful Python parser, so every error message and byte position is the
Python one whichever core is active. Each core also brings its codec functions
(``compression.Codecs``), which become compression.py's active ones with it. The compiled core
adds the segment walker (deep validation of whole runs of regular batches, see
:func:`segment_walker`), whose class a layer above may extend with duties of its own and name to
it (``walker_class``: the rewrite's conversion, ``migrations/upgrade/_crewrite.pyx``).

The format modules call through :data:`impl`, a :class:`RecordCore`, at each call
(``core.impl.scan_inner(...)``), so :func:`use` switches the core for the differential tests.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from migration.formats import _pycore
from migration.formats import compression as codecs
from migration.formats._protocols import (
    Buffer,
    CompressionKernels,
    CrcFunction,
    CrcKernels,
    LegacyKernels,
    RecordBatchKernels,
    ScanEntry,
    SegmentWalker,
    Span,
    WalkerType,
)
from migration.formats.model import Record

PURE_PYTHON_ENV = "KMIGRATE_PURE_PYTHON"
COMPILED = "compiled"
PYTHON = "python"


@dataclass(frozen=True, slots=True, eq=False)
class RecordCore:
    """One implementation of the kernels (the signatures of ``_protocols.py``), its codec
    functions and, compiled only, its segment walker class."""

    name: str
    crc32: CrcFunction
    crc32c: CrcFunction
    scan_inner: Callable[[Buffer, int, int, int | None], list[ScanEntry] | None]
    legacy_digest: Callable[[Buffer, Sequence[ScanEntry], list[bytes | memoryview], list[int]], None]
    v0_entry_to_v1: Callable[[Buffer, int, int, int, int], bytes]
    v0_entries_to_v1: Callable[[Buffer, Sequence[ScanEntry], int, int, int], bytes]
    digest_v2: Callable[[Buffer, int, int, int, int, int, int | None, list[bytes | memoryview], list[int]],
                        Span | None]
    check_v2: Callable[[Buffer, int, int, int, int, int], Span | None]
    encode_records: Callable[[Sequence[Record], int, int], tuple[bytes, int, int]]
    single_record_batch: Callable[[int, int, Buffer | None, Buffer | None, bool, int], bytes]
    codecs: codecs.Codecs
    walker_type: WalkerType | None

    @staticmethod
    def kernels(crc: CrcKernels, legacy: LegacyKernels, record_batch: RecordBatchKernels) -> dict[str, Any]:
        """The kernel fields, from the twin of each seam."""
        return {
            "crc32": crc.crc32, "crc32c": crc.crc32c,
            "scan_inner": legacy.scan_inner, "legacy_digest": legacy.legacy_digest,
            "v0_entry_to_v1": legacy.v0_entry_to_v1, "v0_entries_to_v1": legacy.v0_entries_to_v1,
            "digest_v2": record_batch.digest_v2, "check_v2": record_batch.check_v2,
            "encode_records": record_batch.encode_records, "single_record_batch": record_batch.single_record_batch,
        }


@dataclass(frozen=True, slots=True, eq=False)
class CompiledCore(RecordCore):
    """The compiled core: the kernels, and what only it has (the CRC instruction switch and work
    counts, its framing and gzip calls, the layout constants it was compiled with)."""

    crc_features: Callable[..., dict[str, str]]
    take_crc_counts: Callable[[], dict[str, int]]
    crc_pieces: Callable[[Buffer, int, bool], int]
    snappy_decompress: Callable[[codecs.Data], bytes]
    snappy_compress: Callable[[codecs.Data], bytes]
    lz4_decompress: Callable[[codecs.Data, int], bytes]
    lz4_compress: Callable[[codecs.Data, int], bytes]
    gzip_decompress: Callable[[codecs.Data], bytes]
    gzip_compress: Callable[[codecs.Data], bytes]
    gzip_library: Callable[[], str | None]
    gzip_unavailable: Callable[[], str]
    LAYOUT: dict[str, int]
    files: tuple[str, ...]

    @property
    def __file__(self) -> str:  # where the compiled modules were loaded from (the first of them)
        return self.files[0]


PYTHON_CORE = RecordCore(name=PYTHON, **RecordCore.kernels(_pycore, _pycore, _pycore), codecs=codecs.PYTHON_CODECS,
                         walker_type=None)


def _load() -> tuple[CompiledCore | None, str]:
    """The compiled core (or None) and why the Python core would be used instead."""
    try:
        from migration.formats import _ccompression, _ccrc, _clayout, _clegacy, _crecord_batch, _cwalker
    except ImportError as exc:
        return None, f"the compiled core is not built ({exc}); run `make venv` with gcc installed"
    framing: CompressionKernels = _ccompression
    return CompiledCore(
        name=COMPILED, **RecordCore.kernels(_ccrc, _clegacy, _crecord_batch), codecs=framing.CODECS,
        walker_type=_cwalker.SegmentWalker, crc_features=_ccrc.crc_features, take_crc_counts=_ccrc.take_crc_counts,
        crc_pieces=_ccrc.crc_pieces, snappy_decompress=framing.snappy_decompress,
        snappy_compress=framing.snappy_compress, lz4_decompress=framing.lz4_decompress,
        lz4_compress=framing.lz4_compress, gzip_decompress=framing.gzip_decompress,
        gzip_compress=framing.gzip_compress, gzip_library=framing.gzip_library,
        gzip_unavailable=framing.gzip_unavailable, LAYOUT=_clayout.LAYOUT,
        files=tuple(m.__file__ or "" for m in (_ccrc, _clayout, _clegacy, _crecord_batch, _ccompression, _cwalker)),
    ), ""


compiled, _unavailable = _load()
impl: RecordCore
reason: str  # why the Python core is active ("" when the compiled one is)


def _select(name: str) -> None:
    global impl, reason
    if name == COMPILED:
        if compiled is None:
            raise RuntimeError(_unavailable)
        impl, reason = compiled, ""
    elif name == PYTHON:
        impl = PYTHON_CORE
        forced = os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")
        reason = f"{PURE_PYTHON_ENV}=1" if forced or compiled is not None else _unavailable
    else:
        raise ValueError(f"record core must be {COMPILED!r} or {PYTHON!r}, not {name!r}")
    codecs.activate(impl.codecs)


_select(PYTHON if compiled is None or os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0") else COMPILED)


def name() -> str:
    """``"compiled"`` or ``"python"``: the active core."""
    return impl.name


def describe() -> str:
    """One line for ``kmigrate --version`` and ``make venv``."""
    if impl is compiled:
        hw = compiled.crc_features()
        return f"record core: compiled (CRC-32C {hw['crc32c']}, CRC-32 {hw['crc32']})"
    return f"record core: python ({reason})"


@contextlib.contextmanager
def use(core_name: str) -> Iterator[RecordCore]:
    """Run a block on one core (tests): ``with core.use("python"): ...``."""
    saved = impl, reason
    _select(core_name)
    try:
        yield impl
    finally:
        _restore(saved)


def _restore(saved: tuple[RecordCore, str]) -> None:
    global impl, reason
    impl, reason = saved
    codecs.activate(impl.codecs)


def available() -> list[str]:
    """The cores this installation can run (the Python one always)."""
    return [PYTHON] + ([COMPILED] if compiled is not None else [])


def segment_walker(*, deep: bool, base_offset: int, next_base_offset: int | None,
                   offset_entries: Sequence[tuple[int, int]] = (), time_entries: Sequence[tuple[int, int]] = (),
                   leader_epochs: Sequence[tuple[int, int]] | None = None, walker_class: WalkerType | None = None,
                   **duties: Any) -> Any:
    """A segment walker (``_cwalker.SegmentWalker``) for ``logdir.validate.validate_segment`` and,
    with ``digest=True``, for the digest; with ``walker_class`` (a subclass of it built by a layer
    above, which takes more duties: ``_crewrite.RewriteWalker`` and ``target_magic=…``, for
    ``rewrite_segment``), one of that class. None on the Python core (``walker_class`` is then
    not used), or when a value does not fit int64: the caller then walks batch by batch. Typed
    ``Any``: the class depends on the duties (``_protocols.SegmentWalker`` is what every one of
    them has)."""
    if impl.walker_type is None:
        return None
    walker_type = impl.walker_type if walker_class is None else walker_class
    try:
        walker: SegmentWalker = walker_type(
            deep=deep, base_offset=base_offset, next_base_offset=next_base_offset, offset_entries=offset_entries,
            time_entries=time_entries, leader_epochs=leader_epochs, **duties)
    except OverflowError:
        return None
    return walker


if __name__ == "__main__":  # `python -m migration.formats.core`: make venv says which core is active
    print(f"kmigrate {describe()}")
