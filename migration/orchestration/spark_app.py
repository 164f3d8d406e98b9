"""The Spark application every heavy task submits.

    spark-submit --master local[2] migration/orchestration/spark_app.py --job JOB.json --results OUT.json

The units run packed into a few tasks per core (``runtime.engine.pack_units``);
``--conf spark.kmigrate.tasksPerCore=N`` sets how many (default 3).

``JOB.json`` holds ``{"units": [...], "options": {...}}`` written by the driver task; the
results (one small document per unit) go to ``OUT.json`` via a temporary file, fsync, a rename
and a directory fsync, so a reader never sees half a file and a crash never loses it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from migration.migrations.tier import driver as tier
from migration.migrations.unify import driver as unify_driver
from migration.migrations.upgrade import driver as upgrade
from migration.migrations.upgrade import preflight
from migration.runtime.documents import DocumentError, JobDocument, ResultsDocument
from migration.runtime.engine import get_engine
from migration.runtime.safety import Refused, RunLock, holding_locks, remove_under_lock
from migration.settings import apply_state_env

# every kind of unit a DAG's Spark job may run, by the migration that defines it
UNIT_KINDS = {**upgrade.UNIT_KINDS, **preflight.UNIT_KINDS, **tier.UNIT_KINDS, **unify_driver.UNIT_KINDS}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="spark_app")
    ap.add_argument("--job", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--engine", default="spark", choices=["spark", "inline"])
    args = ap.parse_args(argv)

    try:
        job = JobDocument.read(args.job)
    except (OSError, DocumentError) as exc:
        print(f"spark_app: {exc}", file=sys.stderr)
        return 2
    if job.state:
        # The home of the run that wrote the job (runtime/runs.py), not whatever spark-submit's
        # environment says: its lock records and journals must be the driver's.
        apply_state_env(job.state)
    units = job.units
    options = job.options
    out = Path(args.results)
    lock_dirs = options.get("lock_log_dirs", [])
    run_lock = RunLock.model_validate(options["run_lock"]) if options.get("run_lock") else None
    if lock_dirs:
        # This driver holds the locks for the whole job; its executors, other processes, are
        # told so explicitly (a shared state directory would prove nothing).
        options["lock_owner_pid"] = os.getpid()
    try:
        # The process that rewrites holds the log dirs' locks, so no broker starts meanwhile.
        with holding_locks(lock_dirs, run_lock):
            remove_under_lock(options)
            results = get_engine(args.engine).run(units, options, kinds=UNIT_KINDS)
    except Refused as exc:
        results = [{"unit_id": u.id, "kind": u.kind, "status": "refused", "error": str(exc)} for u in units]
        _write(out, results)
        print(f"spark_app: refused: {exc}", file=sys.stderr)
        return 3
    _write(out, results)
    failed = sum(1 for r in results if r.get("status") == "failed")
    print(f"spark_app: {len(results)} units, {failed} failed", file=sys.stderr)
    return 0


def _write(out: Path, results: list) -> None:
    # durable: a resume or finalize reads it after whatever happens to this host next
    ResultsDocument(results=json.loads(json.dumps(results, default=str))).write(out)


if __name__ == "__main__":
    sys.exit(main())
