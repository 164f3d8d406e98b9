"""Tiered-storage readiness as scheduled DAG steps, per broker:
discover (incremental session: only dirty partitions, under the budget) -> producer
snapshots (Spark) -> upload (Spark) -> verify (read the manifests back) -> finish (report,
session commit). Nothing dirty: no Spark job, a report that says so."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from migration.audit.model import FindingCode, RunKind, RunReport
from migration.audit.store import ReportStore
from migration.formats import names
from migration.migrations.tier import layout
from migration.migrations.tier.driver import check_store, finalize_tier, record_store_error
from migration.migrations.tier.options import TierOptions, describe_invalid_options, open_store
from migration.migrations.tier.plan import PartitionParams, TierPrepare, prepare_tier
from migration.migrations.tier.s3 import S3ReportSink, s3_settings_from_airflow_connection
from migration.migrations.tier.store import StoreArgumentError, StoreUnavailable
from migration.orchestration.cluster import ClusterDescription
from migration.orchestration.common import (
    check_spark_connection,
    dag_params,
    load_cluster,
    merge_reports,
    run_id_for,
)
from migration.orchestration.incremental import begin_incremental, finish_incremental, load_plan, session_info
from migration.runtime.airflow_policy import ROUTES
from migration.runtime.runs import RunDir

SNAPSHOTS_JOB = "job-snapshots.json"


class TierParams(BaseModel):
    cluster: str = ""
    brokers: list[int] = []
    bucket: str
    prefix: str = ""
    aws_conn_id: str = "kmigrate_s3"
    session_name: str = "tiered_storage_readiness"
    budget_bytes: int | None = None
    budget_segments: int | None = None
    dry_run: bool = False
    snapshots_only: bool = False
    assign_leader_epoch: bool = False


def params_of(raw: dict[str, Any]) -> TierParams:
    return dag_params(TierParams, raw)


def plan_step(raw: dict[str, Any]) -> dict[str, Any]:
    """The DAG's first task: the Spark connection checked, then the brokers to work on and the
    queue of each one's host, which the cluster policy routes the broker's tasks by
    (migration/runtime/airflow_policy.py)."""
    desc = load_cluster(raw.get("cluster"))
    check_spark_connection(desc)
    wanted = _wanted_brokers(raw, desc)
    return {"brokers": wanted, ROUTES: {"all": [desc.node(b).queue for b in wanted]}}


def brokers(raw: dict[str, Any]) -> list[int]:
    """The brokers the DAG run works on (also what the final report merges: no Airflow lookup)."""
    return _wanted_brokers(raw, load_cluster(raw.get("cluster")))


def _wanted_brokers(raw: dict[str, Any], desc: ClusterDescription) -> list[int]:
    known = [b.id for b in desc.brokers]
    wanted = [int(b) for b in raw.get("brokers") or known]
    unknown = sorted(set(wanted) - set(known))
    if unknown:
        raise ValueError(f"brokers {unknown} are not in the cluster description (brokers: {known})")
    return wanted


def broker_run_id(dag_run_id: str, broker_id: int) -> str:
    return run_id_for(dag_run_id, "tier", f"b{broker_id}")


def _options(p: TierParams, raw_cluster: str | None, *, snapshots_only: bool):

    desc = load_cluster(raw_cluster)
    s3 = s3_settings_from_airflow_connection(p.aws_conn_id)
    return TierOptions(
        bucket=p.bucket, prefix=p.prefix, endpoint_url=s3.endpoint_url, region=s3.region, path_style=s3.path_style,
        aws_conn_id=p.aws_conn_id, snapshots_only=snapshots_only, dry_run=p.dry_run,
        assign_leader_epoch=p.assign_leader_epoch,
        metadata_log_dirs=[n.metadata_log_dir for n in desc.controllers if n.metadata_log_dir],
        compacted_topics=[t for t in desc.topic_configs if desc.is_compacted(t)] + list(desc.compacted_topics),
        excluded_topics=desc.exclusions("tier"),
    )


def discover(raw: dict[str, Any], broker_id: int, dag_run_id: str) -> dict[str, Any]:
    """Plan this broker's run; returns whether Spark has work and the job arguments.

    The store is checked first (names, credentials, a write probe: ``check_store``), before the
    session is leased or anything planned: a store that cannot be used fails this task with one
    line, and ``finish`` reports it as the run's error."""

    p = params_of(raw)
    desc = load_cluster(raw.get("cluster"))
    desc.node(broker_id).check_on_this_host()  # its tasks run on its host: its log dirs are here
    log_dirs = list(desc.node(broker_id).log_dirs)
    rid = broker_run_id(dag_run_id, broker_id)
    try:
        options = _options(p, raw.get("cluster"), snapshots_only=False)
        check_store(options, run_id=rid)
    except (ValidationError, StoreArgumentError, StoreUnavailable) as exc:
        msg = describe_invalid_options(exc) if isinstance(exc, ValidationError) else str(exc)
        record_store_error(rid, msg, {"bucket": p.bucket, "prefix": p.prefix, "aws_conn_id": p.aws_conn_id,
                                      "dry_run": p.dry_run, "snapshots_only": p.snapshots_only})
        raise RuntimeError(f"broker {broker_id}: {msg}") from None
    plan = begin_incremental(p.session_name, broker_id, log_dirs, rid, budget_bytes=p.budget_bytes,
                             budget_segments=p.budget_segments)
    selected = [f"{s.topic}-{s.partition}" for s in plan.selected]
    if not selected:
        RunDir(rid).write_prepare(TierPrepare(run_id=rid, nothing_dirty=True, clean=len(plan.clean)))
        return {"run_id": rid, "work": False, "selected": 0, "clean": len(plan.clean), "args": [], "snap_args": []}
    prepared = prepare_tier(log_dirs, run_id=rid, options=options, broker_id=broker_id, only_partitions=selected)
    rd, units = prepared.run_dir, prepared.units
    job_options = prepared.options.model_dump(mode="json") | {
        "lock_log_dirs": []}  # staging reads segments and only adds snapshot files (and the epoch checkpoint)
    rd.write_job(units, job_options)
    snap_options = {**job_options, "snapshots_only": True}
    rd.write(SNAPSHOTS_JOB, {"run_id": rid, "units": [u.model_dump(mode="json") for u in units],
                             "options": snap_options})
    work = bool(units)
    return {"run_id": rid, "work": work, "selected": len(selected), "deferred": len(plan.deferred),
            "clean": len(plan.clean), "full_rescan": plan.full_rescan,
            "snap_args": ["--job", str(rd.path / SNAPSHOTS_JOB), "--results", str(rd.path / "results-snapshots.json")],
            "args": ["--job", str(rd.job_path), "--results", str(rd.results_path)]}


def verify(raw: dict[str, Any], broker_id: int, dag_run_id: str) -> dict[str, Any]:
    """Independent check of the upload: list each partition's prefix and require, for every
    closed segment, its .log, .indexes and .rsm-manifest, the .log as large as the segment.
    Objects are read through the store the job names (the object-store interface), keys made by
    the layout module only."""

    p = params_of(raw)
    rd = RunDir(broker_run_id(dag_run_id, broker_id))
    if not rd.job_path.exists() or p.dry_run or p.snapshots_only:
        return {"verified": 0}
    units, job_options = rd.read_job()
    staged = {(r.get("topic"), r.get("partition"), s["unit"]) for r in rd.read_results()
              for s in r.get("segment_results", []) if s["status"] == "ok" and s["unit"].endswith(".log")}
    store = open_store(TierOptions.model_validate(job_options))
    problems: list[str] = []
    verified = 0
    for u in units:
        assert u.topic is not None and u.partition is not None
        params = PartitionParams.model_validate(u.params)
        prefix = layout.partition_prefix(p.prefix, u.topic, params.topic_id, u.partition)
        sizes = {o.key[len(prefix):]: o.size for o in store.list_objects(prefix)}
        for seg in params.segments[:-1]:  # the active segment is never staged
            base = seg["base_offset"]
            if (u.topic, u.partition, names.log_file_name(base)) not in staged:
                continue  # reported as not staged, with its reason
            complete = layout.complete_stems(sizes, base)
            if len(complete) != 1:
                problems.append(f"{prefix}{layout.segment_stem_start(base)}*: {len(complete)} complete object sets")
            elif (size := sizes[log_key := next(iter(complete.values()))]) != seg["size"]:
                problems.append(f"{prefix}{log_key}: {size} bytes, segment has {seg['size']}")
            else:
                verified += 1
    if problems:
        raise RuntimeError(f"broker {broker_id}: upload verification failed: {problems[:10]}")
    return {"verified": verified}


def finish(raw: dict[str, Any], broker_id: int, dag_run_id: str) -> dict[str, Any]:
    """Write this broker's report (also for a run with nothing dirty) and commit the session."""
    rid = broker_run_id(dag_run_id, broker_id)
    rd = RunDir(rid)
    plan = load_plan(rid)
    prep = rd.read_prepare(TierPrepare) or TierPrepare(run_id=rid)
    if prep.nothing_dirty:
        report = RunReport.start(RunKind.TIER_PREPARE, params_of(raw).model_dump(mode="json"), run_id=rid)
        report.warn(f"broker {broker_id}: nothing changed since the last run ({prep.clean} partitions "
                    "clean): no Spark job submitted")
    elif rd.job_path.exists() or prep.store_error:
        report = finalize_tier(rid)
    else:
        report = None
    if report is not None:
        report.broker(broker_id)  # named even when nothing was dirty: the step covers this broker
        if plan is not None:
            report.session = session_info(plan)
            if plan.deferred:
                budget = ", ".join(f"{k} {v}" for k, v in (("budget_bytes", params_of(raw).budget_bytes),
                                                           ("budget_segments", params_of(raw).budget_segments)) if v)
                report.warn(f"broker {broker_id}: {len(plan.deferred)} changed partition(s) outside this run's budget "
                            f"({budget or 'none set'}): left for the next runs, in turn",
                            code=FindingCode.OUTSIDE_BUDGET)
        report.finish()
        ReportStore().save(report)
    committed = finish_incremental(rid, report)
    return {"run_id": rid, "exit_code": None if report is None else report.exit_code(), "session": committed}


def final_report(raw: dict[str, Any], dag_id: str, dag_run_id: str) -> RunReport:
    # Every broker must have left a report: a missing one is an error in the merged report.
    p = params_of(raw)
    steps = [broker_run_id(dag_run_id, b) for b in brokers(raw)]
    # The bucket is configured: the report also goes beside the data it accounts for.
    sinks = [] if p.dry_run else [S3ReportSink(s3_settings_from_airflow_connection(p.aws_conn_id), p.bucket,
                                               p.prefix)]
    return merge_reports(RunKind.TIER_PREPARE, steps, run_id=run_id_for(dag_run_id),
                         params=p.model_dump(mode="json"), dag_id=dag_id, dag_run_id=dag_run_id,
                         store=ReportStore(sinks=sinks))
