"""Crash-safe file writes and path helpers shared by the codecs of the format layer.

Kafka's checkpoint, properties and partition.metadata writers use the same protocol
(``Utils.atomicMoveWithFallback``): write ``<name><tmp suffix>``, fsync it, rename it over
``<name>``, fsync the directory so the rename itself survives a crash. ``atomic_write`` does
exactly that and removes the temporary file when anything fails, so a failed write leaves the
directory as it was.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Callable, Iterable
from os import PathLike
from pathlib import Path

from migration.formats.errors import InvalidFileNameError
from migration.formats.names import LEFTOVER_SUFFIXES, offset_from_file_name

BytesLike = bytes | bytearray | memoryview
StrPath = str | PathLike[str]


def fsync_dir(path: StrPath) -> None:
    """fsync a directory so renames and creations inside it are durable."""
    fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(
    path: StrPath,
    data_or_chunks: BytesLike | Iterable[BytesLike],
    *,
    tmp_suffix: str,
    fsync: bool = True,
) -> None:
    """Write ``data_or_chunks`` to ``path`` via ``path + tmp_suffix``, fsync, rename, fsync dir.

    ``data_or_chunks`` is one bytes-like object or an iterable of them (written in order, so a
    large file need not exist in memory). If writing or iterating raises, the temporary file is
    removed and ``path`` is untouched.
    """
    if not tmp_suffix:
        # An empty suffix would make the "temporary" file the target itself.
        raise ValueError("tmp_suffix must not be empty")
    target = Path(path)
    tmp = target.with_name(target.name + tmp_suffix)
    chunks: Iterable[BytesLike] = (
        (data_or_chunks,) if isinstance(data_or_chunks, bytes | bytearray | memoryview) else data_or_chunks
    )
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            for chunk in chunks:
                view = memoryview(chunk).cast("B")
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        # Leave nothing behind: the target was never replaced.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if fsync:
        fsync_dir(target.parent)


def write_and_fsync(path: StrPath, data: BytesLike, *, exclusive: bool) -> None:
    """Write ``data`` to ``path`` and fsync it. ``exclusive`` fails if the file exists (a
    temporary name nobody else may hold); otherwise it is truncated."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(os.fspath(path), flags, 0o644)
    try:
        view = memoryview(data).cast("B")
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_bytes(path: StrPath) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def offset_from_path(path: StrPath, suffix: str) -> int:
    """The offset named by ``<digits><suffix>[.deleted|.cleaned|.swap|.tmp]``.

    Kafka parses the digits before the first ``.``; the suffix must be the one of the file
    kind being read (a ``.log`` handed to the index reader is a caller error worth catching).
    """
    name = Path(path).name
    try:
        offset = offset_from_file_name(name)
    except InvalidFileNameError as e:
        raise InvalidFileNameError(e.message, path=path, expected=e.expected, found=name) from None
    rest = name[name.index(".") :]
    for leftover in ("", *LEFTOVER_SUFFIXES):
        if rest == suffix + leftover:
            return offset
    raise InvalidFileNameError(
        f"not a {suffix} file name", path=path, expected=f"<20-digit offset>{suffix}", found=name
    )


# Linux's sync_file_range(2) flag: start writeback of the range's dirty pages, do not wait.
SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_SYNC_FILE_RANGE = _sync_file_range()


def start_writeback(fd: int, offset: int, nbytes: int) -> bool:
    """Ask the kernel to start writing ``nbytes`` at ``offset`` of ``fd`` to disk now, without
    waiting (Linux ``sync_file_range`` with ``SYNC_FILE_RANGE_WRITE``). Durability still needs
    ``fsync``: this only lets the disk work while the writer goes on, so that the final fsync
    waits for the tail, not the whole file. False where the call does not exist or fails."""
    if _SYNC_FILE_RANGE is None:
        return False
    return _SYNC_FILE_RANGE(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE) == 0
