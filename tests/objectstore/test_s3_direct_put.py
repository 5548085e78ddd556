"""Whole small objects on an S3-compatible endpoint are PUT by one signed request from the
writer's own thread (``acid/storage_s3put.py``), not through s3fs's event loop, whose one
thread serialised the client CPU of a commit's two PUTs; where s3fs's request would differ
(extra request parameters, AWS's virtual-host addressing) s3fs still sends it."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import boto3  # type: ignore[import-untyped]
import fsspec.asyn
import pytest

from acidstream.acid.storage import Storage
from acidstream.acid.storage_s3put import DirectPut
from tests.plugins.s3_fixture import REGION, MotoServer, S3Warehouse

pytestmark = pytest.mark.s3

WAIT_S = 30.0  # far above a PUT's time: only a PUT that waits for the blocked loop takes it


@contextlib.contextmanager
def blocked_loop() -> Iterator[threading.Event]:
    """s3fs's event-loop thread (fsspec's, shared by every s3fs filesystem) held until the
    caller sets the event returned (or the block ends): any s3fs call made meanwhile
    waits for it."""
    release, held = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        release.wait(WAIT_S)

    fsspec.asyn.get_loop().call_soon_threadsafe(hold)
    assert held.wait(WAIT_S)
    try:
        yield release
    finally:
        release.set()


def _in_thread(fn: Any) -> bool:
    """Run ``fn`` on a thread; whether it finished within ``WAIT_S / 3``."""
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:
            failure.append(e)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    finished = done.wait(WAIT_S / 3)
    if failure:
        raise failure[0]
    return finished


def test_small_objects_are_put_without_s3fs_event_loop(s3_warehouse: S3Warehouse) -> None:
    """With s3fs's loop blocked, a created file's close and a conditional small PUT still
    complete (each its own request from the calling thread); a second create of the same
    name still loses (``If-None-Match: *``)."""
    storage, root = Storage.for_path(s3_warehouse.url, storage_options=s3_warehouse.storage_options)
    storage.exists(storage.join(root, "warm"))  # s3fs's session made before the loop is held
    data_path = storage.join(root, "delta_1_1", "bucket_00000")
    marker_path = storage.join(root, "delta_1_1", "_orc_acid_version")

    def write_file() -> None:
        with storage.create(data_path) as f:
            f.write(b"rows " * 1000)

    def create_again() -> None:
        with pytest.raises(FileExistsError):
            with storage.create(data_path) as f:
                f.write(b"other")

    lost: list[bool] = []
    with blocked_loop() as release:
        assert _in_thread(write_file)
        assert _in_thread(lambda: storage.write_bytes_if_absent(marker_path, b"2"))
        assert _in_thread(lambda: lost.append(storage.write_bytes_if_absent(marker_path, b"3")))
        assert _in_thread(create_again)
        release.set()
    assert lost == [False]
    assert storage.read_bytes(data_path) == b"rows " * 1000
    assert storage.read_bytes(marker_path) == b"2"


def test_keys_that_need_escaping_are_signed_right(tmp_path_factory: pytest.TempPathFactory) -> None:
    """moto with authentication on checks every request's SigV4 signature: objects whose
    keys hold a partition's ``=``, a space, ``+`` and a percent escape are accepted."""
    mp = pytest.MonkeyPatch()
    mp.setenv("INITIAL_NO_AUTH_ACTION_COUNT", "4")  # the user, its policy, key and bucket
    server = MotoServer(tmp_path_factory.mktemp("moto-signed"))
    try:
        server.start()
    finally:
        mp.undo()
    try:
        iam = boto3.client(
            "iam",
            endpoint_url=server.endpoint,
            region_name=REGION,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName="writer")
        iam.put_user_policy(
            UserName="writer",
            PolicyName="s3",
            PolicyDocument='{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", '
            '"Action": "s3:*", "Resource": "*"}]}',
        )
        key = iam.create_access_key(UserName="writer")["AccessKey"]
        opts = {
            "endpoint_url": server.endpoint,
            "key": key["AccessKeyId"],
            "secret": key["SecretAccessKey"],
            "client_kwargs": {"region_name": REGION},
        }
        s3 = boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            region_name=REGION,
            aws_access_key_id=key["AccessKeyId"],
            aws_secret_access_key=key["SecretAccessKey"],
        )
        s3.create_bucket(Bucket="signed")
        storage, root = Storage.for_path("s3://signed/wh", storage_options=opts)
        assert DirectPut.for_fs(storage.fs) is not None
        for name in ("ds=2024-01-01/a b+c%3A/bucket_00000", "t/delta_1_1/_orc_acid_version"):
            path = storage.join(root, name)
            assert storage.write_bytes_if_absent(path, name.encode())
            with storage.create(path + ".file") as f:
                f.write(b"x")
            assert storage.read_bytes(path) == name.encode()
            assert storage.read_bytes(path + ".file") == b"x"
    finally:
        server.stop()


def test_s3fs_sends_the_puts_it_must(s3_warehouse: S3Warehouse, tmp_path: Path) -> None:
    """Extra request parameters (here server-side encryption), AWS's own endpoints and
    unsigned access keep s3fs's request: no direct PUT, and the parameter reaches the
    object."""
    opts = {
        **s3_warehouse.storage_options,
        "s3_additional_kwargs": {"ServerSideEncryption": "AES256"},
    }
    storage, root = Storage.for_path(s3_warehouse.url, storage_options=opts)
    assert DirectPut.for_fs(storage.fs) is None
    path = storage.join(root, "sse", "bucket_00000")
    with storage.create(path) as f:
        f.write(b"x")
    assert storage.write_bytes_if_absent(storage.join(root, "sse", "_orc_acid_version"), b"2")
    bucket, key, _ = storage.fs.split_path(path)
    head = storage.fs.call_s3("head_object", Bucket=bucket, Key=key)
    assert head.get("ServerSideEncryption") == "AES256"
    aws = fsspec.filesystem(
        "s3", key="k", secret="s", client_kwargs={"region_name": REGION}, skip_instance_cache=True
    )
    assert DirectPut.for_fs(aws) is None
    anon = fsspec.filesystem(
        "s3", anon=True, endpoint_url=s3_warehouse.server.endpoint, skip_instance_cache=True
    )
    assert DirectPut.for_fs(anon) is None


class _KeepAliveS3(BaseHTTPRequestHandler):
    """An HTTP/1.1 endpoint that keeps connections open (moto's closes each one): answers
    every PUT 200 and records which connection (client port) carried it; a PUT whose key
    ends in ``-last`` is the connection's last (the server closes it after answering
    without saying so, as a store's idle timeout does)."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple[int, str, bytes]]] = []

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append((self.client_address[1], self.path, body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
        if self.path.endswith("-last"):
            self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _KeepAliveS3)
        self.closed_one = threading.Event()

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        self.closed_one.set()


def test_a_kept_connection_is_reused_and_one_the_server_closed_is_not() -> None:
    """Against a keep-alive endpoint, PUTs one after the other share one connection; once
    the server closed it, the next PUT opens a new one and lands, instead of failing on the
    dead socket."""
    from botocore.credentials import ReadOnlyCredentials

    _KeepAliveS3.seen = []
    server = _Server()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        put = DirectPut(
            f"http://127.0.0.1:{server.server_address[1]}",
            REGION,
            ReadOnlyCredentials("k", "s", None, None),
        )
        put.put("bkt", "a/1", b"one", if_absent=True)
        put.put("bkt", "a/2-last", b"two", if_absent=False)
        assert server.closed_one.wait(WAIT_S)
        put.put("bkt", "a/3", b"three", if_absent=True)
    finally:
        server.shutdown()
        server.server_close()
    assert [(t, b) for _, t, b in _KeepAliveS3.seen] == [
        ("/bkt/a/1", b"one"),
        ("/bkt/a/2-last", b"two"),
        ("/bkt/a/3", b"three"),
    ]
    ports = [p for p, _, _ in _KeepAliveS3.seen]
    assert ports[0] == ports[1] != ports[2]


def test_a_forked_child_does_not_use_its_parents_kept_connection() -> None:
    """A child forked while the parent keeps a connection opens its own (sharing the
    parent's socket would interleave the two processes' requests); the parent's stays
    usable."""
    from botocore.credentials import ReadOnlyCredentials

    _KeepAliveS3.seen = []
    server = _Server()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        put = DirectPut(
            f"http://127.0.0.1:{server.server_address[1]}",
            REGION,
            ReadOnlyCredentials("k", "s", None, None),
        )
        put.put("bkt", "parent/1", b"p1", if_absent=True)
        pid = os.fork()
        if pid == 0:  # the child: exit status says whether its PUT landed
            code = 1
            try:
                put.put("bkt", "child/1", b"c1", if_absent=True)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        put.put("bkt", "parent/2", b"p2", if_absent=True)
    finally:
        server.shutdown()
        server.server_close()
    by_path = {t: p for p, t, _ in _KeepAliveS3.seen}
    assert set(by_path) == {"/bkt/parent/1", "/bkt/child/1", "/bkt/parent/2"}
    assert by_path["/bkt/parent/1"] == by_path["/bkt/parent/2"] != by_path["/bkt/child/1"]
