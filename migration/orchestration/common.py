"""Shared steps of the migration DAGs: the cluster description, run ids, the Spark job
arguments and the DAG-run report that merges every broker's report."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from migration.audit.model import RUN_ID_RE, ProgressPoint, RunKind, RunReport, StepRef
from migration.audit.store import ReportNotFound, ReportStore
from migration.orchestration.cluster import ClusterDescription
from migration.runtime.engine import SPARK_SETTINGS
from migration.runtime.runs import RunDir
from migration.settings import project_root

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
    p = path or os.environ.get("KMIGRATE_CLUSTER")
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


def spark_job_args(run_id: str) -> list[str]:
    rd = RunDir(run_id)
    return ["--job", str(rd.job_path), "--results", str(rd.results_path)]


def spark_conf() -> dict[str, str]:
    """Spark settings for every submitted job: the engine's own (``SPARK_SETTINGS``) and this
    interpreter for the Python workers (it has the project installed)."""
    return {"spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable, **SPARK_SETTINGS}


def spark_env() -> dict[str, str]:
    return {"KMIGRATE_PROJECT_ROOT": str(project_root()), "PYSPARK_PYTHON": sys.executable,
            **{k: v for k, v in os.environ.items() if k.startswith("KMIGRATE_")}}


def merge_reports(kind: RunKind | str, run_ids: list[str], *, run_id: str, params: dict[str, Any],
                  dag_id: str | None = None, dag_run_id: str | None = None,
                  store: ReportStore | None = None) -> RunReport:
    """One report for the DAG run: every broker's units, plans, warnings, errors, refusals;
    saved in ``store`` (with its sinks, such as the bucket). It names every step it merged
    (``steps``, a missing one too), so the DAG run's report page links each step's report."""
    store = store or ReportStore()
    merged = RunReport.start(kind, params, run_id=run_id, dag_id=dag_id, dag_run_id=dag_run_id)
    events: list[tuple] = []  # (time, units done, bytes done) increments of every step's timeline
    for rid in run_ids:
        try:
            r = store.load(rid)
        except ReportNotFound:
            merged.error(f"no report for step {rid}: the step failed before writing one, or did not run")
            merged.steps.append(StepRef(run_id=rid))
            continue
        merged.steps.append(StepRef.of(r))
        if r.started_at < merged.started_at:
            merged.started_at = r.started_at
        for pu in r.plan.units:
            merged.plan_unit(pu.broker_id, pu.topic, pu.partition, pu.unit, pu.bytes, pu.unit_type)
        for b in r.brokers:
            for p in b.partitions:
                for u in p.units:
                    if u.digest_before is not None and u.digest_algorithm is None:
                        # a step report of another kmigrate keeps naming its own hash
                        u = u.model_copy(update={"digest_algorithm": r.unit_digest_algorithm(u)})
                    merged.add_unit(b.broker_id, p.topic, p.partition, u, track_progress=False)
        prev_units = prev_bytes = 0
        for pt in r.timeline:
            if pt.units_done != prev_units or pt.bytes_done != prev_bytes:
                events.append((pt.at, pt.units_done - prev_units, pt.bytes_done - prev_bytes))
            prev_units, prev_bytes = pt.units_done, pt.bytes_done
        merged.warnings.extend(r.warnings)
        merged.errors.extend(r.errors)
        if r.refusal:
            merged.refuse(f"{rid}: {r.refusal}" if merged.refusal is None else f"{merged.refusal}; {rid}: {r.refusal}")
        if r.session and merged.session is None:
            merged.session = r.session
        if r.formats and merged.formats.source_magic is None:
            merged.formats = r.formats
    # Progress over the DAG run as the steps made it (canary first, then each broker).
    units_done = bytes_done = 0
    merged.timeline = [ProgressPoint(at=merged.started_at, units_done=0, bytes_done=0)]
    for at, du, db in sorted(events, key=lambda e: e[0]):
        units_done += du
        bytes_done += db
        merged.timeline.append(ProgressPoint(at=max(at, merged.started_at), units_done=max(units_done, 0),
                                             bytes_done=max(bytes_done, 0)))
    merged.finish()
    store.save(merged)
    return merged
