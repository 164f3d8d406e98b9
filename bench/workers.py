"""Child processes of the benchmarks: each measures itself (wall time, peak RSS) and prints
one JSON line, so a benchmark's memory is that of the worker alone, not of the runner."""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def upgrade(target: str, backup_root: str, log_dirs: list[str]) -> dict[str, object]:
    from migration.audit.model import UnitStatus
    from migration.migrations.upgrade.driver import execute_upgrade
    from migration.migrations.upgrade.options import UpgradeOptions

    opts = UpgradeOptions(target=target, backup_root=backup_root)  # type: ignore[arg-type]
    t = time.perf_counter()
    report = execute_upgrade(log_dirs, options=opts, engine="inline")
    seconds = time.perf_counter() - t
    tot = report.totals
    # Totals count skipped segments (already in the target format) too: sum the rewritten ones.
    rewritten = [u for u in report.iter_results() if u.status is UnitStatus.OK]
    return {"seconds": seconds, "units_ok": tot.units_ok, "units_failed": tot.units_failed,
            "digest_mismatches": tot.digest_mismatches,
            "bytes_rewritten": sum(u.bytes_before or 0 for u in rewritten),
            "records_rewritten": sum(u.records_before or 0 for u in rewritten), "exit_code": report.exit_code(),
            "peak_rss_mb": _peak_rss_mb()}


def rewrite(target: str, segments: list[str]) -> dict[str, object]:
    """The unit's core on each segment: streaming rewrite, then the read-back digest check."""
    from migration.migrations.upgrade.rewrite import RewriteSpec, cleaned_paths, rewrite_segment
    from migration.migrations.upgrade.unit import _digest_outputs

    spec = RewriteSpec(target_magic=int(target.lstrip("v")))
    records = size = 0
    t = time.perf_counter()
    for seg in segments:
        p = Path(seg)
        rr = rewrite_segment(p, spec)
        after = _digest_outputs(p.parent, rr.outputs, staged=True)
        if not after.matches(rr.digest_before):
            raise SystemExit(f"digest mismatch on {p}")
        records += rr.digest_before.records
        size += rr.bytes_before
        for c in cleaned_paths(p.parent, rr.outputs):
            c.unlink()
    return {"seconds": time.perf_counter() - t, "bytes": size, "records": records, "peak_rss_mb": _peak_rss_mb()}


if __name__ == "__main__":
    cmd, target, *rest = sys.argv[1:]
    if cmd == "upgrade":
        out = upgrade(target, rest[0], rest[1:])
    elif cmd == "rewrite":
        out = rewrite(target, rest)
    else:
        raise SystemExit(f"unknown worker {cmd}")
    print(json.dumps(out))
