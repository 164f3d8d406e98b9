"""Crash-safe file writes and path helpers shared by the codecs of the format layer.

Every file and directory kmigrate persists, in a log dir, the backup root or its home, goes
through this module, so the durability rules live in one place (docs/architecture.md,
"Durability"). POSIX promises little after a power cut: a file's data only once the file is
fsynced, a directory entry (a created file or directory, a rename, a link, an unlink) only
once the directory holding it is fsynced. ext4's ordered mode keeps more, XFS and others do
not, and the tool runs on whatever file system the brokers use. So:

- ``durable_replace``: Kafka's own protocol for its checkpoint, properties and
  partition.metadata files (``Utils.atomicMoveWithFallback``): write ``<name><tmp suffix>``,
  fsync it, rename it over ``<name>``, fsync the directory. A failure removes the temporary
  file, so a failed write leaves the directory as it was.
- ``durable_mkdir``: ``mkdir -p`` whose every new directory is made durable in its parent,
  from the first one that already existed down (a lost directory loses all it holds).
- ``durable_unlink``: directory entries removed, each directory fsynced.
- ``durable_move``: a file or directory renamed to a name that is free, both directories
  fsynced.
- ``write_and_fsync``: a file's bytes made durable under the name they are written to; the
  caller fsyncs the directory before anything depends on the name (``fsync_dir``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import queue
import shutil
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from os import PathLike
from pathlib import Path
from typing import Any, Protocol

from migration.formats.errors import InvalidFileNameError
from migration.formats.names import LEFTOVER_SUFFIXES, offset_from_file_name

BytesLike = bytes | bytearray | memoryview
StrPath = str | PathLike[str]


FaultHook = Callable[[str], None]
"""Called with a step's name between the steps of a durable write (``written``: the
temporary file is complete and fsynced; ``renamed``: it has its final name, the directory is
not fsynced yet), so crash tests can stop a run there. The format layer names no fault
mechanism of its own: the runtime's ``fault_point`` is passed in by the layers above."""


def fsync_dir(path: StrPath) -> None:
    """fsync a directory so the entries created, renamed or removed in it are durable."""
    fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def durable_mkdir(path: StrPath) -> Path:
    """``mkdir -p`` that survives power loss: every directory it creates is fsynced into its
    parent, from the first one that already existed down, before it returns. Returns the
    path. An existing directory costs one ``stat``."""
    target = Path(path)
    if target.is_dir():
        return target
    missing: list[Path] = []
    p = target
    while not p.is_dir():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d)
        except FileExistsError:  # a concurrent creator (another Spark task); a file there is an error
            if not d.is_dir():
                raise
        fsync_dir(d.parent)
    return target


def write_all(fd: int, data_or_chunks: BytesLike | Iterable[BytesLike]) -> None:
    chunks: Iterable[BytesLike] = (
        (data_or_chunks,) if isinstance(data_or_chunks, bytes | bytearray | memoryview) else data_or_chunks
    )
    for chunk in chunks:
        view = memoryview(chunk).cast("B")
        while view:
            view = view[os.write(fd, view):]


def durable_replace(
    path: StrPath,
    content: BytesLike | Iterable[BytesLike] | Callable[[int], None],
    *,
    tmp_suffix: str | None = None,
    tmp_path: StrPath | None = None,
    exclusive: bool = False,
    no_clobber: bool = False,
    read_only: bool = False,
    times_ns: tuple[int, int] | None = None,
    fault: FaultHook | None = None,
) -> Path:
    """Make ``content`` the file ``path``, durably: temporary file, write, fsync, rename,
    fsync of the directory. Returns ``path``.

    ``content`` is one bytes-like object, an iterable of them (written in order, so a large
    file need not exist in memory) or a function that writes to the open file descriptor.
    The temporary file is ``path + tmp_suffix`` (default ``.tmp``) or ``tmp_path``, which may
    sit in another directory of the same file system (the file is then renamed across).
    ``exclusive`` refuses a temporary name that exists (a random name nobody else may hold);
    ``no_clobber`` refuses a ``path`` that exists (``FileExistsError``, the temporary file
    removed), by linking instead of renaming; ``read_only`` makes the file 0444 before its
    fsync, as Kafka's snapshot writer does; ``times_ns`` (atime, mtime) sets the times before
    the fsync, so they are as durable as the data. The parent directory must exist (see
    ``durable_mkdir``). If writing raises, the temporary file is removed and ``path`` is
    untouched."""
    target = Path(path)
    if tmp_path is not None:
        tmp = Path(tmp_path)
    else:
        suffix = ".tmp" if tmp_suffix is None else tmp_suffix
        if not suffix:
            # An empty suffix would make the "temporary" file the target itself.
            raise ValueError("tmp_suffix must not be empty")
        tmp = target.with_name(target.name + suffix)
    # Opened outside the clean-up below: an exclusive open that fails found another writer's
    # temporary file, which is not ours to remove.
    fd = _open_for_write(tmp, exclusive=exclusive)
    try:
        _fill_and_close(fd, content, read_only=read_only, times_ns=times_ns)
        if fault is not None:
            fault("written")
        if no_clobber:
            os.link(tmp, target)  # FileExistsError when the name is taken: nothing replaced
            os.unlink(tmp)
        else:
            os.replace(tmp, target)
    except BaseException:
        # Leave nothing behind: the target was never replaced.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if fault is not None:
        fault("renamed")
    fsync_dir(target.parent)
    if tmp.parent != target.parent:
        fsync_dir(tmp.parent)  # the temporary name's removal, so no stray name comes back
    return target


def durable_unlink(*paths: StrPath) -> list[Path]:
    """Remove ``paths`` (missing ones are skipped) and fsync each directory that lost an
    entry; returns the paths removed, in the order given."""
    removed = unlink_files(*paths)
    for d in {p.parent for p in removed}:
        fsync_dir(d)
    return removed


def unlink_files(*paths: StrPath) -> list[Path]:
    """Remove ``paths`` (missing ones are skipped) with no fsync: for names nothing relies on
    being gone after a power cut (a later sweep removes what comes back). Returns the paths
    removed, in the order given."""
    removed: list[Path] = []
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)
            removed.append(Path(p))
    return removed


def durable_move(src: StrPath, dst: StrPath) -> Path:
    """Rename ``src`` (a file or a directory) to ``dst``, a name nobody holds, on the same file
    system; fsync ``dst``'s directory, then ``src``'s when it is another: after a power cut
    the entry is under one name or the other, never lost. Returns ``dst``."""
    target = Path(dst)
    if target.exists():
        raise FileExistsError(errno.EEXIST, "a durable move does not replace", str(target))
    os.rename(src, target)
    fsync_dir(target.parent)
    if Path(src).parent.resolve() != target.parent.resolve():
        fsync_dir(Path(src).parent)
    return target


def durable_rmtree(*paths: StrPath) -> None:
    """Remove the directory trees ``paths`` (missing ones are skipped), then fsync each parent
    that lost an entry, once."""
    present = [Path(p) for p in paths if Path(p).exists()]
    remove_trees(*present)
    for d in {p.parent for p in present}:
        fsync_dir(d)


def remove_trees(*paths: StrPath) -> None:
    """Remove the directory trees ``paths`` with no fsync (what a power cut brings back is
    removed by the next call), quietly skipping what is missing or removed by another process
    meanwhile: for trees nothing reads any more (a retired stage)."""

    def gone_already(func: Callable[..., Any], path: str, exc_info: Any) -> None:
        if not isinstance(exc_info[1], FileNotFoundError):
            raise exc_info[1]

    for p in paths:
        shutil.rmtree(p, onerror=gone_already)


def files_under(path: StrPath) -> list[Path]:
    """Every regular file under ``path`` (not following links), quietly skipping directories
    removed by another process meanwhile (``os.walk`` ignores them)."""
    return [Path(d) / n for d, _, names in os.walk(path) for n in names if os.path.isfile(os.path.join(d, n))]


def fsync_file(path: StrPath) -> None:
    """fsync a file's data (and inode) by name: a copy made by another function."""
    fd = os.open(os.fspath(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_and_fsync(path: StrPath, data: BytesLike | Iterable[BytesLike], *, exclusive: bool,
                    times_ns: tuple[int, int] | None = None) -> None:
    """Write ``data`` to ``path`` and fsync it: durable bytes under a name that is not durable
    until the caller fsyncs the directory. ``exclusive`` fails if the file exists (a temporary
    name nobody else may hold); otherwise it is truncated. ``times_ns`` (atime, mtime) sets the
    times before the fsync, so they are as durable as the data."""
    _fill_and_close(_open_for_write(path, exclusive=exclusive), data, read_only=False, times_ns=times_ns)


def _open_for_write(path: StrPath, *, exclusive: bool) -> int:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    return os.open(os.fspath(path), flags, 0o644)


def _fill_and_close(fd: int, content: BytesLike | Iterable[BytesLike] | Callable[[int], None], *,
                    read_only: bool, times_ns: tuple[int, int] | None) -> None:
    """Write ``content`` to ``fd``, set mode and times, fsync, close: the one place a file's
    bytes are made durable (metadata before the fsync, so it is as durable as the data)."""
    try:
        if callable(content):
            content(fd)
        else:
            write_all(fd, content)
        if read_only:
            os.fchmod(fd, 0o444)
        if times_ns is not None:
            os.utime(fd, ns=times_ns)
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


class _Hasher(Protocol):
    def update(self, data: Any, /) -> object: ...


# Buffers of finished BackgroundWriters and read_ahead readers, by size, for the next ones of
# the process: a new one is zeroed, page by page on first touch (1-2 ms for three of 1 MiB on
# this project's machine; a rewrite of small segments opens a writer for each).
_POOL: dict[int, list[bytearray]] = {}
_POOL_LOCK = threading.Lock()
# per size: one writer's or reader's worth; a unit checksums its originals, then rewrites one
# output segment at a time
_POOL_KEPT = 3


def _take_buffer(size: int) -> bytearray:
    with _POOL_LOCK:
        kept = _POOL.get(size)
        if kept:
            return kept.pop()
    return bytearray(size)


def _give_back(buffers: list[bytearray]) -> None:
    with _POOL_LOCK:
        kept = _POOL.setdefault(len(buffers[0]), [])
        kept.extend(buffers[: _POOL_KEPT - len(kept)])


class BackgroundWriter:
    """A file written from a thread of its own, so that the copies into the page cache, the
    checksum and the writeback requests run while the caller goes on (on another core).

    ``write`` copies the caller's bytes into one of ``chunks`` buffers of ``chunk_bytes`` (the
    caller's bytes may be a view it reuses; the buffers serve the next writers of the process)
    and hands each full buffer to the thread, which updates ``hasher`` with it, writes it, and
    starts the disk writing each step of the file (``start_writeback``; steps double from
    ``first_step`` to ``max_step``). When every buffer is in the thread's hands, ``write``
    waits for one: memory stays bounded. The thread takes the GIL a few times per buffer, and a
    busy caller yields it only every few milliseconds, so buffers are not small; nor large: on
    this project's machine the kernel's copies of 8 MiB writes cost two to four times those of
    1 MiB writes of the same bytes (docs/benchmarks.md, "Fresh pages").

    ``close`` writes the rest, waits for the thread, and fsyncs: the file is durable when it
    returns, as with a plain write and fsync. A write error in the thread is raised by the next
    ``write`` or by ``close`` (nothing after it is written); ``abort`` drops what is pending and
    closes the file without an fsync. The file is created or truncated at construction."""

    def __init__(self, path: StrPath, *, chunk_bytes: int, chunks: int = 3, first_step: int, max_step: int,
                 hasher: _Hasher | None = None) -> None:
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._hasher = hasher
        self._free: queue.SimpleQueue[bytearray] = queue.SimpleQueue()
        self._full: queue.SimpleQueue[tuple[bytearray, int] | None] = queue.SimpleQueue()
        self._buffers = [_take_buffer(chunk_bytes) for _ in range(chunks)]
        for buf in self._buffers[1:]:
            self._free.put(buf)
        self._buf = self._buffers[0]
        self._fill = 0
        self._error: BaseException | None = None
        self._dropping = False
        self._done = False
        self._written = 0
        self._writeback_from = 0
        self._step = first_step
        self._max_step = max_step
        self._thread = threading.Thread(target=self._run, name=f"writer {Path(self.path).name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._full.get()) is not None:
            buf, n = item
            try:
                if self._error is None and not self._dropping:
                    self._write(memoryview(buf)[:n])
            except BaseException as e:  # raised in the caller's thread by write or close
                self._error = e
            finally:
                self._free.put(buf)

    def _write(self, view: memoryview) -> None:
        n = len(view)
        if self._hasher is not None:
            self._hasher.update(view)
        while view:
            view = view[os.write(self._fd, view):]
        self._written += n
        if self._written - self._writeback_from >= self._step:
            start_writeback(self._fd, self._writeback_from, self._written - self._writeback_from)
            self._writeback_from = self._written
            self._step = min(2 * self._step, self._max_step)

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _hand_off(self) -> None:
        self._full.put((self._buf, self._fill))
        self._buf = self._free.get()
        self._fill = 0
        self._raise_error()

    def write(self, data: BytesLike) -> None:
        """Append ``data``; it may be reused by the caller as soon as this returns."""
        if self._done:
            raise ValueError(f"{self.path}: written after close")
        view = memoryview(data).cast("B")
        buf, n, at = self._buf, len(view), 0
        while n - at:
            k = min(n - at, len(buf) - self._fill)
            buf[self._fill : self._fill + k] = view[at : at + k]
            self._fill += k
            at += k
            if self._fill == len(buf):
                self._hand_off()
                buf = self._buf

    def close(self, *, times_ns: tuple[int, int] | None = None) -> None:
        """Write what is left, wait for the thread, fsync and close: durable on return, with
        ``times_ns`` (atime, mtime) set before the fsync when given. On an error the file is
        closed (not fsynced) and the error raised."""
        if self._done:
            return
        try:
            if self._fill:
                self._full.put((self._buf, self._fill))
                self._fill = 0
            self._stop()
            self._raise_error()
            if times_ns is not None:
                os.utime(self._fd, ns=times_ns)
            os.fsync(self._fd)
        finally:
            self._close_fd()

    def abort(self) -> None:
        """Drop what is not written yet, wait for the thread and close the file, no fsync."""
        if self._done:
            return
        self._dropping = True
        try:
            self._stop()
        finally:
            self._close_fd()

    def _stop(self) -> None:
        self._done = True
        self._full.put(None)
        self._thread.join()
        _give_back(self._buffers)  # no one writes into them any more

    def _close_fd(self) -> None:
        self._done = True
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


def read_ahead(path: StrPath, *, chunk_bytes: int, chunks: int = 3) -> Iterator[memoryview]:
    """The bytes of the file at ``path``, ``chunk_bytes`` at a time (the last chunk shorter),
    read by a thread of its own while the caller uses the chunk before, so that the copies out
    of the page cache run on another core. Each chunk is a view of one of ``chunks`` buffers,
    valid until the caller asks for the next one (the buffer is then refilled). A read error is
    raised in the caller, in place of the chunk it was reading; closing the iterator early stops
    the thread. The buffers come from and go back to the process's set, as a BackgroundWriter's."""
    with open(path, "rb", buffering=0) as f:
        free: queue.SimpleQueue[bytearray | None] = queue.SimpleQueue()
        full: queue.SimpleQueue[tuple[bytearray, int] | BaseException] = queue.SimpleQueue()
        buffers = [_take_buffer(chunk_bytes) for _ in range(chunks)]
        for buf in buffers:
            free.put(buf)
        stop = threading.Event()

        def run() -> None:
            while (buf := free.get()) is not None and not stop.is_set():
                try:
                    n = f.readinto(buf)
                except BaseException as e:  # raised in the caller's thread
                    full.put(e)
                    return
                full.put((buf, n))
                if not n:
                    return

        thread = threading.Thread(target=run, name=f"reader {Path(path).name}", daemon=True)
        thread.start()
        try:
            while True:
                item = full.get()
                if isinstance(item, BaseException):
                    raise item
                buf, n = item
                if not n:
                    return
                yield memoryview(buf)[:n]
                free.put(buf)  # the caller is done with it
        finally:
            stop.set()
            free.put(None)
            thread.join()
            _give_back(buffers)
