"""Upgrade copies of one log-dir tree, one copy per set of upgrade options, for a real Kafka to
judge side by side (tests/realkafka): each copy gets its own kmigrate home, reports and backups,
and the run must end without refusal or error."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from migration.audit.model import UnitStatus
from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade


@dataclass
class UpgradedCopies:
    # "<prefix><topic>-<partition>" -> the log end offset the run's report gives for the partition
    report_leo: dict[str, int] = field(default_factory=dict)
    rewritten: set[str] = field(default_factory=set)  # "<prefix><topic>-<partition>" with a segment rewritten
    timings: dict[str, float] = field(default_factory=dict)


def upgrade_copies(work: Path, roots: dict[str, Path], upgrades: dict[str, UpgradeOptions],
                   log_dirs: list[Path]) -> UpgradedCopies:
    """Upgrade ``roots[prefix]`` with ``upgrades[prefix]`` for each prefix (inline engine): the
    log dirs ``log_dirs`` (relative to a root) of each copy, its state under ``work/out/<name>``."""
    done = UpgradedCopies()
    for prefix, options in upgrades.items():
        name = prefix.rstrip("-")
        t = time.monotonic()
        with pytest.MonkeyPatch.context() as mp:
            out = work / "out" / name
            mp.setenv("KMIGRATE_OUT", str(out))
            mp.setenv("KMIGRATE_REPORT_ROOT", str(out / "reports"))
            mp.setenv("KMIGRATE_BACKUP_ROOT", str(out / "backups"))
            report = execute_upgrade([str(roots[prefix] / d) for d in log_dirs], options=options, engine="inline")
        done.timings[f"kmigrate upgrade ({name})"] = time.monotonic() - t
        assert report.refusal is None and not report.errors, report.errors or report.refusal
        for b in report.brokers:
            for p in b.partitions:
                assert all(u.status in (UnitStatus.OK, UnitStatus.SKIPPED) for u in p.units), p
                tp = f"{prefix}{p.topic}-{p.partition}"
                if any(u.status == UnitStatus.OK for u in p.units):
                    done.rewritten.add(tp)
                # the last segment (unit names are its file name, base offset first; the leader-epoch
                # checkpoint's unit is no segment): a skipped one, already at the target, reports no offsets
                last = max((u for u in p.units if u.unit.endswith(".log")), key=lambda u: u.unit, default=None)
                if last is not None and last.offsets is not None:
                    done.report_leo[tp] = last.offsets.last + 1
    return done
