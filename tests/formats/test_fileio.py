from __future__ import annotations

import errno
import hashlib
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migration.formats import fileio
from migration.formats.errors import InvalidFileNameError
from migration.formats.fileio import BackgroundWriter, durable_replace, fsync_dir, offset_from_path, start_writeback


def test_atomic_write_bytes_and_no_temp_left(tmp_path: Path) -> None:
    target = tmp_path / "file"
    durable_replace(target, b"hello", tmp_suffix=".tmp")
    assert target.read_bytes() == b"hello"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_atomic_write_chunks_replaces_existing(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_bytes(b"old content")
    durable_replace(target, [b"a", bytearray(b"bc"), memoryview(b"def")], tmp_suffix=".part")
    assert target.read_bytes() == b"abcdef"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_atomic_write_failure_keeps_target_and_removes_temp(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_bytes(b"old content")

    def chunks():
        yield b"partial"
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        durable_replace(target, chunks(), tmp_suffix=".tmp")
    assert target.read_bytes() == b"old content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_atomic_write_overwrites_stale_temp(tmp_path: Path) -> None:
    (tmp_path / "file.tmp").write_bytes(b"stale stale stale")
    durable_replace(tmp_path / "file", b"new", tmp_suffix=".tmp")
    assert (tmp_path / "file").read_bytes() == b"new"
    assert not (tmp_path / "file.tmp").exists()


def test_atomic_write_rejects_empty_suffix(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        durable_replace(tmp_path / "file", b"x", tmp_suffix="")
    assert list(tmp_path.iterdir()) == []


def test_fsync_dir_fsyncs_the_directory_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(fileio.os, "fsync", spy)
    fsync_dir(tmp_path)
    assert synced == [str(tmp_path)]
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        fsync_dir(tmp_path / "f")


def _trace_durability(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Record, in order, what fileio does that matters to durability: fsyncs (by path), renames,
    links, mkdirs and unlinks."""
    ops: list[tuple[str, str]] = []
    real_fsync, real_replace, real_link, real_mkdir, real_unlink = os.fsync, os.replace, os.link, os.mkdir, os.unlink

    def fsync(fd: int) -> None:
        ops.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(a: str, b: str) -> None:
        real_replace(a, b)
        ops.append(("rename", f"{Path(a).name}->{Path(b).name}"))

    def link(a: str, b: str) -> None:
        real_link(a, b)
        ops.append(("link", f"{Path(a).name}->{Path(b).name}"))

    def mkdir(p: str, *a: object) -> None:
        real_mkdir(p, *a)  # type: ignore[arg-type]  # os.mkdir's mode passed through
        ops.append(("mkdir", str(p)))

    def unlink(p: str) -> None:
        real_unlink(p)
        ops.append(("unlink", Path(p).name))

    for name, fn in (("fsync", fsync), ("replace", replace), ("link", link), ("mkdir", mkdir), ("unlink", unlink)):
        monkeypatch.setattr(fileio.os, name, fn)
    return ops


def test_durable_replace_fsyncs_the_file_before_the_rename_and_the_directory_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = _trace_durability(monkeypatch)
    steps: list[str] = []
    durable_replace(tmp_path / "f", b"data", fault=steps.append)
    assert ops == [("fsync", str(tmp_path / "f.tmp")), ("rename", "f.tmp->f"), ("fsync", str(tmp_path))]
    assert steps == ["written", "renamed"]


def test_durable_replace_from_a_temporary_elsewhere_fsyncs_both_directories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tmp").mkdir()
    (tmp_path / "objects").mkdir()
    ops = _trace_durability(monkeypatch)
    durable_replace(tmp_path / "objects" / "k", lambda fd: os.write(fd, b"xyz"), tmp_path=tmp_path / "tmp" / "t1",
                    exclusive=True)
    assert (tmp_path / "objects" / "k").read_bytes() == b"xyz"
    assert ops == [("fsync", str(tmp_path / "tmp" / "t1")), ("rename", "t1->k"),
                   ("fsync", str(tmp_path / "objects")), ("fsync", str(tmp_path / "tmp"))]
    assert list((tmp_path / "tmp").iterdir()) == []


def test_durable_replace_no_clobber_links_and_never_replaces(tmp_path: Path) -> None:
    durable_replace(tmp_path / "s", b"first", no_clobber=True)
    with pytest.raises(FileExistsError):
        durable_replace(tmp_path / "s", b"second", no_clobber=True)
    assert (tmp_path / "s").read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]  # no temporary name left either way


def test_durable_replace_read_only_and_times_are_set_before_the_fsync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        seen.append((st.st_mode & 0o777, st.st_mtime_ns))
        real(fd)

    monkeypatch.setattr(fileio.os, "fsync", fsync)
    durable_replace(tmp_path / "c", b"snap", read_only=True, times_ns=(1_000_000_000, 2_000_000_000))
    assert seen[0] == (0o444, 2_000_000_000)
    assert (tmp_path / "c").stat().st_mtime_ns == 2_000_000_000


def test_durable_replace_exclusive_refuses_a_taken_temporary_name(tmp_path: Path) -> None:
    (tmp_path / "x.part").write_bytes(b"someone else's")
    with pytest.raises(FileExistsError):
        durable_replace(tmp_path / "x", b"mine", tmp_path=tmp_path / "x.part", exclusive=True)
    assert not (tmp_path / "x").exists()
    assert (tmp_path / "x.part").read_bytes() == b"someone else's"  # not ours to remove


def test_durable_mkdir_makes_each_new_directory_durable_in_its_parent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "home").mkdir()
    ops = _trace_durability(monkeypatch)
    d = fileio.durable_mkdir(tmp_path / "home" / "backups" / "run-1" / "files")
    assert d.is_dir()
    home = tmp_path / "home"
    assert ops == [("mkdir", str(home / "backups")), ("fsync", str(home)),
                   ("mkdir", str(home / "backups" / "run-1")), ("fsync", str(home / "backups")),
                   ("mkdir", str(home / "backups" / "run-1" / "files")), ("fsync", str(home / "backups" / "run-1"))]
    ops.clear()
    fileio.durable_mkdir(d)  # exists: nothing to do
    assert ops == []


def test_durable_mkdir_refuses_a_file_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "home").write_bytes(b"not a directory")
    with pytest.raises(FileExistsError):
        fileio.durable_mkdir(tmp_path / "home")
    with pytest.raises(FileExistsError):
        fileio.durable_mkdir(tmp_path / "home" / "backups")


def test_durable_unlink_fsyncs_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"1")
    ops = _trace_durability(monkeypatch)
    assert fileio.durable_unlink(tmp_path / "a" / "f", tmp_path / "a" / "missing") == [tmp_path / "a" / "f"]
    assert ops == [("unlink", "f"), ("fsync", str(tmp_path / "a"))]


def test_unlink_files_removes_without_an_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"1")
    (tmp_path / "a" / "g").write_bytes(b"2")
    ops = _trace_durability(monkeypatch)
    assert fileio.unlink_files(tmp_path / "a" / "g", tmp_path / "a" / "missing", tmp_path / "a" / "f") == [
        tmp_path / "a" / "g", tmp_path / "a" / "f"]
    assert ops == [("unlink", "g"), ("unlink", "f")]
    assert not any((tmp_path / "a").iterdir())


def test_remove_trees_skips_what_another_process_removes_meanwhile(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for d in ("x", "y"):
        (tmp_path / "t" / d).mkdir(parents=True)
        for n in ("1", "2"):
            (tmp_path / "t" / d / n).write_bytes(b"1")
    real_unlink = os.unlink
    raced = []

    def unlink(p, *a, **kw):  # another sweep removes a whole subtree before our first unlink
        if not raced:
            raced.append(p)
            fileio.shutil.rmtree(tmp_path / "t" / "y")
            fileio.shutil.rmtree(tmp_path / "t" / "x")
        return real_unlink(p, *a, **kw)

    monkeypatch.setattr(os, "unlink", unlink)
    fileio.remove_trees(tmp_path / "t", tmp_path / "missing")
    assert raced and not (tmp_path / "t").exists()
    assert fileio.files_under(tmp_path / "missing") == []


def test_durable_move_fsyncs_both_directories_and_never_replaces(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a" / "stage" / "files").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    (tmp_path / "taken").mkdir()
    ops = _trace_durability(monkeypatch)
    real_rename = os.rename

    def rename(a: str, b: str) -> None:
        real_rename(a, b)
        ops.append(("rename", f"{Path(a).name}->{Path(b).name}"))

    monkeypatch.setattr(os, "rename", rename)
    assert fileio.durable_move(tmp_path / "a" / "stage", tmp_path / "b" / "s.1") == tmp_path / "b" / "s.1"
    assert (tmp_path / "b" / "s.1" / "files").is_dir() and not (tmp_path / "a" / "stage").exists()
    assert ops == [("rename", "stage->s.1"), ("fsync", str(tmp_path / "b")), ("fsync", str(tmp_path / "a"))]
    with pytest.raises(FileExistsError):
        fileio.durable_move(tmp_path / "b" / "s.1", tmp_path / "taken")
    assert (tmp_path / "b" / "s.1").is_dir()


def test_write_and_fsync_and_background_writer_set_times_before_the_fsync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        seen.append(os.fstat(fd).st_mtime_ns)
        real(fd)

    monkeypatch.setattr(fileio.os, "fsync", fsync)
    fileio.write_and_fsync(tmp_path / "i", b"index", exclusive=True, times_ns=(1_000_000_000, 2_000_000_000))
    w = BackgroundWriter(tmp_path / "l", chunk_bytes=4096, first_step=1 << 20, max_step=1 << 20)
    w.write(b"log")
    w.close(times_ns=(3_000_000_000, 4_000_000_000))
    assert seen == [2_000_000_000, 4_000_000_000]
    assert [(tmp_path / n).stat().st_mtime_ns for n in ("i", "l")] == seen


# What may still call the file system's durability primitives itself, and why. Everything else
# goes through fileio (durable_replace, durable_mkdir, durable_unlink, fsync_dir,
# write_and_fsync, BackgroundWriter), so the rules of docs/architecture.md, "Durability", are
# kept in one module.
_ALLOWED_PRIMITIVES = {
    # Kafka's replace protocol: several renames, then one fsync of the directory per step
    ("migration/migrations/common/replace.py", "rename"),
    # a backup hard link, or a copy fsynced by fileio.fsync_file; the caller fsyncs the directory
    ("migration/migrations/common/backup.py", "link"),
    # a staged file linked into its partition dir as .cleaned; the unit fsyncs the directory
    # before its journal says cleaned (unit._swap_in)
    ("migration/migrations/upgrade/unit.py", "link"),
    # the unification's crash test leaves a half-written part file on disk on purpose
    ("migration/migrations/unify/snapshot.py", "fsync"),
    # Spark's own log directory: nothing reads it after a crash
    ("migration/runtime/engine.py", "mkdir"),
    # Kafka's replace protocol: the .deleted and staged files go, one fsync of the directory per step
    ("migration/migrations/common/replace.py", "unlink"),
    # a stale backup or staged entry a link then takes the name of; the directory is fsynced after
    ("migration/migrations/common/backup.py", "unlink"),
    ("migration/migrations/tier/backup.py", "unlink"),
    ("migration/migrations/upgrade/unit.py", "unlink"),
    # a commit drops the run's backups: a name a power cut brings back holds no state anyone reads
    ("migration/migrations/common/backup.py", "rmtree"),
    # a rewrite's partial .cleaned output: Kafka deletes every .cleaned file at startup, a re-run too
    ("migration/migrations/upgrade/rewrite.py", "unlink"),
    # a dry run's throwaway store: removed at the unit's start, its end and the run's finalize
    ("migration/migrations/tier/unit.py", "rmtree"),
    ("migration/migrations/tier/driver.py", "rmtree"),
    # a multipart upload's directory, its removal made durable in uploads/ (filesystem._remove_tree)
    ("migration/migrations/tier/filesystem.py", "rmtree"),
}
_PRIMITIVES = {"fsync", "fdatasync", "replace", "rename", "renames", "link", "hardlink_to", "mkdir", "makedirs",
               "mkstemp", "mkdtemp", "move", "symlink", "unlink", "remove", "rmtree"}
# list.remove(x) and the like: only os.remove removes a file
_OS_ONLY = {"remove"}
# Folders whose writes are not kmigrate's persisted state: the demo builds a sample cluster.
_NOT_STATE = ("migration/demo/",)


def test_every_persisted_file_and_directory_goes_through_fileio() -> None:
    import ast

    root = Path(__file__).resolve().parents[2]
    found = []
    for path in sorted((root / "migration").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "migration/formats/fileio.py" or rel.startswith(_NOT_STATE):
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _PRIMITIVES:
                owner = node.func.value
                if node.func.attr in ("replace", "rename") and not (isinstance(owner, ast.Name) and owner.id == "os") \
                        and len(node.args) != 1:
                    continue  # str.replace(old, new), not os.replace or Path.replace(target)
                if node.func.attr in _OS_ONLY and not (isinstance(owner, ast.Name) and owner.id == "os"):
                    continue
                if (rel, node.func.attr) not in _ALLOWED_PRIMITIVES:
                    found.append(f"{rel}:{node.lineno} {ast.unparse(node.func)}")
    assert not found, "persisted files and directories must go through migration/formats/fileio.py: " + \
        "; ".join(found)


@pytest.mark.parametrize(
    ("name", "offset"),
    [
        ("00000000000000000000.index", 0),
        ("00000000000000368769.index", 368769),
        ("00000000000000000042.index.swap", 42),
        ("00000000000000000042.index.cleaned", 42),
        ("00000000000000000042.index.deleted", 42),
    ],
)
def test_offset_from_path(tmp_path: Path, name: str, offset: int) -> None:
    assert offset_from_path(tmp_path / name, ".index") == offset


@pytest.mark.parametrize(
    "name",
    ["foo.index", "00000000000000000000.log", "00000000000000000000.indexx", "00000000000000000000", ".index"],
)
def test_offset_from_path_rejects(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidFileNameError) as e:
        offset_from_path(tmp_path / name, ".index")
    assert e.value.path == str(tmp_path / name)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")
def test_start_writeback_reaches_the_kernel(tmp_path: Path) -> None:
    """True when the kernel took the request for a file's range; the call is real, not a no-op:
    a closed descriptor is refused (EBADF), and the data is left as written."""
    path = tmp_path / "segment.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"k" * 100_000)
        assert start_writeback(fd, 0, 100_000)
        assert start_writeback(fd, 4096, 0)  # 0 bytes: to the end of the file
    finally:
        os.close(fd)
    assert not start_writeback(fd, 0, 100_000)
    assert path.read_bytes() == b"k" * 100_000


# ------------------------------------------------------------------ BackgroundWriter


def _writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("writer ")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.binary(max_size=200), max_size=30), chunk=st.sampled_from([1, 7, 64, 4096]),
       chunks=st.integers(min_value=2, max_value=4))
def test_background_writer_writes_and_hashes_every_byte_in_order(tmp_path: Path, pieces: list[bytes], chunk: int,
                                                                  chunks: int) -> None:
    """Pieces of any size, smaller and larger than the buffers, reach the file in order, and the
    hasher sees exactly the file's bytes; the caller may reuse its buffer at once (a view of
    one bytearray, overwritten after every write)."""
    path = tmp_path / "out.log"
    hasher = hashlib.sha256()
    w = BackgroundWriter(path, chunk_bytes=chunk, chunks=chunks, first_step=1, max_step=8, hasher=hasher)
    scratch = bytearray(200)
    for piece in pieces:
        scratch[: len(piece)] = piece
        w.write(memoryview(scratch)[: len(piece)])
        scratch[:] = b"\xff" * len(scratch)
    w.close()
    expected = b"".join(pieces)
    assert path.read_bytes() == expected
    assert hasher.digest() == hashlib.sha256(expected).digest()
    assert not _writer_threads()


def test_background_writer_fsyncs_at_close_after_the_last_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """close returns a durable file: its one fsync comes after every byte is in the file."""
    path = tmp_path / "out.log"
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)
        real_fsync(fd)

    def slow_write(fd: int, data: object) -> int:  # the thread lags behind the caller
        time.sleep(0.002)
        return real_write(fd, data)

    real_write = os.write
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "write", slow_write)
    w = BackgroundWriter(path, chunk_bytes=4096, first_step=1 << 20, max_step=1 << 20)
    for _ in range(100):
        w.write(b"r" * 1000)
    assert not synced
    w.close()
    w.close()  # a second close does nothing
    assert synced == [100_000]
    assert path.read_bytes() == b"r" * 100_000
    with pytest.raises(ValueError, match="written after close"):
        w.write(b"late")


def test_background_writer_abort_drops_the_rest_without_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    path = tmp_path / "out.log"
    w = BackgroundWriter(path, chunk_bytes=4096, first_step=1 << 20, max_step=1 << 20)
    w.write(b"a" * 10_000)
    w.abort()
    w.abort()
    w.close()  # after abort: nothing more
    assert synced == []
    assert path.stat().st_size <= 10_000 and path.stat().st_size % 4096 == 0  # whole buffers only
    assert not _writer_threads()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_background_writer_raises_the_threads_write_error_in_the_caller() -> None:
    """A write error of the thread (here ENOSPC, /dev/full) is raised by a later write or by
    close, in the caller's thread; nothing waits forever, and the file is closed."""
    w = BackgroundWriter("/dev/full", chunk_bytes=4096, chunks=2, first_step=1 << 20, max_step=1 << 20)
    fd = w._fd
    with pytest.raises(OSError) as e:
        for _ in range(100):
            w.write(b"x" * 4096)
        w.close()
    assert e.value.errno == errno.ENOSPC
    w.abort()  # what a caller's cleanup does after the error
    with pytest.raises(OSError):
        os.fstat(fd)
    assert not _writer_threads()


def test_background_writer_starts_writeback_of_written_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writeback requests follow the file from its first byte, each once its step is
    written (steps doubling from first_step to max_step), never beyond what is written."""
    calls: list[tuple[int, int, int]] = []

    def spy(fd: int, offset: int, nbytes: int) -> bool:
        calls.append((offset, nbytes, os.fstat(fd).st_size))
        return True

    monkeypatch.setattr(fileio, "start_writeback", spy)
    w = BackgroundWriter(tmp_path / "out.log", chunk_bytes=1000, first_step=1000, max_step=4000)
    for _ in range(30):
        w.write(b"s" * 1000)
    w.close()
    assert [(o, n) for o, n, _ in calls] == [(0, 1000), (1000, 2000), (3000, 4000), (7000, 4000), (11000, 4000),
                                             (15000, 4000), (19000, 4000), (23000, 4000)]
    assert all(o + n <= size for o, n, size in calls)


def test_background_writers_reuse_buffers_but_never_share_them(tmp_path: Path) -> None:
    """A finished writer's buffers serve the next writer of the process (no new zeroed ones);
    two writers open at once never hold the same buffer, and each writes its own bytes."""
    def writer(name: str) -> BackgroundWriter:
        return BackgroundWriter(tmp_path / name, chunk_bytes=4099, first_step=1 << 20, max_step=1 << 20)

    first = writer("a.log")
    first.write(b"a" * 10_000)
    first.close()
    one, two = writer("b.log"), writer("c.log")
    assert {id(b) for b in one._buffers} == {id(b) for b in first._buffers}
    assert not {id(b) for b in one._buffers} & {id(b) for b in two._buffers}
    for _ in range(20):
        one.write(b"b" * 1000)
        two.write(b"c" * 1000)
    two.close()
    one.abort()
    three = writer("d.log")
    three.write(b"d" * 5000)
    three.close()
    assert (tmp_path / "a.log").read_bytes() == b"a" * 10_000
    assert (tmp_path / "c.log").read_bytes() == b"c" * 20_000
    assert (tmp_path / "d.log").read_bytes() == b"d" * 5000


# ------------------------------------------------------------------ read_ahead


def _reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("reader ")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2000), chunk=st.sampled_from([1, 7, 64, 4096]),
       chunks=st.integers(min_value=1, max_value=4))
def test_read_ahead_gives_every_byte_in_order(tmp_path: Path, data: bytes, chunk: int, chunks: int) -> None:
    """Files of any size, smaller and larger than the buffers, come back whole and in order,
    each chunk full but the last; the thread is gone once the file is read."""
    path = tmp_path / "in.log"
    path.write_bytes(data)
    got = [bytes(view) for view in fileio.read_ahead(path, chunk_bytes=chunk, chunks=chunks)]
    assert b"".join(got) == data
    assert all(len(c) == chunk for c in got[:-1]) and all(0 < len(c) <= chunk for c in got)
    assert not _reader_threads()


def test_read_ahead_keeps_a_chunk_until_the_next_is_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread reads ahead, but never into the buffer of the chunk the caller holds: with
    reads slowed down, a chunk held while the thread runs on is unchanged."""
    path = tmp_path / "in.log"
    data = b"".join(bytes([k]) * 1024 for k in range(16))  # 16 chunks of 1 KiB, each of its own byte
    path.write_bytes(data)
    views = fileio.read_ahead(path, chunk_bytes=1024, chunks=2)
    for k, view in enumerate(views):
        held = bytes(view)
        time.sleep(0.002)  # the thread fills every buffer it may meanwhile
        assert bytes(view) == held == data[k * 1024 : (k + 1) * 1024]


def test_read_ahead_raises_the_threads_read_error_in_the_caller(tmp_path: Path) -> None:
    """A read error reaches the caller, in place of the chunk; the thread is gone."""
    with pytest.raises(IsADirectoryError):
        for _ in fileio.read_ahead(tmp_path, chunk_bytes=4096):
            pass
    assert not _reader_threads()


def test_read_ahead_closed_early_stops_the_thread(tmp_path: Path) -> None:
    """A caller that stops after the first chunk (an error of its own, or a break) leaves no
    thread behind."""
    path = tmp_path / "in.log"
    path.write_bytes(os.urandom(1 << 20))
    views = fileio.read_ahead(path, chunk_bytes=4096, chunks=3)
    assert len(next(views)) == 4096
    views.close()
    assert not _reader_threads()
