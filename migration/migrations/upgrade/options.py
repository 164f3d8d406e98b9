"""Options of the message-format upgrade (one document: CLI, DAG params and job.json)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field, model_validator

from migration.migrations.upgrade.rewrite import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_SEGMENT_BYTES


class TargetFormat(StrEnum):
    """The message format an upgrade writes: the one spelling of ``--to``, the DAG's
    ``target_format`` and ``job.json``'s ``target``."""

    V1 = "v1"  # KIP-32: relative inner offsets and timestamps
    V2 = "v2"  # record batches (KIP-98), what Kafka 4 reads and writes (KIP-724)


# Keyed by TargetFormat; its str spelling (prepare.json's target) finds the same entry.
TARGET_MAGIC: dict[str, int] = {TargetFormat.V1: 1, TargetFormat.V2: 2}


class UpgradeOptions(BaseModel):
    target: TargetFormat = Field(description="v1: KIP-32 format; v2: record batches (Kafka 4 readiness)")
    stamp_v0_with_mtime: bool = Field(
        default=False,
        description="Stamp v0 messages with the segment's mtime (ms) as LogAppendTime instead of -1",
    )
    segment_bytes: int = Field(default=DEFAULT_SEGMENT_BYTES, ge=14, description="segment.bytes: split above it")
    max_message_bytes: int = Field(default=DEFAULT_MAX_MESSAGE_BYTES, ge=0,
                                   description="max.message.bytes: split converted batches above it")
    index_interval_bytes: int = Field(default=4096, ge=0)
    backup_root: str | None = Field(default=None, description="Outside every log dir; default out/backups")
    force: bool = Field(default=False, description="Proceed after an unclean shutdown")
    dry_run: bool = False
    excluded_topics: dict[str, str] = Field(default_factory=dict, description="Topic -> why the operator keeps "
                                            "it out: reported ineligible, never touched, never a failure")
    assign_leader_epoch: bool = Field(
        default=False,
        description="Give data written before KIP-101 leader epoch 0 from the log start offset (in the "
                    "leader-epoch-checkpoint and on the rewritten batches), so tiered storage can take it",
    )

    stage: str | None = Field(default=None, description="A prestage's stage id: segments it staged whose "
                              "originals are unchanged are swapped in, not converted (upgrade/stage.py)")
    stage_root: str | None = Field(default=None, description="Where the stage is; default: settings."
                                   "default_stage_root of the log dirs")

    @model_validator(mode="after")
    def _epochs_need_v2(self) -> UpgradeOptions:
        if self.assign_leader_epoch and self.target != "v2":
            raise ValueError("assign_leader_epoch needs --to v2: only v2 batches carry a partition leader epoch")
        return self

    @property
    def target_magic(self) -> int:
        return TARGET_MAGIC[self.target]
