"""What every command of the CLI shares: exit codes, the consoles, the engine choice, the
checks of the paths and values a command is given (before anything is written), and the
help's layout."""

from __future__ import annotations

# Imports of the migrations sit inside the commands: start-up cost, measured (migration/cli/__init__.py).
import os
import re
import sys
from collections.abc import Iterable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, cast, get_args

import typer
from rich.console import Console
from typer.core import TyperArgument, TyperGroup, TyperOption

from migration.logdir.paths import Need, PathClass, PathKind, classify_path, path_problem
from migration.settings import Home

if TYPE_CHECKING:
    from migration.audit.model import RunReport

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3

# Wide tables when piped or captured (reports, CI logs); the terminal's width otherwise.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


class EngineName(StrEnum):
    """Where a command's units run (docs/operations.md, "Engines"): Spark by default, the
    design's engine for a fleet; inline (this process, one unit after the other) for quick
    local work and tests."""

    SPARK = "spark"
    INLINE = "inline"


ENGINE_HELP = "Where units run: spark (local[*] or --master), or inline in this process for quick local work."


def usage_error(command: str, message: str) -> typer.Exit:
    """Print ``message`` as one line on stderr; the exit to raise (2, a usage error)."""
    err_console.print(f"kmigrate {command}: {message}", markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_USAGE)


def check_paths(command: str, paths: Iterable[str | os.PathLike[str]], need: Need, *, option: str | None = None,
                hints: Mapping[PathKind, str] | None = None) -> list[PathClass]:
    """Classify every path a command was given (migration/logdir/paths.py) and exit 2, having
    written nothing, when one is not what ``need`` says, naming what it is and what to pass;
    also when a path is given twice. ``option``: the flag the paths came with, for the message."""
    classes: list[PathClass] = []
    problems: list[str] = []
    seen: dict[Path, Path] = {}
    for raw in paths:
        c = classify_path(raw)
        classes.append(c)
        problem = path_problem(c, need, hints=hints)
        if problem is not None:
            problems.append((f"{option} " if option else "") + problem)
            continue
        real = Path(raw).resolve()
        if real in seen:
            problems.append(f"{raw} is given twice" + (f" (as {seen[real]})" if str(seen[real]) != str(raw) else ""))
        seen.setdefault(real, Path(raw))
    if problems:
        for line in problems:
            err_console.print(f"kmigrate {command}: {line}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_USAGE)
    return classes


_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")  # audit/model.py RUN_ID_PATTERN


def check_run_id(command: str, run_id: str | None, option: str = "--run-id") -> None:
    """A run id names a directory of the home and a report: letters, digits, '.', '_', '-'."""
    if run_id is not None and not _RUN_ID.match(run_id):
        raise usage_error(command, f"{option} {run_id!r}: use up to 128 letters, digits, '.', '_' or '-', "
                                   "starting with a letter or digit")


# ---------------------------------------------------------------- help layout

_SCALAR_LABELS: dict[Any, str] = {int: "INTEGER", float: "NUMBER", str: "TEXT"}


def _type_label(param: TyperArgument | TyperOption) -> str | None:
    """Click's convention: TEXT, INTEGER, PATH, FILE, DIR, [a|b]; None when unknown."""
    desc = param.type_descriptor
    element = get_args(desc.annotation)[0] if desc.is_list else desc.annotation
    if desc.is_choice:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices or ()) + "]"
    if desc.is_path or element is Path:
        return {"file": "FILE", "dir": "DIR", "directory": "DIR"}.get(desc.path_type, "PATH")
    return _SCALAR_LABELS.get(element)


class _Argument(TyperArgument):
    """An argument whose type column reads e.g. ``PATH...`` (typer prints ``<list[Path]>``)."""

    type_label: str | None = None

    def display_type_rich(self, ctx: Any) -> str | None:
        return self.type_label if self.type_label is not None else super().display_type_rich(ctx)


def _tidy(param: Any) -> None:
    if isinstance(param, TyperOption):
        if param.is_flag or param.count:
            param.metavar = ""  # a flag takes no value: typer would print <bool>
        elif param.metavar is None:
            label = _type_label(param)
            if label is not None:
                param.metavar = label  # a repeatable option takes one value per use
    elif isinstance(param, TyperArgument) and param.metavar is None and param.name:
        label = _type_label(param)
        name = param.name.upper()
        if param.nargs != 1:
            name = name[:-1] if name.endswith("S") else name
            label = f"{label or 'VALUE'}..."
        param.metavar = name
        param.__class__ = _Argument
        cast(_Argument, param).type_label = label  # the class it was just given


def tidy_help(command: Any) -> None:
    """Click-style value names in a command's help: none for a flag, ``PATH...`` for a list."""
    for param in command.params:
        _tidy(param)
    help_option = command.get_help_option(typer.Context(command))
    if help_option is not None:
        _tidy(help_option)


class KmigrateGroup(TyperGroup):
    """The ``kmigrate`` group: its own help and every command's, tidied (:func:`tidy_help`)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        tidy_help(self)
        for command in self.commands.values():
            tidy_help(command)


# ---------------------------------------------------------------- a run's report


def show_report(report: RunReport, command: str, *, lines: Iterable[str] = (), notes: bool = True) -> int:
    """What every command prints of the run it did, the same way: a refusal in one line on
    stderr (only that line, with the report's path, when nothing started), the summary
    (audit/text.py ``print_summary``), the command's own ``lines`` about its units, the run's
    notes and events (``note_lines``; ``notes=False`` when the command has said its warnings
    already) and the report's path. Returns the exit code."""
    from migration.audit.store import ReportStore
    from migration.audit.text import note_lines, print_summary

    path = ReportStore().json_path(report.run_id)
    if report.refusal:
        started = bool(report.totals.units)
        err_console.print(f"kmigrate {command}: refused: {report.refusal}" + ("" if started else f" (report: {path})"),
                          markup=False, highlight=False, soft_wrap=True)
        if not started:  # nothing started: the reason (and its fix) is all there is to say
            return report.exit_code()
    print_summary(report, console)
    for line in [*lines, *(note_lines(report) if notes else []), f"report: {path}"]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return report.exit_code()


def ineligible_lines(report: RunReport) -> list[str]:
    """One line per unit left out of the run, with why."""
    from migration.audit.model import UnitStatus

    return [f"ineligible {topic}-{partition}: {'; '.join(w.message for w in u.warnings)}"
            for _bid, topic, partition, u in report.iter_units() if u.status is UnitStatus.INELIGIBLE]


# ---------------------------------------------------------------- the home


def say_home(command: str, *parts: str) -> Home:
    """Print on stderr which home (and which moved parts: ``parts``) a command reads, one line;
    exit 2 when there is none (docs/operations.md, "Where state lives")."""
    from migration.settings import HomeError, resolve_home

    try:
        found = resolve_home()
    except HomeError as exc:
        raise usage_error(command, str(exc)) from None
    err_console.print("; ".join([found.describe(), *parts]), markup=False, highlight=False, soft_wrap=True)
    return found


def closest(name: str, known: Iterable[str]) -> list[str]:
    """The known names closest to a mistyped or shortened one, best first: those containing it
    (a run id typed in part), then difflib's closest."""
    import difflib

    names = list(known)
    found = [k for k in sorted(names, reverse=True) if name and name in k]
    found += difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    return list(dict.fromkeys(found))[:5]


def unknown_run(command: str, run_id: str, known: list[str], where: str) -> typer.Exit:
    """A run id this home does not have: a usage error (2) naming the closest it has."""
    matches = closest(run_id, known)
    if matches:
        hint = "closest: " + ", ".join(matches)
    elif known:
        hint = f"{len(known)} runs there, none like it (kmigrate report --list)"
    else:
        hint = "no runs there at all: is it the right home? (--home, KMIGRATE_HOME)"
    return usage_error(command, f"no run {run_id} in {where}; {hint}")


# ---------------------------------------------------------------- the run a rollback or commit acts on

# Unit kinds of an upgrade job (migrations/upgrade/driver.py UNIT_KINDS): what rollback and
# commit act on.
_UPGRADE_UNIT_KINDS = frozenset({"upgrade-segment", "upgrade-leader-epoch"})


class RunToUndo(NamedTuple):
    """The run ``kmigrate rollback`` or ``commit`` acts on, decided once (:func:`classify_run`):
    its kind, and the backup root to pass on (None: the one its job names)."""

    kind: Literal["upgrade", "tier-prepare"]
    backup_root: str | None


def _upgrade_run_ids(runs: Path) -> list[str]:
    return sorted(p.name for p in runs.iterdir() if (p / "job.json").is_file()) if runs.is_dir() else []


def classify_run(command: str, run_id: str, *, backup_root: Path | None = None,
                 from_backups: bool = False) -> RunToUndo:
    """Which run of this home ``run_id`` is, from its job (read once) or, for a rollback
    (``from_backups``), from its backups when it has no job: in ``backup_root``, the root its
    report names (read once) or the default root. A rollback acts on upgrade and tier-prepare
    runs, a commit on upgrade runs. Exit 2, having written nothing, when it is no such run: not
    a run id, unknown here, a job of other units, or (commit) no job. A run directory without
    job or backups is the driver's to judge (it never changed a log dir)."""
    import json

    from migration.migrations.tier.backup import tier_backup_dir
    from migration.migrations.tier.plan import UNIT_KIND as TIER_UNIT_KIND
    from migration.settings import default_backup_root, runs_dir

    if not _RUN_ID.match(run_id):
        raise usage_error(command, f"{run_id!r} is not a run id (letters, digits, '.', '_', '-'; see kmigrate "
                                   "report --list)")
    runs = runs_dir()
    run_dir = runs / run_id
    job = run_dir / "job.json"
    given = str(backup_root) if backup_root is not None else None
    if job.is_file():
        try:
            kinds = {str(u.get("kind")) for u in json.loads(job.read_text()).get("units", [])}
        except (OSError, ValueError, AttributeError) as exc:
            raise usage_error(command, f"run {run_id}: its job file {job} is unreadable ({exc})") from None
        if from_backups and TIER_UNIT_KIND in kinds:
            return RunToUndo("tier-prepare", given)
        if kinds - _UPGRADE_UNIT_KINDS:
            raise usage_error(command, f"run {run_id} is not an upgrade run (its units are "
                                       f"{', '.join(sorted(kinds))}): {command} acts on upgrade runs")
        return RunToUndo("upgrade", given)
    if not from_backups:
        if run_dir.is_dir():
            raise usage_error(command, f"run {run_id} in {runs} has no upgrade job (it was refused, or failed, "
                                       f"before it planned anything): nothing to {command}")
        raise unknown_run(command, run_id, _upgrade_run_ids(runs), str(runs))
    root = backup_root or _reported_backup_root(run_id) or default_backup_root()
    if tier_backup_dir(root, run_id).is_dir():
        return RunToUndo("tier-prepare", str(root))
    if run_dir.is_dir() or (root / run_id / "manifests").is_dir():  # migrations/common/backup.py layout
        return RunToUndo("upgrade", str(root))
    raise unknown_run(command, run_id, _upgrade_run_ids(runs), f"{runs} nor backups of it in {root}")


def _reported_backup_root(run_id: str) -> Path | None:
    """The backup root the run's report names (its run directory may be lost, not its report)."""
    from migration.audit.store import ReportStore

    try:
        value = ReportStore().load(run_id).params.get("backup_root")
    except (LookupError, ValueError, OSError):
        return None
    return Path(value) if isinstance(value, str) and value else None


def tier_rollback_lines(report: RunReport) -> list[str]:
    """A tier-prepare run's rollback: one line per partition, with what was done and said."""
    return [f"{u.status.value} {topic}-{partition} ({u.path}): {'; '.join(f.message for f in u.errors + u.warnings)}"
            for _bid, topic, partition, u in report.iter_units()]


# ---------------------------------------------------------------- DAG run ids


def _is_run_dir(run_id: str) -> bool:
    from migration.runtime.runs import RunDir

    return bool(_RUN_ID.match(run_id)) and RunDir.path_of(run_id).is_dir()


def rollback_dag_run(run_id: str, backup_root: Path | None) -> None:
    """``kmigrate rollback DAG_RUN_ID``: when ``run_id`` is no run of this home but an Airflow DAG
    run whose upgrade step runs are here, list them, roll each back, the last planned first, and
    exit with the worst exit code. Does nothing otherwise (the caller goes on with a run id)."""
    if _is_run_dir(run_id):
        return
    from migration.orchestration.upgrade_rollout import upgrade_step_runs

    steps = upgrade_step_runs(run_id)
    if not steps:
        return
    from migration.migrations.upgrade.driver import rollback_run

    order = list(reversed(steps))
    err_console.print(f"DAG run {run_id}: {len(steps)} upgrade step run(s); rolling back, the last first: "
                      f"{', '.join(order)}", markup=False, highlight=False, soft_wrap=True)
    code = EXIT_OK
    for step in order:
        root = classify_run("rollback", step, backup_root=backup_root, from_backups=True).backup_root
        report = rollback_run(step, backup_root=root)
        console.print(f"rollback of {step}: exit {report.exit_code()}", markup=False, highlight=False)
        code = max(code, show_report(report, "rollback"))
    raise typer.Exit(code)


def dag_run_report_id(run: str, store: Any) -> str | None:
    """``kmigrate report DAG_RUN_ID``: when ``run`` names no report of ``store`` but an Airflow DAG
    run whose own (merged) report is there, list its step runs on stderr and return that
    report's run id; None otherwise."""
    from migration.audit.store import InvalidRunId, ReportNotFound
    from migration.orchestration.common import run_id_for

    if _RUN_ID.match(run) and run in store.run_ids():
        return None
    try:
        rid = run_id_for(run)
        merged = store.load(rid)
    except (ValueError, InvalidRunId, ReportNotFound, OSError):
        return None
    steps = [s.run_id for s in merged.steps]
    others = [link.run_id for link in store.dag_run_links(merged) if link.run_id not in steps]
    err_console.print(f"DAG run {run}: its report {rid}, merging step runs: {', '.join(steps) or 'none'}"
                      + (f"; other reports of the DAG run: {', '.join(others)}" if others else ""),
                      markup=False, highlight=False, soft_wrap=True)
    return rid
