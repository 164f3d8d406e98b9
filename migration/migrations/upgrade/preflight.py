"""Preflight: inventory and validation of every broker before a migration touches anything.

One unit per partition directory (and one per metadata log dir), so validation of a whole
fleet spreads over Spark tasks; findings come back as small rows and go into the report.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from migration.audit.model import Finding as ReportFinding
from migration.audit.model import RunKind, RunReport, UnitResult, UnitStatus, UnitType
from migration.audit.store import ReportStore
from migration.formats import names
from migration.logdir.model import is_locked
from migration.logdir.validate import ValidationResult, validate_partition_dir
from migration.logdir.validation import validate_metadata_dir
from migration.runtime.documents import PrepareDocument
from migration.runtime.engine import NoParams, Unit, UnitKind, unit_kinds
from migration.runtime.runs import RunDir

UNIT_KIND = "validate-partition"


def preflight_units(log_dirs: Sequence[str | os.PathLike[str]], broker_id: int = -1) -> list[Unit]:
    units = []
    for d in log_dirs:
        for e in sorted(os.scandir(d), key=lambda e: e.name):
            if not e.is_dir():
                continue
            if e.name != names.METADATA_PARTITION_DIR:
                try:
                    tp = names.parse_partition_dir_name(e.name)
                except Exception:
                    continue
                topic, partition = tp.topic, tp.partition
            else:
                topic, partition = names.METADATA_TOPIC, 0
            size = sum(f.stat().st_size for f in os.scandir(e.path) if f.is_file())
            units.append(Unit(kind=UNIT_KIND, id=f"validate:{broker_id}:{e.path}", broker_id=broker_id,
                              log_dir=str(d), path=e.path, topic=topic, partition=partition, size=size))
    return units


def run_validate_unit(unit: Unit, options: dict[str, Any]) -> dict[str, Any]:
    res = ValidationResult()
    if Path(unit.path).name == names.METADATA_PARTITION_DIR:
        validate_metadata_dir(Path(unit.path), res)
    else:
        validate_partition_dir(unit.path, deep=options.get("deep", True), result=res)
    ur = UnitResult(
        unit=Path(unit.path).name, unit_type=UnitType.PARTITION,
        path=unit.path, status=UnitStatus.OK if res.ok else UnitStatus.FAILED,
        records_before=res.records_checked, bytes_before=res.bytes_checked,
        warnings=[f for f in res.findings if f.severity == "warning"],
        errors=[f for f in res.findings if f.severity == "error"],
    )
    return {"status": "ok" if res.ok else "failed", "broker_id": unit.broker_id, "topic": unit.topic,
            "partition": unit.partition, "unit_result": ur.model_dump(mode="json")}


UNIT_KINDS = unit_kinds(UnitKind(UNIT_KIND, NoParams, run_validate_unit))


class PreflightPrepare(PrepareDocument):
    """``prepare.json`` of a preflight: the brokers' log dirs, and those a live process holds."""

    brokers: dict[str, list[str]] = Field(default_factory=dict)
    live: dict[str, list[str]] = Field(default_factory=dict)


def prepare_preflight(brokers: dict[int, list[str]], *, run_id: str, deep: bool = True,
                      started_at: str | None = None) -> RunDir:
    rd = RunDir(run_id)
    units: list[Unit] = []
    live: dict[int, list[str]] = {}
    for broker_id, dirs in brokers.items():
        locked = [d for d in dirs if is_locked(d)]
        if locked:
            live[broker_id] = locked
        units.extend(preflight_units(dirs, broker_id))
    rd.write_prepare(PreflightPrepare(run_id=run_id, started_at=started_at,
                                      log_dirs=[d for dirs in brokers.values() for d in dirs],
                                      brokers={str(b): d for b, d in brokers.items()},
                                      live={str(b): d for b, d in live.items()}))
    rd.write_job(units, {"deep": deep})
    return rd


def finalize_preflight(run_id: str, *, params: dict[str, Any] | None = None, save: bool = True,
                       live_ok: bool = False) -> RunReport:
    """The preflight's report; a live broker refuses the rollout, but where the rollout stages
    its segments first and stops each broker for its window (``live_ok``), it is expected."""
    rd = RunDir(run_id)
    prep = rd.read_prepare(PreflightPrepare) or PreflightPrepare(run_id=run_id)
    units, _ = rd.read_job()
    results = {r["unit_id"]: r for r in rd.read_results()}
    report = RunReport.start(RunKind.VALIDATE, params or {}, run_id=run_id)
    for b, dirs in prep.live.items():
        if live_ok:
            report.warn(f"broker {b} is running (its lock is held: {', '.join(dirs)}): its closed segments are "
                        "staged beside it, and its window stops it")
        else:
            report.refuse(f"broker {b}: a live process holds the lock of {', '.join(dirs)}")
    for u in units:
        report.plan_unit(u.broker_id, u.topic or "-", u.partition or 0, Path(u.path).name, u.size)
        r = results.get(u.id)
        if r is None:
            ur = UnitResult(unit=Path(u.path).name, path=u.path, status=UnitStatus.FAILED,
                            errors=[ReportFinding(file=u.path, message="no result: the unit did not run")])
        elif "unit_result" in r:
            ur = UnitResult.model_validate(r["unit_result"])
        else:
            ur = UnitResult(unit=Path(u.path).name, path=u.path, status=UnitStatus.FAILED,
                            errors=[ReportFinding(file=u.path, message=r.get("error", "unit failed"))])
        report.add_unit(u.broker_id, u.topic or "-", u.partition or 0, ur)
    report.finish()
    if save:
        ReportStore().save(report)
    return report


