"""A read filtered by a pyarrow expression decodes only the columns the expression names
besides those it returns (``read_plan.expression_columns``), and returns what a read of
every column filtered the same way returns."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream.acid import bucket_codec, orc_read
from acidstream.acid.read_plan import build_plan, expression_columns
from acidstream.acid.reader import read_path
from acidstream.acid.schema import TableSchema
from acidstream.acid.writer import write_delete_delta, write_delta

SCHEMA = TableSchema.parse("id bigint, v string, x double, s struct<a:int,b:string>")
NAMES = SCHEMA.names
TYPES = [t.to_arrow() for _, t in SCHEMA.columns]


def _needed(expr: pc.Expression, parts: tuple[str, ...] = (), row_id: bool = False) -> set[str]:
    return {NAMES[i] for i in expression_columns(expr, NAMES, TYPES, parts, include_row_id=row_id)}


@pytest.mark.parametrize(
    ("expr", "needed"),
    [
        (pc.field("id") == 7, {"id"}),
        (pc.divide(pc.field("x"), 2.0) > 1, {"x"}),
        ((pc.field("id") > 3) | pc.field("v").is_null(), {"id", "v"}),
        (pc.field("id").isin([1, 2, 3]), {"id"}),
        (pc.field("s", "a") == 1, {"s"}),
        (pc.field("ds") == "2024-01-01", set()),  # a partition column: not in the files
        ((pc.field("ds") == "a") & (pc.field("x") < 0), {"x"}),
        (pc.scalar(True), set()),
        # values of any type, not only predicates (a MERGE's SET values)
        (pc.field("v"), {"v"}),
        (pc.divide(pc.field("x"), 2.0), {"x"}),
        # safe casts and checked arithmetic, as acidstream's SQL compiles them
        (pc.field("x").cast(pa.int64()) == 7, {"x"}),
        (pc.Expression._call("remainder_checked", [pc.field("id"), pc.scalar(100)]) == 7, {"id"}),
    ],
)
def test_the_columns_an_expression_names(expr: pc.Expression, needed: set[str]) -> None:
    assert _needed(expr, parts=("ds",)) == needed


def test_row_id_in_an_expression_is_not_a_table_column() -> None:
    expr = pc.field("row__id", "rowid") == 0
    assert _needed(expr, row_id=True) == set()


def test_an_expression_that_does_not_bind_keeps_every_column() -> None:
    """Unknown fields or type errors: every column is read and the read reports the error."""
    assert _needed(pc.field("nope") == 1) == set(NAMES)


def test_a_plan_reads_only_the_filter_columns() -> None:
    """A DELETE's read: no output columns, ROW__ID, a predicate on ``id``: only ``id`` is
    decoded (every column was, before)."""
    plan = build_plan(
        None, schema=SCHEMA, partition_names=(), columns=[], include_row_id=True,
        filter=pc.field("id") == 7, timestamp_unit="ns",
    )  # fmt: skip
    assert [NAMES[i] for i in plan.read_positions] == ["id"]


def _rows(lo: int, n: int) -> list[tuple[object, ...]]:
    return [(i, f"v{i}", i / 4, (i % 3, str(i))) for i in range(lo, lo + n)]


def test_filtered_reads_equal_and_decode_less(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = str(tmp_path / "t")
    write_delta(t, SCHEMA, 1, _rows(0, 50))
    write_delta(t, SCHEMA, 2, _rows(50, 50))
    write_delete_delta(t, SCHEMA, 3, [(1, bucket_codec.encode(0, 0), r) for r in (3, 7, 11)])
    expr = (pc.field("id") < 20) | (pc.field("s", "a") == 2)
    decoded: list[list[str]] = []
    real = orc_read.read_orc_columns

    def spy(*args: object, **kw: object) -> pa.Table:
        decoded.append(list(kw["columns"]))  # type: ignore[call-overload]
        return real(*args, **kw)  # type: ignore[arg-type]

    every = read_path(t, include_row_id=True).filter(expr)
    monkeypatch.setattr("acidstream.acid.file_reader.read_orc_columns", spy)
    got = read_path(t, columns=["v"], include_row_id=True, filter=expr)
    assert got.num_rows > 0
    assert got.column("row__id").to_pylist() == every.column("row__id").to_pylist()
    assert got.column("v").to_pylist() == every.column("v").to_pylist()
    assert decoded and all("row.x" not in cols for cols in decoded), decoded
    assert all(any(c.startswith("row.id") for c in cols) for cols in decoded), decoded
