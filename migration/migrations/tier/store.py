"""The object-store interface of tiered-storage staging, and the logic every backend shares.

Like the tiered-storage plugin (Aiven's ``StorageBackend``: ``ObjectUploader``,
``ObjectFetcher``, ``ObjectDeleter``, one implementation per store), staging talks to one small
interface: put, multipart upload, head, ranged get, list, list and abort incomplete uploads,
delete. A backend implements only those primitives (:mod:`.s3`: every boto3 call;
:mod:`.filesystem`: objects as files under a root directory, used by dry runs and fast tests);
the protocol on top of them is written once here, so both backends behave alike:

- Uploads carry our own checksums: SHA-256 of the whole object in the user metadata, CRC-32C
  of every part (sent with the request and, when the backend echoes one, compared). Servers do
  not all verify checksums (moto accepts wrong ones, docs/formats.md §10.4), so every upload is
  read back range by range and compared: CRC-32C per part, SHA-256 overall.
- A failed multipart upload is aborted; a failed object is deleted (best effort: when the
  network is gone, the next run's cleanup removes what is left).
- ``requests`` counts operations by their S3 names on every backend, for reports and tests.
- :meth:`ObjectStore.check_writable` is the probe a run makes before it writes anything.

Object keys are made by :mod:`.layout` only; backends take them as given (the file-system
backend refuses any key that could leave its root).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import crc32c
from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

SHA256_METADATA_KEY = "kmigrate-sha256"
LAYOUT_METADATA_KEY = "kmigrate-layout"
DEFAULT_PART_SIZE = 8 * 1024 * 1024
READ_BACK_CHUNK = 8 * 1024 * 1024
MAX_KEY_BYTES = 1024  # S3's limit on a key's UTF-8 length; the file-system backend keeps it too
DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys
PROBE_BODY = b"kmigrate write probe: safe to delete\n"


class ChecksumMismatch(Exception):
    """What the store holds differs from what was sent."""


class ObjectNotFound(KeyError):
    """A read of a key the store does not hold."""


class StoreArgumentError(ValueError):
    """The store was named wrongly (bucket, endpoint URL, store URL, prefix, credentials): a
    usage error, exit code 2. The message is one line and never holds a secret."""


class StoreUnavailable(Exception):
    """The store was named correctly but cannot be used (unreachable, no such bucket, access
    denied, the probe read back wrong bytes): a run-level error, exit code 1. One line, no secret."""


def crc32c_b64(data: bytes | memoryview) -> str:
    """The CRC-32C as S3 prints it: base64 of the big-endian 4 bytes."""
    return base64.b64encode(crc32c.crc32c(data).to_bytes(4, "big")).decode("ascii")


def file_sha256(path: str | os.PathLike[str], chunk: int = READ_BACK_CHUNK) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def key_problem(key: str) -> str | None:
    """What makes ``key`` unusable on every backend, or None. Keys are relative, ``/``-separated
    paths without empty, ``.`` or ``..`` components: legal S3 keys that also map to a file
    under a root directory (the layout of Aiven's file-system storage), and never outside it."""
    if not key:
        return "an empty key"
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        return f"longer than {MAX_KEY_BYTES} bytes"
    if "\x00" in key or "\\" in key:
        return "a NUL or backslash in it"
    if any(part in ("", ".", "..") for part in key.split("/")):
        return "an empty, '.' or '..' path component (or a leading, trailing or double '/')"
    return None


def prefix_problem(prefix: str) -> str | None:
    """A key prefix is good when keys made with it are (the layout appends the rest)."""
    if not prefix:
        return None
    problem = key_problem(prefix + "x")
    return None if problem is None else f"key prefix {prefix!r} makes keys with {problem}"


class PartChecksum(BaseModel):
    part_number: int
    offset: int
    size: int
    crc32c: str


class StoredObject(BaseModel):
    key: str
    size: int
    sha256: str
    parts: list[PartChecksum]
    uploaded: bool = Field(description="False when a verified copy was already there")


class ObjectHead(BaseModel):
    """What HeadObject says: the size and the user metadata (keys lower-case, as S3 returns them)."""

    size: int
    metadata: dict[str, str] = Field(default_factory=dict)


class ObjectSummary(BaseModel):
    """One entry of a listing."""

    key: str
    size: int


class PendingUpload(BaseModel):
    """An incomplete multipart upload."""

    key: str
    upload_id: str
    initiated: datetime | None = None


def part_ranges(size: int, part_size: int) -> Iterator[tuple[int, int, int]]:
    """(part number, offset, length); an empty object is one empty part."""
    if size == 0:
        yield 1, 0, 0
        return
    n = 1
    for off in range(0, size, part_size):
        yield n, off, min(part_size, size - off)
        n += 1


class ObjectStore(ABC):
    """One bucket (or root directory). Public methods count the request and call the backend's
    primitive; they raise the backend's own errors on I/O failure, :class:`ChecksumMismatch`
    when a read-back differs."""

    def __init__(self) -> None:
        self.requests: dict[str, int] = {}  # operation -> count, for reports and tests

    # ------------------------------------------------------------------ what a backend provides

    @property
    @abstractmethod
    def location(self) -> str:
        """Where objects go, for messages and reports (never a secret)."""

    @abstractmethod
    def _head(self, key: str) -> ObjectHead | None: ...

    @abstractmethod
    def _get(self, key: str, start: int | None, length: int | None) -> bytes:
        """The object's bytes (a range when both are given); :class:`ObjectNotFound` if absent."""

    @abstractmethod
    def _list(self, prefix: str) -> list[ObjectSummary]:
        """Every object whose key starts with ``prefix``, in key order."""

    @abstractmethod
    def _list_uploads(self, prefix: str) -> list[PendingUpload]: ...

    @abstractmethod
    def _abort(self, key: str, upload_id: str) -> None: ...

    @abstractmethod
    def _delete_batch(self, keys: list[str]) -> None:
        """Delete up to :data:`DELETE_BATCH` keys; absent ones are not an error."""

    @abstractmethod
    def _put(self, key: str, data: bytes, *, content_type: str, metadata: dict[str, str], crc: str) -> str | None:
        """Store ``data`` in one request; returns the CRC-32C the backend computed, if it says."""

    @abstractmethod
    def _create_multipart(self, key: str, *, metadata: dict[str, str]) -> str:
        """Start a multipart upload; returns its id."""

    @abstractmethod
    def _upload_part(self, key: str, upload_id: str, number: int, data: bytes, crc: str) -> tuple[str, str | None]:
        """Store one part; returns (ETag, the CRC-32C the backend computed, if it says)."""

    @abstractmethod
    def _complete_multipart(self, key: str, upload_id: str, parts: list[tuple[PartChecksum, str]]) -> None:
        """Assemble the parts (with their ETags), in order, into the object."""

    @abstractmethod
    def check_credentials(self) -> None:
        """Raise :class:`StoreArgumentError` when the store needs credentials and none can be
        resolved (checked without any request, before anything is written)."""

    def remove_temporaries(self, prefix: str, leftover: Callable[[str], bool] | None = None) -> list[str]:
        """Remove what interrupted writes of keys under ``prefix`` left in the store's own space
        (of the keys ``leftover`` says are a killed run's, when given; else the caller owns the
        prefix: nothing under it is being written); returns their names.
        An object store writes an object whole or not at all: nothing to do (its incomplete
        multipart uploads are listed and aborted by :meth:`list_multipart_uploads`)."""
        return []

    def explain(self, exc: BaseException) -> str:
        """One line saying why an operation failed, for the operator (never a secret)."""
        return f"{type(exc).__name__}: {exc}"

    # ------------------------------------------------------------------ counted operations

    def _count(self, op: str) -> None:
        self.requests[op] = self.requests.get(op, 0) + 1

    def head(self, key: str) -> ObjectHead | None:
        self._count("HeadObject")
        return self._head(key)

    def get_bytes(self, key: str, start: int | None = None, length: int | None = None) -> bytes:
        self._count("GetObject")
        if start is not None and length is not None and length == 0:
            return b""
        return self._get(key, start, length)

    def list_objects(self, prefix: str) -> list[ObjectSummary]:
        self._count("ListObjectsV2")
        return self._list(prefix)

    def list_multipart_uploads(self, prefix: str) -> list[PendingUpload]:
        """The incomplete multipart uploads under ``prefix``."""
        self._count("ListMultipartUploads")
        return self._list_uploads(prefix)

    def abort_multipart(self, key: str, upload_id: str) -> None:
        self._count("AbortMultipartUpload")
        self._abort(key, upload_id)

    def delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), DELETE_BATCH):
            self._count("DeleteObjects")
            self._delete_batch(keys[i:i + DELETE_BATCH])

    # ------------------------------------------------------------------ the shared protocol

    def put_bytes(self, key: str, data: bytes, *, content_type: str = "application/octet-stream",
                  metadata: dict[str, str] | None = None) -> StoredObject:
        """One PUT with a CRC-32C, then read back and compare; deleted again if it differs."""
        _check_key(key)
        sha = hashlib.sha256(data).hexdigest()
        crc = crc32c_b64(data)
        self._count("PutObject")
        echoed = self._put(key, data, content_type=content_type,
                           metadata={**(metadata or {}), SHA256_METADATA_KEY: sha}, crc=crc)
        try:
            if echoed is not None and echoed != crc:
                raise ChecksumMismatch(f"{key}: server CRC-32C {echoed}, sent {crc}")
            parts = [PartChecksum(part_number=1, offset=0, size=len(data), crc32c=crc)]
            self.verify(key, size=len(data), sha256=sha, parts=parts)
        except BaseException:
            self._delete_quietly(key)
            raise
        return StoredObject(key=key, size=len(data), sha256=sha, parts=parts, uploaded=True)

    def upload_file(self, key: str, path: str | os.PathLike[str], *, sha256: str, part_size: int = DEFAULT_PART_SIZE,
                    multipart_threshold: int = DEFAULT_PART_SIZE, metadata: dict[str, str] | None = None
                    ) -> StoredObject:
        """Upload a local file: one PUT below the threshold, else a multipart upload with a
        CRC-32C per part. Verified by reading back; aborted or deleted on any failure."""
        _check_key(key)
        p = Path(path)
        size = p.stat().st_size
        if size < multipart_threshold:
            obj = self.put_bytes(key, p.read_bytes(), metadata=metadata)
            if obj.sha256 != sha256:
                self._delete_quietly(key)
                raise ChecksumMismatch(f"{p} changed while being staged (SHA-256 {obj.sha256}, expected {sha256})")
            return obj
        self._count("CreateMultipartUpload")
        upload_id = self._create_multipart(key, metadata={**(metadata or {}), SHA256_METADATA_KEY: sha256})
        parts: list[tuple[PartChecksum, str]] = []
        completed = False
        try:
            whole = hashlib.sha256()
            with open(p, "rb") as f:
                for number, offset, length in part_ranges(size, part_size):
                    data = f.read(length)
                    if len(data) != length:
                        raise ChecksumMismatch(f"{p} shrank while being staged")
                    whole.update(data)
                    crc = crc32c_b64(data)
                    self._count("UploadPart")
                    etag, echoed = self._upload_part(key, upload_id, number, data, crc)
                    if echoed is not None and echoed != crc:
                        raise ChecksumMismatch(f"{key} part {number}: server CRC-32C {echoed}, sent {crc}")
                    parts.append((PartChecksum(part_number=number, offset=offset, size=length, crc32c=crc), etag))
            if whole.hexdigest() != sha256:
                raise ChecksumMismatch(f"{p} changed while being staged (SHA-256 {whole.hexdigest()}, "
                                       f"expected {sha256})")
            self._count("CompleteMultipartUpload")
            self._complete_multipart(key, upload_id, parts)
            completed = True
            self.verify(key, size=size, sha256=sha256, parts=[pc for pc, _ in parts])
        except BaseException:
            if not completed:
                self._abort_quietly(key, upload_id)
            self._delete_quietly(key)
            raise
        return StoredObject(key=key, size=size, sha256=sha256, parts=[pc for pc, _ in parts], uploaded=True)

    def verify(self, key: str, *, size: int, sha256: str, parts: list[PartChecksum] | None = None,
               part_size: int = READ_BACK_CHUNK) -> list[PartChecksum]:
        """Read the object back range by range; compare size, per-range CRC-32C (with the parts
        uploaded, when given) and the SHA-256 of the whole. Returns the ranges' checksums."""
        head = self.head(key)
        if head is None:
            raise ChecksumMismatch(f"{key}: missing after upload")
        if head.size != size:
            raise ChecksumMismatch(f"{key}: {head.size} bytes stored, {size} expected")
        ranges = [(p.part_number, p.offset, p.size) for p in parts] if parts else list(part_ranges(size, part_size))
        whole = hashlib.sha256()
        seen: list[PartChecksum] = []
        for number, offset, length in ranges:
            data = self.get_bytes(key, offset, length)
            if len(data) != length:
                raise ChecksumMismatch(f"{key}: range {offset}+{length} returned {len(data)} bytes")
            whole.update(data)
            seen.append(PartChecksum(part_number=number, offset=offset, size=length, crc32c=crc32c_b64(data)))
        if parts:
            for want, got in zip(parts, seen, strict=True):
                if want.crc32c != got.crc32c:
                    raise ChecksumMismatch(f"{key} part {want.part_number}: CRC-32C {got.crc32c} read back, "
                                           f"{want.crc32c} sent")
        if whole.hexdigest() != sha256:
            raise ChecksumMismatch(f"{key}: SHA-256 {whole.hexdigest()} read back, {sha256} expected")
        return seen

    def matches(self, key: str, *, size: int, sha256: str) -> bool:
        """A cheap check: the object exists with this size and our SHA-256 in its metadata."""
        head = self.head(key)
        return head is not None and head.size == size and head.metadata.get(SHA256_METADATA_KEY) == sha256

    def check_writable(self, key: str) -> None:
        """The probe a run makes before it writes anything: put one small object at ``key``
        (read back and compared, as every upload), find it in a listing, delete it. Raises
        :class:`StoreUnavailable` with one line naming the cause."""
        try:
            self.put_bytes(key, PROBE_BODY, content_type="text/plain")
            listed = [o.key for o in self.list_objects(key)]
            self.delete([key])
        except Exception as exc:  # whatever the backend raised: the store cannot be used
            raise StoreUnavailable(f"{self.location}: {one_line(self.explain(exc))}") from None
        if key not in listed:
            raise StoreUnavailable(f"{self.location}: the probe object {key} was written but not listed")

    # ------------------------------------------------------------------ best-effort cleanup

    def _abort_quietly(self, key: str, upload_id: str) -> None:
        try:
            self.abort_multipart(key, upload_id)
        except Exception as exc:  # the network may be what failed; the next run cleans up
            log.warning("could not abort multipart upload of %s: %s", key, exc)

    def _delete_quietly(self, key: str) -> None:
        try:
            self._count("DeleteObject")
            self._delete_batch([key])
        except Exception as exc:
            log.warning("could not delete %s: %s", key, exc)


def _check_key(key: str) -> None:
    problem = key_problem(key)
    if problem is not None:
        raise ValueError(f"object key {key!r}: {problem}")


def one_line(text: str) -> str:
    """Messages for the operator are one line: servers' error texts sometimes are not."""
    return " ".join(text.split())
