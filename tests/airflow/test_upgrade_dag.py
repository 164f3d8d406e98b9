"""``airflow dags test message_format_upgrade`` end to end, and a canary failure that must roll
the canary back and stop the rollout."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from kafka.record.memory_records import MemoryRecords


def _records(log_dir: Path) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for seg in sorted(log_dir.glob("*/*.log")):
        mr = MemoryRecords(seg.read_bytes())
        while mr.has_next():
            b = mr.next_batch()
            for r in b:
                out.setdefault(seg.parent.name, []).append((r.offset, r.key, r.value))
    return out


def _magics(log_dir: Path) -> set[int]:
    magics = set()
    for seg in log_dir.glob("*/*.log"):
        mr = MemoryRecords(seg.read_bytes())
        while mr.has_next():
            magics.add(mr.next_batch().magic)
    return magics


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes() + str(p.stat().st_mtime_ns).encode())
    return h.hexdigest()


def _queues(description: Path) -> dict[int, str]:
    """Give every node of the cluster description a queue of its own, as a deployment with one
    worker per broker host does."""
    desc = json.loads(description.read_text())
    for node in desc["nodes"]:
        node["queue"] = f"kafka-host-{node['id']}"
    description.write_text(json.dumps(desc))
    return {n["id"]: n["queue"] for n in desc["nodes"]}


def test_upgrade_dag_canary_then_rolling_to_v2(airflow_base_env, private_airflow_home, dags_test, sample_cluster,
                                               tmp_path):
    env = {**airflow_base_env, "KMIGRATE_OUT": str(tmp_path / "out"), "AIRFLOW_HOME": str(private_airflow_home)}
    queues = _queues(sample_cluster.description_path)
    before = {b: _records(d) for b, d in sample_cluster.broker_log_dirs.items()}
    rc, state = dags_test(env, "message_format_upgrade",
                          {"cluster": str(sample_cluster.description_path), "target_format": "v2",
                           "canary_broker": 1, "dry_run": False, "approval": "auto"}, tmp_path / "dag.log")
    log = (tmp_path / "dag.log").read_text()
    assert (rc, state) == (0, "success"), log[-5000:]
    assert log.count("Spark-Submit cmd") >= 4  # preflight, canary, two rolling brokers
    for b, d in sample_cluster.broker_log_dirs.items():
        assert _magics(d) == {2}, b
        assert _records(d) == before[b], f"broker {b}: records changed"
    reports = [json.loads(p.read_text()) for p in (tmp_path / "out" / "reports").glob("*/report.json")]
    merged = [r for r in reports if r["dag_id"] == "message_format_upgrade" and r["kind"] == "upgrade"
              and {b["broker_id"] for b in r["brokers"]} == {1, 2, 3}]
    assert merged and merged[0]["exit_code"] == 0
    t = merged[0]["totals"]
    assert t["records_before"] == t["records_after"] > 0 and t["digest_mismatches"] == 0

    # Each task that reads or writes a broker's log dirs was queued on that broker's queue (the
    # cluster policy, migration/runtime/airflow_policy.py); the rest on Airflow's default queue.
    with sqlite3.connect(private_airflow_home / "airflow.db") as db:
        (run_id,) = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1",
                               ("message_format_upgrade",)).fetchone()
        tis = db.execute("SELECT task_id, map_index, state, queue FROM task_instance WHERE dag_id = ? AND run_id = ?",
                         ("message_format_upgrade", run_id)).fetchall()
    order = {"canary": [1], "rolling": [2, 3]}
    routed = {}
    for task_id, map_index, ti_state, queue in tis:
        group = task_id.split(".")[0]
        if group in ("preflight", "prestage", "discard_unused_stage", *order):
            if map_index < 0:  # never expanded: a rollback skipped as a whole
                assert ti_state == "skipped", (task_id, ti_state)
                continue
            routed[task_id, map_index] = (queue, queues[order.get(group, [1, 2, 3])[map_index]])
        else:
            assert queue == "default", (task_id, map_index, queue)
    assert {k for k in routed} >= {("preflight.validate", 2), ("prestage", 1), ("canary.upgrade", 0),
                                   ("rolling.upgrade", 1), ("rolling.verify", 0), ("discard_unused_stage", 2)}, routed
    wrong = {k: v for k, v in routed.items() if v[0] != v[1]}
    assert not wrong, wrong


def test_canary_failure_rolls_back_and_stops_the_rollout(airflow_base_env, dags_test, sample_cluster, tmp_path):
    env = {**airflow_base_env, "KMIGRATE_OUT": str(tmp_path / "out")}
    canary = sample_cluster.broker_log_dirs[1]
    seg = sorted(canary.glob("legacy-v0-*/*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0x20  # a corrupt segment: never rewritten, the canary exits 1
    seg.write_bytes(bytes(data))
    canary_before = _tree_hash(canary)
    others_before = {b: _tree_hash(d) for b, d in sample_cluster.broker_log_dirs.items() if b != 1}
    rc, state = dags_test(env, "message_format_upgrade",
                          {"cluster": str(sample_cluster.description_path), "target_format": "v1",
                           "canary_broker": 1, "dry_run": False, "approval": "auto"}, tmp_path / "dag.log")
    log = (tmp_path / "dag.log").read_text()
    assert state == "failed", log[-5000:]
    assert "canary.rollback" in log
    # one verdict: the DAG run failed, and so says its report (the canary's corrupt segment)
    reports = [json.loads(p.read_text()) for p in (tmp_path / "out" / "reports").glob("*/report.json")]
    merged = [r for r in reports if r["dag_id"] == "message_format_upgrade" and r["kind"] == "upgrade"
              and r.get("steps")]
    assert len(merged) == 1 and (merged[0]["status"], merged[0]["exit_code"]) == ("failed", 1)
    errors = [f["code"] for b in merged[0]["brokers"] for p in b["partitions"] for u in p["units"] for f in u["errors"]]
    assert "CORRUPT_BATCH" in errors
    assert _tree_hash(canary) == canary_before  # rolled back byte for byte, mtimes included
    for b, h in others_before.items():
        assert _tree_hash(sample_cluster.broker_log_dirs[b]) == h, f"broker {b} was touched"


def test_upgrade_dag_prestages_live_brokers_and_swaps_in_each_window(airflow_base_env, dags_test, sample_cluster,
                                                                     tmp_path):
    """The brokers run (a stand-in holds each log dir's lock): every broker's closed segments are
    staged beside it, then broker by broker the window stops it with its ``stop`` command, waits
    (deferred) for the lock to go, swaps the stage in, verifies and starts it again."""
    import subprocess
    import sys

    from migration.logdir.model import lock_status
    from migration.orchestration.cluster import ClusterDescription

    desc = ClusterDescription.model_validate_json(sample_cluster.description_path.read_text())
    stand_in = [sys.executable, "-m", "migration.demo.live_broker"]
    for node in desc.nodes:
        if node.is_broker:
            node.stop = [*stand_in, "stop", *node.log_dirs]
            node.start = [*stand_in, "start", *node.log_dirs]
    desc.dump(sample_cluster.description_path)
    env = {**airflow_base_env, "KMIGRATE_OUT": str(tmp_path / "out")}
    before = {b: _records(d) for b, d in sample_cluster.broker_log_dirs.items()}
    for d in sample_cluster.broker_log_dirs.values():
        subprocess.run([*stand_in, "start", str(d)], check=True, env=env, timeout=60)
    try:
        rc, state = dags_test(env, "message_format_upgrade",
                              {"cluster": str(sample_cluster.description_path), "target_format": "v2",
                               "canary_broker": 1, "dry_run": False, "approval": "auto", "prestage": True,
                               "stop_timeout_s": 120}, tmp_path / "dag.log")
        log = (tmp_path / "dag.log").read_text()
        assert (rc, state) == (0, "success"), log[-5000:]
        for b, d in sample_cluster.broker_log_dirs.items():
            assert lock_status(d).live, f"broker {b} was not started again: {lock_status(d).describe()}"
            assert _magics(d) == {2}, b
            assert _records(d) == before[b], f"broker {b}: records changed"
        reports = [json.loads(p.read_text()) for p in (tmp_path / "out" / "reports").glob("*/report.json")]
        prestages = [r for r in reports if r["kind"] == "upgrade-prestage"]
        assert len(prestages) == len(sample_cluster.broker_log_dirs)
        windows = {b["broker_id"]: b["window"] for r in reports if r["kind"] == "upgrade" and not r.get("steps")
                   for b in r["brokers"] if b.get("window")}
        assert set(windows) == set(sample_cluster.broker_log_dirs), windows
        assert all(w["swapped"] > 0 for w in windows.values()), windows
        assert log.count("stopped with") >= 3 and log.count("started with") >= 3
    finally:
        _stop_stand_ins(sample_cluster, stand_in, env)


def _stop_stand_ins(sample_cluster, stand_in: list[str], env: dict[str, str]) -> None:
    import subprocess

    for d in sample_cluster.broker_log_dirs.values():
        subprocess.run([*stand_in, "stop", str(d)], env=env, timeout=60)


def _stand_in_cluster(sample_cluster, env, *, commands: bool) -> list[str]:
    import subprocess
    import sys

    from migration.orchestration.cluster import ClusterDescription

    stand_in = [sys.executable, "-m", "migration.demo.live_broker"]
    desc = ClusterDescription.model_validate_json(sample_cluster.description_path.read_text())
    for node in desc.nodes:
        if node.is_broker and commands:
            node.stop = [*stand_in, "stop", *node.log_dirs]
            node.start = [*stand_in, "start", *node.log_dirs]
    desc.dump(sample_cluster.description_path)
    for d in sample_cluster.broker_log_dirs.values():
        subprocess.run([*stand_in, "start", str(d)], check=True, env=env, timeout=60)
    return stand_in


def test_a_window_without_a_stop_command_waits_deferred_for_the_operator(airflow_base_env, dags_test,
                                                                         sample_cluster, tmp_path):
    """No stop command: the window says the operator must stop the broker (task log, prestage
    report) and waits in the triggerer; the operator stops it a while later and the window goes
    on. Broker 1 alone (the canary), still stopped at the end: the operator starts it."""
    import subprocess
    import threading
    import time

    env = {**airflow_base_env, "KMIGRATE_OUT": str(tmp_path / "out")}
    stand_in = _stand_in_cluster(sample_cluster, env, commands=False)
    canary = sample_cluster.broker_log_dirs[1]
    before = _records(canary)
    reports = tmp_path / "out" / "reports"

    def operator_stops_it() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            notes = [w["message"] for p in reports.glob("*stage-b1/report.json")
                     for w in json.loads(p.read_text())["warnings"]]
            if any("waiting for the operator to stop it" in n for n in notes):
                time.sleep(5)  # the sensor has deferred by now
                subprocess.run([*stand_in, "stop", str(canary)], env=env, timeout=60)
                return
            time.sleep(0.5)

    operator = threading.Thread(target=operator_stops_it, daemon=True)
    operator.start()
    try:
        rc, state = dags_test(env, "message_format_upgrade",
                              {"cluster": str(sample_cluster.description_path), "target_format": "v2",
                               "canary_broker": 1, "brokers": [1], "dry_run": False, "approval": "auto",
                               "prestage": True, "stop_timeout_s": 300}, tmp_path / "dag.log")
        log = (tmp_path / "dag.log").read_text()
        assert (rc, state) == (0, "success"), log[-5000:]
        assert "waiting for the operator to stop it" in log
        assert "Pausing task as DEFERRED" in log and "Trigger completed" in log  # waited in the triggerer
        assert _magics(canary) == {2} and _records(canary) == before
        stage_report = json.loads(next(reports.glob("*stage-b1/report.json")).read_text())
        assert any("start it now" in w["message"] for w in stage_report["warnings"])
    finally:
        operator.join(timeout=1)
        _stop_stand_ins(sample_cluster, stand_in, env)


def test_a_broker_that_does_not_stop_fails_its_window_naming_the_timeout(airflow_base_env, dags_test,
                                                                        sample_cluster, tmp_path):

    env = {**airflow_base_env, "KMIGRATE_OUT": str(tmp_path / "out")}
    stand_in = _stand_in_cluster(sample_cluster, env, commands=False)
    canary = sample_cluster.broker_log_dirs[1]
    before = _tree_hash(canary)
    try:
        rc, state = dags_test(env, "message_format_upgrade",
                              {"cluster": str(sample_cluster.description_path), "target_format": "v2",
                               "canary_broker": 1, "brokers": [1], "dry_run": False, "approval": "auto",
                               "prestage": True, "stop_timeout_s": 5}, tmp_path / "dag.log")
        log = (tmp_path / "dag.log").read_text()
        assert state == "failed", log[-5000:]
        assert "did not stop within stop_timeout_s=5 s" in log
        assert _tree_hash(canary) == before  # nothing touched: the broker never stopped
    finally:
        _stop_stand_ins(sample_cluster, stand_in, env)
