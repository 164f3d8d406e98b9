"""Fault injection for crash tests: ``KMIGRATE_FAULT_AT`` names where a run dies.

Simple form, one rule: ``<point>:<count>`` kills this process with SIGKILL the ``count``-th
time it reaches ``fault_point(<point>)``; ``<point>`` alone, the first time.

Full form, rules separated by ``,``: ``<point>[@<unit>][:<count>[:<action>]][+<after>]``
- ``@<unit>``: only hits while a unit whose id contains ``<unit>`` runs count;
- ``<action>``: ``kill`` (SIGKILL this process, the default), ``killsession`` (SIGKILL every
  process of this session: the CLI driver, Spark's JVM and its Python workers at once, as a
  power cut of the host would; PySpark's workers sit in process groups of their own, so a
  process-group kill would miss them), or ``pause<seconds>`` (sleep, so another process can
  get somewhere);
- ``+<after>``: before acting, wait (up to 60 s) until ``<after>`` (``<point>[@<unit>]``) has
  been reached by any process.
With ``KMIGRATE_FAULT_DIR`` set, hits are counted across processes (Spark executors are
separate processes) by creating numbered marker files there; otherwise per process.

SIGKILL, not an exception: nothing is flushed, no ``finally`` runs, exactly like a power cut
of the process (the page cache survives, which is what fsync ordering is about).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ENV_FAULT_AT = "KMIGRATE_FAULT_AT"
ENV_FAULT_DIR = "KMIGRATE_FAULT_DIR"
AFTER_WAIT_S = 60.0

_RULE = re.compile(r"^(?P<point>[\w.-]+)(?:@(?P<unit>[^:+]+))?(?::(?P<count>\d+)"
                   r"(?::(?P<action>kill|killsession|pause\d+(?:\.\d+)?))?)?(?:\+(?P<after>[\w.-]+(?:@[^:+,]+)?))?$")

_current_unit: contextvars.ContextVar[str] = contextvars.ContextVar("kmigrate_fault_unit", default="")
_hits: dict[int, int] = {}
_parsed: tuple[str, list[FaultRule]] | None = None


@dataclass(frozen=True)
class FaultRule:
    index: int
    point: str
    unit: str | None
    count: int
    action: str
    after: str | None  # "<point>" or "<point>@<unit>"

    def matches(self, point: str, unit: str) -> bool:
        return point == self.point and (self.unit is None or self.unit in unit)


def parse_rules(spec: str) -> list[FaultRule]:
    rules = []
    for i, text in enumerate(s.strip() for s in spec.split(",") if s.strip()):
        m = _RULE.match(text)
        if m is None:
            raise ValueError(f"{ENV_FAULT_AT}: cannot read rule {text!r}; expected "
                             "<point>[@<unit>][:<count>[:kill|killsession|pause<s>]][+<point>[@<unit>]]")
        rules.append(FaultRule(i, m["point"], m["unit"], int(m["count"] or 1), m["action"] or "kill", m["after"]))
    return rules


def _rules() -> list[FaultRule]:
    global _parsed
    spec = os.environ.get(ENV_FAULT_AT, "")
    if _parsed is None or _parsed[0] != spec:
        _parsed = (spec, parse_rules(spec))
    return _parsed[1]


@contextlib.contextmanager
def unit_scope(unit_id: str) -> Iterator[None]:
    """Fault points reached inside belong to ``unit_id`` (for ``@<unit>`` rules)."""
    token = _current_unit.set(unit_id)
    try:
        yield
    finally:
        _current_unit.reset(token)


def _marker_name(point: str, unit: str) -> str:
    return f"reached.{point}@{unit}".replace(os.sep, "_")


def _count_hit(rule: FaultRule, fault_dir: Path | None) -> int:
    if fault_dir is None:
        _hits[rule.index] = _hits.get(rule.index, 0) + 1
        return _hits[rule.index]
    n = 1
    while True:  # O_EXCL makes each number one process's: a global count without a lock
        try:
            os.close(os.open(fault_dir / f"rule{rule.index}.{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return n
        except FileExistsError:
            n += 1


def _reached(after: str, fault_dir: Path | None) -> bool:
    if fault_dir is None:
        return False
    point, _, unit = after.partition("@")
    prefix = f"reached.{point}@"
    return any(e.name.startswith(prefix) and unit in e.name[len(prefix):] for e in os.scandir(fault_dir))


def session_pids(sid: int) -> list[int]:
    """Every live process of session ``sid`` (Linux ``/proc``)."""
    out = []
    for e in os.scandir("/proc"):
        if e.name.isdigit():
            try:
                if os.getsid(int(e.name)) == sid:
                    out.append(int(e.name))
            except OSError:  # gone meanwhile
                continue
    return out


def _act(action: str) -> None:
    if action == "killsession":
        me = os.getpid()
        for pid in session_pids(os.getsid(0)):
            if pid != me:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    elif action.startswith("pause"):
        time.sleep(float(action[len("pause"):]))
        return
    os.kill(os.getpid(), signal.SIGKILL)


def armed(point: str) -> bool:
    """Whether a rule names ``point`` (a writer may then make its partial state durable first,
    so that the crash test sees what a power cut at that instant would leave)."""
    return bool(os.environ.get(ENV_FAULT_AT)) and any(r.point == point for r in _rules())


def fault_points(point: str, times: int) -> None:
    """``times`` passes through ``point`` at once (a run of batches written in one call): the
    count a rule waits for is the same as one batch at a time would reach."""
    if not os.environ.get(ENV_FAULT_AT):
        return
    for _ in range(times):
        fault_point(point)


def fault_point(point: str) -> None:
    if not os.environ.get(ENV_FAULT_AT):
        return
    rules = _rules()
    unit = _current_unit.get()
    fault_dir = Path(os.environ[ENV_FAULT_DIR]) if os.environ.get(ENV_FAULT_DIR) else None
    if fault_dir is not None and any(r.after and r.after.partition("@")[0] == point for r in rules):
        (fault_dir / _marker_name(point, unit)).touch()
    for rule in rules:
        if not rule.matches(point, unit) or _count_hit(rule, fault_dir) != rule.count:
            continue
        if rule.after:
            deadline = time.monotonic() + AFTER_WAIT_S
            while not _reached(rule.after, fault_dir) and time.monotonic() < deadline:
                time.sleep(0.01)
        _act(rule.action)
