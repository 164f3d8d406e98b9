"""``loader_actions`` names what Kafka's loader does with leftovers; the test replays the
loader's steps (tests/migrations/upgrade/kafka_loader.py, written apart from it) on a copy and
requires every file it named for deletion to be gone, every swap it named renamed, and nothing
else touched."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from migration.formats.model import Compression, Record
from migration.formats.record_batch import build_record_batch
from migration.logdir.leftovers import loader_actions
from migration.logdir.validation import validate_paths

sys.path.insert(0, str(Path(__file__).parents[1] / "migrations" / "upgrade"))
from kafka_loader import simulate_startup


def _segment(base: int, count: int) -> bytes:
    records = [Record(base + i, 1, None, b"v%d" % (base + i)) for i in range(count)]
    return bytes(build_record_batch(records, compression=Compression.NONE))


def _name(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


def _apply(d: Path, tmp: Path) -> tuple[set[str], set[str]]:
    copy = tmp / "copy" / d.name
    shutil.copytree(d, copy)
    before = {p.name for p in copy.iterdir()}
    simulate_startup(copy)
    after = {p.name for p in copy.iterdir()}
    return before - after, after - before


@pytest.mark.parametrize("state", ["swaps-only", "cleaned-and-swaps", "deleted", "tmp"])
def test_loader_actions_name_what_kafkas_loader_does(tmp_path: Path, state: str) -> None:
    d = tmp_path / "orders-0"
    d.mkdir()
    (d / _name(0, ".log")).write_bytes(_segment(0, 3))
    (d / _name(0, ".index")).write_bytes(b"")
    (d / _name(3, ".log")).write_bytes(_segment(3, 3))
    (d / _name(6, ".log")).write_bytes(_segment(6, 2))
    if state in ("swaps-only", "cleaned-and-swaps"):
        (d / _name(3, ".log.swap")).write_bytes(_segment(3, 3))
        (d / _name(3, ".index.swap")).write_bytes(b"")
    if state == "cleaned-and-swaps":
        (d / _name(0, ".log.cleaned")).write_bytes(_segment(0, 3))
    if state == "deleted":
        (d / _name(3, ".timeindex.deleted")).write_bytes(b"")
    if state == "tmp":
        (d / "00000000000000000008.snapshot.kmigrate.tmp").write_bytes(b"x")
    fates = loader_actions(d)
    removed, added = _apply(d, tmp_path)
    said_deleted = {n for n, f in fates.items() if f.startswith("Kafka deletes")}
    said_renamed = {n for n, f in fates.items() if f.startswith("Kafka renames")}
    # a swap renamed over an original shows as "not removed": the loader deletes the original first
    overwritten = {n[: -len(".swap")] for n in said_renamed}
    assert removed == said_deleted - overwritten | said_renamed
    assert added == {n[: -len(".swap")] for n in said_renamed} - {p.name for p in d.iterdir()}
    if state == "tmp":
        assert "ignores it" in fates["00000000000000000008.snapshot.kmigrate.tmp"]
    messages = " ".join(f.message for f in validate_paths([str(d)]).findings if f.code == "LEFTOVER_FILE")
    for n, fate in fates.items():
        assert fate in messages, n
