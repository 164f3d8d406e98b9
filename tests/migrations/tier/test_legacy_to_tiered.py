"""Legacy data all the way to tiered storage: ``upgrade --to v2 --assign-leader-epoch`` then
``tier-prepare``, or ``tier-prepare --assign-leader-epoch`` alone; rollback puts every
leader-epoch-checkpoint back byte for byte."""

from __future__ import annotations

import json

from migration.audit.model import UnitStatus
from migration.formats import names
from migration.formats.file_records import FileRecords
from migration.logdir.validation import validate_paths
from migration.migrations.common.leader_epoch import ASSIGNED_CODE
from migration.migrations.tier.driver import execute_tier
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade, rollback_run

from .test_tier import _get, _objects, _options

LEGACY = ["legacy-v0-0", "clicks-v1-0", "users-compacted-0"]  # broker 1's partitions written before KIP-101


def _checkpoints(log_dir) -> dict[str, tuple[bytes, int]]:
    return {p.parent.name: (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(log_dir.glob(f"*/{names.LEADER_EPOCH_CHECKPOINT_FILE}"))}


def _assigned(report) -> set[str]:
    return {f"{t}-{p}" for _, t, p, u in report.iter_units() if any(w.code == ASSIGNED_CODE for w in u.warnings)}


def _manifest_epochs(s3, partition: str) -> list[dict[str, int]]:
    topic, part = partition.rsplit("-", 1)
    return [json.loads(_get(s3, k))["remoteLogSegmentMetadata"]["segmentLeaderEpochs"] for k in _objects(s3)
            if k.endswith(".rsm-manifest") and f"/{topic}-" in k and f"/{part}/" in k]


def test_upgrade_with_assigned_epochs_then_tier_then_rollback(sample_cluster, s3):
    log_dir = sample_cluster.broker_log_dirs[1]
    before = _checkpoints(log_dir)
    assert before["legacy-v0-0"][0] == b"0\n0\n"  # written before KIP-101: no entries

    report = execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2", assign_leader_epoch=True),
                             engine="inline", run_id="epochs")
    assert report.exit_code() == 0, [(u.path, u.errors) for *_, u in report.problem_units()]
    assert _assigned(report) == set(LEGACY)  # events-v2-0 has its own epochs from offset 0
    after = _checkpoints(log_dir)
    for name in LEGACY:
        first = min(names.offset_from_file_name(p.name) for p in (log_dir / name).glob("*.log"))
        assert after[name][0] == f"0\n1\n0 {first}\n".encode(), name  # the log start offset
        for log in sorted((log_dir / name).glob("*.log")):
            epochs = {b.partition_leader_epoch for b in FileRecords(log).batches()}
            assert epochs <= {0}, (log, epochs)  # the rewritten batches agree with the checkpoint
    assert after["events-v2-0"] == before["events-v2-0"]
    assert not validate_paths([str(log_dir)]).problems

    tier = execute_tier([str(log_dir)], options=_options(s3, sample_cluster))
    staged = {f"{t}-{p}" for _, t, p, u in tier.iter_units() if u.status is UnitStatus.OK and u.unit.endswith(".log")}
    assert {"legacy-v0-0", "clicks-v1-0"} <= staged
    for name in ("legacy-v0-0", "clicks-v1-0"):
        epochs = _manifest_epochs(s3, name)
        assert epochs and all(list(e) == ["0"] for e in epochs), (name, epochs)
    codes = {f.code for *_, u in tier.iter_units() for f in u.errors}
    assert "NO_LEADER_EPOCH" not in codes

    rb = rollback_run("epochs")
    assert rb.exit_code() == 0, [(u.path, u.errors) for *_, u in rb.problem_units()]
    assert _checkpoints(log_dir) == before  # bytes and mtimes
    restored = {f"{t}-{p}" for _, t, p, u in rb.iter_units() if any(w.code == "LEADER_EPOCH_RESTORED"
                                                                    for w in u.warnings)}
    assert restored == set(LEGACY)


def test_dry_run_lists_the_assignment_and_changes_nothing(sample_cluster, s3):
    log_dir = sample_cluster.broker_log_dirs[1]
    before = _checkpoints(log_dir)
    report = execute_upgrade([str(log_dir)], options=UpgradeOptions(target="v2", assign_leader_epoch=True,
                                                                    dry_run=True), engine="inline")
    assert report.exit_code() == 0
    assert _assigned(report) == set(LEGACY)
    assert _checkpoints(log_dir) == before


def test_tier_prepare_alone_assigns_epochs_and_without_the_option_says_how(sample_cluster, s3):
    log_dir = sample_cluster.broker_log_dirs[1]
    plain = execute_tier([str(log_dir)], options=_options(s3, sample_cluster), only_partitions=["legacy-v0-0"])
    errors = [f for *_, u in plain.iter_units() for f in u.errors]
    assert plain.exit_code() == 1 and errors[0].code == "NO_LEADER_EPOCH"
    assert "--assign-leader-epoch" in errors[0].message

    report = execute_tier([str(log_dir)], options=_options(s3, sample_cluster, assign_leader_epoch=True),
                          only_partitions=["legacy-v0-0"])
    assert report.exit_code() == 0, [(u.path, u.errors) for *_, u in report.problem_units()]
    assert _assigned(report) == {"legacy-v0-0"}
    assert (log_dir / "legacy-v0-0" / names.LEADER_EPOCH_CHECKPOINT_FILE).read_bytes() == b"0\n1\n0 0\n"
    epochs = _manifest_epochs(s3, "legacy-v0-0")
    assert epochs and all(e == {"0": min(e.values())} for e in epochs)


def test_the_tier_report_counts_the_records_it_staged(sample_cluster, s3):
    log_dir = sample_cluster.broker_log_dirs[1]
    report = execute_tier([str(log_dir)], options=_options(s3, sample_cluster), only_partitions=["events-v2-0"])
    staged = [u for *_, u in report.iter_units() if u.status is UnitStatus.OK and u.unit.endswith(".log")]
    assert staged and all(u.records_before == u.records_after and u.records_before for u in staged)
    active = max((log_dir / "events-v2-0").glob("*.log"))
    on_disk = sum(1 for p in (log_dir / "events-v2-0").glob("*.log") if p != active
                  for b in FileRecords(p).batches() for _ in b)
    assert report.totals.records_before == report.totals.records_after == on_disk
