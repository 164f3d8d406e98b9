"""The file-system backend of the object-store interface (:mod:`.store`): each object is a file
under a root directory at the path its key names, as in the tiered-storage plugin's
``FileSystemStorage`` (Aiven), so a root staged here is laid out as that backend reads it.

Used by dry runs (a throwaway root per unit, docs/operations.md) and fast tests, and by
``--store-url file:///PATH`` for staging onto a mounted file system.

- Keys are checked before they touch a path (:func:`.store.key_problem`: no empty, ``.`` or
  ``..`` component, no leading ``/``), and the resolved path must lie under the resolved root,
  so no key (nor a symlink inside the root) leads outside it.
- kmigrate's own files live under ``<root>/.kmigrate-store/`` (never a key): ``meta/`` holds one
  JSON sidecar per object with its user metadata, ``uploads/`` the parts of incomplete multipart
  uploads, ``tmp/`` files being written, each at its key's path plus a random suffix, so the
  unit that owns a partition's prefix removes what a killed write of it left
  (:meth:`FileSystemObjectStore.remove_temporaries`).
- Writes are atomic and durable (``fileio.durable_replace``, ``durable_mkdir``): the object is
  written under ``tmp/``, fsynced and renamed onto its path, every directory it creates and the
  directory of the new name fsynced, then its sidecar is written the same way. The sidecar names the file
  it describes (inode, size, mtime): after a crash between the two renames, or over a file
  replaced behind kmigrate's back, the object has no metadata, so it is never taken for a
  verified copy (:meth:`.store.ObjectStore.matches` is false and staging uploads it again).
- Deleting an object removes its sidecar first (durably), then the object.
- Deleting an object leaves its directories: removing a parent could race with another unit
  creating a sibling under it, and empty directories hold no objects.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit

from migration.formats.fileio import durable_mkdir, durable_replace, durable_unlink, fsync_dir
from migration.migrations.tier.store import (
    ObjectHead,
    ObjectNotFound,
    ObjectStore,
    ObjectSummary,
    PartChecksum,
    PendingUpload,
    StoreArgumentError,
    crc32c_b64,
    key_problem,
)

RESERVED_DIR = ".kmigrate-store"
SIDECAR_SUFFIX = ".meta.json"
TMP_SUFFIX = ".tmp"
SIDECAR_VERSION = 1
_COPY_CHUNK = 8 * 1024 * 1024


def root_from_url(url: str) -> Path:
    """The root directory a ``file:///ABSOLUTE/PATH`` store URL names."""
    parts = urlsplit(url)
    if parts.scheme != "file":
        raise StoreArgumentError(f"store URL {url!r}: only file:///PATH is a store URL (for S3 give --bucket and "
                                 "--endpoint-url)")
    if parts.netloc not in ("", "localhost"):
        raise StoreArgumentError(f"store URL {url!r} names host {parts.netloc!r}: write file:///ABSOLUTE/PATH "
                                 "(three slashes)")
    if parts.query or parts.fragment:
        raise StoreArgumentError(f"store URL {url!r} has a query or fragment")
    path = unquote(parts.path)
    if not path.startswith("/") or any(part in (".", "..") for part in path.split("/")):
        raise StoreArgumentError(f"store URL {url!r}: the path must be absolute, without '.' or '..'")
    if "\x00" in path:
        raise StoreArgumentError(f"store URL {url!r} has a NUL in its path")
    return Path(path)


class FileSystemObjectStore(ObjectStore):
    """Objects as files under ``root``, which must exist (as a bucket must: a mistyped path is
    never created)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__()
        self.root = Path(root)
        if not self.root.is_absolute():
            raise StoreArgumentError(f"file store root {str(root)!r} is not an absolute path")

    @property
    def location(self) -> str:
        return f"file store {self.root}"

    def check_credentials(self) -> None:
        """A directory needs none: its permissions are what the write probe tries."""

    # ------------------------------------------------------------------ paths

    def _object_path(self, key: str) -> Path:
        problem = key_problem(key)
        if problem is not None:
            raise ValueError(f"object key {key!r}: {problem}")
        parts = key.split("/")
        if parts[0] == RESERVED_DIR:
            raise ValueError(f"object key {key!r}: {RESERVED_DIR}/ holds the store's own files")
        path = self.root.joinpath(*parts)
        if not path.resolve().is_relative_to(self.root.resolve()):
            raise ValueError(f"object key {key!r} leads outside {self.root} (through a symlink)")
        return path

    def _sidecar_path(self, key: str) -> Path:
        return self.root / RESERVED_DIR / "meta" / (key + SIDECAR_SUFFIX)

    def _temporary_path(self, key: str) -> Path:
        """``tmp/{key}.{random}{TMP_SUFFIX}``: beside where the key's temporaries go, never a key."""
        self._own_dir("tmp")
        return self.root / RESERVED_DIR / "tmp" / f"{key}.{uuid.uuid4().hex}{TMP_SUFFIX}"

    def remove_temporaries(self, prefix: str, leftover: Callable[[str], bool] | None = None) -> list[str]:
        """The temporary files of keys under ``prefix`` a killed write left (those ``leftover``
        says are, when given), removed durably; returns their keys."""
        tmp_root = self.root / RESERVED_DIR / "tmp"
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        if head and key_problem(head) is not None:
            return []
        start = tmp_root.joinpath(*head.split("/")) if head else tmp_root
        found: dict[str, Path] = {}
        for dirpath, _dirs, filenames in os.walk(start):
            for name in filenames:
                p = Path(dirpath, name)
                key = p.relative_to(tmp_root).as_posix().removesuffix(TMP_SUFFIX).rpartition(".")[0]
                if name.endswith(TMP_SUFFIX) and key.startswith(prefix) and (leftover is None or leftover(key)):
                    found[p.relative_to(tmp_root).as_posix()] = p
        durable_unlink(*found.values())
        return sorted(found)

    def _own_dir(self, name: str) -> Path:
        if not self.root.is_dir():
            raise FileNotFoundError("no such directory: create it first (a store root is never created)")
        # Each new directory durable in its parent (the root exists: it is never created).
        return durable_mkdir(self.root / RESERVED_DIR / name)

    # ------------------------------------------------------------------ writing

    def _install(self, key: str, content: bytes | Iterable[bytes], *, content_type: str,
                 metadata: dict[str, str]) -> None:
        """Write the object through a temporary file, rename it onto its key's path, then its
        sidecar (see the module docstring for why in that order)."""
        path = self._object_path(key)
        # Named after the key, so whoever owns a prefix can remove what a killed write of it left.
        tmp = self._temporary_path(key)
        durable_mkdir(tmp.parent)
        # The key's directories durable before the object's name in them, the object durable
        # before its sidecar: a listing never shows an object a power cut can take back.
        durable_mkdir(path.parent)
        durable_replace(path, content, tmp_path=tmp, exclusive=True)
        st = path.stat()
        sidecar = self._sidecar_path(key)
        durable_mkdir(sidecar.parent)
        doc = {"version": SIDECAR_VERSION, "key": key, "content_type": content_type, "metadata": metadata,
               "file": {"ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns}}
        # its temporary under tmp/, where remove_temporaries finds what a killed write left
        durable_replace(sidecar, json.dumps(doc, sort_keys=True).encode("utf-8"),
                        tmp_path=self._temporary_path(key))

    def _put(self, key: str, data: bytes, *, content_type: str, metadata: dict[str, str], crc: str) -> str | None:
        self._install(key, data, content_type=content_type, metadata=metadata)
        return None  # nothing here computes a checksum of its own: the read-back is the check

    def _create_multipart(self, key: str, *, metadata: dict[str, str]) -> str:
        self._object_path(key)  # a bad key fails now, not at completion
        upload_id = uuid.uuid4().hex
        d = durable_mkdir(self._own_dir("uploads") / upload_id)
        doc = {"version": SIDECAR_VERSION, "key": key, "metadata": metadata,
               "initiated": datetime.now(UTC).isoformat()}
        durable_replace(d / "upload.json", json.dumps(doc, sort_keys=True).encode("utf-8"), tmp_suffix=".tmp")
        return upload_id

    def _upload_dir(self, upload_id: str) -> Path:
        d = self.root / RESERVED_DIR / "uploads" / upload_id
        if "/" in upload_id or upload_id in ("", ".", "..") or not (d / "upload.json").is_file():
            raise KeyError(f"no multipart upload {upload_id!r}")
        return d

    def _upload_part(self, key: str, upload_id: str, number: int, data: bytes, crc: str) -> tuple[str, str | None]:
        d = self._upload_dir(upload_id)
        durable_replace(d / f"part-{number:05d}", data, tmp_suffix=".tmp")
        return crc, None  # the part's CRC-32C serves as its ETag, checked again at completion

    def _complete_multipart(self, key: str, upload_id: str, parts: list[tuple[PartChecksum, str]]) -> None:
        d = self._upload_dir(upload_id)
        doc = json.loads((d / "upload.json").read_text())
        if doc["key"] != key:
            raise KeyError(f"multipart upload {upload_id} is of {doc['key']!r}, not {key!r}")
        files = [d / f"part-{pc.part_number:05d}" for pc, _ in parts]
        for (pc, etag), f in zip(parts, files, strict=True):
            if not f.is_file() or crc32c_b64(f.read_bytes()) != etag:
                raise OSError(f"multipart upload {upload_id}: part {pc.part_number} missing or not as uploaded")

        def chunks() -> Iterator[bytes]:
            for f in files:
                with open(f, "rb") as src:
                    while block := src.read(_COPY_CHUNK):
                        yield block

        self._install(key, chunks(), content_type="application/octet-stream", metadata=doc["metadata"])
        _remove_tree(d)

    def _abort(self, key: str, upload_id: str) -> None:
        _remove_tree(self._upload_dir(upload_id))

    def _delete_batch(self, keys: list[str]) -> None:
        objects: list[Path] = []
        sidecars: list[Path] = []
        for key in keys:
            objects += [p for p in (self._object_path(key),) if p.parent.is_dir()]
            sidecars += [p for p in (self._sidecar_path(key),) if p.parent.is_dir()]
        # The metadata first, durably, then the objects: a power cut in between leaves an object
        # without metadata, never trusted and removed by the next cleanup that lists it; the
        # other way round it left a sidecar of a missing object, which no listing finds (the
        # power-loss test found it, a probe object's).
        durable_unlink(*sidecars)
        durable_unlink(*objects)

    # ------------------------------------------------------------------ reading

    def _head(self, key: str) -> ObjectHead | None:
        path = self._object_path(key)
        try:
            st = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not path.is_file():
            return None
        metadata: dict[str, str] = {}
        try:
            doc = json.loads(self._sidecar_path(key).read_text())
            f = doc["file"]
            if (f["ino"], f["size"], f["mtime_ns"]) == (st.st_ino, st.st_size, st.st_mtime_ns):
                metadata = {str(k): str(v) for k, v in doc["metadata"].items()}
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            pass  # no sidecar, or one of another file: the object has no metadata
        return ObjectHead(size=st.st_size, metadata=metadata)

    def _get(self, key: str, start: int | None, length: int | None) -> bytes:
        path = self._object_path(key)
        try:
            with open(path, "rb") as f:
                if start is None or length is None:
                    return f.read()
                f.seek(start)
                return f.read(length)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectNotFound(key) from None

    def _list(self, prefix: str) -> list[ObjectSummary]:
        # Walk only the deepest directory the prefix names in full; filter the rest by the prefix.
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        if head:
            if key_problem(head) is not None or head.split("/")[0] == RESERVED_DIR:
                return []
            start = self.root.joinpath(*head.split("/"))
        else:
            start = self.root
        if not start.is_dir():
            if not self.root.is_dir():
                raise FileNotFoundError(f"{self.root}: no such directory")
            return []
        out: list[ObjectSummary] = []
        for dirpath, dirnames, filenames in os.walk(start):
            rel = Path(dirpath).relative_to(self.root).as_posix()
            if rel == ".":
                rel = ""
                if RESERVED_DIR in dirnames:
                    dirnames.remove(RESERVED_DIR)
            for name in filenames:
                key = f"{rel}/{name}" if rel else name
                p = Path(dirpath, name)
                if key.startswith(prefix) and not p.is_symlink() and p.is_file():
                    out.append(ObjectSummary(key=key, size=p.stat().st_size))
        # S3 lists keys in the order of their UTF-8 bytes.
        return sorted(out, key=lambda o: o.key.encode("utf-8"))

    def _list_uploads(self, prefix: str) -> list[PendingUpload]:
        d = self.root / RESERVED_DIR / "uploads"
        out: list[PendingUpload] = []
        if not d.is_dir():
            return out
        for entry in sorted(d.iterdir()):
            try:
                doc = json.loads((entry / "upload.json").read_text())
            except (FileNotFoundError, NotADirectoryError, ValueError):
                continue  # a crash before upload.json was renamed in: no key to list it under
            if doc["key"].startswith(prefix):
                out.append(PendingUpload(key=doc["key"], upload_id=entry.name,
                                         initiated=datetime.fromisoformat(doc["initiated"])))
        return out


def _remove_tree(d: Path) -> None:
    """Remove a multipart upload's directory; its removal is durable in ``uploads/`` (else a
    power cut brings back an upload that was completed or aborted, and the next run aborts it
    again: harmless, but not what was done)."""
    shutil.rmtree(d)
    fsync_dir(d.parent)

