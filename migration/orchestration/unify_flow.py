"""bootstrap.checkpoint -> zero checkpoint unification (KIP-1170) as DAG steps:
preflight (state of every controller) -> unify (Spark, one unit per metadata log dir)
-> verify (decode the new zero checkpoints and compare record digests) -> report."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from migration.audit.model import RunReport
from migration.audit.store import ReportStore
from migration.formats.digest import CURRENT_ALGORITHM, LEGACY_ALGORITHM
from migration.migrations.unify import UnifyOptions, detect_state, finalize_unify, prepare_unify, verify_unified
from migration.orchestration.common import check_spark_connection, dag_params, load_cluster, run_id_for
from migration.runtime.runs import RunDir

STATES_BEFORE = "states-before.json"


class UnifyDagParams(BaseModel):
    """The params of ``zero_checkpoint_unification`` by their names in the trigger form; the
    migration's options are :class:`UnifyOptions` (the DAG's form turns ``dry_run`` on)."""

    cluster: str = ""
    controllers: list[int] = Field(default_factory=list)
    dry_run: bool = True

    def options(self) -> UnifyOptions:
        return UnifyOptions(dry_run=self.dry_run)


def metadata_dirs(raw: dict[str, Any]) -> dict[int, str]:
    """Controller id -> metadata log dir, for the controllers the params select (default all)."""
    params = dag_params(UnifyDagParams, raw)
    desc = load_cluster(params.cluster)
    wanted = set(params.controllers)
    dirs = {}
    for node in desc.controllers:
        if wanted and node.id not in wanted:
            continue
        d = node.metadata_log_dir or (node.log_dirs[0] if node.log_dirs else None)
        if d is None:
            raise ValueError(f"controller {node.id} has no metadata_log_dir in the cluster description")
        dirs[node.id] = d
    missing = wanted - set(dirs)
    if missing:
        raise ValueError(f"controllers {sorted(missing)} are not in the cluster description")
    return dirs


def final_report(dag_run_id: str) -> RunReport:
    """The DAG run's report: the unification's own (one step, one report, which names every
    node; a missing one is refused by the report store with the run id)."""
    return ReportStore().load(unify_run_id(dag_run_id))


def unify_run_id(dag_run_id: str) -> str:
    return run_id_for(dag_run_id, "unify")


def preflight_step(params: dict[str, Any], dag_run_id: str) -> list[dict[str, Any]]:
    """The DAG's first task: check the Spark connection, detect each controller's state (cases
    1-5) and keep it for verification."""
    check_spark_connection(load_cluster(dag_params(UnifyDagParams, params).cluster))
    states = [detect_state(d).model_dump(mode="json") for d in metadata_dirs(params).values()]
    RunDir(unify_run_id(dag_run_id)).write(STATES_BEFORE, states)
    return [{"log_dir": s["log_dir"], "case": s["case"], "description": s["description"],
             "metadata_version": s["metadata_version"], "errors": [e["message"] for e in s["errors"]]}
            for s in states]


def prepare_step(params: dict[str, Any], dag_run_id: str) -> list[str]:
    dirs = list(metadata_dirs(params).values())
    typed = dag_params(UnifyDagParams, params)
    dry_run = typed.dry_run
    plan = prepare_unify(dirs, run_id=unify_run_id(dag_run_id), options=typed.options())
    rd = plan.run_dir
    # the spark-submit driver holds the locks for the whole job (orchestration/spark_app.py)
    rd.write_job(plan.units, plan.options.model_dump(mode="json") | {"lock_log_dirs": [] if dry_run else dirs})
    return ["--job", str(rd.job_path), "--results", str(rd.results_path)]


def finalize_step(dag_run_id: str) -> dict[str, Any]:
    report = finalize_unify(unify_run_id(dag_run_id))
    summary = {"run_id": report.run_id, "exit_code": report.exit_code(), "units": report.totals.units,
               "failed": report.totals.units_failed}
    if report.exit_code() != 0:
        raise RuntimeError(f"unification finished with exit code {report.exit_code()}: {summary}")
    return summary


def verify_step(params: dict[str, Any], dag_run_id: str) -> dict[str, Any]:
    """Decode every unified zero checkpoint and compare its records with what the bootstrap
    file (or the untouched zero checkpoint) held before."""
    if dag_params(UnifyDagParams, params).dry_run:
        return {"verified": False, "reason": "dry run: nothing was changed"}
    states = RunDir(unify_run_id(dag_run_id)).read(STATES_BEFORE)
    problems: dict[str, list[str]] = {}
    for s in states:
        case = s["case"]
        summary = s["bootstrap"] if case in (1, 2) else s["zero_checkpoint"] if case in (3, 4) else None
        if case == 5:
            expected, algorithm = None, CURRENT_ALGORITHM
        elif summary is not None:
            # checked with the hash the state was digested with (a run begun by an older kmigrate: blake2b)
            expected, algorithm = summary["digest"], summary.get("digest_algorithm", LEGACY_ALGORITHM)
        else:
            problems[s["log_dir"]] = [f"state before was an error: {[e['message'] for e in s['errors']]}"]
            continue
        found = verify_unified(s["log_dir"], expected, algorithm=algorithm)
        if found:
            problems[s["log_dir"]] = found
    if problems:
        raise RuntimeError(f"verification failed: {problems}")
    return {"verified": True, "dirs": [s["log_dir"] for s in states]}
