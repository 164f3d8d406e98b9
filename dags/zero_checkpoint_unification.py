"""bootstrap.checkpoint -> zero checkpoint unification (KIP-1170), with KRaft snapshot
validation (KIP-630): preflight -> unify (Spark) -> verify -> report.
All logic lives in migration.orchestration.unify_flow; this file is wiring."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, Variable, conf, get_current_context, task
from kmigrate_operators import DEFAULT_ARGS, MigrationSparkJobOperator, default_cluster

from migration.orchestration import unify_flow as flow
from migration.orchestration.common import dag_run_verdict
from migration.settings import adopt_home, airflow_home_lookups

# Runs, reports and sessions live in kmigrate's home: KMIGRATE_HOME, else [kmigrate] home of the
# Airflow configuration, else the Variable kmigrate_home (docs/operations.md, "Where state lives").
adopt_home(airflow_home_lookups(conf, Variable))

with DAG(
    dag_id="zero_checkpoint_unification",
    description="Move bootstrap.checkpoint's records into the zero checkpoint of every controller",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args=DEFAULT_ARGS,
    max_active_runs=1,
    tags=["kafka", "migration", "kraft", "kip-1170", "kip-630"],
    params={
        "cluster": Param(default_cluster(), type="string",
                         description="Path of the cluster description (YAML or JSON)"),
        "controllers": Param([], type="array", items={"type": "integer"},
                             description="Controller node ids (empty: every controller)"),
        "dry_run": Param(True, type="boolean", description="Detect and plan only; change nothing"),
    },
) as dag:

    def _params() -> dict:
        return dict(get_current_context()["params"])

    def _run_id() -> str:
        return get_current_context()["dag_run"].run_id

    @task
    def preflight() -> list[dict]:
        return flow.preflight_step(_params(), _run_id())

    @task
    def prepare() -> list[str]:
        return flow.prepare_step(_params(), _run_id())

    @task
    def finalize() -> dict:
        return flow.finalize_step(_run_id())

    @task
    def verify() -> dict:
        return flow.verify_step(_params(), _run_id())

    @task(trigger_rule="all_done")
    def report() -> dict:
        return dag_run_verdict(flow.final_report(_run_id()), "unification")

    args = prepare()
    unify = MigrationSparkJobOperator(task_id="unify", application_args=args)
    preflight() >> args >> unify >> finalize() >> verify() >> report()
