"""Random sequences of INSERT, DELETE, UPDATE and MERGE against a model (hypothesis): after
every step, the table read through ``Table.read`` equals a plain-Python model of SQL's
semantics. The table is partitioned (``ds``) and bucketed (``id``, 3 buckets), so updates
move rows between partitions and buckets. Both metastore backends."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acidstream import Table
from acidstream.acid.errors import CardinalityViolationError
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert, rows_of

Row = dict[str, Any]
_names = itertools.count()

ids = st.integers(0, 12)
dss = st.sampled_from(["a", "b", "c"])
rows = st.lists(
    st.fixed_dictionaries(
        {"id": ids, "v": st.sampled_from(["x", "y"]), "n": st.integers(0, 5), "ds": dss}
    ),
    min_size=1,
    max_size=6,
)
# (label, pyarrow predicate, the same predicate on a model row)
Pred = tuple[str, pc.Expression, Callable[[Row], bool]]


def _preds() -> st.SearchStrategy[Pred]:
    return st.one_of(
        ids.map(lambda k: (f"id={k}", pc.field("id") == k, lambda r, k=k: r["id"] == k)),
        st.integers(0, 5).map(lambda k: (f"n<{k}", pc.field("n") < k, lambda r, k=k: r["n"] < k)),
        dss.map(lambda d: (f"ds={d}", pc.field("ds") == d, lambda r, d=d: r["ds"] == d)),
        st.tuples(dss, st.integers(0, 5)).map(
            lambda p: (
                f"ds={p[0]} or n={p[1]}",
                (pc.field("ds") == p[0]) | (pc.field("n") == p[1]),
                lambda r, p=p: r["ds"] == p[0] or r["n"] == p[1],
            )
        ),
    )


# (label, SET for the API, the change on a model row)
Setter = tuple[str, dict[str, pc.Expression], Callable[[Row], Row]]
setters: st.SearchStrategy[Setter] = st.one_of(
    st.just(("n+1", {"n": pc.field("n") + 1}, lambda r: {**r, "n": r["n"] + 1})),
    st.just(("v=z", {"v": pc.scalar("z")}, lambda r: {**r, "v": "z"})),
    dss.map(lambda d: (f"ds={d}", {"ds": pc.scalar(d)}, lambda r, d=d: {**r, "ds": d})),
    st.just(("id+20", {"id": pc.field("id") + 20}, lambda r: {**r, "id": r["id"] + 20})),
)

ops = st.one_of(
    rows.map(lambda rs: ("insert", rs)),
    _preds().map(lambda p: ("delete", p)),
    st.tuples(setters, _preds()).map(lambda sp: ("update", sp)),
    st.tuples(
        st.lists(
            st.fixed_dictionaries(
                {"id": ids, "v": st.sampled_from(["m", "n"]), "n": st.integers(0, 5), "ds": dss,
                 "op": st.sampled_from(["u", "d", "i"])}
            ),
            max_size=5,
            unique_by=lambda r: r["id"],
        ),
        st.booleans(),  # with a WHEN MATCHED DELETE clause (op = 'd') first
        st.booleans(),  # with WHEN MATCHED UPDATE SET *
        st.booleans(),  # with WHEN NOT MATCHED INSERT * (op <> 'd')
    ).map(lambda m: ("merge", m)),
)  # fmt: skip


def _apply_merge(
    model: list[Row], src: list[Row], delete: bool, update: bool, ins: bool
) -> tuple[list[Row], int, int, int]:
    keys = {s["id"]: s for s in src}
    out, deleted, updated = [], 0, 0
    for r in model:
        s = keys.get(r["id"])
        if s is not None and delete and s["op"] == "d":
            deleted += 1
            continue
        if s is not None and update:
            updated += 1
            out.append({k: s[k] for k in ("id", "v", "n", "ds")})
            continue
        out.append(r)
    present = {r["id"] for r in model}
    new = [
        {k: s[k] for k in ("id", "v", "n", "ds")}
        for s in src
        if ins and s["id"] not in present and s["op"] != "d"
    ]
    return out + new, deleted, updated, len(new)


def _tuples(model: list[Row]) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["v"], r["n"], r["ds"]) for r in model)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(ops, min_size=1, max_size=6))
def test_random_mutations_equal_the_model(
    steps: list[tuple[str, Any]],
    make_table: MakeTable,
    insert: Insert,
    handle: Callable[[str], Table],
) -> None:
    name = f"m{next(_names)}"
    make_table(
        name, "id int, v string, n int", partitioned_by=[("ds", "string")], buckets=("id", 3)
    )
    t = handle(name)
    model: list[Row] = []
    for kind, arg in steps:
        if kind == "insert":
            insert(name, arg)
            model += [dict(r) for r in arg]
        elif kind == "delete":
            _, expr, pred = arg
            res = t.delete(expr)
            kept = [r for r in model if not pred(r)]
            assert res.rows_deleted == len(model) - len(kept)
            model = kept
        elif kind == "update":
            (_, values, change), (_, expr, pred) = arg
            res = t.update(values, expr)
            assert res.rows_updated == sum(pred(r) for r in model)
            model = [change(r) if pred(r) else r for r in model]
        else:
            src, delete, update, ins = arg
            if not (delete or update or ins):
                continue
            b = t.merge(pa.Table.from_pylist(src, schema=pa.schema(
                [("id", pa.int32()), ("v", pa.string()), ("n", pa.int32()), ("ds", pa.string()), ("op", pa.string())]
            )), on=["id"])  # fmt: skip
            if delete:
                b = b.when_matched_delete(condition=pc.field("src.op") == "d")
            if update:
                b = b.when_matched_update_all()
            if ins:
                b = b.when_not_matched_insert_all(condition=pc.field("src.op") != "d")
            # several target rows of one key are fine: the check is per target row
            mres = b.execute()
            model, deleted, updated, inserted = _apply_merge(model, src, delete, update, ins)
            assert (mres.rows_deleted, mres.rows_updated, mres.rows_inserted) == (
                deleted,
                updated,
                inserted,
            )
        assert rows_of(t.read(), ["id", "v", "n", "ds"]) == _tuples(model), (kind, arg)


def test_the_model_merge_raises_like_hive_on_duplicate_source_keys(
    make_table: MakeTable, insert: Insert, handle: Callable[[str], Table]
) -> None:
    """The model's sources have unique keys; the table refuses duplicates (cardinality)."""
    make_table(
        "dup", "id int, v string, n int", partitioned_by=[("ds", "string")], buckets=("id", 3)
    )
    insert("dup", [{"id": 1, "v": "x", "n": 0, "ds": "a"}])
    src = pa.table({"id": pa.array([1, 1], pa.int32()), "v": ["a", "b"]})
    with pytest.raises(CardinalityViolationError):
        handle("dup").merge(src, on=["id"]).when_matched_update_all().execute()
