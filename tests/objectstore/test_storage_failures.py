"""The object-store backend when the store misbehaves: throttling (a real HTTP proxy in
front of moto answering ``503 SlowDown``), a failed part of a multipart upload, the server
killed mid-upload, and wrong credentials (moto with authentication on)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

from acidstream.acid.errors import StorageAccessError, StorageError, StorageUnavailableError
from acidstream.acid.storage import RetryPolicy, Storage
from tests.objectstore.throttle_proxy import ThrottleProxy
from tests.plugins.s3_fixture import ACCESS_KEY, REGION, SECRET_KEY, MotoServer, S3Warehouse

pytestmark = pytest.mark.s3

MiB = 2**20


def _client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    )


@pytest.fixture(scope="module")
def proxy(s3_server: MotoServer) -> Iterator[ThrottleProxy]:
    p = ThrottleProxy(s3_server.endpoint)
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture
def throttled(proxy: ThrottleProxy, s3_warehouse: S3Warehouse) -> tuple[Storage, str]:
    """The test's bucket reached through the proxy (no throttling until a test asks)."""
    if s3_warehouse.server.endpoint not in str(s3_warehouse.storage_options["endpoint_url"]):
        pytest.skip("the warehouse is not on the session's server")
    proxy.configure(fail_first=0, fail_always=False, fail_match="", reset_counts=True)
    opts = {
        **s3_warehouse.storage_options,
        "endpoint_url": proxy.endpoint,
        "default_block_size": 5 * MiB,
    }
    return Storage.for_path(s3_warehouse.url, storage_options=opts)


def test_idempotent_calls_succeed_through_throttling(
    throttled: tuple[Storage, str], proxy: ThrottleProxy
) -> None:
    storage, root = throttled
    path = storage.join(root, "d", "f")
    calls: list[tuple[str, Any]] = [
        ("conditional put", lambda: storage.write_bytes_if_absent(path, b"data")),
        ("read", lambda: storage.read_bytes(path)),
        ("ranged read", lambda: storage.read_bytes(path, length=2)),
        ("head", lambda: storage.exists(path)),
        ("size", lambda: storage.size(path)),
        ("list", lambda: [e.name for e in storage.list_dir(storage.join(root, "d"))]),
        ("list prefix", lambda: [e.name for e in storage.list_tree(root)]),
        ("bulk delete", lambda: storage.delete_many([path])),
        ("head after delete", lambda: storage.exists(path)),
    ]
    results = {}
    for name, call in calls:
        proxy.configure(fail_first=3, reset_counts=True)
        results[name] = call()
        stats = proxy.stats()
        assert stats["throttled"] == 3, (name, stats)  # three 503s, then it went through
        assert stats["forwarded"] >= 1, (name, stats)
    assert results == {
        "conditional put": True,
        "read": b"data",
        "ranged read": b"da",
        "head": True,
        "size": 4,
        "list": ["f"],
        "list prefix": ["f"],
        "bulk delete": None,
        "head after delete": False,
    }


def test_permanent_throttling_fails_in_bounded_time_with_one_try_per_attempt(
    s3_warehouse: S3Warehouse, proxy: ThrottleProxy
) -> None:
    policy = RetryPolicy(attempts=4, first_wait_s=0.05, max_wait_s=0.2, deadline_s=10)
    opts = {**s3_warehouse.storage_options, "endpoint_url": proxy.endpoint}
    storage, root = Storage.for_path(s3_warehouse.url, storage_options=opts, retry=policy)
    proxy.configure(fail_always=True, reset_counts=True)
    try:
        t0 = time.monotonic()
        with pytest.raises(StorageUnavailableError) as info:
            storage.read_bytes(storage.join(root, "f"))
        elapsed = time.monotonic() - t0
        stats = proxy.stats()
    finally:
        proxy.configure(fail_always=False)
    assert elapsed < 5, elapsed
    # No hidden retry layer below this one (botocore's, s3fs's): one request per attempt.
    assert stats["requests"] == 4, stats
    msg = str(info.value)
    assert "\n" not in msg and "read failed" in msg and "reduce your request rate" in msg
    assert isinstance(info.value, StorageError) and isinstance(info.value, OSError)


def test_a_write_through_an_open_file_is_not_retried(
    throttled: tuple[Storage, str], proxy: ThrottleProxy
) -> None:
    """A streaming file's upload is not an idempotent call of this layer: one 503 fails
    it (its transaction is aborted and retried by its writer), nothing is published."""
    storage, root = throttled
    path = storage.join(root, "delta_1_1", "bucket_00000")
    out = storage.create(path)
    out.write(b"rows")
    proxy.configure(fail_first=1, reset_counts=True)
    with pytest.raises(StorageUnavailableError, match="close failed"):
        out.close()
    assert proxy.stats()["requests"] == 1
    assert not storage.exists(path)


def test_a_failed_part_aborts_the_multipart_upload(
    throttled: tuple[Storage, str], proxy: ThrottleProxy, s3_warehouse: S3Warehouse
) -> None:
    storage, root = throttled
    path = storage.join(root, "big")
    proxy.configure(fail_match="partNumber=2")  # every second part is refused
    try:
        with pytest.raises(StorageUnavailableError, match="write failed"):
            with storage.create(path) as out:
                for _ in range(4):
                    out.write(b"z" * (3 * MiB))  # part 1 goes at 6 MiB, part 2 fails
    finally:
        proxy.configure(fail_match="")
    direct = _client(s3_warehouse.server.endpoint)
    assert direct.list_multipart_uploads(Bucket=s3_warehouse.bucket).get("Uploads", []) == []
    assert direct.list_objects_v2(Bucket=s3_warehouse.bucket).get("KeyCount") == 0


def test_the_server_killed_mid_upload_is_a_storage_error_in_bounded_time(
    s3_warehouse: S3Warehouse,
) -> None:
    server = s3_warehouse.server
    opts = {**s3_warehouse.storage_options, "default_block_size": 5 * MiB}
    policy = RetryPolicy(attempts=3, first_wait_s=0.05, max_wait_s=0.2, deadline_s=10)
    storage, root = Storage.for_path(s3_warehouse.url, storage_options=opts, retry=policy)
    path = storage.join(root, "delta_1_1", "bucket_00000")
    out = storage.create(path)
    out.write(b"a" * (6 * MiB))  # one part uploaded: a multipart upload is under way
    assert (
        len(_client(server.endpoint).list_multipart_uploads(Bucket=s3_warehouse.bucket)["Uploads"])
        == 1
    )
    server.kill()
    try:
        t0 = time.monotonic()
        with pytest.raises(StorageUnavailableError) as info:
            out.write(b"b" * (6 * MiB))
            out.close()
        out.close()  # a failed file is abandoned on close (the abort is only logged)
        assert out.closed
        with pytest.raises(StorageUnavailableError):
            storage.exists(path)  # an idempotent call: retried, then typed
        assert time.monotonic() - t0 < 30
        assert "\n" not in str(info.value) and str(info.value).startswith(f"s3://{path}: ")
    finally:
        server.start()  # (moto forgets its buckets: the next test's fixture makes its own)


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """A moto server that checks credentials from its first request on: no IAM access key
    exists, so every key is refused (InvalidAccessKeyId)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("INITIAL_NO_AUTH_ACTION_COUNT", "0")  # the child inherits it
    server = MotoServer(tmp_path_factory.mktemp("moto-auth"))
    try:
        server.start()
    finally:
        mp.undo()
    try:
        yield server
    finally:
        server.stop()


def test_wrong_credentials_are_a_storage_access_error_without_the_secret(
    auth_server: MotoServer, tmp_path: Path
) -> None:
    secret = "s3cr3t-Value-that-must-not-leak"
    opts = {
        "endpoint_url": auth_server.endpoint,
        "key": "AKIAWRONGKEY",
        "secret": secret,
        "client_kwargs": {"region_name": REGION},
    }
    storage, root = Storage.for_path("s3://wh/warehouse", storage_options=opts)
    path = storage.join(root, "delta_1_1", "bucket_00000")
    # The client is built before the clock starts (no request: botocore loads its S3
    # model, seconds of CPU on a loaded machine); the bound below is about retries.
    assert storage.fs.s3 is not None

    def upload() -> None:
        with storage.create(path) as f:
            f.write(b"x")

    for call in (
        lambda: storage.list_dir(root),
        lambda: storage.read_bytes(path),
        lambda: storage.exists(path),
        lambda: storage.write_bytes_if_absent(path, b"x"),
        upload,
    ):
        t0 = time.monotonic()
        with pytest.raises(StorageAccessError) as info:
            call()
        assert time.monotonic() - t0 < 5  # refused credentials are not retried
        err = info.value
        assert isinstance(err, PermissionError) and isinstance(err, StorageError)
        text = f"{err} {err!r}"
        assert secret not in text and "\n" not in str(err)
        assert "s3://wh/warehouse" in str(err)
