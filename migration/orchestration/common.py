"""Shared steps of the migration DAGs: the cluster description, run ids, the Spark job
arguments and the DAG-run report that merges every broker's report."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from migration.audit.merge import merge_reports as merge_step_reports
from migration.audit.model import RUN_ID_RE, RunKind, RunReport
from migration.audit.store import ReportStore
from migration.orchestration.cluster import ClusterDescription
from migration.runtime.engine import SPARK_SETTINGS
from migration.runtime.runs import RunDir
from migration.settings import ENV_CLUSTER, ENV_PROJECT_ROOT, project_root

if TYPE_CHECKING:
    from migration.runtime.airflow_adapter import ConnectionInfo

RUN_UNITS_APP = str(Path(__file__).resolve().parents[1] / "orchestration" / "spark_app.py")


M = TypeVar("M", bound=BaseModel)


def dag_params(model: type[M], raw: Mapping[str, Any]) -> M:
    """A DAG run's params as the DAG's typed params model: the one way every DAG reads them. A
    param left empty in the trigger form (None or "") takes the model's default, the same
    default the CLI's option has; a wrong value is refused with the param's name."""
    try:
        return model.model_validate({k: v for k, v in raw.items() if v not in (None, "")})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ValueError(f"DAG param {'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def load_cluster(path: str | None) -> ClusterDescription:
    """The cluster description from the DAG param, else ``$KMIGRATE_CLUSTER``."""
    p = path or os.environ.get(ENV_CLUSTER)
    if not p:
        raise ValueError("no cluster description: set the 'cluster' param, the 'kmigrate_cluster' Variable or "
                         "$KMIGRATE_CLUSTER")
    return ClusterDescription.load(p)


def run_id_for(dag_run_id: str, *parts: object) -> str:
    """A report run id from an Airflow run id (which may hold ':' and '+')."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", dag_run_id).strip("-._") or "run"
    rid = "-".join([base, *(str(p) for p in parts)])[:128]
    if not RUN_ID_RE.match(rid):
        raise ValueError(f"cannot build a run id from {dag_run_id!r}")
    return rid


SPARK_CONN_ID = "spark_default"
SPARK_CONN_HOW = ("airflow connections add spark_default --conn-type spark --conn-host 'local[2]' (or your master), "
                  "or AIRFLOW_CONN_SPARK_DEFAULT='{\"conn_type\": \"spark\", \"host\": \"local[2]\"}' "
                  "(docs/operations.md, \"Connections\")")


class SparkConnectionError(ValueError):
    """``spark_default`` is missing, or sends the DAG's Spark jobs to YARN unasked: one line that
    names the connection and how to set it."""


def spark_master(conn: ConnectionInfo | None) -> str:
    """The master the Spark provider's SparkSubmitHook submits to with connection ``conn``
    (its ``_resolve_connection``): ``yarn`` without one."""
    if conn is None:
        return "yarn"
    if conn.conn_type == "spark" and conn.host and ("://" in conn.host or not conn.port):
        master = conn.host
    else:
        master = f"{conn.conn_type}://{conn.host or ''}"
    return f"{master}:{conn.port}" if conn.port else master


def check_spark_connection(desc: ClusterDescription, *, conn_id: str = SPARK_CONN_ID,
                           lookup: Callable[[str], ConnectionInfo | None] | None = None) -> str:
    """The Spark master of the DAG's Spark jobs, checked before anything is submitted: a missing
    ``spark_default`` (the provider falls back to YARN) or one whose master is YARN while the
    cluster description does not say ``spark_on_yarn: true`` raises :class:`SparkConnectionError`."""
    if lookup is None:
        from migration.runtime.airflow_adapter import find_connection

        lookup = find_connection
    conn = lookup(conn_id)
    if conn is None:
        raise SparkConnectionError(f"Airflow connection {conn_id} is missing (the Spark provider would submit to "
                                   f"YARN); set it: {SPARK_CONN_HOW}")
    master = spark_master(conn)
    if master.split("://")[0].split(":")[0] == "yarn" and not desc.spark_on_yarn:
        raise SparkConnectionError(f"Airflow connection {conn_id} submits to YARN (master {master}) but the cluster "
                                   "description does not set spark_on_yarn: true; point it at your Spark master: "
                                   f"airflow connections delete {conn_id}, then {SPARK_CONN_HOW}")
    return master


STEP_FAILURE = "step-failure.json"


class StepFailure(BaseModel):
    """What a step's Spark job left when it failed before its step wrote a report: written by
    the operator (plugins/kmigrate_operators.py) into the step's run directory, read into the
    DAG run's report. The command is masked as the Spark provider masks it; no environment."""

    task_id: str
    command: str | None = None
    exit_code: int | None = None
    master: str | None = None
    log_tail: list[str] = []
    error: str | None = None

    def describe(self, run_id: str) -> str:
        tail = "\n".join(self.log_tail[-10:]) or "(no output)"
        return (f"step {run_id} failed before writing a report: task {self.task_id} ran "
                f"`{self.command or 'spark-submit'}` (Spark master {self.master or 'unknown'}), "
                f"exit code {self.exit_code if self.exit_code is not None else 'unknown'}"
                + (f": {self.error}" if self.error else "") + f"; last lines of its log:\n{tail}")


def job_run_id(application_args: list[str]) -> str | None:
    """The run id of a Spark job's arguments (``--job <home>/runs/<run id>/job.json``)."""
    args = [str(a) for a in application_args or []]
    if "--job" in args[:-1]:
        return Path(args[args.index("--job") + 1]).parent.name
    return None


def record_step_failure(application_args: list[str], failure: StepFailure) -> None:
    run_id = job_run_id(application_args)
    if run_id is not None:
        RunDir(run_id).write(STEP_FAILURE, failure.model_dump(mode="json"))


def step_failure(run_id: str) -> StepFailure | None:
    path = RunDir.path_of(run_id) / STEP_FAILURE
    try:
        return StepFailure.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None


def spark_job_args(run_id: str) -> list[str]:
    rd = RunDir(run_id)
    return ["--job", str(rd.job_path), "--results", str(rd.results_path)]


def spark_conf() -> dict[str, str]:
    """Spark settings for every submitted job: the engine's own (``SPARK_SETTINGS``) and this
    interpreter for the Python workers (it has the project installed)."""
    return {"spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable, **SPARK_SETTINGS}


def spark_env() -> dict[str, str]:
    return {ENV_PROJECT_ROOT: str(project_root()), "PYSPARK_PYTHON": sys.executable,
            **{k: v for k, v in os.environ.items() if k.startswith("KMIGRATE_")}}


def merge_reports(kind: RunKind | str, run_ids: list[str], *, run_id: str, params: dict[str, Any],
                  dag_id: str | None = None, dag_run_id: str | None = None,
                  store: ReportStore | None = None, also_failed: Sequence[str] = ()) -> RunReport:
    """The DAG run's report (``audit.merge.merge_reports``), each step whose Spark job failed
    before its report was written explained by what its operator left (:class:`StepFailure`),
    and so the steps of ``also_failed`` (not merged: a preflight) when theirs failed."""

    def failure(step_run_id: str) -> str | None:
        f = step_failure(step_run_id)
        return f.describe(step_run_id) if f is not None else None

    return merge_step_reports(kind, run_ids, run_id=run_id, params=params, dag_id=dag_id, dag_run_id=dag_run_id,
                              store=store, also_failed=also_failed, failure=failure)


def dag_run_verdict(report: RunReport, what: str) -> dict[str, Any]:
    """The last step of every DAG: the DAG run's report decides its state, so the exit code,
    the report and Airflow's run state say one verdict. Returns the summary the task shows;
    raises (the task, and so the run, fails) when the report is not clean."""
    summary = {"run_id": report.run_id, "exit_code": report.exit_code(), "status": str(report.status)}
    if report.exit_code() != 0:
        raise RuntimeError(f"{what} report is not clean: {summary}")
    return summary
