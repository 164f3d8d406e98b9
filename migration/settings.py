"""Where the project keeps its own state: the home (docs/operations.md, "Where state lives").

Runs (jobs, results, journals, plans), reports, lock records, beliefs and the session store all
live under one directory, never inside a Kafka log dir (Kafka refuses to start on a log dir
holding anything but its own files), and never where the working directory happens to be:

1. ``--home`` (the CLI sets it for the process and its children through ``KMIGRATE_HOME``);
2. ``$KMIGRATE_HOME``;
3. ``$KMIGRATE_OUT``, the earlier name of the same setting;
4. in Airflow processes: ``[kmigrate] home`` (airflow.cfg or ``AIRFLOW__KMIGRATE__HOME``), else
   the Variable ``kmigrate_home`` (the DAGs and the plugin pass these lookups in);
5. ``$XDG_STATE_HOME/kmigrate``, else ``~/.local/state/kmigrate`` (the XDG base directory
   convention for state that outlives a run but is not a user's document).
``KMIGRATE_REPORT_ROOT``, ``KMIGRATE_BACKUP_ROOT`` and ``KMIGRATE_SESSIONS_URL`` move one part
elsewhere. Backups default to the file system of the log dirs (hard links), see
:func:`default_backup_root`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict

ENV_HOME = "KMIGRATE_HOME"
ENV_OUT = "KMIGRATE_OUT"  # the earlier name of KMIGRATE_HOME, still read (after it)
ENV_REPORT_ROOT = "KMIGRATE_REPORT_ROOT"
ENV_BACKUP_ROOT = "KMIGRATE_BACKUP_ROOT"
ENV_STAGE_ROOT = "KMIGRATE_STAGE_ROOT"
ENV_SESSIONS_URL = "KMIGRATE_SESSIONS_URL"
ENV_XDG_STATE_HOME = "XDG_STATE_HOME"
ENV_PROJECT_ROOT = "KMIGRATE_PROJECT_ROOT"  # the checkout, for processes started elsewhere
ENV_CLUSTER = "KMIGRATE_CLUSTER"  # the cluster description, when no DAG param names one
# The home's layout (docs/operations.md, "Where state lives"): every path under it is named here.
RUNS_DIR, REPORTS_DIR, STATE_DIR = "runs", "reports", "state"
LOCKS_DIR, BELIEFS_DIR, SESSIONS_DB = "locks", "beliefs", "sessions.sqlite"  # under state/
# What a Spark executor or a spark-submit driver needs to see the driver's state: the home and
# the overrides of its parts. Not the sessions URL: only drivers use the session store, and the
# URL may hold a password, which has no business in a job file.
STATE_ENV = (ENV_HOME, ENV_REPORT_ROOT, ENV_BACKUP_ROOT, ENV_STAGE_ROOT)
# Airflow's names for the home (docs/operations.md): a config option and a Variable.
AIRFLOW_SECTION, AIRFLOW_OPTION, AIRFLOW_VARIABLE = "kmigrate", "home", "kmigrate_home"
# Beside a log dir, on its file system, when the home is on another one.
BACKUPS_BESIDE_LOG_DIRS = ".kmigrate-backups"
STAGES_BESIDE_LOG_DIRS = ".kmigrate-stages"

# (where the value comes from, a function returning it or nothing): a home lookup of a host
# application (Airflow), consulted after the environment.
HomeLookup = tuple[str, Callable[[], str | None]]


class AirflowConfig(Protocol):
    """``airflow.sdk.conf``, as far as the home lookup uses it."""

    def get(self, section: str, key: str, *, fallback: str) -> str | None: ...


class AirflowVariables(Protocol):
    """``airflow.sdk.Variable``, as far as the home lookup uses it."""

    def get(self, key: str, default: str) -> str | None: ...


class HomeError(ValueError):
    """No home can be told (no HOME directory and nothing configured)."""


class Home(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: Path
    source: str

    def describe(self) -> str:
        return f"home: {self.path} ({self.source})"


_chosen: Home | None = None


def _absolute(value: str | os.PathLike[str]) -> Path:
    # A relative value is taken from where it was given (the shell's directory), once.
    return Path(value).expanduser().resolve()


def use_home(path: str | os.PathLike[str], source: str) -> Home:
    """Make ``path`` the home of this process and of every process it starts (Spark, spark-submit,
    ``airflow``): they read ``KMIGRATE_HOME``."""
    global _chosen
    chosen = Home(path=_absolute(path), source=source)
    os.environ[ENV_HOME] = str(chosen.path)
    _chosen = chosen
    return chosen


def resolve_home(lookups: Sequence[HomeLookup] = ()) -> Home:
    """The home and where it was found, in the order of the module docstring."""
    env = os.environ.get(ENV_HOME)
    if env:
        if _chosen is not None and str(_chosen.path) == env:
            return _chosen
        return Home(path=_absolute(env), source=ENV_HOME)
    legacy = os.environ.get(ENV_OUT)
    if legacy:
        return Home(path=_absolute(legacy), source=f"{ENV_OUT}, the earlier name of {ENV_HOME}")
    for source, lookup in lookups:
        value = lookup()
        if value:
            return Home(path=_absolute(value), source=source)
    # XDG Base Directory Specification: a relative $XDG_STATE_HOME is invalid and ignored.
    xdg = os.environ.get(ENV_XDG_STATE_HOME)
    if xdg and Path(xdg).is_absolute():
        return Home(path=_absolute(Path(xdg) / "kmigrate"), source=f"${ENV_XDG_STATE_HOME}/kmigrate")
    try:
        user_home = Path.home()
    except RuntimeError:
        raise HomeError(f"no home directory to keep state in: set {ENV_HOME} or pass --home") from None
    return Home(path=_absolute(user_home / ".local" / "state" / "kmigrate"),
                source="default: ~/.local/state/kmigrate")


def adopt_home(lookups: Sequence[HomeLookup]) -> Home:
    """The home with a host application's lookups (Airflow's, from the DAG files); a home
    found there is exported like ``--home``, so spark-submit and its executors see it too."""
    found = resolve_home(lookups)
    if any(found.source == source for source, _ in lookups):
        return use_home(found.path, found.source)
    return found


def airflow_home_lookups(conf: AirflowConfig, variable: AirflowVariables) -> list[HomeLookup]:
    """``[kmigrate] home`` of Airflow's configuration, then the Variable ``kmigrate_home``:
    ``conf`` and ``variable`` are ``airflow.sdk``'s (passed in: only dags/, plugins/ and the
    runtime's adapter import Airflow). The Variable is read only when nothing before it is set."""
    return [
        (f"[{AIRFLOW_SECTION}] {AIRFLOW_OPTION} of the Airflow configuration",
         lambda: conf.get(AIRFLOW_SECTION, AIRFLOW_OPTION, fallback="") or None),
        (f"Airflow Variable {AIRFLOW_VARIABLE}",
         lambda: variable.get(AIRFLOW_VARIABLE, default="") or None),
    ]


def home() -> Path:
    return resolve_home().path


def out_dir() -> Path:
    """The home (its earlier name: it was ``<working directory>/out``)."""
    return home()


def runs_dir() -> Path:
    """Per-run working files: plans, Spark job and result files, journals, run records."""
    return home() / RUNS_DIR


def reports_dir(home_dir: Path | None = None) -> Path:
    """``$KMIGRATE_REPORT_ROOT``, else ``<home>/reports`` (``home_dir``, by default the home)."""
    env = os.environ.get(ENV_REPORT_ROOT)
    if env:
        return Path(env)
    return (home_dir if home_dir is not None else home()) / REPORTS_DIR


def locks_dir() -> Path:
    """The lock records: which run holds which log dir's lock (logdir/model.py)."""
    return home() / STATE_DIR / LOCKS_DIR


def beliefs_dir() -> Path:
    """What each scheduled flow last believed of a broker's epoch (orchestration/incremental.py)."""
    return home() / STATE_DIR / BELIEFS_DIR


def sessions_db() -> Path:
    """The session store's SQLite file when ``$KMIGRATE_SESSIONS_URL`` names none."""
    return home() / STATE_DIR / SESSIONS_DB


def state_env() -> dict[str, str]:
    """The home and the overrides of its parts, for a process that must see the same state."""
    env = {ENV_HOME: str(home())}
    env.update({k: os.environ[k] for k in STATE_ENV if k != ENV_HOME and os.environ.get(k)})
    return env


def apply_state_env(env: Mapping[str, str]) -> None:
    """Adopt another process's :func:`state_env` (a Spark executor, a spark-submit driver)."""
    for key in STATE_ENV:
        if env.get(key):
            os.environ[key] = env[key]
        else:
            os.environ.pop(key, None)


def project_root() -> Path:
    """The checkout (DAGs, plugins, the demo's files); not where state lives."""
    return Path(os.environ.get(ENV_PROJECT_ROOT) or os.getcwd()).resolve()


def is_inside(path: str | os.PathLike[str], parent: str | os.PathLike[str]) -> bool:
    p, q = Path(path).resolve(), Path(parent).resolve()
    return p == q or q in p.parents


def device_of(path: str | os.PathLike[str]) -> int:
    """The file system (``st_dev``) ``path`` is or would be created on: its nearest existing
    ancestor's."""
    p = Path(path).absolute()
    for candidate in (p, *p.parents):
        try:
            return candidate.stat().st_dev
        except OSError:
            continue
    return Path("/").stat().st_dev


def _creatable(path: Path) -> bool:
    """Whether ``path`` exists as a writable directory or could be created (its nearest existing
    ancestor is a writable directory)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate.is_dir() and os.access(candidate, os.W_OK | os.X_OK)
    return False


def default_backup_root(log_dirs: Sequence[str | os.PathLike[str]] = ()) -> Path:
    """``$KMIGRATE_BACKUP_ROOT``; else a directory outside every log dir on their file system, so
    that backups are hard links (instant, no space: a segment's replacement only unlinks the log
    dir's name): ``<home>/backups`` when the home is on it, else ``.kmigrate-backups`` beside a
    log dir. With log dirs on several file systems, the place that links the most of them (the
    others' originals are copied: see ``check_backup_root``). Without log dirs, ``<home>/backups``."""
    return _on_log_dirs_file_system(ENV_BACKUP_ROOT, "backups", BACKUPS_BESIDE_LOG_DIRS, log_dirs)


def default_stage_root(log_dirs: Sequence[str | os.PathLike[str]] = ()) -> Path:
    """Where ``kmigrate upgrade --prestage`` stages converted segments: ``$KMIGRATE_STAGE_ROOT``;
    else ``<home>/stages`` or ``.kmigrate-stages`` beside a log dir, chosen as the backup root is,
    so that the stop window links staged files in (a rename's cost, never a copy)."""
    return _on_log_dirs_file_system(ENV_STAGE_ROOT, "stages", STAGES_BESIDE_LOG_DIRS, log_dirs)


def _on_log_dirs_file_system(env_name: str, in_home_name: str, beside_name: str,
                             log_dirs: Sequence[str | os.PathLike[str]]) -> Path:
    env = os.environ.get(env_name)
    if env:
        return Path(env).resolve()
    in_home = home() / in_home_name
    if not log_dirs:
        return in_home.resolve()
    dirs = [Path(d).resolve() for d in log_dirs]
    devices = [device_of(d) for d in dirs]
    candidates = [in_home.resolve()]
    candidates += [d.parent / beside_name for d in dirs if d.parent != d]
    best, best_links = candidates[0], -1
    for c in dict.fromkeys(candidates):
        if any(is_inside(c, d) for d in dirs) or not _creatable(c):
            continue
        links = sum(1 for dev in devices if dev == device_of(c))
        if links > best_links:  # ties: the earlier candidate (the home first)
            best, best_links = c, links
    return best
