"""Phased message-format upgrade (KIP-31/32 to v1, or to v2 for Kafka 4 per KIP-724).

preflight (inventory + validation, each broker at once, Spark) -> prestage (every broker at once,
while it runs; with prestage) -> canary (one broker: stop, swap or rewrite with Spark, verify,
start) -> approval gate -> rolling (one broker at a time, the same window) -> report.
A failure in canary or verify rolls that broker back and stops the rollout. Every task that
reads or writes a broker's log dirs is mapped over brokers, and the cluster policy sends each
instance to its broker's queue (the cluster description's ``queue``; docs/operations.md).
All logic lives in migration.orchestration.upgrade_rollout; this file is wiring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pendulum
from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import DAG, Param, Variable, conf, get_current_context, task, task_group
from airflow.sdk.exceptions import AirflowRescheduleException, AirflowSkipException
from kmigrate_operators import DEFAULT_ARGS, BrokerLockSensor, MigrationSparkJobOperator, default_cluster

from migration.migrations.upgrade.options import TargetFormat
from migration.orchestration import upgrade_rollout as rollout
from migration.orchestration.common import dag_run_verdict
from migration.runtime.airflow_policy import route
from migration.settings import adopt_home, airflow_home_lookups

# Runs, reports and sessions live in kmigrate's home: KMIGRATE_HOME, else [kmigrate] home of the
# Airflow configuration, else the Variable kmigrate_home (docs/operations.md, "Where state lives").
adopt_home(airflow_home_lookups(conf, Variable))

with DAG(
    dag_id="message_format_upgrade",
    description="Rewrite v0/v1 segments as v1 or v2, canary first, with rollback",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args=DEFAULT_ARGS,
    max_active_runs=1,
    tags=["kafka", "migration", "kip-32", "kip-724"],
    params={
        "cluster": Param(default_cluster(), type="string",
                         description="Path of the cluster description (YAML or JSON)"),
        "target_format": Param(TargetFormat.V2.value, enum=[t.value for t in TargetFormat],
                               description="v1 (KIP-32) or v2 (Kafka 4)"),
        "canary_broker": Param(1, type="integer", description="Broker upgraded first, alone"),
        "brokers": Param([], type="array", items={"type": "integer"},
                         description="Brokers the rollout may touch (empty: all)"),
        "dry_run": Param(True, type="boolean", description="Plan and report only; change nothing"),
        "stamp_v0_with_mtime": Param(False, type="boolean",
                                     description="Stamp v0 messages with the segment mtime as LogAppendTime"),
        "assign_leader_epoch": Param(False, type="boolean",
                                     description="With v2: give data written before KIP-101 leader epoch 0 from the "
                                                 "log start offset, so tiered storage can take it"),
        "kafka_home": Param("", type="string",
                            description="The Kafka distribution upgraded to (a directory with libs/*.jar): its "
                                        "kafka-dump-log --deep-iteration verifies every rewritten segment before "
                                        "approval; empty: not run"),
        "approval": Param("human", enum=["human", "auto"],
                          description="'human': wait for an operator after the canary; 'auto' for tests/demos"),
        "prestage": Param(False, type="boolean",
                          description="Brokers RUNNING: convert their closed segments first, beside them; each "
                                      "broker's window then stops it (its 'stop' command in the cluster description, "
                                      "else the operator), swaps the staged segments in, verifies and starts it"),
        "stop_timeout_s": Param(3600, type="integer", minimum=1,
                                description="How long a window waits for its broker to stop, and to start again"),
        "prestage_io_rate": Param(0, type="integer", minimum=0,
                                  description="Bytes/s each broker's prestage reads plus writes at most; 0: no limit"),
        "prestage_budget": Param(0, type="integer", minimum=0, description="Bytes of legacy segments each broker's "
                                 "prestage converts at most (the window converts the rest); 0: no limit"),
    },
) as dag:

    def _plan() -> rollout.RolloutPlan:
        return rollout.plan_rollout(dict(get_current_context()["params"]))

    def _run_id() -> str:
        return get_current_context()["dag_run"].run_id

    def _broker_step(task_id: str, step: Callable[[rollout.RolloutPlan, int, str], Any], **kwargs: Any) -> Any:
        """A task running ``step`` for the broker of its map index, on that broker's host."""
        @task(task_id=task_id, **kwargs)
        def on_broker(broker_id: int) -> Any:
            p = _plan()
            rollout.check_broker_host(p, broker_id)
            return step(p, broker_id, _run_id())
        return on_broker

    # A group whose tasks run on each broker's host: the cluster policy sends each instance to
    # its broker's queue (plan's routes[key]; migration/runtime/airflow_policy.py).
    @task
    def plan() -> dict:
        return rollout.plan_step(dict(get_current_context()["params"]))

    @task
    def all_brokers(planned: dict) -> list[int]:
        return [planned["canary"], *planned["rest"]]

    @task
    def canary_broker(planned: dict) -> list[int]:
        return [planned["canary"]]

    @task_group(group_id="preflight", default_args={"executor_config": route("all")})
    def preflight(broker_id: int):
        args = _broker_step("prepare", rollout.prepare_preflight_args)(broker_id)
        validate = MigrationSparkJobOperator(task_id="validate", application_args=args)
        args >> validate >> _broker_step("check", rollout.check_preflight_step)(broker_id)

    prestage = _broker_step("prestage", rollout.prestage_broker, executor_config=route("all"))

    def window(broker_id: Any, first: Any = None) -> None:
        """One broker's window: stop, wait, prepare, upgrade (Spark), finalize, verify, start, wait; a
        failure rolls the broker back. A verified broker starts again; one rolled back stays
        stopped for the operator (the rollout stops there), and no task waits on the rollback."""
        one = {"max_active_tis_per_dagrun": 1}
        stopped = _broker_step("stop", rollout.stop_broker, **one)(broker_id)
        args = _broker_step("prepare", rollout.prepare_broker, **one)(broker_id)
        if first is not None:
            first >> stopped
        stopped >> BrokerLockSensor(task_id="wait_stopped", window=stopped, **one) >> args
        upgrade = MigrationSparkJobOperator(task_id="upgrade", application_args=args, **one)
        fin = _broker_step("finalize", rollout.finalize_broker, **one)(broker_id)
        ver = _broker_step("verify", rollout.verify_broker, **one)(broker_id)
        args >> upgrade >> fin >> ver
        [upgrade, fin, ver] >> _broker_step("rollback", rollout.rollback_broker, trigger_rule="one_failed")(broker_id)
        started = _broker_step("start", rollout.start_broker, **one)(broker_id)
        ver >> started >> BrokerLockSensor(task_id="wait_started", window=started, until="running", **one)

    @task_group(group_id="canary", default_args={"executor_config": route("canary")})
    def canary(broker_id: int):
        window(broker_id)

    # The canary's group ends in its start and its rollback: the approval follows a started
    # canary (the rollback skipped), never a rolled back one.
    @task.branch(task_id="approval_mode", trigger_rule="none_failed_min_one_success")
    def approval_mode() -> str:
        return "approve_human" if get_current_context()["params"]["approval"] == "human" else "approve_auto"

    approve_human = ApprovalOperator(
        task_id="approve_human",
        subject="Canary upgraded and verified: continue the rollout?",
        body="The canary broker's run report is on the 'Migration report' tab of this run.",
    )

    @task(task_id="approve_auto")
    def approve_auto() -> str:
        return "approved automatically (approval=auto)"

    @task(task_id="rest_brokers", trigger_rule="none_failed_min_one_success")
    def rest_brokers(planned: dict) -> list[int]:
        return planned["rest"]

    @task_group(group_id="rolling", default_args={"executor_config": route("rest")})
    def rolling(broker_id: int):
        @task(max_active_tis_per_dagrun=1)
        def gate(broker_id: int) -> str:
            decision, why = rollout.rollout_gate(_plan(), broker_id, _run_id())
            if decision == "wait":
                raise AirflowRescheduleException(pendulum.now("UTC").add(seconds=15))
            if decision == "stop":
                raise AirflowSkipException(f"rollout stopped: {why}")
            return "go"

        window(broker_id, gate(broker_id))

    # A stage is about as large as its broker's legacy data: the stages of the brokers whose
    # window never ran (the rollout stopped before them) are removed, each on its broker's host.
    discard_unused_stage = _broker_step("discard_unused_stage", rollout.discard_unused_stage, trigger_rule="all_done",
                                        executor_config=route("all"))

    @task(task_id="report", trigger_rule="all_done")
    def report(discarded: list[str | None]) -> dict:
        ctx = get_current_context()
        return dag_run_verdict(rollout.final_report(_plan(), ctx["dag"].dag_id, _run_id(), list(discarded)),
                               "upgrade")

    planned = plan()
    everyone = all_brokers(planned)
    pre = preflight.expand(broker_id=everyone)
    staged = prestage.expand(broker_id=everyone)
    can = canary.expand(broker_id=canary_broker(planned))
    gate = approval_mode()
    rest = rest_brokers(planned)
    roll = rolling.expand(broker_id=rest)
    pre >> staged >> can >> gate >> [approve_human, approve_auto()] >> rest
    discarded = discard_unused_stage.expand(broker_id=everyone)
    [staged, can, roll] >> discarded  # after every prestage and window: none still writes a stage
    report(discarded)
