"""What Kafka's loader will do with the leftovers of a partition directory, said before it does it.

A state with leftovers and no journal (a killed or power-cut run whose run directory is gone, or
a directory copied from a broker) is judged by what Kafka's ``LogLoader`` makes of it at the next
start (Kafka 3.0 and later; docs/formats.md §4.9, docs/architecture.md "One replace in flight
per partition"), in its order:
1. every ``*.deleted`` file is deleted;
2. with any ``*.cleaned`` file present, every ``*.swap`` file at or above the lowest ``.cleaned``
   offset is deleted (an interrupted cleaner split), then every ``.cleaned`` file;
3. the remaining ``.log.swap`` files are taken as one range, from the lowest base offset to the
   highest next offset; every non-swap file named by an offset inside it is deleted and the
   swaps are renamed in;
4. index files left without their ``.log`` are deleted.
Other temporary names (``*.tmp``) are not the loader's: they stay until a writer of the same
file overwrites them, and the message says so.
"""

from __future__ import annotations

import os
from pathlib import Path

from migration.formats import names
from migration.formats.errors import KafkaFormatError
from migration.formats.file_records import FileRecords


def _offset(name: str) -> int | None:
    try:
        return names.offset_from_file_name(name)
    except KafkaFormatError:
        return None


def _next_offset(log_swap: Path, base: int) -> int:
    """The offset after the last batch of a ``.log.swap`` (the loader reads it for the range)."""
    last = None
    try:
        for batch in FileRecords(log_swap).batches():
            last = batch.last_offset
    except (KafkaFormatError, OSError):
        pass  # the loader stops at what it cannot read; so does the range
    return base if last is None else last + 1


def loader_actions(partition_dir: str | os.PathLike[str]) -> dict[str, str]:
    """File name -> what Kafka's loader will do with it, for every leftover of the directory
    and every file a leftover swap will delete. Reads the directory; changes nothing."""
    d = Path(partition_dir)
    entries = sorted(e.name for e in os.scandir(d) if e.is_file())
    out: dict[str, str] = {}
    for n in entries:
        if n.endswith(names.DELETED_FILE_SUFFIX):
            out[n] = "Kafka deletes it at startup (a replaced or retention-deleted file)"
        elif n.endswith(names.TMP_FILE_SUFFIX):
            out[n] = ("Kafka's loader ignores it: it stays until removed (kmigrate's re-run of the run that "
                      "left it, or an operator, removes it)")
    cleaned = [n for n in entries if n.endswith(names.CLEANED_FILE_SUFFIX)]
    swaps = [n for n in entries if n.endswith(names.SWAP_FILE_SUFFIX)]
    if cleaned:
        lowest = min((o for n in cleaned if (o := _offset(n)) is not None), default=0)
        for n in swaps:
            if (_offset(n) or 0) >= lowest:
                out[n] = (f"Kafka deletes it at startup: a .cleaned file at offset {lowest} or below marks the "
                          "replacement it belongs to as unfinished")
        for n in cleaned:
            out[n] = "Kafka deletes it at startup (an unfinished replacement's staged file); the original stays"
        swaps = [n for n in swaps if n not in out]
    log_swaps = [n for n in swaps if n.endswith(names.LOG_FILE_SUFFIX + names.SWAP_FILE_SUFFIX)]
    if log_swaps:
        bases = {n: _offset(n) or 0 for n in log_swaps}
        low = min(bases.values())
        high = max(_next_offset(d / n, b) for n, b in bases.items())
        for n in entries:
            o = _offset(n)
            if n in out or n.endswith(names.SWAP_FILE_SUFFIX) or o is None or not low <= o < high:
                continue
            out[n] = (f"Kafka deletes it at startup: it lies in the offset range [{low}, {high}) that the "
                      ".swap files of this directory replace")
    for n in swaps:
        if n not in out:
            out[n] = (f"Kafka renames it to {n[: -len(names.SWAP_FILE_SUFFIX)]} at startup (a finished "
                      "replacement's new file)")
    return out
