"""Where the unification keeps the files it retires or replaces, outside every log dir.

Layout: ``<backup root>/unify-bootstrap/node-<node id>-<log dir key>/`` holding
``bootstrap.checkpoint`` and, when a zero checkpoint was replaced,
``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint``. The place depends on the
node and the log dir only, not on the run: a re-run after a crash (a new run id) finds the copy
the killed run made and does not make a second one. That is why the per-run, per-unit layout of
``migrations/common/backup.py`` (hard links, manifests under ``<backup root>/<run id>/``) is not
used here: the files are a few KiB, copied and compared byte for byte.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from migration.formats.fileio import durable_mkdir, durable_replace, durable_unlink
from migration.runtime.faults import fault_point

BACKUP_SUBDIR = "unify-bootstrap"


def backup_dir(backup_root: Path, log_dir: Path, node_id: int | None) -> Path:
    key = hashlib.blake2b(str(log_dir).encode(), digest_size=6).hexdigest()
    return backup_root / BACKUP_SUBDIR / f"node-{node_id if node_id is not None else 'unknown'}-{key}"


def backup_file(src: Path, dest: Path) -> Path:
    """Copy ``src`` to ``dest`` durably and verify it; never overwrite a different backup
    (a different file at ``dest`` gets a sibling named by the content's hash)."""
    data = src.read_bytes()
    if dest.exists() and dest.read_bytes() != data:
        dest = dest.with_name(f"{dest.name}.{hashlib.blake2b(data, digest_size=6).hexdigest()}")
    if not dest.exists() or dest.read_bytes() != data:
        durable_mkdir(dest.parent)
        durable_replace(dest, data, tmp_suffix=".tmp")
    if dest.read_bytes() != data:
        raise OSError(f"backup {dest} does not read back as {src}")
    return dest


def retire(path: Path, dest: Path) -> Path:
    """Move ``path`` to the backup root: durable verified copy first, then unlink (and fsync
    the directory). Returns where the copy is."""
    kept = backup_file(path, dest)
    fault_point("bootstrap-backed-up")
    durable_unlink(path)
    fault_point("bootstrap-retired")
    return kept
