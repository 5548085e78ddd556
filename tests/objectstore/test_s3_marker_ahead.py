"""A new delta's ``_orc_acid_version`` marker on S3 is PUT while the delta's file is encoded
and uploaded (``ObjectStorage.write_bytes_if_absent_soon``), not before: a commit waits for
one round trip, not two in a row. The file's close waits for the marker, so the metastore
commit, which comes after the close, never finds a delta without it; a failure of either PUT
fails the commit and aborts its txn.

The proxy in front of moto holds or fails the requests whose target names a delta's file
(``tests/objectstore/throttle_proxy.py``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

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
from tests.plugins.s3_fixture import S3Warehouse

pytestmark = pytest.mark.s3

HOLD_S = 2.0  # each held request's extra round trip: far above a commit's own time


@pytest.fixture
def metastore(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/metastore.db"


@pytest.fixture
def proxy(s3_warehouse: S3Warehouse) -> Iterator[ThrottleProxy]:
    p = ThrottleProxy(s3_warehouse.server.endpoint)
    try:
        yield p
    finally:
        p.stop()


def _through(proxy: ThrottleProxy, wh: S3Warehouse) -> dict[str, object]:
    return {**wh.storage_options, "endpoint_url": proxy.endpoint}


def _delta_files(location: str, wh: S3Warehouse) -> list[str]:
    storage, root = Storage.for_path(location, storage_options=wh.storage_options)
    return sorted(f.path[len(root) + 1 :] for f in storage.list_tree(root))


def _states(metastore: str) -> list[TxnState]:
    with open_store(metastore) as s:
        return [x.state for x in s.show_txns()]


def test_the_marker_and_the_bucket_file_are_put_at_once(
    s3_warehouse: S3Warehouse, metastore: str, proxy: ThrottleProxy
) -> None:
    """Both PUTs of a commit's new delta held ``HOLD_S`` each: the commit takes about one
    hold, not two (one after the other it took two), and both objects are there after it."""
    wh = s3_warehouse
    location = create_events_table(metastore, wh)
    with events_connection(metastore, wh, _through(proxy, wh)) as conn:
        commit_ids(conn, range(0, 10))  # the process's first commit: s3fs's session and so on
        proxy.configure(hold_match="/delta_", hold_s=HOLD_S, reset_counts=True)
        t0 = time.monotonic()
        commit_ids(conn, range(10, 20))
        elapsed = time.monotonic() - t0
        stats = proxy.configure(hold_match="", hold_s=0.0)
    assert stats["forwarded"] == 2, stats  # the marker's PUT and the bucket file's
    assert HOLD_S <= elapsed < 1.75 * HOLD_S, elapsed
    files = _delta_files(location, wh)
    deltas = sorted({p.split("/")[0] for p in files})
    assert files == [f"{d}/{n}" for d in deltas for n in ("_orc_acid_version", "bucket_00000")]
    assert read_ids(metastore, wh) == list(range(20))


def test_a_commit_waits_for_a_slow_marker(
    s3_warehouse: S3Warehouse, metastore: str, proxy: ThrottleProxy
) -> None:
    """The marker's PUT alone held: the commit returns only once it landed."""
    wh = s3_warehouse
    location = create_events_table(metastore, wh)
    with events_connection(metastore, wh, _through(proxy, wh)) as conn:
        proxy.configure(hold_match="_orc_acid_version", hold_s=HOLD_S)
        t0 = time.monotonic()
        commit_ids(conn, range(5))
        elapsed = time.monotonic() - t0
        proxy.configure(hold_match="", hold_s=0.0)
    assert elapsed >= HOLD_S
    (delta,) = {p.split("/")[0] for p in _delta_files(location, wh)}
    assert _delta_files(location, wh) == [f"{delta}/_orc_acid_version", f"{delta}/bucket_00000"]
    assert _states(metastore) == [TxnState.COMMITTED]


@pytest.mark.parametrize("failing", ["_orc_acid_version", "bucket_00000"])
def test_a_failed_put_of_either_fails_the_commit_and_aborts_its_txn(
    s3_warehouse: S3Warehouse, metastore: str, proxy: ThrottleProxy, failing: str
) -> None:
    """Every PUT of one of the two objects answered 503 (the marker's is retried, then
    given up; the bucket file's upload is not retried): the commit raises a one-line
    StorageError, its txn is aborted, the committed rows stay; the writer is not left
    waiting on the other PUT."""
    wh = s3_warehouse
    create_events_table(metastore, wh)
    with events_connection(metastore, wh, _through(proxy, wh)) as conn:
        commit_ids(conn, range(0, 10))
        proxy.configure(fail_match=failing)
        try:
            with pytest.raises(StorageError) as info:
                commit_ids(conn, range(10, 20))
        finally:
            proxy.configure(fail_match="")
    assert "\n" not in str(info.value)
    assert read_ids(metastore, wh) == list(range(10))
    states = _states(metastore)  # (the read above is a txn of its own)
    assert states[:2] == [TxnState.COMMITTED, TxnState.ABORTED], states
    assert TxnState.OPEN not in states and states.count(TxnState.ABORTED) == 1, states


def test_a_file_closed_in_the_directory_waits_for_the_put_ahead(
    s3_warehouse: S3Warehouse, proxy: ThrottleProxy
) -> None:
    """The storage call itself: ``write_bytes_if_absent_soon`` returns before its PUT
    lands; closing a file created in the same directory waits for it, one in another
    directory does not."""
    storage, root = Storage.for_path(
        s3_warehouse.url, storage_options=_through(proxy, s3_warehouse)
    )
    proxy.configure(hold_match="/marked/_orc_acid_version", hold_s=HOLD_S)
    try:
        t0 = time.monotonic()
        write = storage.write_bytes_if_absent_soon(
            storage.join(root, "marked", "_orc_acid_version"), b"2"
        )
        assert time.monotonic() - t0 < HOLD_S / 2 and not write.done()
        other = storage.create(storage.join(root, "other", "bucket_00000"))
        other.write(b"rows")
        other.close()
        assert not write.done()  # another directory's file did not wait
        same = storage.create(storage.join(root, "marked", "bucket_00000"))
        same.write(b"rows")
        same.close()
        assert write.done() and write.result() is True
        assert time.monotonic() - t0 >= HOLD_S
    finally:
        proxy.configure(hold_match="", hold_s=0.0)
    assert storage.read_bytes(storage.join(root, "marked", "_orc_acid_version")) == b"2"
