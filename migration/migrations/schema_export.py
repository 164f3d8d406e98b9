"""Export the JSON Schemas of every persisted document into ``schemas/``: the run report
(``migration.audit.schema_export``) and the run documents a resume, a rollback or a finalize
reads back, perhaps with another kmigrate (docs/architecture.md, "Run documents").

``python -m migration.migrations.schema_export`` (``make schemas``) rewrites them; ``--check``
exits 1 when a committed schema is out of date (a test runs it)."""

from __future__ import annotations

from pydantic import BaseModel

from migration.audit import schema_export
from migration.migrations.common.backup import UnitBackup
from migration.migrations.common.leader_epoch import EpochAssignment
from migration.migrations.tier.backup import PartitionBackup
from migration.migrations.tier.plan import TierPrepare
from migration.migrations.unify.plan import UnifyPrepare
from migration.migrations.upgrade.journal import UnitJournal
from migration.migrations.upgrade.plan import UpgradePrepare
from migration.migrations.upgrade.preflight import PreflightPrepare
from migration.migrations.upgrade.stage import StagedPrefix, StagedSegment, VerifiedSegment
from migration.runtime.documents import JobDocument, ResultsDocument

COMMAND = "python -m migration.migrations.schema_export"

# file stem -> model, as written
RUN_DOCUMENTS: dict[str, type[BaseModel]] = {
    "run-job": JobDocument,
    "run-results": ResultsDocument,
    "upgrade-prepare": UpgradePrepare,
    "preflight-prepare": PreflightPrepare,
    "upgrade-unit-journal": UnitJournal,
    "unify-prepare": UnifyPrepare,
    "tier-prepare": TierPrepare,
    "backup-unit-manifest": UnitBackup,
    "backup-leader-epoch": EpochAssignment,
    "backup-tier-partition": PartitionBackup,
    "upgrade-stage-manifest": StagedSegment,
    "upgrade-stage-verified": VerifiedSegment,
    "upgrade-stage-prefix": StagedPrefix,
}
ALL: dict[str, type[BaseModel]] = {**schema_export.SCHEMAS, **RUN_DOCUMENTS}


def main(argv: list[str] | None = None) -> int:
    return schema_export.main(argv, ALL, COMMAND)


if __name__ == "__main__":
    raise SystemExit(main())
