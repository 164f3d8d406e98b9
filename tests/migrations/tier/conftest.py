"""The object stores of the tier tests.

``s3``: a real S3 endpoint, ``moto_server`` in a subprocess on loopback, shared by the module's
tests and reset between them (``/moto-api/reset``); tests can kill it, restart it (moto keeps its
state in memory: a restart starts empty) or freeze it. Fake credentials are in the environment
from import time on, so Spark's Python workers (which inherit the environment of the JVM started
later) see them too.

``store_env``: the same tests over both backends, S3 (moto) and the file-system store (a
directory). Each environment reads what the store holds by its own means (boto3, or the files
under the root), never through the code under test.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.moto import MotoServer

FAKE_ACCESS_KEY = "AKIAKMIGRATETESTONLY"
FAKE_SECRET_KEY = "kmigrate-test-secret-Zq8vT3nW0xY7"  # must never appear in any output
BUCKET = "tier-staging"

os.environ["AWS_ACCESS_KEY_ID"] = FAKE_ACCESS_KEY
os.environ["AWS_SECRET_ACCESS_KEY"] = FAKE_SECRET_KEY
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_SESSION_TOKEN", None)


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory):
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log")
    server.start()
    yield server
    server.kill()


@dataclass
class S3Env:
    server: MotoServer
    bucket: str
    out: Path
    kind = "s3"

    @property
    def endpoint(self) -> str:
        return self.server.url

    def store_options(self) -> dict:
        return {"bucket": self.bucket, "endpoint_url": self.endpoint}

    def objects(self) -> dict[str, int]:
        """Key -> size of every object in the bucket."""
        out = {}
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            for o in page.get("Contents", []):
                out[o["Key"]] = o["Size"]
        return out

    def versions(self) -> dict[str, tuple]:
        """Key -> what changes when the object is written again."""
        return {o["Key"]: (o["ETag"], o["LastModified"]) for page in
                self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
                for o in page.get("Contents", [])}

    def get(self, key: str) -> bytes:
        return self.client().get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def uploads(self) -> list[str]:
        """Keys of the incomplete multipart uploads."""
        return [u["Key"] for u in self.client().list_multipart_uploads(Bucket=self.bucket).get("Uploads", [])]

    def put_raw(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        """An object written behind kmigrate's back."""
        self.client().put_object(Bucket=self.bucket, Key=key, Body=data, Metadata=metadata or {})

    def corrupt(self, key: str) -> None:
        """Replace the bytes, keep size and metadata (what a server's bit rot looks like)."""
        head = self.client().head_object(Bucket=self.bucket, Key=key)
        self.put_raw(key, os.urandom(head["ContentLength"]), head["Metadata"])

    def start_upload(self, key: str) -> None:
        """A multipart upload a crashed client never finished."""
        self.client().create_multipart_upload(Bucket=self.bucket, Key=key)

    def open(self):  # noqa: ANN201 - an ObjectStore
        from migration.migrations.tier.s3 import S3ObjectStore, S3Settings

        return S3ObjectStore(S3Settings(endpoint_url=self.endpoint), self.bucket)

    def client(self):  # noqa: ANN201
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}))

    def create_bucket(self) -> None:
        self.client().create_bucket(Bucket=self.bucket)


@pytest.fixture
def s3(moto_server, monkeypatch, tmp_path) -> S3Env:
    """A fresh bucket on the shared server, fake credentials and a private output root."""
    if not moto_server.running():
        moto_server.start()
    moto_server.reset()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET_KEY)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    out = tmp_path / "out"
    monkeypatch.setenv("KMIGRATE_OUT", str(out))
    monkeypatch.setenv("KMIGRATE_REPORT_ROOT", str(out / "reports"))
    env = S3Env(moto_server, BUCKET, out)
    env.create_bucket()
    yield env
    if not moto_server.running():
        moto_server.start()


STORE_DIR = ".kmigrate-store"  # the file-system store's own files (migration/migrations/tier/filesystem.py)


@dataclass
class FsEnv:
    root: Path
    out: Path
    kind = "fs"

    def store_options(self) -> dict:
        return {"store_url": self.root.as_uri()}

    def _files(self) -> dict[str, Path]:
        return {p.relative_to(self.root).as_posix(): p for p in self.root.rglob("*")
                if p.is_file() and p.relative_to(self.root).parts[0] != STORE_DIR}

    def objects(self) -> dict[str, int]:
        return {k: p.stat().st_size for k, p in self._files().items()}

    def versions(self) -> dict[str, tuple]:
        return {k: (p.stat().st_ino, p.stat().st_mtime_ns) for k, p in self._files().items()}

    def get(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def uploads(self) -> list[str]:
        d = self.root / STORE_DIR / "uploads"
        return [json.loads((u / "upload.json").read_text())["key"] for u in d.iterdir()] if d.is_dir() else []

    def put_raw(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def corrupt(self, key: str) -> None:
        """Same size, same inode and mtime (so the sidecar still describes the file), other bytes."""
        path = self.root / key
        st = path.stat()
        with open(path, "r+b") as f:
            f.write(os.urandom(st.st_size))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    def start_upload(self, key: str) -> None:
        d = self.root / STORE_DIR / "uploads" / uuid.uuid4().hex
        d.mkdir(parents=True)
        (d / "upload.json").write_text(json.dumps({"version": 1, "key": key, "metadata": {},
                                                   "initiated": datetime.now(UTC).isoformat()}))
        (d / "part-00001").write_bytes(b"stale part")

    def open(self):  # noqa: ANN201 - an ObjectStore
        from migration.migrations.tier.filesystem import FileSystemObjectStore

        return FileSystemObjectStore(self.root)


@pytest.fixture
def fs_store(monkeypatch, tmp_path) -> FsEnv:
    """An empty file-system store and a private output root."""
    out = tmp_path / "out"
    monkeypatch.setenv("KMIGRATE_OUT", str(out))
    monkeypatch.setenv("KMIGRATE_REPORT_ROOT", str(out / "reports"))
    root = tmp_path / "store"
    root.mkdir()
    return FsEnv(root, out)


@pytest.fixture(params=["s3", "fs"])
def store_env(request):
    """The test once against S3 (moto), once against the file-system store."""
    return request.getfixturevalue("s3" if request.param == "s3" else "fs_store")
