"""The run report: one document per run of any migration DAG or ``kmigrate`` command.

The three migrations (message-format upgrade, bootstrap-checkpoint unification, tiered-storage
readiness) all describe their work the same way: brokers hold partitions, partitions hold *units*
(a segment, a metadata log dir or a single file), and every unit ends with an outcome.

Totals, the run status and the exit code are *derived* from the units (pydantic computed fields).
They are written into the JSON so readers (the HTML page, dashboards, jq) need not recompute them,
but when a report is loaded the stored values are checked against the units: a document whose
totals disagree with its own units is rejected instead of silently trusted.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    NonNegativeFloat,
    NonNegativeInt,
    computed_field,
    field_validator,
    model_validator,
)

from migration import __version__
from migration.formats.digest import CURRENT_ALGORITHM, LEGACY_ALGORITHM, RECORD_DIGEST_VERSION, DigestAlgorithm
from migration.logdir.findings import Finding as Finding  # the report's warnings and errors, re-exported
from migration.logdir.findings import FindingCode as FindingCode

# Fields added with a default that reads an older report as it was meant (a finding's
# severity, the record digest's algorithm) keep the version: "1" reports of every kmigrate load.
REPORT_VERSION: Literal["1"] = "1"

# Run ids become directory names under the report root and URL path segments: keep them to a
# strict alphabet that can never spell a path separator, "..", or an absolute path.
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
RUN_ID_RE = re.compile(RUN_ID_PATTERN)

HEX_PATTERN = r"^[0-9a-f]+$"

# Parameter names that carry credentials. Matched on the normalised key (lowercase, "-" -> "_").
_SECRET_KEY_RE = re.compile(
    r"(pass(word|wd)?|secret|token|credential|private_key|api_?key|access_key|auth|session_key|sas)"
)
# user:password@ inside URLs given as parameter values (s3://k:s@host, http://u:p@host).
_URL_USERINFO_RE = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
REDACTED = "<redacted>"

# Timeline points kept in a finished report; enough for a chart, small enough for a 100k-unit run.
MAX_TIMELINE_POINTS = 500


class RunKind(StrEnum):
    UPGRADE = "upgrade"
    ROLLBACK = "rollback"
    COMMIT = "commit"
    UNIFY_BOOTSTRAP = "unify-bootstrap"
    TIER_PREPARE = "tier-prepare"
    VALIDATE = "validate"
    INSPECT = "inspect"
    PLAN = "plan"
    PRESTAGE = "upgrade-prestage"


class UnitStatus(StrEnum):
    """A unit's verdict. ``ineligible``: by Kafka's own rules (a compacted topic is never
    tiered) or by the operator's choice (a topic excluded in the cluster description) the unit
    takes no part; reported with its reason, it never fails a run. ``failed`` covers both what
    is not ready yet (no topic id, no leader epoch) and what broke (corruption, I/O, S3)."""

    OK = "ok"
    SKIPPED = "skipped"
    INELIGIBLE = "ineligible"
    FAILED = "failed"
    REFUSED = "refused"
    PLANNED = "planned"


class UnitType(StrEnum):
    SEGMENT = "segment"
    PARTITION = "partition"
    METADATA_LOG_DIR = "metadata-log-dir"
    FILE = "file"


class RunStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    REFUSED = "refused"


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


class _Model(BaseModel):
    # Reports are a persisted, versioned format: unknown keys are errors, not silently dropped.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, serialize_by_alias=True)


class _Derived(_Model):
    """A model whose computed fields are serialized but must agree with the data on load."""

    @model_validator(mode="wrap")
    @classmethod
    def _check_derived(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        # JSON key (alias if any) -> attribute name of each computed field.
        keys = {(f.alias or name): name for name, f in cls.model_computed_fields.items()}
        claimed: dict[str, Any] = {}
        if isinstance(data, Mapping):
            claimed = {k: v for k, v in data.items() if k in keys}
            data = {k: v for k, v in data.items() if k not in keys}
        model = handler(data)
        if claimed:
            actual = model.model_dump(mode="json", include={keys[k] for k in claimed}, by_alias=True)
            for name, value in claimed.items():
                # Compare in JSON form so "ok" == RunStatus.OK and nested totals compare as dicts.
                if _jsonable(value) != actual[name]:
                    raise ValueError(
                        f"stored {name!r} disagrees with the units: stored {value!r}, derived {actual[name]!r}"
                    )
        return model


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


class OffsetRange(_Model):
    first: NonNegativeInt
    last: NonNegativeInt = Field(description="Last offset, inclusive")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.last < self.first:
            raise ValueError(f"offset range ends before it starts: {self.first}..{self.last}")
        return self


FormatLabel = Annotated[str, Field(min_length=1, max_length=64)]
HexDigest = Annotated[str, Field(pattern=HEX_PATTERN, max_length=256)]


class UnitResult(_Model):
    """Outcome of one unit of work: a segment, a metadata log dir or a file."""

    unit: str = Field(min_length=1, description="Unit name, e.g. 00000000000000000000.log")
    unit_type: UnitType = UnitType.SEGMENT
    path: str | None = Field(default=None, description="Path on the broker host")
    status: UnitStatus
    input_format: FormatLabel | None = Field(default=None, description="e.g. v0, v1, v2, bootstrap.checkpoint")
    output_format: FormatLabel | None = None
    # A segment can hold several message formats (brokers upgraded over time); when it does,
    # the bytes per format are given here and they must add up to the unit's bytes.
    format_bytes_before: dict[FormatLabel, NonNegativeInt] | None = None
    format_bytes_after: dict[FormatLabel, NonNegativeInt] | None = None
    records_before: NonNegativeInt | None = None
    records_after: NonNegativeInt | None = None
    bytes_before: NonNegativeInt | None = None
    bytes_after: NonNegativeInt | None = None
    offsets: OffsetRange | None = None
    digest_before: HexDigest | None = Field(default=None, description="Record digest, lowercase hex")
    digest_after: HexDigest | None = None
    digest_algorithm: DigestAlgorithm | None = Field(
        default=None, description="Hash of digest_before and digest_after; absent: the run's (digest.algorithm)"
    )
    duration_s: NonNegativeFloat | None = None
    warnings: list[Finding] = Field(default_factory=list)
    errors: list[Finding] = Field(default_factory=list)

    @field_validator("digest_before", "digest_after", mode="before")
    @classmethod
    def _lower_hex(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _format_bytes_add_up(self) -> Self:
        for mix, total, side in (
            (self.format_bytes_before, self.bytes_before, "before"),
            (self.format_bytes_after, self.bytes_after, "after"),
        ):
            if mix is not None and total is not None and sum(mix.values()) != total:
                raise ValueError(f"format_bytes_{side} sums to {sum(mix.values())}, bytes_{side} is {total}")
        return self

    @property
    def digest_mismatch(self) -> bool:
        """Both digests known and different: records were lost or changed."""
        return (
            self.digest_before is not None and self.digest_after is not None and self.digest_before != self.digest_after
        )

    def format_mix(self, side: Literal["before", "after"]) -> dict[str, int]:
        """Bytes per format label on one side; unknown format or size contributes nothing."""
        mix = self.format_bytes_before if side == "before" else self.format_bytes_after
        if mix is not None:
            return dict(mix)
        fmt = self.input_format if side == "before" else self.output_format
        size = self.bytes_before if side == "before" else self.bytes_after
        if fmt is None or size is None:
            return {}
        return {fmt: size}


class Totals(_Model):
    units: NonNegativeInt = 0
    units_ok: NonNegativeInt = 0
    units_skipped: NonNegativeInt = 0
    units_ineligible: NonNegativeInt = 0
    units_failed: NonNegativeInt = 0
    units_refused: NonNegativeInt = 0
    units_planned: NonNegativeInt = 0
    bytes_before: NonNegativeInt = 0
    bytes_after: NonNegativeInt = 0
    records_before: NonNegativeInt = 0
    records_after: NonNegativeInt = 0
    warnings: NonNegativeInt = 0
    errors: NonNegativeInt = 0
    digest_mismatches: NonNegativeInt = 0
    duration_s: NonNegativeFloat = 0.0

    @classmethod
    def of_units(cls, units: Iterator[UnitResult] | list[UnitResult]) -> Totals:
        counts = dict.fromkeys(
            (
                "units",
                "units_ok",
                "units_skipped",
                "units_ineligible",
                "units_failed",
                "units_refused",
                "units_planned",
                "bytes_before",
                "bytes_after",
                "records_before",
                "records_after",
                "warnings",
                "errors",
                "digest_mismatches",
            ),
            0,
        )
        duration = 0.0
        for u in units:
            counts["units"] += 1
            counts[f"units_{u.status.value}"] += 1
            counts["bytes_before"] += u.bytes_before or 0
            counts["bytes_after"] += u.bytes_after or 0
            counts["records_before"] += u.records_before or 0
            counts["records_after"] += u.records_after or 0
            counts["warnings"] += len(u.warnings)
            counts["errors"] += len(u.errors)
            counts["digest_mismatches"] += int(u.digest_mismatch)
            duration += u.duration_s or 0.0
        return cls(**counts, duration_s=duration)

    @classmethod
    def sum(cls, parts: list[Totals]) -> Totals:
        fields = [n for n in cls.model_fields if n != "duration_s"]
        return cls(
            **{n: sum(getattr(p, n) for p in parts) for n in fields},
            duration_s=sum(p.duration_s for p in parts),
        )


class PartitionReport(_Model):
    topic: str = Field(min_length=1)
    partition: NonNegativeInt
    units: list[UnitResult] = Field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


class StopWindow(_Model):
    """An upgrade's stop window after a prestage (``kmigrate upgrade --stage``): how the broker's
    segments were upgraded while it was down, and for how long it was."""

    stage_id: str
    swapped: NonNegativeInt = Field(description="Segments swapped in from the stage")
    converted: NonNegativeInt = Field(description="Segments converted in the window (changed, or active, when staged)")
    prefixed: NonNegativeInt = Field(default=0, description="Of those converted: segments the window converted only "
                                     "the end of, their first bytes staged (the active segments, unless truncated)")
    discarded: NonNegativeInt = Field(description="Staged segments (and active segments' staged first bytes) not "
                                      "used: their original changed or is gone")
    duration_s: NonNegativeFloat = Field(description="kmigrate upgrade --stage: from the run's start to its last "
                                         "unit's end; the DAG: from the broker's stop to its upgrade step's end")

    def describe(self, broker_id: int) -> str:
        return (f"broker {broker_id} stop window {self.duration_s:.1f} s: {self.swapped} segment(s) swapped in from "
                f"stage {self.stage_id}, {self.converted} converted in the window"
                + (f" ({self.prefixed} of them from their staged first bytes)" if self.prefixed else "")
                + f", {self.discarded} staged segment(s) discarded")


class BrokerReport(_Derived):
    broker_id: int = Field(ge=-1, description="Broker / node id; -1 when not known")
    partitions: list[PartitionReport] = Field(default_factory=list)
    window: StopWindow | None = Field(default=None, description="The stop window, for an upgrade after a prestage")

    @computed_field(description="Derived from the units; checked on load")  # type: ignore[prop-decorator]  # computed_field over @property: pydantic's documented form
    @property
    def totals(self) -> Totals:
        # Summed in unit order, so the float duration is bit-identical after a JSON round trip.
        return Totals.of_units([u for p in self.partitions for u in p.units])

    def partition(self, topic: str, partition: int) -> PartitionReport:
        """The partition's report, created on first use."""
        for p in self.partitions:
            if p.topic == topic and p.partition == partition:
                return p
        p = PartitionReport(topic=topic, partition=partition)
        self.partitions.append(p)
        return p

    @computed_field(description="Bytes per format label, before and after; derived from the units")  # type: ignore[prop-decorator]  # computed_field over @property: pydantic's documented form
    @property
    def format_mix(self) -> dict[str, dict[str, int]]:
        # Skipped and planned units count too: the chart shows what is on disk, not what was touched.
        mix: dict[str, dict[str, int]] = {"before": {}, "after": {}}
        for side in ("before", "after"):
            for p in self.partitions:
                for u in p.units:
                    for fmt, size in u.format_mix(side).items():
                        mix[side][fmt] = mix[side].get(fmt, 0) + size
        return mix


class PlannedUnit(_Model):
    broker_id: int = Field(ge=-1)
    topic: str
    partition: NonNegativeInt
    unit: str
    unit_type: UnitType = UnitType.SEGMENT
    bytes: NonNegativeInt


class Plan(_Derived):
    units: list[PlannedUnit] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]  # computed_field over @property: pydantic's documented form
    @property
    def units_planned(self) -> int:
        return len(self.units)

    @computed_field  # type: ignore[prop-decorator]  # computed_field over @property: pydantic's documented form
    @property
    def bytes_planned(self) -> int:
        return sum(u.bytes for u in self.units)


class FormatVersions(_Model):
    """On-disk format versions the run reads and writes."""

    source_magic: int | None = Field(default=None, ge=0, le=2)
    target_magic: int | None = Field(default=None, ge=0, le=2)
    other: dict[str, str | int] = Field(
        default_factory=dict, description="e.g. checkpoint file versions, remote layout version"
    )


class DigestInfo(_Model):
    """The record digest (``migration/formats/digest.py``) a run's units were digested with: the
    hash and the version of the canonical record bytes. A report without it was written before
    kmigrate named it: BLAKE2b-256, layout 1 (the defaults)."""

    algorithm: DigestAlgorithm = LEGACY_ALGORITHM
    version: int = Field(default=1, ge=1, description="Version of the canonical record bytes")

    @classmethod
    def current(cls) -> DigestInfo:
        """What this kmigrate computes."""
        return cls(algorithm=CURRENT_ALGORITHM, version=RECORD_DIGEST_VERSION)

    def __str__(self) -> str:
        return f"{self.algorithm.value}, canonical records v{self.version}"


class SessionInfo(_Model):
    """Incremental-session state: which units this run looked at and why."""

    session_id: str
    epoch: NonNegativeInt
    full_rescan: bool
    dirty: NonNegativeInt = 0
    deferred: NonNegativeInt = 0
    clean: NonNegativeInt = 0


class ProgressPoint(_Model):
    at: AwareDatetime
    units_done: NonNegativeInt
    bytes_done: NonNegativeInt

    @field_validator("at")
    @classmethod
    def _to_utc(cls, value: datetime) -> datetime:
        return _utc(value)


class StepRef(_Model):
    """A report merged into this one. A DAG run's report (``audit.merge.merge_reports``)
    names every step it merged, so its page can link each broker's own report; the figures are
    the step's as they were when it was merged."""

    run_id: str = Field(pattern=RUN_ID_PATTERN)
    kind: RunKind | None = Field(default=None, description="None when the step left no report")
    task_id: str | None = None
    broker_ids: list[int] = Field(default_factory=list, description="Brokers the step's report covers")
    status: RunStatus | None = Field(default=None, description="The step's status; None: it left no report")
    exit_code: int | None = None
    units: NonNegativeInt = 0
    note: str | None = Field(default=None, description="Why a step has no units (its refusal or first warning)")

    @classmethod
    def of(cls, report: RunReport) -> StepRef:
        note = None
        if not report.totals.units:
            note = report.refusal or next((w.message for w in [*report.errors, *report.warnings]), None)
        return cls(run_id=report.run_id, kind=report.kind, task_id=report.task_id,
                   broker_ids=[b.broker_id for b in report.brokers], status=report.status,
                   exit_code=report.exit_code(), units=report.totals.units, note=note)


class RunEvent(_Model):
    """Something that happened to a run after its report was written: a rollback or a commit of
    it finished. Appended to the run's own report, so the report says what became of the run."""

    kind: RunKind = Field(description="rollback or commit")
    run_id: str = Field(pattern=RUN_ID_PATTERN, description="The rollback's or commit's own report")
    at: AwareDatetime
    status: RunStatus
    summary: str = Field(description="What it did, one line (e.g. restored 7 segments: 2,082 records, ...)")

    @field_validator("at")
    @classmethod
    def _to_utc(cls, value: datetime) -> datetime:
        return _utc(value)

    def describe(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} UTC {self.kind.value} {self.run_id}: {self.status.value}: {self.summary}"


ParamValue = str | int | float | bool | None | list[Any] | dict[str, Any]


def redact_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Copy of ``params`` with credential-looking keys and URL passwords replaced.

    Parameters are recorded so a run can be understood and repeated; secrets must never land in
    a report that is served over HTTP and uploaded to buckets."""

    def clean(key: str | None, value: Any) -> Any:
        if key is not None and _SECRET_KEY_RE.search(key.lower().replace("-", "_")) and value is not None:
            return REDACTED
        if isinstance(value, Mapping):
            return {str(k): clean(str(k), v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(None, v) for v in value]
        if isinstance(value, str):
            return _URL_USERINFO_RE.sub(lambda m: f"{m['scheme']}{REDACTED}@", value)
        return value

    return {str(k): clean(str(k), v) for k, v in params.items()}


def new_run_id(kind: RunKind | str, now: datetime | None = None) -> str:
    """``<kind>-<UTC time>-<random>``: sortable by time, unique across hosts."""
    ts = _utc(now or utcnow()).strftime("%Y%m%dT%H%M%SZ")
    return f"{RunKind(kind).value}-{ts}-{secrets.token_hex(4)}"


class RunReport(_Derived):
    """The audit report of one run."""

    report_version: Literal["1"] = REPORT_VERSION
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    kind: RunKind
    dag_id: str | None = Field(default=None, description="Airflow DAG id when run from Airflow")
    dag_run_id: str | None = Field(default=None, description="Airflow DAG run id when run from Airflow")
    task_id: str | None = None
    started_at: AwareDatetime
    finished_at: AwareDatetime | None = None
    tool_version: str
    formats: FormatVersions = Field(default_factory=FormatVersions)
    digest: DigestInfo = Field(
        default_factory=DigestInfo,
        description="Record digest of the units (a unit's digest_algorithm overrides the algorithm); absent in "
        "reports written before kmigrate named it: blake2b-256, layout 1",
    )
    params: dict[str, ParamValue] = Field(default_factory=dict, description="Run parameters, secrets redacted")
    plan: Plan = Field(default_factory=Plan)
    brokers: list[BrokerReport] = Field(default_factory=list)
    steps: list[StepRef] = Field(
        default_factory=list, description="The step reports merged into this one (a DAG run's report); else empty"
    )
    refusal: str | None = Field(default=None, description="Why the run refused to act, if it did")
    warnings: list[Finding] = Field(default_factory=list, description="Run-level warnings")
    errors: list[Finding] = Field(default_factory=list, description="Run-level errors")
    session: SessionInfo | None = None
    timeline: list[ProgressPoint] = Field(default_factory=list)
    events: list[RunEvent] = Field(
        default_factory=list, description="Rollbacks and commits of this run that finished after it, oldest first")

    @field_validator("started_at", "finished_at")
    @classmethod
    def _to_utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _utc(value)

    @field_validator("params")
    @classmethod
    def _redact(cls, value: dict[str, Any]) -> dict[str, Any]:
        return redact_params(value)

    @model_validator(mode="after")
    def _finished_after_start(self) -> Self:
        if self.finished_at is not None and self.finished_at < self.started_at:
            raise ValueError("finished_at is before started_at")
        ids = [b.broker_id for b in self.brokers]
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate broker ids: {ids}")
        return self

    # --- derived -------------------------------------------------------------------------

    @computed_field(description="Derived from the brokers' units; checked on load")  # type: ignore[prop-decorator]  # computed_field over @property: pydantic's documented form
    @property
    def totals(self) -> Totals:
        return Totals.sum([b.totals for b in self.brokers])

    @computed_field  # type: ignore[prop-decorator]  # computed_field over @property: pydantic's documented form
    @property
    def status(self) -> RunStatus:
        code = self.exit_code()
        if code == 3:
            return RunStatus.REFUSED
        if code == 1:
            return RunStatus.FAILED
        return RunStatus.OK if self.finished_at is not None else RunStatus.RUNNING

    @computed_field(alias="exit_code")  # type: ignore[prop-decorator]  # computed_field over @property: pydantic's documented form
    @property
    def exit_code_value(self) -> int:
        return self.exit_code()

    @computed_field  # type: ignore[prop-decorator]  # computed_field over @property: pydantic's documented form
    @property
    def duration_s(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    def exit_code(self) -> int:
        """0 ok; 1 a unit failed or something was found (errors, lost records); 3 refused.

        A refusal wins over failures: it means the tool stopped on purpose (a safety check),
        which is what an operator must look at first."""
        t = self.totals
        if self.refusal is not None or t.units_refused:
            return 3
        if t.units_failed or t.errors or t.digest_mismatches or self.errors:
            return 1
        return 0

    # --- builders ------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        kind: RunKind | str,
        params: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        dag_id: str | None = None,
        dag_run_id: str | None = None,
        task_id: str | None = None,
        formats: FormatVersions | None = None,
        tool_version: str = __version__,
        now: datetime | None = None,
    ) -> RunReport:
        """A new report for a run starting now. Inside an Airflow task (or a process it
        started) the DAG id and run id default to the ``AIRFLOW_CTX_*`` variables Airflow sets."""
        started = now or utcnow()
        report = cls(
            run_id=run_id if run_id is not None else new_run_id(kind, started),
            kind=RunKind(kind),
            dag_id=dag_id if dag_id is not None else os.environ.get("AIRFLOW_CTX_DAG_ID"),
            dag_run_id=dag_run_id if dag_run_id is not None else os.environ.get("AIRFLOW_CTX_DAG_RUN_ID"),
            task_id=task_id if task_id is not None else os.environ.get("AIRFLOW_CTX_TASK_ID"),
            started_at=started,
            tool_version=tool_version,
            formats=formats or FormatVersions(),
            digest=DigestInfo.current(),
            params=dict(params or {}),
        )
        # An origin point, so the progress chart starts at zero when the run starts.
        report.timeline.append(ProgressPoint(at=started, units_done=0, bytes_done=0))
        return report

    def broker(self, broker_id: int) -> BrokerReport:
        """The broker's report, created on first use."""
        for b in self.brokers:
            if b.broker_id == broker_id:
                return b
        b = BrokerReport(broker_id=broker_id)
        self.brokers.append(b)
        return b

    def plan_unit(
        self,
        broker_id: int,
        topic: str,
        partition: int,
        unit: str,
        size: int,
        unit_type: UnitType = UnitType.SEGMENT,
    ) -> None:
        self.plan.units.append(
            PlannedUnit(
                broker_id=broker_id, topic=topic, partition=partition, unit=unit, bytes=size, unit_type=unit_type
            )
        )

    def add_unit(
        self,
        broker_id: int,
        topic: str,
        partition: int,
        result: UnitResult,
        *,
        at: datetime | None = None,
        track_progress: bool = True,
    ) -> UnitResult:
        """Record a unit's outcome and (by default) a progress point."""
        self.broker(broker_id).partition(topic, partition).units.append(result)
        if track_progress and result.status is not UnitStatus.PLANNED:
            if self.timeline:
                # Extend the last point instead of recounting every unit: a fleet run adds
                # tens of thousands of units.
                last = self.timeline[-1]
                self.timeline.append(ProgressPoint(at=at or utcnow(), units_done=last.units_done + 1,
                                                   bytes_done=last.bytes_done + (result.bytes_before or 0)))
            else:
                self.record_progress(at)
        return result

    def record_progress(self, at: datetime | None = None) -> ProgressPoint:
        units = bytes_done = 0
        for u in self.iter_results():
            if u.status is not UnitStatus.PLANNED:
                units += 1
                bytes_done += u.bytes_before or 0
        point = ProgressPoint(at=at or utcnow(), units_done=units, bytes_done=bytes_done)
        self.timeline.append(point)
        return point

    def warn(self, message: str, file: str | None = None, position: int | None = None,
             code: FindingCode | None = None) -> None:
        self.warnings.append(Finding(message=message, file=file, position=position, code=code))

    def last_event(self, kind: RunKind) -> RunEvent | None:
        """The latest successful ``kind`` (rollback, commit) of this run, if any."""
        found = [e for e in self.events if e.kind is kind and e.status is RunStatus.OK]
        return found[-1] if found else None

    def error(self, message: str, file: str | None = None, position: int | None = None) -> None:
        self.errors.append(Finding(message=message, file=file, position=position))

    def refuse(self, reason: str) -> None:
        """The run declined to act (e.g. a broker still running): exit code 3."""
        self.refusal = reason

    def finish(self, now: datetime | None = None) -> RunReport:
        end = now or utcnow()
        self.finished_at = end
        self.record_progress(end)
        self.timeline = _thin(self.timeline, MAX_TIMELINE_POINTS)
        return self

    # --- queries -------------------------------------------------------------------------

    def iter_units(self) -> Iterator[tuple[int, str, int, UnitResult]]:
        """(broker id, topic, partition, unit) for every unit, in report order."""
        for b in self.brokers:
            for p in b.partitions:
                for u in p.units:
                    yield b.broker_id, p.topic, p.partition, u

    def iter_results(self) -> Iterator[UnitResult]:
        for *_, u in self.iter_units():
            yield u

    def unit_digest_algorithm(self, unit: UnitResult) -> DigestAlgorithm:
        """The hash of a unit's digests: its own when it names one, else the run's."""
        return unit.digest_algorithm or self.digest.algorithm

    def digest_algorithms(self) -> dict[DigestAlgorithm, int]:
        """Units holding a digest per hash (more than one key: units finished by different kmigrate
        versions, e.g. a run resumed after an upgrade of the tool)."""
        counts: dict[DigestAlgorithm, int] = {}
        for u in self.iter_results():
            if u.digest_before is not None or u.digest_after is not None:
                a = self.unit_digest_algorithm(u)
                counts[a] = counts.get(a, 0) + 1
        return counts

    def problem_units(self) -> list[tuple[int, str, int, UnitResult]]:
        """Units an operator must look at: failed, refused, with errors or lost records."""
        return [
            row
            for row in self.iter_units()
            if row[3].status in (UnitStatus.FAILED, UnitStatus.REFUSED) or row[3].errors or row[3].digest_mismatch
        ]

    def to_json(self) -> str:
        return self.model_dump_json(indent=2, by_alias=True) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> RunReport:
        return cls.model_validate_json(text)


def _thin(points: list[ProgressPoint], limit: int) -> list[ProgressPoint]:
    """Keep at most ``limit`` points, evenly spaced, always keeping the first and last."""
    if len(points) <= limit:
        return points
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]
