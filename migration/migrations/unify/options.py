"""Options of the bootstrap.checkpoint unification (one document: CLI, DAG params and job.json),
and the typed parameters of its units."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from migration.settings import default_backup_root


class UnifyOptions(BaseModel):
    backup_root: str | None = Field(default=None, description="Outside every log dir; default "
                                    "migration.settings.default_backup_root()")
    dry_run: bool = False
    retire_stray: bool = Field(default=False, description="Retire stray bootstrap.checkpoint copies of "
                               "broker-only log dirs (stray_log_dirs)")
    stray_log_dirs: list[str] = Field(default_factory=list)
    run_id: str | None = None
    lock_owner_pid: int | None = Field(default=None, description="Set at run time by a job runner that "
                                       "holds the log dir locks for its executors (spark-submit's driver)")

    def resolved_backup_root(self) -> Path:
        return Path(self.backup_root).resolve() if self.backup_root else default_backup_root()


class UnifyUnitParams(BaseModel):
    """``Unit.params`` of a unification unit: a controller's metadata log dir, or a broker-only
    log dir whose stray ``bootstrap.checkpoint`` copy may be retired."""

    role: Literal["metadata", "stray"] = "metadata"
