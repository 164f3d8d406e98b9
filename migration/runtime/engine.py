"""Units of work and the engines that run them.

A migration's driver inventories log dirs and builds a list of small :class:`Unit` documents
(paths, sizes, mtimes, parameters: metadata only). An engine runs the migration's unit
function over them and returns small result documents:
- ``inline``: in this process, one unit after the other (tests, small jobs, dry runs);
- ``spark``: a Spark job on a local master (log dirs are local disks) or a cluster master.
  Spark pays tens of milliseconds per task, so units are bin-packed into a few tasks per core
  (:func:`pack_units`): balanced by bytes, largest first, and the units sharing a
  ``serial_key`` always in one task, one after the other, in list order. Migrations that
  replace files in a partition directory key their units by it: Kafka's loader resolves
  leftovers of the replace protocol per directory, so at most one replacement may be in flight
  in a directory at any instant (see docs/architecture.md, "One replace in flight per
  partition"). Speculation stays off; a retried task re-runs its units, so every unit function
  is idempotent. Each unit's end is reported to the driver as it happens (a small socket the
  driver listens on), so progress is per unit whatever the packing.
Unit functions never raise: an exception becomes a failed result naming the unit, so one
bad segment does not stop the others.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
import os
import queue
import secrets
import socket
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


# A unit weighs its bytes plus this much: what a unit costs whatever its size (journal writes,
# the backup's links and manifest, the replace protocol's renames, about 18 fsyncs for a
# segment of the upgrade; `make bench --only small-partitions` measures it), in bytes of
# rewrite at a few tens of MB/s. Without it, 1,000 segments of 60 KB would weigh as one of
# 60 MB, when they take several times as long.
UNIT_FIXED_BYTES = 256 * 1024


def unit_weight(unit: Unit) -> int:
    return max(unit.size, 0) + UNIT_FIXED_BYTES


def pack_units(units: list[Unit], bins: int) -> list[list[int]]:
    """Indexes of ``units`` packed into at most ``bins`` tasks, balanced by weight
    (:func:`unit_weight`): the serial groups (:func:`serial_groups`, never split) heaviest
    first, each into the lightest task so far (ties: the lower task). Inside a task the groups
    keep list order, and so do the units of a group. Tasks come heaviest first (Spark starts
    them in that order: a task that holds a big partition starts early rather than last);
    none is empty; every unit is in exactly one."""
    groups = serial_groups(units)
    n = max(1, min(bins, len(groups)))
    weight = [sum(unit_weight(units[i]) for i in g) for g in groups]
    heap = [(0, b) for b in range(n)]
    members: list[list[int]] = [[] for _ in range(n)]  # group numbers per task
    load = [0] * n
    for g in sorted(range(len(groups)), key=lambda g: (-weight[g], g)):
        w, b = heapq.heappop(heap)
        members[b].append(g)
        load[b] = w + weight[g]
        heapq.heappush(heap, (load[b], b))
    tasks = [(load[b], b, [i for g in sorted(members[b]) for i in groups[g]]) for b in range(n) if members[b]]
    tasks.sort(key=lambda t: (-t[0], t[1]))
    return [t[2] for t in tasks]


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


def _execute_task_json(units_json: list[tuple[int, str]], options_json: str, kinds: UnitKinds,
                       state: dict[str, str] | None = None, channel: tuple[str, int, str] | None = None) -> list[str]:
    """One Spark task: its units (index in the job, unit document) in order, the units of a
    serial key one after the other. Each unit's failure is its own result: the others of the
    task still run. ``state``: the driver's home (``settings.state_env``): an executor is another
    process, maybe on another host, and a reused Python worker may have served a job of another
    home before. ``channel``: where the driver hears of each unit's end (``_ProgressChannel``)."""
    if state is not None:
        apply_state_env(state)
    options = json.loads(options_json)
    out = []
    with _ProgressReporter(channel) as report:
        for index, unit_json in units_json:
            result = execute_unit(Unit.model_validate_json(unit_json), options, kinds)
            out.append(json.dumps(result, default=str))
            report(index, str(result.get("status", "")))
    return out


class _ProgressChannel:
    """The driver's end of the progress of a Spark job's units: a TCP listener (on the loopback
    for a local master, else on ``spark.driver.host``, which executors reach anyway) that takes
    lines ``<token> <unit index> <status>`` from the tasks. The token, random per job, keeps
    stray connections out. Best effort: when it cannot listen, or a task cannot reach it, the
    units of that task are reported when the job ends."""

    def __init__(self, host: str) -> None:
        self.token = secrets.token_hex(16)
        self.events: queue.SimpleQueue[tuple[int, str]] = queue.SimpleQueue()
        self._server = socket.create_server((host, 0))
        self._closed = False
        self.address = (host, self._server.getsockname()[1], self.token)
        threading.Thread(target=self._accept, name="kmigrate-progress", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), name="kmigrate-progress-task", daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        with conn, conn.makefile("r", encoding="ascii", errors="replace") as lines:
            for line in lines:
                parts = line.split()
                if len(parts) != 3 or parts[0] != self.token:
                    return  # not one of this job's tasks
                with contextlib.suppress(ValueError):
                    self.events.put((int(parts[1]), parts[2]))

    def close(self) -> None:
        self._closed = True
        self._server.close()


class _ProgressReporter:
    """A task's end of the channel: one connection per task, opened at its first report; any
    error turns it off for the rest of the task (progress never fails a unit)."""

    def __init__(self, channel: tuple[str, int, str] | None) -> None:
        self.channel = channel
        self.sock: socket.socket | None = None

    def __enter__(self) -> Callable[[int, str], None]:
        return self.report

    def __exit__(self, *exc: object) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()

    def report(self, index: int, status: str) -> None:
        if self.channel is None:
            return
        host, port, token = self.channel
        try:
            if self.sock is None:
                self.sock = socket.create_connection((host, port), timeout=2.0)
            self.sock.sendall(f"{token} {index} {status.split()[0] if status.split() else '-'}\n".encode())
        except OSError:
            self.channel = None


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


# Tasks per core of a Spark job (see pack_units): a handful, so that a core that drew a skewed
# partition is not the last one working while the others idle, yet few enough that Spark's
# tens of milliseconds per task stay out of the run. A setting: the Spark configuration's
# spark.kmigrate.tasksPerCore (spark-submit --conf), else $KMIGRATE_SPARK_TASKS_PER_CORE.
DEFAULT_TASKS_PER_CORE = 3
TASKS_PER_CORE_CONF = "spark.kmigrate.tasksPerCore"
TASKS_PER_CORE_ENV = "KMIGRATE_SPARK_TASKS_PER_CORE"


def _positive_int(value: Any, where: str) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise ValueError(f"{where} must be a whole number of tasks per core, at least 1; got {value!r}")
    return n


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


class SparkEngine:
    name = "spark"

    def __init__(self, master: str | None = None, spark: Any = None, progress_interval: float = 10.0,
                 tasks_per_core: int | None = None) -> None:
        self.master = master
        self._spark = spark
        self.progress_interval = progress_interval
        self.tasks_per_core = tasks_per_core

    def _tasks_per_core(self, sc: Any) -> int:
        if self.tasks_per_core is not None:
            return _positive_int(self.tasks_per_core, "tasks_per_core")
        conf = sc.getConf().get(TASKS_PER_CORE_CONF)
        if conf is not None:
            return _positive_int(conf, TASKS_PER_CORE_CONF)
        env = os.environ.get(TASKS_PER_CORE_ENV)
        if env:
            return _positive_int(env, f"${TASKS_PER_CORE_ENV}")
        return DEFAULT_TASKS_PER_CORE

    def plan_tasks(self, sc: Any, units: list[Unit]) -> list[list[int]]:
        """The job's tasks: ``units`` packed into tasks-per-core x the master's cores
        (``defaultParallelism``: N for ``local[N]``, the executors' cores or
        ``spark.default.parallelism`` on a cluster)."""
        cores = max(1, int(sc.defaultParallelism))
        return pack_units(units, cores * self._tasks_per_core(sc))

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
        tasks = self.plan_tasks(sc, units)
        payload = [[(i, units[i].model_dump_json()) for i in t] for t in tasks]
        group = f"kmigrate-{os.getpid()}-{time.monotonic_ns()}"
        channel = _open_channel(sc)
        address = channel.address if channel is not None else None
        # One slice per task: each task a few serial groups (one partition's segments, a
        # metadata log dir), retried whole if it fails (its units are idempotent).
        rdd = sc.parallelize(payload, numSlices=len(payload))
        box: dict[str, Any] = {}

        def collect() -> None:
            sc.setJobGroup(group, f"kmigrate: {len(units)} units in {len(payload)} tasks")
            try:
                box["results"] = rdd.map(lambda us: _execute_task_json(us, opts, kinds, state, address)).collect()
            except BaseException as exc:  # re-raised in the caller's thread
                box["error"] = exc

        worker = threading.Thread(target=collect, name="kmigrate-spark-collect", daemon=True)
        worker.start()
        total_bytes = sum(u.size for u in units)
        reported: set[int] = set()
        last_logged = (-1, -1)
        # Progress while the job runs: a caller's callback (the CLI's live bar) is called per unit
        # as the tasks report them; without one, lines for Airflow's SparkSubmitOperator to stream
        # into the task log, every ``progress_interval`` seconds.
        poll = min(self.progress_interval, 0.2) if progress else min(self.progress_interval, 1.0)
        last_line = time.monotonic()
        try:
            while worker.is_alive():
                worker.join(poll)
                if channel is not None:
                    while True:
                        try:
                            index, status = channel.events.get_nowait()
                        except queue.Empty:
                            break
                        if index in reported or not 0 <= index < len(units):
                            continue  # a retried task reports its units again
                        reported.add(index)
                        if progress:
                            progress(len(reported), len(units), {"unit_id": units[index].id,
                                                                 "kind": units[index].kind, "status": status})
                now = time.monotonic()
                if progress is None and now - last_line < self.progress_interval and worker.is_alive():
                    continue
                last_line = now
                done_tasks = _completed_tasks(sc, group)
                if (len(reported), done_tasks) != last_logged:
                    last_logged = (len(reported), done_tasks)
                    log.info("progress: %d/%d units, %d/%d tasks done (%d bytes planned)", len(reported),
                             len(units), done_tasks, len(payload), total_bytes)
                    if progress is None:
                        print(f"kmigrate progress: {len(reported)}/{len(units)} units, {done_tasks}/{len(payload)} "
                              "tasks", file=sys.stderr, flush=True)
        finally:
            if channel is not None:
                channel.close()
        if "error" in box:
            raise box["error"]
        by_index: dict[int, dict[str, Any]] = {}
        for t, out in zip(tasks, box["results"], strict=True):
            for i, r in zip(t, out, strict=True):
                by_index[i] = json.loads(r)
        results = [by_index[i] for i in range(len(units))]
        if progress:
            # the units no report reached the driver for (a task that could not connect), with
            # their results, so the caller has seen every unit once
            for i, r in enumerate(results):
                if i not in reported:
                    reported.add(i)
                    progress(len(reported), len(units), r)
        return results


def _open_channel(sc: Any) -> _ProgressChannel | None:
    master = sc.master or ""
    host = "127.0.0.1" if _is_local(master) else (sc.getConf().get("spark.driver.host") or socket.gethostname())
    try:
        return _ProgressChannel(host)
    except OSError as exc:
        log.warning("no per-unit progress from the Spark tasks (cannot listen on %s: %s)", host, exc)
        return None


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
