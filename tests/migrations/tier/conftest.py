"""A real S3 endpoint for the tier tests: ``moto_server`` in a subprocess on loopback.

The server is shared by the module's tests and reset between them (``/moto-api/reset``); tests
can kill it, restart it (moto keeps its state in memory: a restart starts empty) or freeze it.
Fake credentials are in the environment from import time on, so Spark's Python workers (which
inherit the environment of the JVM started later) see them too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
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

    @property
    def endpoint(self) -> str:
        return self.server.url

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
