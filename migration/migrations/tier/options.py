"""Options of a tiered-storage readiness run (one document: CLI, DAG params and ``job.json``),
their validation, and the store they name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from migration.migrations.tier.filesystem import FileSystemObjectStore, root_from_url
from migration.migrations.tier.s3 import S3ObjectStore, S3Settings, bucket_name_problem, endpoint_url_problem
from migration.migrations.tier.store import DEFAULT_PART_SIZE, ObjectStore, one_line, prefix_problem


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
    backup_root: str | None = Field(default=None, description="Where the run keeps the log-dir files it changes "
                                    "(outside every log dir; default: the upgrade's default backup root, on the log "
                                    "dirs' file system), for 'kmigrate rollback RUN'")
    backup_dir: str | None = Field(default=None, description="<backup root>/<run id>/tier (set by prepare; none "
                                   "for a dry run)")
    run_id: str | None = Field(default=None, description="The run (set by prepare): recorded with each manifest it "
                               "stages, so a later run says which run staged a segment it finds staged")

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


# Fields only the S3 backend reads: given with a store URL they would be ignored.
_S3_ONLY = ("region", "path_style")


def options_that_cannot_apply(options: TierOptions, given: set[str]) -> list[tuple[str, str, str]]:
    """Pairs of options the caller gave (``given``: field names set explicitly) of which one
    cannot apply with the other, each as (field, the other field, why), so it is refused rather
    than silently ignored:
    - ``assign_leader_epoch`` with ``snapshots_only``: the epoch is assigned for staging, which
      a snapshots-only run skips (no leader-epoch-checkpoint would be written);
    - an S3-only setting (``region``, ``path_style``) with a ``store_url``, which is no bucket
      (``endpoint_url``, ``profile`` and ``aws_conn_id`` are refused by the model itself)."""
    out: list[tuple[str, str, str]] = []
    if options.snapshots_only and options.assign_leader_epoch:
        out.append(("assign_leader_epoch", "snapshots_only", "the leader epoch is assigned for staging, which a "
                    "snapshots-only run skips"))
    if options.store_url is not None:
        out.extend((f, "store_url", "it is an S3 setting and a store URL is no bucket") for f in _S3_ONLY
                   if f in given)
    return out
