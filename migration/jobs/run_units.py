"""The Spark application every heavy task submits.

    spark-submit --master local[2] migration/jobs/run_units.py --job JOB.json --results OUT.json

``JOB.json`` holds ``{"units": [...], "options": {...}}`` written by the driver task; the
results (one small document per unit) go to ``OUT.json`` via a temporary file and a rename,
so a reader never sees half a file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="run_units")
    ap.add_argument("--job", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--engine", default="spark", choices=["spark", "inline"])
    args = ap.parse_args(argv)

    from migration.engine import Unit, get_engine
    from migration.ops.safety import Refused, holding_locks

    job = json.loads(Path(args.job).read_text())
    units = [Unit.model_validate(u) for u in job["units"]]
    options = job.get("options", {})
    out = Path(args.results)
    try:
        # The process that rewrites holds the log dirs' locks, so no broker starts meanwhile.
        with holding_locks(options.get("lock_log_dirs", [])):
            results = get_engine(args.engine).run(units, options)
    except Refused as exc:
        results = [{"unit_id": u.id, "kind": u.kind, "status": "refused", "error": str(exc)} for u in units]
        _write(out, results)
        print(f"run_units: refused: {exc}", file=sys.stderr)
        return 3
    _write(out, results)
    failed = sum(1 for r in results if r.get("status") == "failed")
    print(f"run_units: {len(results)} units, {failed} failed", file=sys.stderr)
    return 0


def _write(out: Path, results: list) -> None:
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps({"results": results}, default=str))
    os.replace(tmp, out)


if __name__ == "__main__":
    sys.exit(main())
