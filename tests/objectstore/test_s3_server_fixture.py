"""The moto S3 server fixture itself: a real HTTP server that s3fs reaches."""

from __future__ import annotations

import pytest

from acidstream.acid.storage import Storage
from tests.plugins.s3_fixture import S3Warehouse

pytestmark = pytest.mark.s3


def test_each_test_gets_an_empty_bucket_that_s3fs_writes_and_lists(
    s3_warehouse: S3Warehouse,
) -> None:
    storage, root = Storage.for_path(s3_warehouse.url, storage_options=s3_warehouse.storage_options)
    assert storage.protocol == "s3"
    assert storage.fs.ls(s3_warehouse.bucket) == []
    with storage.fs.open(root + "/probe.bin", "wb") as f:
        f.write(b"abc")
    assert [f.name for f in storage.list_dir(root)] == ["probe.bin"]
    assert storage.read_bytes(root + "/probe.bin") == b"abc"
