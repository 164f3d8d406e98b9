"""A broker log dir built around given segments, for the benchmarks that run the whole upgrade
(``execute_upgrade``) on files of their own rather than on the sample cluster.

The upgrade works on log dirs, not on loose files: a log dir needs ``meta.properties``, the
clean-shutdown marker (else it refuses) and the ``.lock`` file a broker leaves; a segment must
sit in a ``<topic>-<partition>`` directory and be named by its base offset. Indexes are not
copied: a missing index is one more reason to rewrite a legacy segment, which each of these is
anyway (the rewrite builds both indexes).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from migration.formats import names
from migration.formats.clean_shutdown import CleanShutdownFile
from migration.formats.kafka_uuid import Uuid
from migration.formats.meta_properties import MetaProperties

CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"
DIRECTORY_ID = "SxrT-eN9oTVr2sDaMuSRWA"
# Partition-level files worth keeping with a segment (its indexes are rebuilt by the rewrite).
PARTITION_FILES = (names.LEADER_EPOCH_CHECKPOINT_FILE, names.PARTITION_METADATA_FILE)

# (source segment, bytes of it to copy: None for all). The copy keeps the source's file name
# (its base offset).
Segment = tuple[Path, int | None]


def _copy_prefix(src: Path, dst: Path, nbytes: int | None) -> int:
    if nbytes is None:
        shutil.copyfile(src, dst)
        return dst.stat().st_size
    with open(src, "rb") as f:
        dst.write_bytes(f.read(nbytes))
    return nbytes


def make_log_dir(log_dir: Path, partitions: Mapping[str, Iterable[Segment]], *, node_id: int = 1,
                 partition_files_from: Mapping[str, Path] | None = None) -> int:
    """Write a fresh log dir at ``log_dir`` (removed first) holding ``partitions`` (directory
    name, e.g. ``plain-v0-0`` -> its segments); ``partition_files_from`` names, per partition,
    a directory whose leader-epoch checkpoint and ``partition.metadata`` are copied along.
    Returns the bytes of segments written."""
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    MetaProperties(version=1, cluster_id=CLUSTER_ID, node_id=node_id,
                   directory_id=Uuid.from_string(DIRECTORY_ID)).write(log_dir / names.META_PROPERTIES_FILE)
    (log_dir / names.LOCK_FILE).touch()
    CleanShutdownFile(broker_epoch=1).write(log_dir / names.CLEAN_SHUTDOWN_FILE)
    total = 0
    for part, segments in partitions.items():
        pdir = log_dir / part
        pdir.mkdir()
        for src, nbytes in segments:
            total += _copy_prefix(src, pdir / src.name, nbytes)
        origin = (partition_files_from or {}).get(part)
        for name in PARTITION_FILES if origin is not None else ():
            assert origin is not None
            if (origin / name).exists():
                shutil.copyfile(origin / name, pdir / name)
    return total
