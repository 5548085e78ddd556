"""Hive's list-bucketing pruner (``acidstream.acid.list_bucketing_prune``): the rules one by one, and
by hypothesis that no directory holding a row the filter selects is ever skipped."""

from __future__ import annotations

import datetime
import itertools
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.hive_text import hive_text
from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME, SkewedInfo
from acidstream.acid.list_bucketing_prune import (
    MAX_CELLS,
    And,
    Eq,
    Expr,
    In,
    LbSelection,
    Not,
    Opaque,
    Or,
    from_predicates,
    select_dirs,
    text_of_schema,
)
from acidstream.acid.schema import TableSchema

SCHEMA = TableSchema.parse("x int, y string, z bigint, f double, b boolean, d date, m decimal(6,2)")
TEXT = text_of_schema(SCHEMA)
D = DEFAULT_DIR_NAME
D2 = f"{D}/{D}"


def skew(cols: tuple[str, ...], values: list[tuple[str, ...]], **kw: Any) -> SkewedInfo:
    return SkewedInfo(col_names=cols, col_values=tuple(values), stored_as_dirs=True, **kw)


X = skew(("x",), [("6",), ("20",)])
XY = skew(("x", "y"), [("1", "a"), ("2", "b")])


def kept(info: SkewedInfo, expr: Expr) -> set[str] | None:
    sel = select_dirs(info, expr, TEXT)
    return None if sel is None else set(sel.kept)


@pytest.mark.parametrize(
    ("expr", "dirs"),
    [
        (Eq("x", 6), {"x=6"}),
        (Eq("x", 7), {D}),  # declared cells false, "other" unknown
        (In("x", (6, 20)), {"x=6", "x=20"}),
        (In("x", (6, 7)), {"x=6", D}),
        (Not(Eq("x", 6)), {"x=20", D}),
        (Not(In("x", (6, 20))), {D}),
        (Or((Eq("x", 6), Eq("z", 1))), {"x=6", "x=20", D}),  # z is not skewed: unknown
        (And((Eq("x", 6), Eq("z", 1))), {"x=6"}),
        (Opaque("x > 5"), {"x=6", "x=20", D}),
        (Not(Opaque("x > 5")), {"x=6", "x=20", D}),
        (Eq("x", "6"), {"x=6"}),  # a string that casts exactly to the column's int
        (Eq("x", 6.0), {"x=6"}),
        (Eq("x", 6.5), {"x=6", "x=20", D}),  # does not cast exactly: unknown
        (Eq("x", True), {"x=6", "x=20", D}),  # a boolean is not an int here
        (Eq("x", None), {"x=6", "x=20", D}),
    ],
)
def test_one_skewed_column(expr: Expr, dirs: set[str]) -> None:
    assert kept(X, expr) == dirs


def test_nothing_selected_is_a_full_scan() -> None:
    assert kept(X, And((Eq("x", 6), Eq("x", 20)))) is None
    assert kept(X, And((Eq("x", 6), Not(Eq("x", 6))))) is None


def test_two_columns_default_dir_kept_unless_every_other_cell_is_false() -> None:
    # (1, b) and (1, other) are not declared tuples: rows like them live in the default dir.
    assert kept(XY, Eq("x", 1)) == {"x=1/y=a", D2}
    assert kept(XY, And((Eq("x", 1), Eq("y", "a")))) == {"x=1/y=a"}
    assert kept(XY, Or((And((Eq("x", 1), Eq("y", "a"))), And((Eq("x", 2), Eq("y", "b")))))) == {
        "x=1/y=a",
        "x=2/y=b",
    }
    assert kept(XY, And((Eq("x", 1), Eq("y", "b")))) == {D2}
    assert kept(XY, Eq("y", "c")) == {D2}
    assert kept(XY, Not(Eq("y", "a"))) == {"x=2/y=b", D2}


def test_not_list_bucketed_means_no_pruning() -> None:
    assert select_dirs(skew(("x",), []), Eq("x", 6), TEXT) is None
    declared_only = SkewedInfo(col_names=("x",), col_values=(("6",),), stored_as_dirs=False)
    assert select_dirs(declared_only, Eq("x", 6), TEXT) is None


def test_location_map_and_escaped_names() -> None:
    info = skew(
        ("y",),
        [("a/b",), ("c",)],
        location_map={("c",): "custom", ("HIVE_DEFAULT_LIST_BUCKETING_KEY",): "other"},
    )
    sel = select_dirs(info, Eq("y", "a/b"), TEXT)
    assert sel is not None and sel.kept == {"y=a%2Fb"}
    sel = select_dirs(info, Eq("y", "c"), TEXT)
    assert sel is not None and sel.kept == {"custom"}
    sel = select_dirs(info, Eq("y", "q"), TEXT)
    assert sel is not None and sel.kept == {"other"}
    assert sel.known == {"y=a%2Fb", "custom", "other"}


@pytest.mark.parametrize(
    ("col", "declared", "value", "expected"),
    [
        ("b", "true", True, {"b=true"}),
        ("b", "true", False, {D}),
        ("d", "2024-01-31", datetime.date(2024, 1, 31), {"d=2024-01-31"}),
        ("m", "1.5", Decimal("1.50"), {"m=1.5"}),
        ("m", "1.5", Decimal("1.555"), None),  # does not fit decimal(6,2): unknown everywhere
        ("f", "0.0", 0.0, None),  # -0.0 = 0.0 but their texts differ: never pruned
        ("z", "5", 5, {"z=5"}),
    ],
)
def test_values_compare_as_the_writers_text(
    col: str, declared: str, value: Any, expected: set[str] | None
) -> None:
    info = skew((col,), [(declared,)])
    got = kept(info, Eq(col, value))
    every = {f"{col}={declared}", D}
    assert got == (every if expected is None else expected)


def test_too_many_cells_is_a_full_scan() -> None:
    n = int(MAX_CELLS**0.5) + 1
    info = skew(("x", "z"), [(str(i), str(i)) for i in range(n)])
    assert select_dirs(info, Eq("x", 1), TEXT) is None


def test_an_error_in_evaluation_is_a_full_scan() -> None:
    def broken(col: str, value: Any) -> str | None:
        raise RuntimeError("boom")

    assert select_dirs(X, Eq("x", 6), broken) is None


def test_from_predicates() -> None:
    e = from_predicates([("X", "=", 6), ("x", "in", [6, 20]), ("x", "!=", 20), ("z", ">", 1)])
    assert e == And((Eq("x", 6), In("x", (6, 20)), Not(Eq("x", 20)), Opaque("z >")))
    assert kept(X, e) == {"x=6"}
    assert kept(X, from_predicates([("x", "not in", (6,))])) == {"x=20", D}
    assert kept(X, from_predicates([("x", "is null", None)])) == {"x=6", "x=20", D}


def test_selection_keeps_files_outside_named_dirs() -> None:
    sel = LbSelection(frozenset({"x=6"}), frozenset({"x=6", "x=20", D}))
    assert sel.keeps("x=6") and sel.keeps("") and sel.keeps("x=99")
    assert not sel.keeps("x=20") and not sel.keeps(D)


# ------------------------------------------------------------------- the safety property

# Small domains for the declared values; the rows hold every combination of these and NULL.
INTS = st.integers(0, 4)
STRS = st.sampled_from(["a", "b", "A", ""])
DOMAIN: dict[str, Any] = {"x": INTS, "y": STRS, "z": INTS}
HIVE_TYPES = dict(SCHEMA.columns)


def _arrow_type(col: str) -> pa.DataType:
    return HIVE_TYPES[col].to_arrow()


@st.composite
def skews(draw: st.DrawFn) -> SkewedInfo:
    cols = draw(st.sampled_from([("x",), ("y",), ("x", "y"), ("y", "x"), ("x", "y", "z")]))
    tuples = draw(
        st.lists(
            st.tuples(*(DOMAIN[c] for c in cols)),
            min_size=1,
            max_size=4,
            unique=True,
        )
    )
    texts = [tuple(str(v) for v in t) for t in tuples]
    return skew(cols, list(dict.fromkeys(texts)))


def _values(info: SkewedInfo) -> dict[str, list[Any]]:
    """Per column, the values a condition compares with: the declared ones (the cells
    that matter) and the rows' domain plus one value no row has."""
    declared = {c: sorted({t[i] for t in info.col_values}) for i, c in enumerate(info.col_names)}
    return {
        "x": [int(v) for v in declared.get("x", [])] + [0, 1, 2, 3, 4, 5],
        "y": [*declared.get("y", []), "a", "b", "A", "", "q"],
        "z": [int(v) for v in declared.get("z", [])] + [0, 1, 2, 3, 4, 5],
    }


def _leaf(draw: st.DrawFn, info: SkewedInfo, values: dict[str, list[Any]]) -> Expr:
    kind = draw(st.sampled_from(["eq", "eq", "in", "opaque"]))
    if kind == "opaque":
        return Opaque("x > 1")
    # Mostly a skewed column (the cells that matter), else any.
    col = draw(st.sampled_from([*info.col_names, *info.col_names, "x", "y", "z"]))
    if kind == "eq":
        return Eq(col, draw(st.sampled_from(values[col])))
    return In(col, tuple(draw(st.lists(st.sampled_from(values[col]), min_size=1, max_size=3))))


def _expr(draw: st.DrawFn, info: SkewedInfo, values: dict[str, list[Any]], depth: int) -> Expr:
    kind = draw(st.sampled_from(["leaf", "leaf", "and", "or", "or", "not"] if depth else ["leaf"]))
    if kind == "leaf":
        return _leaf(draw, info, values)
    if kind == "not":
        return Not(_expr(draw, info, values, depth - 1))
    kids = tuple(_expr(draw, info, values, depth - 1) for _ in range(draw(st.integers(2, 3))))
    return And(kids) if kind == "and" else Or(kids)


@st.composite
def cases(draw: st.DrawFn) -> tuple[SkewedInfo, Expr]:
    """A skew and a small filter tree of AND, OR and NOT over conditions on skewed and
    other columns (big trees are mostly unknown on every cell and prune nothing)."""
    info = draw(skews())
    return info, _expr(draw, info, _values(info), 2)


def to_arrow_expr(e: Expr) -> pc.Expression:
    """The same filter as the reader applies it: Arrow's SQL-null comparisons."""
    if isinstance(e, Eq):
        return pc.field(e.column) == pa.scalar(e.value, _arrow_type(e.column))
    if isinstance(e, In):
        return pc.field(e.column).isin(pa.array(list(e.values), _arrow_type(e.column)))
    if isinstance(e, And | Or):
        out = to_arrow_expr(e.children[0])
        for c in e.children[1:]:
            out = (out & to_arrow_expr(c)) if isinstance(e, And) else (out | to_arrow_expr(c))
        return out
    if isinstance(e, Not):
        return ~to_arrow_expr(e.child)
    return pc.field("x") > 1  # the Opaque leaf's condition


def placed_dirs(info: SkewedInfo, rows: pa.Table) -> list[str]:
    """Each row's directory as the writers place it: the declared tuple its Hive text
    matches, else the default directory."""
    texts = [hive_text(rows.column(c), HIVE_TYPES[c]).to_pylist() for c in info.col_names]
    declared = set(info.col_values)
    out = []
    for tup in zip(*texts, strict=True):
        out.append(info.dir_of(tup) if tup in declared else info.default_dir)
    return out


def _every_row() -> pa.Table:
    """Every row the domains allow (NULLs included): each cell of every skew is hit."""
    xs = [None, 0, 1, 2, 3, 4]
    ys = [None, "a", "b", "A", ""]
    rows = list(itertools.product(xs, ys, xs))
    return pa.table(
        {
            "x": pa.array([r[0] for r in rows], pa.int32()),
            "y": pa.array([r[1] for r in rows], pa.string()),
            "z": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


EVERY_ROW = _every_row()


@settings(max_examples=300, deadline=None)
@given(case=cases())
def test_pruning_never_skips_a_directory_holding_a_selected_row(
    case: tuple[SkewedInfo, Expr],
) -> None:
    info, expr = case
    selected = EVERY_ROW.filter(to_arrow_expr(expr))
    sel = select_dirs(info, expr, TEXT)
    if sel is None:
        return  # a full scan reads every directory
    for d in placed_dirs(info, selected):
        assert sel.keeps(d), (d, sel.kept)
