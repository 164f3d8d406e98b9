"""What a run saw of one partition: its fingerprint, hashed so that comparing two runs is cheap.

Callers build a :class:`PartitionFingerprint` from plain data (or with
:func:`fingerprint_partition_dir`); the session store only compares digests. The digest is a
blake2b over a canonical JSON form, split into parts so that a dirty partition can say *what*
changed (segment list, a segment's size/mtime, log start, log end, other files) without the store
keeping every segment of every partition.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Bump when the canonical form changes: every stored digest then differs and every partition is
# dirty once, which is the safe outcome.
FINGERPRINT_VERSION = 1
_DIGEST_SIZE = 16  # 128 bits: collisions are not a practical concern for change detection

# Partition-directory file names (Kafka's LogFileUtils / LocalLog; kept local so this module
# depends on nothing else in the project).
_SEGMENT_LOG = re.compile(r"^(\d{20})\.log$")
_TRACKED_SUFFIXES = (".index", ".timeindex", ".txnindex", ".snapshot")
_OFFSET_PREFIXED = re.compile(r"^\d{20}\.")
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
_TRACKED_NAMES = (LEADER_EPOCH_CHECKPOINT_FILE, PARTITION_METADATA_FILE)


def _blake2b(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=_DIGEST_SIZE).hexdigest()


def _canonical(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=True)


class SegmentStat(BaseModel):
    """One ``<base offset>.log`` file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_offset: int = Field(ge=0)
    size: int = Field(ge=0)
    mtime_ns: int


class FileStat(BaseModel):
    """Any other tracked file of the partition (indexes, producer snapshots, checkpoints)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    size: int = Field(ge=0)
    mtime_ns: int


class FingerprintDigest(BaseModel):
    """The hashed parts of a fingerprint; what the store keeps per partition as "seen"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    digest: str
    bases_digest: str  # segment base offsets only: changes on roll, retention, compaction
    segments_digest: str  # base offsets, sizes and mtimes
    files_digest: str
    log_start_offset: int | None
    log_end_offset: int | None


class PartitionFingerprint(BaseModel):
    """What one run saw of one partition directory.

    ``log_dir`` is part of the identity: during a JBOD move the same partition can exist in two
    log dirs and each copy is its own unit of work.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)
    log_dir: str
    segments: list[SegmentStat] = Field(default_factory=list)
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    files: dict[str, FileStat] = Field(default_factory=dict)

    @field_validator("segments")
    @classmethod
    def _sorted_segments(cls, segments: list[SegmentStat]) -> list[SegmentStat]:
        # Canonical order, so a caller listing files in directory order hashes the same.
        ordered = sorted(segments, key=lambda s: s.base_offset)
        for a, b in zip(ordered, ordered[1:], strict=False):
            if a.base_offset == b.base_offset:
                raise ValueError(f"two segments with base offset {a.base_offset}")
        return ordered

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.topic, self.partition, self.log_dir)

    @property
    def cost_bytes(self) -> int:
        """Default cost: the bytes of segment data a run would read."""
        return sum(s.size for s in self.segments)

    @property
    def cost_segments(self) -> int:
        return len(self.segments)

    @cached_property
    def parts(self) -> FingerprintDigest:
        segments = [[s.base_offset, s.size, s.mtime_ns] for s in self.segments]
        bases = [s.base_offset for s in self.segments]
        files = [[name, f.size, f.mtime_ns] for name, f in sorted(self.files.items())]
        bases_digest = _blake2b(_canonical(bases))
        segments_digest = _blake2b(_canonical(segments))
        files_digest = _blake2b(_canonical(files))
        whole = {
            "v": FINGERPRINT_VERSION,
            "bases": bases_digest,
            "segments": segments_digest,
            "files": files_digest,
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
        }
        return FingerprintDigest(
            digest=_blake2b(_canonical(whole)),
            bases_digest=bases_digest,
            segments_digest=segments_digest,
            files_digest=files_digest,
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
        )

    def digest(self) -> str:
        """Stable hex digest (blake2b-128 of a canonical JSON form) of everything observed."""
        return self.parts.digest


def _parse_partition_dir_name(name: str) -> tuple[str, int]:
    # "<topic>-<partition>": topics may contain '-', so split at the last one.
    idx = name.rfind("-")
    if idx <= 0 or not name[idx + 1 :].isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return name[:idx], int(name[idx + 1 :])


def fingerprint_partition_dir(
    path: str | os.PathLike[str],
    *,
    topic: str | None = None,
    partition: int | None = None,
    log_dir: str | None = None,
    log_start_offset: int | None = None,
    log_end_offset: int | None = None,
) -> PartitionFingerprint:
    """Stat the files of one partition directory with ``os.scandir`` (no file is opened).

    Segments are the ``<20 digits>.log`` files; ``.index``, ``.timeindex``, ``.txnindex``,
    ``.snapshot``, ``leader-epoch-checkpoint`` and ``partition.metadata`` are tracked files.
    Leftovers (``.deleted``, ``.cleaned``, ``.swap``, ``.tmp``) and anything else are ignored.
    Topic and partition come from the directory name unless given, ``log_dir`` defaults to the
    parent directory. The log start offset is the first segment's base offset unless given (the
    log-dir level ``log-start-offset-checkpoint`` is not read here); the log end offset is
    unknown (``None``) unless given, because finding it means reading the last segment.
    """
    p = Path(path)
    if topic is None or partition is None:
        parsed_topic, parsed_partition = _parse_partition_dir_name(p.name)
        topic = parsed_topic if topic is None else topic
        partition = parsed_partition if partition is None else partition
    segments: list[SegmentStat] = []
    files: dict[str, FileStat] = {}
    with os.scandir(p) as entries:
        for entry in entries:
            name = entry.name
            m = _SEGMENT_LOG.match(name)
            if m:
                st = entry.stat(follow_symlinks=False)
                segments.append(SegmentStat(base_offset=int(m.group(1)), size=st.st_size, mtime_ns=st.st_mtime_ns))
            elif name in _TRACKED_NAMES or (_OFFSET_PREFIXED.match(name) and name[20:] in _TRACKED_SUFFIXES):
                st = entry.stat(follow_symlinks=False)
                files[name] = FileStat(size=st.st_size, mtime_ns=st.st_mtime_ns)
    segments.sort(key=lambda s: s.base_offset)
    if log_start_offset is None and segments:
        log_start_offset = segments[0].base_offset
    return PartitionFingerprint(
        topic=topic,
        partition=partition,
        log_dir=str(p.parent) if log_dir is None else log_dir,
        segments=segments,
        log_start_offset=log_start_offset,
        log_end_offset=log_end_offset,
        files=files,
    )
