"""Tiered-storage readiness (KIP-405, KIP-952): producer snapshots, then staging to an object store.

Kafka's RemoteLogManager fails with a NullPointerException on a segment without a
segment-aligned producer snapshot (data written before 2.8, docs/formats.md §5.5/§5.6). This
operation, run offline on a stopped broker's log dirs, makes partitions ready and stages their
closed segments in the object layout of the open-source tiered-storage plugin
(:mod:`migration.migrations.tier.layout`).

Four steps, shared by the CLI, the inline and Spark engines and the Airflow DAG, in the shape
of the other migrations (options, plan, unit, driver):
  0. :func:`check_store` (here, before anything is written): credentials, then a write probe
     (:mod:`.store`: the object-store interface; :mod:`.s3` and :mod:`.filesystem` its backends);
     :class:`~.options.TierOptions` has checked the names already.
  1. :func:`~.plan.prepare_tier` (driver): safety, inventory, topic ids, readiness; one
     ``tier-partition`` unit per ready partition; ``prepare.json`` says which are not ready.
  2. :func:`~.unit.run_unit` (executor): the partition's producer snapshots, then the staging
     of its closed segments.
  3. :func:`finalize_tier` (here): the run report and ``remote-log-segment-metadata.jsonl``.

The metadata brokers need to serve the staged segments is not published here: each run writes
``remote-log-segment-metadata.jsonl`` (one ``RemoteLogSegmentMetadataRecord`` payload per staged
segment, Kafka's field names); docs/operations.md says how an operator publishes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from migration.audit.model import (
    Finding,
    FormatVersions,
    RunKind,
    RunReport,
    UnitResult,
    UnitStatus,
    UnitType,
    new_run_id,
)
from migration.audit.store import ReportStore
from migration.formats.fileio import durable_replace
from migration.migrations.tier import layout
from migration.migrations.tier.options import TierOptions, open_store
from migration.migrations.tier.plan import DRY_RUN_STORE, UNIT_KIND, PartitionParams, TierPrepare, prepare_tier
from migration.migrations.tier.store import ObjectStore, StoreUnavailable, one_line
from migration.migrations.tier.unit import run_unit
from migration.runtime.engine import Progress, UnitKind, get_engine, unit_kinds
from migration.runtime.runs import RunDir
from migration.runtime.safety import Refused, RunLock, holding_locks

JSONL_NAME = "remote-log-segment-metadata.jsonl"
UNIT_KINDS = unit_kinds(UnitKind(UNIT_KIND, PartitionParams, run_unit))


def check_store(options: TierOptions, *, run_id: str) -> list[str]:
    """What a run checks before it writes a snapshot or uploads anything (the names were
    checked by :class:`TierOptions`): the credentials resolve (:class:`~.store.StoreArgumentError`:
    exit 2), then one small probe object under the prefix is written, read back, listed and
    deleted (:class:`~.store.StoreUnavailable`: a run-level error, exit 1). Then the probe
    objects killed runs left are removed (:func:`~.layout.probe_is_leftover`), and said, one
    line each, in the list returned. A dry run and a snapshots-only run use no store, so they
    check nothing here."""
    if options.dry_run or options.snapshots_only:
        return []
    store = open_store(options)
    store.check_credentials()
    now_ms = int(time.time() * 1000)
    store.check_writable(layout.probe_key(options.prefix, layout.probe_token(run_id, now_ms, secrets.token_hex(4))))
    return _remove_leftover_probes(store, options.prefix, run_id, now_ms)


def _remove_leftover_probes(store: ObjectStore, prefix: str, run_id: str, now_ms: int) -> list[str]:
    probes = layout.probe_key(prefix, "")
    try:
        def leftover(key: str) -> bool:
            return layout.probe_is_leftover(key, prefix=prefix, run_id=run_id, now_ms=now_ms)

        doomed = [o.key for o in store.list_objects(probes) if leftover(o.key)]
        store.delete(doomed)
        temporaries = store.remove_temporaries(probes, leftover)
    except Exception as exc:  # the probe passed: a cleanup that fails is said, not fatal
        return [f"{store.location}: leftover probe objects under {probes} not removed: {one_line(str(exc))}"]
    return [f"removed the probe object {k} an earlier, killed run left" for k in doomed] + [
        f"removed the temporary file {k} a killed write of a probe object left in the store" for k in temporaries]


# ------------------------------------------------------------------------------------- finalize


def _report_params(options: dict[str, Any]) -> dict[str, Any]:
    keep = ("bucket", "store_url", "endpoint_url", "prefix", "region", "path_style", "part_size",
            "multipart_threshold", "chunk_size", "snapshots_only", "dry_run", "metadata_log_dirs", "compacted_topics",
            "excluded_topics", "profile", "aws_conn_id", "assign_leader_epoch")
    return {k: options.get(k) for k in keep}


def finalize_tier(run_id: str) -> RunReport:
    """Build, save and return the run report; write the metadata-record JSONL into the run dir."""
    rd = RunDir(run_id)
    prep = rd.read_prepare(TierPrepare) or TierPrepare(run_id=run_id)
    started = prep.started_at
    report = RunReport.start(RunKind.TIER_PREPARE, _report_params(prep.options), run_id=run_id,
                             formats=FormatVersions(other={"remote-layout": layout.LAYOUT_NAME,
                                                           "rsm-manifest": layout.MANIFEST_VERSION,
                                                           "producer-snapshot": 1,
                                                           "metadata-jsonl": layout.JSONL_VERSION}),
                             now=datetime.fromtimestamp(started, UTC) if isinstance(started, float | int) else None)
    if prep.refusal:
        report.refuse(prep.refusal)
    if prep.store_error:
        report.error(f"store not usable, nothing written or uploaded: {prep.store_error}")
    for w in prep.warnings:
        report.warn(w)
    for n in prep.not_ready:
        finding = Finding(message=n.reason, code=n.code)
        failed = n.status is UnitStatus.FAILED
        report.add_unit(n.broker_id, n.topic, n.partition, UnitResult(
            unit=Path(n.path).name, unit_type=UnitType.FILE, path=n.path, status=n.status,
            errors=[finding] if failed else [], warnings=[] if failed else [finding]), track_progress=False)
    units, _ = rd.read_job() if rd.job_path.exists() else ([], {})
    for u in units:
        report.plan_unit(u.broker_id, u.topic or "?", u.partition or 0, u.id, u.size, UnitType.FILE)
    by_id = {r.get("unit_id"): r for r in rd.read_results()}
    records: list[dict[str, Any]] = []
    for u in units:
        r = by_id.get(u.id)
        topic, partition = u.topic or "?", u.partition or 0
        if r is None:
            report.add_unit(u.broker_id, topic, partition, UnitResult(
                unit=Path(u.path).name, unit_type=UnitType.FILE, path=u.path, status=UnitStatus.FAILED,
                errors=[Finding(message="no result: the unit did not run", code="NO_RESULT")]))
            continue
        seg_results = [UnitResult.model_validate(x) for x in r.get("segment_results", [])]
        if "unit_result" in r:
            summary = UnitResult.model_validate(r["unit_result"])
        else:  # the engine caught an exception the unit did not
            summary = UnitResult(unit=Path(u.path).name, unit_type=UnitType.FILE, path=u.path,
                                 status=UnitStatus.FAILED, errors=[Finding(message=r.get("error", "unknown error"),
                                                                           code="UNIT_CRASHED")])
        for x in seg_results:
            report.add_unit(u.broker_id, topic, partition, x)
        if not seg_results or summary.errors or summary.warnings:
            # The partition-level line carries cleanup findings and failures before any segment.
            report.add_unit(u.broker_id, topic, partition, summary)
        records.extend(r.get("segment_metadata", []))
    _write_jsonl(rd.path / JSONL_NAME, records)
    with contextlib.suppress(OSError):  # the dry-run units removed their stores; the parent goes too
        (rd.path / DRY_RUN_STORE).rmdir()
    report.finish()
    ReportStore().save(report)
    rd.write("report-path.json", {"report": str(ReportStore().json_path(run_id))})
    return report


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    durable_replace(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode("utf-8"),
                 tmp_suffix=".tmp")

def record_store_error(run_id: str, message: str, options: dict[str, Any]) -> None:
    """A run that stops before its first write because the store cannot be used: ``prepare.json``
    says why, and :func:`finalize_tier` reports it as a run-level error."""
    RunDir(run_id).write_prepare(TierPrepare(run_id=run_id, started_at=time.time(), store_error=message,
                                             options=options))


def execute_tier(log_dirs: list[str | os.PathLike[str]], *, options: TierOptions, engine: str = "inline",
                 run_id: str | None = None, master: str | None = None, spark: Any = None,
                 broker_id: int | None = None, only_partitions: list[str] | None = None,
                 progress: Progress | None = None) -> RunReport:
    """check the store → prepare → run units on the engine → finalize. A refusal yields a report
    with exit code 3, an unusable store one with a run-level error (exit 1); a wrongly named
    store or missing credentials raise :class:`~.store.StoreArgumentError` (the caller's
    arguments: exit 2) before anything is written."""
    rid = run_id or new_run_id(RunKind.TIER_PREPARE)
    try:
        cleaned = check_store(options, run_id=rid)
    except StoreUnavailable as exc:
        record_store_error(rid, str(exc), options.model_dump(mode="json"))
        return finalize_tier(rid)
    try:
        plan = prepare_tier(log_dirs, run_id=rid, options=options, broker_id=broker_id,
                            only_partitions=only_partitions)
    except Refused as exc:
        RunDir(rid).write_prepare(TierPrepare(run_id=rid, started_at=time.time(), refusal=str(exc),
                                              options=options.model_dump(mode="json")))
        return finalize_tier(rid)
    rd, units, opts = plan.run_dir, plan.units, plan.options.model_dump(mode="json")
    if cleaned:
        plan.prepare.warnings.extend(cleaned)
        rd.write_prepare(plan.prepare)
    eng = get_engine(engine, master=master, spark=spark)
    if options.dry_run:
        results = eng.run(units, opts, progress, kinds=UNIT_KINDS)
    else:
        # Hold the log dirs' locks while snapshots are written: a broker started by mistake refuses.
        with holding_locks(list(log_dirs), RunLock(run_id=rid, run_kind="tier-prepare")):
            results = eng.run(units, opts, progress, kinds=UNIT_KINDS)
    rd.write_results(results)
    return finalize_tier(rid)
