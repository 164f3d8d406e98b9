"""The plan of a tiered-storage readiness run: safety (a live lock refuses), inventory, topic
ids (from ``partition.metadata`` or the metadata log), readiness; one ``tier-partition`` unit
per ready partition (its snapshots must be rebuilt in offset order, so a partition is never
split across tasks). ``prepare.json`` (:class:`TierPrepare`) lists the partitions that take no
part or are not ready, and why.

    prepare_tier(log_dirs, run_id=, options=) -> TierPlan (run dir, prepare.json, job.json)
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from migration.audit.model import RunKind, UnitStatus
from migration.formats import names
from migration.logdir.model import LogDir, Partition, scan_log_dir
from migration.migrations.tier.backup import tier_backup_dir
from migration.migrations.tier.metadata import read_metadata_image
from migration.migrations.tier.options import TierOptions
from migration.runtime.documents import PrepareDocument
from migration.runtime.engine import Unit
from migration.runtime.runs import RunDir
from migration.runtime.safety import check_backup_root, check_not_live
from migration.settings import default_backup_root

UNIT_KIND = "tier-partition"
DRY_RUN_STORE = "dry-run-store"


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


def prepare_tier(log_dirs: Sequence[str | os.PathLike[str]], *, run_id: str, options: TierOptions,
                 broker_id: int | None = None, only_partitions: list[str] | None = None) -> TierPlan:
    """Plan a run: ``job.json`` (units, options) and ``prepare.json`` (readiness findings), and
    the plan itself. Raises :class:`Refused` when a live broker holds a log dir."""
    started = time.time()
    rd = RunDir(run_id)
    if options.dry_run and options.scratch_dir is None:
        options = options.model_copy(update={"scratch_dir": str(rd.path / DRY_RUN_STORE)})
    options = options.model_copy(update={"run_id": run_id})
    warnings: list[str] = check_not_live(log_dirs, run_id=run_id)
    if not options.dry_run:
        # What the run changes in a log dir is kept there first (tier/backup.py), for a rollback.
        root = Path(options.backup_root).resolve() if options.backup_root else default_backup_root(log_dirs)
        warnings += check_backup_root(root, log_dirs)
        options = options.model_copy(update={"backup_root": str(root),
                                             "backup_dir": str(tier_backup_dir(root, run_id))})
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
    if not options.dry_run:
        # A re-run changes the log dirs again: its rollback has something to undo again.
        rd.clear_done("rollback")
    return TierPlan(run_dir=rd, prepare=prepare, units=units, options=options)

