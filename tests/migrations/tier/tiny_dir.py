"""A small broker log dir tier-prepare has work in (the rollback and power-loss tests): three
partitions of three segments each, none with the producer snapshots at its segment boundaries,
none with a leader epoch covering its log start offset:

- ``legacy-v0-0``, ``clicks-v1-0``: message format v0/v1 (gzip, snappy and lz4 wrappers),
  written before KIP-101: an empty ``leader-epoch-checkpoint``; their snapshots are empty;
- ``payments-0``: v2 idempotent and transactional batches, its checkpoint's first entry above
  the log start offset (epoch 1 from the middle): epoch 0 goes in front; its snapshots hold
  producers; with ``corrupt_snapshot``, its first boundary's snapshot exists with a bad CRC
  (rebuilt by the run, which keeps the original).

Each partition has ``partition.metadata`` (topic ids), the log dir a clean-shutdown marker,
meta.properties and the offset checkpoints, as a broker leaves them.
"""

from __future__ import annotations

import random
from pathlib import Path

from migration.demo import sample_cluster as sample
from migration.formats import names
from migration.formats.checkpoint_files import (
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    TopicPartitionOffset,
)
from migration.formats.clean_shutdown import CleanShutdownFile
from migration.formats.kafka_uuid import Uuid
from migration.formats.meta_properties import MetaProperties
from migration.formats.partition_metadata import PartitionMetadataFile

SEED = 11
SEGMENT_BYTES = 4 * 1024
PARTITIONS = (("legacy-v0", "v0", 30), ("clicks-v1", "v1", 30), ("payments", "idempotent", 30))


def build_tier_log_dir(log_dir: Path, *, corrupt_snapshot: bool = True) -> dict[str, int]:
    """Write the log dir; returns partition -> its segment count."""
    rng = random.Random(SEED)
    values = sample._Values(rng)
    log_dir.mkdir(parents=True)
    ends = []
    segments = {}
    for topic, kind, n in PARTITIONS:
        pdir = log_dir / f"{topic}-0"
        w = sample.PartitionWriter(pdir, SEGMENT_BYTES)
        if kind == "idempotent":
            sample._write_v2_partition(w, kind, n, rng, values)
        else:
            for data, first, nxt, mtime in sample._legacy_stream(kind, n, rng, values, sample.T0_MS):
                w.append(data, first_offset=first, next_offset=nxt, mtime_s=mtime)
        w.close()
        bases = sorted(names.offset_from_file_name(p.name) for p in pdir.glob("*.log"))
        segments[pdir.name] = len(bases)
        if kind == "idempotent":
            # Only the epoch of a later leader: data below it predates the checkpoint's entries.
            later = [e for e in LeaderEpochCheckpointFile.read(pdir / names.LEADER_EPOCH_CHECKPOINT_FILE).entries
                     if e.epoch > 0]
            LeaderEpochCheckpointFile([EpochEntry(e.epoch, e.start_offset) for e in later]).write(
                pdir / names.LEADER_EPOCH_CHECKPOINT_FILE)
            if corrupt_snapshot:
                bad = pdir / names.producer_snapshot_file_name(bases[1])
                bad.write_bytes(b"\x00\x01" + b"\xee" * 40)
        PartitionMetadataFile(Uuid.from_bytes(rng.randbytes(16))).write(pdir / names.PARTITION_METADATA_FILE)
        ends.append(TopicPartitionOffset(topic, 0, w.next_offset))
    for name in names.OFFSET_CHECKPOINT_FILES:
        entries = [] if name == names.CLEANER_OFFSET_CHECKPOINT_FILE else [
            TopicPartitionOffset(e.topic, e.partition, 0) for e in ends] if name == \
            names.LOG_START_OFFSET_CHECKPOINT_FILE else ends
        OffsetCheckpointFile(entries).write(log_dir / name)
    MetaProperties(version=1, cluster_id=sample.CLUSTER_ID, node_id=1,
                   directory_id=Uuid.from_bytes(rng.randbytes(16))).write(log_dir / names.META_PROPERTIES_FILE)
    (log_dir / names.LOCK_FILE).touch()
    CleanShutdownFile(broker_epoch=101).write(log_dir / names.CLEAN_SHUTDOWN_FILE)
    return segments
