"""The documents a run persists in its directory, typed and versioned.

``job.json`` (units and options, for the engines and spark-submit), ``prepare.json`` (what the
plan decided: skipped units, warnings, a refusal), ``results.json`` (one small document per
unit). A crash resume, a rollback or a finalize may read them with another kmigrate than the
one that wrote them, so each carries a ``version``: a document without one was written before
versioning (read as version 0, the same fields), a newer version than this tool knows is
refused with a message saying so, never guessed at. Every document is written with the one
durable write (temporary file, fsync, rename, directory fsync: ``formats.fileio.durable_replace``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from migration.formats.fileio import durable_replace
from migration.runtime.engine import Unit

TMP_SUFFIX = ".tmp"


class DocumentError(ValueError):
    """A run document this tool cannot read: a newer version, or not the document it claims."""


class RunDocument(BaseModel):
    """Base of every run document: a ``version`` and the durable read and write."""

    model_config = ConfigDict(extra="forbid")
    VERSION: ClassVar[int] = 1
    NAME: ClassVar[str] = "run document"

    version: int = Field(default=1, ge=0, description="0: written before documents were versioned")

    def model_post_init(self, context: Any, /) -> None:
        # A document made here (not read) is of the version this kmigrate writes.
        if "version" not in self.model_fields_set:
            self.version = self.VERSION

    @classmethod
    def from_json(cls, text: str | bytes, *, path: str | os.PathLike[str] | None = None) -> Self:
        where = f"{path}: " if path is not None else ""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise DocumentError(f"{where}{cls.NAME} is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise DocumentError(f"{where}{cls.NAME} is not a JSON object")
        version = data.get("version", 0)
        if not isinstance(version, int) or version < 0:
            raise DocumentError(f"{where}{cls.NAME} has version {version!r}, not a version number")
        if version > cls.VERSION:
            raise DocumentError(f"{where}{cls.NAME} version {version} was written by a newer kmigrate; this one "
                                f"reads up to version {cls.VERSION}: use the kmigrate that wrote it")
        try:
            return cls.model_validate({**data, "version": version})
        except ValidationError as exc:
            raise DocumentError(f"{where}not a {cls.NAME} this kmigrate reads: {exc.errors()[0]['msg']} at "
                                f"{'.'.join(map(str, exc.errors()[0]['loc']))}") from None

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Self:
        return cls.from_json(Path(path).read_bytes(), path=path)

    def write(self, path: str | os.PathLike[str]) -> Path:
        durable_replace(path, self.model_dump_json(indent=1).encode(), tmp_suffix=TMP_SUFFIX)
        return Path(path)


class JobDocument(RunDocument):
    """``job.json``: what the engines run."""

    NAME: ClassVar[str] = "job.json"

    run_id: str
    units: list[Unit] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict, description="The migration's options (its typed "
                                    "options model, dumped), plus what the engines need (run dir, locks)")
    state: dict[str, str] = Field(default_factory=dict, description="The home this job belongs to, for a "
                                  "spark-submit driver started with another environment (settings.state_env)")


class ResultsDocument(RunDocument):
    """``results.json``: one document per unit, as its unit function returned it."""

    NAME: ClassVar[str] = "results.json"

    results: list[dict[str, Any]] = Field(default_factory=list)


class PrepareDocument(RunDocument):
    """``prepare.json``: what the plan decided. The fields every migration has are here; each
    migration's own are typed in its subclass (extra fields of an older writer are kept)."""

    model_config = ConfigDict(extra="allow")
    NAME: ClassVar[str] = "prepare.json"

    run_id: str | None = None
    started_at: str | float | None = Field(default=None, description="ISO time (or epoch seconds, older tier runs)")
    log_dirs: list[str] = Field(default_factory=list)
    dry_run: bool = False
    warnings: list[str] = Field(default_factory=list)
    refusal: str | None = Field(default=None, description="Why the run refused to act, if it did")
