"""A real S3 API server (moto's, as its own process) for tests of object-store warehouses.

``s3_server`` (session scope) starts ``python -m moto.server`` on a free port of
127.0.0.1 and stops it at the end; ``s3_warehouse`` gives each test its own new
bucket and the ways a user would point acidstream at it: the ``s3://`` URL, the
``storage_options`` mapping (endpoint, key, secret, region) and the standard AWS
environment variables. Nothing mocks the client library: s3fs, botocore and
deltalake all talk HTTP to the server.
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

__all__ = ["MotoServer", "S3Warehouse"]

ACCESS_KEY = "acidstream-test-key"
SECRET_KEY = "acidstream-test-secret"
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class MotoServer:
    """One ``moto.server`` process; :meth:`kill` and :meth:`start` let a test take it away
    mid-write and bring it back (moto keeps its buckets in memory: a restart starts empty).
    """

    def __init__(self, log_dir: Path, *, port: int | None = None) -> None:
        self.port = port or _free_port()
        self.log_path = log_dir / f"moto-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 60.0) -> None:
        """Start the server and wait until it answers HTTP."""
        log = open(self.log_path, "ab")  # the child keeps its own descriptor
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto server exited: see {self.log_path}")
            try:
                with urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not answer in {timeout}s") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL the server (a store that vanishes mid-request)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@dataclass(frozen=True)
class S3Warehouse:
    """One test's bucket on the server, and how to reach it.

    Attributes:
        server: The running :class:`MotoServer`.
        bucket: This test's bucket (created empty).
        url: The warehouse URL, ``s3://<bucket>/warehouse``.
        storage_options: fsspec/s3fs options naming the endpoint and credentials.
        env: The standard AWS variables for the same (for CLI subprocesses and Spark).
    """

    server: MotoServer
    bucket: str
    url: str
    storage_options: dict[str, object] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def cli_options(self) -> list[str]:
        """``--storage-option k=v`` arguments for the CLI (endpoint, key, secret)."""
        return [
            "--storage-option",
            f"endpoint_url={self.server.endpoint}",
            "--storage-option",
            f"key={ACCESS_KEY}",
            "--storage-option",
            f"secret={SECRET_KEY}",
        ]


def aws_env(endpoint: str) -> dict[str, str]:
    """The standard AWS environment variables that point botocore at ``endpoint``."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """moto's S3 server as a process on a free port, for the whole session (per xdist worker)."""
    try:
        import moto.server  # noqa: F401
    except ImportError as e:
        pytest.skip(f"moto[server] is not installed ({e}): pip install -e '.[dev]'")
    server = MotoServer(tmp_path_factory.mktemp("moto"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


_bucket_ids = itertools.count()


@pytest.fixture
def s3_warehouse(s3_server: MotoServer) -> S3Warehouse:
    """A new empty bucket on the session's S3 server, with its ``s3://`` warehouse URL."""
    import boto3

    if s3_server.proc is None or s3_server.proc.poll() is not None:
        s3_server.start()  # a test before this one killed it
    bucket = f"wh-{os.getpid()}-{next(_bucket_ids)}"
    client = boto3.client(
        "s3",
        endpoint_url=s3_server.endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    )
    client.create_bucket(Bucket=bucket)
    return S3Warehouse(
        server=s3_server,
        bucket=bucket,
        url=f"s3://{bucket}/warehouse",
        storage_options={
            "endpoint_url": s3_server.endpoint,
            "key": ACCESS_KEY,
            "secret": SECRET_KEY,
            "client_kwargs": {"region_name": REGION},
        },
        env=aws_env(s3_server.endpoint),
    )
