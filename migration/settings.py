"""Where the project keeps its own state: never inside a Kafka log dir (Kafka refuses to
start on a log dir holding anything but its own files)."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    return Path(os.environ.get("KMIGRATE_PROJECT_ROOT") or os.getcwd()).resolve()


def out_dir() -> Path:
    return Path(os.environ.get("KMIGRATE_OUT") or project_root() / "out").resolve()


def runs_dir() -> Path:
    """Per-run working files: plans, Spark job and result files, run records."""
    return out_dir() / "runs"


def default_backup_root() -> Path:
    return Path(os.environ.get("KMIGRATE_BACKUP_ROOT") or out_dir() / "backups").resolve()


def is_inside(path: str | os.PathLike[str], parent: str | os.PathLike[str]) -> bool:
    p, q = Path(path).resolve(), Path(parent).resolve()
    return p == q or q in p.parents
