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

    job = json.loads(Path(args.job).read_text())
    units = [Unit.model_validate(u) for u in job["units"]]
    results = get_engine(args.engine).run(units, job.get("options", {}))
    out = Path(args.results)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps({"results": results}, default=str))
    os.replace(tmp, out)
    failed = sum(1 for r in results if r.get("status") == "failed")
    print(f"run_units: {len(results)} units, {failed} failed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
