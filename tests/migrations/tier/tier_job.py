"""Run ``tier-prepare --assign-leader-epoch --engine inline`` (or its rollback) in this process:
the crash and power-loss tests kill or trace it.

    python tier_job.py RUN_ID STORE_URL LOGDIR...
    python tier_job.py --rollback RUN_ID [BACKUP_ROOT]
"""

from __future__ import annotations

import sys

from migration.migrations.tier.driver import execute_tier, rollback_tier_run
from migration.migrations.tier.options import TierOptions


def main(argv: list[str]) -> int:
    if argv[0] == "--rollback":
        return rollback_tier_run(argv[1], backup_root=argv[2] if len(argv) > 2 else None).exit_code()
    run_id, store_url, *log_dirs = argv
    options = TierOptions(store_url=store_url, assign_leader_epoch=True, part_size=4096, multipart_threshold=16384)
    return execute_tier(log_dirs, options=options, engine="inline", run_id=run_id).exit_code()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
