"""Kafka's crash-safe segment replacement (``LocalLog.replaceSegments``), made resumable.

1. new segments are fully written as ``<name>.cleaned`` and fsynced (the caller's part);
2. ``.cleaned`` -> ``.swap``, segments in descending base offset, directory fsynced;
3. old files -> ``<name>.deleted``, directory fsynced;
4. ``.swap`` -> final names, directory fsynced;
5. ``.deleted`` files removed (Kafka waits file.delete.delay.ms; offline nobody reads them).
What Kafka's LogLoader does with each intermediate state (docs/formats.md §4.9) keeps the log
whole: leftover ``.cleaned`` files (and every ``.swap`` at or above the lowest of them) are
deleted, so an interrupted step 2 falls back to the old segment; once every new file is a
``.swap``, the swap files are renamed in and every non-swap file in their offset range is
deleted, so an interrupted step 3 or 4 completes to the new segments; ``.deleted`` files
are deleted. :func:`replace_segments` can be called again on any of these states and
finishes the job (each step checks what is already done).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from migration.formats import names
from migration.formats.errors import KafkaFormatError
from migration.formats.fileio import durable_unlink, fsync_dir
from migration.runtime.faults import fault_point


def _suffixed(directory: Path, name: str, suffix: str) -> Path:
    return directory / (name + suffix)


def new_file_states(directory: Path, new_files: Sequence[str]) -> dict[str, str]:
    """Where each new file is: ``cleaned``, ``swap``, ``final`` (its name) or ``missing``."""
    out = {}
    for n in new_files:
        if _suffixed(directory, n, names.CLEANED_FILE_SUFFIX).exists():
            out[n] = "cleaned"
        elif _suffixed(directory, n, names.SWAP_FILE_SUFFIX).exists():
            out[n] = "swap"
        elif (directory / n).exists():
            out[n] = "final"
        else:
            out[n] = "missing"
    return out


def replace_segments(directory: Path, new_segments: Sequence[Sequence[str]], old_files: Sequence[str]) -> None:
    """Swap ``new_segments`` (file names per new segment, staged as ``.cleaned``) in for
    ``old_files``. Safe to call again after a crash at any point of a previous call."""
    by_base = sorted(new_segments, key=lambda files: names.offset_from_file_name(files[0]), reverse=True)
    new_names = [n for files in by_base for n in files]
    new_set = set(new_names)
    # 2. .cleaned -> .swap, highest base offset first: an interruption leaves .cleaned files
    # only below every .swap, and Kafka then discards all of them.
    renamed = False
    for files in by_base:
        for n in files:
            cleaned = _suffixed(directory, n, names.CLEANED_FILE_SUFFIX)
            if cleaned.exists():
                os.rename(cleaned, _suffixed(directory, n, names.SWAP_FILE_SUFFIX))
                renamed = True
                fault_point("swap-rename")
    if renamed:
        fsync_dir(directory)
    # 3. old files -> .deleted. An old name that a new file takes over is old only while that
    # new file is still a .swap (step 4 starts after step 3 has finished).
    renamed = False
    for n in old_files:
        p = directory / n
        if p.exists() and (n not in new_set or _suffixed(directory, n, names.SWAP_FILE_SUFFIX).exists()):
            os.rename(p, _suffixed(directory, n, names.DELETED_FILE_SUFFIX))
            renamed = True
            fault_point("old-deleted")
    if renamed:
        fsync_dir(directory)
    # 4. .swap -> final names
    renamed = False
    for n in new_names:
        swap = _suffixed(directory, n, names.SWAP_FILE_SUFFIX)
        if swap.exists():
            os.rename(swap, directory / n)
            renamed = True
            fault_point("swap-final")
    if renamed:
        fsync_dir(directory)
    # 5. the old files
    removed = False
    for n in old_files:
        p = _suffixed(directory, n, names.DELETED_FILE_SUFFIX)
        if p.exists():
            p.unlink()
            removed = True
            fault_point("deleted-remove")
    if removed:
        fsync_dir(directory)


def remove_staged(directory: Path, files: Sequence[str]) -> None:
    """Drop ``.cleaned`` and ``.swap`` copies of ``files`` (what Kafka does with an
    incomplete replacement)."""
    removed = False
    for n in files:
        for suffix in (names.CLEANED_FILE_SUFFIX, names.SWAP_FILE_SUFFIX):
            p = _suffixed(directory, n, suffix)
            if p.exists():
                p.unlink()
                removed = True
    if removed:
        fsync_dir(directory)


def remove_cleaned_in_range(directory: Path, first: int, end: int | None) -> None:
    """Delete ``.cleaned`` files whose offset lies in ``[first, end)``: output of an
    interrupted rewrite of that range (Kafka deletes every ``.cleaned`` file at startup)."""
    removed = False
    for e in os.scandir(directory):
        if e.name.endswith(names.CLEANED_FILE_SUFFIX) and _offset_in(e.name, first, end):
            os.unlink(e.path)
            removed = True
    if removed:
        fsync_dir(directory)


def _offset_in(name: str, first: int, end: int | None) -> bool:
    try:
        off = names.offset_from_file_name(name)
    except KafkaFormatError:  # not a Kafka file name: not ours
        return False
    return off >= first and (end is None or off < end)


def segment_files_in_range(directory: Path, first: int, end: int | None) -> list[str]:
    """Segment files (``.log``, ``.index``, ``.timeindex``, ``.txnindex``, final names) whose
    offset lies in ``[first, end)``."""
    return sorted(e.name for e in os.scandir(directory)
                  if e.name.endswith(names.SEGMENT_FILE_SUFFIXES) and _offset_in(e.name, first, end))


def settle_range(directory: Path, first: int, end: int | None, old_files: Sequence[str]) -> list[str]:
    """Resolve leftovers of a replacement of ``old_files`` in ``[first, end)`` as Kafka's
    LogLoader would, without knowing which new files it staged (a run whose journal is lost):
    with any ``.cleaned`` file there, step 2 had not finished, the old files are whole, and
    every ``.cleaned`` and ``.swap`` of the range goes; with only ``.swap`` files, the
    replacement is finished. Leftover ``.deleted`` files of the range go last. Returns what it
    did. Only one replacement may be in flight in a directory, so the range's leftovers are
    all of one replacement."""
    staged = (names.CLEANED_FILE_SUFFIX, names.SWAP_FILE_SUFFIX)
    leftovers = sorted(e.name for e in os.scandir(directory)
                       if e.name.endswith(staged) and _offset_in(e.name, first, end))
    cleaned = [n for n in leftovers if n.endswith(names.CLEANED_FILE_SUFFIX)]
    swaps = [n[: -len(names.SWAP_FILE_SUFFIX)] for n in leftovers if n.endswith(names.SWAP_FILE_SUFFIX)]
    done: list[str] = []
    if cleaned:
        remove_staged(directory, [n[: -len(names.CLEANED_FILE_SUFFIX)] for n in cleaned] + swaps)
        done.append(f"removed staged files {', '.join(cleaned + [s + names.SWAP_FILE_SUFFIX for s in swaps])}")
    elif swaps:
        by_prefix: dict[str, list[str]] = {}
        for n in swaps:
            by_prefix.setdefault(n.split(".", 1)[0], []).append(n)
        replace_segments(directory, list(by_prefix.values()), old_files)
        done.append(f"finished the replacement by {', '.join(s + names.SWAP_FILE_SUFFIX for s in swaps)}")
    deleted = durable_unlink(*(e.path for e in os.scandir(directory)
                                if e.name.endswith(names.DELETED_FILE_SUFFIX) and _offset_in(e.name, first, end)))
    if deleted:
        done.append(f"removed {', '.join(sorted(p.name for p in deleted))}")
    return done
