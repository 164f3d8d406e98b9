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

What a run changes in the log dirs (snapshots created or replaced, indexes rebuilt, the
leader-epoch-checkpoint with ``--assign-leader-epoch``) is kept under
``<backup root>/<run id>/tier/`` first (:mod:`.backup`); :func:`rollback_tier_run` undoes it
(``kmigrate rollback RUN``). Objects already staged stay in the store.

The metadata brokers need to serve the staged segments is not published here: each run writes
``remote-log-segment-metadata.jsonl`` (one ``RemoteLogSegmentMetadataRecord`` payload per staged
segment, Kafka's field names); docs/operations.md says how an operator publishes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import shutil
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from migration.audit.model import (
    Finding,
    FindingCode,
    FormatVersions,
    RunKind,
    RunReport,
    RunStatus,
    UnitResult,
    UnitStatus,
    UnitType,
    new_run_id,
)
from migration.audit.store import ReportStore
from migration.formats import names
from migration.formats.fileio import durable_replace, durable_unlink
from migration.migrations.common.backup import restore_original
from migration.migrations.common.index_repair import TMP_SUFFIX as INDEX_REPAIR_SUFFIX
from migration.migrations.common.leader_epoch import assignments, restore_leader_epoch
from migration.migrations.common.reports import notice_report, refused_report
from migration.migrations.tier import layout
from migration.migrations.tier.backup import (
    PartitionBackup,
    epoch_backup_dir,
    originals_dir,
    partition_backups,
    tier_backup_dir,
)
from migration.migrations.tier.options import TierOptions, open_store
from migration.migrations.tier.plan import DRY_RUN_STORE, UNIT_KIND, PartitionParams, TierPrepare, prepare_tier
from migration.migrations.tier.producer_state import SNAPSHOT_TMP_SUFFIX, snapshot_temporaries
from migration.migrations.tier.store import ObjectStore, StoreUnavailable, one_line
from migration.migrations.tier.unit import run_unit
from migration.runtime.engine import Progress, UnitKind, get_engine, unit_kinds
from migration.runtime.faults import fault_point
from migration.runtime.runs import RunDir
from migration.runtime.safety import Refused, RunLock, check_not_live, holding_locks
from migration.settings import default_backup_root

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
            "excluded_topics", "profile", "aws_conn_id", "assign_leader_epoch", "backup_root")
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
        finding = Finding(message=n.reason, code=FindingCode.of(n.code))
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
                errors=[Finding(message="no result: the unit did not run", code=FindingCode.NO_RESULT)]))
            continue
        seg_results = [UnitResult.model_validate(x) for x in r.get("segment_results", [])]
        if "unit_result" in r:
            summary = UnitResult.model_validate(r["unit_result"])
        else:  # the engine caught an exception the unit did not
            summary = UnitResult(unit=Path(u.path).name, unit_type=UnitType.FILE, path=u.path,
                                 status=UnitStatus.FAILED, errors=[Finding(message=r.get("error", "unknown error"),
                                                                           code=FindingCode.UNIT_CRASHED)])
        for x in seg_results:
            report.add_unit(u.broker_id, topic, partition, x)
        if not seg_results or summary.errors or summary.warnings:
            # The partition-level line carries cleanup findings and failures before any segment.
            report.add_unit(u.broker_id, topic, partition, summary)
        records.extend(r.get("segment_metadata", []))
    _write_jsonl(rd.path / JSONL_NAME, records)
    # the dry-run units removed their stores, but a killed one leaves its own: all go with the parent
    shutil.rmtree(rd.path / DRY_RUN_STORE, ignore_errors=True)
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


def execute_tier(log_dirs: Sequence[str | os.PathLike[str]], *, options: TierOptions, engine: str = "inline",
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


# ------------------------------------------------------------------------------------- rollback

ROLLED_BACK_CODE = FindingCode.TIER_ROLLED_BACK
OBJECTS_KEPT_CODE = FindingCode.TIER_OBJECTS_KEPT


def _job_options(rd: RunDir | None) -> dict[str, Any] | None:
    if rd is None or not rd.job_path.is_file():
        return None
    return rd.read_job()[1]


def rollback_tier_run(run_id: str, *, backup_root: str | None = None) -> RunReport:
    """Undo what tier-prepare run ``run_id`` changed in the log dirs, from its backups
    (:mod:`.backup`) alone: every file it replaced (a corrupt snapshot, rebuilt indexes) and the
    leader-epoch-checkpoint back byte for byte with its mtime, every file it created (the
    manifest lists it before it was written) and every temporary name a killed write left
    removed. Objects already staged stay in the store (said, with where). One result per
    partition. Idempotent, and resumable after a kill at any point: each step looks at what is
    on disk. ``backup_root``: where the run kept its backups (default: the root its job names,
    else the default backup root)."""
    report_id = new_run_id(RunKind.ROLLBACK)
    run_path = RunDir.path_of(run_id)
    rd = RunDir.existing(run_id)
    opts = _job_options(rd)
    root = Path(backup_root).resolve() if backup_root else (
        Path(opts["backup_root"]) if opts and opts.get("backup_root") else default_backup_root())
    tier_dir = tier_backup_dir(root, run_id)
    params: dict[str, Any] = {"tier_run_id": run_id, "backup_root": str(root)}
    done = rd.done_at(RunKind.ROLLBACK) if rd is not None else None
    if done is not None:
        # Idempotent: the originals went back then; a second rollback could remove snapshots
        # Kafka wrote since, under the names the run had created.
        return notice_report(RunKind.ROLLBACK, report_id, params,
                             f"tier-prepare run {run_id} already rolled back on {done}: nothing to do",
                             code=FindingCode.ALREADY_ROLLED_BACK)
    if not tier_dir.is_dir():
        if rd is not None:
            # Everything the run keeps is durable before its first change to a log dir.
            return notice_report(RunKind.ROLLBACK, report_id, params,
                                 f"tier-prepare run {run_id} never changed a log dir (no backups of it in "
                                 f"{tier_dir}): nothing to roll back")
        return refused_report(RunKind.ROLLBACK, report_id, f"no tier-prepare run {run_id} in {run_path.parent} and "
                              f"no backups of it in {root}", params)
    try:
        parts = partition_backups(tier_dir)
        epochs = assignments(epoch_backup_dir(tier_dir))
    except (OSError, ValueError) as exc:
        return refused_report(RunKind.ROLLBACK, report_id,
                              f"the backups of run {run_id} cannot be read: {one_line(str(exc))}", params)
    dirs = sorted({doc.log_dir for _, doc in parts} | {str(Path(a.partition_dir).parent) for _, a in epochs})
    params["log_dirs"] = dirs
    lock = RunLock(run_id=run_id, run_kind="rollback", resume=f"kmigrate rollback {shlex.quote(run_id)}")
    try:
        check_not_live(dirs, resolves=run_id)
        with holding_locks(dirs, lock):
            report = RunReport.start(RunKind.ROLLBACK, params, run_id=report_id)
            by_dir: dict[str, dict[str, Any]] = {}
            for manifest, doc in parts:
                by_dir[doc.partition_dir] = {"doc": doc, "manifest": manifest, "epoch": None}
            for manifest, a in epochs:
                by_dir.setdefault(a.partition_dir, {"doc": None, "manifest": None})["epoch"] = (manifest, a)
            for pdir in sorted(by_dir):
                _rollback_partition(report, Path(pdir), by_dir[pdir])
                fault_point("tier-rollback-partition")
    except Refused as exc:
        return refused_report(RunKind.ROLLBACK, report_id, str(exc), params)
    if not (opts or {}).get("snapshots_only"):
        report.warnings.append(Finding(message=_objects_stay(run_id, opts, rd), code=OBJECTS_KEPT_CODE))
    report.finish()
    ReportStore().save(report)
    if report.status is RunStatus.OK and rd is not None:
        rd.mark_done(RunKind.ROLLBACK, report_id=report.run_id, at=report.finished_at or report.started_at,
                     summary=f"{sum(1 for _ in report.iter_units())} partition(s) rolled back")
    return report


def _objects_stay(run_id: str, opts: dict[str, Any] | None, rd: RunDir | None) -> str:
    where = "the store the run's report names"
    if opts is not None:
        with contextlib.suppress(ValueError):
            o = TierOptions.model_validate(opts)
            where = o.store_location() + (f", prefix {o.prefix!r}" if o.prefix else "")
    listed = ""
    jsonl = rd.path / JSONL_NAME if rd is not None else None
    if jsonl is not None and jsonl.is_file():
        staged = sum(1 for line in jsonl.read_text().splitlines() if line.strip())
        listed = f"; {staged} staged segment(s) listed in {jsonl}"
    return (f"objects run {run_id} staged stay in {where} (a rollback undoes only its log-dir changes; delete them "
            f"there if they are not wanted){listed}")


def _rollback_partition(report: RunReport, pdir: Path, what: dict[str, Any]) -> None:
    doc: PartitionBackup | None = what["doc"]
    epoch = what["epoch"]
    topic = doc.topic if doc else epoch[1].topic
    partition = doc.partition if doc else epoch[1].partition
    broker_id = doc.broker_id if doc else -1
    done: list[str] = []
    try:
        if doc is not None:
            done += _restore_files(pdir, what["manifest"], doc)
        if epoch is not None:
            manifest, a = epoch
            path = pdir / names.LEADER_EPOCH_CHECKPOINT_FILE
            restored = restore_leader_epoch(manifest)
            # a killed write of the checkpoint (Kafka's CheckpointFile name) is no original either
            durable_unlink(path.with_name(path.name + names.TMP_FILE_SUFFIX))
            if restored:
                done.append(f"{path.name} restored" + (" (no file)" if a.before is None else ""))
    except (OSError, ValueError) as exc:
        report.add_unit(broker_id, topic, partition, UnitResult(
            unit=pdir.name, unit_type=UnitType.FILE, path=str(pdir), status=UnitStatus.FAILED,
            errors=[Finding(file=str(pdir), code=ROLLED_BACK_CODE, message=f"not rolled back: {one_line(str(exc))}"
                            + (f" (done before: {'; '.join(done)})" if done else ""))]))
        return
    message = "; ".join(done) if done else "nothing to undo (as before the run already)"
    report.add_unit(broker_id, topic, partition, UnitResult(
        unit=pdir.name, unit_type=UnitType.FILE, path=str(pdir), status=UnitStatus.OK,
        warnings=[Finding(file=str(pdir), code=ROLLED_BACK_CODE, message=message)]))


def _restore_files(pdir: Path, manifest: Path, doc: PartitionBackup) -> list[str]:
    """The partition's replaced files back from their originals, then the files the run created
    and the temporary names its writes use removed; what was done, in words."""
    done: list[str] = []
    keep = originals_dir(manifest)
    for f in doc.replaced:
        try:
            did = restore_original(pdir / f.name, keep / f.name, f, SNAPSHOT_TMP_SUFFIX)
        except ValueError as exc:
            raise ValueError(f"{exc} {manifest}") from None
        if did is not None:
            done.append(f"{f.name} restored" if did == "bytes" else f"{f.name}'s mtime restored")
    replaced = {f.name for f in doc.replaced}
    created = [pdir / n for n in doc.created if n not in replaced]
    temporaries = [pdir / (n + SNAPSHOT_TMP_SUFFIX) for n in [*doc.created, *replaced]]
    temporaries += [pdir / (n + INDEX_REPAIR_SUFFIX) for n in [*doc.created, *replaced]
                    if n.endswith((names.INDEX_FILE_SUFFIX, names.TIME_INDEX_FILE_SUFFIX))]
    temporaries += snapshot_temporaries(pdir)
    if gone := durable_unlink(*created):
        done.append("removed " + ", ".join(p.name for p in gone))
    if left := durable_unlink(*dict.fromkeys(temporaries)):
        done.append("removed the temporary file(s) " + ", ".join(p.name for p in left))
    return done
