"""The rewrite's output writer (migration/migrations/upgrade/rewrite.py, ``_SegmentWriter``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migration.formats import core, fileio
from migration.formats.legacy import encode_message
from migration.formats.model import MAGIC_V0
from migration.migrations.upgrade import rewrite
from migration.migrations.upgrade.rewrite import RewriteSpec, rewrite_segment


def _v0_segment(path: Path, messages: int) -> None:
    path.write_bytes(b"".join(encode_message(o, MAGIC_V0, 0, -1, b"key-%d" % o, b"v" * 200) for o in range(messages)))


@pytest.mark.parametrize("core_name", ["python", "compiled"])
def test_the_writer_starts_writeback_of_each_step_before_the_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     core_name: str) -> None:
    """The output's bytes so far are sent on their way to the disk at steps growing from
    WRITEBACK_FIRST_BYTES to WRITEBACK_BYTES (a small segment's fsync, too, waits for a part
    only), so the fsync at close waits for the last step only: the requests cover the file
    from its start, one after the other without a gap or overlap, each of at least its step,
    and only bytes already written, up to the last run's; the output is the same as without."""
    if core_name == "compiled" and core.compiled is None:
        pytest.skip("compiled core not built")
    log = tmp_path / "00000000000000000000.log"
    _v0_segment(log, 20_000)  # 5 MB: the compiled walker hands over runs of a read chunk (1 MiB)
    first, step = 4 << 10, 16 << 10
    calls: list[tuple[int, int, int]] = []

    def spy(fd: int, offset: int, nbytes: int) -> bool:
        calls.append((offset, nbytes, Path(f"/proc/self/fd/{fd}").stat().st_size))
        return True

    spec = RewriteSpec(target_magic=1)
    with core.use(core_name):
        monkeypatch.setattr(rewrite, "WRITE_BUFFER_SIZE", first)  # the writer thread's buffers
        monkeypatch.setattr(rewrite, "WRITEBACK_FIRST_BYTES", 1 << 40)
        monkeypatch.setattr(rewrite, "WRITEBACK_BYTES", 1 << 40)
        rewrite_segment(log, spec)
        without = (tmp_path / "00000000000000000000.log.cleaned").read_bytes()
        monkeypatch.setattr(rewrite, "WRITEBACK_FIRST_BYTES", first)
        monkeypatch.setattr(rewrite, "WRITEBACK_BYTES", step)
        monkeypatch.setattr(fileio, "start_writeback", spy)
        rewrite_segment(log, spec)
    output = (tmp_path / "00000000000000000000.log.cleaned").read_bytes()
    assert output == without
    assert len(calls) > 3
    assert calls[0][0] == 0
    if core_name == "python":  # a piece at a time: the first request is the first, short step
        assert calls[0][1] < 2 * first
    for i, ((offset, nbytes, _), (next_offset, _, _)) in enumerate(zip(calls, calls[1:], strict=False)):
        assert nbytes >= min(first << i, step) and next_offset == offset + nbytes
    assert all(offset + nbytes <= size for offset, nbytes, size in calls)  # flushed before the request
    assert len(output) - (2 << 20) < calls[-1][0] + calls[-1][1] <= len(output)
