"""The per-unit journal of an upgrade: ``<run dir>/journal/<unit id>.json``, then
``<unit id>+1.json``, ``<unit id>+2.json``... (runtime/runs.py: each save a new file, the
highest number the journal; renaming over the previous one would free it, a slow operation on
a file system mounted with online discard).

It lives in the run directory, never in a log dir (Kafka refuses unknown files there), and is
written atomically (temporary file, fsync, rename, fsync of the directory) at each step that
a re-run must know about:
- ``started``: originals fingerprinted and backed up; ``.cleaned`` output may be partial;
- ``cleaned``: every output file is complete and fsynced, verified (digest), with its
  checksum; from here the replace protocol may be resumed (renames only);
- ``done``: replaced; the unit result is recorded, a re-run reports it and does nothing;
- ``failed``: the input is corrupt or changed; nothing was replaced;
- ``rolling-back`` / ``rolled-back``: the originals are being / have been swapped back.

The record digests (``digest_before``, ``digest_after``) name their hash and layout version
(:class:`~migration.formats.digest.RecordDigest`); those of a journal written before BLAKE3 lack
the fields and read as blake2b-256, layout 1. A resume reports them as they are; anything that
checks records against them digests with their algorithm (``RecordDigester.like``), since
``RecordDigest.matches`` refuses to compare digests of different algorithms.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, PrivateAttr

from migration.formats.digest import RecordDigest
from migration.formats.fileio import durable_mkdir, durable_replace
from migration.migrations.common.backup import BackupFile
from migration.migrations.upgrade.rewrite import OutputSegment
from migration.runtime.documents import RunDocument
from migration.runtime.runs import JOURNAL_DIR, journal_file_name


class JournalState(StrEnum):
    STARTED = "started"
    CLEANED = "cleaned"
    DONE = "done"
    FAILED = "failed"
    ROLLING_BACK = "rolling-back"
    ROLLED_BACK = "rolled-back"


# the states the runtime reads as "a replacement may be half done" (a killed run blocks others);
# they must be the runtime's IN_FLIGHT_STATES (tests/migrations/upgrade/test_run_lock.py checks it)
IN_FLIGHT = frozenset({JournalState.STARTED, JournalState.CLEANED, JournalState.ROLLING_BACK})


class UnitJournal(RunDocument):
    """One unit's journal; versioned like every run document (a resume may read it with a newer
    kmigrate: an unknown version is refused, never guessed at). Version 2: the originals' and
    outputs' file checksums name their algorithm (BLAKE3); version 1 holds SHA-256 in ``sha256``
    / ``log_sha256``, read as such (``common.checksum``). Version 3: ``staged_from``. Version 4:
    saved under a new name each time. Version 5: ``prefix_from``. A kmigrate that reads version 3
    at most reads a unit's first file only: it refuses a run this one started (version 5 there),
    but would misread a run it started and this one resumed, which is not for it to resume again
    (docs/operations.md)."""

    VERSION: ClassVar[int] = 5
    NAME: ClassVar[str] = "unit journal"

    unit_id: str
    partition_dir: str
    log_file: str
    base_offset: int
    state: JournalState
    originals: list[BackupFile] = Field(default_factory=list)
    backup_dir: str | None = None
    outputs: list[OutputSegment] = Field(default_factory=list)
    bytes_before: int = 0
    bytes_by_magic_before: dict[str, int] = Field(default_factory=dict)
    digest_before: RecordDigest | None = Field(default=None, description="Records of the original segment "
                                               "(algorithm: blake2b-256 when absent, an older journal)")
    digest_after: RecordDigest | None = Field(default=None, description="Records of the rewritten output, same "
                                              "algorithm as digest_before")
    split_batches: int = 0
    warnings: list[str] = Field(default_factory=list)
    displaced: list[str] = Field(default_factory=list, description="Rollback: the files in the unit's "
                                 "offset range that the originals replace")
    staged_from: str | None = Field(default=None, description="The prestage whose staged output the unit "
                                    "swapped in (None: converted in the run)")
    prefix_from: str | None = Field(default=None, description="The prestage whose conversion of the segment's "
                                    "first bytes the run's conversion carried on from (None: none)")
    error: dict[str, Any] | None = None
    unit_result: dict[str, Any] | None = None
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    updated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    # the number of the journal file it was read from or last saved to (journal_path); -1: the
    # unit had none; None: not known, the next save probes
    _save: int | None = PrivateAttr(default=None)

    def follows(self, previous: UnitJournal | None) -> UnitJournal:
        """This new journal of a unit takes the place of ``previous``, the unit's journal as
        :func:`load_journal` found it (None: there was none): its first save is numbered after
        it without probing the names again."""
        self._save = previous._save if previous is not None else -1
        return self

    @property
    def original_names(self) -> list[str]:
        return [f.name for f in self.originals]

    @property
    def output_names(self) -> list[str]:
        return [n for o in self.outputs for n in o.files]


def journal_path(run_dir: str | os.PathLike[str], unit_id: str, save: int = 0) -> Path:
    """The unit's ``save``-th journal file (runtime/runs.py, ``journal_file_name``)."""
    return Path(run_dir) / JOURNAL_DIR / journal_file_name(unit_id, save)


def _latest_save(run_dir: str | os.PathLike[str], unit_id: str) -> int | None:
    """The number of the unit's latest journal file, None without one. Saves are made one
    after the other, each durable (its directory fsynced) before the next is begun, so they
    are numbered without a gap: a few stats, no listing of a directory of every unit's."""
    n = None
    while journal_path(run_dir, unit_id, 0 if n is None else n + 1).exists():
        n = 0 if n is None else n + 1
    return n


def load_journal(run_dir: str | os.PathLike[str], unit_id: str) -> UnitJournal | None:
    n = _latest_save(run_dir, unit_id)
    if n is None:
        return None
    j = UnitJournal.read(journal_path(run_dir, unit_id, n))
    j._save = n
    return j


def save_journal(run_dir: str | os.PathLike[str], journal: UnitJournal) -> None:
    # a journal read or saved here knows its number (or that there was none, -1); another probes
    n = journal._save if journal._save is not None else _latest_save(run_dir, journal.unit_id)
    p = journal_path(run_dir, journal.unit_id, 0 if n is None else n + 1)
    durable_mkdir(p.parent)
    journal.updated_at = datetime.now(UTC)
    journal.version = UnitJournal.VERSION  # written in this kmigrate's form, whatever it was read from
    durable_replace(p, journal.model_dump_json(indent=1).encode(), tmp_suffix=".tmp")
    journal._save = 0 if n is None else n + 1
