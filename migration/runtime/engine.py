"""Units of work and the engines that run them.

A migration's driver inventories log dirs and builds a list of small :class:`Unit` documents
(paths, sizes, mtimes, parameters: metadata only). An engine runs the migration's unit
function over them and returns small result documents:
- ``inline``: in this process, one unit after the other (tests, small jobs, dry runs);
- ``spark``: a Spark job on a local master (log dirs are local disks) or a cluster master,
  one task per unit, except that units sharing a ``serial_key`` run one after the other, in
  list order, inside one task. Migrations that replace files in a partition directory key
  their units by it: Kafka's loader resolves leftovers of the replace protocol per
  directory, so at most one replacement may be in flight in a directory at any instant (see
  docs/architecture.md, "One replace in flight per partition"). Speculation stays off; a
  retried task re-runs its units, so every unit function is idempotent.
Unit functions never raise: an exception becomes a failed result naming the unit, so one
bad segment does not stop the others.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from migration.runtime.faults import unit_scope
from migration.settings import apply_state_env, state_env

log = logging.getLogger(__name__)

# What runs one unit: (unit, job options) -> result document.
UnitFunction = Callable[["Unit", dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class UnitKind:
    """A kind of unit, as its migration registers it: the name units carry, the typed model of
    their ``params`` (checked before the unit runs: a unit whose parameters do not fit fails
    with that message, and nothing of it runs) and the function that runs one. Under Spark the
    kinds travel to the executors by reference (module and name), so an executor imports the
    migration's own module: the engine never looks a function up by a string."""

    name: str
    params: type[BaseModel]
    run: UnitFunction


class NoParams(BaseModel):
    """The parameters of a kind whose units need none besides their path."""

    model_config = ConfigDict(extra="forbid")


# A job's registry: kind name -> kind. ``unit_kinds(*kinds)`` builds one.
UnitKinds = Mapping[str, UnitKind]


def unit_kinds(*kinds: UnitKind) -> dict[str, UnitKind]:
    names = [k.name for k in kinds]
    if len(names) != len(set(names)):
        raise ValueError(f"unit kinds registered twice: {sorted(n for n in names if names.count(n) > 1)}")
    return {k.name: k for k in kinds}


class Unit(BaseModel):
    kind: str
    id: str = Field(description="Stable id: the same unit in a re-run has the same id")
    broker_id: int = -1
    log_dir: str
    path: str
    topic: str | None = None
    partition: int | None = None
    size: int = 0
    serial_key: str | None = Field(default=None, description="Units with the same key run one after "
                                   "the other, in list order, in one task (e.g. a partition directory)")
    params: dict[str, Any] = Field(default_factory=dict)


def serial_groups(units: list[Unit]) -> list[list[int]]:
    """Indexes of ``units`` grouped for execution: one group per ``serial_key`` (in list
    order, at the place of its first unit), every unit without a key alone."""
    groups: list[list[int]] = []
    by_key: dict[str, list[int]] = {}
    for i, u in enumerate(units):
        if u.serial_key is None:
            groups.append([i])
        elif u.serial_key in by_key:
            by_key[u.serial_key].append(i)
        else:
            by_key[u.serial_key] = [i]
            groups.append(by_key[u.serial_key])
    return groups


def execute_unit(unit: Unit | dict[str, Any], options: dict[str, Any], kinds: UnitKinds) -> dict[str, Any]:
    """Run one unit with the function of its kind, its parameters checked against the kind's
    model first, turning any exception into a failed result."""
    u = unit if isinstance(unit, Unit) else Unit.model_validate(unit)
    started = time.monotonic()
    try:
        kind = kinds.get(u.kind)
        if kind is None:
            raise ValueError(f"unknown unit kind {u.kind!r}; this job runs {sorted(kinds)}")
        try:
            kind.params.model_validate(u.params)
        except ValidationError as exc:
            raise ValueError(f"the parameters of unit {u.id} do not fit kind {u.kind}: "
                             f"{exc.errors()[0]['msg']} at {'.'.join(map(str, exc.errors()[0]['loc']))}") from None
        with unit_scope(u.id):
            result = kind.run(u, options)
    except Exception as exc:  # a unit must never take the job down with it
        log.exception("unit %s failed", u.id)
        result = {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc(limit=8)}
    result.setdefault("unit_id", u.id)
    result.setdefault("kind", u.kind)
    result.setdefault("duration_s", time.monotonic() - started)
    return result


def _execute_group_json(units_json: list[str], options_json: str, kinds: UnitKinds,
                        state: dict[str, str] | None = None) -> list[str]:
    """One Spark task: its units in order (one partition's segments, for instance). ``state``:
    the driver's home (``settings.state_env``): an executor is another process, maybe on another
    host, and a reused Python worker may have served a job of another home before."""
    if state is not None:
        apply_state_env(state)
    options = json.loads(options_json)
    return [json.dumps(execute_unit(json.loads(u), options, kinds), default=str) for u in units_json]


# Spark settings of every kmigrate job, in-process or submitted: a unit rewrites files, so a task
# never runs twice at once (no speculation) and is retried once; Python workers are reused.
SPARK_SETTINGS: dict[str, str] = {
    "spark.speculation": "false",
    "spark.ui.enabled": "false",
    "spark.task.maxFailures": "2",
    "spark.python.worker.reuse": "true",
    "spark.sql.shuffle.partitions": "4",
    # Spark's own stage bar would interleave with kmigrate's progress (the CLI's bar, the
    # "kmigrate progress" lines of a submitted job's log).
    "spark.ui.showConsoleProgress": "false",
}

# Where a Spark session started by this process sends Spark's own output (see spark_log_file).
_spark_log: Path | None = None


@contextlib.contextmanager
def spark_log_file(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """While active, a Spark session that this process starts writes Spark's own output, its
    log4j lines (WARN and INFO) and anything else the JVM or its Python workers print, to
    ``path`` (appended) instead of this process's stderr, so a person at a terminal reads
    kmigrate's output only (docs/operations.md, "Engines"). ``None``: no change."""
    global _spark_log
    before = _spark_log
    _spark_log = Path(path) if path is not None else before
    try:
        yield
    finally:
        _spark_log = before


class Progress(Protocol):
    def __call__(self, done: int, total: int, result: dict[str, Any]) -> None: ...


class InlineEngine:
    name = "inline"

    def run(self, units: Iterable[Unit], options: dict[str, Any], progress: Progress | None = None, *,
            kinds: UnitKinds) -> list[dict[str, Any]]:
        units = list(units)
        out = []
        for i, u in enumerate(units):
            r = execute_unit(u, options, kinds)
            out.append(r)
            if progress:
                progress(i + 1, len(units), r)
        return out


def spark_session(master: str | None = None, app_name: str = "kmigrate"):
    """The active Spark session, or a new one on ``master`` (default: ``$KMIGRATE_SPARK_MASTER``
    or ``local[*]``). Spark's Python workers run this same interpreter."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON") or _python())
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", _python())
    builder = SparkSession.builder
    if master or not os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Under spark-submit (which sets the gateway port) the launcher's --master decides:
        # setting one here would silently turn a cluster job into a local one.
        builder = builder.master(master or os.environ.get("KMIGRATE_SPARK_MASTER", "local[*]"))
    builder = builder.appName(app_name)
    for key, value in SPARK_SETTINGS.items():
        builder = builder.config(key, value)
    if _spark_log is None:
        return builder.getOrCreate()
    # The JVM is a child process that inherits stderr at launch: pointing descriptor 2 at the
    # log file for the launch only makes the file the JVM's stderr for good (log4j's console
    # appender writes there, and so do the Python workers it forks), while this process gets
    # its own stderr back.
    _spark_log.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    log_fd = os.open(_spark_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = os.dup(2)
    try:
        os.dup2(log_fd, 2)
        return builder.getOrCreate()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log_fd)


def _python() -> str:
    import sys

    return sys.executable


class SparkEngine:
    name = "spark"

    def __init__(self, master: str | None = None, spark: Any = None, progress_interval: float = 10.0) -> None:
        self.master = master
        self._spark = spark
        self.progress_interval = progress_interval

    def run(self, units: Iterable[Unit], options: dict[str, Any], progress: Progress | None = None, *,
            kinds: UnitKinds) -> list[dict[str, Any]]:
        units = list(units)
        if not units:
            return []
        kinds = dict(kinds)  # pickled with the task: each function and model by module and name
        spark = self._spark or spark_session(self.master)
        sc = spark.sparkContext
        opts = json.dumps(options, default=str)
        state = state_env()
        groups = serial_groups(units)
        payload = [[units[i].model_dump_json() for i in g] for g in groups]
        group = f"kmigrate-{os.getpid()}-{time.monotonic_ns()}"
        # One slice per group: each task is one unit (a segment, a dir) or the units that must
        # not overlap (one partition's segments), retried alone if it fails.
        rdd = sc.parallelize(payload, numSlices=len(payload))
        box: dict[str, Any] = {}

        def collect() -> None:
            sc.setJobGroup(group, f"kmigrate: {len(units)} units in {len(payload)} tasks")
            try:
                box["results"] = rdd.map(lambda us: _execute_group_json(us, opts, kinds, state)).collect()
            except BaseException as exc:  # re-raised in the caller's thread
                box["error"] = exc

        worker = threading.Thread(target=collect, name="kmigrate-spark-collect", daemon=True)
        worker.start()
        total_bytes = sum(u.size for u in units)
        last_done = -1
        # Progress while the job runs: a caller's callback (the CLI's live bar) is polled often;
        # without one, lines for Airflow's SparkSubmitOperator to stream into the task log.
        poll = min(self.progress_interval, 0.5) if progress else self.progress_interval
        while worker.is_alive():
            worker.join(poll)
            done = _completed_tasks(sc, group)
            if done != last_done:
                last_done = done
                log.info("progress: %d/%d tasks done (%d units, %d bytes planned)", done, len(payload),
                         len(units), total_bytes)
                if progress:
                    progress(done, len(payload), {})
                else:
                    print(f"kmigrate progress: {done}/{len(payload)} tasks", file=sys.stderr, flush=True)
        if "error" in box:
            raise box["error"]
        by_index: dict[int, dict[str, Any]] = {}
        for g, out in zip(groups, box["results"], strict=True):
            for i, r in zip(g, out, strict=True):
                by_index[i] = json.loads(r)
        results = [by_index[i] for i in range(len(units))]
        if progress:
            progress(len(payload), len(payload), results[-1])
        return results


def _completed_tasks(sc: Any, group: str) -> int:
    """Tasks finished so far in the job group (Spark's status tracker: no listener needed)."""
    tracker = sc.statusTracker()
    done = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in (job.stageIds if job else []):
            stage = tracker.getStageInfo(stage_id)
            if stage:
                done += stage.numCompletedTasks
    return done


def get_engine(name: str, *, master: str | None = None, spark: Any = None) -> InlineEngine | SparkEngine:
    if name == "inline":
        return InlineEngine()
    if name == "spark":
        return SparkEngine(master, spark)
    raise ValueError(f"unknown engine {name!r}: use 'spark' or 'inline'")
