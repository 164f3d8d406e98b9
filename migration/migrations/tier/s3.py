"""The S3 backend of the object-store interface (:mod:`.store`): every boto3 call of the
package lives here (the import contract in pyproject.toml allows no other module).

- Settings: endpoint URL, region, path-style or virtual-host addressing, and where credentials
  come from: the standard AWS chain (environment variables, shared config/credentials files,
  ``profile``), or an Airflow connection of type ``aws`` (``s3_settings_from_airflow_connection``:
  resolved by the amazon provider through the runtime's adapter, assumed roles included).
  Credentials are ``SecretStr`` fields excluded from every dump, so settings can be logged or
  written into a run's job file without leaking them; an Airflow connection is carried as its
  id and resolved again on the executor.
- Names are checked before any request: the bucket against S3's naming rules, the endpoint URL
  for scheme, host and port (and for credentials written into it, which are refused unprinted).
- Errors are explained in one line per cause (cannot connect, no such bucket, access denied,
  credentials rejected), never with a secret: botocore's messages name operations and keys only.

boto3 and botocore are imported where they are used: importing them costs about 0.6 s (measured
with ``python -X importtime``), which dry runs, ``--snapshots-only`` runs, the file-system backend
and every module that only needs the settings or the name checks never pay.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr

from migration.migrations.tier import layout
from migration.migrations.tier.store import (
    ObjectHead,
    ObjectNotFound,
    ObjectStore,
    ObjectSummary,
    PartChecksum,
    PendingUpload,
    StoreArgumentError,
    crc32c_b64,
    one_line,
)

_BUCKET_CHARS = re.compile(r"[a-z0-9.-]+")
_HOST_CHARS = re.compile(r"[A-Za-z0-9._-]+")
# S3's reserved bucket-name prefixes and suffixes (Amazon S3 User Guide, "General purpose
# bucket naming rules").
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def bucket_name_problem(name: str) -> str | None:
    """Why ``name`` breaks S3's bucket naming rules, or None. S3-compatible servers (MinIO,
    Ceph RGW) follow the same rules; a name they would refuse fails here, before any request."""
    if not 3 <= len(name) <= 63:
        return f"bucket name {name!r} has {len(name)} characters: S3 needs 3 to 63"
    if not _BUCKET_CHARS.fullmatch(name):
        bad = "".join(sorted({c for c in name if not _BUCKET_CHARS.fullmatch(c)}))
        return (f"bucket name {name!r} has characters S3 does not allow ({bad!r}): use lowercase letters, digits, "
                "dots and hyphens")
    if not (name[0].isalnum() and name[-1].isalnum()):
        return f"bucket name {name!r} must begin and end with a lowercase letter or a digit"
    if ".." in name:
        return f"bucket name {name!r} has two adjacent dots"
    try:
        ipaddress.IPv4Address(name)
        return f"bucket name {name!r} is formatted as an IP address"
    except ValueError:
        pass
    for p in _RESERVED_PREFIXES:
        if name.startswith(p):
            return f"bucket name {name!r} starts with {p!r}, which S3 reserves"
    for s in _RESERVED_SUFFIXES:
        if name.endswith(s):
            return f"bucket name {name!r} ends with {s!r}, which S3 reserves"
    return None


def endpoint_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an S3 endpoint, or None: http or https, a host, a port in range,
    no query or fragment. A URL with credentials in it is refused without repeating it."""
    try:
        parts = urlsplit(url)
        userinfo = "@" in parts.netloc
        port = parts.port
    except ValueError as exc:
        return f"endpoint URL is not a URL ({exc}): write http://HOST:PORT or https://HOST"
    if userinfo:
        return ("endpoint URL has credentials in it (not repeated here): give the key pair in AWS_ACCESS_KEY_ID/"
                "AWS_SECRET_ACCESS_KEY or a --profile, never in a URL")
    if any(c.isspace() for c in url):
        return f"endpoint URL {url!r} contains whitespace"
    if parts.scheme not in ("http", "https"):
        got = f"scheme {parts.scheme!r}" if parts.scheme and parts.netloc else "no scheme"
        return f"endpoint URL {url!r} has {got}: write http://HOST:PORT or https://HOST"
    host = parts.hostname
    if not host:
        return f"endpoint URL {url!r} has no host: write http://HOST:PORT or https://HOST"
    if not (_HOST_CHARS.fullmatch(host) or _is_ipv6(host)):
        return f"endpoint URL {url!r}: {host!r} is not a host name or IP address"
    if port == 0:
        return f"endpoint URL {url!r} has port 0"
    if parts.query or parts.fragment:
        return f"endpoint URL {url!r} has a query or fragment: give only scheme, host, port (and path)"
    return None


def _is_ipv6(host: str) -> bool:
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return True


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
    verify: bool | str | None = Field(default=None, description="TLS verification: false, or a CA bundle's path "
                                      "(None: botocore's default)")
    access_key_id: SecretStr | None = Field(default=None, exclude=True, repr=False)
    secret_access_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    session_token: SecretStr | None = Field(default=None, exclude=True, repr=False)


def s3_settings_from_airflow_connection(conn_id: str, **overrides: Any) -> S3Settings:
    """Settings from an Airflow ``aws`` connection, resolved by the amazon provider through the
    runtime's adapter (keys, a profile, a role to assume, the S3 endpoint, ``verify``, the
    addressing style of its botocore config); ``overrides`` (the DAG's params) win."""
    from migration.runtime.airflow_adapter import aws_connection  # lazy: the CLI and tests need no Airflow

    conn = aws_connection(conn_id, "s3")
    values: dict[str, Any] = {
        "endpoint_url": conn.endpoint_url,
        "region": conn.region or "us-east-1",
        "path_style": (conn.addressing_style or "path") == "path",
        "verify": conn.verify,
        "aws_conn_id": conn_id,
        "access_key_id": conn.access_key_id,
        "secret_access_key": conn.secret_access_key,
        "session_token": conn.session_token,
    }
    values.update(overrides)
    return S3Settings(**values)


def resolve_settings(settings: S3Settings) -> S3Settings:
    """On an executor: fetch the Airflow connection's credentials if one is named."""
    if settings.aws_conn_id and settings.access_key_id is None:
        return s3_settings_from_airflow_connection(
            settings.aws_conn_id, **settings.model_dump(exclude={"aws_conn_id"}, exclude_none=True))
    return settings


def make_session(settings: S3Settings) -> Any:
    """A boto3 session. Explicit keys (Airflow) win; otherwise boto3's standard chain."""
    import boto3

    return boto3.session.Session(
        profile_name=settings.profile,
        aws_access_key_id=settings.access_key_id.get_secret_value() if settings.access_key_id else None,
        aws_secret_access_key=settings.secret_access_key.get_secret_value() if settings.secret_access_key else None,
        aws_session_token=settings.session_token.get_secret_value() if settings.session_token else None,
        region_name=settings.region,
    )


def make_client(settings: S3Settings, session: Any = None) -> Any:
    """A boto3 S3 client for ``settings`` (from ``session`` when given)."""
    from botocore.config import Config

    config = Config(
        s3={"addressing_style": "path" if settings.path_style else "virtual"},
        connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout,
        retries={"max_attempts": settings.max_attempts, "mode": "standard"},
        # We send our own CRC-32C per request and verify by reading back; no aws-chunked trailers.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return (session or make_session(settings)).client("s3", endpoint_url=settings.endpoint_url, config=config,
                                                     verify=settings.verify)


def _error_code(exc: BaseException) -> str | None:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "") or None
    return None


class S3ObjectStore(ObjectStore):
    """One bucket on one endpoint. Primitives raise botocore errors on I/O failure."""

    def __init__(self, settings: S3Settings, bucket: str, client: Any = None) -> None:
        super().__init__()
        from botocore.exceptions import BotoCoreError

        self.settings = settings
        self.bucket = bucket
        self._session: Any = None
        if client is not None:
            self.client = client
            return
        try:
            resolved = resolve_settings(settings)
        except Exception as exc:  # Airflow's own errors (an unknown connection id): the argument is wrong
            raise StoreArgumentError(f"Airflow connection {settings.aws_conn_id!r}: {one_line(str(exc))}") from None
        try:
            self._session = make_session(resolved)
            self.client = make_client(resolved, self._session)
        except (BotoCoreError, ValueError) as exc:  # ProfileNotFound, a broken config file, an invalid endpoint
            raise StoreArgumentError(f"S3 client: {one_line(str(exc))}") from None

    @property
    def location(self) -> str:
        return f"bucket {self.bucket} at {self.settings.endpoint_url or 'AWS'}"

    def check_credentials(self) -> None:
        """Resolve the credentials as the client will (environment, shared files, profile,
        container or instance metadata) without sending a request or printing them."""
        if self._session is None:
            return  # a client handed in (tests, the demo) carries its own
        from botocore.exceptions import BotoCoreError

        try:
            creds = self._session.get_credentials()
        except BotoCoreError as exc:  # a credential_process that fails, a partial pair, an unknown profile
            raise StoreArgumentError(f"AWS credentials cannot be resolved: {one_line(str(exc))}") from None
        if creds is None or not creds.access_key or not creds.secret_key:
            where = f"profile {self.settings.profile!r} has none" if self.settings.profile else "none found"
            raise StoreArgumentError(
                f"no AWS credentials ({where}): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or pass --profile "
                "naming a profile of the shared config/credentials files"
                + (f", or give the Airflow connection {self.settings.aws_conn_id!r} a login and password"
                   if self.settings.aws_conn_id else ""))

    def explain(self, exc: BaseException) -> str:
        from botocore.exceptions import ConnectionError, HTTPClientError, NoCredentialsError, ReadTimeoutError

        endpoint = self.settings.endpoint_url or "AWS"
        code = _error_code(exc)
        if isinstance(exc, ReadTimeoutError):
            return f"no answer within {self.settings.read_timeout:g} s (ReadTimeoutError): is the server overloaded?"
        if isinstance(exc, ConnectionError | HTTPClientError):
            # botocore's text repeats the URL the location names already
            return (f"cannot connect ({type(exc).__name__}, {self.settings.max_attempts} attempts): check the endpoint "
                    "URL and that the server is up")
        if isinstance(exc, NoCredentialsError):
            return "no AWS credentials were sent: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or pass --profile"
        if code == "NoSuchBucket":
            return f"bucket {self.bucket!r} does not exist at {endpoint}: create it, or pass the right --bucket"
        if code in ("AccessDenied", "403", "AllAccessDisabled"):
            return (f"access denied to bucket {self.bucket!r}: staging needs s3:PutObject, s3:GetObject, "
                    "s3:DeleteObject, s3:ListBucket and s3:ListBucketMultipartUploads/s3:AbortMultipartUpload under "
                    "the prefix")
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"):
            return f"{endpoint} rejected the credentials ({code}): check the key pair or the profile"
        return super().explain(exc)

    # ------------------------------------------------------------------ primitives

    def _head(self, key: str) -> ObjectHead | None:
        from botocore.exceptions import ClientError

        try:
            resp = self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _error_code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        return ObjectHead(size=resp["ContentLength"], metadata=resp.get("Metadata", {}))

    def _get(self, key: str, start: int | None, length: int | None) -> bytes:
        from botocore.exceptions import ClientError

        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if start is not None and length is not None:
            kwargs["Range"] = f"bytes={start}-{start + length - 1}"
        try:
            return self.client.get_object(**kwargs)["Body"].read()
        except ClientError as exc:
            if _error_code(exc) in ("404", "NoSuchKey"):
                raise ObjectNotFound(key) from None
            raise

    def _list(self, prefix: str) -> list[ObjectSummary]:
        out: list[ObjectSummary] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            out.extend(ObjectSummary(key=o["Key"], size=o["Size"]) for o in page.get("Contents", []))
        return out

    def _list_uploads(self, prefix: str) -> list[PendingUpload]:
        out: list[PendingUpload] = []
        for page in self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=prefix):
            out.extend(PendingUpload(key=u["Key"], upload_id=u["UploadId"], initiated=u.get("Initiated"))
                       for u in page.get("Uploads", []))
        return out

    def _abort(self, key: str, upload_id: str) -> None:
        self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)

    def _delete_batch(self, keys: list[str]) -> None:
        if len(keys) == 1:
            self.client.delete_object(Bucket=self.bucket, Key=keys[0])
            return
        self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True})

    def _put(self, key: str, data: bytes, *, content_type: str, metadata: dict[str, str], crc: str) -> str | None:
        resp = self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type,
                                      ChecksumCRC32C=crc, Metadata=metadata)
        return resp.get("ChecksumCRC32C")

    def _create_multipart(self, key: str, *, metadata: dict[str, str]) -> str:
        return self.client.create_multipart_upload(Bucket=self.bucket, Key=key, Metadata=metadata,
                                                   ChecksumAlgorithm="CRC32C")["UploadId"]

    def _upload_part(self, key: str, upload_id: str, number: int, data: bytes, crc: str) -> tuple[str, str | None]:
        resp = self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data,
                                       ChecksumCRC32C=crc)
        return resp["ETag"], resp.get("ChecksumCRC32C")

    def _complete_multipart(self, key: str, upload_id: str, parts: list[tuple[PartChecksum, str]]) -> None:
        self.client.complete_multipart_upload(
            Bucket=self.bucket, Key=key, UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": pc.part_number, "ETag": etag, "ChecksumCRC32C": pc.crc32c}
                                       for pc, etag in parts]})


class S3ReportSink:
    """A report store sink: copies each run report (JSON, HTML, summary) to the bucket under the
    layout's report prefix, so auditors find it beside the data it describes."""

    def __init__(self, settings: S3Settings, bucket: str, prefix: str = "") -> None:
        self.client = make_client(resolve_settings(settings))
        self.bucket = bucket
        self.prefix = layout.report_key_prefix(prefix)

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=data, ContentType=content_type,
                               ChecksumCRC32C=crc32c_b64(data))
