"""Fault injection for crash tests: ``KMIGRATE_FAULT_AT=<step name>:<count>`` kills this
process with SIGKILL the ``count``-th time it reaches ``fault_point(<step name>)``.

SIGKILL, not an exception: nothing is flushed, no ``finally`` runs, exactly like a power cut
of the process (the page cache survives, which is what fsync ordering is about).
"""

from __future__ import annotations

import os
import signal

ENV_FAULT_AT = "KMIGRATE_FAULT_AT"

_hits: dict[str, int] = {}


def fault_point(step: str) -> None:
    spec = os.environ.get(ENV_FAULT_AT)
    if not spec:
        return
    name, _, count = spec.rpartition(":")
    if name != step:
        return
    _hits[step] = _hits.get(step, 0) + 1
    if _hits[step] == int(count):
        os.kill(os.getpid(), signal.SIGKILL)
