"""``airflow dags test zero_checkpoint_unification`` end to end over the sample cluster."""

from __future__ import annotations

import json

from migration.formats.kraft_checkpoint import read_checkpoint_file


def test_unify_dag_end_to_end(airflow_base_env, dags_test, sample_cluster, tmp_path):
    env = {**airflow_base_env, "KMIGRATE_OUT": str(tmp_path / "out")}
    ctrl = sample_cluster.controller_dir
    rc, state = dags_test(env, "zero_checkpoint_unification",
                          {"cluster": str(sample_cluster.description_path), "dry_run": False}, tmp_path / "dag.log")
    assert (rc, state) == (0, "success"), (tmp_path / "dag.log").read_text()[-4000:]
    assert not (ctrl / "bootstrap.checkpoint").exists()
    zero = read_checkpoint_file(ctrl / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint")
    assert [m.name for m in zero.metadata_records] == ["FeatureLevelRecord", "UserScramCredentialRecord",
                                                       "UserScramCredentialRecord"]
    assert zero.voters_record is not None and zero.kraft_version == 1
    reports = list((tmp_path / "out" / "reports").glob("*/report.json"))
    assert reports
    report = json.loads(reports[0].read_text())
    assert report["dag_id"] == "zero_checkpoint_unification" and report["exit_code"] == 0
    # the bootstrap file went to the backup root, outside the log dir
    assert list((tmp_path / "out" / "backups").rglob("bootstrap.checkpoint"))


def test_unify_dag_fails_when_a_controller_is_live(airflow_base_env, dags_test, sample_cluster, tmp_path):
    import subprocess
    import sys
    import textwrap

    env = {**airflow_base_env, "KMIGRATE_OUT": str(tmp_path / "out")}
    lock = sample_cluster.controller_dir / ".lock"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, time
        fd = os.open({str(lock)!r}, os.O_RDWR)
        fcntl.lockf(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = (sample_cluster.controller_dir / "bootstrap.checkpoint").read_bytes()
        rc, state = dags_test(env, "zero_checkpoint_unification",
                              {"cluster": str(sample_cluster.description_path), "dry_run": False}, tmp_path / "dag.log")
        assert state == "failed"
        assert (sample_cluster.controller_dir / "bootstrap.checkpoint").read_bytes() == before
    finally:
        holder.kill()
        holder.wait()
