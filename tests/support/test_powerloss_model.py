"""The power-loss model itself (tests/support/powerloss.py), on tiny traced Python programs:
what each rule set keeps of a write, an fsync, a rename, a directory fsync, a new directory
tree, a hard link, a rename across directories and a writer thread."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from support import powerloss as pl

pytestmark = pytest.mark.usefixtures("strace_installed")

DATA = b"payload " * 64


def _trace(tmp_path: Path, body: str, before: dict[str, bytes] | None = None) -> pl.Recording:
    """Record ``body`` (Python with ``r`` the root path, ``DATA``, ``os``, ``threading`` and helpers
    ``fsync_dir(path)`` and ``write(path, data, sync)``) in a fresh root."""
    root = tmp_path / "root"
    root.mkdir()
    for rel, data in (before or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    code = textwrap.dedent("""
        import os, sys, threading
        r = sys.argv[1]
        DATA = b"payload " * 64
        def fsync_dir(p):
            fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(fd)
            os.close(fd)
        def write(p, data, sync):
            with open(p, "wb") as f:
                f.write(data)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
    """) + textwrap.dedent(body)
    rec = pl.record([*pl.python_script(code, tmp_path / "prog.py"), str(root)], root)
    assert rec.returncode == 0, rec.stderr
    return rec


def _at(rec: pl.Recording, model: str, point: int) -> list[pl.CrashState]:
    """The states of ``model`` at crash point ``point`` (also those first seen earlier)."""
    return [st for st in rec.crash_states((model,))
            if st.point == point or any(m == model and p == point for m, p, _ in st.also)]


def _final(rec: pl.Recording, model: str) -> list[pl.CrashState]:
    """The states of ``model`` after the last operation that changed something durable."""
    last = max(op.index for op in rec.ops if op.kind in pl.ENTRY_KINDS | pl.DURABILITY_KINDS)
    return _at(rec, model, last)


def _data(st: pl.CrashState, rel: str) -> bytes | None:
    e = st.entries.get(rel)
    return e.version.data if isinstance(e, pl.FileEntry) else None


def test_write_and_rename_without_fsync_loses_the_data(tmp_path) -> None:
    rec = _trace(tmp_path, """
        write(r + "/f.tmp", DATA, sync=False)
        os.rename(r + "/f.tmp", r + "/f")
        fsync_dir(r)
    """)
    for model in pl.MODELS:
        (st,) = _final(rec, model)
        assert _data(st, "f") == b"", model  # the name persisted, the bytes never did


def test_fsynced_file_renamed_without_a_directory_fsync(tmp_path) -> None:
    rec = _trace(tmp_path, """
        write(r + "/f.tmp", DATA, sync=True)
        os.rename(r + "/f.tmp", r + "/f")
    """)
    (ext4,) = _final(rec, pl.EXT4)
    assert _data(ext4, "f") == DATA and "f.tmp" not in ext4.entries
    posix = _final(rec, pl.POSIX)
    assert any("f" not in st.entries for st in posix)  # the rename may be lost
    assert all(_data(st, "f") in (None, DATA) for st in posix)


def test_fsynced_file_renamed_with_a_directory_fsync(tmp_path) -> None:
    rec = _trace(tmp_path, """
        write(r + "/f.tmp", DATA, sync=True)
        os.rename(r + "/f.tmp", r + "/f")
        fsync_dir(r)
    """)
    for model in pl.MODELS:
        states = _final(rec, model)
        assert states and all(_data(st, "f") == DATA and "f.tmp" not in st.entries for st in states), model


def test_a_new_directory_tree_is_lost_with_its_top(tmp_path) -> None:
    """``mkdir -p a/b/c`` with every directory but the root fsynced: the file inside is durable
    in c, c in b, b in a, but a is not in the root, so POSIX may lose the whole tree."""
    rec = _trace(tmp_path, """
        os.makedirs(r + "/a/b/c")
        write(r + "/a/b/c/f", DATA, sync=True)
        for d in ("/a/b/c", "/a/b", "/a"):
            fsync_dir(r + d)
    """)
    (ext4,) = _final(rec, pl.EXT4)
    assert _data(ext4, "a/b/c/f") == DATA
    posix = _final(rec, pl.POSIX)
    assert any(not any(p == "a" or p.startswith("a/") for p in st.entries) for st in posix)
    # a state has the file, or loses the tree from the top: never a dangling part of it
    for st in posix:
        assert ("a/b/c/f" in st.entries) == ("a" in st.entries), st.names()


def test_a_hard_link_shares_the_inode(tmp_path) -> None:
    rec = _trace(tmp_path, """
        os.link(r + "/orig", r + "/linked")
        fsync_dir(r)
        with open(r + "/linked", "r+b") as f:
            f.seek(2)
            f.write(b"XY")
            f.flush()
            os.fsync(f.fileno())
    """, before={"orig": b"0123456789"})
    for model in pl.MODELS:
        (st,) = _final(rec, model)
        a, b = st.entries["orig"], st.entries["linked"]
        assert isinstance(a, pl.FileEntry) and isinstance(b, pl.FileEntry)
        assert a.inode == b.inode and a.version.data == b"01XY456789"
    out = tmp_path / "out"
    pl.materialize(st, rec.root, dest=out, subtree="")
    assert os.stat(out / "orig").st_ino == os.stat(out / "linked").st_ino
    assert (out / "orig").read_bytes() == b"01XY456789"


def test_a_rename_across_directories_is_the_target_directorys(tmp_path) -> None:
    rec = _trace(tmp_path, """
        os.rename(r + "/a/x", r + "/b/x")
        fsync_dir(r + "/a")  # only the source: the rename is not durable yet
        n = len(open(r + "/b/x", "rb").read())
        os.rename(r + "/b/x", r + "/b/y")
        fsync_dir(r + "/b")
    """, before={"a/x": DATA, "b/keep": b"k"})
    after_source_fsync = next(op.index for op in rec.ops if op.kind == "fsync")
    posix = _at(rec, pl.POSIX, after_source_fsync)
    assert posix and all("a/x" in st.entries for st in posix if "b/x" not in st.entries)
    assert any(_data(st, "a/x") == DATA and "b/x" not in st.entries for st in posix)  # still in a
    for st in _final(rec, pl.POSIX):
        assert _data(st, "b/y") == DATA and "a/x" not in st.entries and "b/x" not in st.entries


def test_a_writer_thread(tmp_path) -> None:
    rec = _trace(tmp_path, """
        def work():
            write(r + "/t", DATA, sync=True)
        t = threading.Thread(target=work)
        t.start()
        t.join()
        fsync_dir(r)
    """)
    assert len({op.pid for op in rec.ops}) == 2  # the thread's calls and the main thread's fsync
    for model in pl.MODELS:
        (st,) = _final(rec, model)
        assert _data(st, "t") == DATA


def test_copy2_is_modelled_from_the_source_bytes(tmp_path) -> None:
    rec = _trace(tmp_path, """
        import shutil
        shutil.copy2(r + "/src", r + "/dst")
        fd = os.open(r + "/dst", os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        fsync_dir(r)
    """, before={"src": DATA})
    (st,) = _final(rec, pl.EXT4)
    assert _data(st, "dst") == DATA


def test_an_fd_of_a_file_unlinked_while_open_is_read() -> None:
    """strace decorates the fd of an unlinked file with "(deleted)" after its path: a JVM removes
    its hsperfdata file before it closes it, which made the Spark power-loss test fail now and
    then ("not an fd")."""
    path = "".join(f"\\x{b:02x}" for b in b"/tmp/hsperfdata_root/5867")
    assert pl._fd(f"6<{path}>(deleted)") == (6, "/tmp/hsperfdata_root/5867")
    assert pl._fd(f"6<{path}>") == (6, "/tmp/hsperfdata_root/5867")
    assert pl._fd("AT_FDCWD") == (None, None)
