"""What a metadata log dir holds and which KIP-1170 state it is in; reads, never writes.

Per metadata log dir (the dir holding ``bootstrap.checkpoint`` and ``__cluster_metadata-0``)
the state decides the action (docs/formats.md §7.3, KIP-1170 "Compatibility"):
  1. bootstrap.checkpoint with metadata records, zero checkpoint with KRaft control records
     only (dynamic quorum): rewrite the zero checkpoint = header batch keeping the existing
     KRaftVersionRecord/VotersRecord byte for byte, the bootstrap records in order, footer;
  2. bootstrap.checkpoint and no zero checkpoint (static quorum): create the zero checkpoint
     with the header, the records and the footer;
  3. no bootstrap.checkpoint, zero checkpoint with metadata records: already unified;
  4. both hold metadata records: the zero checkpoint wins (KIP-1170: the controller uses it
     and logs a WARN); warn, retire bootstrap.checkpoint;
  5. the metadata log moved on (later snapshots, no zero checkpoint): the bootstrap records are
     committed to the log; only retire bootstrap.checkpoint.
Summaries hold digests and counts of records, never record bytes: SCRAM salts and keys stay on
disk only. Each digest is persisted with its algorithm (``digest_algorithm``; absent in a state
written before BLAKE3: blake2b-256): checking the records on disk against a stored digest
digests them with that algorithm (:func:`records_digest`), so a run prepared by an older
kmigrate and verified or resumed by a newer one compares like with like.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from migration.formats import names
from migration.formats.digest import CURRENT_ALGORITHM, LEGACY_ALGORITHM, DigestAlgorithm, RecordDigester
from migration.formats.errors import KafkaFormatError
from migration.formats.file_records import iterate_batches
from migration.formats.kraft_checkpoint import KRAFT_MAX_BATCH_BYTES, CheckpointContents, read_checkpoint
from migration.formats.layout import RECORD_BATCH_OVERHEAD
from migration.formats.meta_properties import MetaProperties
from migration.formats.metadata_records import (
    METADATA_VERSION_FEATURE,
    MV_3_3_IV3,
    MetadataRecord,
    metadata_version_name,
)
from migration.formats.model import Record
from migration.formats.record_batch import encode_record
from migration.logdir.findings import Finding

# Format labels of the report's units (UnitResult.input_format / output_format).
FORMAT_BOOTSTRAP = "bootstrap.checkpoint"
FORMAT_ZERO = "zero-checkpoint"
FORMAT_LOG = "metadata-log"
FORMAT_RETIRED = "retired"

Case = Literal[1, 2, 3, 4, 5, "error"]
CASE_DESCRIPTIONS: dict[int | str, str] = {
    1: "bootstrap.checkpoint + zero checkpoint with KRaft control records only: merge into the zero checkpoint",
    2: "bootstrap.checkpoint, no zero checkpoint: create the zero checkpoint",
    3: "zero checkpoint holds the metadata records, no bootstrap.checkpoint: already unified",
    4: "both hold metadata records: the zero checkpoint wins, retire bootstrap.checkpoint",
    5: "the metadata log moved on (later snapshots): retire bootstrap.checkpoint only",
    "error": "cannot unify",
}


# A state's problems are findings like every layer's (no code: the state's case says it all);
# the unify unit names them Problem.
Problem = Finding


class CheckpointSummary(BaseModel):
    """A checkpoint file as counts and digests: never record bytes."""

    path: str
    size: int
    batches: int
    records: int
    metadata_records: int
    record_types: dict[str, int] = Field(default_factory=dict)
    features: dict[str, int] = Field(default_factory=dict, description="FeatureLevelRecords, last one wins")
    kraft_records: list[str] = Field(default_factory=list, description="KRaft control records of the header")
    kraft_version: int = 0
    voters_present: bool = False
    header_timestamp: int | None = None
    digest: str = Field(description="Content digest of the metadata records (offset = position among them)")
    digest_algorithm: DigestAlgorithm = Field(default=LEGACY_ALGORITHM, description="Hash of digest; absent: "
                                              "written before kmigrate named it, blake2b-256")


class UnifyState(BaseModel):
    log_dir: str
    metadata_partition_dir: str
    node_id: int | None = None
    case: Case
    description: str
    bootstrap: CheckpointSummary | None = None
    zero_checkpoint: CheckpointSummary | None = None
    later_snapshots: list[str] = Field(default_factory=list)
    partial_snapshots: list[str] = Field(default_factory=list)
    metadata_version_level: int | None = None
    metadata_version: str | None = None
    bootstrap_records: int = 0
    zero_records: int = 0
    bootstrap_digest: str | None = None
    digest_algorithm: DigestAlgorithm = Field(default=LEGACY_ALGORITHM, description="Hash of bootstrap_digest "
                                              "(the summaries name their own); absent: blake2b-256")
    bootstrap_batch_bytes: int | None = Field(default=None, description="Size of the records as one KRaft batch")
    kraft_version: int = 0
    voters_present: bool = False
    records_match: bool | None = Field(default=None, description="Case 4: the zero checkpoint holds exactly the "
                                       "bootstrap records (a re-run after a crash)")
    log_segments: int = 0
    warnings: list[str] = Field(default_factory=list)
    errors: list[Finding] = Field(default_factory=list)


class StraySummary(BaseModel):
    log_dir: str
    node_id: int | None = None
    present: bool
    size: int = 0
    metadata_records: int | None = None
    digest: str | None = None
    digest_algorithm: DigestAlgorithm = Field(default=LEGACY_ALGORITHM, description="Hash of digest; absent: "
                                              "written before kmigrate named it, blake2b-256")
    problem: Finding | None = None


@dataclass
class CheckpointRead:
    """A decoded checkpoint with what rebuilding it needs (kept out of UnifyState: raw bytes)."""

    summary: CheckpointSummary
    contents: CheckpointContents
    append_time: int


def records_digest(values: list[bytes], algorithm: DigestAlgorithm | str = CURRENT_ALGORITHM) -> str:
    """Content digest (hex) of framed metadata record values; offsets are their positions among
    the records, so the same records digest the same in bootstrap.checkpoint (offset 1..) and the
    zero checkpoint (offset 1.. or 3..). To compare with a stored digest, pass its algorithm."""
    d = RecordDigester(algorithm)
    d.update(Record(i, -1, None, v) for i, v in enumerate(values))
    return d.result().content


def record_values(records: list[MetadataRecord]) -> list[bytes]:
    return [r.encode() for r in records]


def read_checkpoint_path(path: Path) -> CheckpointRead:
    """Decode a checkpoint file (bootstrap.checkpoint or a KRaft snapshot); raises
    :class:`KafkaFormatError` with the file and byte position."""
    data = path.read_bytes()
    contents = read_checkpoint(data, path=path)
    first = next(iter(iterate_batches(data, path=str(path), strict=True)))
    types: dict[str, int] = {}
    features: dict[str, int] = {}
    for m in contents.metadata_records:
        types[m.name] = types.get(m.name, 0) + 1
        if m.api_key == 12:  # FeatureLevelRecord (docs/formats.md §6.5)
            features[str(m.fields["Name"])] = int(m.fields["FeatureLevel"])
    summary = CheckpointSummary(
        path=str(path), size=len(data), batches=contents.batches, records=contents.records,
        metadata_records=len(contents.metadata_records), record_types=types, features=features,
        kraft_records=[r.type.name for r in contents.kraft_records], kraft_version=contents.kraft_version,
        voters_present=contents.voters_record is not None,
        header_timestamp=contents.header.get("LastContainedLogTimestamp"),
        digest=records_digest(record_values(contents.metadata_records), CURRENT_ALGORITHM),
        digest_algorithm=CURRENT_ALGORITHM)
    return CheckpointRead(summary=summary, contents=contents, append_time=first.max_timestamp)


def node_id_of(log_dir: Path) -> int | None:
    try:
        return MetaProperties.read(log_dir / names.META_PROPERTIES_FILE).node_id
    except (OSError, KafkaFormatError, ValueError):
        return None


def metadata_log_dir_of(path: str | os.PathLike[str]) -> Path:
    """The metadata log dir for a path naming it or its ``__cluster_metadata-0``."""
    p = Path(path).resolve()
    return p.parent if p.name == names.METADATA_PARTITION_DIR else p


def _single_batch_size(values: list[bytes]) -> int:
    # The controller commits the bootstrap records as one atomic batch (KIP-1170): their
    # encoded size in one batch must not exceed KRaft's maximum batch size.
    return RECORD_BATCH_OVERHEAD + sum(len(encode_record(i, 0, None, v)) for i, v in enumerate(values))


def _read_into(path: Path, state: UnifyState) -> CheckpointRead | None:
    if not path.is_file():
        return None
    try:
        return read_checkpoint_path(path)
    except KafkaFormatError as exc:
        state.errors.append(Finding.of_error(exc, file=path))
    except OSError as exc:
        state.errors.append(Finding(message=str(exc), file=str(path)))
    return None


def inspect_dir(metadata_log_dir: str | os.PathLike[str]) -> tuple[UnifyState, CheckpointRead | None,
                                                                  CheckpointRead | None]:
    """The state of a metadata log dir, with the decoded bootstrap.checkpoint and zero
    checkpoint (None: absent or unreadable, then the state holds the error)."""
    d = metadata_log_dir_of(metadata_log_dir)
    mdir = d / names.METADATA_PARTITION_DIR
    state = UnifyState(log_dir=str(d), metadata_partition_dir=str(mdir), node_id=node_id_of(d), case="error",
                       description="", digest_algorithm=CURRENT_ALGORITHM)
    boot_path = d / names.BOOTSTRAP_CHECKPOINT_FILE
    zero_path = mdir / names.ZERO_CHECKPOINT_FILE
    boot = _read_into(boot_path, state)
    zero = _read_into(zero_path, state)
    if mdir.is_dir():
        for e in sorted(os.scandir(mdir), key=lambda e: e.name):
            if names.CHECKPOINT_FILE_SUFFIX not in e.name:
                if e.name.endswith(names.LOG_FILE_SUFFIX):
                    state.log_segments += 1
                continue
            try:
                cn = names.parse_checkpoint_file_name(e.name)
            except KafkaFormatError:
                continue
            if cn.state is names.CheckpointState.PARTIAL:
                state.partial_snapshots.append(e.name)
            elif cn.state is names.CheckpointState.COMPLETE and (cn.end_offset, cn.epoch) != (0, 0):
                state.later_snapshots.append(e.name)
    state.bootstrap = boot.summary if boot else None
    state.zero_checkpoint = zero.summary if zero else None
    if zero:
        state.zero_records = zero.summary.metadata_records
        state.kraft_version = zero.summary.kraft_version
        state.voters_present = zero.summary.voters_present
    if boot:
        state.bootstrap_records = boot.summary.metadata_records
        state.bootstrap_digest = boot.summary.digest
        state.digest_algorithm = boot.summary.digest_algorithm
        mv = boot.summary.features.get(METADATA_VERSION_FEATURE)
        state.metadata_version_level = mv
        state.metadata_version = None if mv is None else metadata_version_name(mv)
        values = record_values(boot.contents.metadata_records)
        state.bootstrap_batch_bytes = _single_batch_size(values)
        if boot.contents.kraft_records:
            state.errors.append(Finding(message="bootstrap.checkpoint holds KRaft control records "
                                        f"({', '.join(boot.summary.kraft_records)}): not a bootstrap file Kafka "
                                        "can read", file=str(boot_path)))
        if not values:
            state.errors.append(Finding(message="bootstrap.checkpoint holds no metadata records",
                                        file=str(boot_path)))
    _classify(state, boot, zero, boot_path, zero_path)
    if state.errors:
        state.case = "error"
    state.description = CASE_DESCRIPTIONS[state.case]
    return state, boot, zero


def both_hold_records_warning(state: UnifyState) -> str:
    """The case 4 warning, as the run states it before acting (KIP-1170: the active controller
    uses the zero checkpoint's records and logs a WARN; a node deletes bootstrap.checkpoint once
    it loaded a snapshot holding metadata records)."""
    which = ("the same ones, as a run interrupted before the retirement leaves them" if state.records_match
             else "different ones")
    return (f"bootstrap.checkpoint and the zero checkpoint both hold metadata records ({which}): the zero "
            "checkpoint is kept as it is (Kafka uses its records), bootstrap.checkpoint is retired to the backup "
            "root (KIP-1170)")


def _classify(state: UnifyState, boot: CheckpointRead | None, zero: CheckpointRead | None, boot_path: Path,
              zero_path: Path) -> None:
    boot_exists = boot_path.is_file()
    zero_exists = zero_path.is_file()
    zero_has_records = zero is not None and zero.summary.metadata_records > 0
    if boot_exists:
        if zero_has_records:
            state.case = 4
            assert boot is not None or state.errors
            state.records_match = (boot is not None and zero is not None
                                   and boot.summary.digest_algorithm == zero.summary.digest_algorithm
                                   and boot.summary.digest == zero.summary.digest)
            state.warnings.append(both_hold_records_warning(state))
            return
        if zero_exists:
            state.case = 1
        elif state.later_snapshots:
            state.case = 5
            return
        else:
            state.case = 2
            if state.log_segments:
                state.warnings.append("no zero checkpoint but the metadata log has segments: the bootstrap records "
                                      "were presumably committed already; the zero checkpoint only restates them")
        _check_writable(state)
        return
    if zero_has_records:
        state.case = 3
    elif state.later_snapshots:
        state.case = 5  # nothing left to retire
    elif not state.errors:
        state.errors.append(Finding(message="no bootstrap.checkpoint and no zero checkpoint holding metadata "
                                    "records: no bootstrap metadata to unify", file=state.log_dir))


def _check_writable(state: UnifyState) -> None:
    """Gates before the bootstrap records are written into the zero checkpoint."""
    boot = state.bootstrap
    if boot is None:
        return
    mv = state.metadata_version_level
    if mv is None:
        state.errors.append(Finding(message="bootstrap.checkpoint has no metadata.version FeatureLevelRecord",
                                    file=boot.path))
    elif mv < MV_3_3_IV3:
        state.errors.append(Finding(message=f"metadata.version {metadata_version_name(mv)} (feature level {mv}) is "
                                    "below 3.3-IV3 (level 7): newer servers fail on such bootstrap metadata "
                                    "(KAFKA-19192); upgrade the cluster's metadata.version first", file=boot.path))
    size = state.bootstrap_batch_bytes or 0
    if size > KRAFT_MAX_BATCH_BYTES:
        state.errors.append(Finding(message=f"the bootstrap records need {size} bytes as one batch, above KRaft's "
                                    f"maximum batch size of {KRAFT_MAX_BATCH_BYTES} bytes (KIP-1170 8 MB limit)",
                                    file=boot.path))


def detect_state(metadata_log_dir: str | os.PathLike[str]) -> UnifyState:
    """What the dir holds and which case (1-5, or "error") applies; reads, never writes."""
    return inspect_dir(metadata_log_dir)[0]


def stray_summary(log_dir: str | os.PathLike[str]) -> StraySummary:
    """A broker-only log dir's copy of bootstrap.checkpoint (never read by Kafka)."""
    d = Path(log_dir).resolve()
    p = d / names.BOOTSTRAP_CHECKPOINT_FILE
    s = StraySummary(log_dir=str(d), node_id=node_id_of(d), present=p.is_file(), digest_algorithm=CURRENT_ALGORITHM)
    if s.present:
        s.size = p.stat().st_size
        try:
            r = read_checkpoint_path(p)
            s.metadata_records, s.digest = r.summary.metadata_records, r.summary.digest
            s.digest_algorithm = r.summary.digest_algorithm
        except KafkaFormatError as exc:
            s.problem = Finding.of_error(exc, file=p)
    return s
