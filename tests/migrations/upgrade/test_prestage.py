"""Prestage and stop window (upgrade/prestage.py, upgrade/stage.py): closed segments converted
beside a live broker, swapped in with it stopped; the live broker is a process holding the log
dir's lock, and what Kafka does to closed segments meanwhile is done to the files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import tree_state
from kafka_loader import read_log_dir_records, simulate_log_dir_startup
from support.lock_holders import hold_lock

from migration.audit.model import FindingCode, RunKind, UnitStatus
from migration.formats import names
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade, rollback_run
from migration.migrations.upgrade.prestage import PrestageOptions, prestage_upgrade
from migration.migrations.upgrade.stage import DELETED_DIR, PREFIX_FILES_SUFFIX, Stage, StagedSegment
from migration.settings import default_stage_root


def _partitions(log_dir: Path) -> list[Path]:
    return sorted(p for p in log_dir.iterdir() if p.is_dir() and "-" in p.name and not p.name.startswith("__"))


def _closed_logs(pdir: Path) -> list[Path]:
    return sorted(pdir.glob("*.log"))[:-1]


def _legacy_closed(log_dir: Path) -> list[Path]:
    """Closed segments whose first batch is below v2 (the prestage's candidates)."""
    out = []
    for p in _partitions(log_dir):
        for log in _closed_logs(p):
            with open(log, "rb") as f:
                head = f.read(17)
            if len(head) == 17 and head[16] < 2:
                out.append(log)
    return out


def _legacy_active(log_dir: Path) -> list[Path]:
    """Active segments holding batches below v2 (the prestage stages their bytes so far)."""
    out = []
    for p in _partitions(log_dir):
        log = sorted(p.glob("*.log"))[-1]
        with open(log, "rb") as f:
            head = f.read(17)
        if len(head) == 17 and head[16] < 2:
            out.append(log)
    return out


def _prestage(log_dir: Path, stage_id: str, **kw) -> object:
    return prestage_upgrade([str(log_dir)], options=PrestageOptions(
        upgrade=UpgradeOptions(target="v2"), stage_id=stage_id, **kw))


@pytest.fixture
def live(sample_cluster, tmp_path):
    """Broker 1's log dir with its lock held as a running broker holds it."""
    d = sample_cluster.broker_log_dirs[1]
    holder = hold_lock("python", d / ".lock", tmp_path)
    yield d
    holder.kill()
    holder.wait()


def test_prestage_beside_a_live_broker_writes_nothing_in_the_log_dir(live) -> None:
    before = tree_state(live)
    report = _prestage(live, "stage-a")
    assert report.kind is RunKind.PRESTAGE and report.exit_code() == 0, report.refusal
    assert tree_state(live) == before
    staged = [u for u in report.iter_results() if u.status is UnitStatus.OK]
    assert len(staged) == len(_legacy_closed(live)) > 0
    assert all(u.records_before == u.records_after and u.digest_before == u.digest_after for u in staged)
    stage = Stage(default_stage_root([live]), "stage-a")
    assert len(stage.entries()) == len(staged)
    # a second pass keeps what is current, converts nothing again
    again = _prestage(live, "stage-a")
    assert not [u for u in again.iter_results() if u.status is UnitStatus.OK]
    kept = [u for u in again.iter_results() if any(w.code == FindingCode.PRESTAGE_KEPT for w in u.warnings)]
    assert len(kept) == len(staged)
    assert tree_state(live) == before


def test_window_swaps_the_stage_in_and_rollback_restores(live, sample_cluster, monkeypatch) -> None:
    expected = read_log_dir_records(live)
    before = tree_state(live)
    _prestage(live, "stage-b")
    n_staged = len(_legacy_closed(live))
    n_active = len(_legacy_active(live))
    # the broker stops
    (live / ".lock").unlink(missing_ok=True)
    reads = []
    real_read = StagedSegment.read.__func__
    monkeypatch.setattr(StagedSegment, "read", classmethod(lambda cls, p: reads.append(p) or real_read(cls, p)))
    report = _stopped_window(live, "stage-b", "window-b")
    # each manifest read by the plan and by its unit, not a third time at the window's close
    assert len(reads) == 2 * n_staged
    assert report.exit_code() == 0, (report.refusal, [u.errors for *_, u in report.problem_units()])
    (window,) = [b.window for b in report.brokers if b.window is not None]
    assert window.swapped == n_staged and window.discarded == 0
    assert window.converted == sum(1 for *_, u in report.iter_units()
                                   if u.status is UnitStatus.OK and u.unit_type.value == "segment") - n_staged
    assert read_log_dir_records(live) == expected
    assert not any(simulate_log_dir_startup(live).values())  # Kafka's loader finds nothing to resolve
    root = default_stage_root([live])
    assert not Stage(root, "stage-b").exists()  # retired with the window
    # its staged files are unlinked at once: every swapped segment's files have one name, the
    # log dir's (nothing held once Kafka deletes them); only its bookkeeping waits, under .deleted
    (aside,) = (root / DELETED_DIR).iterdir()
    # (the active segments' staged prefixes were copied in, never linked: left for the sweep)
    assert aside.name.startswith("stage-b.") and not [f for f in aside.rglob("*") if f.is_file()
                                                       and not f.name.endswith(".json")
                                                       and not f.parent.name.endswith(PREFIX_FILES_SUFFIX)]
    assert window.prefixed == n_active > 0
    assert all(f.stat().st_nlink == 1 for p in _partitions(live) for f in p.iterdir() if f.is_file()
               and f.suffix in (".log", ".index", ".timeindex"))
    _prestage(live, "stage-b2")  # the next prestage sweeps it (the broker runs again by then)
    assert not (root / DELETED_DIR).exists()
    rb = rollback_run("window-b")
    assert rb.exit_code() == 0
    assert {k: v for k, v in tree_state(live).items() if not k.endswith(".kafka_cleanshutdown")} == \
        {k: v for k, v in before.items() if not k.endswith(".kafka_cleanshutdown")}


def _stopped_window(log_dir: Path, stage_id: str, run_id: str, **kw):
    return execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2", stage=stage_id, **kw),
                           engine="inline", run_id=run_id)


def _segment_files(log: Path) -> list[Path]:
    prefix = log.name[: -len(names.LOG_FILE_SUFFIX)]
    return sorted(p for p in log.parent.iterdir() if p.name.startswith(prefix + "."))


def _retention_delete(log: Path) -> None:
    """Retention: the segment's files renamed to .deleted (a clean stop may leave them)."""
    for p in _segment_files(log):
        os.rename(p, p.with_name(p.name + names.DELETED_FILE_SUFFIX))


def _cleaner_swap(log: Path) -> None:
    """The log cleaner: a new file under the same name (a new inode; here the same bytes and
    mtime, which Kafka's cleaner also keeps: only the inode tells)."""
    tmp = log.with_name(log.name + ".tmp-cleaner")
    shutil.copy2(log, tmp)
    os.rename(tmp, log)


def _truncate_from(log: Path) -> None:
    """A truncation below the log end: the segments above go, this one is cut at a batch."""
    for later in sorted(log.parent.glob("*.log")):
        if later.name > log.name:
            for p in _segment_files(later):
                p.unlink()
    data = log.read_bytes()
    size = int.from_bytes(data[8:12], "big") + 12  # the first batch (v0/v1 entry or v2 batch) only
    os.truncate(log, size)


def _roll(pdir: Path) -> Path:
    """A roll: the active segment closes, a new empty one starts after its last offset."""
    from kafka_loader import _next_offset

    active = sorted(pdir.glob("*.log"))[-1]
    base = _next_offset(active)
    new = pdir / names.log_file_name(base)
    for suffix in (names.LOG_FILE_SUFFIX, names.INDEX_FILE_SUFFIX, names.TIME_INDEX_FILE_SUFFIX):
        new.with_suffix(suffix).touch()
    return active


def test_window_swaps_only_what_kafka_left_unchanged(live, monkeypatch) -> None:
    """While the stage waits, the live broker deletes a staged segment by retention, the cleaner
    replaces another, a roll closes an active one and a truncation cuts a fourth; one segment is
    replaced while it is being staged. The window swaps in only the unchanged ones (a partition
    Kafka left alone), converts the rest, and every record Kafka kept is there (kafka-python
    reads them)."""
    import migration.migrations.upgrade.prestage as prestage_module

    by_part: dict[Path, list[Path]] = {}
    for log in _legacy_closed(live):
        by_part.setdefault(log.parent, []).append(log)
    a, b = [p for p, logs in by_part.items() if len(logs) >= 2][:2]
    control = a.with_name(a.name.rsplit("-", 1)[0] + "-7")  # a partition Kafka leaves alone
    shutil.copytree(a, control, copy_function=shutil.copy2)
    during = by_part[b][1]
    real = prestage_module.rewrite_segment

    def replaced_while_read(log, spec, **kw):
        result = real(log, spec, **kw)
        if Path(log) == during:
            _cleaner_swap(during)  # the cleaner swaps it in while the prestage reads it
        return result

    monkeypatch.setattr(prestage_module, "rewrite_segment", replaced_while_read)
    report = _prestage(live, "stage-c")
    changed = [u.path for u in report.iter_results()
               if any(w.code == FindingCode.CHANGED_WHILE_STAGING for w in u.warnings)]
    assert changed == [str(during)] and report.exit_code() == 0
    staged = len(_legacy_closed(live)) - 1
    assert len(Stage(default_stage_root([live]), "stage-c").entries()) == staged

    first, second = by_part[a][:2]
    _retention_delete(first)  # staged, then deleted: discarded
    _cleaner_swap(second)  # staged, then replaced: converted in the window, its stage discarded
    rolled = _roll(a)  # the active segment when staged: converted in the window
    truncated = by_part[b][0]
    _truncate_from(truncated)  # staged, then cut (and `during` with it): converted, stage discarded
    expected = read_log_dir_records(live)  # what Kafka keeps after all this
    (live / ".lock").unlink(missing_ok=True)

    result = _stopped_window(live, "stage-c", "window-c")
    assert result.exit_code() == 0, (result.refusal, [u.errors for *_, u in result.problem_units()])
    (window,) = [b.window for b in result.brokers if b.window is not None]
    # the 3 staged segments, and the staged prefix of the active segment the truncation removed
    assert (window.swapped, window.discarded) == (len(_closed_logs(control)), 4)
    assert window.swapped == staged - 3
    upgraded = {u.path for *_, u in result.iter_units() if u.status is UnitStatus.OK and u.digest_after}
    assert {str(second), str(rolled), str(truncated)} <= upgraded
    assert read_log_dir_records(live) == expected
    assert not any(simulate_log_dir_startup(live).values())
    # retired: the swapped files unlinked there at once (one name left, the log dir's), the
    # three unused segments' files left for the sweep (freeing them would cost the window)
    root = default_stage_root([live])
    (aside,) = (root / DELETED_DIR).iterdir()
    left = [f for f in aside.rglob("*") if f.is_file() and not f.name.endswith(".json")]
    assert len({f.parent for f in left if not f.parent.name.endswith(PREFIX_FILES_SUFFIX)}) == 3
    assert all(f.stat().st_nlink == 1 for f in left)
    # the rolled segment was active when staged: its staged prefix served the window
    assert str(rolled) in {u.path for *_, u in result.iter_units() if any(w.code == FindingCode.PREFIX_USED
                                                                         for w in u.warnings)}
    # --discard-stage of the retired stage removes what it left (the broker runs again by then)
    out = subprocess.run([sys.executable, "-m", "migration", "upgrade", str(live), "--discard-stage", "stage-c"],
                         capture_output=True, text=True, env=os.environ | {"COLUMNS": "200"})
    assert out.returncode == 0 and "retired by its stop window" in out.stdout, out.stdout + out.stderr
    assert not (root / DELETED_DIR).exists()


def test_retention_moving_the_first_leader_epoch_keeps_later_stages(live) -> None:
    """--assign-leader-epoch gives epoch 0 from the log start offset; retention then deletes the
    first segment and the entry's start moves up with the log start (as LeaderEpochFileCache's
    truncateFromStart moves it). The later segments' batches get the same epochs as staged: they
    are swapped in, not converted again."""
    opts = UpgradeOptions(target="v2", assign_leader_epoch=True)
    report = prestage_upgrade([str(live)], options=PrestageOptions(upgrade=opts, stage_id="stage-e"))
    assert report.exit_code() == 0
    staged = len(Stage(default_stage_root([live]), "stage-e").entries())
    first = _legacy_closed(live)[0]
    _retention_delete(first)
    for p in first.parent.glob("*.deleted"):
        p.unlink()
    (live / ".lock").unlink(missing_ok=True)
    result = _stopped_window(live, "stage-e", "window-e", assign_leader_epoch=True)
    assert result.exit_code() == 0, result.refusal
    (window,) = [b.window for b in result.brokers if b.window is not None]
    assert (window.swapped, window.discarded) == (staged - 1, 1)


def test_a_window_with_other_options_is_refused_naming_them(live) -> None:
    _prestage(live, "stage-o")
    (live / ".lock").unlink(missing_ok=True)
    before = tree_state(live)
    result = _stopped_window(live, "stage-o", "window-o", segment_bytes=1 << 20)
    assert result.exit_code() == 3
    assert "segment_bytes: 1073741824 -> 1048576" in result.refusal and "--discard-stage stage-o" in result.refusal
    assert tree_state(live) == before
    assert Stage(default_stage_root([live]), "stage-o").entries()  # kept for the right window


def test_a_damaged_stage_manifest_is_named_and_the_stage_can_be_discarded(live) -> None:
    _prestage(live, "stage-d")
    stage = Stage(default_stage_root([live]), "stage-d")
    manifest = sorted((stage.path / "manifests").glob("*.json"))[0]
    manifest.write_text('{"version": 1, "stage_id": ')
    (live / ".lock").unlink(missing_ok=True)
    before = tree_state(live)
    result = _stopped_window(live, "stage-d", "window-d")
    assert result.exit_code() == 3 and str(manifest) in result.refusal and "is not JSON" in result.refusal
    assert tree_state(live) == before
    out = subprocess.run([sys.executable, "-m", "migration", "upgrade", str(live), "--discard-stage", "stage-d"],
                         capture_output=True, text=True, env=os.environ | {"COLUMNS": "200"})
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "stage stage-d discarded" in out.stdout and not stage.exists()


def test_a_stage_root_inside_a_log_dir_is_refused(live) -> None:
    before = tree_state(live)
    report = prestage_upgrade([str(live)], options=PrestageOptions(
        upgrade=UpgradeOptions(target="v2"), stage_id="stage-in", stage_root=str(live / "stages")))
    assert report.exit_code() == 3 and "inside log dir" in report.refusal
    assert tree_state(live) == before and not (live / "stages").exists()


def test_a_prestage_never_takes_another_runs_id(live, sample_cluster) -> None:
    other = sample_cluster.broker_log_dirs[2]
    assert execute_upgrade([str(other)], options=UpgradeOptions(target="v2", dry_run=True), engine="inline",
                           run_id="taken").exit_code() == 0
    report = _prestage(live, "taken")
    assert report.exit_code() == 3 and "is the id of a upgrade run" in report.refusal


def test_cli_options_that_only_a_prestage_takes_are_refused_in_one_line(live) -> None:
    import subprocess
    import sys

    run = [sys.executable, "-m", "migration", "upgrade", str(live), "--to", "v2"]
    for extra, says in ((["--budget", "100"], "--budget and --io-rate pace a --prestage"),
                        (["--prestage", "--dry-run"], "--prestage with --dry-run"),
                        (["--prestage", "--stage", "x"], "give one of them")):
        out = subprocess.run([*run, *extra], capture_output=True, text=True, env=os.environ | {"COLUMNS": "200"})
        assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, (extra, out.stderr)
    gone = subprocess.run([sys.executable, "-m", "migration", "upgrade", str(live), "--discard-stage", "nope"],
                          capture_output=True, text=True)
    assert gone.returncode == 2 and "no stage nope" in gone.stderr


# ---------------------------------------------------------------- segments in the target format


def _closed_in_target(log_dir: Path) -> list[Path]:
    """Closed segments whose first batch is v2 (the window leaves them as they are)."""
    return [log for p in _partitions(log_dir) for log in _closed_logs(p) if log.stat().st_size
            and log.read_bytes()[16] == 2]


def test_the_window_skips_unread_the_closed_v2_segments_the_prestage_checked(live, monkeypatch) -> None:
    """The window would read every closed segment already in v2 whole (CRCs, offsets, indexes)
    to leave it as it is: the prestage makes those checks, and the window skips an unchanged
    one without reading it, reporting it as before; a changed one is read again."""
    from migration.migrations.upgrade import plan as plan_module

    in_target = _closed_in_target(live)
    assert len(in_target) >= 2, "the sample cluster has closed v2 segments"
    report = _prestage(live, "stage-v")
    assert report.exit_code() == 0, report.refusal
    stage = Stage(default_stage_root([live]), "stage-v")
    verified = {Path(v.partition_dir) / names.log_file_name(v.base_offset): v for v in stage.verified()}
    assert set(verified) == set(in_target)
    assert any("closed segment(s) in the target format checked as the window would" in w.message
               for w in report.warnings)
    # what the window's own checks say of them (their formats and records, for the report)
    expected = {log: (v.bytes, v.bytes_by_magic, v.records) for log, v in verified.items()}
    assert all(records and formats == {"v2": size} for size, formats, records in expected.values())
    rows = {Path(u.path): u for *_, u in report.iter_units() if Path(u.path) in expected}
    assert {log: (u.bytes_before, u.records_before, [w.code for w in u.warnings]) for log, u in rows.items()} == \
        {log: (size, records, [FindingCode.PRESTAGE_VERIFIED]) for log, (size, _, records) in expected.items()}
    # a second pass keeps them as they are
    again = _prestage(live, "stage-v")
    assert any(f"{len(in_target)} closed segment(s) in the target format checked as the window would "
               f"({len(in_target)} by an earlier pass)" in w.message for w in again.warnings)
    changed = in_target[0]
    os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns + 1_000_000_000))
    read: list[Path] = []
    real = plan_module.validate_segment

    def validate_segment(log_path, **kw):
        read.append(Path(log_path))
        return real(log_path, **kw)

    monkeypatch.setattr(plan_module, "validate_segment", validate_segment)
    (live / ".lock").unlink(missing_ok=True)  # the broker stops
    # a dry run checks every record, more than the prestage did: it reads them all
    assert _stopped_window(live, "stage-v", "window-v-dry", dry_run=True).exit_code() == 0
    assert set(in_target) <= set(read)
    read.clear()
    window = _stopped_window(live, "stage-v", "window-v")
    assert window.exit_code() == 0, (window.refusal, [u.errors for *_, u in window.problem_units()])
    assert changed in read and not set(in_target[1:]) & set(read)
    skipped = {Path(u.path): u for *_, u in window.iter_units() if u.status is UnitStatus.SKIPPED}
    for log in in_target:
        size, formats, records = expected[log]
        u = skipped[log]
        assert (u.bytes_before, u.records_before, u.input_format) == (size, records, ",".join(formats))
        assert [w.code for w in u.warnings] == [FindingCode.ALREADY_IN_TARGET]


def _append(log: Path, count: int, tag: bytes) -> None:
    """The broker appends to its active segment: messages in the segment's own format."""
    from kafka_loader import _next_offset

    from migration.formats.legacy import encode_message

    with open(log, "rb") as f:
        magic = f.read(17)[16]
    first = _next_offset(log)
    with open(log, "ab") as f:
        for o in range(first, first + count):
            f.write(encode_message(o, magic, 0, 1_700_000_000_000 + o if magic else -1, b"k%d" % o, tag * 50))


def test_the_window_converts_only_what_the_broker_appended_after_the_staged_prefix(live, tmp_path) -> None:
    """The prestage stages each legacy active segment's bytes so far; the broker appends to all
    of them, and on a leader change truncates one to its first batch and appends other records
    there. The window carries on from the staged prefix of each appended-to segment (and writes
    the very files a conversion of the whole writes: an offline upgrade of a copy), converts the
    truncated one whole, and every record is there."""
    report = _prestage(live, "stage-p")
    actives = _legacy_active(live)
    assert len(actives) >= 2
    prefixed = {u.path: u for u in report.iter_results() if any(w.code == FindingCode.PREFIX_STAGED
                                                                  for w in u.warnings)}
    assert set(prefixed) == {str(a) for a in actives}
    assert all(u.bytes_before == a.stat().st_size for a in actives for u in [prefixed[str(a)]])
    stage = Stage(default_stage_root([live]), "stage-p")
    assert len(stage.prefixes()) == len(actives)
    # a second pass with nothing appended keeps them
    again = _prestage(live, "stage-p")
    assert {u.path for u in again.iter_results() if any(w.code == FindingCode.PREFIX_STAGED for w in u.warnings)
            and u.duration_s is None} == set(prefixed)
    for a in actives:
        _append(a, 40, b"a")
    cut = actives[0]
    data = cut.read_bytes()
    os.truncate(cut, int.from_bytes(data[8:12], "big") + 12)  # a truncation to its first batch
    _append(cut, 25, b"b")  # the new leader's records at those offsets
    expected = read_log_dir_records(live)
    offline = tmp_path / "offline" / live.name
    shutil.copytree(live, offline, copy_function=shutil.copy2)
    (live / ".lock").unlink(missing_ok=True)
    (offline / ".lock").unlink(missing_ok=True)

    result = _stopped_window(live, "stage-p", "window-p")
    assert result.exit_code() == 0, (result.refusal, [u.errors for *_, u in result.problem_units()])
    used = {u.path for *_, u in result.iter_units() if any(w.code == FindingCode.PREFIX_USED for w in u.warnings)}
    assert used == {str(a) for a in actives[1:]}
    (window,) = [b.window for b in result.brokers if b.window is not None]
    assert (window.prefixed, window.discarded) == (len(actives) - 1, 1)  # the truncated one's prefix
    assert read_log_dir_records(live) == expected
    assert not any(simulate_log_dir_startup(live).values())
    whole = execute_upgrade([str(offline)], options=UpgradeOptions(target="v2"), engine="inline", run_id="offline-p")
    assert whole.exit_code() == 0
    for a in actives:
        for suffix in (names.LOG_FILE_SUFFIX, names.INDEX_FILE_SUFFIX, names.TIME_INDEX_FILE_SUFFIX):
            mine, theirs = a.with_suffix(suffix), offline / a.parent.name / a.with_suffix(suffix).name
            assert mine.read_bytes() == theirs.read_bytes(), mine
    rb = rollback_run("window-p")
    assert rb.exit_code() == 0
    assert read_log_dir_records(live) == expected


def test_a_preallocated_active_segment_is_copied_up_to_its_data(live, monkeypatch) -> None:
    """With log.preallocate the active segment is segment.bytes long, zeros after the data: the
    prestage copies the data (and the chunk of zeros after it), not the zeros to the end, and
    stages all of it; the copy is gone once staged."""
    import migration.migrations.upgrade.prestage as prestage_module
    from migration.formats.file_records import FileRecords

    active = _legacy_active(live)[0]
    raw = active.read_bytes()
    data = len(raw.rstrip(b"\0"))  # a batch ending in zero bytes is torn in the copy: left for the window
    whole = max(b.position + b.size_in_bytes for b in FileRecords(active).batches() if
                b.position + b.size_in_bytes <= data)
    os.truncate(active, len(raw) + (8 << 20))
    copied: list[int] = []
    real = prestage_module._copy_written
    monkeypatch.setattr(prestage_module, "_copy_written", lambda src, dst: copied.append(real(src, dst)) or copied[-1])
    report = _prestage(live, "stage-q")
    (u,) = [u for u in report.iter_results() if u.path == str(active)]
    assert [w.code for w in u.warnings] == [FindingCode.PREFIX_STAGED] and u.bytes_before == whole
    assert data in copied  # (the other partitions' active segments are copied too)
    stage = Stage(default_stage_root([live]), "stage-q")
    assert not (stage.prefix_files_dir(active.parent, int(active.stem)) / active.name).exists()
