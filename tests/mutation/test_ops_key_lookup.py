"""DELETE and UPDATE find their rows with the key lookup when their predicate pins columns
to values (``col = literal``, ``col IN (...)`` conjuncts; issue 30 item 4): the table
equals a model of the statement afterwards, and only the row groups that can hold a key
are decoded. Predicates the terms cannot be taken from (``OR``) read as before.

The terms themselves (``acidstream.mutation.key_terms``) are checked on compiled SQL and
on pyarrow expressions, including those that must give none."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream import Table
from acidstream.acid import sql_expr
from acidstream.acid.key_lookup import LookupCounts
from acidstream.acid.table_name import TableName
from acidstream.compaction import Cleaner, Worker
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.mutation.key_terms import key_terms
from acidstream.mutation.ops import DeletePlan, UpdatePlan
from acidstream.mutation.results import MutationResult
from acidstream.mutation.run import run_mutation
from acidstream.mutation.target import row_schema
from acidstream.txn.catalog import TableDef
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.locks import DataOperationType
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert, rows_of

STRIDE = 1_000
ROWS = 20_000  # one base file of 20 row groups
DAY0 = dt.date(2024, 1, 1)

Row = dict[str, Any]


def _row(i: int) -> Row:
    v = None if i % 7 == 0 else ("x" if i % 3 == 0 else "y")
    return {"id": i, "k": f"key-{i:05d}", "v": v, "d": DAY0 + dt.timedelta(days=i // 100), "n": i}


def _make(store: TxnStore, name: str, partitioned: bool = False) -> list[Row]:
    """A table of ``ROWS`` rows compacted into a base (per partition ``p``: 'a' for even
    ids, 'b' for odd ones when ``partitioned``); its rows as the model starts them."""
    store.create_table(
        TableDef(
            db="default",
            name=name,
            columns=(("id", "bigint"), ("k", "string"), ("v", "string"), ("d", "date"), ("n", "int")),
            partition_keys=(("p", "string"),) if partitioned else (),
            parameters={"transactional": "true", "orc.row.index.stride": str(STRIDE)},
        )
    )  # fmt: skip
    rows = [_row(i) | ({"p": "ab"[i % 2]} if partitioned else {}) for i in range(ROWS)]
    with StreamingConnection(
        f"default.{name}", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        c.begin_transaction()
        c.write_many(json.dumps(r, default=str).encode() for r in rows)
        c.commit_transaction()
    q = CompactionQueue(store)
    for part in ("p=a", "p=b") if partitioned else (None,):
        q.request("default", name, partition=part, major=True)
        out = Worker(store, queue=q).run_once()
        assert out is not None and out.state == "r", out
    Cleaner(store, queue=q).run_once()
    return rows


def _run(
    store: TxnStore, name: str, statement: str, where: str | pc.Expression
) -> tuple[MutationResult, LookupCounts]:
    """The statement as ``Table.delete`` / ``Table.update`` run it (``SET n = n + 1000``
    for an UPDATE), with what its key lookup read."""
    schema = row_schema(store.get_table("default", name))
    plan: DeletePlan | UpdatePlan
    if statement == "delete":
        plan, op = DeletePlan(schema, where), DataOperationType.DELETE
    else:
        plan, op = UpdatePlan(schema, {"n": "n + 1000"}, where), DataOperationType.UPDATE
    res = run_mutation(
        store, TableName("default", name), operation=op, body=plan, kind=MutationResult
    )
    return res, plan.counts


def _model(rows: list[Row], statement: str, hit: Callable[[Row], bool]) -> list[Row]:
    if statement == "delete":
        return [r for r in rows if not hit(r)]
    return [r | {"n": r["n"] + 1000} if hit(r) else r for r in rows]


def _table_rows(rows: list[Row], names: list[str]) -> list[tuple[Any, ...]]:
    t = pa.table({n: [r[n] for r in rows] for n in names})
    return rows_of(t)


CASES: list[tuple[str, Callable[[Row], bool], bool]] = [
    # (predicate, the model's predicate, whether the key lookup is used)
    ("id = 5", lambda r: r["id"] == 5, True),
    ("id IN (3, 4, 4500, 99999)", lambda r: r["id"] in (3, 4, 4500), True),
    (
        "id IN (3, 6, 7, 14, 4500, 4501) AND v = 'x'",
        lambda r: r["id"] in (3, 6, 7, 14, 4500, 4501) and r["v"] == "x",
        True,
    ),
    ("k = 'key-01234'", lambda r: r["k"] == "key-01234", True),
    ("d = DATE '2024-01-05'", lambda r: r["d"] == dt.date(2024, 1, 5), True),
    ("id IN (10, 11) AND n > 10", lambda r: r["id"] in (10, 11) and r["n"] > 10, True),
    ("id = 5 OR id = 4500", lambda r: r["id"] in (5, 4500), False),
]


@pytest.mark.parametrize("statement", ["delete", "update"])
@pytest.mark.parametrize(("where", "hit", "lookup"), CASES, ids=[c[0] for c in CASES])
def test_statement_by_key_equals_the_model(
    store: TxnStore,
    handle: Callable[[str], Table],
    statement: str,
    where: str,
    hit: Callable[[Row], bool],
    lookup: bool,
) -> None:
    rows = _make(store, "ok")
    res, counts = _run(store, "ok", statement, where)
    touched = sum(1 for r in rows if hit(r))
    assert touched > 0
    assert (res.rows_deleted if statement == "delete" else res.rows_updated) == touched
    names = ["id", "k", "v", "d", "n"]
    assert rows_of(handle("ok").read(), names) == _table_rows(_model(rows, statement, hit), names)
    if lookup:
        # one base file of 20 row groups: the keys sit in one or two of them
        assert counts.files == 1 and counts.groups == ROWS // STRIDE, counts.text()
        assert 1 <= counts.groups_read <= 2 and counts.stripes_whole == 0, counts.text()
    else:
        assert counts.files == 0, counts.text()  # read as before: no lookup


def test_a_delete_of_a_few_keys_decodes_only_their_row_groups(
    store: TxnStore, handle: Callable[[str], Table], decoded: list[str]
) -> None:
    """The full reader decodes every row group of the stripe (the ``decoded`` spy sees its
    columns); a DELETE of a few keys decodes two row groups, never the whole stripe."""
    rows = _make(store, "dk")
    keys = [17, 18, 15_001]
    res, counts = _run(store, "dk", "delete", f"id IN ({', '.join(map(str, keys))})")
    assert res.rows_deleted == 3
    assert (counts.groups_read, counts.groups, counts.stripes_whole) == (2, 20, 0), counts.text()
    assert not [c for c in decoded if c.startswith("row.")], decoded
    # the same DELETE as an OR (no terms) reads the stripe whole: the spy sees it
    res2, counts2 = _run(store, "dk", "delete", "id = 19 OR id = 15002")
    assert res2.rows_deleted == 2 and counts2.files == 0
    assert "row.id" in decoded, decoded
    left = {r["id"] for r in rows} - {17, 18, 15_001, 19, 15_002}
    assert sorted(handle("dk").read().column("id").to_pylist()) == sorted(left)


@pytest.mark.parametrize("statement", ["delete", "update"])
def test_partition_terms_prune_partitions_and_data_terms_rows(
    store: TxnStore, handle: Callable[[str], Table], statement: str
) -> None:
    """``p = 'a'`` (a partition column: its directory) is no key term; ``id IN (...)``
    is, in the partition kept."""
    rows = _make(store, "pk", partitioned=True)
    res, counts = _run(store, "pk", statement, "p = 'a' AND id IN (4, 5, 6, 12001)")

    def hit(r: Row) -> bool:
        return r["p"] == "a" and r["id"] in (4, 5, 6, 12_001)

    assert (res.rows_deleted or res.rows_updated) == 2
    assert counts.files == 1 and counts.groups_read < counts.groups, counts.text()
    names = ["id", "k", "v", "d", "n", "p"]
    assert rows_of(handle("pk").read(), names) == _table_rows(_model(rows, statement, hit), names)


SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("i", pa.int32()),
        ("v", pa.string()),
        ("d", pa.date32()),
        ("c", pa.decimal128(10, 2)),
        ("x", pa.float64()),
        ("p", pa.string()),
    ]
)


def _terms(where: str | pc.Expression) -> dict[str, list[Any]]:
    expr = where if isinstance(where, pc.Expression) else sql_expr.compile_predicate(where, SCHEMA)
    return {k: sorted(v.to_pylist()) for k, v in key_terms(expr, SCHEMA, exclude=("p",)).items()}


@pytest.mark.parametrize(
    ("where", "want"),
    [
        ("id = 5", {"id": [5]}),
        ("5 = id", {"id": [5]}),
        ("id IN (3, 1, 2, 3)", {"id": [1, 2, 3]}),
        ("i IN (1, 30)", {"i": [1, 30]}),  # an int column compared as bigint
        ("v = 'x' AND id IN (1, 2) AND x > 0", {"v": ["x"], "id": [1, 2]}),
        ("d = '2024-01-02'", {"d": [dt.date(2024, 1, 2)]}),
        ("p = 'a' AND id = 3", {"id": [3]}),  # partition columns prune by directory
        ("id IN (1, 2) AND id = 2", {"id": [2]}),  # the term with fewer values
        (pc.field("id").isin([7, 8]), {"id": [7, 8]}),
        (
            (pc.field("v") == "a") & (pc.scalar(np.int64(9)) == pc.field("id")),
            {"v": ["a"], "id": [9]},
        ),
        # none: OR, NOT, NULL, out of the column's range, value-changing casts, float,
        # decimal, arithmetic
        ("id = 1 OR id = 2", {}),
        ("NOT id = 5", {}),
        ("id IN (1, NULL)", {}),
        ("id = NULL", {}),
        ("i = 3000000000", {}),
        ("id = 5.0", {}),
        ("x = 1.0", {}),
        ("c = 1.5", {}),
        ("id + 1 = 5", {}),
        (pc.field("id").isin([1, None]), {}),
        (pc.field("id").cast(pa.string()) == "5", {}),
    ],
    ids=str,
)
def test_key_terms(where: str | pc.Expression, want: dict[str, list[Any]]) -> None:
    assert _terms(where) == want


def test_key_terms_of_ten_thousand_keys_are_one_array() -> None:
    """The benchmark's ``id IN (<10,000 keys>)``: one term of every key."""
    keys = np.random.default_rng(1).choice(10**7, 10_000, replace=False)
    got = _terms(f"id IN ({', '.join(map(str, keys))})")
    assert got == {"id": sorted(int(k) for k in keys)}


def test_a_bucketed_table_reads_only_the_buckets_of_the_keys(
    make_table: MakeTable, insert: Insert, store: TxnStore, handle: Callable[[str], Table]
) -> None:
    """Bucketed on ``id``: ``id IN (...)`` reads the files of the buckets its keys hash
    to; a row whose UPDATE set its id moved to its new id's bucket and is found there."""
    make_table("bk", "id bigint, v string", buckets=("id", 8))
    insert("bk", [{"id": i, "v": f"v{i}"} for i in range(400)])
    model = {i: f"v{i}" for i in range(400)}
    _, full = _run(store, "bk", "delete", "id = 1 OR id = 2")  # no terms: every bucket
    del model[1], model[2]
    assert full.files == 0
    res, counts = _run(store, "bk", "delete", "id IN (5, 6)")
    assert res.rows_deleted == 2 and 1 <= counts.files <= 2, counts.text()
    del model[5], model[6]
    t = handle("bk")
    assert t.update(set={"id": "id + 1000"}, where="id = 7").rows_updated == 1
    model[1007] = model.pop(7)
    res, counts = _run(store, "bk", "delete", "id = 1007")
    # that bucket's file of the insert and of the UPDATE's delta; of nine data files
    assert res.rows_deleted == 1 and counts.files == 2, counts.text()
    del model[1007]
    assert rows_of(t.read(), ["id", "v"]) == sorted(model.items())
