"""Test helpers: Kafka's startup handling of a partition directory and an independent reader.

``simulate_startup`` follows LogLoader.load as docs/formats.md §4.9 states it, step by step,
so a crash test can ask "would Kafka load this directory, and what would it see?".
``read_partition`` reads every segment with kafka-python (not our codecs) and returns the
records in file order, CRCs checked.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kafka.record.memory_records import MemoryRecords

CLEANED = ".cleaned"
SWAP = ".swap"
DELETED = ".deleted"
_OFFSET = re.compile(r"^(\d{1,20})\.")


def _offset(name: str) -> int | None:
    m = _OFFSET.match(name)
    return int(m.group(1)) if m else None


def _next_offset(log: Path) -> int:
    """Last offset + 1 of a segment (Kafka reads the segment for this)."""
    last = None
    for batch in _batches(log.read_bytes()):
        last = batch.last_offset if hasattr(batch, "last_offset") else _legacy_last(batch)
    return (last + 1) if last is not None else (_offset(log.name) or 0)


def _legacy_last(batch) -> int:
    return batch._offset  # a legacy entry's offset is its last offset


def _batches(data: bytes):
    mr = MemoryRecords(data)
    while mr.has_next():
        b = mr.next_batch()
        if b is None:
            break
        yield b


def simulate_startup(partition_dir: str | os.PathLike[str]) -> list[str]:
    """Apply LogLoader's startup steps 1-6 (§4.9) to ``partition_dir``; return what it did."""
    d = Path(partition_dir)
    actions: list[str] = []
    # 1. delete *.deleted (not KRaft .checkpoint.deleted); collect .cleaned and .swap
    cleaned: list[Path] = []
    swaps: list[Path] = []
    for p in sorted(d.iterdir()):
        if not p.is_file():
            continue
        if p.name.endswith(DELETED) and not p.name.endswith(".checkpoint" + DELETED):
            p.unlink()
            actions.append(f"delete {p.name}")
        elif p.name.endswith(CLEANED):
            cleaned.append(p)
        elif p.name.endswith(SWAP):
            swaps.append(p)
    # 2. an interrupted split: swaps at or above the lowest .cleaned offset go, then all .cleaned
    if cleaned:
        min_cleaned = min(_offset(p.name) for p in cleaned)  # type: ignore[type-var]
        for p in list(swaps):
            if (_offset(p.name) or 0) >= min_cleaned:
                p.unlink()
                swaps.remove(p)
                actions.append(f"delete {p.name}")
        for p in cleaned:
            p.unlink()
            actions.append(f"delete {p.name}")
    # 3. the offset range the remaining .log.swap segments cover
    log_swaps = [p for p in swaps if p.name.endswith(".log" + SWAP)]
    if log_swaps:
        min_swap = min(_offset(p.name) for p in log_swaps)  # type: ignore[type-var]
        max_swap = max(_next_offset(p) for p in log_swaps)
        # 4. delete every non-swap file named by an offset inside that range
        for p in sorted(d.iterdir()):
            if not p.is_file() or p.name.endswith(SWAP):
                continue
            off = _offset(p.name)
            if off is not None and min_swap <= off < max_swap:
                p.unlink()
                actions.append(f"delete {p.name} (overlaps swap [{min_swap}, {max_swap}))")
    # 5. swap in
    for p in swaps:
        target = p.with_name(p.name[: -len(SWAP)])
        os.replace(p, target)
        actions.append(f"rename {p.name} -> {target.name}")
    # 6. index files without their .log are deleted
    logs = {p.name[: -len(".log")] for p in d.iterdir() if p.name.endswith(".log")}
    for p in sorted(d.iterdir()):
        for suffix in (".index", ".timeindex", ".txnindex"):
            if p.name.endswith(suffix) and p.name[: -len(suffix)] not in logs:
                p.unlink()
                actions.append(f"delete orphan {p.name}")
    return actions


def simulate_log_dir_startup(log_dir: str | os.PathLike[str]) -> dict[str, list[str]]:
    out = {}
    for p in sorted(Path(log_dir).iterdir()):
        if p.is_dir() and "-" in p.name and not p.name.startswith("__"):
            out[p.name] = simulate_startup(p)
    return out


def read_partition(partition_dir: str | os.PathLike[str]) -> list[tuple]:
    """(offset, timestamp, key, value, headers) of every record, segments in name order, read
    by kafka-python with every CRC checked."""
    out: list[tuple] = []
    for log in sorted(Path(partition_dir).glob("*.log")):
        for batch in _batches(log.read_bytes()):
            assert batch.validate_crc(), f"{log}: bad batch CRC"
            for rec in batch:
                if hasattr(rec, "validate_crc"):
                    assert rec.validate_crc(), f"{log}: bad record CRC"
                out.append((rec.offset, rec.timestamp, rec.key, rec.value, tuple(rec.headers or ())))
    return out


def read_log_dir(log_dir: str | os.PathLike[str]) -> dict[str, list[tuple]]:
    return {p.name: read_partition(p) for p in sorted(Path(log_dir).iterdir())
            if p.is_dir() and "-" in p.name and not p.name.startswith("__")}


def read_log_dir_records(log_dir: str | os.PathLike[str]) -> dict[str, list[tuple]]:
    """(offset, key, value, headers) of every record per partition: what a migration must
    keep exactly once. Timestamps are left out (v0 has none: None before a v2 rewrite, -1 after)."""
    return {p: [(o, k, v, h) for o, _, k, v, h in recs] for p, recs in read_log_dir(log_dir).items()}
