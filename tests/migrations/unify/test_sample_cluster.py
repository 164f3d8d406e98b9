"""The sample cluster's controller dir unified end to end: inline and on Spark."""

from __future__ import annotations

import pytest

from migration.formats import names
from migration.logdir.validation import validate_paths
from migration.migrations.unify import UnifyOptions, detect_state, execute_unify, verify_unified


def _snapshot(sc, kraft):
    ctl = sc.controller_dir
    boot = (ctl / names.BOOTSTRAP_CHECKPOINT_FILE).read_bytes()
    zero = (ctl / kraft.METADATA_DIR / kraft.ZERO).read_bytes()
    return boot, kraft.decode(boot), kraft.decode(zero)


def _check(sc, kraft, report, before, tmp_path):
    boot, boot_dec, old_zero_dec = before
    ctl = sc.controller_dir
    assert report.exit_code() == 0, report.to_json()
    new = kraft.decode((ctl / kraft.METADATA_DIR / kraft.ZERO).read_bytes())
    # Records: the bootstrap records, same bytes, same order, right after the KRaft header records.
    assert [v for _, v in new.data] == [v for _, v in boot_dec.data]
    assert [o for o, _ in new.data] == list(range(3, 3 + len(boot_dec.data)))
    # KRaftVersionRecord(1) and VotersRecord kept byte for byte.
    assert [(t, v) for _, t, v in new.control[1:3]] == [(t, v) for _, t, v in old_zero_dec.control[1:3]]
    assert [t for _, t, _ in new.control] == [kraft.SNAPSHOT_HEADER, kraft.KRAFT_VERSION, kraft.KRAFT_VOTERS,
                                              kraft.SNAPSHOT_FOOTER]
    assert not (ctl / names.BOOTSTRAP_CHECKPOINT_FILE).exists()
    assert [p.read_bytes() for p in (tmp_path / "backups").rglob(names.BOOTSTRAP_CHECKPOINT_FILE)] == [boot, boot]
    assert not (sc.broker_log_dirs[2] / names.BOOTSTRAP_CHECKPOINT_FILE).exists()  # the stray copy, retired
    res = validate_paths([ctl, *sc.broker_log_dirs.values()])
    assert res.ok, [str(f) for f in res.problems]
    units = {u.unit_type.value: u for u in report.iter_results()}
    assert units["metadata-log-dir"].digest_before == units["metadata-log-dir"].digest_after
    assert verify_unified(ctl, units["metadata-log-dir"].digest_after) == []
    assert units["file"].status.value == "ok"


def test_sample_controller_inline(sample_cluster, kraft, tmp_path):
    st = detect_state(sample_cluster.controller_dir)
    assert (st.case, st.metadata_version, st.kraft_version, st.voters_present) == (1, "3.9-IV0", 1, True)
    assert st.bootstrap.record_types == {"FeatureLevelRecord": 1, "UserScramCredentialRecord": 2}
    before = _snapshot(sample_cluster, kraft)
    report = execute_unify([sample_cluster.controller_dir], options=UnifyOptions(
        backup_root=str(tmp_path / "backups"), retire_stray=True,
        stray_log_dirs=[str(sample_cluster.broker_log_dirs[2])]))
    _check(sample_cluster, kraft, report, before, tmp_path)
    assert {b.broker_id for b in report.brokers} == {2, 3000}


def test_stray_copies_reported_not_retired_without_flag(sample_cluster, tmp_path):
    broker2 = sample_cluster.broker_log_dirs[2]
    report = execute_unify([sample_cluster.controller_dir], options=UnifyOptions(
        backup_root=str(tmp_path / "backups"), stray_log_dirs=[str(broker2)]))
    assert report.exit_code() == 0
    stray = [u for u in report.iter_results() if u.unit_type.value == "file"]
    assert stray[0].status.value == "skipped" and "--retire-stray" in stray[0].warnings[0].message
    assert (broker2 / names.BOOTSTRAP_CHECKPOINT_FILE).exists()


@pytest.mark.slow
def test_sample_controller_spark(sample_cluster, kraft, tmp_path, spark):
    before = _snapshot(sample_cluster, kraft)
    report = execute_unify([sample_cluster.controller_dir], engine="spark", spark=spark, options=UnifyOptions(
        backup_root=str(tmp_path / "backups"), retire_stray=True,
        stray_log_dirs=[str(sample_cluster.broker_log_dirs[2])]))
    _check(sample_cluster, kraft, report, before, tmp_path)
