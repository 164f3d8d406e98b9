"""The plan of a unification run: safety gates, the state of every metadata log dir, one unit
per dir (and per stray copy) -> the run directory (``runtime/runs.py``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from migration.audit.model import RunKind, utcnow
from migration.formats import names
from migration.migrations.unify.options import UnifyOptions, UnifyUnitParams
from migration.migrations.unify.state import detect_state, metadata_log_dir_of, stray_summary
from migration.migrations.unify.unit import UNIT_KIND
from migration.runtime.engine import Unit
from migration.runtime.runs import RunDir
from migration.runtime.safety import check_backup_root, check_not_live


def prepare_unify(metadata_log_dirs: list[str | os.PathLike[str]], *, run_id: str,
                  options: UnifyOptions | None = None) -> RunDir:
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
    states: list[dict[str, Any]] = []
    for d in dirs:
        st = detect_state(d)
        states.append(st.model_dump(mode="json"))
        warnings += [f"{d}: {w}" for w in st.warnings]
        units.append(Unit(kind=UNIT_KIND, id=f"{UNIT_KIND}:{d}", broker_id=st.node_id if st.node_id is not None
                          else -1, log_dir=str(d), path=str(d), topic=names.METADATA_TOPIC, partition=0,
                          size=st.bootstrap.size if st.bootstrap else 0,
                          params=UnifyUnitParams(role="metadata").model_dump(mode="json")))
    stray_states = []
    for s in strays:
        ss = stray_summary(s)
        stray_states.append(ss.model_dump(mode="json"))
        units.append(Unit(kind=UNIT_KIND, id=f"{UNIT_KIND}:stray:{s}", broker_id=ss.node_id if ss.node_id is not
                          None else -1, log_dir=str(s), path=str(s), size=ss.size,
                          params=UnifyUnitParams(role="stray").model_dump(mode="json")))
    rd = RunDir(run_id)
    rd.write_job(units, opts.model_dump(mode="json"))
    rd.write_prepare({"run_id": run_id, "kind": RunKind.UNIFY_BOOTSTRAP.value, "started_at": utcnow().isoformat(),
                      "options": opts.model_dump(mode="json"), "metadata_log_dirs": [str(d) for d in dirs],
                      "states": states, "strays": stray_states, "warnings": warnings})
    return rd
