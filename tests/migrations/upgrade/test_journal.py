"""The unit journal (migration/migrations/upgrade/journal.py): each save a new file, the latest
one the journal, for the unit itself and for everything that asks what is in flight."""

from __future__ import annotations

import json
import os
from pathlib import Path

from migration.migrations.upgrade.journal import JournalState, UnitJournal, journal_path, load_journal, save_journal
from migration.runtime.runs import JOURNAL_DIR, journal_states, latest_journal_files


def _journal(unit_id: str, state: JournalState) -> UnitJournal:
    return UnitJournal(unit_id=unit_id, partition_dir="/logs/t-0", log_file="00000000000000000000.log",
                       base_offset=0, state=state)


def test_each_save_is_a_new_file_and_frees_none(tmp_path: Path) -> None:
    """Renaming over the previous save would free it (a millisecond on a file system mounted
    with online discard, holding every other file operation up); a new name frees nothing."""
    unit = "b1.d0.t-0.00000000000000000000"
    j = _journal(unit, JournalState.STARTED)
    save_journal(tmp_path, j)
    first = os.stat(journal_path(tmp_path, unit))
    for state in (JournalState.CLEANED, JournalState.DONE):
        j.state = state
        save_journal(tmp_path, j)
    files = sorted(p.name for p in (tmp_path / JOURNAL_DIR).iterdir())
    assert files == [f"{unit}+1.json", f"{unit}+2.json", f"{unit}.json"]
    still = os.stat(journal_path(tmp_path, unit))
    assert (still.st_ino, still.st_size) == (first.st_ino, first.st_size)  # the first save untouched
    loaded = load_journal(tmp_path, unit)
    assert loaded is not None and loaded.state is JournalState.DONE
    assert json.loads(journal_path(tmp_path, unit, 2).read_text())["version"] == UnitJournal.VERSION == 5


def test_the_latest_save_is_what_the_run_reports_in_flight(tmp_path: Path) -> None:
    """A unit that went started -> cleaned -> done is not in flight, whatever its earlier
    files say; a unit whose latest save is ``cleaned`` is."""
    (tmp_path / "job.json").write_text("{}")
    done, cleaned = _journal("b1.d0.t-0.00000000000000000000", JournalState.STARTED), \
        _journal("b1.d0.t-1.00000000000000000000", JournalState.STARTED)
    for state in (JournalState.STARTED, JournalState.CLEANED, JournalState.DONE):
        done.state = state
        save_journal(tmp_path, done)
    save_journal(tmp_path, cleaned)
    cleaned.state = JournalState.CLEANED
    save_journal(tmp_path, cleaned)
    # an interrupted save's temporary file is not a save
    (tmp_path / JOURNAL_DIR / "b1.d0.t-0.00000000000000000000+3.json.tmp").write_text("{")
    assert [p.name for p in latest_journal_files(tmp_path / JOURNAL_DIR)] == [
        "b1.d0.t-0.00000000000000000000+2.json", "b1.d0.t-1.00000000000000000000+1.json"]
    assert journal_states(tmp_path) == ["done", "cleaned"]


def test_a_journal_an_earlier_kmigrate_replaced_in_place_is_read_and_saved_after(tmp_path: Path) -> None:
    """Version 3 kept one file per unit; a resume by this kmigrate reads it and saves after it."""
    unit = "b1.d0.t-0.00000000000000000000"
    path = journal_path(tmp_path, unit)
    path.parent.mkdir(parents=True)
    doc = json.loads(_journal(unit, JournalState.CLEANED).model_dump_json()) | {"version": 3}
    del doc["staged_from"]
    path.write_text(json.dumps(doc))
    j = load_journal(tmp_path, unit)
    assert j is not None and j.state is JournalState.CLEANED
    j.state = JournalState.DONE
    save_journal(tmp_path, j)
    assert json.loads(path.read_text())["state"] == "cleaned"
    assert load_journal(tmp_path, unit).state is JournalState.DONE  # type: ignore[union-attr]


def test_a_new_journal_following_the_loaded_one_saves_without_probing(tmp_path: Path, monkeypatch) -> None:
    """A unit loads its journal (probing the names once), then starts a new one: the new one is
    saved after the loaded one's number, or as the first when there was none, probing nothing."""
    import migration.migrations.upgrade.journal as journal_module

    unit = "b1.d0.t-0.00000000000000000000"
    earlier = _journal(unit, JournalState.STARTED)
    save_journal(tmp_path, earlier)
    save_journal(tmp_path, earlier)  # +1
    loaded = load_journal(tmp_path, unit)
    probes = []
    real = journal_module._latest_save
    monkeypatch.setattr(journal_module, "_latest_save", lambda *a: probes.append(a) or real(*a))
    save_journal(tmp_path, _journal(unit, JournalState.STARTED).follows(loaded))
    other = "b1.d0.t-0.00000000000000000100"
    save_journal(tmp_path, _journal(other, JournalState.STARTED).follows(None))
    assert probes == []
    assert journal_path(tmp_path, unit, 2).exists() and journal_path(tmp_path, other, 0).exists()
    assert not journal_path(tmp_path, other, 1).exists()
