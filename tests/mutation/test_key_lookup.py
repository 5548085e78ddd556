"""A MERGE's key lookup (``read_rows(keys=...)``, ``acidstream.acid.key_lookup``) returns
exactly the rows the full read returns for those keys, and reads only the stripes and
row groups that can hold them (issue 30 item 4).

Tables with a compacted base of many row groups, delta files, a delete delta, an aborted
txn inside a delta's write-id range (validity checked), for each compression, with and
without ``orc.bloom.filter.columns``; keys present, deleted, absent inside and outside
the data's range, and null."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream import Table
from acidstream.acid.key_lookup import LookupCounts
from acidstream.acid.orc_row_groups import (
    BLOOM_FILTER,
    BLOOM_FILTER_UTF8,
    OrcBytes,
    OrcMeta,
    StripeReader,
)
from acidstream.acid.storage import Storage
from acidstream.compaction import Worker
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.mutation.target import Target, read_rows
from acidstream.txn.catalog import TableDef
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnStore
from tests.mutation.conftest import compact_major

STRIDE = 1_000
ROWS = 40_000  # ids 0, 2, 4, ... (even): odd ids are absent inside every group's range


def _make(store: TxnStore, name: str, params: dict[str, str]) -> TableDef:
    return store.create_table(
        TableDef(
            db="default",
            name=name,
            columns=(("id", "bigint"), ("v", "string"), ("x", "double"), ("d", "date")),
            bucket_cols=("id",),
            num_buckets=2,
            parameters={"transactional": "true", "orc.row.index.stride": str(STRIDE), **params},
        )
    )


def _rows(ids: np.ndarray) -> list[bytes]:
    return [
        json.dumps(
            {"id": int(i), "v": None if i % 7 == 0 else f"v{i}", "x": i / 3, "d": "2024-01-02"}
        ).encode()
        for i in ids
    ]


def _txns(store: TxnStore, name: str, batches: list[tuple[np.ndarray, bool]]) -> None:
    """One streaming batch of txns (one delta directory): each commits or aborts."""
    with StreamingConnection(
        f"default.{name}", record_writer=StrictJsonWriter(), store=store,
        # a small buffer flushes rows to the file as they come: an aborted txn's rows
        # stay in it, hidden by their write id only
        options=StreamingOptions(
            txns_per_batch=len(batches), housekeeping_interval_s=None, memory_limit_bytes=4096
        ),
    ) as c:  # fmt: skip
        for ids, commit in batches:
            c.begin_transaction()
            c.write_many(_rows(ids))
            if commit:
                c.commit_transaction()
            else:
                c.abort_transaction()


@pytest.fixture(params=["ZLIB", "NONE", "SNAPPY", "ZSTD"])
def compression(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("bloom", [False, True])
def test_lookup_equals_the_full_read_and_prunes(
    store: TxnStore, compression: str, bloom: bool
) -> None:
    params = {"orc.compress": compression}
    if bloom:
        params |= {"orc.bloom.filter.columns": "id", "orc.bloom.filter.fpp": "0.01"}
    _make(store, "kl", params)
    _txns(store, "kl", [(np.arange(0, ROWS, 2), True)])
    compact_major(store, "kl")
    # a delta batch of three txns, the middle one aborted: its write id is invalid
    # inside the delta's range, so the lookup must check validity there
    _txns(
        store,
        "kl",
        [
            (np.arange(ROWS, ROWS + 600, 2), True),
            (np.arange(ROWS + 1, ROWS + 601, 2), False),
            (np.arange(ROWS + 2_001, ROWS + 2_601, 2), True),
        ],
    )
    _txns(store, "kl", [(np.arange(ROWS + 5_000, ROWS + 5_100), True)])
    txn = store.open_txns(1, user="t", host="h")[0]
    try:
        t = Target.open(store, store.get_table("default", "kl"), txn)
        parts = t.partitions()
        full = read_rows(t, parts)
        assert full.num_rows == ROWS // 2 + 300 + 300 + 100
        rng = np.random.default_rng(3)
        keys = np.concatenate(
            [
                # half even (present), half odd; in the first tenth of the ids, so in
                # the first row group or two of each base file (of ten)
                rng.choice(ROWS // 10, 40, replace=False),
                [ROWS + 1, ROWS + 3, ROWS + 2_001, ROWS + 5_050],  # aborted, committed
                [-5, 10**9],  # outside every range
            ]
        )
        src = pa.table({"id": pa.array([*keys.tolist(), None], pa.int64())})
        for columns in (None, ["id"], ["d", "id"], ["v", "id"]):
            c = LookupCounts()
            got = read_rows(t, parts, columns=columns, keys=src, counts=c)
            want = read_rows(t, parts, columns=columns)
            want = want.filter(pc.field("id").isin(src.column("id").drop_null()))
            order = [("row__id", "ascending")]
            assert got.schema == want.schema
            assert got.sort_by(order).equals(want.sort_by(order)), columns
            # the base has ROWS / 2 / 2 rows per bucket file: ten row groups, of which
            # those holding no key are not read
            assert c.groups_read < c.groups, c.text()
            assert c.stripes_pruned > 0, c.text()  # delta files hold none of most keys
        got_ids = sorted(read_rows(t, parts, keys=src).column("id").to_pylist())
        present = {int(k) for k in keys if (0 <= k < ROWS and k % 2 == 0)}
        present |= {
            int(k) for k in keys if k >= ROWS and int(k) in set(full.column("id").to_pylist())
        }
        assert got_ids == sorted(present)
        assert ROWS + 2_001 in present and ROWS + 5_050 in present and ROWS + 1 not in present
        # one key at a time equal to the min or the max of a row group (the first and
        # last row of each of the first two groups of every file): each is found
        rid = pc.struct_field(full.column("row__id"), "rowid")
        edge = pc.is_in(pc.modulo(rid, STRIDE), value_set=pa.array([0, STRIDE - 1], pa.int64()))
        edges = full.filter(pc.and_(edge, pc.less(rid, 2 * STRIDE))).column("id").to_pylist()
        assert len(edges) >= 8
        for k in edges:
            one = read_rows(t, parts, columns=["id"], keys=pa.table({"id": pa.array([k])}))
            assert one.column("id").to_pylist() == [k]
        if bloom:
            # odd keys sit inside the base groups' min/max: only the filters rule them out
            odd = pa.table({"id": pa.array(np.arange(1, ROWS, 2)[::37], pa.int64())})
            c = LookupCounts()
            assert read_rows(t, parts, keys=odd, counts=c).num_rows == 0
            assert c.prune.by_bloom > 0, c.text()
    finally:
        store.abort_txn(txn)


def test_lookup_sees_delete_events(store: TxnStore, handle: Callable[[str], Table]) -> None:
    """Rows deleted by a committed DELETE are not returned; rows of the same groups are."""
    _make(store, "kd", {})
    _txns(store, "kd", [(np.arange(0, 4_000), True)])
    compact_major(store, "kd")
    res = handle("kd").delete("id % 3 = 0")
    assert res.rows_deleted == 1_334
    txn = store.open_txns(1, user="t", host="h")[0]
    try:
        t = Target.open(store, store.get_table("default", "kd"), txn)
        src = pa.table({"id": pa.array(np.arange(0, 4_000, 5), pa.int64())})
        got = read_rows(t, t.partitions(), columns=["id"], keys=src)
        want = sorted(i for i in range(0, 4_000, 5) if i % 3)
        assert sorted(got.column("id").to_pylist()) == want
    finally:
        store.abort_txn(txn)


def _bloom_columns(path: str) -> set[int]:
    """The column ids with a bloom filter in every stripe of an ORC file."""
    storage, _ = Storage.for_path(path)
    data = OrcBytes(storage, path, length=os.path.getsize(path))
    try:
        meta = OrcMeta.of(data.tail())
        found: set[int] | None = None
        for s in range(len(meta.stripes)):
            streams = StripeReader(data, meta, s).streams
            cols = {c for c, k in streams if k in (BLOOM_FILTER, BLOOM_FILTER_UTF8)}
            found = cols if found is None else found & cols
        return found or set()
    finally:
        data.close()


def test_every_writer_puts_bloom_filters_on_the_columns_the_table_names(
    store: TxnStore, handle: Callable[[str], Table], warehouse: str
) -> None:
    """``orc.bloom.filter.columns``: streaming deltas, the major and minor compactors,
    and a MERGE's and an UPDATE's new row versions all carry the filters (Hive writes
    none into delete deltas: their ``row`` is null)."""
    _make(store, "kb", {"orc.bloom.filter.columns": "id,v"})
    _txns(store, "kb", [(np.arange(0, 3_000), True)])
    compact_major(store, "kb")  # major: a base
    _txns(store, "kb", [(np.arange(3_000, 3_500), True)])
    _txns(store, "kb", [(np.arange(3_500, 4_000), True)])
    q = CompactionQueue(store)
    q.request("default", "kb", major=False)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r", out
    src = pa.table({"id": pa.array([5, 3_600, 9_000], pa.int64()), "v": ["a", "b", "c"]})
    t = handle("kb")
    r = (
        t.merge(src, on=["id"])
        .when_matched_update(set={"v": "src.v"})
        .when_not_matched_insert(values={"id": "src.id", "v": "src.v"})
        .execute()
    )
    assert (r.rows_updated, r.rows_inserted) == (2, 1)
    assert t.update(set={"x": "x + 1"}, where="id = 7").rows_updated == 1
    root = Path(warehouse) / "kb"
    kinds: dict[str, int] = {}
    for f in sorted(root.rglob("bucket_*")):
        if f.name.endswith("_flush_length"):
            continue
        d = f.parent.name
        kind = "delete" if d.startswith("delete_delta") else d.split("_")[0]
        meta_cols = _bloom_columns(str(f))
        storage, _ = Storage.for_path(str(f))
        data = OrcBytes(storage, str(f), length=f.stat().st_size)
        meta = OrcMeta.of(data.tail())
        data.close()
        want = {meta.column_id(["row", "id"]), meta.column_id(["row", "v"])}
        if kind == "delete":
            assert not meta_cols & want, f
        else:
            assert want <= meta_cols, (f, meta_cols)
        kinds[kind] = kinds.get(kind, 0) + 1
    # the base, the minor compaction's delta, the MERGE's and UPDATE's deltas, and
    # their delete deltas were all looked at
    assert kinds.get("base") and kinds.get("delta", 0) >= 3 and kinds.get("delete"), kinds


def test_string_and_date_keys_of_two_columns(store: TxnStore) -> None:
    """A two-column key (string, date): both columns prune (string min/max, dates as
    days), strings are decoded from the row groups (dictionary and direct), and only rows
    whose two columns both hold key values are returned."""
    store.create_table(
        TableDef(
            db="default",
            name="ks",
            columns=(("k", "string"), ("d", "date"), ("n", "int")),
            parameters={
                "transactional": "true",
                "orc.row.index.stride": str(STRIDE),
                "orc.bloom.filter.columns": "k",  # string keys asked of bloom filters too
            },
        )
    )
    n = 8_000
    days = [(np.datetime64("2024-01-01") + int(i // 100)).astype(str) for i in range(n)]
    recs = [json.dumps({"k": f"key-{i:05d}", "d": days[i], "n": i % 13}).encode() for i in range(n)]
    with StreamingConnection(
        "default.ks", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        c.begin_transaction()
        c.write_many(recs)
        c.commit_transaction()
    compact_major(store, "ks")
    txn = store.open_txns(1, user="t", host="h")[0]
    try:
        t = Target.open(store, store.get_table("default", "ks"), txn)
        parts = t.partitions()
        picks = [5, 6, 4_321, 7_999]  # row groups 0 and 4 hold the returned ones
        src = pa.table(
            {
                "k": pa.array([f"key-{i:05d}" for i in picks] + ["key-99999", None]),
                "d": pa.array(
                    [days[i] for i in picks[:-1]] + ["1999-01-01", days[3], days[0]]
                ).cast(pa.date32()),
            }
        )
        c2 = LookupCounts()
        got = read_rows(t, parts, keys=src, counts=c2)
        full = read_rows(t, parts)
        want = full.filter(
            pc.field("k").isin(src.column("k").drop_null())
            & pc.field("d").isin(src.column("d").drop_null())
        )
        order = [("row__id", "ascending")]
        assert got.sort_by(order).equals(want.sort_by(order))
        # key-07999 comes with 1999-01-01, and its own date is no key's: not returned
        assert sorted(got.column("k").to_pylist()) == [f"key-{i:05d}" for i in picks[:-1]]
        assert (c2.groups_read, c2.groups, c2.stripes_whole) == (2, 8, 0), c2.text()
    finally:
        store.abort_txn(txn)


def _base_table(store: TxnStore, name: str) -> None:
    """A compacted base without bloom filters: 2 bucket files of some 10,000 sorted even
    ids, ten or eleven row groups each."""
    _make(store, name, {"orc.compress": "ZLIB"})
    _txns(store, name, [(np.arange(0, ROWS, 2), True)])
    compact_major(store, name)


def test_keys_spread_over_a_stripe_read_it_whole_without_its_row_index(
    store: TxnStore,
) -> None:
    """Keys in 7 of the first 9 row groups of every base stripe, 100 of them per group: the stripe
    is read whole (over a quarter of its rows are candidates) and, the keys being dense
    and spread over its [min, max], its row index is not asked first (no group is ruled
    out by min/max); the rows returned are still exactly the keys' rows."""
    _base_table(store, "kd")
    txn = store.open_txns(1, user="t", host="h")[0]
    try:
        t = Target.open(store, store.get_table("default", "kd"), txn)
        parts = t.partitions()
        full = read_rows(t, parts)
        group = pc.divide(pc.struct_field(full.column("row__id"), "rowid"), STRIDE)
        in_groups = pc.is_in(group, value_set=pa.array([0, 1, 2, 4, 5, 7, 8], pa.int64()))
        ids = full.filter(in_groups).column("id").to_numpy()[::10]
        src = pa.table({"id": pa.array(np.concatenate([ids, [-3, 10**9]]), pa.int64())})
        c = LookupCounts()
        got = read_rows(t, parts, keys=src, counts=c)
        want = full.filter(pc.field("id").isin(src.column("id")))
        order = [("row__id", "ascending")]
        assert got.sort_by(order).equals(want.sort_by(order))
        assert got.num_rows == len(ids)
        assert c.stripes_whole == 2 and c.groups_read == c.groups >= 20, c.text()
        assert c.prune.by_stats == 0, c.text()  # the row index was not read
    finally:
        store.abort_txn(txn)


def test_many_keys_in_one_corner_of_a_stripe_still_ask_the_row_index(store: TxnStore) -> None:
    """As many keys, all in the ids of each file's first row group: the row index rules
    the other groups out and only the first (or two) are decoded (the dense-stripe shortcut does not
    take clustered keys)."""
    _base_table(store, "kc")
    txn = store.open_txns(1, user="t", host="h")[0]
    try:
        t = Target.open(store, store.get_table("default", "kc"), txn)
        parts = t.partitions()
        full = read_rows(t, parts)
        rid = pc.struct_field(full.column("row__id"), "rowid")
        ids = full.filter(pc.less(rid, STRIDE)).column("id").to_numpy()
        src = pa.table({"id": pa.array(ids, pa.int64())})
        c = LookupCounts()
        got = read_rows(t, parts, keys=src, counts=c)
        assert sorted(got.column("id").to_pylist()) == sorted(ids.tolist())
        # each file's first group, and the second where the other file's first-group
        # ids reach into it (the buckets interleave the ids)
        assert c.stripes_whole == 0 and 2 <= c.groups_read <= 4, c.text()
        assert c.prune.by_stats == c.groups - c.groups_read >= 16, c.text()
    finally:
        store.abort_txn(txn)


def test_sorted_rows_are_matched_by_looking_the_keys_up_in_them() -> None:
    """``_sorted_hits`` (rows sorted by key: a compacted base) marks exactly the rows
    equal to a key, runs of equal rows included, and declines unsorted rows."""
    from acidstream.acid.key_lookup import _sorted_hits

    rng = np.random.default_rng(7)
    vals = np.sort(rng.integers(-50, 5_000, 20_000))  # duplicates: runs of equal rows
    keys = np.unique(rng.integers(-100, 6_000, 700))  # some below, inside, above
    got = _sorted_hits(vals, keys)
    assert got is not None
    assert np.array_equal(got, np.isin(vals, keys))
    assert got.any() and not got.all()
    assert not _sorted_hits(vals, np.array([10**9], np.int64)).any()  # type: ignore[union-attr]
    assert _sorted_hits(vals[::-1].copy(), keys) is None
