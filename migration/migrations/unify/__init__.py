"""bootstrap.checkpoint -> zero checkpoint unification of KRaft metadata log dirs (KIP-1170,
KIP-630), offline, with proof.

- ``options.py``: :class:`UnifyOptions` (CLI, DAG params, job.json) and the units' parameters;
- ``state.py``: what a metadata log dir holds and which KIP-1170 state (case 1-5) it is in;
- ``plan.py``: safety gates and one unit per metadata log dir -> the run directory;
- ``unit.py``: one unit, under the log dir lock (``snapshot.py`` writes the zero checkpoint as
  Kafka's snapshot writer does, ``backup.py`` keeps what is retired or replaced);
- ``verify.py``: the proof, from what is on disk;
- ``driver.py``: prepare -> engine -> finalize into the run report.
"""

from migration.migrations.unify.driver import execute_unify, finalize_unify
from migration.migrations.unify.options import UnifyOptions
from migration.migrations.unify.plan import prepare_unify
from migration.migrations.unify.state import UnifyState, detect_state, metadata_log_dir_of
from migration.migrations.unify.unit import FAULT_POINTS, UNIT_KIND, run_unit
from migration.migrations.unify.verify import verify_unified

__all__ = [
    "FAULT_POINTS",
    "UNIT_KIND",
    "UnifyOptions",
    "UnifyState",
    "detect_state",
    "execute_unify",
    "finalize_unify",
    "metadata_log_dir_of",
    "prepare_unify",
    "run_unit",
    "verify_unified",
]
