"""tier-prepare cleans up after itself (issue 31): a re-run finishes what a killed run left, in
the log dir (``N.snapshot.kmigrate.tmp``), in the file store (``.kmigrate-store/tmp``) and in
any store (write-probe objects ``kmigrate-probe/...``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from migration.formats import names
from migration.logdir.validation import validate_log_dir
from migration.migrations.tier import layout
from migration.migrations.tier.driver import execute_tier

from .test_tier import PREFIX, _bases, _options, _pdir

PAY = "payments-idempotent-0"


class _Killed(BaseException):
    """A kill: nothing of the process's cleanup runs (its unlinks are suppressed meanwhile)."""


def _kill_at(monkeypatch: pytest.MonkeyPatch, op: str, hit) -> None:
    """Raise _Killed at the first ``os.<op>`` call whose path arguments satisfy ``hit``; from
    then on ``os.unlink`` does nothing, as no handler runs in a killed process."""
    real = getattr(os, op)
    state = {"dead": False}
    real_unlink = os.unlink

    def fake(*args, **kw):
        if not state["dead"] and hit(*[str(a) for a in args if isinstance(a, str | os.PathLike)]):
            state["dead"] = True
            raise _Killed
        return real(*args, **kw)

    def unlink(path, *a, **kw):
        if state["dead"]:
            return None
        return real_unlink(path, *a, **kw)

    monkeypatch.setattr(os, op, fake)
    monkeypatch.setattr(os, "unlink", unlink)


def _leftovers(sample) -> list[str]:
    return sorted(f"{f.file}: {f.code}" for d in sample.log_dirs for f in validate_log_dir(d).findings
                  if f.code == "LEFTOVER_FILE")


def test_snapshot_temporaries_a_killed_run_left_are_removed(sample_cluster, fs_store, monkeypatch):
    pay = _pdir(sample_cluster, PAY)
    target = pay / names.producer_snapshot_file_name(_bases(pay)[1])
    # Killed between the link to N.snapshot and the unlink of the temporary name.
    real_link = os.link
    _kill_at(monkeypatch, "link", lambda src, dst: dst == str(target))
    with pytest.raises(_Killed):
        execute_tier(sample_cluster.log_dirs, options=_options(fs_store, sample_cluster, snapshots_only=True),
                     engine="inline", only_partitions=[PAY])
    monkeypatch.undo()
    tmp = target.with_name(target.name + ".kmigrate.tmp")
    assert tmp.exists() and not target.exists()  # the kill came before the link
    real_link(tmp, target)  # ... and now after it: both names, as issue 31 measured
    # A second one whose write never reached its link: no N.snapshot beside it.
    other = pay / names.producer_snapshot_file_name(_bases(pay)[2])
    other.unlink(missing_ok=True)
    half = other.with_name(other.name + ".kmigrate.tmp")
    half.write_bytes(b"\x00\x01")
    assert _leftovers(sample_cluster)

    report = execute_tier(sample_cluster.log_dirs, options=_options(fs_store, sample_cluster, snapshots_only=True),
                          engine="inline", only_partitions=[PAY])
    assert report.exit_code() == 0
    assert not tmp.exists() and not half.exists()
    assert target.exists() and other.exists()
    assert not _leftovers(sample_cluster)
    found = [w for *_, u in report.iter_units() for w in u.warnings if w.code == "LEFTOVER_FILE"]
    assert sorted(Path(str(w.file)).name for w in found) == sorted([tmp.name, half.name])


def test_store_temporaries_a_killed_write_left_are_removed(sample_cluster, fs_store, monkeypatch):
    store_tmp = fs_store.root / ".kmigrate-store" / "tmp"
    # Killed while renaming the first staged .log into place: its temporary file stays.
    _kill_at(monkeypatch, "replace", lambda src, dst="": dst.endswith(".log") and str(fs_store.root) in dst)
    opts = _options(fs_store, sample_cluster)
    with pytest.raises(_Killed):
        execute_tier(sample_cluster.log_dirs, options=opts, engine="inline", only_partitions=["events-v2-0"])
    monkeypatch.undo()
    assert [p for p in store_tmp.rglob("*") if p.is_file()]

    report = execute_tier(sample_cluster.log_dirs, options=opts, engine="inline", only_partitions=["events-v2-0"])
    assert report.exit_code() == 0
    assert not [p for p in store_tmp.rglob("*") if p.is_file()]
    removed = [w for *_, u in report.iter_units() for w in u.warnings if w.code == "ORPHAN_REMOVED"]
    assert any(str(w.file).endswith(".tmp") and "temporary" in w.message for w in removed)


def test_probe_object_of_a_killed_run_is_removed_by_its_rerun(sample_cluster, fs_store, monkeypatch):
    # Killed between writing the probe object and deleting it (an Airflow task retried: same run id).
    from migration.migrations.tier.filesystem import FileSystemObjectStore

    real_delete = FileSystemObjectStore._delete_batch

    def delete(self, keys):
        if any(layout.PROBE_DIR in k for k in keys):
            raise _Killed
        real_delete(self, keys)

    monkeypatch.setattr(FileSystemObjectStore, "_delete_batch", delete)
    opts = _options(fs_store, sample_cluster, snapshots_only=False)
    with pytest.raises(_Killed):
        execute_tier(sample_cluster.log_dirs, options=opts, engine="inline", run_id="tier-killed-1",
                     only_partitions=["events-v2-0"])
    monkeypatch.undo()
    probes = [k for k in fs_store.objects() if layout.PROBE_DIR in k]
    assert probes

    report = execute_tier(sample_cluster.log_dirs, options=opts, engine="inline", run_id="tier-killed-1",
                          only_partitions=["events-v2-0"])
    assert report.exit_code() == 0
    assert not [k for k in fs_store.objects() if layout.PROBE_DIR in k]
    assert any("probe object" in w.message for w in report.warnings)


def test_probe_objects_of_earlier_runs_go_those_of_a_running_one_stay(sample_cluster, store_env):
    now_ms = int(time.time() * 1000)
    # {created ms}-{run id}-{nonce}; an hour and more is a killed run's
    stale = f"{PREFIX}kmigrate-probe/{now_ms - 3600 * 1000 - 1}-tier-old-aa"
    older_kmigrate = f"{PREFIX}kmigrate-probe/tier-20240101-000000-ab12cd34"
    young = f"{PREFIX}kmigrate-probe/{now_ms}-tier-running-elsewhere-bb"
    for key in (stale, older_kmigrate, young):
        store_env.put_raw(key, b"kmigrate write probe: safe to delete\n")
    report = execute_tier(sample_cluster.log_dirs, options=_options(store_env, sample_cluster), engine="inline",
                          only_partitions=["events-v2-0"])
    assert report.exit_code() == 0
    left = {k for k in store_env.objects() if layout.PROBE_DIR in k}
    assert left == {young}  # another run may be in the middle of its probe
