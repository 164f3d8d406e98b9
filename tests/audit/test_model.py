"""The report model: derived totals, exit codes, JSON round trip, redaction, schema export."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from migration.audit import schema_export
from migration.audit.model import (
    REDACTED,
    DigestInfo,
    Finding,
    FindingCode,
    RunReport,
    RunStatus,
    Totals,
    UnitResult,
    UnitStatus,
)
from migration.formats.digest import RECORD_DIGEST_VERSION, DigestAlgorithm

T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def _unit(status: str = "ok", **kw: object) -> UnitResult:
    base: dict[str, object] = {"unit": "00000000000000000000.log", "status": status}
    base.update(kw)
    return UnitResult.model_validate(base)


def test_totals_are_derived_from_units(report: RunReport) -> None:
    units = list(report.iter_results())
    assert report.totals.units == len(units) == 14
    assert report.totals.bytes_before == sum(u.bytes_before or 0 for u in units)
    assert report.totals.bytes_after == sum(u.bytes_after or 0 for u in units)
    assert report.totals.records_before == sum(u.records_before or 0 for u in units)
    assert report.totals.units_failed == 1
    assert report.totals.units_skipped == 1
    assert report.totals.units_ok == 12
    assert report.totals.warnings == 6
    assert report.totals.errors == 1
    # Per broker totals add up to the run totals.
    for field in Totals.model_fields:
        assert getattr(report.totals, field) == pytest.approx(sum(getattr(b.totals, field) for b in report.brokers))
    b3 = report.broker(3).totals
    assert (b3.units, b3.units_failed, b3.bytes_before) == (5, 1, 30_000 + 30_017 + 31_000 + 31_017 + 2048)


def test_totals_follow_added_units() -> None:
    r = RunReport.start("validate", now=T0)
    assert r.totals.units == 0
    r.add_unit(0, "t", 0, _unit(bytes_before=10, bytes_after=10))
    assert (r.totals.units, r.totals.bytes_before) == (1, 10)
    r.add_unit(0, "t", 0, _unit(bytes_before=5))
    assert (r.totals.units, r.totals.bytes_before, r.broker(0).totals.units) == (2, 15, 2)
    assert len(r.brokers) == 1 and len(r.brokers[0].partitions) == 1


def test_format_mix_uses_per_format_bytes_when_given() -> None:
    r = RunReport.start("upgrade", now=T0)
    r.add_unit(1, "t", 0, _unit(input_format="v1", output_format="v2", bytes_before=100, bytes_after=90))
    r.add_unit(
        1, "t", 1, _unit(format_bytes_before={"v0": 30, "v1": 20}, bytes_before=50, output_format="v2", bytes_after=45)
    )
    assert r.broker(1).format_mix == {"before": {"v1": 120, "v0": 30}, "after": {"v2": 135}}
    with pytest.raises(ValidationError, match="sums to"):
        _unit(format_bytes_before={"v0": 30}, bytes_before=50)


@pytest.mark.parametrize(
    ("units", "refusal", "run_errors", "expected", "status"),
    [
        ([_unit("ok"), _unit("skipped")], None, [], 0, RunStatus.OK),
        ([_unit("ok"), _unit("failed")], None, [], 1, RunStatus.FAILED),
        ([_unit("ok", errors=[Finding(message="bad crc", file="a.log", position=3)])], None, [], 1, RunStatus.FAILED),
        ([_unit("ok", digest_before="aa", digest_after="ab")], None, [], 1, RunStatus.FAILED),
        ([_unit("ok", digest_before="AA", digest_after="aa")], None, [], 0, RunStatus.OK),
        ([_unit("ok")], None, [Finding(message="listing failed")], 1, RunStatus.FAILED),
        ([_unit("refused")], None, [], 3, RunStatus.REFUSED),
        ([_unit("failed")], "broker running", [], 3, RunStatus.REFUSED),
        ([], "broker running", [], 3, RunStatus.REFUSED),
    ],
)
def test_exit_codes(
    units: list[UnitResult], refusal: str | None, run_errors: list[Finding], expected: int, status: RunStatus
) -> None:
    r = RunReport.start("upgrade", now=T0)
    for i, u in enumerate(units):
        r.add_unit(1, "t", i, u.model_copy(deep=True))
    if refusal:
        r.refuse(refusal)
    r.errors.extend(run_errors)
    r.finish(now=T0 + timedelta(seconds=1))
    assert r.exit_code() == expected
    assert r.status is status
    assert json.loads(r.to_json())["exit_code"] == expected


def test_running_until_finished() -> None:
    r = RunReport.start("inspect", now=T0)
    assert r.status is RunStatus.RUNNING and r.duration_s is None
    r.finish(now=T0 + timedelta(seconds=2))
    assert r.status is RunStatus.OK and r.duration_s == 2.0


def test_json_round_trip(report: RunReport) -> None:
    text = report.to_json()
    data = json.loads(text)
    assert data["report_version"] == "1"
    assert data["totals"]["bytes_before"] == report.totals.bytes_before
    assert data["brokers"][0]["totals"]["units"] == report.brokers[0].totals.units
    back = RunReport.from_json(text)
    assert back == report
    assert back.to_json() == text


def test_older_report_json_loads(report: RunReport) -> None:
    """A report written before findings gained severity and partition, with a validator code in
    the kebab case of that time, loads; its codes read as the one vocabulary."""
    data = json.loads(report.to_json())
    units = [u for b in data["brokers"] for p in b["partitions"] for u in p["units"]]
    findings = [f for u in units for f in u["warnings"] + u["errors"]]
    assert findings
    for f in findings:
        del f["severity"], f["partition"]
    findings[0]["code"] = "corrupt-batch"
    back = RunReport.model_validate(data)
    first = next(f for u in back.iter_results() for f in u.warnings + u.errors)
    assert first.code is FindingCode.CORRUPT_BATCH and first.severity is None and first.partition is None
    findings[0]["code"] = "NOT_A_CODE"
    with pytest.raises(ValidationError):
        RunReport.model_validate(data)


def test_a_validator_finding_goes_into_a_report_as_it_is() -> None:
    f = Finding(severity="warning", code="LEFTOVER_FILE", file="/d/t-0/x.log.swap", message="left", partition="t-0")
    r = RunReport.start("validate", now=T0)
    r.add_unit(1, "t", 0, _unit(warnings=[f]))
    back = RunReport.from_json(r.to_json())
    assert next(back.iter_results()).warnings == [f]
    assert '"partition": "t-0"' in r.to_json() and '"code": "LEFTOVER_FILE"' in r.to_json()


@pytest.mark.parametrize(
    "tamper",
    [
        lambda d: d["totals"].__setitem__("bytes_before", d["totals"]["bytes_before"] + 1),
        lambda d: d["brokers"][0]["totals"].__setitem__("units", 99),
        lambda d: d.__setitem__("exit_code", 0),
        lambda d: d.__setitem__("status", "ok"),
        lambda d: d["plan"].__setitem__("bytes_planned", 1),
    ],
)
def test_inconsistent_stored_totals_are_rejected(report: RunReport, tamper) -> None:
    data = json.loads(report.to_json())
    tamper(data)
    with pytest.raises(ValidationError, match="disagrees"):
        RunReport.model_validate(data)


def test_unknown_version_and_keys_rejected(report: RunReport) -> None:
    data = json.loads(report.to_json())
    with pytest.raises(ValidationError):
        RunReport.model_validate({**data, "report_version": "2"})
    with pytest.raises(ValidationError):
        RunReport.model_validate({**data, "surprise": 1})


@pytest.mark.parametrize("run_id", ["../etc", "a/b", "/abs", ".hidden", "", "a" * 200, "x\x00y"])
def test_run_id_is_strict(run_id: str) -> None:
    with pytest.raises(ValidationError):
        RunReport.start("upgrade", run_id=run_id)


def test_start_defaults() -> None:
    r = RunReport.start("tier-prepare", {"brokers": [1]}, now=T0)
    assert r.run_id.startswith("tier-prepare-20250301T120000Z-")
    assert r.timeline[0].units_done == 0 and r.timeline[0].at == T0


def test_airflow_context_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "kafka_upgrade")
    monkeypatch.setenv("AIRFLOW_CTX_DAG_RUN_ID", "manual__x")
    r = RunReport.start("upgrade")
    assert (r.dag_id, r.dag_run_id) == ("kafka_upgrade", "manual__x")


def test_secrets_never_stored() -> None:
    r = RunReport.start(
        "upgrade",
        {
            "aws_secret_access_key": "hunter2",
            "S3-PASSWORD": "pw-zz9",
            "nested": {"api_token": "tok-qq7", "region": "eu"},
            "endpoint": "https://user:pa55@minio:9000/bucket",
            "keep": "plain",
        },
        now=T0,
    )
    text = r.to_json()
    for secret in ("hunter2", "pw-zz9", "tok-qq7", "pa55"):
        assert secret not in text
    assert r.params["aws_secret_access_key"] == REDACTED
    assert r.params["nested"] == {"api_token": REDACTED, "region": "eu"}
    assert r.params["endpoint"] == f"https://{REDACTED}@minio:9000/bucket"
    assert r.params["keep"] == "plain"


def test_progress_timeline_and_thinning() -> None:
    r = RunReport.start("upgrade", now=T0)
    for i in range(1200):
        r.add_unit(1, "t", 0, _unit(unit=f"{i}.log", bytes_before=10), at=T0 + timedelta(seconds=i + 1))
    assert len(r.timeline) == 1201
    r.finish(now=T0 + timedelta(seconds=2000))
    assert len(r.timeline) == 500
    assert (r.timeline[0].units_done, r.timeline[-1].units_done, r.timeline[-1].bytes_done) == (0, 1200, 12000)
    done = [p.units_done for p in r.timeline]
    assert done == sorted(done)


def test_problem_units(report: RunReport) -> None:
    problems = report.problem_units()
    assert [(b, t, p, u.status) for b, t, p, u in problems] == [(3, "payments", 0, UnitStatus.FAILED)]


def test_refused_report_fixture(make_report) -> None:
    r = make_report(refused=True)
    assert r.exit_code() == 3


def test_schema_export_up_to_date() -> None:
    stale = schema_export.stale()
    assert not stale, f"run `python -m migration.audit.schema_export`: {stale}"


def test_schema_check_detects_drift(tmp_path) -> None:
    assert schema_export.main(["--check", "--out", str(tmp_path)]) == 1
    assert schema_export.main(["--out", str(tmp_path)]) == 0
    assert schema_export.main(["--check", "--out", str(tmp_path)]) == 0
    path = tmp_path / "run-report.schema.json"
    schema = json.loads(path.read_text())
    assert schema["properties"]["report_version"]["const"] == "1"
    assert {"totals", "exit_code", "status"} <= set(schema["required"])
    path.write_text(path.read_text().replace('"run_id"', '"runid"', 1))
    assert schema_export.main(["--check", "--out", str(tmp_path)]) == 1


def test_report_validates_against_exported_schema(report: RunReport) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = schema_export.schema_of("run-report", RunReport)
    jsonschema.validate(json.loads(report.to_json()), schema)


def test_a_new_report_names_the_current_record_digest(report: RunReport) -> None:
    assert (report.digest.algorithm, report.digest.version) == (DigestAlgorithm.BLAKE3, RECORD_DIGEST_VERSION)
    data = json.loads(report.to_json())
    assert data["digest"] == {"algorithm": "blake3-256", "version": 1}
    assert data["report_version"] == "1"  # an added field with a default: old reports load as "1"
    assert RunReport.from_json(report.to_json()).digest == report.digest
    assert report.digest_algorithms() == {DigestAlgorithm.BLAKE3: 12}


def test_an_old_report_without_the_digest_field_reads_as_blake2b(report: RunReport) -> None:
    """Every report written before kmigrate named its hash holds BLAKE2b-256 digests."""
    data = json.loads(report.to_json())
    del data["digest"]
    for u in (u for b in data["brokers"] for p in b["partitions"] for u in p["units"]):
        assert "digest_algorithm" in u
        del u["digest_algorithm"]
    old = RunReport.model_validate(data)
    assert old.digest == DigestInfo(algorithm=DigestAlgorithm.BLAKE2B, version=1)
    assert str(old.digest) == "blake2b-256, canonical records v1"
    unit = next(u for u in old.iter_results() if u.digest_before)
    assert unit.digest_algorithm is None and old.unit_digest_algorithm(unit) is DigestAlgorithm.BLAKE2B
    assert old.digest_algorithms() == {DigestAlgorithm.BLAKE2B: 12}
    assert old.exit_code() == report.exit_code()


def test_a_unit_may_name_another_hash_than_the_run() -> None:
    """A run resumed across kmigrate versions: units finished by the older one keep BLAKE2b."""
    r = RunReport.start("unify-bootstrap", now=T0)
    r.add_unit(1, "t", 0, _unit(digest_before="aa", digest_after="aa", digest_algorithm="blake2b-256"))
    r.add_unit(1, "t", 1, _unit(digest_before="bb", digest_after="bb"))
    r.add_unit(1, "t", 2, _unit())
    assert r.digest_algorithms() == {DigestAlgorithm.BLAKE2B: 1, DigestAlgorithm.BLAKE3: 1}
    back = RunReport.from_json(r.to_json())
    assert [back.unit_digest_algorithm(u) for u in back.iter_results()][:2] == [DigestAlgorithm.BLAKE2B,
                                                                                 DigestAlgorithm.BLAKE3]
    data = json.loads(r.to_json())
    with pytest.raises(ValidationError):
        RunReport.model_validate({**data, "digest": {"algorithm": "md5", "version": 1}})
    with pytest.raises(ValidationError):
        _unit(digest_algorithm="sha1")
