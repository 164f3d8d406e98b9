"""The S3 hook: every boto3 call of tiered-storage staging lives here.

- Settings: endpoint URL, region, path-style or virtual-host addressing, and where credentials
  come from: the standard AWS chain (environment variables, shared config/credentials files,
  ``profile``), or an Airflow connection of type ``aws`` (``s3_settings_from_airflow_connection``,
  endpoint in the connection extra). Credentials are ``SecretStr`` fields excluded from every
  dump, so settings can be logged or written into a run's job file without leaking them; an
  Airflow connection is carried as its id and resolved again on the executor.
- Uploads carry our own checksums: SHA-256 of the whole object in the user metadata, CRC-32C
  of every part (sent with the request and, when the server echoes one, compared). Servers do
  not all verify checksums (moto accepts wrong ones, docs/formats.md §10.4), so verification reads
  the object back range by range and compares CRC-32C per part and SHA-256 overall.
- A failed multipart upload is aborted; a failed object is deleted (best effort: when the
  network is gone, the next run's cleanup removes what is left).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import crc32c
from pydantic import BaseModel, Field, SecretStr

log = logging.getLogger(__name__)

SHA256_METADATA_KEY = "kmigrate-sha256"
LAYOUT_METADATA_KEY = "kmigrate-layout"
DEFAULT_PART_SIZE = 8 * 1024 * 1024
READ_BACK_CHUNK = 8 * 1024 * 1024


class ChecksumMismatch(Exception):
    """What the server holds differs from what was sent."""


class S3Settings(BaseModel):
    """Where and how to reach the object store. Never holds a secret in any dump."""

    endpoint_url: str | None = None
    region: str = "us-east-1"
    path_style: bool = True
    profile: str | None = Field(default=None, description="AWS shared-config profile (CLI)")
    aws_conn_id: str | None = Field(default=None, description="Airflow connection id, resolved where the client "
                                                              "is made (its secrets never enter a job file)")
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    max_attempts: int = 5
    access_key_id: SecretStr | None = Field(default=None, exclude=True, repr=False)
    secret_access_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    session_token: SecretStr | None = Field(default=None, exclude=True, repr=False)


def s3_settings_from_airflow_connection(conn_id: str, **overrides: Any) -> S3Settings:
    """Settings from an Airflow ``aws`` connection: login/password are the key pair, the extra
    may hold ``endpoint_url`` (or ``host``), ``region_name``, ``aws_session_token``,
    ``addressing_style``/``s3.addressing_style``. Airflow is read through the runtime's adapter."""
    from migration.runtime.airflow_adapter import get_connection  # lazy: the CLI and tests need no Airflow

    conn = get_connection(conn_id)
    extra = conn.extra
    s3_cfg = extra.get("config_kwargs", {}).get("s3", {}) if isinstance(extra.get("config_kwargs"), dict) else {}
    style = extra.get("addressing_style") or s3_cfg.get("addressing_style") or "path"
    values: dict[str, Any] = {
        "endpoint_url": extra.get("endpoint_url") or extra.get("host") or conn.host or None,
        "region": extra.get("region_name") or "us-east-1",
        "path_style": style == "path",
        "aws_conn_id": conn_id,
        "access_key_id": SecretStr(conn.login) if conn.login else None,
        "secret_access_key": conn.password,
        "session_token": SecretStr(extra["aws_session_token"]) if extra.get("aws_session_token") else None,
    }
    values.update(overrides)
    return S3Settings(**values)


def resolve_settings(settings: S3Settings) -> S3Settings:
    """On an executor: fetch the Airflow connection's credentials if one is named."""
    if settings.aws_conn_id and settings.access_key_id is None:
        return s3_settings_from_airflow_connection(
            settings.aws_conn_id, **settings.model_dump(exclude={"aws_conn_id"}, exclude_none=True))
    return settings


def make_client(settings: S3Settings) -> Any:
    """A boto3 S3 client. Explicit keys (Airflow) win; otherwise boto3's standard chain."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(
        profile_name=settings.profile,
        aws_access_key_id=settings.access_key_id.get_secret_value() if settings.access_key_id else None,
        aws_secret_access_key=settings.secret_access_key.get_secret_value() if settings.secret_access_key else None,
        aws_session_token=settings.session_token.get_secret_value() if settings.session_token else None,
        region_name=settings.region,
    )
    config = Config(
        s3={"addressing_style": "path" if settings.path_style else "virtual"},
        connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout,
        retries={"max_attempts": settings.max_attempts, "mode": "standard"},
        # We send our own CRC-32C per request and verify by reading back; no aws-chunked trailers.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return session.client("s3", endpoint_url=settings.endpoint_url, config=config)


def crc32c_b64(data: bytes | memoryview) -> str:
    """The CRC-32C as S3 prints it: base64 of the big-endian 4 bytes."""
    return base64.b64encode(crc32c.crc32c(data).to_bytes(4, "big")).decode("ascii")


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


def _ranges(size: int, part_size: int) -> Iterator[tuple[int, int, int]]:
    """(part number, offset, length); an empty object is one empty part."""
    if size == 0:
        yield 1, 0, 0
        return
    n = 1
    for off in range(0, size, part_size):
        yield n, off, min(part_size, size - off)
        n += 1


def file_sha256(path: str | os.PathLike[str], chunk: int = READ_BACK_CHUNK) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


class S3Hook:
    """One bucket on one endpoint. Methods raise botocore errors on I/O failure."""

    def __init__(self, settings: S3Settings, bucket: str, client: Any = None) -> None:
        self.settings = settings
        self.bucket = bucket
        self.client = client if client is not None else make_client(resolve_settings(settings))
        self.requests: dict[str, int] = {}  # operation -> count, for reports and tests

    def _count(self, op: str) -> None:
        self.requests[op] = self.requests.get(op, 0) + 1

    # ------------------------------------------------------------------ reads

    def head(self, key: str) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        self._count("HeadObject")
        try:
            return self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def get_bytes(self, key: str, start: int | None = None, length: int | None = None) -> bytes:
        self._count("GetObject")
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if start is not None and length is not None:
            if length == 0:
                return b""
            kwargs["Range"] = f"bytes={start}-{start + length - 1}"
        return self.client.get_object(**kwargs)["Body"].read()

    def list_objects(self, prefix: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        self._count("ListObjectsV2")
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            out.extend(page.get("Contents", []))
        return out

    def list_multipart_uploads(self, prefix: str) -> list[tuple[str, str, datetime | None]]:
        """(key, upload id, initiated) of the incomplete multipart uploads under ``prefix``."""
        out: list[tuple[str, str, datetime | None]] = []
        self._count("ListMultipartUploads")
        for page in self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=prefix):
            for u in page.get("Uploads", []):
                out.append((u["Key"], u["UploadId"], u.get("Initiated")))
        return out

    # ------------------------------------------------------------------ writes

    def abort_multipart(self, key: str, upload_id: str) -> None:
        self._count("AbortMultipartUpload")
        self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)

    def delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):
            self._count("DeleteObjects")
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]],
                                                                    "Quiet": True})

    def put_bytes(self, key: str, data: bytes, *, content_type: str = "application/octet-stream",
                  metadata: dict[str, str] | None = None) -> StoredObject:
        """One PUT with a CRC-32C, then read back and compare; deleted again if it differs."""
        sha = hashlib.sha256(data).hexdigest()
        crc = crc32c_b64(data)
        self._count("PutObject")
        resp = self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type,
                                      ChecksumCRC32C=crc, Metadata={**(metadata or {}), SHA256_METADATA_KEY: sha})
        try:
            echoed = resp.get("ChecksumCRC32C")
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
        p = Path(path)
        size = p.stat().st_size
        if size < multipart_threshold:
            obj = self.put_bytes(key, p.read_bytes(), metadata=metadata)
            if obj.sha256 != sha256:
                self._delete_quietly(key)
                raise ChecksumMismatch(f"{p} changed while being staged (SHA-256 {obj.sha256}, expected {sha256})")
            return obj
        meta = {**(metadata or {}), SHA256_METADATA_KEY: sha256}
        self._count("CreateMultipartUpload")
        upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=key, Metadata=meta,
                                                        ChecksumAlgorithm="CRC32C")["UploadId"]
        parts: list[PartChecksum] = []
        etags: list[str] = []
        completed = False
        try:
            whole = hashlib.sha256()
            with open(p, "rb") as f:
                for number, offset, length in _ranges(size, part_size):
                    data = f.read(length)
                    if len(data) != length:
                        raise ChecksumMismatch(f"{p} shrank while being staged")
                    whole.update(data)
                    crc = crc32c_b64(data)
                    self._count("UploadPart")
                    resp = self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                   PartNumber=number, Body=data, ChecksumCRC32C=crc)
                    echoed = resp.get("ChecksumCRC32C")
                    if echoed is not None and echoed != crc:
                        raise ChecksumMismatch(f"{key} part {number}: server CRC-32C {echoed}, sent {crc}")
                    parts.append(PartChecksum(part_number=number, offset=offset, size=length, crc32c=crc))
                    etags.append(resp["ETag"])
            if whole.hexdigest() != sha256:
                raise ChecksumMismatch(f"{p} changed while being staged (SHA-256 {whole.hexdigest()}, "
                                       f"expected {sha256})")
            self._count("CompleteMultipartUpload")
            self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id,
                MultipartUpload={"Parts": [{"PartNumber": pc.part_number, "ETag": etag, "ChecksumCRC32C": pc.crc32c}
                                           for pc, etag in zip(parts, etags, strict=True)]})
            completed = True
            self.verify(key, size=size, sha256=sha256, parts=parts)
        except BaseException:
            if not completed:
                self._abort_quietly(key, upload_id)
            self._delete_quietly(key)
            raise
        return StoredObject(key=key, size=size, sha256=sha256, parts=parts, uploaded=True)

    def verify(self, key: str, *, size: int, sha256: str, parts: list[PartChecksum] | None = None,
               part_size: int = READ_BACK_CHUNK) -> list[PartChecksum]:
        """Read the object back range by range; compare size, per-range CRC-32C (with the parts
        uploaded, when given) and the SHA-256 of the whole. Returns the ranges' checksums."""
        head = self.head(key)
        if head is None:
            raise ChecksumMismatch(f"{key}: missing after upload")
        if head["ContentLength"] != size:
            raise ChecksumMismatch(f"{key}: {head['ContentLength']} bytes stored, {size} expected")
        ranges = [(p.part_number, p.offset, p.size) for p in parts] if parts else list(_ranges(size, part_size))
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
        return (head is not None and head["ContentLength"] == size
                and head.get("Metadata", {}).get(SHA256_METADATA_KEY) == sha256)

    def _abort_quietly(self, key: str, upload_id: str) -> None:
        try:
            self.abort_multipart(key, upload_id)
        except Exception as exc:  # the network may be what failed; the next run cleans up
            log.warning("could not abort multipart upload of %s: %s", key, exc)

    def _delete_quietly(self, key: str) -> None:
        try:
            self._count("DeleteObject")
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            log.warning("could not delete %s: %s", key, exc)


class S3ReportSink:
    """A report store sink: copies each run report (JSON, HTML, summary) to the bucket under
    ``<prefix>kmigrate-reports/<run id>/`` so auditors find it beside the data it describes."""

    def __init__(self, settings: S3Settings, bucket: str, prefix: str = "") -> None:
        self.client = make_client(resolve_settings(settings))
        self.bucket = bucket
        self.prefix = f"{prefix}kmigrate-reports/"

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=data, ContentType=content_type,
                               ChecksumCRC32C=crc32c_b64(data))
