"""Record digests across kmigrate versions: a unification prepared (or whose units ran) before
BLAKE3, with BLAKE2b digests in its documents and no algorithm field, is verified by this
kmigrate against what is on disk with BLAKE2b, never with BLAKE3 (which would call every
record changed)."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import Any

import blake3

from migration.formats.digest import DigestAlgorithm
from migration.migrations.unify import (
    UnifyOptions,
    detect_state,
    execute_unify,
    finalize_unify,
    prepare_unify,
    verify_unified,
)
from migration.migrations.unify.driver import UNIT_KINDS
from migration.migrations.unify.plan import UnifyPrepare
from migration.migrations.unify.state import UnifyState, records_digest
from migration.runtime.engine import get_engine
from migration.runtime.runs import RunDir


def _canonical(values: list[bytes]) -> bytes:
    """The canonical bytes of metadata record values (formats/digest.py): offset = position,
    no headers, null key."""
    return b"".join(struct.pack(">qi", i, 0) + b"\xff\xff\xff\xff" + struct.pack(">i", len(v)) + v
                    for i, v in enumerate(values))


def _blake2b(values: list[bytes]) -> str:
    return hashlib.blake2b(_canonical(values), digest_size=32).hexdigest()


def _as_old(doc: Any, digests: dict[str, str]) -> Any:
    """``doc`` as a kmigrate before BLAKE3 wrote it: no ``digest_algorithm`` anywhere, every
    digest its BLAKE2b one (``digests``: BLAKE3 hex -> BLAKE2b hex)."""
    if isinstance(doc, dict):
        return {k: _as_old(v, digests) for k, v in doc.items() if k != "digest_algorithm"}
    if isinstance(doc, list):
        return [_as_old(v, digests) for v in doc]
    return digests.get(doc, doc) if isinstance(doc, str) else doc


def _case2_dir(tmp_path: Path, kraft) -> tuple[Path, list[bytes], dict[str, str]]:
    values, _ = kraft.bootstrap_values()
    d = kraft.make_metadata_dir(tmp_path / "ctl", boot=kraft.bootstrap(values))
    new = blake3.blake3(_canonical(values)).hexdigest()
    assert detect_state(d).bootstrap_digest == new  # the current digest is BLAKE3 over those bytes
    return d, values, {new: _blake2b(values)}


def test_records_digest_takes_the_algorithm(tmp_path, kraft) -> None:
    values, _ = kraft.bootstrap_values()
    assert records_digest(values) == blake3.blake3(_canonical(values)).hexdigest()
    assert records_digest(values, DigestAlgorithm.BLAKE2B) == records_digest(values, "blake2b-256") == _blake2b(values)


def test_a_state_written_before_blake3_verifies_against_the_unified_dir(tmp_path, kraft) -> None:
    """The state document of a run prepared by an older kmigrate (prepare.json, the DAG's
    states-before.json) verified by this one after the unification."""
    d, values, digests = _case2_dir(tmp_path, kraft)
    st = detect_state(d)
    assert st.digest_algorithm is st.bootstrap.digest_algorithm is DigestAlgorithm.BLAKE3
    old = UnifyState.model_validate(_as_old(st.model_dump(mode="json"), digests))
    assert old.bootstrap.digest == old.bootstrap_digest == _blake2b(values)
    assert old.digest_algorithm is old.bootstrap.digest_algorithm is DigestAlgorithm.BLAKE2B

    report = execute_unify([d], options=UnifyOptions(backup_root=str(tmp_path / "backups")), engine="inline")
    assert report.exit_code() == 0, report.to_json()
    assert verify_unified(d, old.bootstrap.digest, algorithm=old.bootstrap.digest_algorithm) == []
    # What the algorithm field prevents: the old digest checked with this kmigrate's hash.
    (problem,) = verify_unified(d, old.bootstrap.digest)
    assert "metadata records digest" in problem and "(blake3-256)" in problem
    # And the check is one: other records do not pass under the old algorithm either.
    assert verify_unified(d, _blake2b(values[:-1]), algorithm=DigestAlgorithm.BLAKE2B)


def _run_units(d: Path, tmp_path: Path, run_id: str) -> RunDir:
    """prepare and the units, as execute_unify does, without the finalize."""
    plan = prepare_unify([d], run_id=run_id, options=UnifyOptions(backup_root=str(tmp_path / "backups")))
    plan.prepare.engine = "inline"
    plan.run_dir.write_prepare(plan.prepare)
    results = get_engine("inline").run(plan.units, plan.options.model_dump(mode="json"), kinds=UNIT_KINDS)
    plan.run_dir.write_results(results)
    return plan.run_dir


def test_a_run_whose_units_ran_before_blake3_finalizes_clean(tmp_path, kraft) -> None:
    """Crash after the units, resumed by a newer kmigrate: prepare.json and results.json hold
    BLAKE2b digests without an algorithm; the finalize verifies the zero checkpoint on disk
    against them with BLAKE2b and the report names it."""
    d, values, digests = _case2_dir(tmp_path, kraft)
    rd = _run_units(d, tmp_path, "unify-old-run")
    results = rd.read_results()
    ur = results[0]["unit_result"]
    assert ur["status"] == "ok" and ur["digest_algorithm"] == "blake3-256" and ur["digest_after"] in digests
    rd.write_results(_as_old(results, digests))
    rd.write_prepare(_as_old(rd.read_prepare(), digests))
    prep = rd.read_prepare(UnifyPrepare)
    assert prep is not None and prep.states[0].bootstrap.digest_algorithm is DigestAlgorithm.BLAKE2B

    report = finalize_unify("unify-old-run", save=False)
    assert report.exit_code() == 0, report.to_json()
    (u,) = list(report.iter_results())
    assert u.errors == [] and u.digest_after == _blake2b(values)
    assert u.digest_algorithm is DigestAlgorithm.BLAKE2B
    assert report.unit_digest_algorithm(u) is DigestAlgorithm.BLAKE2B
    assert report.digest.algorithm is DigestAlgorithm.BLAKE3  # the run's, for units it digests itself


def test_the_finalize_checks_with_the_results_algorithm(tmp_path, kraft) -> None:
    """A result that names BLAKE3 is checked with BLAKE3: a BLAKE2b hex under that name fails."""
    d, _, digests = _case2_dir(tmp_path, kraft)
    rd = _run_units(d, tmp_path, "unify-mixed-run")
    results = rd.read_results()
    clean = finalize_unify("unify-mixed-run", save=False)
    assert clean.exit_code() == 0 and next(clean.iter_results()).digest_algorithm is DigestAlgorithm.BLAKE3
    ur = results[0]["unit_result"]
    ur["digest_before"] = ur["digest_after"] = digests[ur["digest_after"]]
    rd.write_results(results)
    report = finalize_unify("unify-mixed-run", save=False)
    assert report.exit_code() == 1
    (u,) = list(report.iter_results())
    assert any("metadata records digest" in e.message for e in u.errors)
