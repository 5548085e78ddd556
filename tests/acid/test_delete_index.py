"""The shared delete index and the grouped small-file read (``acidstream.acid.delete_index``,
``acidstream.acid.file_group``) against a model.

Random histories of INSERTs, UPDATEs, DELETEs, MERGEs (three statements), multi-statement
txns that delete and update rows an earlier statement of the same txn wrote, and aborted
mutations are written as Hive 3 writes them (``tests/mutation_tables``), then read: with
ROW__IDs and without, projected, as of every committed write id (time travel), and on the
bounded-memory sort-merge path, which applies each file's qualifying deltas one by one
(Hive's ``isQualifiedDeleteDeltaForSplit``); every read must equal the model.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acidstream.acid import bucket_codec, file_group, reader
from acidstream.acid.delete_index import DeleteIndex
from acidstream.acid.delete_registry import is_qualified_delete_delta, key_table
from acidstream.acid.layout import ParsedDelta
from acidstream.acid.reader import read_path
from acidstream.txn.locks import DataOperationType
from acidstream.txn.store import open_store
from tests.mutation_tables import MutationTable, create_table, row, rows_of, values_of

B0 = bucket_codec.encode(0, 0)


def _delta(lo: int, hi: int, stmt: int) -> ParsedDelta:
    return ParsedDelta(lo, hi, stmt, is_delete=True)


def test_index_threshold_is_hives_qualifying_rule() -> None:
    """For every split (write id, statement) and delete delta, "rank >= threshold" is
    exactly ``is_qualified_delete_delta``."""
    deltas = [_delta(w, w, s) for w in (1, 2, 5) for s in (-1, 0, 1, 3)] + [_delta(3, 4, -1)]
    empty = key_table(pa.array([], pa.int64()), pa.array([], pa.int32()), pa.array([], pa.int64()))
    index = DeleteIndex({d: [empty] for d in deltas})
    order = sorted({(d.max_write_id, max(d.statement_id, 0)) for d in deltas})
    for w in range(0, 7):
        for s in (-1, 0, 1, 2, 3, 4):
            thr = index.threshold(w, s)
            for d in deltas:
                rank = order.index((d.max_write_id, max(d.statement_id, 0)))
                want = is_qualified_delete_delta(
                    split_min_write_id=w, split_statement_id=s, delete_delta=d
                )
                assert (rank >= thr) == want, (w, s, d)


def test_index_matches_by_newest_qualifying_delta_packed_and_per_group() -> None:
    """A key named by an old and a new delta counts for a split the new one qualifies for;
    the packed search over many groups and the per-group path agree with brute force."""
    rng = np.random.default_rng(7)
    deltas = [_delta(w, w, 0) for w in (2, 4, 6)]
    events: dict[ParsedDelta, list[pa.Table]] = {}
    truth: dict[tuple[int, int, int], int] = {}  # key -> newest delta write id
    for d in deltas:
        o = rng.integers(1, d.max_write_id + 1, 300)
        b = rng.choice([B0, bucket_codec.encode(1, 0), bucket_codec.encode(0, 2), -5], 300)
        r = rng.integers(0, 60, 300)
        events[d] = [key_table(pa.array(o), pa.array(b, pa.int32()), pa.array(r))]
        for k in zip(o.tolist(), b.tolist(), r.tolist(), strict=True):
            truth[k] = max(truth.get(k, 0), d.max_write_id)
    index = DeleteIndex(events)
    assert index.size == len(truth) and index.packs
    assert index.min_key == min(truth)  # as AcidKey tuples compare (the file-skip test)
    n = 2000
    o = rng.integers(1, 7, n)
    b = rng.choice([B0, bucket_codec.encode(1, 0), bucket_codec.encode(0, 2), B0 + 5, -5], n)
    r = rng.integers(-2, 70, n)
    for split in (0, 1, 2, 3, 4, 5, 6):
        thr = index.threshold(split, 0)
        want = np.array(
            [truth.get(k, -1) > split for k in zip(o.tolist(), b.tolist(), r.tolist(), strict=True)]
        )
        got = index.deleted(o, b.astype(np.int64), r, thr)
        assert (np.zeros(n, bool) if got is None else got).tolist() == want.tolist()
        # one group, dense rowIds from 0: the indexing path
        rows = np.arange(0, 70, dtype=np.int64)
        fast, mask = index.deleted_group(
            pa.array(np.full(70, 3)), pa.array(np.full(70, B0), pa.int32()), pa.array(rows), thr
        )
        want1 = [truth.get((3, B0, i), -1) > split for i in range(70)]
        assert fast and (np.zeros(70, bool) if mask is None else mask).tolist() == want1


def _history(t: MutationTable, data: st.DataObject) -> None:
    """Random statements over the table's live rows."""
    next_id = 0

    def new_rows(lo: int = 1, hi: int = 25) -> list[Any]:
        nonlocal next_id
        k = data.draw(st.integers(lo, hi))
        out = [row(i) for i in range(next_id, next_id + k)]
        next_id += k
        return out

    def some_live(most: int = 8) -> list[int]:
        ids = sorted(r[0] for r in t.visible().values())
        if not ids:
            return []
        return data.draw(st.lists(st.sampled_from(ids), max_size=most, unique=True))

    t.insert(new_rows(5, 40))
    for _ in range(data.draw(st.integers(1, 10))):
        op = data.draw(st.sampled_from(["insert", "update", "delete", "merge", "multi", "abort"]))
        if op == "insert":
            t.insert(new_rows())
        elif op == "update":
            ids = some_live()
            if ids:
                t.update({i: row(i, data.draw(st.integers(0, 9999))) for i in ids})
        elif op == "delete":
            ids = some_live()
            if ids:
                t.delete(ids)
        elif op == "merge":
            ids = some_live(12)
            cut = data.draw(st.integers(0, len(ids)))
            upd, dele = ids[:cut], ids[cut:]
            t.merge(inserts=new_rows(0, 10), updates={i: row(i, -i) for i in upd}, deletes=dele)
        elif op == "multi":
            old = t.keys_of(some_live(4))
            with t.txn(DataOperationType.UPDATE) as tx:
                new = tx.insert(new_rows(2, 8), stmt=0)
                tx.delete([new[0], *old[:1]], stmt=1)
                if len(new) > 1:
                    tx.update({new[1]: row(-1, 7)}, stmt=2)
                tx.delete(old[1:], stmt=2)
        else:
            ids = some_live()
            if ids:
                t.update({i: row(i, 1) for i in ids}, outcome="abort")


_COUNTER = iter(range(10**9))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), buckets=st.sampled_from([0, 2]))
def test_reads_after_random_mutations_equal_the_model(data: st.DataObject, buckets: int) -> None:
    with tempfile.TemporaryDirectory(prefix="acid-delete-index-") as tmp:
        store = open_store(f"sqlite:///{tmp}/m.db", warehouse=f"{tmp}/wh")
        try:
            t = MutationTable(store, create_table(store, f"t{next(_COUNTER)}", buckets=buckets))
            _history(t, data)
            assert rows_of(t.read()) == t.expected()
            for w in sorted(t.history):
                assert rows_of(t.read(as_of=w)) == t.expected(as_of=w), w
            # the sort-merge path applies each file's qualifying deltas: the same rows
            assert rows_of(t.read(delete_event_cap=0)) == t.expected()
            txns = store.get_valid_txns()
            wids = store.get_valid_write_ids(t.table.db, t.table.name, txns)
            plain = read_path(
                t.dir(), write_ids=wids, txns=txns, schema=t.schema, columns=["salary", "id"]
            )
            assert plain.schema.names == ["salary", "id"]
            assert values_of(plain) == sorted((r[3], r[1]) for r in t.expected())
        finally:
            store.close()


def test_small_files_are_read_in_groups_one_batch_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grouped path runs (one task for many files) and yields a batch per file, in
    file order, equal to the file-by-file read."""
    store = open_store(f"sqlite:///{tmp_path}/m.db", warehouse=str(tmp_path / "wh"))
    try:
        t = MutationTable(store, create_table(store, buckets=2))
        for k in range(6):
            t.insert([row(i) for i in range(10 * k, 10 * k + 10)])
        t.update({3: row(3, 33), 41: row(41, 4141)})
        t.delete([15, 52])
        groups: list[int] = []
        real = file_group.read_acid_files

        def counting(*a: Any, **kw: Any) -> Any:
            groups.append(len(a[1]))
            return real(*a, **kw)

        monkeypatch.setattr(reader, "read_acid_files", counting)
        batches = list(reader.iter_batches(t.dir(), include_row_id=True, schema=t.schema))
        assert groups and max(groups) > 1, groups
        monkeypatch.setattr(reader, "GROUP_FILE_MAX_BYTES", 0)  # every file alone
        groups.clear()
        one_by_one = list(reader.iter_batches(t.dir(), include_row_id=True, schema=t.schema))
        assert not groups
        assert [b.to_pylist() for b in batches] == [b.to_pylist() for b in one_by_one]
        assert rows_of(pa.concat_tables(batches)) == t.expected()
    finally:
        store.close()


def test_plain_read_equals_model_without_row_ids(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/m.db", warehouse=str(tmp_path / "wh"))
    try:
        t = MutationTable(store, create_table(store))
        t.insert([row(i) for i in range(20)])
        t.merge(inserts=[row(100)], updates={1: row(1, 5)}, deletes=[2])
        got = read_path(t.dir(), schema=t.schema)
        assert values_of(got) == sorted(r[1:] for r in t.expected())
    finally:
        store.close()
