"""Run an inline upgrade in this process (the crash test kills it with KMIGRATE_FAULT_AT).

    python crash_job.py [--stage STAGE_ID] RUN_ID TARGET SEGMENT_BYTES LOGDIR...

``--stage``: the stop window of a prestage (``UpgradeOptions.stage``), its stage found where
``$KMIGRATE_STAGE_ROOT`` (or the default stage root) says.
"""

from __future__ import annotations

import sys

from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade


def main(argv: list[str]) -> int:
    stage = None
    if argv[:1] == ["--stage"]:
        stage, argv = argv[1], argv[2:]
    run_id, target, segment_bytes, *log_dirs = argv
    report = execute_upgrade(log_dirs, options=UpgradeOptions(target=target, segment_bytes=int(segment_bytes),
                                                              stage=stage),
                             engine="inline", run_id=run_id)
    return report.exit_code()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
