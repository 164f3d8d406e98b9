"""``make ui`` (``python -m migration.demo.ui``): the Airflow UI on the repository's Airflow home.

Starts ``airflow api-server``, ``scheduler``, ``dag-processor`` and ``triggerer`` (deferred tasks
resume in it; Airflow's home page shows its health) with ``AIRFLOW_HOME`` (default
``.airflow``) and ``AIRFLOW_CONFIG`` (default ``airflow.cfg``) both set, so Airflow never writes a
second ``airflow.cfg`` of its own (one with the example DAGs); the api-server listens on loopback
only. The processes read kmigrate's home (``--home``, default the demo's ``out/demo``) through
``KMIGRATE_HOME`` and ``[kmigrate] home``, so each DAG run's "Migration report" tab shows its
report. Prints the URL and how to log in, then waits; Ctrl-C (or SIGTERM) stops them all.

Each process runs in its own session: the terminal's Ctrl-C reaches only this launcher, which
stops them in order. Stopping: SIGTERM to each process group and to every descendant that left
its group (Airflow's task supervisor puts each task in a group of its own), SIGKILL to whatever
is left after ``--stop-timeout``. On Linux the launcher is a child subreaper, so descendants
whose parent died are re-parented to it and still found. It imports no Airflow module (the
import contract): it only starts ``airflow`` processes.
"""

from __future__ import annotations

import argparse
import configparser
import contextlib
import ctypes
import ctypes.util
import errno
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import NamedTuple

from migration.audit.store import ReportStore, default_report_root
from migration.demo.connections import DEMO_SPARK, ConnectionSetupError, describe, write_connections
from migration.orchestration.common import SPARK_CONN_ID
from migration.settings import ENV_CLUSTER, ENV_HOME, ENV_OUT, ENV_PROJECT_ROOT, project_root

DEFAULT_PORT = 8080  # Airflow's, when the configuration sets no [api] port
HOST = "127.0.0.1"
HEALTH_PATH = "/api/v2/monitor/health"
SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
# (name shown and log file stem, the airflow subcommand); the api-server's arguments are added.
COMPONENTS = (("api-server", "api-server"), ("scheduler", "scheduler"), ("dag-processor", "dag-processor"),
              ("triggerer", "triggerer"))
NAMES = ", ".join(name for name, _ in COMPONENTS)
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_PROC = Path("/proc")


class UsageError(Exception):
    """Exit 2: a bad option (a port in use, a missing configuration)."""


class Stopped(Exception):
    """Ctrl-C, SIGTERM or SIGHUP arrived."""


@dataclass
class Launcher:
    stop_timeout: float
    log_dir: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    signals: int = 0  # Ctrl-C / SIGTERM count: the first stops gracefully, the second at once

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        if self.signals == 1:
            print(f"\n{signal.Signals(signum).name}: stopping (again to kill at once)", flush=True)

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = self.log_dir / f"{name}.log"
        with open(log, "wb") as out:
            self.procs[name] = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                                stderr=subprocess.STDOUT, start_new_session=True,
                                                preexec_fn=_die_with_parent)

    def exited(self) -> str | None:
        """The name of a process that has ended, if any."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                return name
        return None

    def stop(self) -> list[int]:
        """Stop every process started and every descendant of this one; the pids still alive
        after SIGKILL (none, unless the kernel could not kill them)."""
        me = os.getpid()
        seen = _descendants(me)
        groups = {p.pid for p in self.procs.values()}
        for pgid in groups:
            _signal_group(pgid, signal.SIGTERM)
        # The descendants that left their group (a task's own group) get it directly.
        for proc in seen.values():
            if proc.pgid not in groups:
                _signal_pid(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        while time.monotonic() < deadline and self.signals < 2:
            self._reap()
            # New ones too: a process forked while its parent stopped, an orphan adopted.
            seen.update({pid: p for pid, p in _descendants(me).items() if pid not in seen})
            if not _alive(seen):
                break
            time.sleep(0.1)
        left = _alive(seen)
        if left:
            print(f"still running after {self.stop_timeout:g}s, SIGKILL to: {', '.join(map(_describe, left))}",
                  flush=True)
            # The survivors' groups (what they forked meanwhile is in them), then each survivor.
            for pgid in {seen[pid].pgid for pid in left}:
                _signal_group(pgid, signal.SIGKILL)
            for pid in left:
                _signal_pid(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and _alive(seen):
                self._reap()
                time.sleep(0.05)
        self._reap()
        return _alive(seen)

    def _reap(self) -> None:
        for proc in self.procs.values():
            proc.poll()
        # Orphans adopted as subreaper: reap the ones that have exited (their zombies).
        for pid in _zombie_children(os.getpid()) - {p.pid for p in self.procs.values()}:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _load_libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name, use_errno=True) if name else None


# Loaded here, not in the child: find_library may run programs, which a forked child must not.
_LIBC = _load_libc()


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the launcher dies, even by SIGKILL (Linux), so a
    killed launcher leaves no server behind."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _become_subreaper() -> None:
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1)


class _Proc(NamedTuple):
    pid: int
    state: str
    ppid: int
    pgid: int
    start: int  # clock ticks after boot: tells a process from a later one given the same pid


def _stat(pid: int) -> _Proc | None:
    """A process as /proc shows it, or None when it is gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp session ... starttime (field 22)": comm may hold spaces and ")".
    fields = text[text.rindex(")") + 2:].split()
    return _Proc(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[19]))


def _processes() -> Iterable[_Proc]:
    if not _PROC.is_dir():
        return
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            proc = _stat(int(entry.name))
            if proc is not None:
                yield proc


def _descendants(root: int) -> dict[int, _Proc]:
    """Every living descendant of ``root`` by pid (empty without /proc)."""
    children: dict[int, list[_Proc]] = {}
    for proc in _processes():
        if proc.state != "Z":
            children.setdefault(proc.ppid, []).append(proc)
    out: dict[int, _Proc] = {}
    todo = [root]
    while todo:
        for proc in children.get(todo.pop(), []):
            if proc.pid not in out:
                out[proc.pid] = proc
                todo.append(proc.pid)
    return out


def _describe(pid: int) -> str:
    try:
        argv = (_PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return str(pid)
    return f"{pid} ({b' '.join(argv).decode(errors='replace').strip()[:60]})"


def _zombie_children(parent: int) -> set[int]:
    return {p.pid for p in _processes() if p.ppid == parent and p.state == "Z"}


def _alive(seen: dict[int, _Proc]) -> list[int]:
    """The pids of ``seen`` still running (the same processes, not later ones with their pid)."""
    out = []
    for pid, proc in seen.items():
        now = _stat(pid)
        if now is not None and now.start == proc.start and now.state != "Z":
            out.append(pid)
    return out


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # PermissionError: the group id was reused by someone else's processes.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_pid(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        # As uvicorn binds: a port whose last connections linger in TIME_WAIT is free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def choose_port(requested: int | None, configured: int) -> tuple[int, str]:
    """The port and a note on how it was chosen: ``requested`` (0: any free one), else
    the configuration's ``[api] port``, else a free one."""
    if requested == 0:
        return free_port(), "a free port (--port 0)"
    if requested is not None:
        if not port_is_free(requested):
            raise UsageError(f"port {requested} on {HOST} is in use: pass another --port, or --port 0 for a free one")
        return requested, "--port"
    if port_is_free(configured):
        return configured, "[api] port of the configuration"
    return free_port(), f"{configured}, the configured one, is in use: a free one instead (--port N to choose)"


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("true", "t", "1", "yes", "on")  # as Airflow's getboolean


def config_option(config: Path, env: Mapping[str, str], section: str, key: str, default: str) -> str:
    """An option as the ``airflow`` processes will read it: ``AIRFLOW__SECTION__KEY``, else the
    configuration file, else ``default`` (read without Airflow: this module must not import it)."""
    from_env = env.get(f"AIRFLOW__{section.upper()}__{key.upper()}")
    if from_env:
        return from_env
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(config)
    except configparser.Error:
        return default  # Airflow itself will say what is wrong with the file, in its log
    return parser.get(section, key, fallback=default)


def login_hint(config: Path, env: Mapping[str, str]) -> str:
    """How to log in, from the auth manager settings the api-server will read."""

    def option(key: str, default: str) -> str:
        return config_option(config, env, "core", key, default)

    manager = option("auth_manager", SIMPLE_AUTH_MANAGER)
    if manager.rsplit(".", 1)[-1] != "SimpleAuthManager":
        return f"log in with the users of the auth manager {manager}"
    if _truthy(option("simple_auth_manager_all_admins", "False")):
        return ("no login: [core] simple_auth_manager_all_admins is on, every visitor is an admin "
                "(the simple auth manager's all-admins mode; for a local machine only)")
    users = option("simple_auth_manager_users", "admin:admin")
    passwords = option("simple_auth_manager_passwords_file", "") or str(
        Path(env["AIRFLOW_HOME"]) / "simple_auth_manager_passwords.json.generated")
    return f"log in as one of {users} (user:role); passwords in {passwords}, generated at the first start"


def checkout() -> Path:
    """The repository (its airflow.cfg expands dags/ and plugins/ from it): ``KMIGRATE_PROJECT_ROOT``
    as the Makefile sets it, else the checkout this module is in, not the working directory."""
    if os.environ.get(ENV_PROJECT_ROOT):
        return project_root()
    here = Path(__file__).resolve().parents[2]
    return here if (here / "airflow.cfg").is_file() else project_root()


def process_env(*, airflow_home: Path, config: Path, home: Path, scheduled: bool) -> dict[str, str]:
    env = dict(os.environ)
    root = checkout()
    env.update({
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW_CONFIG": str(config),
        ENV_PROJECT_ROOT: str(root),
        # KMIGRATE_HOME wins over [kmigrate] home (settings.resolve_home); both say the same.
        ENV_HOME: str(home),
        "AIRFLOW__KMIGRATE__HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    })
    env.pop(ENV_OUT, None)
    # What a run triggered from the UI needs, as `make demo` gives it: Spark on this machine (the
    # connection spark_default, written into Airflow's database by main) and, for the demo's
    # home, the demo's cluster as the DAGs' default.
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    cluster = home / "cluster" / "cluster.json"
    if cluster.is_file():
        env.setdefault(ENV_CLUSTER, str(cluster))
    if not scheduled:
        # tiered_storage_readiness is hourly: without this the scheduler would start a run of it
        # as soon as it is up. Runs triggered from the UI still run.
        env["AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE"] = "False"
    return env


def healthy(origin: str) -> bool:
    try:
        with urllib.request.urlopen(origin + HEALTH_PATH, timeout=5) as r:
            return r.status == 200
    except (OSError, urllib.error.HTTPError):
        return False


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _wait(launcher: Launcher, ready: Callable[[], bool], timeout: float) -> str | None:
    """Wait until ``ready()``; None when it is, else why not (a process ended, the timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if launcher.signals:
            raise Stopped
        ended = launcher.exited()
        if ended:
            return f"airflow {ended} exited with code {launcher.procs[ended].returncode}"
        if ready():
            return None
        time.sleep(0.5)
    return f"the api-server did not answer within {timeout:g}s"


def _port_arg(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port (0-65535)")
    return port


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    root = checkout()
    p = argparse.ArgumentParser(prog="make ui", description=f"The Airflow UI ({NAMES}) on the repository's "
                                "Airflow home, with the demo's runs; Ctrl-C stops it.")
    p.add_argument("--port", type=_port_arg, default=None,
                   help=f"port of the api-server on {HOST} (default: [api] port of the configuration, "
                        f"{DEFAULT_PORT} unless set, or a free one when that is taken; 0: a free one)")
    p.add_argument("--home", type=Path, default=root / "out" / "demo",
                   help="kmigrate home whose reports the Migration report tabs show (default: the demo's, out/demo)")
    p.add_argument("--airflow-home", type=Path, default=Path(os.environ.get("AIRFLOW_HOME") or root / ".airflow"),
                   help="Airflow home (default $AIRFLOW_HOME, else .airflow)")
    p.add_argument("--airflow-config", type=Path,
                   default=Path(os.environ.get("AIRFLOW_CONFIG") or root / "airflow.cfg"),
                   help="Airflow configuration (default $AIRFLOW_CONFIG, else airflow.cfg)")
    p.add_argument("--scheduled-runs", action="store_true",
                   help="let the scheduler start scheduled runs (tiered_storage_readiness is hourly); "
                        "by default only runs triggered by hand run")
    p.add_argument("--start-timeout", type=float, default=300, help="seconds to wait for the api-server")
    p.add_argument("--stop-timeout", type=float, default=20, help="seconds between SIGTERM and SIGKILL")
    return p.parse_args(argv)


def _serve(launcher: Launcher, airflow: str, env: dict[str, str], *, port: int, config: Path,
           start_timeout: float) -> int:
    """Start them all, wait for the api-server, then until one ends or a signal comes."""
    origin = f"http://{HOST}:{port}"
    for name, sub in COMPONENTS:
        extra = ["--host", HOST, "--port", str(port)] if name == "api-server" else []
        launcher.start(name, [airflow, sub, *extra], env)
    print(f"starting {NAMES} ...", flush=True)
    failure = _wait(launcher, lambda: healthy(origin), start_timeout)
    if failure is None:
        print(f"\nAirflow UI: {origin}/\n  {login_hint(config, env)}\n"
              f"  each DAG run has a \"Migration report\" tab; every report: {origin}/kmigrate-reports/\n"
              "Ctrl-C stops it.", flush=True)
        failure = _wait(launcher, lambda: False, float("inf"))
    print(f"make ui: {failure}", file=sys.stderr, flush=True)
    ended = launcher.exited()
    if ended:
        print(_tail(launcher.log_dir / f"{ended}.log"), file=sys.stderr, flush=True)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    airflow_home, config = args.airflow_home.resolve(), args.airflow_config.resolve()
    home = args.home.expanduser().resolve()
    airflow = Path(sys.executable).parent / "airflow"
    log_dir = airflow_home / "logs" / "ui"
    try:
        if not config.is_file():
            raise UsageError(f"no Airflow configuration at {config}: pass --airflow-config or set AIRFLOW_CONFIG")
        if not airflow.is_file():
            raise UsageError(f"no airflow beside this Python ({airflow}): run `make venv`")
        try:
            configured = int(config_option(config, os.environ, "api", "port", str(DEFAULT_PORT)))
        except ValueError:
            configured = DEFAULT_PORT
        port, port_note = choose_port(args.port, configured)
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"cannot write logs under the Airflow home {airflow_home}: {e.strerror}") from None
    except UsageError as e:
        print(f"make ui: {e}", file=sys.stderr)
        return 2
    env = process_env(airflow_home=airflow_home, config=config, home=home, scheduled=args.scheduled_runs)
    if not (config_option(config, env, "core", "execution_api_server_url", "")
            or config_option(config, env, "api", "base_url", "")):
        # Task processes report to the api-server's execution API, by default on localhost:8080:
        # on another port (8080 taken, --port) every task would fail with "connection refused".
        env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"http://{HOST}:{port}/execution/"

    reports = default_report_root(home)
    runs = len(ReportStore(reports).run_ids())
    print(f"Airflow home: {airflow_home}\nconfiguration: {config}", flush=True)
    print(f"kmigrate home: {home} (reports: {reports}, {runs} run report(s))", flush=True)
    if runs == 0:
        print("  no reports there yet: `make demo` writes the demo's; --home DIR reads another home", flush=True)
    print(f"port: {port} ({port_note}); logs: {log_dir}/{{{','.join(n for n, _ in COMPONENTS)}}}.log", flush=True)
    try:
        # As a user sets it (docs/operations.md, "Connections"); one already there is kept.
        written = write_connections(env, {SPARK_CONN_ID: DEMO_SPARK}, missing_only=True)
    except (ConnectionSetupError, OSError, subprocess.SubprocessError) as e:
        print(f"make ui: {e}", file=sys.stderr, flush=True)
        return 1
    print("connection " + (f"{describe(SPARK_CONN_ID, DEMO_SPARK)} written into Airflow's database" if written
                           else f"{SPARK_CONN_ID}: already set, kept"), flush=True)

    launcher = Launcher(stop_timeout=args.stop_timeout, log_dir=log_dir)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, launcher.on_signal)
    _become_subreaper()
    try:
        code = _serve(launcher, str(airflow), env, port=port, config=config, start_timeout=args.start_timeout)
    except Stopped:
        code = 0
    except OSError as e:  # a process could not be started
        print(f"make ui: cannot start airflow: {e}", file=sys.stderr, flush=True)
        code = 1
    finally:
        left = launcher.stop()
    if left:
        print(f"make ui: could not stop pid(s) {', '.join(map(str, left))}", file=sys.stderr, flush=True)
        return 1
    print(f"stopped: {NAMES}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
