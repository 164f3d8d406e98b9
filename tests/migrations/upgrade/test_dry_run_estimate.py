"""The dry run's plan predicts the real upgrade: the growth (or shrinkage) it announces is what
the real run then does to the same data, to the byte (it converts in memory with the same
converter and writes nothing)."""

from __future__ import annotations

import shutil

import pytest

from migration.audit.model import UnitStatus
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade


@pytest.mark.parametrize(("broker", "target"), [(1, "v2"), (2, "v2"), (1, "v1"), (3, "v1")])
def test_dry_run_growth_matches_the_real_run(sample_cluster_template, tmp_path, broker, target):
    log_dir = tmp_path / "kafka-logs"
    shutil.copytree(sample_cluster_template.broker_log_dirs[broker], log_dir, copy_function=shutil.copy2)
    plan = execute_upgrade([str(log_dir)], options=UpgradeOptions(target=target, dry_run=True), engine="inline")
    planned = [u for u in plan.iter_results() if u.status is UnitStatus.PLANNED and u.unit.endswith(".log")]
    predicted = sum(u.bytes_after - u.bytes_before for u in planned)
    real_run = execute_upgrade([str(log_dir)], options=UpgradeOptions(target=target), engine="inline")
    assert real_run.exit_code() == 0
    done = [u for u in real_run.iter_results() if u.status is UnitStatus.OK and u.unit.endswith(".log")]
    real = sum(u.bytes_after - u.bytes_before for u in done)
    assert {u.path for u in done} == {u.path for u in planned}
    assert predicted == real
    word = "growth" if predicted >= 0 else "shrinkage"
    assert any(f"expected {word} about {abs(predicted)} bytes" in w.message for w in plan.warnings)


def test_report_counts_every_record_of_the_broker(sample_cluster_template, tmp_path):
    """Segments already in the target format count too: records before/after match the log dir."""
    from migration.logdir.model import scan_log_dir

    log_dir = tmp_path / "kafka-logs"
    shutil.copytree(sample_cluster_template.broker_log_dirs[1], log_dir, copy_function=shutil.copy2)
    on_disk = sum(s.stats.records for p in scan_log_dir(log_dir, deep=True).partitions for s in p.segments)
    report = execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2"), engine="inline")
    assert report.exit_code() == 0
    assert any(u.status is UnitStatus.SKIPPED for u in report.iter_results())
    assert report.totals.records_before == report.totals.records_after == on_disk


@pytest.mark.parametrize(("broker", "target"), [(1, "v2"), (3, "v1")])
def test_dry_run_counts_the_records_the_real_run_counts(sample_cluster_template, tmp_path, broker, target):
    """Issue 28, item 4: a dry run counted only the segments already in the target format (602 of
    broker 1's 2,082 records); its planned units now carry the records the real run rewrites."""
    log_dir = tmp_path / "kafka-logs"
    shutil.copytree(sample_cluster_template.broker_log_dirs[broker], log_dir, copy_function=shutil.copy2)
    plan = execute_upgrade([str(log_dir)], options=UpgradeOptions(target=target, dry_run=True), engine="inline")
    real_run = execute_upgrade([str(log_dir)], options=UpgradeOptions(target=target), engine="inline")
    assert real_run.exit_code() == 0
    assert plan.totals.records_before == real_run.totals.records_before
    assert plan.totals.records_after == real_run.totals.records_after
    by_path = {u.path: u for u in real_run.iter_results()}
    planned = [u for u in plan.iter_results() if u.status is UnitStatus.PLANNED and u.unit.endswith(".log")]
    rewritten = [u for u in real_run.iter_results() if u.status is UnitStatus.OK and u.unit.endswith(".log")]
    assert planned and sorted(u.path for u in planned) == sorted(u.path for u in rewritten)
    for u in planned:
        assert u.records_before == by_path[u.path].records_before, u.path
