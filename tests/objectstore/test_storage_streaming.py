"""A StreamingConnection on an ``s3://`` table (moto's server; the metastore a SQLite file
in tmp_path): a streaming file is one object per commit (no hflush on S3, so no side file),
and a store that vanishes mid-commit aborts that txn and leaves every committed row."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

from acidstream.acid.errors import StorageError
from acidstream.acid.storage import Storage
from acidstream.txn.store import TxnState, open_store
from tests.objectstore.s3_helpers import (
    commit_ids,
    create_events_table,
    events_connection,
    read_ids,
)
from tests.objectstore.throttle_proxy import ThrottleProxy
from tests.plugins.s3_fixture import ACCESS_KEY, REGION, SECRET_KEY, S3Warehouse

pytestmark = pytest.mark.s3


@pytest.fixture
def metastore(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/metastore.db"


@pytest.fixture
def proxy(s3_warehouse: S3Warehouse) -> Iterator[ThrottleProxy]:
    """The S3 server behind a proxy process the test can kill (the store vanishes for the
    writer while the server keeps every object)."""
    p = ThrottleProxy(s3_warehouse.server.endpoint)
    try:
        yield p
    finally:
        p.stop()


def _uploads(wh: S3Warehouse) -> list[Any]:
    client = boto3.client(
        "s3",
        endpoint_url=wh.server.endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    )
    uploads: list[Any] = client.list_multipart_uploads(Bucket=wh.bucket).get("Uploads", [])
    return uploads


def test_each_streaming_commit_is_its_own_object_without_side_files(
    s3_warehouse: S3Warehouse, metastore: str
) -> None:
    wh = s3_warehouse
    location = create_events_table(metastore, wh)
    with events_connection(metastore, wh, wh.storage_options) as conn:
        for n in range(3):
            commit_ids(conn, range(n * 10, n * 10 + 10))
    assert read_ids(metastore, wh) == list(range(30))
    storage, root = Storage.for_path(location, storage_options=wh.storage_options)
    files = [f.path[len(root) + 1 :] for f in storage.list_tree(root)]
    deltas = sorted({p.split("/")[0] for p in files})
    assert len(deltas) == 3 and all(d.startswith("delta_") for d in deltas), files
    # One bucket object (and the format marker) per delta, no _flush_length side file.
    assert sorted(files) == sorted(
        f"{d}/{name}" for d in deltas for name in ("_orc_acid_version", "bucket_00000")
    ), files
    assert _uploads(wh) == []


def test_the_store_gone_mid_upload_aborts_the_txn_and_keeps_committed_rows(
    s3_warehouse: S3Warehouse, metastore: str, proxy: ThrottleProxy
) -> None:
    """The third txn's object is big enough for a multipart upload; the store vanishes
    (the proxy process dies) while it receives the first part. The commit fails with a
    typed one-line error, the txn is aborted, and the two committed txns read back whole
    from the server."""
    wh = s3_warehouse
    create_events_table(metastore, wh)
    through_proxy = {
        **wh.storage_options,
        "endpoint_url": proxy.endpoint,
        "default_block_size": 5 * 2**20,
    }
    with events_connection(metastore, wh, through_proxy) as conn:
        commit_ids(conn, range(0, 100))
        commit_ids(conn, range(100, 200))
        conn.begin_transaction()
        rng = random.Random(7)
        conn.write_block(
            [
                b'{"id": %d, "msg": "%s"}' % (i, rng.randbytes(500).hex().encode())
                for i in range(200, 16200)
            ]
        )  # ~8 MB of incompressible text: more than one 5 MiB part
        proxy.configure(die_match="partNumber=1")
        with pytest.raises(StorageError) as info:
            conn.commit_transaction()
    assert proxy.proc.wait(timeout=10) == 1  # it did die mid-upload
    assert "\n" not in str(info.value)
    assert read_ids(metastore, wh) == list(range(200))  # read straight from the server
    with open_store(metastore) as s:
        states = [x.state for x in s.show_txns()]
    assert TxnState.OPEN not in states and states.count(TxnState.ABORTED) == 1
