from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from migration.formats.errors import InvalidFileNameError
from migration.formats.fileio import atomic_write, fsync_dir, offset_from_path, start_writeback


def test_atomic_write_bytes_and_no_temp_left(tmp_path: Path) -> None:
    target = tmp_path / "file"
    atomic_write(target, b"hello", tmp_suffix=".tmp")
    assert target.read_bytes() == b"hello"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_atomic_write_chunks_replaces_existing(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_bytes(b"old content")
    atomic_write(target, [b"a", bytearray(b"bc"), memoryview(b"def")], tmp_suffix=".part")
    assert target.read_bytes() == b"abcdef"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_atomic_write_failure_keeps_target_and_removes_temp(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_bytes(b"old content")

    def chunks():
        yield b"partial"
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        atomic_write(target, chunks(), tmp_suffix=".tmp")
    assert target.read_bytes() == b"old content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_atomic_write_overwrites_stale_temp(tmp_path: Path) -> None:
    (tmp_path / "file.tmp").write_bytes(b"stale stale stale")
    atomic_write(tmp_path / "file", b"new", tmp_suffix=".tmp")
    assert (tmp_path / "file").read_bytes() == b"new"
    assert not (tmp_path / "file.tmp").exists()


def test_atomic_write_rejects_empty_suffix(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        atomic_write(tmp_path / "file", b"x", tmp_suffix="")
    assert list(tmp_path.iterdir()) == []


def test_fsync_dir(tmp_path: Path) -> None:
    fsync_dir(tmp_path)


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
