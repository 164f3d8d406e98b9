"""The benchmark workers' own measurements (bench/workers.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_workers_peak_rss_is_its_own_not_its_parents() -> None:
    """A worker spawned by a process that has touched much more memory than the worker ever
    will reports its own peak (the RSS target's worker is spawned by the benchmark runner,
    which may have just generated a cluster in memory)."""
    parent = bytearray(256 << 20)
    parent[::4096] = b"\x01" * len(range(0, len(parent), 4096))  # touch every page
    out = subprocess.run([sys.executable, "-c", "from bench.workers import _peak_rss_mb; print(_peak_rss_mb())"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    peak = float(out.stdout)
    assert 1 < peak < 128, f"the worker reported {peak:.0f} MB; its parent holds 256 MB"
    del parent
