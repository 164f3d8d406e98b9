"""One unit of a tiered-storage readiness run: a partition, on an executor (one store client
per task).

Write the missing ``N.snapshot`` files, clean up what an interrupted earlier run left under the
partition's prefix, then stage each closed segment: ``.log``, ``.indexes``, verified, then
``.rsm-manifest`` last. A dry run writes no snapshot and stages into a throwaway file-system
store per unit under the run directory, removing each segment's objects once read back.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from migration.audit.model import Finding, FindingCode, OffsetRange, UnitResult, UnitStatus, UnitType
from migration.formats import names
from migration.formats.checkpoint_files import EpochEntry, LeaderEpochCheckpointFile, segment_leader_epochs
from migration.formats.errors import CorruptCheckpointError, KafkaFormatError
from migration.formats.fileio import durable_mkdir, durable_unlink
from migration.logdir.validate import validate_segment
from migration.migrations.common.index_repair import ReplacementInFlight, rebuild_reasons, rebuild_segment_indexes
from migration.migrations.common.leader_epoch import ASSIGNED_CODE, assign_leader_epoch, plan_assignment
from migration.migrations.tier import layout
from migration.migrations.tier.backup import PartitionBackups, epoch_backup_dir
from migration.migrations.tier.filesystem import FileSystemObjectStore
from migration.migrations.tier.options import TierOptions, open_store
from migration.migrations.tier.plan import PartitionParams
from migration.migrations.tier.producer_state import (
    ProducerStateError,
    SnapshotAction,
    ensure_segment_snapshots,
    snapshot_temporaries,
)
from migration.migrations.tier.store import LAYOUT_METADATA_KEY, ChecksumMismatch, ObjectStore, file_sha256
from migration.runtime.engine import Unit

# the run that staged a manifest, in the manifest object's user metadata (lower case, as S3 keeps it)
RUN_METADATA_KEY = "kmigrate-run-id"

log = logging.getLogger(__name__)


class _SegmentPlan(BaseModel):
    base: int
    next_offset: int
    size: int
    mtime_ns: int
    max_timestamp: int
    formats: list[str]
    records: int | None = None


def _segment_plans(unit: Unit) -> tuple[list[_SegmentPlan], int]:
    segs = PartitionParams.model_validate(unit.params).segments
    plans = [_SegmentPlan(base=s["base_offset"], next_offset=n["base_offset"], size=s["size"], mtime_ns=s["mtime_ns"],
                          max_timestamp=s["max_timestamp"], formats=s.get("formats", []), records=s.get("records"))
             for s, n in zip(segs, segs[1:], strict=False)]
    return plans, segs[-1]["base_offset"]


def _check_unchanged(pdir: Path, unit: Unit) -> None:
    """The driver planned from a listing; refuse to act on a directory that changed since."""
    bases = sorted(names.offset_from_file_name(e.name) for e in os.scandir(pdir)
                   if e.name.endswith(names.LOG_FILE_SUFFIX))
    segments = PartitionParams.model_validate(unit.params).segments
    planned = [s["base_offset"] for s in segments]
    if bases != planned:
        raise RuntimeError(f"{pdir}: segments changed since prepare (planned {planned}, found {bases})")
    for s in segments[:-1]:
        st = (pdir / names.log_file_name(s["base_offset"])).stat()
        if st.st_size != s["size"] or st.st_mtime_ns != s["mtime_ns"]:
            raise RuntimeError(f"{pdir / names.log_file_name(s['base_offset'])}: changed since prepare")


def _read_optional(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


class _StageContext(BaseModel):
    topic: str
    partition: int
    topic_id: str
    broker_id: int
    pdir: str
    epochs: list[tuple[int, int]]
    options: TierOptions


def _segment_result(plan: _SegmentPlan, pdir: Path, status: UnitStatus, *, started: float,
                    errors: list[Finding] | None = None, warnings: list[Finding] | None = None) -> UnitResult:
    fmt = plan.formats[0] if len(plan.formats) == 1 else ("mixed" if plan.formats else None)
    return UnitResult(unit=names.log_file_name(plan.base), unit_type=UnitType.SEGMENT,
                      path=str(pdir / names.log_file_name(plan.base)), status=status, input_format=fmt,
                      output_format=layout.LAYOUT_NAME if status is UnitStatus.OK else None,
                      bytes_before=plan.size, bytes_after=plan.size if status is UnitStatus.OK else None,
                      records_before=plan.records, records_after=plan.records if status is UnitStatus.OK else None,
                      offsets=OffsetRange(first=plan.base, last=plan.next_offset - 1),
                      duration_s=max(0.0, time.monotonic() - started), errors=errors or [], warnings=warnings or [])


def _manifest_for(ctx: _StageContext, plan: _SegmentPlan, seg_uuid: str, blob: layout.IndexesBlob,
                  epochs: list[EpochEntry]) -> layout.SegmentManifest:
    # Kafka's LogSegment.largestTimestamp: the max record timestamp, else the .log mtime.
    max_ts = plan.max_timestamp if plan.max_timestamp >= 0 else plan.mtime_ns // 1_000_000
    return layout.SegmentManifest(
        chunkIndex=layout.FixedChunkIndex.untransformed(plan.size, ctx.options.chunk_size),
        segmentIndexes=blob.indexes,
        remoteLogSegmentMetadata=layout.RemoteLogSegmentMetadataJson(
            remoteLogSegmentId=layout.RemoteLogSegmentIdJson(
                topicIdPartition=layout.TopicIdPartitionJson(
                    topicId=ctx.topic_id, topicPartition=layout.TopicPartitionJson(topic=ctx.topic,
                                                                                   partition=ctx.partition)),
                id=seg_uuid),
            startOffset=plan.base, endOffset=plan.next_offset - 1, maxTimestampMs=max_ts,
            eventTimestampMs=int(time.time() * 1000),
            segmentLeaderEpochs={str(e.epoch): e.start_offset for e in epochs},
            segmentSizeInBytes=plan.size, brokerId=ctx.broker_id),
    )


def _stage_segment(store: ObjectStore, ctx: _StageContext, plan: _SegmentPlan, log_sha: str
                   ) -> tuple[UnitStatus, dict[str, Any] | None, list[Finding]]:
    """Stage one closed segment. Returns (status, metadata record, warnings); raises on failure
    after removing what this attempt wrote (the manifest is written only after both data
    objects are verified, so no manifest ever points at missing or partial data). A dry run
    stages into its throwaway store and removes the objects again: PLANNED, no record."""
    opts = ctx.options
    pdir = Path(ctx.pdir)
    prefix = names.filename_prefix_from_offset(plan.base)
    seg_uuid = layout.segment_uuid(ctx.topic_id, ctx.partition, plan.base, log_sha)
    keys = layout.SegmentKeys.of(layout.object_stem(opts.prefix, ctx.topic, ctx.topic_id, ctx.partition, plan.base,
                                                    seg_uuid))
    entries = [EpochEntry(e, o) for e, o in ctx.epochs]
    epochs = segment_leader_epochs(entries, plan.base, plan.next_offset)
    if not epochs:
        raise _NotStageable(FindingCode.NO_LEADER_EPOCH,
                            f"no leader epoch covers [{plan.base}, {plan.next_offset}): the "
                            "partition's leader-epoch-checkpoint has no entry at or below this segment (data written "
                            "before KIP-101 carries none, also once rewritten as v2) and RemoteLogSegmentMetadata "
                            "requires a non-empty epoch map; fix: run with --assign-leader-epoch (DAG param "
                            "assign_leader_epoch), which assigns leader epoch 0 from the log start offset")
    offset_index = _read_optional(pdir / (prefix + names.INDEX_FILE_SUFFIX))
    time_index = _read_optional(pdir / (prefix + names.TIME_INDEX_FILE_SUFFIX))
    snapshot = _read_optional(pdir / names.producer_snapshot_file_name(plan.next_offset))
    if offset_index is None or time_index is None:
        raise _NotStageable(FindingCode.MISSING_INDEX, f"{prefix}: offset or time index missing after the rebuild")
    if snapshot is None:
        if opts.dry_run:
            snapshot = b""  # would be written by this run
        else:
            raise _NotStageable(FindingCode.MISSING_SNAPSHOT,
                                f"{names.producer_snapshot_file_name(plan.next_offset)} missing")
    txn = _read_optional(pdir / (prefix + names.TXN_INDEX_FILE_SUFFIX))
    blob = layout.build_indexes_blob(offset_index, time_index, snapshot,
                                     layout.leader_epoch_index_text(entries, plan.next_offset), txn)
    manifest = _manifest_for(ctx, plan, seg_uuid.to_string(), blob, epochs)
    meta = {LAYOUT_METADATA_KEY: layout.LAYOUT_NAME} | ({RUN_METADATA_KEY: opts.run_id} if opts.run_id else {})
    staged = store.head(keys.manifest)
    if staged is not None:
        old = layout.SegmentManifest.from_bytes(store.get_bytes(keys.manifest))
        same = (old.segment_indexes == manifest.segment_indexes
                and old.chunk_index == manifest.chunk_index
                and store.matches(keys.log, size=plan.size, sha256=log_sha)
                and store.matches(keys.indexes, size=len(blob.data), sha256=_sha256(blob.data)))
        if same:
            by = staged.metadata.get(RUN_METADATA_KEY)
            when = datetime.fromtimestamp(old.remote_log_segment_metadata.event_timestamp_ms / 1000, UTC)
            return UnitStatus.SKIPPED, _record(old, txn), [Finding(
                code=FindingCode.ALREADY_STAGED, file=str(Path(ctx.pdir) / names.log_file_name(plan.base)),
                message=f"already staged by {'run ' + by if by else 'an earlier run'} on "
                        f"{when:%Y-%m-%d %H:%M:%S} UTC (its objects match the segment): left as it is")]
        # A manifest whose data is missing or different must not survive: drop it first.
        store.delete([keys.manifest])
    try:
        if not _reusable(store, keys.log, plan.size, log_sha, opts.part_size):
            store.upload_file(keys.log, pdir / names.log_file_name(plan.base), sha256=log_sha,
                              part_size=opts.part_size, multipart_threshold=opts.multipart_threshold, metadata=meta)
        store.put_bytes(keys.indexes, blob.data, metadata=meta)
        store.put_bytes(keys.manifest, manifest.to_bytes(), content_type="application/json", metadata=meta)
    except BaseException:
        # Orphans removed on failure (best effort: the next run's cleanup catches the rest).
        try:
            store.delete(keys.manifest_first())
        except Exception as exc:
            log.warning("cleanup of %s failed: %s", keys.manifest, exc)
        raise
    if opts.dry_run:
        # Staged and read back in the throwaway store: what a real run would upload works.
        # Removed at once, so the scratch space is one segment's objects at a time.
        store.delete(keys.manifest_first())
        return UnitStatus.PLANNED, None, []
    return UnitStatus.OK, _record(manifest, txn), []


def _reusable(store: ObjectStore, key: str, size: int, sha256: str, part_size: int) -> bool:
    """A data object left by an interrupted run of this very segment: reuse it only after
    reading it back in full (its metadata claims the right SHA-256; the bytes must agree)."""
    if not store.matches(key, size=size, sha256=sha256):
        return False
    try:
        store.verify(key, size=size, sha256=sha256, part_size=part_size)
    except ChecksumMismatch as exc:
        log.warning("not reusing %s: %s", key, exc)
        return False
    return True


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _record(manifest: layout.SegmentManifest, txn: bytes | None) -> dict[str, Any]:
    meta = manifest.remote_log_segment_metadata
    tip = meta.remote_log_segment_id.topic_id_partition
    return {"version": layout.JSONL_VERSION, "apiKey": layout.REMOTE_LOG_SEGMENT_METADATA_RECORD_API_KEY,
            "topicIdPartition": f"{tip.topic_id}:{tip.topic_partition.topic}-{tip.topic_partition.partition}",
            "record": layout.remote_log_segment_metadata_record(meta, txn_index_empty=not txn)}


class _NotStageable(Exception):
    def __init__(self, code: FindingCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _cleanup_partition_prefix(store: ObjectStore, part_prefix: str, keep_stems: set[str]) -> list[Finding]:
    """What an interrupted run left: the store's temporary files of keys under the partition's
    prefix (the file store's), abort every incomplete multipart upload under the
    partition's prefix (one unit per partition, so none of them is being completed), delete
    manifests whose data is gone and data objects that have no manifest, except those of a
    segment this unit is about to stage (they are verified and reused, or replaced)."""
    found = [Finding(message=f"removed {name}, what a killed write left in the store's temporary files",
                     code=FindingCode.ORPHAN_REMOVED, file=name) for name in store.remove_temporaries(part_prefix)]
    for upload in store.list_multipart_uploads(part_prefix):
        store.abort_multipart(upload.key, upload.upload_id)
        found.append(Finding(message=f"aborted a stale multipart upload of {upload.key}",
                             code=FindingCode.STALE_MULTIPART, file=upload.key))
    by_stem: dict[str, set[str]] = {}
    for obj in store.list_objects(part_prefix):
        parts = layout.split_key(obj.key)
        if parts is not None:
            by_stem.setdefault(parts[0], set()).add(parts[1])
    doomed: list[str] = []
    for stem, suffixes in sorted(by_stem.items()):
        complete = suffixes >= {layout.LOG_SUFFIX, layout.INDEXES_SUFFIX, layout.MANIFEST_SUFFIX}
        if complete or stem in keep_stems:
            continue
        doomed.extend(stem + s for s in sorted(suffixes))
    if doomed:
        store.delete(doomed)
        found.extend(Finding(message=f"removed orphan object {k} (no complete segment)",
                             code=FindingCode.ORPHAN_REMOVED, file=k) for k in doomed)
    return found


def run_unit(unit: Unit, options: dict[str, Any] | TierOptions) -> dict[str, Any]:
    """Executor side of one partition: snapshots, then staging of its closed segments in order."""
    opts = options if isinstance(options, TierOptions) else TierOptions.model_validate(options)
    scratch = _scratch_store_root(opts, unit.id) if opts.dry_run else None
    try:
        return _run_unit(unit, opts, scratch)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _run_unit(unit: Unit, opts: TierOptions, scratch: Path | None) -> dict[str, Any]:
    started = time.monotonic()
    pdir = Path(unit.path)
    assert unit.topic is not None and unit.partition is not None
    params = PartitionParams.model_validate(unit.params)
    topic_id = params.topic_id
    results: list[UnitResult] = []
    records: list[dict[str, Any]] = []
    part_findings: list[Finding] = []
    base_out: dict[str, Any] = {"broker_id": unit.broker_id, "topic": unit.topic, "partition": unit.partition}

    def partition_result(status: UnitStatus, errors: list[Finding] | None = None) -> UnitResult:
        return UnitResult(unit=pdir.name, unit_type=UnitType.FILE, path=str(pdir), status=status,
                          duration_s=time.monotonic() - started,
                          errors=errors or [], warnings=part_findings)

    backups: PartitionBackups | None = None
    try:
        _check_unchanged(pdir, unit)
        plans, _active = _segment_plans(unit)
        bases = [s["base_offset"] for s in params.segments]
        # 1. Snapshots, one streaming pass (they depend on everything below them).
        # What a killed write of a snapshot left, first: a re-run finishes what it started.
        leftovers = snapshot_temporaries(pdir)
        if not opts.dry_run:
            durable_unlink(*leftovers)
        part_findings.extend(Finding(
            file=str(f), code=FindingCode.LEFTOVER_FILE, message=("would remove " if opts.dry_run else "removed ")
            + f"{f.name}, the temporary name of a snapshot write an earlier run did not finish") for f in leftovers)
        backups = None if opts.dry_run or opts.backup_dir is None else PartitionBackups(
            opts.backup_dir, pdir, log_dir=unit.log_dir, broker_id=unit.broker_id, topic=unit.topic,
            partition=unit.partition)
        for outcome in ensure_segment_snapshots(
                pdir, bases, dry_run=opts.dry_run, before_replace=backups.will_replace if backups else None,
                before_create=backups.will_create if backups else None):
            if outcome.action is SnapshotAction.EXISTING:
                continue
            replaced = [] if outcome.replaced is None else [Finding.of_error(
                outcome.replaced, FindingCode.SNAPSHOT_CORRUPT, severity="warning")]
            for f in replaced:  # a bad snapshot is never staged: said, and rebuilt from the log
                f.message = f"{f.where}: {f.message}; " + ("would be rebuilt" if opts.dry_run else "rebuilt") + \
                    " from the log, never staged as it was"
            results.append(UnitResult(
                unit=names.producer_snapshot_file_name(outcome.offset), unit_type=UnitType.FILE, path=outcome.path,
                status=UnitStatus.PLANNED if opts.dry_run else UnitStatus.OK,
                output_format=f"producer-snapshot-v1-{outcome.action.value}", warnings=replaced,
                bytes_after=None if opts.dry_run else Path(outcome.path).stat().st_size))
    except (ProducerStateError, KafkaFormatError, RuntimeError, OSError) as exc:
        err = Finding(message=f"producer snapshots: {exc}; fix: 'kmigrate validate {pdir}' names the bytes; restore "
                      "the segment from a replica, or exclude the topic", code=FindingCode.SNAPSHOT_REBUILD_FAILED,
                      file=str(pdir))
        return {**base_out, "status": "failed", "error": str(exc), "unit_result": partition_result(
            UnitStatus.FAILED, [err]).model_dump(mode="json"), "segment_results": [
            r.model_dump(mode="json") for r in results], "segment_metadata": []}
    if opts.snapshots_only:
        return {**base_out, "status": "ok", "unit_result": partition_result(UnitStatus.OK).model_dump(mode="json"),
                "segment_results": [r.model_dump(mode="json") for r in results], "segment_metadata": []}

    try:
        # What is staged is read now and checked, not taken from the plan: a bad file fails here.
        epochs = checked_leader_epochs(pdir)
    except KafkaFormatError as exc:
        err = Finding.of_error(exc, FindingCode.LEADER_EPOCH_CORRUPT)
        err.message = (f"{err.where}: {err.message}; nothing of the partition staged; fix: restore the "
                       "leader-epoch-checkpoint from a replica (the broker stopped)")
        return {**base_out, "status": "failed", "error": str(exc), "unit_result": partition_result(
            UnitStatus.FAILED, [err]).model_dump(mode="json"), "segment_results": [
            r.model_dump(mode="json") for r in results], "segment_metadata": []}
    if opts.assign_leader_epoch:
        try:
            epochs = _assign_epoch(pdir, results, dry_run=opts.dry_run, backup_dir=None if opts.backup_dir is None
                                   else epoch_backup_dir(opts.backup_dir)) or epochs
        except (KafkaFormatError, OSError, ValueError) as exc:
            err = Finding(message=f"leader epoch not assigned: {exc}", code=FindingCode.LEADER_EPOCH_FAILED,
                          file=str(pdir))
            return {**base_out, "status": "failed", "error": str(exc), "unit_result": partition_result(
                UnitStatus.FAILED, [err]).model_dump(mode="json"), "segment_results": [
                r.model_dump(mode="json") for r in results], "segment_metadata": []}
    ctx = _StageContext(topic=unit.topic, partition=unit.partition, topic_id=topic_id, broker_id=unit.broker_id,
                        pdir=str(pdir), epochs=epochs, options=opts)
    store: ObjectStore | None = None
    shas: dict[int, str] = {}
    failed_at: int | None = None
    try:
        # A dry run stages into a throwaway file-system store of its own (docs/operations.md): the
        # same code path as a real run, the configured store never touched.
        store = FileSystemObjectStore(scratch) if scratch is not None else open_store(opts)
        keep: set[str] = set()
        for plan in plans:
            shas[plan.base] = file_sha256(pdir / names.log_file_name(plan.base))
            seg_uuid = layout.segment_uuid(topic_id, unit.partition, plan.base, shas[plan.base])
            keep.add(layout.object_stem(opts.prefix, unit.topic, topic_id, unit.partition, plan.base, seg_uuid))
        part_findings.extend(_cleanup_partition_prefix(
            store, layout.partition_prefix(opts.prefix, unit.topic, topic_id, unit.partition), keep))
    except Exception as exc:
        err = Finding(message=f"before staging: {type(exc).__name__}: {exc}", code=FindingCode.STAGING_FAILED,
                      file=str(pdir))
        return {**base_out, "status": "failed", "error": str(exc), "unit_result": partition_result(
            UnitStatus.FAILED, [err]).model_dump(mode="json"), "segment_results": [
            r.model_dump(mode="json") for r in results], "segment_metadata": [], "requests": _requests(store)}

    for plan in plans:
        seg_started = time.monotonic()
        if failed_at is not None:
            # Kafka copies segments in offset order; a gap would leave the remote log with a hole.
            results.append(_segment_result(plan, pdir, UnitStatus.SKIPPED, started=seg_started, warnings=[Finding(
                message=f"not staged: segment {failed_at} before it could not be staged",
                code=FindingCode.AFTER_FAILURE)]))
            continue
        try:
            repairs = _validate_closed_segment(pdir, plan, ctx.epochs, repair=not opts.dry_run, backups=backups)
            if opts.dry_run and repairs:
                results.append(_segment_result(plan, pdir, UnitStatus.PLANNED, started=seg_started, warnings=[
                    Finding(code=FindingCode.INDEX_REBUILT,
                            message="a real run rebuilds its indexes first: " + "; ".join(str(f) for f in repairs))]))
                continue
            status, record, warns = _stage_segment(store, ctx, plan, shas[plan.base])
            if record is not None:
                records.append({**record, "newlyStaged": status is UnitStatus.OK})
            if repairs:
                warns = [Finding(code=FindingCode.INDEX_REBUILT,
                                 message="offset and time index rebuilt with Kafka's rules before staging: "
                                 + "; ".join(f"{f.code}: {f.message}" for f in repairs)), *warns]
            results.append(_segment_result(plan, pdir, status, started=seg_started, warnings=warns))
        except _NotStageable as exc:
            failed_at = plan.base
            results.append(_segment_result(plan, pdir, UnitStatus.FAILED, started=seg_started,
                                           errors=[Finding(message=str(exc), code=exc.code)]))
        except Exception as exc:  # network, checksum, corrupt data: this segment failed
            failed_at = plan.base
            log.warning("staging %s/%s failed: %s", pdir, plan.base, exc)
            results.append(_segment_result(plan, pdir, UnitStatus.FAILED, started=seg_started, errors=[Finding(
                message=f"{type(exc).__name__}: {exc}; fix: check the bucket, endpoint and credentials, then run "
                        "again (staging resumes where it stopped)", code=FindingCode.STAGING_FAILED)]))
    partition_status = "failed" if failed_at is not None else "ok"
    summary = partition_result(UnitStatus.FAILED if failed_at is not None else
                               (UnitStatus.PLANNED if opts.dry_run else UnitStatus.OK))
    return {**base_out, "status": partition_status, "unit_result": summary.model_dump(mode="json"),
            "segment_results": [r.model_dump(mode="json") for r in results], "segment_metadata": records,
            "requests": _requests(store)}


def _assign_epoch(pdir: Path, results: list[UnitResult], *, dry_run: bool, backup_dir: Path | None
                  ) -> list[tuple[int, int]] | None:
    """``assign_leader_epoch``: epoch 0 from the log start offset where no entry covers it (a
    dry run only plans it), the original checkpoint kept in ``backup_dir`` first (the upgrade's
    mechanism: a rollback restores it byte for byte); the assignment is reported as a unit of
    its own. Returns the entries staging must use, or None when nothing changed."""
    a = plan_assignment(pdir) if dry_run else assign_leader_epoch(pdir, backup_dir=backup_dir)
    if a is None:
        return None
    path = pdir / names.LEADER_EPOCH_CHECKPOINT_FILE
    results.append(UnitResult(unit=path.name, unit_type=UnitType.FILE, path=str(path),
                              status=UnitStatus.PLANNED if dry_run else UnitStatus.OK,
                              warnings=[Finding(file=str(path), code=ASSIGNED_CODE,
                                                message=("would be " if dry_run else "") + a.describe())]))
    return [(epoch, start) for epoch, start in a.after]


def checked_leader_epochs(pdir: Path) -> list[tuple[int, int]]:
    """The partition's ``leader-epoch-checkpoint`` entries (none without the file), checked as
    staging needs them: Kafka's reader (version, count, line syntax; byte positions), then
    epochs and start offsets not negative and strictly increasing, as Kafka's leader-epoch
    cache keeps them. Raises :class:`KafkaFormatError` naming the file and the line's byte."""
    path = pdir / names.LEADER_EPOCH_CHECKPOINT_FILE
    if not path.exists():
        return []
    ckpt = LeaderEpochCheckpointFile.read(path)
    lines = path.read_bytes().splitlines(keepends=True)
    prev: EpochEntry | None = None
    for i, e in enumerate(ckpt.entries):
        position = sum(len(line) for line in lines[:i + 2])  # version and count lines first
        if e.epoch < 0 or e.start_offset < 0:
            raise CorruptCheckpointError(f"negative leader epoch or start offset at line {i + 3}", path=path,
                                         position=position, expected="epoch >= 0 and start offset >= 0",
                                         found=f"{e.epoch} {e.start_offset}")
        if prev is not None and (e.epoch <= prev.epoch or e.start_offset <= prev.start_offset):
            raise CorruptCheckpointError(f"leader epoch entries out of order at line {i + 3}", path=path,
                                         position=position, expected=f"epoch > {prev.epoch} and start offset > "
                                         f"{prev.start_offset}", found=f"{e.epoch} {e.start_offset}")
        prev = e
    return [(e.epoch, e.start_offset) for e in ckpt.entries]


def _requests(store: ObjectStore | None) -> dict[str, int]:
    return dict(store.requests) if store is not None else {}


def _scratch_store_root(opts: TierOptions, unit_id: str) -> Path:
    """A fresh directory for one dry-run unit's throwaway store, under the run directory (not
    the system temp dir, which may be memory-backed: it holds a segment's objects at a time).
    Named after the unit, so a re-run of a killed dry run removes what the killed one left."""
    base = Path(opts.scratch_dir) if opts.scratch_dir else Path(tempfile.gettempdir())
    d = base / ("unit-" + hashlib.sha256(unit_id.encode()).hexdigest()[:16])
    shutil.rmtree(d, ignore_errors=True)
    return durable_mkdir(d)


def _validate_closed_segment(pdir: Path, plan: _SegmentPlan, epochs: list[tuple[int, int]], *, repair: bool,
                             backups: PartitionBackups | None = None) -> list[Finding]:
    """Batch framing and CRCs, offsets and indexes of the segment about to be staged. Index
    findings are not a reason to refuse: the indexes are rebuilt from the ``.log`` with Kafka's
    recovery rules (``repair``), and the findings returned; anything else wrong refuses."""
    log = pdir / names.log_file_name(plan.base)
    res, _ = validate_segment(log, next_base_offset=plan.next_offset, deep=False, leader_epochs=epochs or None)
    index_findings = rebuild_reasons(res.findings, log)
    errors = [f for f in res.findings if f.severity == "error" and f not in index_findings]
    if errors:
        raise _NotStageable(FindingCode.CORRUPT, "; ".join(str(f) for f in errors[:3])
                            + f"; fix: restore {log.name} from a replica (the broker stopped), or exclude the topic")
    if index_findings and repair:
        if backups is not None:  # the indexes as they were, kept (or listed, when missing) first
            prefix = names.filename_prefix_from_offset(plan.base)
            backups.will_rewrite([pdir / (prefix + names.INDEX_FILE_SUFFIX),
                                  pdir / (prefix + names.TIME_INDEX_FILE_SUFFIX)])
        try:
            rebuild_segment_indexes(pdir, plan.base, findings=index_findings)
        except (KafkaFormatError, ReplacementInFlight) as exc:
            raise _NotStageable(FindingCode.CORRUPT, f"indexes cannot be rebuilt: {exc}") from None
    return index_findings

