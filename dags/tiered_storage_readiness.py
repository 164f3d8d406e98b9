"""Tiered-storage readiness (KIP-405, KIP-952): segment-aligned producer snapshots, then
staging of closed segments in S3-compatible storage in the tiered-storage plugin's layout.
Scheduled hourly and triggerable; incremental (KIP-227-style sessions): only partitions that
changed, under a budget, fairly rotated; nothing dirty means no Spark job at all.
discover -> snapshots (Spark) -> upload (Spark) -> verify -> finish, per broker (mapped),
then one report. All logic lives in migration.orchestration.tiered_schedule."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, Variable, conf, get_current_context, task, task_group
from airflow.sdk.exceptions import AirflowSkipException
from kmigrate_operators import DEFAULT_ARGS, MigrationSparkJobOperator, default_cluster

from migration.orchestration import tiered_schedule as tier
from migration.orchestration.common import dag_run_verdict
from migration.runtime.airflow_policy import route
from migration.settings import adopt_home, airflow_home_lookups

# Runs, reports and sessions live in kmigrate's home: KMIGRATE_HOME, else [kmigrate] home of the
# Airflow configuration, else the Variable kmigrate_home (docs/operations.md, "Where state lives").
adopt_home(airflow_home_lookups(conf, Variable))

with DAG(
    dag_id="tiered_storage_readiness",
    description="Producer snapshots and S3 staging of closed segments, incrementally",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args=DEFAULT_ARGS,
    max_active_runs=1,
    tags=["kafka", "migration", "tiered-storage", "kip-405", "kip-952"],
    params={
        "cluster": Param(default_cluster(), type="string", description="Path of the cluster description"),
        "bucket": Param("{{ var.value.get('kmigrate_bucket', 'kafka-tiered') }}", type="string"),
        "prefix": Param("", type="string", description="Object key prefix"),
        "brokers": Param([], type="array", items={"type": "integer"},
                         description="Brokers to work on (empty: all)"),
        "aws_conn_id": Param("kmigrate_s3", type="string",
                             description="Airflow aws connection (endpoint in the extra)"),
        "session_name": Param("tiered_storage_readiness", type="string",
                              description="Incremental session (one per name and broker)"),
        "budget_bytes": Param(None, type=["null", "integer"], description="Max segment bytes per broker per run"),
        "budget_segments": Param(None, type=["null", "integer"], description="Max segments per broker per run"),
        "dry_run": Param(False, type="boolean"),
        "snapshots_only": Param(False, type="boolean", description="Write producer snapshots, upload nothing"),
        "assign_leader_epoch": Param(False, type="boolean",
                                     description="Give data written before KIP-101 leader epoch 0 from the log "
                                                 "start offset, so its segments can be tiered"),
    },
) as dag:

    def _params() -> dict:
        return dict(get_current_context()["params"])

    def _run_id() -> str:
        return get_current_context()["dag_run"].run_id

    @task
    def plan() -> dict:
        return tier.plan_step(_params())

    @task
    def brokers(planned: dict) -> list[int]:
        return planned["brokers"]

    # Each broker's tasks run on its host: the cluster policy sends each instance to the queue
    # plan's routes give its broker (migration/runtime/airflow_policy.py).
    @task_group(group_id="broker", default_args={"executor_config": route("all")})
    def per_broker(broker_id: int):
        @task
        def discover(broker_id: int) -> dict:
            return tier.discover(_params(), broker_id, _run_id())

        # Nothing dirty: these skip, and so do the Spark jobs after them (no job is submitted).
        @task
        def snapshot_args(found: dict) -> list[str]:
            if not found["work"]:
                raise AirflowSkipException(f"nothing changed since the last run ({found['clean']} clean)")
            return found["snap_args"]

        @task
        def upload_args(found: dict) -> list[str]:
            if not found["work"]:
                raise AirflowSkipException("nothing to upload")
            return found["args"]

        @task
        def verify(broker_id: int) -> dict:
            return tier.verify(_params(), broker_id, _run_id())

        @task(trigger_rule="all_done")
        def finish(broker_id: int) -> dict:
            return tier.finish(_params(), broker_id, _run_id())

        found = discover(broker_id)
        snapshots = MigrationSparkJobOperator(task_id="snapshots", application_args=snapshot_args(found))
        # only the upload opens the object store (a snapshots-only job uses none)
        upload = MigrationSparkJobOperator(task_id="upload", application_args=upload_args(found),
                                           connections=["{{ params.aws_conn_id }}"])
        snapshots >> upload >> verify(broker_id) >> finish(broker_id)

    @task(task_id="report", trigger_rule="all_done")
    def report() -> dict:
        ctx = get_current_context()
        return dag_run_verdict(tier.final_report(_params(), ctx["dag"].dag_id, _run_id()), "tiered-storage readiness")

    per_broker.expand(broker_id=brokers(plan())) >> report()
