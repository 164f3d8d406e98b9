"""The plan of a unification run: safety gates, the state of every metadata log dir, one unit
per dir (and per stray copy) -> the run directory (``runtime/runs.py``) and the plan itself
(:class:`UnifyPlan`: typed ``prepare.json``, the units, the job's options)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from migration.audit.model import RunKind, utcnow
from migration.formats import names
from migration.migrations.unify.options import UnifyOptions, UnifyUnitParams
from migration.migrations.unify.state import StraySummary, UnifyState, detect_state, metadata_log_dir_of, stray_summary
from migration.migrations.unify.unit import UNIT_KIND
from migration.runtime.documents import PrepareDocument
from migration.runtime.engine import Unit
from migration.runtime.runs import RunDir
from migration.runtime.safety import check_backup_root, check_not_live


class UnifyPrepare(PrepareDocument):
    """``prepare.json`` of a unification run: what each metadata log dir held before."""

    kind: str = RunKind.UNIFY_BOOTSTRAP.value
    options: UnifyOptions = Field(default_factory=UnifyOptions)
    engine: str | None = None
    metadata_log_dirs: list[str] = Field(default_factory=list)
    states: list[UnifyState] = Field(default_factory=list)
    strays: list[StraySummary] = Field(default_factory=list)


class UnifyPlan(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_dir: RunDir
    prepare: UnifyPrepare
    units: list[Unit]
    options: UnifyOptions


def load_plan(run_id: str) -> UnifyPlan | None:
    """The plan of an earlier run with this id, from its run directory (None: there is none)."""
    rd = RunDir(run_id)
    prep = rd.read_prepare(UnifyPrepare)
    if prep is None or not rd.job_path.exists():
        return None
    units, opts = rd.read_job()
    return UnifyPlan(run_dir=rd, prepare=prep, units=units, options=UnifyOptions.model_validate(opts))


def prepare_unify(metadata_log_dirs: Sequence[str | os.PathLike[str]], *, run_id: str,
                  options: UnifyOptions | None = None) -> UnifyPlan:
    """Safety gates (live lock, backup root), detected states, one unit per dir -> run dir.
    Raises :class:`~migration.runtime.safety.Refused` (exit 3) and then writes nothing into any
    log dir. The states' warnings (case 4, KIP-1170) become the run's warnings."""
    opts = options or UnifyOptions()
    dirs = [metadata_log_dir_of(d) for d in metadata_log_dirs]
    strays = [Path(s).resolve() for s in opts.stray_log_dirs]
    backup_root = opts.resolved_backup_root()
    opts = opts.model_copy(update={"backup_root": str(backup_root), "run_id": run_id})
    all_dirs: list[str | os.PathLike[str]] = [*dirs, *strays]
    warnings: list[str] = check_not_live(all_dirs, run_id=run_id)
    check_backup_root(backup_root, all_dirs)
    units: list[Unit] = []
    states: list[UnifyState] = []
    for d in dirs:
        st = detect_state(d)
        states.append(st)
        warnings += [f"{d}: {w}" for w in st.warnings]
        units.append(Unit(kind=UNIT_KIND, id=f"{UNIT_KIND}:{d}", broker_id=st.node_id if st.node_id is not None
                          else -1, log_dir=str(d), path=str(d), topic=names.METADATA_TOPIC, partition=0,
                          size=st.bootstrap.size if st.bootstrap else 0,
                          params=UnifyUnitParams(role="metadata").model_dump(mode="json")))
    stray_states: list[StraySummary] = []
    for s in strays:
        ss = stray_summary(s)
        stray_states.append(ss)
        units.append(Unit(kind=UNIT_KIND, id=f"{UNIT_KIND}:stray:{s}", broker_id=ss.node_id if ss.node_id is not
                          None else -1, log_dir=str(s), path=str(s), size=ss.size,
                          params=UnifyUnitParams(role="stray").model_dump(mode="json")))
    rd = RunDir(run_id)
    rd.write_job(units, opts.model_dump(mode="json"))
    prepare = UnifyPrepare(run_id=run_id, started_at=utcnow().isoformat(), dry_run=opts.dry_run, options=opts,
                           log_dirs=[str(d) for d in all_dirs], metadata_log_dirs=[str(d) for d in dirs],
                           states=states, strays=stray_states, warnings=warnings)
    rd.write_prepare(prepare)
    return UnifyPlan(run_dir=rd, prepare=prepare, units=units, options=opts)
