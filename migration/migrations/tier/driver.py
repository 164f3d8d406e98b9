"""Tiered-storage readiness (KIP-405, KIP-952): producer snapshots, then staging to an object store.

Kafka's RemoteLogManager fails with a NullPointerException on a segment without a
segment-aligned producer snapshot (data written before 2.8, docs/formats.md §5.5/§5.6). This
operation, run offline on a stopped broker's log dirs, makes partitions ready and stages their
closed segments in the object layout of the open-source tiered-storage plugin
(:mod:`migration.migrations.tier.layout`).

Four steps, shared by the CLI, the inline and Spark engines and the Airflow DAG:
  0. :func:`check_store` (driver, before anything is written): credentials, then a write probe
     (:mod:`.store`: the object-store interface; :mod:`.s3` and :mod:`.filesystem` its backends).
  1. :func:`prepare_tier` (driver): safety (a live lock refuses), inventory, topic ids (from
     ``partition.metadata`` or the metadata log), readiness; one ``tier-partition`` unit per
     ready partition (its snapshots must be rebuilt in offset order, so a partition is never
     split across tasks); ``prepare.json`` lists the partitions that are not ready and why.
  2. :func:`run_unit` (executor, one store client per task): write the missing ``N.snapshot``
     files, clean up what an interrupted earlier run left under the partition's prefix, then
     stage each closed segment: ``.log``, ``.indexes``, verified, then ``.rsm-manifest`` last.
     A dry run writes no snapshot and stages into a throwaway file-system store per unit under
     the run directory, removing each segment's objects once read back.
  3. :func:`finalize_tier` (driver): the run report and ``remote-log-segment-metadata.jsonl``.

The metadata brokers need to serve the staged segments is not published here: each run writes
``remote-log-segment-metadata.jsonl`` (one ``RemoteLogSegmentMetadataRecord`` payload per staged
segment, Kafka's field names); docs/operations.md says how an operator publishes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from migration.audit.model import (
    Finding,
    FormatVersions,
    OffsetRange,
    RunKind,
    RunReport,
    UnitResult,
    UnitStatus,
    UnitType,
    new_run_id,
)
from migration.audit.store import ReportStore
from migration.formats import names
from migration.formats.checkpoint_files import EpochEntry, segment_leader_epochs
from migration.formats.errors import KafkaFormatError
from migration.formats.fileio import durable_replace
from migration.logdir.model import LogDir, Partition, scan_log_dir
from migration.logdir.validate import validate_segment
from migration.migrations.common.index_repair import ReplacementInFlight, rebuild_reasons, rebuild_segment_indexes
from migration.migrations.common.leader_epoch import ASSIGNED_CODE, assign_leader_epoch, plan_assignment
from migration.migrations.tier import layout
from migration.migrations.tier.filesystem import FileSystemObjectStore, root_from_url
from migration.migrations.tier.metadata import read_metadata_image
from migration.migrations.tier.producer_state import ProducerStateError, SnapshotAction, ensure_segment_snapshots
from migration.migrations.tier.s3 import S3ObjectStore, S3Settings, bucket_name_problem, endpoint_url_problem
from migration.migrations.tier.store import (
    DEFAULT_PART_SIZE,
    LAYOUT_METADATA_KEY,
    ChecksumMismatch,
    ObjectStore,
    StoreUnavailable,
    file_sha256,
    one_line,
    prefix_problem,
)
from migration.runtime.documents import PrepareDocument
from migration.runtime.engine import Progress, Unit, UnitKind, get_engine, unit_kinds
from migration.runtime.runs import RunDir
from migration.runtime.safety import Refused, RunLock, check_not_live, holding_locks

log = logging.getLogger(__name__)

JSONL_NAME = "remote-log-segment-metadata.jsonl"
UNIT_KIND = "tier-partition"
DRY_RUN_STORE = "dry-run-store"


class TierOptions(BaseModel):
    """Run options; they travel in ``job.json`` to executors, so they never hold a secret.

    The store is a bucket (``bucket``, ``endpoint_url``, ``region``, ...: the S3 backend) or a
    ``store_url`` of the form ``file:///PATH`` (the file-system backend). Names are checked
    here, so a wrong one fails before anything happens, in one line (:func:`check_store` then
    checks credentials and reachability)."""

    bucket: str | None = None
    store_url: str | None = Field(default=None, description="file:///PATH: stage into a directory instead of S3")
    endpoint_url: str | None = None
    prefix: str = ""
    region: str = "us-east-1"
    path_style: bool = True
    part_size: int = Field(default=DEFAULT_PART_SIZE, ge=1)
    multipart_threshold: int = Field(default=DEFAULT_PART_SIZE, ge=1)
    chunk_size: int = Field(default=4 * 1024 * 1024, ge=1, description="The manifest's fixed chunk size (the "
                                                                       "plugin's chunk.size)")
    snapshots_only: bool = False
    dry_run: bool = False
    assign_leader_epoch: bool = Field(default=False, description="Give data written before KIP-101 leader epoch 0 "
                                      "from the log start offset in the leader-epoch-checkpoint (docs/formats.md "
                                      "§5.7), so its segments get a non-empty segmentLeaderEpochs map")
    metadata_log_dirs: list[str] = Field(default_factory=list)
    compacted_topics: list[str] = Field(default_factory=list)
    excluded_topics: dict[str, str] = Field(default_factory=dict, description="Topic -> why the operator keeps "
                                            "it out (reported ineligible, never a failure)")
    profile: str | None = None
    aws_conn_id: str | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    max_attempts: int = Field(default=5, ge=1)
    scratch_dir: str | None = Field(default=None, description="Where a dry run's throwaway stores go (set by "
                                    "prepare: the run directory)")

    @field_validator("bucket")
    @classmethod
    def _bucket_name(cls, value: str | None) -> str | None:
        if value is not None and (problem := bucket_name_problem(value)):
            raise ValueError(problem)
        return value

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and (problem := endpoint_url_problem(value)):
            raise ValueError(problem)
        return value

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if problem := prefix_problem(value):
            raise ValueError(problem)
        return value

    @field_validator("store_url")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        if value is not None:
            root_from_url(value)
        return value

    @model_validator(mode="after")
    def _one_store(self) -> Self:
        if self.bucket is None and self.store_url is None:
            raise ValueError("no store: give a bucket (S3) or a store URL file:///PATH")
        if self.bucket is not None and self.store_url is not None:
            raise ValueError("give a bucket (S3) or a store URL (file:///PATH), not both")
        if self.store_url is not None and (self.endpoint_url or self.profile or self.aws_conn_id):
            raise ValueError("an endpoint URL, profile or Airflow connection is for S3 (a bucket), not a store URL")
        return self

    def s3_settings(self) -> S3Settings:
        return S3Settings(endpoint_url=self.endpoint_url, region=self.region, path_style=self.path_style,
                          profile=self.profile, aws_conn_id=self.aws_conn_id, connect_timeout=self.connect_timeout,
                          read_timeout=self.read_timeout, max_attempts=self.max_attempts)

    def store_location(self) -> str:
        """The store in words, for messages (never a secret)."""
        if self.store_url is not None:
            return f"file store {root_from_url(self.store_url)}"
        return f"bucket {self.bucket} at {self.endpoint_url or 'AWS'}"


def open_store(options: TierOptions) -> ObjectStore:
    """The store the options name: the file-system backend for a store URL, else S3. Raises
    :class:`~.store.StoreArgumentError` when the client cannot be made (an unknown profile or
    Airflow connection)."""
    if options.store_url is not None:
        return FileSystemObjectStore(root_from_url(options.store_url))
    assert options.bucket is not None  # the model requires one of the two
    return S3ObjectStore(options.s3_settings(), options.bucket)


def check_store(options: TierOptions, *, run_id: str) -> None:
    """What a run checks before it writes a snapshot or uploads anything (the names were
    checked by :class:`TierOptions`): the credentials resolve (:class:`~.store.StoreArgumentError`:
    exit 2), then one small probe object under the prefix is written, read back, listed and
    deleted (:class:`~.store.StoreUnavailable`: a run-level error, exit 1). A dry run and a
    snapshots-only run use no store, so they check nothing here."""
    if options.dry_run or options.snapshots_only:
        return
    store = open_store(options)
    store.check_credentials()
    store.check_writable(layout.probe_key(options.prefix, f"{run_id}-{secrets.token_hex(4)}"))


class NotReady(BaseModel):
    broker_id: int
    topic: str
    partition: int
    path: str
    reason: str
    code: str
    status: UnitStatus = UnitStatus.FAILED


class TierPrepare(PrepareDocument):
    """``prepare.json`` of a tiering run: the partitions that take no part or are not ready,
    and why; a refusal, an unusable store, or (a scheduled run) nothing changed."""

    kind: str = RunKind.TIER_PREPARE.value
    options: dict[str, Any] = Field(default_factory=dict, description="TierOptions as the run used them")
    metadata_sources: list[str] = Field(default_factory=list)
    not_ready: list[NotReady] = Field(default_factory=list)
    units: int = 0
    store_error: str | None = None
    nothing_dirty: bool = Field(default=False, description="A scheduled run whose session found nothing changed")
    clean: int = 0


class PartitionParams(BaseModel):
    """Parameters of a ``tier-partition`` unit."""

    model_config = ConfigDict(extra="forbid")

    topic_id: str
    topic_id_source: str
    segments: list[dict[str, Any]] = Field(description="base_offset, size, mtime_ns, max_timestamp, formats of "
                                           "every segment, the active one last")
    leader_epochs: list[tuple[int, int]] = Field(default_factory=list)


class TierPlan(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_dir: RunDir
    prepare: TierPrepare
    units: list[Unit]
    options: TierOptions



# ------------------------------------------------------------------------------------- prepare


def _broker_id(d: LogDir, override: int | None) -> int:
    if override is not None:
        return override
    return d.node_id if d.node_id is not None else -1


def _corrupt_reason(p: Partition) -> str | None:
    if p.topic_id_error:
        return f"partition.metadata is corrupt: {p.topic_id_error}"
    for s in p.segments[:-1]:  # the active segment is not staged; Kafka recovers its tail
        if s.stats is None:
            continue
        if s.stats.error:
            return f"corrupt segment {s.log_file}: {s.stats.error.get('message', s.stats.error)}"
        if s.stats.trailing_bytes:
            return f"corrupt segment {s.log_file}: {s.stats.trailing_bytes} trailing bytes in a closed segment"
    return None


def prepare_tier(log_dirs: list[str | os.PathLike[str]], *, run_id: str, options: TierOptions,
                 broker_id: int | None = None, only_partitions: list[str] | None = None) -> TierPlan:
    """Plan a run: ``job.json`` (units, options) and ``prepare.json`` (readiness findings), and
    the plan itself. Raises :class:`Refused` when a live broker holds a log dir."""
    started = time.time()
    rd = RunDir(run_id)
    if options.dry_run and options.scratch_dir is None:
        options = options.model_copy(update={"scratch_dir": str(rd.path / DRY_RUN_STORE)})
    warnings: list[str] = check_not_live(log_dirs, run_id=run_id)
    dirs = [scan_log_dir(d) for d in log_dirs]
    for d in dirs:
        if not d.clean_shutdown:
            # Nothing is rewritten here, but snapshots are rebuilt from what is on disk: a tail Kafka
            # would truncate at startup lies in the active segment, which is never read for them.
            warnings.append(f"{d.path}: unclean shutdown (no {names.CLEAN_SHUTDOWN_FILE}); proceeding, only closed "
                            "segments are read")
    meta_dirs = list(options.metadata_log_dirs) + [d.path for d in dirs if d.metadata_log is not None]
    image = read_metadata_image(meta_dirs)
    warnings.extend(image.problems)
    compacted = set(options.compacted_topics)
    excluded = options.excluded_topics
    wanted = set(only_partitions) if only_partitions is not None else None

    units: list[Unit] = []
    not_ready: list[NotReady] = []
    for d in dirs:
        bid = _broker_id(d, broker_id)
        for p in d.partitions:
            if p.kind != names.PartitionDirKind.LIVE.value or (wanted is not None and p.name not in wanted):
                continue

            def refuse(reason: str, code: str, status: UnitStatus = UnitStatus.FAILED, p: Partition = p,
                       bid: int = bid) -> None:
                not_ready.append(NotReady(broker_id=bid, topic=p.topic, partition=p.partition, path=p.path,
                                          reason=reason, code=code, status=status))

            # Ineligible first: by the operator's choice or Kafka's rules the partition takes no part.
            if p.topic in excluded:
                refuse(f"topic excluded by the operator: {excluded[p.topic]}", "EXCLUDED", UnitStatus.INELIGIBLE)
                continue
            if p.topic in compacted or image.is_compacted(p.topic):
                refuse("compacted topic: Kafka does not tier compacted topics", "COMPACTED", UnitStatus.INELIGIBLE)
                continue
            # Not ready, or broken: the run fails until the operator fixes or excludes it.
            topic_id = p.topic_id or image.topic_ids.get(p.topic)
            if p.topic_id and image.topic_ids.get(p.topic) not in (None, p.topic_id):
                refuse(f"partition.metadata says topic id {p.topic_id}, the metadata log says "
                       f"{image.topic_ids[p.topic]}: a recreated topic's leftover directory? fix: remove the stale "
                       f"directory with the broker stopped, or exclude the topic", "TOPIC_ID_CONFLICT")
                continue
            corrupt = _corrupt_reason(p)
            if corrupt:
                refuse(f"{corrupt}; fix: 'kmigrate validate {p.path}' names the bytes; restore the segment from a "
                       "replica, or exclude the topic", "CORRUPT")
                continue
            if topic_id is None:
                refuse("no topic id: no partition.metadata and no TopicRecord in the metadata log"
                       + ("" if image.sources else " (no metadata log dir given)")
                       + "; fix: give the controllers' metadata log dir (--metadata-log-dir, or the cluster "
                         "description's controllers), or exclude the topic", "NO_TOPIC_ID")
                continue
            if len(p.segments) < 2:
                refuse("no closed segment to stage (only the active segment)", "NOTHING_TO_STAGE",
                       UnitStatus.SKIPPED)
                continue
            segs = [{"base_offset": s.base_offset, "size": s.size, "mtime_ns": s.mtime_ns,
                     "max_timestamp": s.stats.max_timestamp if s.stats else -1,
                     "formats": s.stats.formats if s.stats else [],
                     # counted from batch headers (exact for v2 and uncompressed legacy data)
                     "records": s.stats.records if s.stats and s.stats.records_exact else None}
                    for s in p.segments]
            units.append(Unit(
                kind=UNIT_KIND, id=f"{UNIT_KIND}:{bid}:{p.name}", broker_id=bid, log_dir=d.path, path=p.path,
                topic=p.topic, partition=p.partition, size=sum(s.size for s in p.segments[:-1]),
                params=PartitionParams(
                    topic_id=topic_id, topic_id_source="partition.metadata" if p.topic_id else "metadata-log",
                    segments=segs, leader_epochs=list(p.leader_epochs or [])).model_dump(mode="json"),
            ))
    rd.write_job(units, options.model_dump(mode="json"))
    prepare = TierPrepare(run_id=run_id, started_at=started, log_dirs=[str(d) for d in log_dirs],
                          dry_run=options.dry_run, options=options.model_dump(mode="json"),
                          metadata_sources=image.sources, warnings=warnings, not_ready=not_ready, units=len(units))
    rd.write_prepare(prepare)
    return TierPlan(run_dir=rd, prepare=prepare, units=units, options=options)


# ------------------------------------------------------------------------------------- executor


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
        raise _NotStageable("NO_LEADER_EPOCH", f"no leader epoch covers [{plan.base}, {plan.next_offset}): the "
                            "partition's leader-epoch-checkpoint has no entry at or below this segment (data written "
                            "before KIP-101 carries none, also once rewritten as v2) and RemoteLogSegmentMetadata "
                            "requires a non-empty epoch map; fix: run with --assign-leader-epoch (DAG param "
                            "assign_leader_epoch), which assigns leader epoch 0 from the log start offset")
    offset_index = _read_optional(pdir / (prefix + names.INDEX_FILE_SUFFIX))
    time_index = _read_optional(pdir / (prefix + names.TIME_INDEX_FILE_SUFFIX))
    snapshot = _read_optional(pdir / names.producer_snapshot_file_name(plan.next_offset))
    if offset_index is None or time_index is None:
        raise _NotStageable("MISSING_INDEX", f"{prefix}: offset or time index missing after the rebuild")
    if snapshot is None:
        if opts.dry_run:
            snapshot = b""  # would be written by this run
        else:
            raise _NotStageable("MISSING_SNAPSHOT", f"{names.producer_snapshot_file_name(plan.next_offset)} missing")
    txn = _read_optional(pdir / (prefix + names.TXN_INDEX_FILE_SUFFIX))
    blob = layout.build_indexes_blob(offset_index, time_index, snapshot,
                                     layout.leader_epoch_index_text(entries, plan.next_offset), txn)
    manifest = _manifest_for(ctx, plan, seg_uuid.to_string(), blob, epochs)
    meta = {LAYOUT_METADATA_KEY: layout.LAYOUT_NAME}
    if store.head(keys.manifest) is not None:
        old = layout.SegmentManifest.from_bytes(store.get_bytes(keys.manifest))
        same = (old.segment_indexes == manifest.segment_indexes
                and old.chunk_index == manifest.chunk_index
                and store.matches(keys.log, size=plan.size, sha256=log_sha)
                and store.matches(keys.indexes, size=len(blob.data), sha256=_sha256(blob.data)))
        if same:
            return UnitStatus.SKIPPED, _record(old, txn), []
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
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _cleanup_partition_prefix(store: ObjectStore, part_prefix: str, keep_stems: set[str]) -> list[Finding]:
    """What an interrupted run left: abort every incomplete multipart upload under the
    partition's prefix (one unit per partition, so none of them is being completed), delete
    manifests whose data is gone and data objects that have no manifest, except those of a
    segment this unit is about to stage (they are verified and reused, or replaced)."""
    found: list[Finding] = []
    for upload in store.list_multipart_uploads(part_prefix):
        store.abort_multipart(upload.key, upload.upload_id)
        found.append(Finding(message=f"aborted a stale multipart upload of {upload.key}", code="STALE_MULTIPART",
                             file=upload.key))
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
        found.extend(Finding(message=f"removed orphan object {k} (no complete segment)", code="ORPHAN_REMOVED",
                             file=k) for k in doomed)
    return found


def run_unit(unit: Unit, options: dict[str, Any] | TierOptions) -> dict[str, Any]:
    """Executor side of one partition: snapshots, then staging of its closed segments in order."""
    opts = options if isinstance(options, TierOptions) else TierOptions.model_validate(options)
    scratch = _scratch_store_root(opts) if opts.dry_run else None
    try:
        return _run_unit(unit, opts, scratch)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


UNIT_KINDS = unit_kinds(UnitKind(UNIT_KIND, PartitionParams, run_unit))


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

    try:
        _check_unchanged(pdir, unit)
        plans, _active = _segment_plans(unit)
        bases = [s["base_offset"] for s in params.segments]
        # 1. Snapshots, one streaming pass (they depend on everything below them).
        for outcome in ensure_segment_snapshots(pdir, bases, dry_run=opts.dry_run):
            if outcome.action is SnapshotAction.EXISTING:
                continue
            results.append(UnitResult(
                unit=names.producer_snapshot_file_name(outcome.offset), unit_type=UnitType.FILE, path=outcome.path,
                status=UnitStatus.PLANNED if opts.dry_run else UnitStatus.OK,
                output_format=f"producer-snapshot-v1-{outcome.action.value}",
                bytes_after=None if opts.dry_run else Path(outcome.path).stat().st_size))
    except (ProducerStateError, KafkaFormatError, RuntimeError, OSError) as exc:
        err = Finding(message=f"producer snapshots: {exc}; fix: 'kmigrate validate {pdir}' names the bytes; restore "
                      "the segment from a replica, or exclude the topic", code="SNAPSHOT_REBUILD_FAILED",
                      file=str(pdir))
        return {**base_out, "status": "failed", "error": str(exc), "unit_result": partition_result(
            UnitStatus.FAILED, [err]).model_dump(mode="json"), "segment_results": [
            r.model_dump(mode="json") for r in results], "segment_metadata": []}
    if opts.snapshots_only:
        return {**base_out, "status": "ok", "unit_result": partition_result(UnitStatus.OK).model_dump(mode="json"),
                "segment_results": [r.model_dump(mode="json") for r in results], "segment_metadata": []}

    epochs = list(params.leader_epochs)
    if opts.assign_leader_epoch:
        try:
            epochs = _assign_epoch(pdir, results, dry_run=opts.dry_run) or epochs
        except (KafkaFormatError, OSError, ValueError) as exc:
            err = Finding(message=f"leader epoch not assigned: {exc}", code="LEADER_EPOCH_FAILED", file=str(pdir))
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
        err = Finding(message=f"before staging: {type(exc).__name__}: {exc}", code="STAGING_FAILED", file=str(pdir))
        return {**base_out, "status": "failed", "error": str(exc), "unit_result": partition_result(
            UnitStatus.FAILED, [err]).model_dump(mode="json"), "segment_results": [
            r.model_dump(mode="json") for r in results], "segment_metadata": [], "requests": _requests(store)}

    for plan in plans:
        seg_started = time.monotonic()
        if failed_at is not None:
            # Kafka copies segments in offset order; a gap would leave the remote log with a hole.
            results.append(_segment_result(plan, pdir, UnitStatus.SKIPPED, started=seg_started, warnings=[Finding(
                message=f"not staged: segment {failed_at} before it could not be staged", code="AFTER_FAILURE")]))
            continue
        try:
            repairs = _validate_closed_segment(pdir, plan, ctx.epochs, repair=not opts.dry_run)
            if opts.dry_run and repairs:
                results.append(_segment_result(plan, pdir, UnitStatus.PLANNED, started=seg_started, warnings=[
                    Finding(code="INDEX_REBUILT", message="a real run rebuilds its indexes first: " + "; ".join(
                        str(f) for f in repairs))]))
                continue
            status, record, warns = _stage_segment(store, ctx, plan, shas[plan.base])
            if record is not None:
                records.append({**record, "newlyStaged": status is UnitStatus.OK})
            if repairs:
                warns = [Finding(code="INDEX_REBUILT", message="offset and time index rebuilt with Kafka's rules "
                                 "before staging: " + "; ".join(f"{f.code}: {f.message}" for f in repairs)), *warns]
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
                        "again (staging resumes where it stopped)", code="STAGING_FAILED")]))
    status = "failed" if failed_at is not None else "ok"
    summary = partition_result(UnitStatus.FAILED if failed_at is not None else
                               (UnitStatus.PLANNED if opts.dry_run else UnitStatus.OK))
    return {**base_out, "status": status, "unit_result": summary.model_dump(mode="json"),
            "segment_results": [r.model_dump(mode="json") for r in results], "segment_metadata": records,
            "requests": _requests(store)}


def _assign_epoch(pdir: Path, results: list[UnitResult], *, dry_run: bool) -> list[tuple[int, int]] | None:
    """``assign_leader_epoch``: epoch 0 from the log start offset where no entry covers it (a
    dry run only plans it); the assignment is reported as a unit of its own. Returns the
    entries staging must use, or None when nothing changed."""
    a = plan_assignment(pdir) if dry_run else assign_leader_epoch(pdir)
    if a is None:
        return None
    path = pdir / names.LEADER_EPOCH_CHECKPOINT_FILE
    results.append(UnitResult(unit=path.name, unit_type=UnitType.FILE, path=str(path),
                              status=UnitStatus.PLANNED if dry_run else UnitStatus.OK,
                              warnings=[Finding(file=str(path), code=ASSIGNED_CODE,
                                                message=("would be " if dry_run else "") + a.describe())]))
    return [tuple(e) for e in a.after]


def _requests(store: ObjectStore | None) -> dict[str, int]:
    return dict(store.requests) if store is not None else {}


def _scratch_store_root(opts: TierOptions) -> Path:
    """A fresh directory for one dry-run unit's throwaway store, under the run directory (not
    the system temp dir, which may be memory-backed: it holds a segment's objects at a time)."""
    base = Path(opts.scratch_dir) if opts.scratch_dir else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="unit-", dir=base))


def _validate_closed_segment(pdir: Path, plan: _SegmentPlan, epochs: list[tuple[int, int]], *, repair: bool
                             ) -> list[Finding]:
    """Batch framing and CRCs, offsets and indexes of the segment about to be staged. Index
    findings are not a reason to refuse: the indexes are rebuilt from the ``.log`` with Kafka's
    recovery rules (``repair``), and the findings returned; anything else wrong refuses."""
    log = pdir / names.log_file_name(plan.base)
    res, _ = validate_segment(log, next_base_offset=plan.next_offset, deep=False, leader_epochs=epochs or None)
    index_findings = rebuild_reasons(res.findings, log)
    errors = [f for f in res.findings if f.severity == "error" and f not in index_findings]
    if errors:
        raise _NotStageable("CORRUPT", "; ".join(str(f) for f in errors[:3]) + f"; fix: restore {log.name} from a "
                            "replica (the broker stopped), or exclude the topic")
    if index_findings and repair:
        try:
            rebuild_segment_indexes(pdir, plan.base, findings=index_findings)
        except (KafkaFormatError, ReplacementInFlight) as exc:
            raise _NotStageable("CORRUPT", f"indexes cannot be rebuilt: {exc}") from None
    return index_findings


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


# ------------------------------------------------------------------------------------- driver


def describe_invalid_options(exc: ValidationError, labels: Mapping[str, str] | None = None) -> str:
    """One line from a :class:`TierOptions` validation error, for the operator: each problem with
    the option's name (``labels`` maps field names to how the caller spells them, such as CLI
    flags). Only the messages are used, never pydantic's rendering, which repeats the input (an
    endpoint URL with credentials in it, say)."""
    parts: list[str] = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        field = ".".join(str(x) for x in err["loc"])
        label = (labels or {}).get(field, field)
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{label}: {msg}" if label else msg)
    return one_line("; ".join(parts))


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
        check_store(options, run_id=rid)
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
    eng = get_engine(engine, master=master, spark=spark)
    if options.dry_run:
        results = eng.run(units, opts, progress, kinds=UNIT_KINDS)
    else:
        # Hold the log dirs' locks while snapshots are written: a broker started by mistake refuses.
        with holding_locks(list(log_dirs), RunLock(run_id=rid, run_kind="tier-prepare")):
            results = eng.run(units, opts, progress, kinds=UNIT_KINDS)
    rd.write_results(results)
    return finalize_tier(rid)
