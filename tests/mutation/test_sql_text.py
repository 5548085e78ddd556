"""Mutations written as SQL text in Hive's syntax (``acidstream.acid.sql_expr``): WHERE,
SET, MERGE's ``on`` join condition, WHEN conditions and values, qualified and unqualified
names; errors before any txn. Both metastore backends."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from acidstream import Table
from acidstream.acid.errors import ConfigError
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert, rows_of


@pytest.fixture
def p(make_table: MakeTable, insert: Insert, handle: Callable[[str], Table]) -> Table:
    """``default.p (id int, v string, price decimal(10,2))`` partitioned by ds: ids 0..5,
    ds a for even ids and b for odd, price = id + 0.5."""
    make_table("p", "id int, v string, price decimal(10,2)", partitioned_by=[("ds", "string")])
    insert(
        "p",
        [{"id": i, "v": f"v{i}", "price": f"{i}.50", "ds": "ab"[i % 2]} for i in range(6)],
    )
    return handle("p")


def test_sql_delete_and_update(p: Table) -> None:
    assert p.delete("id IN (1, 2) OR v LIKE 'v5'").rows_deleted == 3
    res = p.update(
        {"v": "concat(v, '!')", "price": "CAST(price * 2 AS decimal(10,2))"},
        "ds = 'a' AND price > '1.00'",
    )
    assert res.rows_updated == 1 and res.partitions == ("ds=a",)  # id 4 (id 0 is 0.50)
    assert rows_of(p.read(), ["id", "v"]) == [(0, "v0"), (3, "v3"), (4, "v4!")]
    assert str(dict(rows_of(p.read(), ["id", "price"]))[4]) == "9.00"


def test_sql_merge_with_a_join_condition(p: Table) -> None:
    src = pa.table(
        {
            "key": pa.array([0, 3, 9], pa.int32()),
            "name": ["zero", "three", "nine"],
            "op": ["d", "u", "i"],
        }
    )
    res = (
        p.merge(src, on="s.key = t.id", source_alias="s", target_alias="t")
        .when_matched_delete(condition="s.op = 'd'")
        .when_matched_update(set={"v": "concat(t.v, '-', s.name)"})
        .when_not_matched_insert(
            values={"id": "s.key", "v": "name", "price": "1.25", "ds": "'c'"},
            condition="op <> 'd'",
        )
        .execute()
    )
    assert (res.rows_deleted, res.rows_updated, res.rows_inserted) == (1, 1, 1)
    assert rows_of(p.read(), ["id", "v", "ds"]) == [
        (1, "v1", "b"), (2, "v2", "a"), (3, "v3-three", "b"), (4, "v4", "a"),
        (5, "v5", "b"), (9, "nine", "c"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.delete("nope = 1"), "nope"),
        (lambda t: t.delete("id +"), None),
        (lambda t: t.update({"id": "v"}), "'id'"),
        (lambda t: t.update({"v": "1"}, "id = 'x' AND"), None),
        (
            lambda t: (
                t.merge(pa.table({"id": [1]}), on="src.id < tgt.id").when_matched_delete().execute()
            ),
            "only equalities",
        ),
        (
            lambda t: (
                t.merge(pa.table({"id": [1]}), on="src.id = tgt.id")
                .when_matched_update(set={"v": "src.nope"})
                .execute()
            ),
            "nope",
        ),
    ],
)
def test_bad_sql_is_a_config_error_before_any_txn(
    p: Table, store: TxnStore, call: Callable[[Table], object], message: str | None
) -> None:
    n = len(store.show_txns())
    with pytest.raises(ConfigError, match=message):
        call(p)
    assert len(store.show_txns()) == n
