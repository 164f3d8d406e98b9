"""The short reports the drivers' rollbacks and commits save when they change nothing: a
refusal (exit 3), or one notice that says why there is nothing to do."""

from __future__ import annotations

from typing import Any

from migration.audit.model import FindingCode, RunKind, RunReport
from migration.audit.store import ReportStore


def refused_report(kind: RunKind, report_id: str, reason: str, params: dict[str, Any]) -> RunReport:
    """A report of ``kind`` refused for ``reason``, saved."""
    report = RunReport.start(kind, params, run_id=report_id)
    report.refuse(reason)
    report.finish()
    ReportStore().save(report)
    return report


def notice_report(kind: RunKind, report_id: str, params: dict[str, Any], message: str,
                  code: FindingCode | None = None) -> RunReport:
    """A report of ``kind`` that did nothing and says why in one warning (``code`` when given), saved."""
    report = RunReport.start(kind, params, run_id=report_id)
    report.warn(message, code=code)
    report.finish()
    ReportStore().save(report)
    return report
