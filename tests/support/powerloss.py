"""Power loss, modelled: record a run's system calls with strace, replay them on a model of the
file system, and build every state a power cut could leave (issue 31).

The crash tests that SIGKILL a process keep the page cache: whatever was written before the
kill is on disk. A power cut keeps only what was made durable, so this module:

1. **records** a command under ``strace -f`` (threads and child processes too), after taking
   a snapshot of a root directory (every directory, every file's bytes, its mode, mtime and
   hard links): the snapshot is the durable state before the run. Only operations on paths
   under the root are kept (the venv, Spark's /tmp, sockets and pipes are ignored).
2. **replays** the calls on a model that tracks inodes (a hard link shares its inode, a
   renamed file keeps it, a file descriptor keeps it after a rename or unlink), descriptor
   tables per process (shared by threads, copied by fork, closed on exec when close-on-exec)
   and file offsets (``write`` after ``lseek``, ``O_APPEND``, ``sendfile``/``copy_file_range``
   from the source's modelled bytes: ``shutil.copy2``). The model's final tree is compared
   with the real one after the run, so an operation it missed (an untraced call, a write
   through ``mmap``) fails the recording instead of producing wrong states.
3. **builds the crash states**: crash point ``k`` is the state after the first ``k``
   operations (``0``: before the first). A plain write changes nothing durable, so only the
   points after an entry operation (create, mkdir, rename, link, unlink, rmdir, symlink), an
   fsync or a sync are built; the others equal the point before them. Two rule sets:

   - ``ext4-ordered``: every entry operation up to ``k`` persists, in order. A file's bytes
     are its bytes at its last ``fsync``/``fdatasync`` before ``k``; a file never fsynced has
     the bytes of the initial snapshot, or none if the run created it. (ext4's ordered mode
     usually writes data back sooner; keeping only fsynced data is the pessimistic choice
     within that model.)
   - ``posix``: the same data rule, and an entry operation persists only when the directory
     holding the entry was fsynced after it (or ``sync``/``syncfs`` ran). A rename between
     directories is one operation of the *target* directory: it persists with that
     directory's fsync, and the source entry is gone then too, never before. A directory
     whose own entry is lost takes its whole subtree with it. The entry operations not yet
     persisted at ``k`` are *pending*, grouped by directory in the order they ran. Which of
     them a power cut keeps is unknown, except that, per directory, we take them to persist
     in order (a prefix). For ``m`` directories with pending operations the states built are:

       a. every pending operation lost;
       b. every pending operation kept (the ext4-ordered state);
       c. for each directory: its pending operations lost, every other directory's kept;
       d. for each directory and each proper prefix of its pending operations: that prefix
          kept, every other directory's operations lost;
       e. for each directory and each proper prefix: that prefix kept, every other
          directory's operations kept;
       f. for each directory (when ``m > 1``): all of its operations kept, the others lost.

     That is ``2 + 2m + 2 * sum(len - 1)`` states per point instead of the product of the
     prefix counts. Why it is enough for what a run's correctness hangs on: a state goes
     wrong when an operation that persisted relies on one that did not (a journal entry on a
     renamed file, a rename on a created directory, a document naming a backup). (a) and
     (c) lose each directory's unsynced work while keeping the most of everything else (a
     dependency of a kept directory on a lost one), (d) and (f) keep one directory's work
     with the least of the rest (a dependency the other way), and (d)/(e) cut every
     directory at every point of its own order. What is left out are the mixed states where
     two or more directories are each cut part-way: a fault there needs two unsynced
     dependencies at once, each of which (c)-(f) already exposes on its own.

   Identical states (same paths, kinds, bytes, modes and hard links) are judged once: a
   state keeps the list of every (model, point, variant) that produced it.
4. **materializes** a state (``materialize``): the root's contents are replaced by the
   state, at the same absolute paths as in the traced run (run documents name absolute
   paths), hard links as hard links, with modes and, where the model knows them, mtimes.

The judges shared by the scenario tests (Kafka's loader on a copy, a re-run, a rollback)
are at the end; each failure message names the model, the crash point, the last
operations before it, the entry operations a POSIX state lost, and what failed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

STRACE = "/usr/bin/strace"
EXT4 = "ext4-ordered"
POSIX = "posix"
MODELS = (EXT4, POSIX)

# What the model needs to see: everything that changes a file or a directory entry, every
# fsync, and what moves descriptors and offsets around (open/dup/close/lseek, process
# creation and exec). ``read`` is left out on purpose: its data would swamp the trace; a file
# read and then written through the same descriptor would show up in the final comparison.
TRACED_CALLS = (
    "open", "openat", "openat2", "creat", "close", "dup", "dup2", "dup3", "fcntl", "lseek",
    "write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate", "truncate", "fallocate",
    "sendfile", "copy_file_range",
    "rename", "renameat", "renameat2", "link", "linkat", "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir",
    "symlink", "symlinkat", "utimensat", "fchmod", "chmod", "fchmodat",
    "fsync", "fdatasync", "sync", "syncfs",
    "clone", "clone3", "fork", "vfork", "execve", "chdir", "fchdir",
)
STRING_LIMIT = 1 << 26  # strace's -s: no write is ever shown cut short (checked on parsing)

ENTRY_KINDS = frozenset({"create", "mkdir", "symlink", "link", "rename", "exchange", "unlink", "rmdir"})
DURABILITY_KINDS = frozenset({"fsync", "sync"})


class TraceError(AssertionError):
    """The trace holds something the model cannot replay faithfully: the recording is refused."""


# ---------------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class FileVersion:
    """A file's bytes and mode at one moment (its last fsync, or the snapshot)."""

    data: bytes
    mode: int
    mtime_ns: int | None = None
    digest: str = ""

    @staticmethod
    def of(data: bytes, mode: int, mtime_ns: int | None = None) -> FileVersion:
        return FileVersion(data, mode, mtime_ns, hashlib.blake2b(data, digest_size=16).hexdigest())


@dataclass(frozen=True)
class FileEntry:
    version: FileVersion
    inode: int  # equal inodes: hard links


@dataclass(frozen=True)
class SymlinkEntry:
    target: str


class _Dir:
    """The one directory entry value (directories carry nothing else in a state)."""

    def __repr__(self) -> str:
        return "DIR"


DIR = _Dir()
Entry = FileEntry | SymlinkEntry | _Dir


@dataclass
class Op:
    """One replayed operation on the model, 1-based ``index`` in the recording."""

    index: int
    kind: str  # create mkdir symlink link rename exchange unlink rmdir | write truncate | fsync sync
    pid: int
    text: str  # what it did, paths relative to the root
    dir: int = -1  # the directory whose entry changes (a rename's target directory)
    name: str = ""
    inode: int = -1
    src_dir: int = -1
    src_name: str = ""
    src_inode: int = -1  # exchange: the inode that moves to the source name
    version: FileVersion | None = None  # fsync: the file then; create: the empty new file
    versions: dict[int, FileVersion] | None = None  # sync: every file then


@dataclass
class CrashState:
    model: str
    point: int  # after this many operations
    variant: str
    lost: tuple[int, ...]  # indexes of the entry operations this state lost (posix)
    entries: dict[str, Entry]
    digest: str
    also: list[tuple[str, int, str]] = field(default_factory=list)

    def label(self) -> str:
        return f"{self.model} model, crash point {self.point} ({self.variant})"

    def files(self, under: str = "") -> dict[str, bytes]:
        """relative path (to ``under``) -> bytes of every file under ``under``."""
        prefix = under.rstrip("/") + "/" if under else ""
        return {p[len(prefix):]: e.version.data for p, e in self.entries.items()
                if isinstance(e, FileEntry) and p.startswith(prefix)}

    def names(self, under: str = "") -> list[str]:
        prefix = under.rstrip("/") + "/" if under else ""
        return sorted(p[len(prefix):] for p in self.entries if p.startswith(prefix))


@dataclass
class Snapshot:
    """A tree as it was: relative path -> entry (inodes numbered in walk order)."""

    entries: dict[str, Entry]

    def files(self, under: str = "") -> dict[str, bytes]:
        return CrashState(EXT4, 0, "", (), self.entries, "").files(under)


def snapshot(root: str | os.PathLike[str]) -> Snapshot:
    """Every directory, file (bytes, mode, mtime, hard links) and symlink under ``root``."""
    root = Path(root)
    entries: dict[str, Entry] = {}
    inodes: dict[tuple[int, int], int] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            st = p.lstat()
            if stat.S_ISDIR(st.st_mode):
                entries[rel] = DIR
            elif stat.S_ISLNK(st.st_mode):
                entries[rel] = SymlinkEntry(os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                ino = inodes.setdefault((st.st_dev, st.st_ino), len(inodes) + 1)
                entries[rel] = FileEntry(FileVersion.of(p.read_bytes(), stat.S_IMODE(st.st_mode), st.st_mtime_ns), ino)
    return Snapshot(entries)


def wipe(root: str | os.PathLike[str]) -> None:
    """Remove everything inside ``root`` (not ``root`` itself)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def materialize(state: CrashState | Snapshot, root: str | os.PathLike[str], *, subtree: str = "",
                dest: str | os.PathLike[str] | None = None) -> None:
    """Replace the contents of ``root`` with ``state`` (or, with ``subtree``, write only what
    is under that relative path into ``dest``, whose contents are replaced)."""
    out = Path(dest) if dest is not None else Path(root)
    wipe(out)
    prefix = subtree.rstrip("/") + "/" if subtree else ""
    first_path: dict[int, tuple[Path, FileEntry]] = {}
    # Parents before children; modes and times once every link of a file is in place.
    for rel in sorted(state.entries, key=lambda r: (r.count("/"), r)):
        if prefix and not rel.startswith(prefix):
            continue
        entry = state.entries[rel]
        p = out / rel[len(prefix):]
        if entry is DIR:
            p.mkdir()
        elif isinstance(entry, SymlinkEntry):
            os.symlink(entry.target, p)
        elif isinstance(entry, FileEntry):
            if entry.inode in first_path:
                os.link(first_path[entry.inode][0], p)
            else:
                p.write_bytes(entry.version.data)
                first_path[entry.inode] = (p, entry)
    for p, entry in first_path.values():
        if entry.version.mtime_ns is not None:
            os.utime(p, ns=(entry.version.mtime_ns, entry.version.mtime_ns))
        os.chmod(p, entry.version.mode)


def tree_files(root: str | os.PathLike[str]) -> dict[str, bytes]:
    """relative path -> bytes of every file under ``root`` (what a rollback must restore)."""
    root = Path(root)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------------- trace parsing


@dataclass
class _Event:
    line: int
    pid: int
    name: str
    args: list[str]
    ret: str


_HEAD = re.compile(r"^(\d+)\s+(.*)$")
_CALL = re.compile(r"^([a-z_0-9]+)\((.*)$", re.S)
_RESUMED = re.compile(r"^<\.\.\. ([a-z_0-9]+) resumed>(.*)$", re.S)
_RESULT = re.compile(r"\)\s+= ")
_UNFINISHED = " <unfinished ...>"
_HEX_STRING = re.compile(r'^"((?:\\x[0-9a-f]{2})*)"(\.\.\.)?$')
# "(deleted)" after the path: the file was unlinked while open (the JVM's hsperfdata file at its exit)
_FD = re.compile(r"^(-?\d+|AT_FDCWD)(?:<(.*)>(?:\(deleted\))?)?$", re.S)
_HEX_ONLY = re.compile(r"^(?:\\x[0-9a-f]{2})+$")
_COMMENT = re.compile(r"/\*.*?\*/")


def _unhex(s: str) -> bytes:
    return bytes.fromhex(s.replace("\\x", ""))


def _split_args(s: str) -> list[str]:
    """Top-level arguments of a call (strings hold only \\xNN with -xx: no quotes or commas)."""
    s = _COMMENT.sub("", s)
    out, depth, start, in_str = [], 0, 0, False
    for i, c in enumerate(s):
        if c == '"':
            in_str = not in_str
        elif in_str:
            continue
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(s[start:i].strip())
            start = i + 1
    tail = s[start:].strip()
    if tail:
        out.append(tail)
    return out


def parse_trace(path: str | os.PathLike[str]) -> list[_Event]:
    """The completed calls of an ``strace -f -xx -y`` output file, unfinished calls joined to
    their resumption, in the order they completed."""
    events: list[_Event] = []
    pending: dict[int, tuple[int, str, str]] = {}
    with open(path, encoding="latin-1") as f:
        for lineno, raw in enumerate(f, 1):
            m = _HEAD.match(raw.rstrip("\n"))
            if not m:
                continue
            pid, rest = int(m.group(1)), m.group(2)
            if rest.startswith(("---", "+++")):
                continue
            r = _RESUMED.match(rest)
            if r:
                if pid not in pending:
                    continue
                line0, name, head = pending.pop(pid)
                body = head + r.group(2)
            else:
                c = _CALL.match(rest)
                if not c:
                    continue
                name, body, line0 = c.group(1), c.group(2), lineno
                if body.endswith(_UNFINISHED):
                    pending[pid] = (lineno, name, body[: -len(_UNFINISHED)])
                    continue
            results = list(_RESULT.finditer(body))
            if not results:
                continue  # killed inside the call: it never returned
            cut = results[-1]
            events.append(_Event(line0, pid, name, _split_args(body[: cut.start()]), body[cut.end():].strip()))
    return events


def _string(arg: str) -> bytes:
    m = _HEX_STRING.match(arg)
    if not m:
        raise TraceError(f"not a -xx string: {arg[:80]}")
    if m.group(2):
        raise TraceError("a string shown cut short: raise STRING_LIMIT")
    return _unhex(m.group(1))


def _decoration(text: str | None) -> str | None:
    if text is None:
        return None
    return os.fsdecode(_unhex(text)) if _HEX_ONLY.match(text) else text


def _fd(arg: str) -> tuple[int | None, str | None]:
    """(fd or None for AT_FDCWD, its decorated path) of an fd argument or result."""
    m = _FD.match(arg)
    if not m:
        raise TraceError(f"not an fd: {arg[:400]}")
    fd = None if m.group(1) == "AT_FDCWD" else int(m.group(1))
    return fd, _decoration(m.group(2))


def _retval(ret: str) -> int | None:
    """The call's result, None when it failed."""
    m = re.match(r"^(-?\d+|0x[0-9a-f]+)", ret)
    if not m:
        return None
    v = int(m.group(1), 0)
    return None if v < 0 else v


def _int(arg: str) -> int:
    """A number as strace prints it: decimal, 0x hex, or 0-prefixed octal (modes)."""
    text = arg.split()[0]
    if len(text) > 1 and text.startswith("0") and text[1].isdigit():
        return int(text, 8)
    return int(text, 0)


# ---------------------------------------------------------------------------------------- replay


@dataclass
class _Ofd:
    """An open file description: shared by dup'ed and inherited descriptors."""

    inode: int | None  # None: outside the root
    path: str
    pos: int = 0
    append: bool = False


@dataclass
class _Fd:
    ofd: _Ofd
    cloexec: bool


class _Replay:
    """Turns trace events into model operations on inodes, keeping the live tree."""

    def __init__(self, root: Path, initial: Snapshot, cwd: Path) -> None:
        self.root = str(root)
        self.cwd0 = str(cwd)
        self.children: dict[int, dict[str, int]] = {0: {}}
        self.kind: dict[int, str] = {0: "d"}
        self.content: dict[int, bytearray] = {}
        self.mode: dict[int, int] = {}
        self.mtime: dict[int, int | None] = {}
        self.target: dict[int, str] = {}
        self.dir_path: dict[int, str] = {0: "."}
        self.initial_versions: dict[int, FileVersion] = {}
        self.next_inode = 1
        snap_inode: dict[int, int] = {}
        for rel, entry in sorted(initial.entries.items(), key=lambda kv: (kv[0].count("/"), kv[0])):
            parent, name = self._lookup_parent(rel)
            assert parent is not None
            if entry is DIR:
                ino = self._new("d")
                self.children[ino] = {}
                self.dir_path[ino] = rel
            elif isinstance(entry, SymlinkEntry):
                ino = self._new("l")
                self.target[ino] = entry.target
            else:
                assert isinstance(entry, FileEntry)
                if entry.inode in snap_inode:
                    ino = snap_inode[entry.inode]
                else:
                    ino = snap_inode[entry.inode] = self._new("f")
                    self.content[ino] = bytearray(entry.version.data)
                    self.mode[ino] = entry.version.mode
                    self.mtime[ino] = entry.version.mtime_ns
                    self.initial_versions[ino] = entry.version
            self.children[parent][name] = ino
        self.initial_entries = {(d, n): i for d, ch in self.children.items() for n, i in ch.items()}
        self.ops: list[Op] = []
        self.tables: dict[int, dict[int, _Fd]] = {}
        self.cwds: dict[int, str] = {}
        self.clones: dict[int, tuple[int, bool]] = {}

    # -- the live tree

    def _new(self, kind: str) -> int:
        ino = self.next_inode
        self.next_inode += 1
        self.kind[ino] = kind
        return ino

    def rel(self, path: str) -> str | None:
        """``path`` relative to the root, ``"."`` for the root, None outside it."""
        if path == self.root:
            return "."
        if path.startswith(self.root + "/"):
            return path[len(self.root) + 1:]
        return None

    def _lookup_parent(self, rel: str) -> tuple[int | None, str]:
        parts = rel.split("/")
        d: int | None = 0
        for part in parts[:-1]:
            if d is None:
                break
            nxt = self.children.get(d, {}).get(part)
            d = nxt if nxt is not None and self.kind[nxt] == "d" else None
        return d, parts[-1]

    def lookup(self, path: str) -> int | None:
        rel = self.rel(path)
        if rel is None:
            return None
        if rel == ".":
            return 0
        d, name = self._lookup_parent(rel)
        return None if d is None else self.children[d].get(name)

    def _parent_of(self, path: str, ev: _Event) -> tuple[int, str] | None:
        """(directory inode, name) of a path under the root; None outside it."""
        rel = self.rel(path)
        if rel is None or rel == ".":
            return None
        d, name = self._lookup_parent(rel)
        if d is None:
            raise TraceError(f"line {ev.line}: {ev.name} under a directory the model does not have: {rel}")
        return d, name

    def _emit(self, ev: _Event, kind: str, text: str, **kw: Any) -> Op:
        op = Op(index=len(self.ops) + 1, kind=kind, pid=ev.pid, text=f"{kind} {text}", **kw)
        self.ops.append(op)
        return op

    # -- processes

    def _table(self, pid: int) -> dict[int, _Fd]:
        if pid not in self.tables:
            parent = self.clones.get(pid)
            if parent is None:
                self.tables[pid] = {}
                self.cwds.setdefault(pid, self.cwd0)
            else:
                ppid, shared = parent
                ptable = self._table(ppid)
                self.tables[pid] = ptable if shared else {fd: _Fd(e.ofd, e.cloexec) for fd, e in ptable.items()}
                self.cwds.setdefault(pid, self.cwds.get(ppid, self.cwd0))
        return self.tables[pid]

    def _abs(self, ev: _Event, dirfd_arg: str | None, path_arg: str) -> str:
        path = os.fsdecode(_string(path_arg))
        if os.path.isabs(path):
            return os.path.normpath(path)
        base = None
        if dirfd_arg is not None:
            fd, deco = _fd(dirfd_arg)
            if fd is None and deco is not None:
                self.cwds[ev.pid] = deco
            base = deco
        if base is None:
            self._table(ev.pid)
            base = self.cwds.get(ev.pid, self.cwd0)
        return os.path.normpath(os.path.join(base, path))

    def _fd_inode(self, ev: _Event, arg: str) -> tuple[_Ofd | None, str | None]:
        fd, deco = _fd(arg)
        entry = self._table(ev.pid).get(fd) if fd is not None else None
        if entry is None:
            if deco is not None and self.rel(deco.removesuffix(" (deleted)")) is not None:
                raise TraceError(f"line {ev.line}: {ev.name} on fd {fd} ({deco}) the model never saw opened")
            return None, deco
        return entry.ofd, deco

    # -- data

    def _write_at(self, ino: int, pos: int, data: bytes) -> None:
        buf = self.content[ino]
        if pos > len(buf):
            buf.extend(b"\0" * (pos - len(buf)))
        buf[pos:pos + len(data)] = data
        self.mtime[ino] = None

    def _data_op(self, ev: _Event, ino: int, text: str) -> None:
        self._emit(ev, "write", text, inode=ino)

    def _name(self, ino: int) -> str:
        for d, ch in self.children.items():
            for n, i in ch.items():
                if i == ino:
                    return n if d == 0 else f"{self.dir_path.get(d, '?')}/{n}"
        return f"<inode {ino}, no name>"

    # -- events

    def run(self, events: list[_Event]) -> None:
        for ev in events:
            if ev.name in ("clone", "clone3", "fork", "vfork"):
                child = _retval(ev.ret)
                if child:
                    self.clones[child] = (ev.pid, "CLONE_FILES" in ",".join(ev.args) and ev.name.startswith("clone"))
        for ev in events:
            handler = getattr(self, "_on_" + ev.name, None)
            if handler is None:
                continue
            if ev.name not in ("clone", "clone3", "fork", "vfork") and _retval(ev.ret) is None:
                continue  # a failed call changed nothing
            handler(ev)

    def _on_clone(self, ev: _Event) -> None:
        child = _retval(ev.ret)
        if child and child not in self.tables:
            self._table(child)

    _on_clone3 = _on_fork = _on_vfork = _on_clone

    def _on_execve(self, ev: _Event) -> None:
        table = self._table(ev.pid)
        for fd in [fd for fd, e in table.items() if e.cloexec]:
            del table[fd]

    def _on_chdir(self, ev: _Event) -> None:
        self.cwds[ev.pid] = self._abs(ev, None, ev.args[0])

    def _on_fchdir(self, ev: _Event) -> None:
        _, deco = _fd(ev.args[0])
        if deco:
            self.cwds[ev.pid] = deco

    def _open(self, ev: _Event, flags: str, mode_arg: str | None) -> None:
        fd, path = _fd(ev.ret)
        if fd is None or path is None:
            raise TraceError(f"line {ev.line}: {ev.name} without a decorated result (-y)")
        table = self._table(ev.pid)
        cloexec = "O_CLOEXEC" in flags
        rel = self.rel(path.removesuffix(" (deleted)"))
        if rel is None:
            table[fd] = _Fd(_Ofd(None, path), cloexec)
            return
        if "O_TMPFILE" in flags:
            raise TraceError(f"line {ev.line}: O_TMPFILE under the root is not modelled")
        ino = self.lookup(path)
        if ino is None:
            if "O_CREAT" not in flags:
                raise TraceError(f"line {ev.line}: {rel} opened, but the model has no such file")
            where = self._parent_of(path, ev)
            assert where is not None
            ino = self._new("f")
            self.content[ino] = bytearray()
            self.mode[ino] = (_int(mode_arg) if mode_arg else 0o644) & ~0o022
            self.mtime[ino] = None
            self.children[where[0]][where[1]] = ino
            self._emit(ev, "create", rel, dir=where[0], name=where[1], inode=ino,
                       version=FileVersion.of(b"", self.mode[ino]))
        elif "O_TRUNC" in flags and self.kind[ino] == "f" and self.content[ino] and (
                "O_WRONLY" in flags or "O_RDWR" in flags):
            self.content[ino] = bytearray()
            self.mtime[ino] = None
            self._emit(ev, "truncate", f"{rel} to 0 (O_TRUNC)", inode=ino)
        table[fd] = _Fd(_Ofd(ino, path, 0, "O_APPEND" in flags), cloexec)

    def _on_open(self, ev: _Event) -> None:
        self._open(ev, ev.args[1], ev.args[2] if len(ev.args) > 2 else None)

    def _on_openat(self, ev: _Event) -> None:
        self._open(ev, ev.args[2], ev.args[3] if len(ev.args) > 3 else None)

    def _on_openat2(self, ev: _Event) -> None:
        how = ev.args[2]
        m = re.search(r"mode=(0\d*)", how)
        self._open(ev, how, m.group(1) if m else None)

    def _on_creat(self, ev: _Event) -> None:
        self._open(ev, "O_CREAT|O_WRONLY|O_TRUNC", ev.args[1])

    def _on_close(self, ev: _Event) -> None:
        fd, _ = _fd(ev.args[0])
        if fd is not None:
            self._table(ev.pid).pop(fd, None)

    def _dup(self, ev: _Event, old_arg: str, cloexec: bool) -> None:
        old, _ = _fd(old_arg)
        new, _ = _fd(ev.ret)
        table = self._table(ev.pid)
        if old is None or new is None:
            return
        if old in table:
            table[new] = _Fd(table[old].ofd, cloexec)
        else:
            table.pop(new, None)

    def _on_dup(self, ev: _Event) -> None:
        self._dup(ev, ev.args[0], False)

    _on_dup2 = _on_dup

    def _on_dup3(self, ev: _Event) -> None:
        self._dup(ev, ev.args[0], "O_CLOEXEC" in ev.args[2])

    def _on_fcntl(self, ev: _Event) -> None:
        cmd = ev.args[1]
        if cmd in ("F_DUPFD", "F_DUPFD_CLOEXEC"):
            self._dup(ev, ev.args[0], cmd == "F_DUPFD_CLOEXEC")
        elif cmd == "F_SETFD":
            fd, _ = _fd(ev.args[0])
            entry = self._table(ev.pid).get(fd) if fd is not None else None
            if entry is not None:
                entry.cloexec = "FD_CLOEXEC" in ev.args[2]

    def _on_lseek(self, ev: _Event) -> None:
        ofd, _ = self._fd_inode(ev, ev.args[0])
        pos = _retval(ev.ret)
        if ofd is not None and pos is not None:
            ofd.pos = pos

    def _write(self, ev: _Event, fd_arg: str, data: bytes, offset: int | None) -> None:
        ofd, _ = self._fd_inode(ev, fd_arg)
        n = _retval(ev.ret) or 0
        if ofd is None or ofd.inode is None or n == 0:
            return
        ino = ofd.inode
        if self.kind[ino] != "f":
            raise TraceError(f"line {ev.line}: {ev.name} to a non-file under the root")
        data = data[:n]
        if offset is None:
            pos = len(self.content[ino]) if ofd.append else ofd.pos
            ofd.pos = pos + n
        else:
            pos = offset
        self._write_at(ino, pos, data)
        self._data_op(ev, ino, f"{n} bytes at {pos} of {self._name(ino)}")

    def _on_write(self, ev: _Event) -> None:
        self._write(ev, ev.args[0], _string(ev.args[1]), None)

    def _on_pwrite64(self, ev: _Event) -> None:
        self._write(ev, ev.args[0], _string(ev.args[1]), _int(ev.args[3]))

    @staticmethod
    def _iov(arg: str) -> bytes:
        return b"".join(_string(s) for s in re.findall(r'iov_base=("(?:\\x[0-9a-f]{2})*"(?:\.\.\.)?)', arg))

    def _on_writev(self, ev: _Event) -> None:
        self._write(ev, ev.args[0], self._iov(ev.args[1]), None)

    def _on_pwritev(self, ev: _Event) -> None:
        self._write(ev, ev.args[0], self._iov(ev.args[1]), _int(ev.args[3]))

    _on_pwritev2 = _on_pwritev

    def _truncate(self, ev: _Event, ino: int | None, length: int) -> None:
        if ino is None:
            return
        buf = self.content[ino]
        if length < len(buf):
            del buf[length:]
        else:
            buf.extend(b"\0" * (length - len(buf)))
        self.mtime[ino] = None
        self._emit(ev, "truncate", f"{self._name(ino)} to {length}", inode=ino)

    def _on_ftruncate(self, ev: _Event) -> None:
        ofd, _ = self._fd_inode(ev, ev.args[0])
        self._truncate(ev, ofd.inode if ofd else None, _int(ev.args[1]))

    def _on_truncate(self, ev: _Event) -> None:
        self._truncate(ev, self.lookup(self._abs(ev, None, ev.args[0])), _int(ev.args[1]))

    def _on_fallocate(self, ev: _Event) -> None:
        ofd, _ = self._fd_inode(ev, ev.args[0])
        if ofd is None or ofd.inode is None:
            return
        mode, off, length = ev.args[1], _int(ev.args[2]), _int(ev.args[3])
        buf = self.content[ofd.inode]
        if "FALLOC_FL_PUNCH_HOLE" in mode or "FALLOC_FL_ZERO_RANGE" in mode:
            end = min(off + length, len(buf))
            buf[off:end] = b"\0" * max(0, end - off)
        if "FALLOC_FL_KEEP_SIZE" not in mode and off + length > len(buf):
            buf.extend(b"\0" * (off + length - len(buf)))
        self._emit(ev, "truncate", f"fallocate {self._name(ofd.inode)} {mode} {off}+{length}", inode=ofd.inode)

    def _source_bytes(self, ev: _Event, ofd: _Ofd | None, deco: str | None, offset: int | None, n: int) -> bytes:
        if ofd is not None and ofd.inode is not None:
            data = bytes(self.content[ofd.inode])
        elif deco is not None and os.path.isfile(deco):
            data = Path(deco).read_bytes()  # outside the root: nothing there changes during the run
        else:
            raise TraceError(f"line {ev.line}: {ev.name} from an unknown source {deco}")
        start = offset if offset is not None else (ofd.pos if ofd is not None else 0)
        if offset is None and ofd is not None:
            ofd.pos = start + n
        return data[start:start + n]

    @staticmethod
    def _offset_ptr(arg: str) -> int | None:
        m = re.match(r"^\[(\d+)\]", arg)
        return int(m.group(1)) if m else None

    def _copy(self, ev: _Event, out_arg: str, out_off: int | None, in_arg: str, in_off: int | None) -> None:
        n = _retval(ev.ret) or 0
        out, _ = self._fd_inode(ev, out_arg)
        if n == 0 or out is None or out.inode is None:
            return
        src, deco = self._fd_inode(ev, in_arg)
        data = self._source_bytes(ev, src, deco, in_off, n)
        pos = out_off if out_off is not None else (len(self.content[out.inode]) if out.append else out.pos)
        if out_off is None:
            out.pos = pos + n
        self._write_at(out.inode, pos, data)
        self._data_op(ev, out.inode, f"{n} bytes at {pos} of {self._name(out.inode)} ({ev.name})")

    def _on_sendfile(self, ev: _Event) -> None:
        self._copy(ev, ev.args[0], None, ev.args[1], self._offset_ptr(ev.args[2]))

    def _on_copy_file_range(self, ev: _Event) -> None:
        self._copy(ev, ev.args[2], self._offset_ptr(ev.args[3]), ev.args[0], self._offset_ptr(ev.args[1]))

    # -- entries

    def _link_new(self, ev: _Event, kind: str, path: str, ino: int, text: str, **kw: Any) -> None:
        where = self._parent_of(path, ev)
        if where is None:
            return
        self.children[where[0]][where[1]] = ino
        self._emit(ev, kind, text, dir=where[0], name=where[1], inode=ino, **kw)

    def _mkdir(self, ev: _Event, path: str) -> None:
        rel = self.rel(path)
        if rel is None:
            return
        ino = self._new("d")
        self.children[ino] = {}
        self.dir_path[ino] = rel
        self._link_new(ev, "mkdir", path, ino, rel)

    def _on_mkdir(self, ev: _Event) -> None:
        self._mkdir(ev, self._abs(ev, None, ev.args[0]))

    def _on_mkdirat(self, ev: _Event) -> None:
        self._mkdir(ev, self._abs(ev, ev.args[0], ev.args[1]))

    def _symlink(self, ev: _Event, target: str, path: str) -> None:
        rel = self.rel(path)
        if rel is None:
            return
        ino = self._new("l")
        self.target[ino] = target
        self._link_new(ev, "symlink", path, ino, f"{rel} -> {target}")

    def _on_symlink(self, ev: _Event) -> None:
        self._symlink(ev, os.fsdecode(_string(ev.args[0])), self._abs(ev, None, ev.args[1]))

    def _on_symlinkat(self, ev: _Event) -> None:
        self._symlink(ev, os.fsdecode(_string(ev.args[0])), self._abs(ev, ev.args[1], ev.args[2]))

    def _link(self, ev: _Event, src: str, dst: str) -> None:
        if self.rel(dst) is None:
            return
        ino = self.lookup(src)
        if ino is None:
            raise TraceError(f"line {ev.line}: link from {src}, which the model does not have")
        self._link_new(ev, "link", dst, ino, f"{self.rel(src)} -> {self.rel(dst)}")

    def _on_link(self, ev: _Event) -> None:
        self._link(ev, self._abs(ev, None, ev.args[0]), self._abs(ev, None, ev.args[1]))

    def _on_linkat(self, ev: _Event) -> None:
        if "AT_EMPTY_PATH" in ev.args[4]:
            raise TraceError(f"line {ev.line}: linkat(AT_EMPTY_PATH) is not modelled")
        self._link(ev, self._abs(ev, ev.args[0], ev.args[1]), self._abs(ev, ev.args[2], ev.args[3]))

    def _remove(self, ev: _Event, path: str, kind: str) -> None:
        where = self._parent_of(path, ev)
        if where is None:
            return
        ino = self.children[where[0]].pop(where[1], None)
        if ino is None:
            raise TraceError(f"line {ev.line}: {kind} of {self.rel(path)}, which the model does not have")
        self._emit(ev, kind, str(self.rel(path)), dir=where[0], name=where[1], inode=ino)

    def _on_unlink(self, ev: _Event) -> None:
        self._remove(ev, self._abs(ev, None, ev.args[0]), "unlink")

    def _on_unlinkat(self, ev: _Event) -> None:
        self._remove(ev, self._abs(ev, ev.args[0], ev.args[1]), "rmdir" if "AT_REMOVEDIR" in ev.args[2] else "unlink")

    def _on_rmdir(self, ev: _Event) -> None:
        self._remove(ev, self._abs(ev, None, ev.args[0]), "rmdir")

    def _rename(self, ev: _Event, src: str, dst: str, flags: str = "") -> None:
        s_rel, d_rel = self.rel(src), self.rel(dst)
        if s_rel is None and d_rel is None:
            return
        if s_rel is None:
            raise TraceError(f"line {ev.line}: rename into the root from {src}: its bytes are unknown")
        if d_rel is None:
            self._remove(ev, src, "unlink")  # moved out of the root: gone from it
            return
        s_where, d_where = self._parent_of(src, ev), self._parent_of(dst, ev)
        assert s_where is not None and d_where is not None
        ino = self.children[s_where[0]].get(s_where[1])
        if ino is None:
            raise TraceError(f"line {ev.line}: rename of {s_rel}, which the model does not have")
        if "RENAME_EXCHANGE" in flags:
            other = self.children[d_where[0]][d_where[1]]
            self.children[d_where[0]][d_where[1]] = ino
            self.children[s_where[0]][s_where[1]] = other
            self._emit(ev, "exchange", f"{s_rel} <-> {d_rel}", dir=d_where[0], name=d_where[1], inode=ino,
                       src_dir=s_where[0], src_name=s_where[1], src_inode=other)
            return
        if s_where == d_where:
            return  # rename onto itself
        del self.children[s_where[0]][s_where[1]]
        self.children[d_where[0]][d_where[1]] = ino
        if self.kind[ino] == "d":
            self._repath(ino, d_rel)
        self._emit(ev, "rename", f"{s_rel} -> {d_rel}", dir=d_where[0], name=d_where[1], inode=ino,
                   src_dir=s_where[0], src_name=s_where[1])

    def _repath(self, ino: int, rel: str) -> None:
        self.dir_path[ino] = rel
        for name, child in self.children[ino].items():
            if self.kind[child] == "d":
                self._repath(child, f"{rel}/{name}")

    def _on_rename(self, ev: _Event) -> None:
        self._rename(ev, self._abs(ev, None, ev.args[0]), self._abs(ev, None, ev.args[1]))

    def _on_renameat(self, ev: _Event) -> None:
        self._rename(ev, self._abs(ev, ev.args[0], ev.args[1]), self._abs(ev, ev.args[2], ev.args[3]))

    def _on_renameat2(self, ev: _Event) -> None:
        self._rename(ev, self._abs(ev, ev.args[0], ev.args[1]), self._abs(ev, ev.args[2], ev.args[3]), ev.args[4])

    # -- attributes (kept with the file's bytes: as durable as its next fsync)

    def _on_utimensat(self, ev: _Event) -> None:
        if ev.args[1] == "NULL":
            ofd, _ = self._fd_inode(ev, ev.args[0])
            ino = ofd.inode if ofd else None
        else:
            ino = self.lookup(self._abs(ev, ev.args[0], ev.args[1]))
        if ino is None or self.kind[ino] != "f":
            return
        times = re.findall(r"\{tv_sec=(\d+), tv_nsec=(\d+)\}|(UTIME_NOW|UTIME_OMIT)", ev.args[2])
        if len(times) == 2:
            sec, nsec, special = times[1]
            if special != "UTIME_OMIT":
                self.mtime[ino] = None if special else int(sec) * 10**9 + int(nsec)
        else:
            self.mtime[ino] = None

    def _chmod(self, ino: int | None, mode_arg: str) -> None:
        if ino is not None and self.kind[ino] == "f":
            self.mode[ino] = _int(mode_arg) & 0o7777

    def _on_fchmod(self, ev: _Event) -> None:
        ofd, _ = self._fd_inode(ev, ev.args[0])
        self._chmod(ofd.inode if ofd else None, ev.args[1])

    def _on_chmod(self, ev: _Event) -> None:
        self._chmod(self.lookup(self._abs(ev, None, ev.args[0])), ev.args[1])

    def _on_fchmodat(self, ev: _Event) -> None:
        self._chmod(self.lookup(self._abs(ev, ev.args[0], ev.args[1])), ev.args[2])

    # -- durability

    def _version(self, ino: int) -> FileVersion:
        return FileVersion.of(bytes(self.content[ino]), self.mode[ino], self.mtime[ino])

    def _on_fsync(self, ev: _Event) -> None:
        ofd, _ = self._fd_inode(ev, ev.args[0])
        if ofd is None or ofd.inode is None:
            return
        ino = ofd.inode
        if self.kind[ino] == "d":
            self._emit(ev, "fsync", f"directory {self.dir_path[ino]}", inode=ino)
        elif self.kind[ino] == "f":
            self._emit(ev, "fsync", f"{self._name(ino)} ({ev.name})", inode=ino, version=self._version(ino))

    _on_fdatasync = _on_fsync

    def _on_sync(self, ev: _Event) -> None:
        versions = {ino: self._version(ino) for ino, k in self.kind.items() if k == "f"}
        self._emit(ev, "sync", f"({ev.name}: everything)", versions=versions)

    _on_syncfs = _on_sync

    # -- the end

    def live_snapshot(self) -> Snapshot:
        entries = {(d, n): i for d, ch in self.children.items() for n, i in ch.items()}
        versions = {ino: self._version(ino) for ino, k in self.kind.items() if k == "f"}
        return Snapshot(_walk(entries, self.kind, self.target, versions))


# ------------------------------------------------------------------------------- crash states


def _walk(entries: dict[tuple[int, str], int], kind: dict[int, str], target: dict[int, str],
          versions: dict[int, FileVersion]) -> dict[str, Entry]:
    """The tree reachable from the root (inode 0) through ``entries``."""
    by_dir: dict[int, list[tuple[str, int]]] = {}
    for (d, name), ino in entries.items():
        by_dir.setdefault(d, []).append((name, ino))
    out: dict[str, Entry] = {}
    stack: list[tuple[int, str]] = [(0, "")]
    while stack:
        d, prefix = stack.pop()
        for name, ino in by_dir.get(d, ()):
            rel = prefix + name
            k = kind[ino]
            if k == "d":
                out[rel] = DIR
                stack.append((ino, rel + "/"))
            elif k == "l":
                out[rel] = SymlinkEntry(target[ino])
            else:
                out[rel] = FileEntry(versions[ino], ino)
    return out


def _digest(entries: dict[str, Entry]) -> str:
    h = hashlib.blake2b(digest_size=20)
    canon: dict[int, str] = {}
    for rel in sorted(entries):
        e = entries[rel]
        if isinstance(e, FileEntry):
            first = canon.setdefault(e.inode, rel)
            h.update(f"{rel}\0f\0{e.version.digest}\0{e.version.mode:o}\0{first}\n".encode())
        elif isinstance(e, SymlinkEntry):
            h.update(f"{rel}\0l\0{e.target}\n".encode())
        else:
            h.update(f"{rel}\0d\n".encode())
    return h.hexdigest()


def _apply(entries: dict[tuple[int, str], int], op: Op) -> None:
    if op.kind in ("create", "mkdir", "symlink", "link"):
        entries[(op.dir, op.name)] = op.inode
    elif op.kind in ("unlink", "rmdir"):
        if entries.get((op.dir, op.name)) == op.inode:
            del entries[(op.dir, op.name)]
    elif op.kind == "rename":
        if entries.get((op.src_dir, op.src_name)) == op.inode:
            del entries[(op.src_dir, op.src_name)]
        entries[(op.dir, op.name)] = op.inode
    elif op.kind == "exchange":
        entries[(op.dir, op.name)] = op.inode
        entries[(op.src_dir, op.src_name)] = op.src_inode


@dataclass
class Recording:
    """A traced run: the root, its initial snapshot, the replayed operations."""

    root: Path
    initial: Snapshot
    ops: list[Op]
    returncode: int
    stdout: str
    stderr: str
    kind: dict[int, str]
    target: dict[int, str]
    dir_path: dict[int, str]
    initial_entries: dict[tuple[int, str], int]
    initial_versions: dict[int, FileVersion]

    def rel(self, path: str | os.PathLike[str]) -> str:
        return os.path.relpath(path, self.root)

    def _build(self, point: int, lost: frozenset[int], durable: dict[int, FileVersion]) -> dict[str, Entry]:
        entries = dict(self.initial_entries)
        for op in self.ops[:point]:
            if op.kind in ENTRY_KINDS and op.index not in lost:
                _apply(entries, op)
        return _walk(entries, self.kind, self.target, durable)

    def crash_states(self, models: Sequence[str] = MODELS, *, points: Container[int] | None = None
                     ) -> list[CrashState]:
        """Every distinct crash state of ``models`` (module docstring), first seen first; with
        ``points``, only those crash points are built."""
        states: list[CrashState] = []
        seen: dict[str, CrashState] = {}
        durable = dict(self.initial_versions)
        last_dir_fsync: dict[int, int] = {}
        last_sync = 0
        entry_ops: list[Op] = []

        def add(model: str, point: int, variant: str, lost: Sequence[int]) -> None:
            lost_set = frozenset(lost)
            entries = self._build(point, lost_set, durable)
            digest = _digest(entries)
            if digest in seen:
                seen[digest].also.append((model, point, variant))
                return
            st = CrashState(model, point, variant, tuple(sorted(lost_set)), entries, digest)
            seen[digest] = st
            states.append(st)

        for op in self.ops:  # a file the run created and never fsynced: empty
            if op.kind == "create" and op.version is not None:
                durable.setdefault(op.inode, op.version)
        for point in range(len(self.ops) + 1):
            if point:
                op = self.ops[point - 1]
                if op.kind in ENTRY_KINDS:
                    entry_ops.append(op)
                elif op.kind == "fsync":
                    if self.kind[op.inode] == "d":
                        last_dir_fsync[op.inode] = point
                    elif op.version is not None:
                        durable[op.inode] = op.version
                elif op.kind == "sync" and op.versions is not None:
                    durable.update(op.versions)
                    last_sync = point
                if op.kind not in ENTRY_KINDS and op.kind not in DURABILITY_KINDS:
                    continue  # nothing durable changed: the state of the point before
            if points is not None and point not in points:
                continue
            if EXT4 in models:
                add(EXT4, point, "every entry operation up to here persisted", ())
            if POSIX not in models:
                continue
            pending: dict[int, list[int]] = {}
            for o in entry_ops:
                if o.index >= max(last_dir_fsync.get(o.dir, 0), last_sync):
                    pending.setdefault(o.dir, []).append(o.index)
            every = [i for ops in pending.values() for i in ops]
            add(POSIX, point, "no pending entry operation persisted", every)
            add(POSIX, point, "every pending entry operation persisted", ())
            for d, ops in pending.items():
                name = self.dir_path.get(d, f"<dir inode {d}>")
                others = [i for dd, oo in pending.items() if dd != d for i in oo]
                add(POSIX, point, f"{name}: its {len(ops)} pending lost, other directories' kept", ops)
                if len(pending) > 1:
                    add(POSIX, point, f"{name}: its {len(ops)} pending kept, other directories' lost", others)
                for j in range(1, len(ops)):
                    add(POSIX, point, f"{name}: first {j} of {len(ops)} pending kept, other directories' lost",
                        ops[j:] + others)
                    add(POSIX, point, f"{name}: first {j} of {len(ops)} pending kept, other directories' kept",
                        ops[j:])
        return states

    def describe(self, state: CrashState, *, last: int = 6) -> str:
        """Where a state comes from: model, point, the operations before it, what it lost."""
        lines = [f"{state.label()}, of {len(self.ops)} operations"]
        lo = max(0, state.point - last)
        lines.append("  last operations before it:" if state.point else "  before the first operation")
        lines += [f"    #{op.index} [pid {op.pid}] {op.text}" for op in self.ops[lo:state.point]]
        if state.lost:
            shown = [self.ops[i - 1] for i in state.lost][:8]
            lines.append(f"  entry operations lost ({len(state.lost)}, not followed by an fsync of their "
                         "directory):")
            lines += [f"    #{op.index} {op.text}" for op in shown]
            if len(state.lost) > len(shown):
                lines.append(f"    ... and {len(state.lost) - len(shown)} more")
        if state.also:
            lines.append(f"  (the same state also at {len(state.also)} other points/models, e.g. "
                         + "; ".join(f"{m} point {p}" for m, p, _ in state.also[:3]) + ")")
        return "\n".join(lines)

    def state_where(self, model: str, pred: Callable[[CrashState], bool]) -> CrashState:
        """The first state of ``model`` (in crash-point order) for which ``pred`` holds."""
        for st in self.crash_states((model,)):
            if pred(st):
                return st
        raise LookupError(f"no {model} crash state matches")


def record(argv: Sequence[str], root: str | os.PathLike[str], *, env: dict[str, str] | None = None,
           cwd: str | os.PathLike[str] | None = None, timeout: float = 600, trace_dir: str | os.PathLike[str] |
           None = None) -> Recording:
    """Run ``argv`` under strace and replay it (module docstring). ``root`` must exist; its
    snapshot is taken first. The trace file goes to ``trace_dir`` (default: beside the root)."""
    root = Path(root).resolve()
    initial = snapshot(root)
    run_cwd = Path(cwd).resolve() if cwd is not None else root.parent
    trace = Path(trace_dir or root.parent) / f"{root.name}.strace"
    cmd = [STRACE, "-f", "-qq", "--seccomp-bpf", "-e", "trace=" + ",".join(TRACED_CALLS), "-y", "-xx",
           "-s", str(STRING_LIMIT), "-o", str(trace), *argv]
    proc = subprocess.run(cmd, env=env, cwd=run_cwd, capture_output=True, text=True, timeout=timeout)
    replay = _Replay(root, initial, run_cwd)
    replay.run(parse_trace(trace))
    trace.unlink()
    rec = Recording(root=root, initial=initial, ops=replay.ops, returncode=proc.returncode, stdout=proc.stdout,
                    stderr=proc.stderr, kind=replay.kind, target=replay.target, dir_path=replay.dir_path,
                    initial_entries=replay.initial_entries, initial_versions=replay.initial_versions)
    _check_final(replay, root, proc)
    return rec


def _check_final(replay: _Replay, root: Path, proc: subprocess.CompletedProcess[str]) -> None:
    """The model's tree after the last operation must be the real one: else it missed a call."""
    model = replay.live_snapshot().entries
    real = snapshot(root).entries
    problems = []
    for rel in sorted(set(model) | set(real)):
        m, r = model.get(rel), real.get(rel)
        if m is None or r is None:
            problems.append(f"{rel}: {'only in the model' if r is None else 'not in the model'}")
        elif isinstance(m, FileEntry) and isinstance(r, FileEntry):
            if m.version.data != r.version.data:
                problems.append(f"{rel}: the model has {len(m.version.data)} bytes, the disk "
                                f"{len(r.version.data)} (differ)")
        elif type(m) is not type(r):
            problems.append(f"{rel}: kinds differ")
    if problems:
        raise TraceError("the replayed model differs from the tree the run left (an operation the model "
                         "missed?):\n  " + "\n  ".join(problems[:20]) + f"\n--- stderr:\n{proc.stderr[-3000:]}")


def python_script(code: str, path: str | os.PathLike[str]) -> list[str]:
    """argv running ``code`` (written to ``path``) with this interpreter."""
    Path(path).write_text(code)
    return [sys.executable, str(path)]


def without_directory_fsyncs(script: str | os.PathLike[str], path: str | os.PathLike[str]) -> list[str]:
    """argv running the Python ``script`` with every fsync of a directory made a no-op (its
    entries then stay in the page cache): the build a power-loss test must find failing."""
    code = (
        "import os, runpy, stat, sys\n"
        "real_fsync = os.fsync\n"
        "def fsync(fd):\n"
        "    if stat.S_ISDIR(os.fstat(fd).st_mode):\n"
        "        return\n"
        "    real_fsync(fd)\n"
        "os.fsync = fsync\n"
        f"sys.argv = [{str(script)!r}, *sys.argv[1:]]\n"
        f"runpy.run_path({str(script)!r}, run_name='__main__')\n"
    )
    return python_script(code, path)


# ---------------------------------------------------------------------------- scenario scaffolding

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Where a test's own fixtures point runs, reports, backups and faults: a traced run and the
# judge's in-process runs use the traced root's home instead.
STATE_ENV = ("KMIGRATE_OUT", "KMIGRATE_REPORT_ROOT", "KMIGRATE_BACKUP_ROOT", "KMIGRATE_FAULT_AT", "KMIGRATE_FAULT_DIR")


def traced_env(root: str | os.PathLike[str]) -> dict[str, str]:
    """The environment of a traced run: its home (run records, reports, backups) under ``root``
    (so every state holds them), this checkout importable, no test's output or fault settings."""
    env = dict(os.environ, KMIGRATE_HOME=str(Path(root) / "home"), PYTHONPATH=str(PROJECT_ROOT),
               KMIGRATE_PROJECT_ROOT=str(PROJECT_ROOT))
    for key in STATE_ENV:
        env.pop(key, None)
    return env


def workdir_fixture(prefix: str, *, scope: str = "module") -> Any:
    """A ``workdir`` fixture: a fresh directory in /dev/shm when there is one (fsync is free
    there, and the judges' re-runs and rollbacks fsync a hundred times each), removed after;
    else one of pytest's temporary directories. ``workdir = pl.workdir_fixture(...)`` in a test
    module defines it there."""

    @pytest.fixture(scope=scope, name="workdir")
    def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
        shm = Path("/dev/shm")
        if not os.access(shm, os.W_OK):
            yield tmp_path_factory.mktemp(prefix.strip("-"))
            return
        base = Path(tempfile.mkdtemp(prefix=prefix, dir=shm))
        yield base
        shutil.rmtree(base, ignore_errors=True)

    return workdir


def home_inside_root_fixture(*after: str) -> Any:
    """An autouse fixture: the judge's in-process runs see the traced run's environment (its
    home under ``workdir / "root"``, the backup root under it), set after the fixtures named in
    ``after`` (those that point KMIGRATE_OUT and the like at a test's own directory)."""

    @pytest.fixture(autouse=True, name="home_inside_root")
    def home_inside_root(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, workdir: Path) -> None:
        for name in after:
            request.getfixturevalue(name)
        for key in STATE_ENV:
            monkeypatch.delenv(key, raising=False)
        for key, value in traced_env(workdir / "root").items():
            if key.startswith("KMIGRATE"):
                monkeypatch.setenv(key, value)

    return home_inside_root


def assert_every_entry_durable_at_once(recording: Recording, states: Sequence[CrashState]) -> None:
    """The POSIX model's states were built, and each one equals an ext4-ordered state: every entry
    the run added or removed was fsynced into its directory before its next step, so no POSIX
    rule left a state of its own. Otherwise the states only POSIX reaches, with what they lost
    (they are judged like any other; this names the entry operations left unsynced)."""
    # a POSIX variant that lost pending entries, kept as the equal state reached before: the rules ran
    assert any(m == POSIX and v != "every pending entry operation persisted" for st in states for m, _, v in st.also), \
        "no POSIX state that lost an entry was built"
    own = [st for st in states if st.model == POSIX]
    assert not own, f"{len(own)} state(s) only the POSIX rules reach, e.g.:\n" + \
        "\n".join(recording.describe(st) for st in own[:3])


def assert_no_failures(recording: Recording, states: Sequence[CrashState], judge: Callable[[CrashState], list[str]],
                       title: str) -> None:
    """Every state judged; none may fail (the report of every failure otherwise)."""
    t0 = time.monotonic()
    failures = list(iter_failures(states, judge))
    print(f"{title}: {len(recording.ops)} operations, {len(states)} states judged in {time.monotonic() - t0:.1f}s, "
          f"{len(failures)} fail")
    assert not failures, report(recording, failures, len(states), title=title)


def assert_finds_missing_directory_fsyncs(initial: Snapshot, script: str | os.PathLike[str], args: Sequence[str],
                                          root: str | os.PathLike[str], env: dict[str, str], scratch: Path,
                                          judge: Callable[[Recording], Callable[[CrashState], list[str]]],
                                          *, last: int) -> None:
    """The harness has teeth: ``script args`` run from ``initial`` with every fsync of a
    directory made a no-op, the POSIX states of its last ``last`` crash points (the late ones
    first: by then a replacement is complete and everything rests on entries) must hold one
    that loses or breaks data (``DATA_CAUSES``), found before any state the judge
    (``judge(recording)``) raises on: a judge that breaks on every state finds nothing. (The
    ext4-ordered model cannot fail these: it keeps entries without fsyncs.)"""
    materialize(initial, root)
    argv = without_directory_fsyncs(script, scratch / "no_dir_fsync.py")
    rec = record([*argv, *args], root, env=env, cwd=scratch)
    assert rec.returncode == 0, rec.stdout[-3000:] + rec.stderr[-3000:]
    assert not [op for op in rec.ops if op.kind == "fsync" and rec.kind[op.inode] == "d"]
    points = range(len(rec.ops) - last, len(rec.ops) + 1)
    posix = [st for st in rec.crash_states((POSIX,), points=points) if st.lost]
    failures = []
    for f in iter_failures(reversed(posix), judge(rec)):
        failures.append(f)
        if f.judge_raised() or f.data_causes():
            break
    title = "without directory fsyncs (expected to fail)"
    assert not [f for f in failures if f.judge_raised()], report(rec, failures, len(posix), title=title)
    assert failures and failures[-1].data_causes(), \
        "no POSIX crash state loses data although no directory is ever fsynced" + \
        ("\n" + report(rec, failures, len(posix), title=title) if failures else "")
    print(report(rec, failures, len(posix), title=title))


# ------------------------------------------------------------------------------------- judging


JUDGE_RAISED = "the judge raised:"
# What a judge reports when a state lost or broke data (not when the judge itself broke):
# records_diff's lost records; judge_log_dir_files' missing, changed or extra files; a re-run
# or a rollback that did not finish; what a re-run leaves behind (UpgradeJudge, TierJudge).
DATA_CAUSES = ("records lost", "originals missing", "originals with other bytes", "files that were not there",
               "re-run: exit", "rollback: exit", "LEFTOVER_FILE", "the store's temporary files stay",
               "probe objects stay")


@dataclass
class Failure:
    state: CrashState
    what: list[str]

    def judge_raised(self) -> bool:
        return any(w.startswith(JUDGE_RAISED) for w in self.what)

    def data_causes(self) -> list[str]:
        return [w for w in self.what if any(c in w for c in DATA_CAUSES)]


def iter_failures(states: Iterable[CrashState], judge: Callable[[CrashState], list[str]]) -> Iterator[Failure]:
    """Run ``judge`` on each state (it returns what failed, empty when the state is fine) and
    yield each failing one; an exception in the judge is a failure of that state, its ``what``
    the traceback's tail after ``JUDGE_RAISED``."""
    for st in states:
        try:
            what = judge(st)
        except Exception:  # noqa: BLE001 - a crashing tool is a finding, reported with the state
            what = [JUDGE_RAISED + "\n" + "".join(traceback.format_exc().splitlines(True)[-12:])]
        if what:
            yield Failure(st, what)


def report(recording: Recording, failures: list[Failure], judged: int, *, title: str, limit: int = 40) -> str:
    """The assertion message: a summary by model and cause, then each failing state."""
    by_model: dict[str, int] = {}
    for f in failures:
        by_model[f.state.model] = by_model.get(f.state.model, 0) + 1
    lines = [f"{title}: {len(failures)} of {judged} distinct crash states fail ("
             + ", ".join(f"{m}: {n}" for m, n in sorted(by_model.items())) + ")"]
    causes: dict[str, int] = {}
    for f in failures:
        for w in f.what:
            key = re.sub(r"\d+", "N", w.splitlines()[0])[:140]
            causes[key] = causes.get(key, 0) + 1
    lines.append("causes (numbers elided):")
    lines += [f"  {n} x {k}" for k, n in sorted(causes.items(), key=lambda kv: -kv[1])]
    for f in failures[:limit]:
        lines.append("")
        lines.append(recording.describe(f.state))
        lines += ["  FAILED: " + w.replace("\n", "\n    ") for w in f.what]
    if len(failures) > limit:
        lines.append(f"\n... and {len(failures) - limit} more failing states")
    return "\n".join(lines)


def iter_log_dir_partitions(log_dir: Path) -> Iterator[Path]:
    for p in sorted(log_dir.iterdir()):
        if p.is_dir() and "-" in p.name and not p.name.startswith("__"):
            yield p


def _kafka_loader() -> Any:
    """tests/migrations/upgrade/kafka_loader.py, imported as the tests beside it do (by path)."""
    here = str(Path(__file__).resolve().parents[1] / "migrations" / "upgrade")
    if here not in sys.path:
        sys.path.insert(0, here)
    import kafka_loader

    return kafka_loader


# Findings that mean Kafka would serve wrong data or lose records: the segment codes, and
# every index problem (an offset index entry pointing at no batch start of the segment beside
# it is INDEX_POSITION/INDEX_BEYOND_LOG). The infos (INDEX_MULTI_BATCH, a missing time index
# of records without timestamps) are not problems.
LOAD_FAILURE_CODES = ("CORRUPT_BATCH", "OFFSET_ORDER", "TRAILING_BYTES")


def _is_load_failure(finding: Any) -> bool:
    code = str(finding.code or "")
    return finding.severity != "info" and (code in LOAD_FAILURE_CODES or code.startswith(("INDEX_", "TIMEINDEX_")))


def kafka_load_problems(log_dir: Path, expected: dict[str, list[tuple]]) -> list[str]:
    """Kafka's startup on ``log_dir`` (a copy: it is changed), then every record exactly once
    and no segment or index problem."""
    from migration.logdir.validation import validate_paths

    kl = _kafka_loader()
    problems = []
    kl.simulate_log_dir_startup(log_dir)
    try:
        got = kl.read_log_dir_records(log_dir)
    except AssertionError as exc:
        return [f"after Kafka's startup a segment does not read: {exc}"]
    problems += records_diff(expected, got, "after Kafka's startup")
    res = validate_paths([str(log_dir)])
    problems += [f"after Kafka's startup: {f}" for f in res.findings if _is_load_failure(f)]
    return problems


def records_diff(expected: dict[str, list[tuple]], got: dict[str, list[tuple]], when: str) -> list[str]:
    out = []
    for part in sorted(set(expected) | set(got)):
        e, g = expected.get(part, []), got.get(part, [])
        if e == g:
            continue
        eo, go = [r[0] for r in e], [r[0] for r in g]
        lost = sorted(set(eo) - set(go))
        twice = sorted({o for o in go if go.count(o) > 1})
        detail = []
        if lost:
            detail.append(f"{len(lost)} records lost (offsets {lost[0]}..{lost[-1]})")
        if twice:
            detail.append(f"{len(twice)} offsets twice (from {twice[0]})")
        if not detail:
            detail.append("records differ in content or order")
        out.append(f"{when}: partition {part}: " + ", ".join(detail))
    return out


def judge_log_dir_files(original: dict[str, bytes], now: dict[str, bytes], when: str) -> list[str]:
    """Names and bytes of a log dir against the original's (the ``.lock`` file included)."""
    missing = sorted(set(original) - set(now))
    extra = sorted(set(now) - set(original))
    changed = sorted(p for p in set(original) & set(now) if original[p] != now[p])
    out = []
    if missing:
        out.append(f"{when}: originals missing: {missing[:8]}{' ...' if len(missing) > 8 else ''}")
    if extra:
        out.append(f"{when}: files that were not there: {extra[:8]}{' ...' if len(extra) > 8 else ''}")
    if changed:
        out.append(f"{when}: originals with other bytes: {changed[:8]}{' ...' if len(changed) > 8 else ''}")
    return out


@dataclass
class _Judge:
    """What the upgrade and the tier-prepare judges share: each judges one crash state by the
    ``checks`` named (each a method, each on a fresh copy of the state). ``original`` is the
    log dir before the first run (names and bytes), ``expected`` its records."""

    recording: Recording
    log_dir: Path
    scratch: Path
    run_id: str
    options: Any  # the job's options
    expected: dict[str, list[tuple]]
    original: dict[str, bytes]
    checks: tuple[str, ...] = ("loader", "rerun", "rollback")

    @property
    def log_dir_rel(self) -> str:
        return self.recording.rel(self.log_dir)

    def __call__(self, state: CrashState) -> list[str]:
        problems: list[str] = []
        for check in self.checks:
            problems += getattr(self, check)(state)
        return problems

    def loader(self, state: CrashState) -> list[str]:
        view = self.scratch / "kafka-view"
        materialize(state, self.recording.root, subtree=self.log_dir_rel, dest=view)
        return kafka_load_problems(view, self.expected)

    @staticmethod
    def _exit_problems(report: Any, what: str) -> list[str]:
        """``what: exit N: why`` when the run did not succeed (its problem units, its refusal and
        its run-level errors), else nothing."""
        if report.exit_code() == 0:
            return []
        why = [f"{u.path}: " + "; ".join(str(e) for e in u.errors) for *_, u in report.problem_units()]
        why += [str(x) for x in (report.refusal, *[e.message for e in report.errors]) if x]
        return [f"{what}: exit {report.exit_code()}: " + (" | ".join(why)[:1500] or str(report.status))]

    def _rollback(self, state: CrashState, rollback_run: Callable[[str], Any], unknown_run: str) -> list[str]:
        """``rollback_run(run_id)`` on the state: every original back, byte for byte. A state from
        before the run's directory was durable holds no trace of the run: kmigrate cannot tell
        its id from a mistyped one and refuses it (``unknown_run`` in the refusal), as for any
        unknown run; the log dir must then be untouched, which the file comparison requires."""
        from migration.settings import default_backup_root, runs_dir

        materialize(state, self.recording.root)
        report = rollback_run(self.run_id)
        no_trace = not (runs_dir() / self.run_id).exists() and not (default_backup_root() / self.run_id).exists()
        if report.exit_code() != 0 and no_trace and unknown_run in str(report.refusal or ""):
            return judge_log_dir_files(self.original, tree_files(self.log_dir), "after the refused rollback")
        return self._exit_problems(report, "rollback") + \
            judge_log_dir_files(self.original, tree_files(self.log_dir), "after the rollback")


@dataclass
class UpgradeJudge(_Judge):
    """Judges one upgrade crash state three ways: Kafka's loader, a re-run of the same job
    (inline, same run id), a rollback."""

    def rerun(self, state: CrashState) -> list[str]:
        from migration.logdir.validation import validate_paths
        from migration.migrations.upgrade.driver import execute_upgrade

        materialize(state, self.recording.root)
        report = execute_upgrade([str(self.log_dir)], options=self.options, engine="inline", run_id=self.run_id)
        problems = self._exit_problems(report, "re-run")
        if report.totals.digest_mismatches:
            problems.append(f"re-run: {report.totals.digest_mismatches} digest mismatches")
        try:
            problems += records_diff(self.expected, _kafka_loader().read_log_dir_records(self.log_dir),
                                     "after the re-run")
        except AssertionError as exc:
            problems.append(f"after the re-run a segment does not read: {exc}")
        res = validate_paths([str(self.log_dir)])
        problems += [f"after the re-run, validate: {f}" for f in res.problems]
        problems += [f"after the re-run, validate: {f}" for f in res.findings
                     if f.code == "LEFTOVER_FILE" and f.severity == "info"]
        return problems

    def rollback(self, state: CrashState) -> list[str]:
        from migration.migrations.upgrade.driver import rollback_run

        return self._rollback(state, rollback_run, "no upgrade job")


# Findings after Kafka's startup that a tier-prepare state must not have (beside the loader's
# segment and index problems): a snapshot or leader-epoch-checkpoint Kafka cannot load.
TIER_FAILURE_PREFIXES = ("SNAPSHOT_", "LEADER_EPOCH_", "PRODUCER_")


@dataclass
class TierJudge(_Judge):
    """Judges one tier-prepare crash state three ways, each on a fresh copy of it: Kafka's
    loader (every record, no segment, index, snapshot or leader-epoch problem but those the
    original log dir had in the very same bytes), a re-run with the same run id (exit 0, then
    nothing left behind: validation clean, no leftover in the log dir, the file store's
    ``.kmigrate-store/tmp`` empty, no probe object, every segment the run's metadata JSONL lists
    and every metadata sidecar backed by its objects), and a rollback (every log-dir file back,
    byte for byte). ``store`` is the file store's root, inside the recorded root."""

    store: Path = field(kw_only=True)

    def _new_problems(self, where: Path, when: str) -> list[str]:
        from migration.logdir.validation import validate_paths

        out = []
        for f in validate_paths([str(where)]).findings:
            code = str(f.code or "")
            if f.severity == "info" or not (_is_load_failure(f) or code.startswith(TIER_FAILURE_PREFIXES)):
                continue
            rel = os.path.relpath(str(f.file), where) if f.file else None
            if rel is not None and rel in self.original and (where / rel).is_file() and \
                    (where / rel).read_bytes() == self.original[rel]:
                continue  # the original's own problem, untouched (a corrupt snapshot the run rebuilds)
            out.append(f"{when}: {f}")
        return out

    def loader(self, state: CrashState) -> list[str]:
        problems = super().loader(state)
        view = self.scratch / "kafka-view"
        return [p for p in problems if not p.startswith("after Kafka's startup: ")] + \
            self._new_problems(view, "after Kafka's startup")

    def rerun(self, state: CrashState) -> list[str]:
        from migration.logdir.validation import validate_paths
        from migration.migrations.tier.driver import JSONL_NAME, execute_tier
        from migration.settings import runs_dir

        materialize(state, self.recording.root)
        report = execute_tier([str(self.log_dir)], options=self.options, engine="inline", run_id=self.run_id)
        problems = self._exit_problems(report, "re-run")
        if problems:
            return problems
        res = validate_paths([str(self.log_dir)])
        problems += [f"after the re-run, validate: {f}" for f in res.problems]
        problems += [f"after the re-run, validate: {f}" for f in res.findings if f.code == "LEFTOVER_FILE"]
        problems += [f"after the re-run: {p}" for p in self._new_problems(self.log_dir, "validate")]
        own = self.store / ".kmigrate-store"
        tmp = [str(p.relative_to(self.store)) for p in (own / "tmp").rglob("*") if p.is_file()]
        if tmp:
            problems.append(f"after the re-run the store's temporary files stay: {tmp[:6]}")
        objects = {str(p.relative_to(self.store)) for p in self.store.rglob("*")
                   if p.is_file() and p.relative_to(self.store).parts[0] != own.name}
        probes = sorted(o for o in objects if o.startswith("kmigrate-probe/"))
        if probes:
            problems.append(f"after the re-run probe objects stay: {probes[:6]}")
        for sidecar in (own / "meta").rglob("*.meta.json") if (own / "meta").is_dir() else ():
            key = str(sidecar.relative_to(own / "meta"))[:-len(".meta.json")]
            if key not in objects:
                problems.append(f"after the re-run the store's metadata describes a missing object {key}")
        jsonl = runs_dir() / self.run_id / JSONL_NAME
        lines = [line for line in jsonl.read_text().splitlines() if line.strip()] if jsonl.is_file() else []
        for line in lines:
            seg = json.loads(line)["record"]["RemoteLogSegmentId"]["Id"]
            have = {o.rsplit(".", 1)[1] for o in objects if f"-{seg}." in o}
            if have != {"log", "indexes", "rsm-manifest"}:
                problems.append(f"after the re-run the metadata JSONL lists segment {seg}, the store has "
                                f"{sorted(have)} of it")
        manifests = [o for o in objects if o.endswith(".rsm-manifest")]
        if len(manifests) != len(lines):
            problems.append(f"after the re-run the store holds {len(manifests)} segment manifests, the JSONL lists "
                            f"{len(lines)}")
        return problems

    def rollback(self, state: CrashState) -> list[str]:
        from migration.migrations.tier.driver import rollback_tier_run

        return self._rollback(state, rollback_tier_run, "no tier-prepare run")
