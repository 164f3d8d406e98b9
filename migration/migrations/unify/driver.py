"""The driver of a unification run: prepare (``plan.py``) -> run the units on an engine
(``unit.py``) -> finalize: read the results, verify what is on disk now (``verify.py``) and
write the run report."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from migration.audit.model import Finding, RunKind, RunReport, UnitResult, UnitStatus, UnitType, new_run_id
from migration.audit.store import ReportStore
from migration.formats import names
from migration.formats.digest import LEGACY_ALGORITHM
from migration.migrations.unify.options import UnifyOptions, UnifyUnitParams
from migration.migrations.unify.plan import UnifyPlan, UnifyPrepare, load_plan, prepare_unify
from migration.migrations.unify.state import FORMAT_ZERO
from migration.migrations.unify.unit import UNIT_KIND, run_unit
from migration.migrations.unify.verify import verify_unified
from migration.runtime.engine import Progress, UnitKind, get_engine, unit_kinds
from migration.runtime.safety import Refused

log = logging.getLogger(__name__)
UNIT_KINDS = unit_kinds(UnitKind(UNIT_KIND, UnifyUnitParams, run_unit))


def _report_params(prepare: UnifyPrepare) -> dict[str, Any]:
    opts = prepare.options
    return {"metadata_log_dirs": prepare.metadata_log_dirs, "engine": prepare.engine, "dry_run": opts.dry_run,
            "backup_root": opts.backup_root, "retire_stray": opts.retire_stray, "stray_log_dirs": opts.stray_log_dirs}


def finalize_unify(run_id: str, *, save: bool = True, plan: UnifyPlan | None = None) -> RunReport:
    """Results -> verified run report (saved in the report store)."""
    plan = plan or load_plan(run_id)
    if plan is None:
        raise Refused(f"no unification job for run {run_id}")
    prepare = plan.prepare
    by_id = {r.get("unit_id"): r for r in plan.run_dir.read_results()}
    started = datetime.fromisoformat(prepare.started_at) if isinstance(prepare.started_at, str) else None
    report = RunReport.start(RunKind.UNIFY_BOOTSTRAP, _report_params(prepare), run_id=run_id, now=started)
    for w in prepare.warnings:
        report.warn(w)
    dry_run = prepare.options.dry_run
    for u in plan.units:
        r = by_id.get(u.id)
        stray = UnifyUnitParams.model_validate(u.params).role == "stray"
        if r is None or "unit_result" not in r:
            msg = "no result" if r is None else str(r.get("error", "unit failed"))
            ur = UnitResult(unit=names.BOOTSTRAP_CHECKPOINT_FILE if stray else names.METADATA_PARTITION_DIR,
                            unit_type=UnitType.FILE if stray else UnitType.METADATA_LOG_DIR, path=u.path,
                            status=UnitStatus.FAILED, errors=[Finding(message=msg, file=u.path)])
            broker = u.broker_id
        else:
            ur = UnitResult.model_validate(r["unit_result"])
            broker = int(r.get("broker_id", u.broker_id))
            if ur.digest_algorithm is None and (ur.digest_before or ur.digest_after):
                # A result written before unify units named their hash (a run resumed by a newer
                # kmigrate): its digests are BLAKE2b; the report says so, the proof uses it.
                ur.digest_algorithm = LEGACY_ALGORITHM
            if not stray and not dry_run and ur.status is UnitStatus.OK:
                # The proof: decode what is on disk now and compare with the digest taken before,
                # digesting with the algorithm that digest was computed with.
                expected = ur.digest_after if ur.output_format == FORMAT_ZERO else None
                problems = verify_unified(u.path, expected, algorithm=ur.digest_algorithm or LEGACY_ALGORITHM)
                ur.errors = ur.errors + [Finding(message=p, file=u.path) for p in problems]
        topic = names.BOOTSTRAP_CHECKPOINT_FILE if stray else names.METADATA_TOPIC
        report.add_unit(broker, topic, 0, ur)
    report.finish()
    if save:
        ReportStore().save(report)
    return report


def execute_unify(metadata_log_dirs: Sequence[str | os.PathLike[str]], *, options: UnifyOptions | None = None,
                  engine: str = "inline", run_id: str | None = None, master: str | None = None,
                  spark: Any = None, progress: Progress | None = None) -> RunReport:
    """prepare -> run units on the engine -> finalize. A refusal gives a report with exit code 3."""
    opts = options or UnifyOptions()
    rid = run_id or new_run_id(RunKind.UNIFY_BOOTSTRAP)
    try:
        plan = prepare_unify(metadata_log_dirs, run_id=rid, options=opts)
    except Refused as exc:
        log.error("refused: %s", exc)
        report = RunReport.start(RunKind.UNIFY_BOOTSTRAP, {
            "metadata_log_dirs": [str(d) for d in metadata_log_dirs], "engine": engine, "dry_run": opts.dry_run,
            "backup_root": opts.backup_root, "retire_stray": opts.retire_stray,
            "stray_log_dirs": opts.stray_log_dirs}, run_id=rid)
        report.refuse(str(exc))
        report.finish()
        ReportStore().save(report)
        return report
    plan.prepare.engine = engine
    plan.run_dir.write_prepare(plan.prepare)
    results = get_engine(engine, master=master, spark=spark).run(plan.units, plan.options.model_dump(mode="json"),
                                                                 progress, kinds=UNIT_KINDS)
    plan.run_dir.write_results(results)
    return finalize_unify(rid, plan=plan)
