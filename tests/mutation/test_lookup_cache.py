"""The key lookup's cache kept from one change batch to the next (``LookupCache``, what the
upsert sink passes to ``apply_changes``): the same rows and counts as without it, and
never a stale view: another writer's commit or a compaction between two batches is seen,
because each batch's txn still picks the files from its own snapshot. Both metastore
backends, real files."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from acidstream import Table
from acidstream.acid.lookup_cache import FileKeys, LookupCache, file_id
from acidstream.acid.table_name import TableName
from acidstream.mutation.changes import ChangeOptions, apply_changes
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert, compact_major
from tests.mutation.test_changes import (
    DELETE_COLUMN,
    events_table,
    fold,
    random_events,
    table_rows,
)

OPTS = ChangeOptions(key=("id",), ordering="ver")


def _upserts(ids: list[int], ver: int, *, delete: bool = False) -> pa.Table:
    return events_table(
        [
            {"id": i, "v": None if delete else f"v{ver}-{i}", "ver": ver, DELETE_COLUMN: delete,
             "__acid_partition": 0, "__acid_offset": n}
            for n, i in enumerate(ids)
        ]
    )  # fmt: skip


@pytest.mark.parametrize("layout", ["plain", "bucketed"])
def test_random_change_logs_with_a_cache_fold_into_the_table(
    store: TxnStore, make_table: MakeTable, handle: Callable[[str], Table], layout: str
) -> None:
    name = f"lc_{layout}"
    make_table(
        name, "id bigint, v string, ver bigint", buckets=("id", 3) if layout == "bucketed" else None
    )
    t = handle(name)
    cache = LookupCache()
    rng = random.Random(7)
    model: dict[int, tuple[str, int]] = {}
    offset = 0
    for _ in range(8):
        batch = random_events(rng, rng.randrange(1, 40), offset)
        offset += len(batch)
        before = dict(model)
        r = apply_changes(store, TableName("default", name), events_table(batch), OPTS, cache=cache)
        fold(model, batch, guard=False)
        assert table_rows(t) == sorted((k, v, ver) for k, (v, ver) in model.items())
        assert r.inserted == len(set(model) - set(before))
        assert r.deleted == len(set(before) - set(model))
    # The later batches' lookups were answered from the cache (files and delete deltas).
    assert cache.hits > 0 and len(cache) > 0


@pytest.mark.parametrize("buckets", [None, 2])
def test_another_writers_commit_between_two_batches_is_seen(
    store: TxnStore,
    make_table: MakeTable,
    handle: Callable[[str], Table],
    insert: Insert,
    buckets: int | None,
) -> None:
    """Batch 1 fills the cache; another writer (no cache) deletes key 10, updates key 20
    and a streaming writer adds key 500; batch 2 must find 10 absent (an insert) and the
    other writer's rows of 20 and 500 (updates, one row each)."""
    name = f"lc_other_{buckets}"
    make_table(
        name, "id bigint, v string, ver bigint", buckets=("id", buckets) if buckets else None
    )
    tn = TableName("default", name)
    insert(name, [{"id": i, "v": "seed", "ver": 0} for i in range(100)])
    cache = LookupCache()
    r1 = apply_changes(store, tn, _upserts(list(range(50)), 1), OPTS, cache=cache)
    assert (r1.inserted, r1.updated) == (0, 50)
    kept = len(cache)
    assert kept > 0

    apply_changes(store, tn, _upserts([10], 2, delete=True), OPTS)  # another writer
    apply_changes(store, tn, _upserts([20], 2), OPTS)
    insert(name, [{"id": 500, "v": "streamed", "ver": 0}])

    r2 = apply_changes(store, tn, _upserts([10, 20, 30, 500], 3), OPTS, cache=cache)
    assert (r2.inserted, r2.updated, r2.deleted) == (1, 3, 0)
    rows = {k: (v, ver) for k, v, ver in table_rows(handle(name))}
    assert len(table_rows(handle(name))) == 101  # no key twice
    for k in (10, 20, 30, 500):
        assert rows[k] == (f"v3-{k}", 3)
    assert rows[40] == ("v1-40", 1) and rows[60] == ("seed", 0)


def test_a_compaction_between_two_batches_is_seen(
    store: TxnStore, make_table: MakeTable, handle: Callable[[str], Table], insert: Insert
) -> None:
    """Batch 1 (cached) deletes keys 0-9 and updates 10-19; a major compaction folds
    them into a new base and the Cleaner removes the old files; batch 2 must read the new
    base: 0-9 are inserts, 10-19 updates of the compacted rows."""
    name = "lc_compact"
    make_table(name, "id bigint, v string, ver bigint", buckets=("id", 2))
    tn = TableName("default", name)
    insert(name, [{"id": i, "v": "seed", "ver": 0} for i in range(100)])
    cache = LookupCache()
    apply_changes(store, tn, _upserts(list(range(10)), 1, delete=True), OPTS, cache=cache)
    r1 = apply_changes(store, tn, _upserts(list(range(10, 20)), 1), OPTS, cache=cache)
    assert r1.updated == 10
    compact_major(store, name)

    r2 = apply_changes(store, tn, _upserts(list(range(20)), 2), OPTS, cache=cache)
    assert (r2.inserted, r2.updated) == (10, 10)
    rows = table_rows(handle(name))
    assert len(rows) == 100 and len({k for k, _, _ in rows}) == 100
    assert {k: (v, ver) for k, v, ver in rows if k < 20} == {k: (f"v2-{k}", 2) for k in range(20)}


def test_file_keys_find_every_row_of_a_key_in_file_order() -> None:
    keys = np.array([5, 3, 9, 3, 1], dtype=np.int64)  # unsorted, key 3 twice
    o = np.full(5, 7, dtype=np.int64)
    b = np.array([536870912] * 5, dtype=np.int64)
    r = np.arange(100, 105, dtype=np.int64)
    fk = FileKeys.build(keys, o, b, r, pa.int32())
    assert fk.order is not None and fk.o == 7 and fk.b == 536870912 and fk.r == 100
    ro, rb, rr, rk = fk.columns(np.array([3, 4, 9], dtype=np.int64))
    assert rr.tolist() == [101, 102, 103] and rk.to_pylist() == [3, 9, 3]
    assert rk.type == pa.int32() and ro.tolist() == [7, 7, 7] and rb.dtype == np.int32
    sparse = FileKeys.build(
        np.array([1, 2, 3]), np.array([1, 2, 2]), b[:3], np.array([0, 5, 6]), pa.int64()
    )
    assert isinstance(sparse.o, np.ndarray) and isinstance(sparse.r, np.ndarray)
    assert sparse.columns(np.array([2, 3]))[2].tolist() == [5, 6]
    assert sparse.columns(np.array([4]))[0].tolist() == []


def test_the_cache_keeps_within_its_bytes_by_lru() -> None:
    def entry(n: int) -> Any:
        return FileKeys.build(np.arange(n), np.zeros(n), np.zeros(n), np.arange(n), pa.int64())

    one = entry(1000).nbytes
    cache = LookupCache(max_bytes=int(2.5 * one))
    for i in range(3):
        cache.put_file_keys(file_id(f"/f{i}", 10, 10), "id", entry(1000))
    assert cache.file_keys(file_id("/f0", 10, 10), "id") is None  # the oldest went
    assert cache.file_keys(file_id("/f2", 10, 10), "id") is not None
    assert cache.nbytes <= cache.max_bytes
    # another length of the same path is another file
    assert cache.file_keys(file_id("/f2", 11, 11), "id") is None
