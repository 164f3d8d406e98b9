"""``make demo``: the whole pipeline on embedded defaults.

1. build the sample legacy cluster (3 brokers, a KRaft controller) under out/demo/, the demo's
   own kmigrate home (runs, reports, backups, sessions; printed first and last);
2. print its inventory and validation;
3. run the DAG ``message_format_upgrade`` with ``airflow dags test`` (canary broker 1,
   target v2, leader epoch 0 assigned to data written before KIP-101, dry_run false, automatic
   approval) — Spark jobs through SparkSubmitOperator — with a prestage: a stand-in process per
   broker holds its log dir lock as a running broker does (``demo/live_broker.py``); every
   broker's closed segments are staged beside it, then each broker's window stops it (its
   ``stop`` command in the cluster description), swaps the stage in, verifies and starts it;
4. run ``zero_checkpoint_unification`` over the controller;
5. start an S3-compatible server (moto) on loopback, create the bucket, run
   ``tiered_storage_readiness`` as two scheduled runs (the second finds nothing dirty and
   submits no Spark job), then runs under a small budget that serve every partition in turn;
   every eligible partition, legacy ones included, is staged; the compacted topic and the topic
   the cluster description excludes are reported ineligible; print the bucket listing; stop the
   server;
6. print where every run report (JSON and HTML) is;
7. print one line per DAG run with its state and its report's verdict.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule

from migration.audit.store import ReportNotFound, ReportStore
from migration.audit.text import print_inventory, print_summary
from migration.demo.connections import DEMO_SPARK, S3_CONN_ID, describe, s3_connection, write_connections
from migration.demo.sample_cluster import TOPICS, build_sample_cluster
from migration.logdir.model import scan_inventory
from migration.logdir.validation import validate_paths
from migration.migrations.tier import layout
from migration.migrations.tier.s3 import S3Settings, make_client
from migration.orchestration.cluster import ClusterDescription
from migration.orchestration.common import SPARK_CONN_ID, run_id_for
from migration.settings import (
    ENV_BACKUP_ROOT,
    ENV_CLUSTER,
    ENV_HOME,
    ENV_PROJECT_ROOT,
    ENV_REPORT_ROOT,
    ENV_SESSIONS_URL,
    home,
    project_root,
    use_home,
)

console = Console(width=max(120, shutil.get_terminal_size((120, 40)).columns))

DEMO_BUCKET = "kafka-tiered-demo"
TIER_PREFIX = "tiered/"
# One line per DAG run for the closing summary: (DAG id and label, DAG run state, report verdict).
VERDICTS: list[tuple[str, str, str]] = []
# Fake credentials for the local moto server only; never printed.
DEMO_ACCESS_KEY = "demo-access-key"
DEMO_SECRET_KEY = "demo-secret-key-not-real"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What a command the demo prints needs from the environment, besides PATH (docs/operations.md,
# "Airflow UI": always both AIRFLOW_HOME and AIRFLOW_CONFIG; airflow.cfg expands dags/ and plugins/
# from KMIGRATE_PROJECT_ROOT). The connections are in Airflow's database, not in the environment.
REPLAY_ENV = ("AIRFLOW_HOME", "AIRFLOW_CONFIG", ENV_PROJECT_ROOT, ENV_HOME)


def airflow_env(cluster: Path) -> dict[str, str]:
    root = project_root()
    env = dict(os.environ)
    env.setdefault("AIRFLOW_HOME", str(root / ".airflow"))
    env.setdefault("AIRFLOW_CONFIG", str(root / "airflow.cfg"))
    env[ENV_PROJECT_ROOT] = str(root)
    env[ENV_HOME] = str(home())
    env[ENV_CLUSTER] = str(cluster)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = sys.executable
    return env


def replay_env(env: dict[str, str]) -> str:
    """The shell line that gives a terminal what the printed commands need (:data:`REPLAY_ENV`
    and this Python's bin directory on PATH: airflow, kmigrate, spark-submit)."""
    pairs = [f"{k}={shlex.quote(env[k])}" for k in REPLAY_ENV]
    return "export " + " ".join([*pairs, f"PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH"])


def say(command: str) -> None:
    """Print a command for the user to replay, as ``$ command`` (no Rich markup in it)."""
    console.print(f"$ {escape(command)}", highlight=False, soft_wrap=True)


def set_connections(env: dict[str, str], conns: dict[str, dict]) -> None:
    """Write the demo's connections into Airflow's database, as a user would (and say so)."""
    write_connections(env, conns)
    console.print(f"Airflow connections in {env['AIRFLOW_HOME']}/airflow.db (airflow connections add): "
                  + "; ".join(describe(c, spec) for c, spec in conns.items()), highlight=False, soft_wrap=True)


def upgrade_conf(cluster: Path) -> dict:
    # assign_leader_epoch: data written before KIP-101 gets leader epoch 0, so it can be tiered in step 5.
    return {"cluster": str(cluster), "target_format": "v2", "canary_broker": 1, "dry_run": False,
            "approval": "auto", "assign_leader_epoch": True, "prestage": True, "stop_timeout_s": 300}


STAND_IN = [sys.executable, "-m", "migration.demo.live_broker"]


def run_brokers(cluster: Path) -> list[list[str]]:
    """Give the cluster description each broker's stop and start commands (the stand-in's) and
    start a stand-in for every broker, printing each command; returns the brokers' log dirs."""
    desc = ClusterDescription.model_validate_json(cluster.read_text())
    dirs = []
    for node in desc.brokers:
        node.stop = [*STAND_IN, "stop", *node.log_dirs]
        node.start = [*STAND_IN, "start", *node.log_dirs]
        dirs.append(node.log_dirs)
    desc.dump(cluster)
    console.print("A stand-in per broker holds its log dir lock, as a running broker does; the cluster "
                  "description's stop/start commands (the DAG's windows) stop and start it:", highlight=False)
    for node in desc.brokers:
        say(shlex.join(node.start))
        subprocess.run(node.start, check=True, capture_output=True, timeout=60)
    return dirs


def stop_brokers(dirs: list[list[str]]) -> None:
    """The stand-ins stop: the next steps work on stopped brokers."""
    for d in dirs:
        cmd = [*STAND_IN, "stop", *d]
        say(shlex.join(cmd))
        subprocess.run(cmd, capture_output=True, timeout=60)


def unify_conf(cluster: Path) -> dict:
    return {"cluster": str(cluster), "dry_run": False}


def closing_hints(demo: Path, env: dict[str, str]) -> None:
    """Where to read the demo's reports afterwards: commands that work as printed."""
    store = ReportStore()
    console.print(f"{len(store.list_runs())} reports (JSON and HTML) under {store.root}; read them with:",
                  highlight=False, soft_wrap=True)
    say(f"kmigrate --home {shlex.quote(str(demo))} report --list")
    server = " ".join(f"{k}={shlex.quote(env[k])}" for k in REPLAY_ENV)
    console.print("or on the 'Migration report' tab of each DAG run, in the Airflow UI (make ui; or by hand: an "
                  "api-server that reads this home, through KMIGRATE_HOME or [kmigrate] home in airflow.cfg, "
                  "docs/operations.md):", highlight=False, soft_wrap=True, markup=False)
    airflow = shlex.quote(str(Path(sys.executable).parent / "airflow"))
    say(f"{server} {airflow} api-server --host 127.0.0.1 --port 8080")


def dags_test(dag_id: str, conf: dict, env: dict[str, str], *, log: Path, label: str = "") -> int:
    """Run one DAG with ``airflow dags test``; print its state and its run report's summary."""

    cmd = [str(Path(sys.executable).parent / "airflow"), "dags", "test", dag_id, "-c", json.dumps(conf)]
    say(f"airflow dags test {dag_id} -c {shlex.quote(json.dumps(conf))}")
    started = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.call(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=project_root())
    text = log.read_text()
    state, run_id = "unknown", None
    for line in text.splitlines():
        if "DagRun Finished" in line:
            state = line.split(" state=")[1].split(",")[0] if " state=" in line else state
            run_id = line.split(" run_id=")[1].split(",")[0] if " run_id=" in line else run_id
    jobs = text.count("Spark-Submit cmd")
    report = None
    color = "green" if state == "success" else "red"
    console.print(f"  DAG run [{color}]{state}[/{color}] in {time.monotonic() - started:.0f}s, {jobs} Spark job(s) "
                  f"submitted; log {log}", highlight=False)
    if run_id:
        # The DAG run's own report (merging every step's), as its "Migration report" tab shows it.
        store = ReportStore(dag_run_report_id=run_id_for)
        try:
            report = store.find_by_dag_run(dag_id, run_id)
        except ReportNotFound:
            report = None
            console.print(f"  [red]no report of DAG run {run_id}[/red]", highlight=False)
        if report is not None:
            if report.session:
                s = report.session
                console.print(f"  session epoch {s.epoch}: {s.dirty} dirty, {s.deferred} deferred, {s.clean} clean"
                              f"{' (full rescan)' if s.full_rescan else ''}", highlight=False)
            print_summary(report, console)
            merged = report.run_id == run_id_for(run_id) or bool(report.steps)
            console.print(f"  {'DAG run report' if merged else 'DAG run report (its one step)'}: "
                          f"{store.html_path(report.run_id)} (JSON: {store.json_path(report.run_id)})",
                          highlight=False, soft_wrap=True)
    verdict = "no report"
    if run_id and report is not None:
        verdict = f"report {report.status.value} (exit {report.exit_code()}), {report.totals.units} units"
    VERDICTS.append((f"{dag_id} {label}".strip(), state, verdict))
    return 0 if rc == 0 and state == "success" else 1


def main() -> int:

    # The demo's own home, never the operator's (it is wiped first): everything the demo writes
    # (runs, reports, backups, sessions) stays under out/demo, whatever KMIGRATE_HOME says.
    demo = project_root() / "out" / "demo"
    if demo.exists():
        shutil.rmtree(demo)
    demo.mkdir(parents=True)
    console.print(use_home(demo, "the demo's own home").describe(), highlight=False, soft_wrap=True)
    for moved in (ENV_REPORT_ROOT, ENV_BACKUP_ROOT, ENV_SESSIONS_URL):
        os.environ.pop(moved, None)
    logs = demo / "logs"
    logs.mkdir()
    failures: list[str] = []

    console.print(Rule("1. Sample legacy cluster"))
    sc = build_sample_cluster(demo / "cluster")
    console.print(f"{sc.root}: brokers {sorted(sc.broker_log_dirs)}, controller {sc.controller_dir}, "
                  f"{sum(sc.records.values())} records in {len(sc.records)} partitions; description "
                  f"{sc.description_path}")

    console.print(Rule("2. Inventory and validation"))
    all_dirs = [*sc.log_dirs, sc.controller_dir]
    print_inventory(scan_inventory(all_dirs, deep=True), console)
    res = validate_paths(all_dirs)
    console.print(f"validation: {res.files_checked} files, {res.bytes_checked} bytes, {res.records_checked} records: "
                  + ("clean" if res.ok else f"{len(res.problems)} problems"))
    if not res.ok:
        failures.append("validation of the sample cluster")

    env = airflow_env(sc.description_path)
    console.print(Rule("3. DAG message_format_upgrade (brokers running: prestage, then a window per broker; "
                       "canary broker 1, target v2, leader epoch 0 assigned)"))
    set_connections(env, {SPARK_CONN_ID: DEMO_SPARK})
    console.print("Every command printed as `$ ...` replays in a terminal at the checkout, with:", highlight=False)
    say(replay_env(env))
    running = run_brokers(sc.description_path)
    try:
        rc = dags_test("message_format_upgrade", upgrade_conf(sc.description_path), env,
                       log=logs / "message_format_upgrade.log")
    finally:
        stop_brokers(running)  # the next steps work on stopped brokers
    if rc:
        failures.append("message_format_upgrade")
    res = validate_paths(all_dirs)
    console.print(f"after the upgrade: validation {'clean' if res.ok else 'FOUND PROBLEMS'}")
    print_inventory(scan_inventory(sc.log_dirs[:1], deep=True), console)

    console.print(Rule("4. DAG zero_checkpoint_unification"))
    rc = dags_test("zero_checkpoint_unification", unify_conf(sc.description_path), env,
                   log=logs / "zero_checkpoint_unification.log")
    if rc:
        failures.append("zero_checkpoint_unification")

    console.print(Rule("5. DAG tiered_storage_readiness against a local S3-compatible server"))
    failures += _tiered(sc, logs)

    console.print(Rule("6. Run reports"))
    store = ReportStore()
    for s in store.list_runs():
        console.print(f"{s.run_id:52} {s.kind:16} exit {s.exit_code}  {store.run_dir(s.run_id)}/report.html",
                      highlight=False)
    closing_hints(demo, env)
    console.print(Rule("7. Verdicts, one line per DAG run"))
    for name, state, verdict in VERDICTS:
        color = "green" if state == "success" and "report ok" in verdict else "red"
        console.print(f"[{color}]{state:8}[/{color}] {name}: {verdict}", highlight=False, soft_wrap=True)
    if failures:
        console.print(f"[red]demo steps that failed: {failures}[/red]")
        return 1
    console.print("[green]demo complete[/green]")
    return 0


def _tiered(sc, logs: Path) -> list[str]:
    from pydantic import SecretStr


    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server_log = open(logs / "moto_server.log", "w")  # noqa: SIM115 - lives as long as the server
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=server_log, stderr=subprocess.STDOUT)
    failures: list[str] = []
    try:
        s3 = make_client(S3Settings(endpoint_url=endpoint, access_key_id=SecretStr(DEMO_ACCESS_KEY),
                                    secret_access_key=SecretStr(DEMO_SECRET_KEY)))
        for _ in range(100):
            try:
                s3.list_buckets()
                break
            except Exception:
                time.sleep(0.1)
        s3.create_bucket(Bucket=DEMO_BUCKET)
        console.print(f"moto server on {endpoint}, bucket {DEMO_BUCKET}")
        env = airflow_env(sc.description_path)
        set_connections(env, {S3_CONN_ID: s3_connection(endpoint, DEMO_ACCESS_KEY, DEMO_SECRET_KEY)})
        console.print(f"(the commands below need this S3 server, which stops at the end of the demo: "
                      f"moto_server -H 127.0.0.1 -p {port} and a bucket {DEMO_BUCKET} bring one back)",
                      highlight=False, soft_wrap=True, markup=False)
        base: dict[str, Any] = {"cluster": str(sc.description_path), "bucket": DEMO_BUCKET, "prefix": TIER_PREFIX}
        for i, (label, conf) in enumerate([
            ("scheduled run 1 (everything dirty)", base),
            ("scheduled run 2 (nothing changed: no Spark job)", base),
        ]):
            console.print(f"[bold]{label}[/bold]")
            if dags_test("tiered_storage_readiness", conf, env, log=logs / f"tiered_{i}.log", label=label):
                failures.append(f"tiered_storage_readiness {label}")
        # A fresh session with a small budget: successive runs serve every partition in turn.
        for i in range(3):
            conf = {**base, "session_name": "demo-budget", "budget_segments": 6}
            console.print(f"[bold]budgeted run {i + 1} (6 segments per run)[/bold]")
            if dags_test("tiered_storage_readiness", conf, env, log=logs / f"tiered_budget_{i}.log",
                         label=f"budgeted run {i + 1}"):
                failures.append(f"tiered_storage_readiness budgeted run {i + 1}")
        objects = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=DEMO_BUCKET):
            objects.extend(page.get("Contents", []))
        by_suffix: dict[str, int] = {}
        for o in objects:
            suffix = o["Key"].rsplit(".", 1)[-1]
            by_suffix[suffix] = by_suffix.get(suffix, 0) + 1
        console.print(f"bucket {DEMO_BUCKET}: {len(objects)} objects, {sum(o['Size'] for o in objects)} bytes, "
                      f"by kind {by_suffix}")
        for o in objects[:6]:
            console.print(f"  {o['Key']}  {o['Size']}", highlight=False)
        failures += _check_legacy_manifests(s3, objects, sc)
    finally:
        server.terminate()
        server.wait(timeout=20)
        console.print("moto server stopped")
    return failures


if __name__ == "__main__":
    sys.exit(main())


# Topics of the sample cluster written before KIP-101 (message formats v0/v1): staged only because
# the upgrade assigned them leader epoch 0 (docs/formats.md §5.7).
LEGACY_TOPICS = ("legacy-v0", "clicks-v1", "orders-upgraded")


def _check_legacy_manifests(s3, objects: list[dict], sc) -> list[str]:
    """Every partition of the legacy topics is in the bucket, each of its manifests with leader
    epoch 0 in ``segmentLeaderEpochs``; says so, or names what is missing."""
    manifests = [o["Key"] for o in objects if o["Key"].endswith(layout.MANIFEST_SUFFIX)]
    found: dict[str, list[dict[str, int]]] = {}
    missing = []
    for spec in TOPICS:
        if spec.name not in LEGACY_TOPICS:
            continue
        for partition in range(spec.partitions):
            prefix = layout.partition_prefix(TIER_PREFIX, spec.name, sc.topic_ids[spec.name], partition)
            keys = [k for k in manifests if k.startswith(prefix)]
            if not keys:
                missing.append(f"{spec.name}-{partition}")
            for key in keys:
                manifest = json.loads(s3.get_object(Bucket=DEMO_BUCKET, Key=key)["Body"].read())
                found.setdefault(spec.name, []).append(manifest["remoteLogSegmentMetadata"]["segmentLeaderEpochs"])
    without_zero = [t for t, epochs in found.items() if any("0" not in e for e in epochs)]
    if missing or without_zero:
        console.print(f"[red]legacy partitions not staged: {missing}; manifests without epoch 0: {without_zero}[/red]")
        return ["legacy partitions staged with leader epoch 0"]
    console.print("legacy data staged: " + ", ".join(f"{t} {len(e)} segments" for t, e in found.items())
                  + "; every manifest's segmentLeaderEpochs holds epoch 0", highlight=False)
    return []
