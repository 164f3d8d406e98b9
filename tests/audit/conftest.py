"""Shared report fixtures for the audit tests: realistic, multi-broker, with hostile strings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from migration.audit.model import (
    Finding,
    FormatVersions,
    OffsetRange,
    RunReport,
    SessionInfo,
    UnitResult,
    UnitStatus,
)

T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
HOSTILE = '<script>alert("x")</script>&"\'.log'


def build_report(*, failed: bool = True, refused: bool = False, dag: bool = True) -> RunReport:
    """Three brokers, mixed v0/v1 input upgraded to v2, one skipped unit, optionally a failure
    (with a hostile file name) and a refusal."""
    report = RunReport.start(
        "upgrade",
        {"target_magic": 2, "brokers": [1, 2, 3], "s3_secret_key": "hunter2", "bucket": "s3://ak:sk@minio/b"},
        run_id="upgrade-20250301T120000Z-abcdef01",
        dag_id="kafka_upgrade" if dag else None,
        dag_run_id="manual__2025-03-01T12:00:00+00:00" if dag else None,
        task_id="migrate",
        formats=FormatVersions(source_magic=0, target_magic=2),
        now=T0,
    )
    report.session = SessionInfo(session_id="s-1", epoch=4, full_rescan=False, dirty=5, deferred=1, clean=7)
    step = 0
    for broker in (1, 2, 3):
        for partition in (0, 1):
            for seg in range(2):
                base = seg * 1000
                size = 10_000 * broker + 1_000 * partition + 17 * seg
                report.plan_unit(broker, "orders", partition, f"{base:020d}.log", size)
                step += 1
                magic = "v0" if (partition + seg) % 2 == 0 else "v1"
                report.add_unit(
                    broker,
                    "orders",
                    partition,
                    UnitResult(
                        unit=f"{base:020d}.log",
                        path=f"/var/kafka/b{broker}/orders-{partition}/{base:020d}.log",
                        status=UnitStatus.OK,
                        input_format=magic,
                        output_format="v2",
                        records_before=100 + seg,
                        records_after=100 + seg,
                        bytes_before=size,
                        bytes_after=size - 500,
                        offsets=OffsetRange(first=base, last=base + 99 + seg),
                        digest_before="ab" * 16,
                        digest_after="AB" * 16,
                        duration_s=0.25 * broker,
                        warnings=[Finding(file="x.log", position=12, message="timestamp missing")] if seg else [],
                    ),
                    at=T0 + timedelta(seconds=step),
                )
    report.add_unit(
        2,
        "payments",
        3,
        UnitResult(unit="00000000000000000000.log", status=UnitStatus.SKIPPED, input_format="v2", bytes_before=4096),
        at=T0 + timedelta(seconds=step + 1),
    )
    if failed:
        report.add_unit(
            3,
            "payments",
            0,
            UnitResult(
                unit=HOSTILE,
                path=f"/var/kafka/b3/payments-0/{HOSTILE}",
                status=UnitStatus.FAILED,
                input_format="v1",
                bytes_before=2048,
                records_before=9,
                errors=[Finding(file=f"/var/kafka/b3/payments-0/{HOSTILE}", position=1234, message="CRC mismatch")],
            ),
            at=T0 + timedelta(seconds=step + 2),
        )
    if refused:
        report.refuse("broker 3 is running (lock held on /var/kafka/b3/.lock)")
    report.finish(now=T0 + timedelta(seconds=step + 5))
    return report


@pytest.fixture
def report() -> RunReport:
    return build_report()


@pytest.fixture
def make_report():
    """The builder itself, for tests that need variants (refused, no DAG, ...)."""
    return build_report


@pytest.fixture
def hostile() -> str:
    return HOSTILE
