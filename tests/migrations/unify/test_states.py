"""The five states of KIP-1170 unification, the refusal gates and idempotence."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from migration.audit.store import ReportStore
from migration.cli.app import app
from migration.logdir.validation import validate_paths
from migration.migrations.unify import UnifyOptions, detect_state, execute_unify, run_unit, verify_unified


def _opts(tmp_path: Path, **kw) -> UnifyOptions:
    return UnifyOptions(backup_root=str(tmp_path / "backups"), **kw)


def _backups(tmp_path: Path, name: str) -> list[Path]:
    return sorted((tmp_path / "backups").rglob(name))


def _zero(d: Path, kraft) -> Path:
    return d / kraft.METADATA_DIR / kraft.ZERO


def _assert_unified(d: Path, kraft, values: list[bytes], kraft_records: list[tuple[int, bytes]]) -> None:
    """Decode the zero checkpoint with kafka-python and compare record by record."""
    dec = kraft.decode(_zero(d, kraft).read_bytes())
    head = [c for c in dec.control if c[0] < len(kraft_records) + 1]
    assert head[0][1] == kraft.SNAPSHOT_HEADER
    assert [(t, v) for _, t, v in head[1:]] == kraft_records  # byte for byte
    assert [v for _, v in dec.data] == values  # same records, same order
    offsets = [o for o, *_ in dec.control] + [o for o, _ in dec.data]
    assert sorted(offsets) == list(range(len(offsets)))  # contiguous from 0
    assert dec.control[-1][1] == kraft.SNAPSHOT_FOOTER and dec.control[-1][0] == max(offsets)
    assert dec.batches[0]["control"] and dec.batches[-1]["control"]
    assert all(not b["control"] for b in dec.batches[1:-1]) and len(dec.batches) >= 3
    assert {b["epoch"] for b in dec.batches} == {0}
    assert {b["compression"] for b in dec.batches} == {0}
    assert not (d / "bootstrap.checkpoint").exists()


def test_case1_dynamic_quorum_merges_and_keeps_voters(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    kr = [(kraft.KRAFT_VERSION, kraft.kraft_version_value(1)), (kraft.KRAFT_VOTERS, kraft.default_voters())]
    boot = kraft.bootstrap(values)
    old_zero = kraft.checkpoint([], kraft=kr)
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=boot, zero=old_zero)
    st = detect_state(d)
    assert (st.case, st.kraft_version, st.voters_present, st.bootstrap_records) == (1, 1, True, 4)
    assert st.metadata_version == "3.9-IV0" and st.metadata_version_level == 21

    report = execute_unify([d], options=_opts(tmp_path))
    assert report.exit_code() == 0, report.to_json()
    _assert_unified(d, kraft, values, kr)
    # The old zero checkpoint and bootstrap.checkpoint are kept, byte for byte, outside the log dir.
    assert [p.read_bytes() for p in _backups(tmp_path, kraft.ZERO)] == [old_zero]
    assert [p.read_bytes() for p in _backups(tmp_path, "bootstrap.checkpoint")] == [boot]
    (u,) = list(report.iter_results())
    assert (u.input_format, u.output_format, u.unit_type.value) == ("bootstrap.checkpoint", "zero-checkpoint",
                                                                    "metadata-log-dir")
    assert u.records_before == u.records_after == 4
    assert u.digest_before == u.digest_after == st.bootstrap_digest
    assert verify_unified(d, st.bootstrap_digest) == []
    assert validate_paths([d]).ok
    assert ReportStore().load(report.run_id).exit_code() == 0
    # The new zero checkpoint carries the old header timestamp and is read-only, as Kafka leaves it.
    assert _zero(d, kraft).stat().st_mode & 0o222 == 0


def test_case1_rerun_is_a_noop(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    kr = [(kraft.KRAFT_VERSION, kraft.kraft_version_value(1)), (kraft.KRAFT_VOTERS, kraft.default_voters())]
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=kraft.bootstrap(values), zero=kraft.checkpoint([], kraft=kr))
    assert execute_unify([d], options=_opts(tmp_path)).exit_code() == 0
    before = kraft.tree_digest(d)
    again = execute_unify([d], options=_opts(tmp_path))
    assert again.exit_code() == 0
    (u,) = list(again.iter_results())
    assert u.status.value == "skipped" and detect_state(d).case == 3
    assert kraft.tree_digest(d) == before


def test_case2_static_quorum_creates_zero_checkpoint(tmp_path, kraft):
    values, _ = kraft.bootstrap_values(mv=7)  # 3.3-IV3: the lowest accepted
    boot = kraft.bootstrap(values)
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=boot)
    st = detect_state(d)
    assert (st.case, st.kraft_version, st.voters_present, st.zero_checkpoint) == (2, 0, False, None)
    report = execute_unify([d], options=_opts(tmp_path))
    assert report.exit_code() == 0, report.to_json()
    _assert_unified(d, kraft, values, [])  # header only: no KRaftVersionRecord / VotersRecord
    assert [p.read_bytes() for p in _backups(tmp_path, "bootstrap.checkpoint")] == [boot]
    assert _backups(tmp_path, kraft.ZERO) == []


def test_case3_already_unified_is_untouched(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    zero = kraft.checkpoint(values, kraft=[(kraft.KRAFT_VERSION, kraft.kraft_version_value(1))])
    d = kraft.make_metadata_dir(tmp_path / "ctl", zero=zero)
    mtime = _zero(d, kraft).stat().st_mtime_ns
    assert detect_state(d).case == 3
    report = execute_unify([d], options=_opts(tmp_path))
    assert report.exit_code() == 0
    assert _zero(d, kraft).read_bytes() == zero and _zero(d, kraft).stat().st_mtime_ns == mtime
    assert not (tmp_path / "backups").exists()


def test_case4_zero_checkpoint_wins(tmp_path, kraft):
    boot_values, _ = kraft.bootstrap_values(mv=20, seed=1)
    zero_values, _ = kraft.bootstrap_values(mv=21, seed=2)
    boot = kraft.bootstrap(boot_values)
    zero = kraft.checkpoint(zero_values)
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=boot, zero=zero)
    st = detect_state(d)
    assert st.case == 4 and st.records_match is False and st.warnings
    report = execute_unify([d], options=_opts(tmp_path))
    assert report.exit_code() == 0, report.to_json()
    assert _zero(d, kraft).read_bytes() == zero
    assert not (d / "bootstrap.checkpoint").exists()
    assert [p.read_bytes() for p in _backups(tmp_path, "bootstrap.checkpoint")] == [boot]
    (u,) = list(report.iter_results())
    assert u.warnings and "other metadata records" in u.warnings[-1].message
    assert report.warnings  # the conflict is a run-level warning too


def test_case5_log_moved_on_only_retires(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    boot = kraft.bootstrap(values)
    later = kraft.checkpoint(values + [kraft.feature_level("transaction.version", 1)], epoch=1)
    name = "00000000000000000010-0000000001.checkpoint"
    seg = kraft.data_batch([kraft.feature_level("group.version", 1)], 10, epoch=1)
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=boot, snapshots={name: later}, segments={10: seg})
    st = detect_state(d)
    assert st.case == 5 and st.later_snapshots == [name]
    before = {k: v for k, v in kraft.tree_digest(d).items() if k != "bootstrap.checkpoint"}
    report = execute_unify([d], options=_opts(tmp_path))
    assert report.exit_code() == 0, report.to_json()
    assert not (d / "bootstrap.checkpoint").exists() and not _zero(d, kraft).exists()
    assert kraft.tree_digest(d) == before
    assert [p.read_bytes() for p in _backups(tmp_path, "bootstrap.checkpoint")] == [boot]
    assert validate_paths([d]).ok, validate_paths([d]).findings


def test_dry_run_changes_nothing(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=kraft.bootstrap(values))
    before = kraft.tree_digest(d)
    report = execute_unify([d], options=_opts(tmp_path, dry_run=True))
    assert report.exit_code() == 0
    assert [u.status.value for u in report.iter_results()] == ["planned"]
    assert kraft.tree_digest(d) == before


def test_mv_below_3_3_iv3_refused(tmp_path, kraft):
    values, _ = kraft.bootstrap_values(mv=6)  # 3.3-IV2
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=kraft.bootstrap(values))
    before = kraft.tree_digest(d)
    res = CliRunner().invoke(app, ["unify-bootstrap", str(d), "--engine", "inline", "--backup-root",
                                    str(tmp_path / "backups")])
    assert res.exit_code == 1, res.output
    assert "3.3-IV3" in res.output and "KAFKA-19192" in res.output
    assert kraft.tree_digest(d) == before


def test_truncated_bootstrap_refused_with_name_and_position(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    boot = kraft.bootstrap(values)
    footer_at = len(boot) - len(kraft.control_batch([(kraft.SNAPSHOT_FOOTER, kraft.footer_value())], 5))
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=boot[:-7])
    before = kraft.tree_digest(d)
    res = CliRunner().invoke(app, ["unify-bootstrap", str(d), "--engine", "inline", "--json", "--backup-root",
                                    str(tmp_path / "b")])
    assert res.exit_code == 1
    report = json.loads(res.stdout)
    (err,) = report["brokers"][0]["partitions"][0]["units"][0]["errors"]
    assert err["file"] == str(d / "bootstrap.checkpoint") and err["position"] == footer_at
    res = CliRunner().invoke(app, ["unify-bootstrap", str(d), "--engine", "inline", "--backup-root",
                                    str(tmp_path / "b")])
    assert res.exit_code == 1 and f"bootstrap.checkpoint @ byte {footer_at}" in res.output
    assert kraft.tree_digest(d) == before


def test_corrupt_bootstrap_crc_refused(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    boot = bytearray(kraft.bootstrap(values))
    boot[100] ^= 0x01  # inside the data batch
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=bytes(boot))
    report = execute_unify([d], options=_opts(tmp_path))
    assert report.exit_code() == 1
    (u,) = list(report.iter_results())
    assert "CRC" in u.errors[0].message and u.errors[0].position is not None
    assert (d / "bootstrap.checkpoint").read_bytes() == bytes(boot)


def test_records_above_8_mib_refused(tmp_path, kraft):
    big = [kraft.scram_record(f"user{i}", 2, bytes([i]) * 1_000_000, b"k" * 64, b"s" * 64) for i in range(9)]
    values = [kraft.feature_level("metadata.version", 21), *big]
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=kraft.bootstrap(values, split=5))
    report = execute_unify([d], options=_opts(tmp_path))
    assert report.exit_code() == 1
    (u,) = list(report.iter_results())
    assert any("maximum batch size" in e.message for e in u.errors)
    assert (d / "bootstrap.checkpoint").exists() and not _zero(d, kraft).exists()


_HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""


def test_live_controller_lock_refused_exit_3(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    kr = [(kraft.KRAFT_VERSION, kraft.kraft_version_value(1)), (kraft.KRAFT_VOTERS, kraft.default_voters())]
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=kraft.bootstrap(values), zero=kraft.checkpoint([], kraft=kr))
    before = kraft.tree_digest(d)
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(d / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        res = CliRunner().invoke(app, ["unify-bootstrap", str(d), "--engine", "inline", "--backup-root",
                                    str(tmp_path / "backups")])
        assert res.exit_code == 3, res.output
        assert "lock" in res.output
        # run_unit on its own (an engine retry, a DAG task) refuses as well
        from migration.runtime.engine import Unit

        r = run_unit(Unit(kind="unify-metadata-dir", id="u", log_dir=str(d), path=str(d)),
                     _opts(tmp_path).model_dump())
        assert r["status"] == "refused"
    finally:
        holder.kill()
        holder.wait()
    assert kraft.tree_digest(d) == before
    assert not (tmp_path / "backups").exists()


def test_backup_root_inside_log_dir_refused(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=kraft.bootstrap(values))
    report = execute_unify([d], options=UnifyOptions(backup_root=str(d / "bk")))
    assert report.exit_code() == 3 and report.refusal
    assert not (d / "bk").exists()


def test_run_unit_result_shape(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=kraft.bootstrap(values))
    from migration.runtime.engine import Unit

    t0 = time.monotonic()
    r = run_unit(Unit(kind="unify-metadata-dir", id="u", log_dir=str(d), path=str(d)), _opts(tmp_path).model_dump())
    assert time.monotonic() - t0 < 5
    assert r["status"] == "ok" and r["broker_id"] == kraft.NODE_ID and r["state"]["case"] == 2
    ur = r["unit_result"]
    assert ur["unit_type"] == "metadata-log-dir" and ur["digest_before"] == ur["digest_after"]
    assert ur["records_before"] == ur["records_after"] == len(values)
    # idempotent: the same unit again changes nothing
    r2 = run_unit(Unit(kind="unify-metadata-dir", id="u", log_dir=str(d), path=str(d)), _opts(tmp_path).model_dump())
    assert r2["status"] == "skipped" and r2["unit_result"]["digest_after"] == ur["digest_after"]


@pytest.mark.parametrize("mv", [4, 7])
def test_verify_unified_detects_wrong_records(tmp_path, kraft, mv):
    values, _ = kraft.bootstrap_values(mv=21)
    other, _ = kraft.bootstrap_values(mv=mv)
    d = kraft.make_metadata_dir(tmp_path / "ctl", zero=kraft.checkpoint(other))
    st = detect_state(d)
    expected = kraft.checkpoint(values)
    d2 = kraft.make_metadata_dir(tmp_path / "ctl2", zero=expected)
    assert verify_unified(d, detect_state(d2).zero_checkpoint.digest)
    assert verify_unified(d, st.zero_checkpoint.digest) == []


def test_case2_before_first_start_creates_the_metadata_partition(tmp_path, kraft):
    """A static-quorum controller formatted but never started has no __cluster_metadata-0 yet."""
    import shutil

    values, _ = kraft.bootstrap_values()
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=kraft.bootstrap(values))
    shutil.rmtree(d / kraft.METADATA_DIR)
    assert detect_state(d).case == 2
    assert execute_unify([d], options=_opts(tmp_path)).exit_code() == 0
    _assert_unified(d, kraft, values, [])


def test_run_unit_inside_a_job_holding_the_lock(tmp_path, kraft):
    """orchestration/spark_app.py holds the log dirs' locks around the engine; run_unit in that same
    process must work and must not drop the job's lock when it finishes."""
    from migration.logdir.model import is_locked
    from migration.runtime.engine import Unit
    from migration.runtime.safety import holding_locks

    values, _ = kraft.bootstrap_values()
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=kraft.bootstrap(values))
    probe = "import sys; from migration.logdir.model import is_locked; print(is_locked(sys.argv[1]))"
    options = {**_opts(tmp_path).model_dump(), "lock_log_dirs": [str(d)]}  # the DAG adds this key
    with holding_locks([d]):
        r = run_unit(Unit(kind="unify-metadata-dir", id="u", log_dir=str(d), path=str(d)), options)
        assert r["status"] == "ok", r
        seen = subprocess.run([sys.executable, "-c", probe, str(d)], capture_output=True, text=True,
                              env={**__import__("os").environ, "KMIGRATE_OUT": str(tmp_path / "elsewhere")})
        assert seen.stdout.strip() == "True", seen.stderr  # another process still sees the dir locked
    assert not is_locked(d)
