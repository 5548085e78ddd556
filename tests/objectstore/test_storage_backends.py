"""acidstream.acid.storage: one backend per kind of filesystem, and each backend's
operations against a real S3 API server (moto's, as its own process)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

from acidstream.acid.storage import Storage
from acidstream.acid.storage_local import FlushableStorage, LocalStorage
from acidstream.acid.storage_object import ObjectStorage
from tests.plugins.s3_fixture import S3Warehouse


def _s3(wh: S3Warehouse) -> tuple[Storage, str]:
    return Storage.for_path(wh.url, storage_options=wh.storage_options)


def _client(wh: S3Warehouse) -> Any:
    opts = wh.storage_options
    return boto3.client(
        "s3",
        endpoint_url=str(opts["endpoint_url"]),
        aws_access_key_id=str(opts["key"]),
        aws_secret_access_key=str(opts["secret"]),
        region_name="us-east-1",
    )


def test_for_path_picks_the_backend_of_each_kind(tmp_path: Path) -> None:
    local, _ = Storage.for_path(str(tmp_path))
    assert isinstance(local, LocalStorage)
    assert (local.supports_flush, local.supports_rename, local.is_object_store) == (
        True,
        True,
        False,
    )
    assert local.local_path(str(tmp_path / "f")) == str(tmp_path / "f")
    mem, _ = Storage.for_path(f"memory://acidstream-{uuid.uuid4().hex}")
    assert isinstance(mem, ObjectStorage)
    assert (mem.supports_flush, mem.supports_rename, mem.is_object_store) == (False, False, True)
    assert mem.local_path("/x") is None


def test_an_hflush_filesystem_gets_the_flushable_backend() -> None:
    from fsspec.implementations.memory import MemoryFileSystem

    class HflushFS(MemoryFileSystem):  # a filesystem that declares hflush, as HDFS does
        protocol = "hflushtest"
        supports_hflush = True

    storage = Storage.backend_for(HflushFS())
    assert isinstance(storage, FlushableStorage)
    assert storage.supports_flush and storage.supports_rename and not storage.is_object_store


@pytest.mark.s3
def test_s3_backend_operations(s3_warehouse: S3Warehouse) -> None:
    storage, root = _s3(s3_warehouse)
    assert isinstance(storage, ObjectStorage)
    assert not storage.supports_flush and storage.is_object_store
    d = storage.join(root, "t", "delta_1_1")
    storage.makedirs(d)  # object stores: nothing to create
    assert not storage.exists(d)
    with pytest.raises(FileNotFoundError):
        storage.list_dir(d)
    f = storage.join(d, "bucket_00000")
    with storage.create(f) as out:
        out.write(b"hello ")
        storage.durable_flush(out)
        out.write(b"world")
        assert not storage.exists(f)  # an object appears only when closed, whole
    assert storage.exists(f) and not storage.is_dir(f) and storage.is_dir(d)
    assert storage.size(f) == 11
    assert storage.read_bytes(f) == b"hello world"
    assert storage.read_bytes(f, length=5) == b"hello"
    with storage.open_read(f) as r:
        assert r.read(3) == b"hel"
    assert storage.write_bytes_if_absent(storage.join(d, "_orc_acid_version"), b"2")
    assert not storage.write_bytes_if_absent(storage.join(d, "_orc_acid_version"), b"x")
    assert storage.read_bytes(storage.join(d, "_orc_acid_version")) == b"2"
    assert [e.name for e in storage.list_dir(d)] == ["_orc_acid_version", "bucket_00000"]
    assert [e.name for e in storage.list_dir(storage.join(root, "t"))] == ["delta_1_1"]
    assert storage.list_dir(storage.join(root, "t"))[0].is_dir
    assert [e.name for e in storage.list_tree(root)] == ["_orc_acid_version", "bucket_00000"]
    with pytest.raises(FileExistsError):  # create(overwrite=False) on an existing object
        with storage.create(f) as out:
            out.write(b"other")
    assert storage.read_bytes(f) == b"hello world"
    with storage.create(f, overwrite=True) as out:
        out.write(b"replaced")
    assert storage.read_bytes(f) == b"replaced"
    storage.truncate(f, 3)
    assert storage.read_bytes(f) == b"rep"
    moved = storage.join(root, "q", "bucket_00000")
    storage.rename(f, moved)
    assert not storage.exists(f) and storage.read_bytes(moved) == b"rep"
    storage.delete(f)  # missing: not an error
    storage.delete(storage.join(root, "q"), recursive=True)
    assert not storage.exists(moved)


@pytest.mark.s3
def test_s3_delete_many_deletes_in_bulk(s3_warehouse: S3Warehouse) -> None:
    storage, root = _s3(s3_warehouse)
    paths = [storage.join(root, "d", f"f{i:04d}") for i in range(1005)]  # two requests
    client = _client(s3_warehouse)

    def put(p: str) -> None:
        _, key, _ = storage.fs.split_path(p)
        client.put_object(Bucket=s3_warehouse.bucket, Key=key, Body=b"x")

    with ThreadPoolExecutor(8) as pool:  # (only the set-up: 1,005 objects)
        list(pool.map(put, paths))
    keep = storage.join(root, "keep")
    storage.write_bytes_if_absent(keep, b"k")
    storage.delete_many([*paths, storage.join(root, "missing")])
    assert [e.path for e in storage.list_tree(root)] == [keep]


@pytest.mark.s3
def test_s3_recursive_delete_takes_the_prefix_and_nothing_beside_it(
    s3_warehouse: S3Warehouse,
) -> None:
    storage, root = _s3(s3_warehouse)
    for name in ("delta_1_1/bucket_00000", "delta_1_1/sub/f", "delta_1_10/bucket_00000"):
        storage.write_bytes_if_absent(storage.join(root, name), b"x")
    storage.delete(storage.join(root, "delta_1_1"), recursive=True)
    assert [e.path for e in storage.list_tree(root)] == [
        storage.join(root, "delta_1_10/bucket_00000")
    ]
    storage.delete(storage.join(root, "nothing_here"), recursive=True)


@pytest.mark.s3
def test_s3_an_exception_inside_the_write_leaves_no_object_and_no_upload(
    s3_warehouse: S3Warehouse,
) -> None:
    opts = {**s3_warehouse.storage_options, "default_block_size": 5 * 2**20}
    storage, root = Storage.for_path(s3_warehouse.url, storage_options=opts)
    f = storage.join(root, "big")
    client = _client(s3_warehouse)
    with pytest.raises(RuntimeError, match="the caller failed"):
        with storage.create(f) as out:
            out.write(b"x" * (6 * 2**20))  # past one part: a multipart upload is under way
            uploads = client.list_multipart_uploads(Bucket=s3_warehouse.bucket)
            assert len(uploads.get("Uploads", [])) == 1
            raise RuntimeError("the caller failed")
    assert not storage.exists(f)
    uploads = client.list_multipart_uploads(Bucket=s3_warehouse.bucket)
    assert uploads.get("Uploads", []) == []


@pytest.mark.s3
def test_s3_discard_aborts_a_small_and_a_multipart_upload(s3_warehouse: S3Warehouse) -> None:
    opts = {**s3_warehouse.storage_options, "default_block_size": 5 * 2**20}
    storage, root = Storage.for_path(s3_warehouse.url, storage_options=opts)
    client = _client(s3_warehouse)
    for name, size in (("small", 100), ("big", 6 * 2**20)):
        out = storage.create(storage.join(root, name))
        out.write(b"y" * size)
        storage.discard(out)
        assert out.closed
        out.close()  # closing an abandoned file completes nothing
        assert not storage.exists(storage.join(root, name))
    uploads = client.list_multipart_uploads(Bucket=s3_warehouse.bucket)
    assert uploads.get("Uploads", []) == []


@pytest.mark.s3
@pytest.mark.parametrize("size", [1000, 6 * 2**20], ids=["put", "multipart"])
def test_s3_conditional_put_race_has_one_winner(s3_warehouse: S3Warehouse, size: int) -> None:
    """Two writers create the same object, both uploads in flight before either completes
    (an existence check at open would pass for both): the first to complete wins, the
    other gets FileExistsError, the object stays the winner's and no upload is left.

    (The completions are sequential: moto checks the condition and then stores, without a
    lock, so two truly simultaneous completions could both pass on moto; S3 itself is
    atomic there.)"""
    opts = {**s3_warehouse.storage_options, "default_block_size": 5 * 2**20}
    storage, root = Storage.for_path(s3_warehouse.url, storage_options=opts)
    path = storage.join(root, "delta_5_5", "bucket_00000")
    first, second = storage.create(path), storage.create(path)
    first.write(b"A" * size)
    second.write(b"B" * size)
    first.close()
    with pytest.raises(FileExistsError):
        second.close()
    assert second.closed
    assert storage.read_bytes(path) == b"A" * size
    uploads = _client(s3_warehouse).list_multipart_uploads(Bucket=s3_warehouse.bucket)
    assert uploads.get("Uploads", []) == []


@pytest.mark.s3
def test_s3_write_bytes_if_absent_loses_to_an_object_written_meanwhile(
    s3_warehouse: S3Warehouse,
) -> None:
    storage, root = _s3(s3_warehouse)
    path = storage.join(root, "marker")
    late = storage.create(path)  # opened while the object does not exist yet
    late.write(b"late")
    assert storage.write_bytes_if_absent(path, b"first")
    assert not storage.write_bytes_if_absent(path, b"again")
    with pytest.raises(FileExistsError):
        late.close()
    assert storage.read_bytes(path) == b"first"
