"""The phased message-format upgrade as DAG steps: plan, preflight, one broker (canary or
rolling), verify, roll back, report. Each step is a plain function of the DAG params and
the DAG run id, so a retried Airflow task recomputes the same run ids and files."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from migration.audit.model import ProgressPoint, RunKind, RunReport, UnitStatus, utcnow
from migration.audit.store import ReportNotFound, ReportStore
from migration.formats.fileio import durable_mkdir, durable_unlink
from migration.logdir.model import lock_status
from migration.logdir.validation import validate_paths
from migration.migrations.upgrade.driver import (
    UpgradeOptions,
    close_window,
    finalize_upgrade,
    prepare_upgrade,
    rollback_run,
)
from migration.migrations.upgrade.options import TargetFormat
from migration.migrations.upgrade.plan import load_plan
from migration.migrations.upgrade.preflight import PreflightPrepare, finalize_preflight, prepare_preflight
from migration.migrations.upgrade.prestage import PrestageOptions, prestage_upgrade
from migration.migrations.upgrade.stage import Stage, sweep_deleted
from migration.orchestration.cluster import NodeSpec, WrongHost
from migration.orchestration.common import (
    check_spark_connection,
    dag_params,
    load_cluster,
    merge_reports,
    run_id_for,
    spark_job_args,
)
from migration.runtime.airflow_policy import ROUTES
from migration.runtime.runs import RunDir
from migration.runtime.safety import Refused
from migration.settings import default_stage_root, runs_dir

VERIFY_MARKER = "verify.json"
ROLLBACK_MARKER = "rollback.json"
STOPPED_MARKER = "stopped.json"
STARTED_MARKER = "started.json"
RUNNING_MARKER = "running.json"  # in the window dir: seen holding its log dir locks again, on its host
FAILED_MARKER = "failed.json"  # in the window dir: a step of the broker's window failed, the rollout stops
START_POLL_S = 0.5  # how often a start waits for the broker's lock


class UpgradeDagParams(BaseModel):
    """The params of ``message_format_upgrade`` (dags/message_format_upgrade.py), by their names in
    the trigger form. The migration's own options are :class:`UpgradeOptions`' fields with its
    defaults, except ``dry_run``, which the DAG's form turns on."""

    cluster: str = ""
    target_format: TargetFormat = TargetFormat.V2
    canary_broker: int | None = None
    brokers: list[int] = Field(default_factory=list)
    dry_run: bool = True
    stamp_v0_with_mtime: bool = False
    force: bool = False
    assign_leader_epoch: bool = False
    approval: Literal["human", "auto"] = "human"
    kafka_home: str = Field(default="", description="The Kafka distribution upgraded to (libs/*.jar): its "
                            "kafka-dump-log verifies each broker's rewritten segments; empty: not run")
    prestage: bool = Field(default=False, description="Stage every broker's closed segments while the brokers "
                           "run; each broker's window is then stop, swap, verify, start")
    stop_timeout_s: int = Field(default=3600, ge=1, description="How long a window waits for its broker to stop, "
                                "and for its start command to start it again")
    prestage_io_rate: int = Field(default=0, ge=0, description="Bytes per second each broker's prestage reads "
                                  "plus writes, at most (kmigrate upgrade --prestage --io-rate); 0: no limit")
    prestage_budget: int = Field(default=0, ge=0, description="Bytes of originals each broker's prestage "
                                 "converts at most (--budget); the window converts the rest; 0: no limit")


class BrokerControl(BaseModel):
    """How the DAG stops and starts a broker around its window (cluster description ``stop`` /
    ``start``; empty: the operator does)."""

    stop: list[str] = Field(default_factory=list)
    start: list[str] = Field(default_factory=list)


class RolloutPlan(BaseModel):
    cluster: str
    canary: int
    rest: list[int]
    options: UpgradeOptions = Field(description="The same options model as the CLI's and job.json's")
    log_dirs: dict[int, list[str]] = Field(default_factory=dict)
    kafka_home: str = ""
    prestage: bool = False
    stop_timeout_s: int = 3600
    prestage_io_rate: int = 0
    prestage_budget: int = 0
    control: dict[int, BrokerControl] = Field(default_factory=dict)
    queues: dict[int, str | None] = Field(default_factory=dict, description="Each broker's queue (its host's)")

    @property
    def target(self) -> str:
        return self.options.target

    @property
    def dry_run(self) -> bool:
        return self.options.dry_run


def plan_rollout(raw: dict[str, Any]) -> RolloutPlan:
    """Check the params against the cluster description and fix the broker order."""
    params = dag_params(UpgradeDagParams, raw)
    desc = load_cluster(params.cluster)
    brokers = [b.id for b in desc.brokers]
    wanted = params.brokers or brokers
    unknown = sorted(set(wanted) - set(brokers))
    if unknown:
        raise ValueError(f"brokers {unknown} are not in the cluster description (brokers: {brokers})")
    canary = params.canary_broker if params.canary_broker is not None else wanted[0]
    if canary not in wanted:
        raise ValueError(f"canary broker {canary} is not among the brokers the rollout may touch: {wanted}")
    options = UpgradeOptions(target=params.target_format, dry_run=params.dry_run,
                             stamp_v0_with_mtime=params.stamp_v0_with_mtime, force=params.force,
                             assign_leader_epoch=params.assign_leader_epoch,
                             excluded_topics=desc.exclusions("upgrade"))
    return RolloutPlan(cluster=params.cluster, canary=canary, rest=[b for b in wanted if b != canary],
                       options=options, log_dirs={b.id: list(b.log_dirs) for b in desc.brokers if b.id in wanted},
                       kafka_home=params.kafka_home, prestage=params.prestage and not params.dry_run,
                       stop_timeout_s=params.stop_timeout_s, prestage_io_rate=params.prestage_io_rate,
                       prestage_budget=params.prestage_budget,
                       control={b.id: BrokerControl(stop=b.stop, start=b.start)
                                for b in desc.brokers if b.id in wanted},
                       queues={b.id: b.queue for b in desc.brokers if b.id in wanted})


def plan_step(raw: dict[str, Any]) -> dict[str, Any]:
    """The DAG's first task: the rollout's order, and the Spark master its jobs will go to
    (``spark_default`` checked before anything is submitted)."""
    plan = plan_rollout(raw)
    master = check_spark_connection(load_cluster(plan.cluster))
    order = [plan.canary, *plan.rest]

    def queues(brokers: list[int]) -> list[str | None]:
        return [plan.queues.get(b) for b in brokers]

    # What the cluster policy routes each broker's tasks by (migration/runtime/airflow_policy.py):
    # one queue per map index of the tasks mapped over these lists.
    routes = {"all": queues(order), "canary": queues([plan.canary]), "rest": queues(plan.rest)}
    return {"canary": plan.canary, "rest": plan.rest, "spark_master": master, ROUTES: routes}


def check_broker_host(plan: RolloutPlan, broker_id: int) -> None:
    """Every task of a broker first checks that it runs on that broker's host (its log dirs are
    here, and theirs is its node id): :meth:`NodeSpec.check_on_this_host`."""
    NodeSpec(id=broker_id, log_dirs=plan.log_dirs[broker_id], queue=plan.queues.get(broker_id)).check_on_this_host()


def broker_run_id(dag_run_id: str, broker_id: int) -> str:
    """The run id of DAG run ``dag_run_id``'s upgrade step on broker ``broker_id``:
    ``<run_id_for(dag_run_id)>-upgrade-b<id>``, as :func:`upgrade_step_runs` finds it."""
    return run_id_for(dag_run_id, "upgrade", f"b{broker_id}")


def upgrade_step_runs(dag_run_id: str) -> list[str]:
    """The upgrade step runs (:func:`broker_run_id`) of Airflow DAG run ``dag_run_id`` in this
    home, in the order they were planned (canary first); [] when it is no DAG run id with such
    steps here."""
    try:
        base = run_id_for(dag_run_id)
    except ValueError:
        return []
    step = re.compile(re.escape(base) + r"-upgrade-b\d+")
    runs = runs_dir()
    found = [p for p in runs.iterdir() if p.is_dir() and step.fullmatch(p.name)] if runs.is_dir() else []

    def planned(p: Path) -> tuple[int, str]:
        job = p / "job.json"
        return (job if job.is_file() else p).stat().st_mtime_ns, p.name

    return [p.name for p in sorted(found, key=planned)]


def preflight_run_id(dag_run_id: str, broker_id: int) -> str:
    """The run id of broker ``broker_id``'s preflight in DAG run ``dag_run_id``: each broker's
    is its own, run on its host (its queue)."""
    return run_id_for(dag_run_id, "preflight", f"b{broker_id}")


def prepare_preflight_args(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> list[str]:
    """Inventory the broker's log dirs; returns the arguments of its validation's Spark job."""
    rid = preflight_run_id(dag_run_id, broker_id)
    # The preflight runs from here to its check step: its report starts now, not when it is built.
    prepare_preflight({broker_id: plan.log_dirs[broker_id]}, run_id=rid, started_at=utcnow().isoformat())
    return spark_job_args(rid)


def check_preflight_step(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> dict[str, Any]:
    """Refuse the rollout if the broker is live (unless it is to be staged first); corrupt
    segments are reported and will be left alone by the upgrade (a corrupt segment is never
    rewritten)."""

    rid = preflight_run_id(dag_run_id, broker_id)
    report = finalize_preflight(rid, params=plan.model_dump(mode="json"), save=False, live_ok=plan.prestage)
    _time_preflight(report, RunDir(rid))
    ReportStore().save(report)
    if report.refusal:
        raise Refused(report.refusal)
    problems = [u.path for u in report.iter_results() if u.status is UnitStatus.FAILED]
    return {"broker_id": broker_id, "partitions": report.totals.units, "with_problems": problems}


def _time_preflight(report: RunReport, rd: RunDir) -> None:
    """The preflight report's times: built after the Spark job, it would start when it was built
    (0 s). It starts when the prepare step did, and each partition's validation takes the
    time the engine measured for its unit."""
    prep = rd.read_prepare(PreflightPrepare)
    started = prep.started_at if prep is not None and isinstance(prep.started_at, str) else None
    if started is not None:
        at = datetime.fromisoformat(started)
        if at < report.started_at:
            report.started_at = at
            if report.timeline and report.timeline[0].units_done == 0:
                report.timeline[0] = ProgressPoint(at=at, units_done=0, bytes_done=0)
    units, _ = rd.read_job()
    durations = {r.get("unit_id"): r.get("duration_s") for r in rd.read_results()}
    by_path = {u.path: durations.get(u.id) for u in units}
    for ur in report.iter_results():
        if ur.duration_s is None and ur.path is not None and isinstance(by_path.get(ur.path), int | float):
            ur.duration_s = by_path[ur.path]


def prepare_broker(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> list[str]:
    """Plan one broker's upgrade; returns the arguments of the Spark job to submit. A failure
    fails the broker's window (:func:`rollout_gate` stops the rollout there)."""

    rid = broker_run_id(dag_run_id, broker_id)
    options = plan.options
    stage = broker_stage(plan, broker_id, dag_run_id)
    if plan.prestage and stage.exists():
        options = options.model_copy(update={"stage": stage.stage_id})
    with _window_step(dag_run_id, broker_id, "prepare"):
        prepared = prepare_upgrade(plan.log_dirs[broker_id], run_id=rid, options=options, broker_id=broker_id)
    rd = prepared.run_dir
    if prepared.options is not None:
        # the spark-submit driver holds the locks for the whole job (orchestration/spark_app.py)
        job_options = prepared.options.model_dump(mode="json") | {
            "lock_log_dirs": [] if plan.dry_run else plan.log_dirs[broker_id]}
        rd.write_job(prepared.units, job_options)
    return ["--job", str(rd.job_path), "--results", str(rd.results_path)]


def finalize_broker(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> dict[str, Any]:

    rid = broker_run_id(dag_run_id, broker_id)
    _close_broker_window(rid, window_dir(dag_run_id, broker_id))
    report = finalize_upgrade(rid)
    summary = {"run_id": report.run_id, "exit_code": report.exit_code(), "units": report.totals.units,
               "failed": report.totals.units_failed, "digest_mismatches": report.totals.digest_mismatches}
    if report.exit_code() != 0:
        raise RuntimeError(f"broker {broker_id}: upgrade finished with exit code {report.exit_code()}: {summary}")
    return summary


def _close_broker_window(run_id: str, marks: Path) -> None:
    """With a stage, the step's report gets the broker's window: from its stop (or, when the
    DAG did not stop it, from the step's plan) to the swap's end; the stage is dropped."""
    plan = load_plan(run_id)
    if plan is None or plan.options is None or plan.options.stage is None or plan.options.stage_root is None \
            or plan.prepare.window is not None:
        return
    stopped = marks / STOPPED_MARKER
    began = json.loads(stopped.read_text())["at"] if stopped.exists() else plan.prepare.started_at
    start = datetime.fromisoformat(str(began)) if isinstance(began, str) else utcnow()
    duration = (utcnow() - start).total_seconds()
    plan.prepare.window = close_window(Stage(plan.options.stage_root, plan.options.stage), plan.units,
                                       plan.prepare.log_dirs, plan.run_dir.read_results(), max(duration, 0.0))
    plan.run_dir.write_prepare(plan.prepare)


def verify_broker(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> dict[str, Any]:
    """Validate the upgraded log dirs and check every unit's record digests matched."""
    rd = RunDir(broker_run_id(dag_run_id, broker_id))
    report = ReportStore().load(rd.run_id)
    mismatched = [u.path for u in report.iter_results() if u.digest_mismatch]
    res = validate_paths(plan.log_dirs[broker_id])
    problems = [str(f) for f in res.problems]
    verified_by = None
    if plan.kafka_home:  # the Kafka upgraded to reads every rewritten segment (kmigrate verify --kafka-home)
        from migration.migrations.upgrade.verify_kafka import find_kafka, record_verification, verify_run

        check = verify_run(report, find_kafka(plan.kafka_home))
        record_verification(report, check)
        ReportStore().save(report)
        problems += check.problems
        verified_by = check.kafka if check.ok else None
    rd.write(VERIFY_MARKER, {"ok": not (mismatched or problems), "digest_mismatches": mismatched,
                             "problems": problems[:100], "records_checked": res.records_checked,
                             "verified_by": verified_by})
    if mismatched or problems:
        raise RuntimeError(f"broker {broker_id}: verification failed: digests differ for {mismatched}; "
                           f"validation: {problems[:20]}")
    return {"records_checked": res.records_checked, "bytes_checked": res.bytes_checked, "verified_by": verified_by}


def rollback_broker(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> dict[str, Any]:
    """Restore the broker's originals (a no-op when nothing was changed). It runs because a step
    of the broker's window failed: the window is marked failed first (the rollout stops there,
    :func:`rollout_gate`), and the broker's stage, of no more use, is discarded."""

    rid = broker_run_id(dag_run_id, broker_id)
    mark_window_failed(window_dir(dag_run_id, broker_id), "rollback",
                       f"a step of broker {broker_id}'s window failed, and its rollback ran", keep=True)
    if not (RunDir.path_of(rid) / "job.json").exists():
        from migration.runtime.airflow_adapter import skip_task  # lazy: Airflow only in its tasks

        discarded = discard_stage(plan, broker_id, dag_run_id)
        skip_task(f"nothing to roll back: broker {broker_id}'s upgrade never started (run {rid} planned no job)"
                  + (f"; {discarded}" if discarded else ""))
    report = rollback_run(rid)
    RunDir(rid).write(ROLLBACK_MARKER, {"rollback_run_id": report.run_id, "exit_code": report.exit_code()})
    out: dict[str, Any] = {"run_id": report.run_id, "rolled_back": True, "exit_code": report.exit_code()}
    discarded = discard_stage(plan, broker_id, dag_run_id)
    if discarded:
        out["stage"] = discarded
    if (window_dir(dag_run_id, broker_id) / STOPPED_MARKER).exists():
        out["note"] = (f"broker {broker_id} stays stopped (this DAG run stopped it for its window): start it once "
                       "its originals are checked; the rollout stops here")
        _note_on_prestage(dag_run_id, broker_id, out["note"])
    return out


def rollout_gate(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> tuple[str, str]:
    """("go", "") when every broker before this one is upgraded and verified (and, with a
    prestage, running again: started, and seen holding its log dir locks again on its own host,
    and again here when its log dirs are here too: one broker down at a time); ("stop", why)
    when one failed, was rolled back or its window failed: the rollout stops there; else
    ("wait", why) while one is still in progress. What stops the rollout is looked for first,
    in every earlier broker: a broker whose window failed never comes back to what the waits
    wait for."""
    store = ReportStore()
    order = [plan.canary, *plan.rest]
    earlier = order[: order.index(broker_id)]
    reports: dict[int, RunReport | None] = {}
    for b in earlier:
        try:
            reports[b] = store.load(broker_run_id(dag_run_id, b))
        except ReportNotFound:
            reports[b] = None
    for b in earlier:
        why = _stops_the_rollout(b, dag_run_id, reports[b])
        if why is not None:
            return "stop", why
    for b in earlier:
        why = _keeps_the_rollout_waiting(plan, b, dag_run_id, reports[b] is not None)
        if why is not None:
            return "wait", why
    return "go", ""


def _stops_the_rollout(broker_id: int, dag_run_id: str, report: RunReport | None) -> str | None:
    run = RunDir.path_of(broker_run_id(dag_run_id, broker_id))
    if (run / ROLLBACK_MARKER).exists():
        return f"broker {broker_id} was rolled back"
    failed = window_failure(dag_run_id, broker_id)
    if failed is not None:
        return f"broker {broker_id}'s window failed ({failed.get('step')}): {failed.get('why')}"
    if report is not None and report.exit_code() != 0:
        return f"broker {broker_id} failed (exit code {report.exit_code()})"
    if (run / VERIFY_MARKER).exists() and not json.loads((run / VERIFY_MARKER).read_text()).get("ok"):
        return f"broker {broker_id} failed verification"
    return None


def _keeps_the_rollout_waiting(plan: RolloutPlan, broker_id: int, dag_run_id: str, reported: bool) -> str | None:
    if not reported:
        return f"broker {broker_id} has not finished its upgrade"
    if not (RunDir.path_of(broker_run_id(dag_run_id, broker_id)) / VERIFY_MARKER).exists():
        return f"broker {broker_id} is not verified yet"
    if plan.prestage:
        if not (window_dir(dag_run_id, broker_id) / STARTED_MARKER).exists():
            return f"broker {broker_id} is not started again yet"
        dirs = plan.log_dirs[broker_id]
        if not (window_dir(dag_run_id, broker_id) / RUNNING_MARKER).exists():
            # Seen on the broker's own host (its start step, or the wait after it): a lock is
            # a process's on that host, so the gate, on the next broker's host, cannot look.
            return (f"broker {broker_id} is not running yet: no process held the lock of its log dir(s) "
                    f"{', '.join(dirs)} when its host last looked")
        if _on_this_host(plan, broker_id):  # one host for both: look again, it may have stopped since
            down = unheld_log_dirs(dirs)
            if down:
                return f"broker {broker_id} is not running: no process holds the lock of {', '.join(down)}"
    return None


def _on_this_host(plan: RolloutPlan, broker_id: int) -> bool:
    try:
        check_broker_host(plan, broker_id)
    except WrongHost:
        return False
    return True


# ---------------------------------------------------------------- prestage and windows


def stage_id_for(dag_run_id: str, broker_id: int) -> str:
    """The stage of broker ``broker_id`` in DAG run ``dag_run_id`` (also its prestage report's id)."""
    return run_id_for(dag_run_id, "stage", f"b{broker_id}")


def window_dir(dag_run_id: str, broker_id: int) -> Path:
    """Where a broker's window keeps its marks (stopped, started): a run directory of its own,
    so that the upgrade step's stays the upgrade's alone."""
    return RunDir.path_of(run_id_for(dag_run_id, "window", f"b{broker_id}"))


def mark_window_failed(marks: Path, step: str, why: str, *, keep: bool = False) -> None:
    """Say in the window dir ``marks`` that step ``step`` of the broker's window failed, and why:
    :func:`rollout_gate` stops the rollout there. ``keep``: not over the failure already said."""
    if keep and (marks / FAILED_MARKER).exists():
        return
    RunDir(marks.name, root=marks).write(FAILED_MARKER, {"at": utcnow().isoformat(), "step": step, "why": why})


def take_back_failure(marks: Path, step: str) -> None:
    """A retry of the window's step ``step``: the failure it marked in ``marks`` is taken back."""
    failed = window_failure(marks=marks)
    if failed is not None and failed.get("step") == step:
        durable_unlink(marks / FAILED_MARKER)


def window_failure(dag_run_id: str | None = None, broker_id: int | None = None, *,
                   marks: Path | None = None) -> dict[str, Any] | None:
    """What :func:`mark_window_failed` said about the broker's window, by DAG run and broker or
    by its window dir ``marks`` (None: no step failed)."""
    if marks is None:
        assert dag_run_id is not None and broker_id is not None
        marks = window_dir(dag_run_id, broker_id)
    p = marks / FAILED_MARKER
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        return {"step": "?", "why": f"unreadable {p}"}
    return data if isinstance(data, dict) else {"step": "?", "why": str(data)}


@contextmanager
def _window_step(dag_run_id: str, broker_id: int, step: str) -> Iterator[None]:
    """A step of the broker's window whose failure is the window's (marked before it is raised).
    A retry of the step that failed takes the mark back first."""
    marks = window_dir(dag_run_id, broker_id)
    take_back_failure(marks, step)
    try:
        yield
    except Exception as exc:
        mark_window_failed(marks, step, (str(exc).splitlines() or [type(exc).__name__])[0][:1000])
        raise


def broker_stage(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> Stage:
    """The broker's stage in this DAG run (its prestage's; the window swaps it in)."""
    return Stage(default_stage_root(plan.log_dirs[broker_id]), stage_id_for(dag_run_id, broker_id))


def discard_stage(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> str | None:
    """Remove the broker's stage, if it is there: what was removed and the bytes freed, said
    in one line; None when there was none (never staged, swapped in, discarded already). What
    windows retired under its root goes too (a rollback after a window that swapped it in)."""
    stage = broker_stage(plan, broker_id, dag_run_id)
    if not stage.exists():
        sweep_deleted(stage.root)
        return None
    try:
        freed = stage.discard()
    except FileNotFoundError:
        return None  # discarded meanwhile by another task of the run (a rollback, the report)
    return f"stage {stage.stage_id} of broker {broker_id} discarded ({stage.path}): {freed:,} bytes freed"


def prestage_broker(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> dict[str, Any]:
    """Stage the broker's closed segments beside it while it runs (upgrade/prestage.py). A
    prestage that is refused (no space) or meets a corrupt segment only costs time: the
    window converts whatever is not staged, and its report says what."""
    if not plan.prestage:
        return {"broker_id": broker_id, "prestaged": False,
                "why": "no prestage: the brokers were stopped before the rollout" if not plan.dry_run
                else "dry run"}
    sid = stage_id_for(dag_run_id, broker_id)
    report = prestage_upgrade(plan.log_dirs[broker_id], broker_id=broker_id, options=PrestageOptions(
        upgrade=plan.options, stage_id=sid, io_rate=plan.prestage_io_rate or None,
        budget=plan.prestage_budget or None))
    staged = sum(1 for u in report.iter_results() if u.status is UnitStatus.OK)
    return {"broker_id": broker_id, "prestaged": report.refusal is None, "stage_id": sid, "staged": staged,
            "exit_code": report.exit_code(), "refusal": report.refusal}


def stop_broker(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> dict[str, Any]:
    """Begin the broker's window: a last prestage pass while it runs, then its ``stop`` command,
    or say the operator must stop it (in the task log, and on the broker's prestage report,
    which the DAG run's report page lists). Returns what the wait for the lock needs
    (``window``: where the wait marks the window failed when the broker does not stop)."""
    wait = {"broker_id": broker_id, "log_dirs": plan.log_dirs[broker_id], "timeout_s": plan.stop_timeout_s,
            "managed": plan.prestage, "window": str(window_dir(dag_run_id, broker_id))}
    if not plan.prestage:
        return wait  # the brokers were stopped before the rollout (the preflight refuses a live one)
    with _window_step(dag_run_id, broker_id, "stop"):
        from migration.runtime.airflow_adapter import triggerer_queues_enabled  # lazy: Airflow only in its tasks

        queue = plan.queues.get(broker_id)
        if queue and not triggerer_queues_enabled():
            # the wait after the stop is deferred: on another host's triggerer it would watch a lock
            # it cannot see, and fail the window with the broker stopped
            raise Refused(f"broker {broker_id} has queue {queue!r}, but [triggerer] queues_enabled is off: the "
                          "window's waits would run on any triggerer, not on its host's (docs/operations.md, "
                          "\"One worker per broker host\"); nothing was stopped")
        # A new window of this DAG run (its tasks cleared and run again): what said the broker
        # was started and running again is of the last one, and the next broker's gate reads it.
        marks = window_dir(dag_run_id, broker_id)
        for mark in (STARTED_MARKER, RUNNING_MARKER):
            if (marks / mark).exists():
                durable_unlink(marks / mark)
        # A last pass while the broker still runs (hours may have gone by since the prestage: the
        # canary, the approval, the brokers before it): what it wrote since, new closed segments
        # and its active segments' new bytes, is staged now instead of converted in the window;
        # what is staged and unchanged is kept without a read.
        last = prestage_broker(plan, broker_id, dag_run_id)
        staged = (f"a last prestage pass staged {last['staged']} more closed segment(s) and the active segments' "
                  "new bytes; ") if last["prestaged"] else f"a last prestage pass was refused ({last['refusal']}); "
        cmd = plan.control[broker_id].stop if broker_id in plan.control else []
        if cmd:
            _run_control(broker_id, "stop", cmd, plan.stop_timeout_s)
            note = (f"broker {broker_id}: {staged}stopped with {shlex.join(cmd)}; waiting for its log dir lock to be "
                    "released")
        else:
            note = (f"broker {broker_id}: {staged}waiting for the operator to stop it (the cluster description gives "
                    f"no stop command); the window begins when its log dir lock is released, at most "
                    f"{plan.stop_timeout_s} s (stop_timeout_s) from now")
            _note_on_prestage(dag_run_id, broker_id, note)
        durable_mkdir(window_dir(dag_run_id, broker_id))
        RunDir(window_dir(dag_run_id, broker_id).name).write(STOPPED_MARKER,
                                                             {"at": utcnow().isoformat(), "command": cmd})
    return wait | {"note": note}


def _run_control(broker_id: int, what: str, cmd: list[str], timeout_s: int) -> None:
    """A broker's stop or start command from the cluster description; its failure fails the task
    with the command, its exit code and its last words."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"broker {broker_id}: {what} command {shlex.join(cmd)} exited {done.returncode}: "
                           + (done.stderr or done.stdout).strip()[-500:])


def live_log_dirs(log_dirs: list[str]) -> list[str]:
    """The log dirs whose lock a live process holds (a broker, or another run)."""
    return [d for d in log_dirs if lock_status(d).live]


def unheld_log_dirs(log_dirs: list[str], live: list[str] | None = None) -> list[str]:
    """Those of ``log_dirs`` whose lock no process holds (``live``: what
    :func:`live_log_dirs` said, else it is asked)."""
    return sorted(set(log_dirs) - set(live_log_dirs(log_dirs) if live is None else live))


def locks_as_wanted(log_dirs: list[str], live: list[str], *, held: bool) -> bool:
    """Every lock of the broker held (``held``: it runs), or none (it stopped)."""
    return not unheld_log_dirs(log_dirs, live) if held else not live


def start_broker(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> dict[str, Any]:
    """End the broker's window once it is verified: run its ``start`` command and wait until
    the broker holds its log dirs' locks again (at most ``stop_timeout_s``), or say the
    operator starts it now (the DAG's ``wait_started`` then waits, deferred, for the locks, on
    the broker's host: :func:`confirm_running`; :func:`rollout_gate` waits for it). Returns what
    that wait needs, as :func:`stop_broker` does. Only a broker this
    DAG run stopped (a rolled-back one stays stopped, for the operator: :func:`rollback_broker`
    says so). A failure fails the window: the rollout stops there."""
    wd = window_dir(dag_run_id, broker_id)
    if not plan.prestage or not (wd / STOPPED_MARKER).exists():
        return {"broker_id": broker_id, "started": False, "why": "not stopped by this DAG run"}
    wait = {"broker_id": broker_id, "log_dirs": plan.log_dirs[broker_id], "timeout_s": plan.stop_timeout_s,
            "managed": True, "window": str(wd)}
    with _window_step(dag_run_id, broker_id, "start"):
        cmd = plan.control[broker_id].start if broker_id in plan.control else []
        if cmd:
            deadline = time.monotonic() + plan.stop_timeout_s
            _run_control(broker_id, "start", cmd, plan.stop_timeout_s)
            _wait_running(broker_id, plan.log_dirs[broker_id], deadline, plan.stop_timeout_s)
            note = f"broker {broker_id}: started with {shlex.join(cmd)}; it holds its log dir lock again"
        else:
            note = (f"broker {broker_id}: its window is over: start it now (the cluster description gives no start "
                    "command); the next broker's window waits until it holds its log dir lock again")
            _note_on_prestage(dag_run_id, broker_id, note)
        RunDir(wd.name).write(STARTED_MARKER, {"at": utcnow().isoformat(), "command": cmd})
        if cmd:
            confirm_running(wd, plan.log_dirs[broker_id])
    # what the window left of the broker's stage, once the broker runs (upgrade/stage.py); the
    # broker runs by now: housekeeping that fails is said, it does not fail the window
    root = broker_stage(plan, broker_id, dag_run_id).root
    try:
        sweep_deleted(root)
    except OSError as exc:
        note += (f"; what its stop window retired under {root} is not removed yet ({exc.strerror}: {exc.filename}): "
                 "the next prestage or --discard-stage removes it")
    return wait | {"started": bool(cmd), "note": note}


def confirm_running(marks: Path, log_dirs: list[str]) -> list[str]:
    """On the broker's host: the log dirs whose lock no process holds; none: the broker runs
    again, and the window dir ``marks`` says so (what :func:`rollout_gate` waits for)."""
    down = unheld_log_dirs(log_dirs)
    if not down:
        RunDir(marks.name, root=marks).write(RUNNING_MARKER, {"at": utcnow().isoformat(), "log_dirs": log_dirs})
    return down


def _wait_running(broker_id: int, log_dirs: list[str], deadline: float, timeout_s: int) -> None:
    """Until a process holds the lock of every one of ``log_dirs`` (a broker holds them while
    it runs), or fail naming ``stop_timeout_s`` at ``deadline`` (time.monotonic())."""
    while True:
        down = unheld_log_dirs(log_dirs)
        if not down:
            return
        if time.monotonic() >= deadline:
            raise RuntimeError(f"broker {broker_id} did not start within stop_timeout_s={timeout_s} s: its start "
                               f"command returned, but no process holds the lock of {', '.join(down)}")
        time.sleep(START_POLL_S)


def _note_on_prestage(dag_run_id: str, broker_id: int, note: str) -> None:
    store = ReportStore()
    try:
        report = store.load(stage_id_for(dag_run_id, broker_id))
    except ReportNotFound:
        return
    report.warn(note)
    store.save(report)


def discard_unused_stage(plan: RolloutPlan, broker_id: int, dag_run_id: str) -> str | None:
    """After the rollout, on the broker's host: its stage, when its window never began (the
    rollout stopped before it), is discarded; what was freed, said in one line. (A window's own
    end, or its rollback, removes the stage of a broker whose window ran.)"""
    if not plan.prestage or _window_began(broker_id, dag_run_id):
        return None
    discarded = discard_stage(plan, broker_id, dag_run_id)
    return f"{discarded}: its window never ran (the rollout stopped before it)" if discarded else None


def final_report(plan: RolloutPlan, dag_id: str, dag_run_id: str, discarded: list[str | None] | None = None,
                 ) -> RunReport:
    """Every broker of the rollout must have a report; a missing one (failed before finishing,
    or never reached because the rollout stopped) is an error of the DAG run. ``discarded``:
    what :func:`discard_unused_stage` said, each a warning (a stage is about as large as the
    broker's legacy data)."""
    brokers = [plan.canary, *plan.rest]
    steps = [broker_run_id(dag_run_id, b) for b in brokers]
    report = merge_reports(RunKind.UPGRADE, steps, run_id=run_id_for(dag_run_id),
                           params=plan.model_dump(mode="json"), dag_id=dag_id, dag_run_id=dag_run_id,
                           also_failed=[preflight_run_id(dag_run_id, b) for b in brokers])
    said = [d for d in discarded or [] if d]
    if said:
        for d in said:
            report.warn(d)
        ReportStore().save(report)
    return report


def _window_began(broker_id: int, dag_run_id: str) -> bool:
    """The broker's window stopped it, or its upgrade was planned."""
    return (window_dir(dag_run_id, broker_id) / STOPPED_MARKER).exists() \
        or (RunDir.path_of(broker_run_id(dag_run_id, broker_id)) / "job.json").exists()
