"""Options of the message-format upgrade (one document: CLI, DAG params and job.json)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from migration.migrations.upgrade.rewrite import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_SEGMENT_BYTES

TARGET_MAGIC = {"v1": 1, "v2": 2}


class UpgradeOptions(BaseModel):
    target: Literal["v1", "v2"] = Field(description="v1: KIP-32 format; v2: record batches (Kafka 4 readiness)")
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

    @property
    def target_magic(self) -> int:
        return TARGET_MAGIC[self.target]
