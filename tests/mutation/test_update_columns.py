"""An UPDATE decodes only the columns its new versions need (those it does not set, those
a SET value names, the partition columns) plus the WHERE clause's, and changes the same
rows as before. The ORC reads are spied on."""

from __future__ import annotations

from collections.abc import Callable

from acidstream import Table
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert, rows_of


def _table(make_table: MakeTable, insert: Insert, handle: Callable[[str], Table]) -> Table:
    make_table("u", "id int, v string, w string, n int", buckets=("id", 4))
    insert("u", [{"id": i, "v": f"v{i}", "w": f"w{i}", "n": i} for i in range(30)])
    return handle("u")


def test_a_column_only_set_is_not_read(
    make_table: MakeTable, insert: Insert, handle: Callable[[str], Table], decoded: list[str]
) -> None:
    t = _table(make_table, insert, handle)
    r = t.update(set={"v": "'new'", "n": "n + 100"}, where="w IN ('w3', 'w7')")
    assert r.rows_updated == 2
    assert {c for c in decoded if c.startswith("row.")} == {"row.id", "row.w", "row.n"}
    got = rows_of(t.read())
    assert (3, "new", "w3", 103) in got and (7, "new", "w7", 107) in got
    assert (4, "v4", "w4", 4) in got and len(got) == 30


def test_set_values_read_what_they_name(
    make_table: MakeTable, insert: Insert, handle: Callable[[str], Table], decoded: list[str]
) -> None:
    t = _table(make_table, insert, handle)
    r = t.update(set={"v": "concat(v, '!')"}, where="id = 5")
    assert r.rows_updated == 1
    assert {c for c in decoded if c.startswith("row.")} == {"row.id", "row.v", "row.w", "row.n"}
    assert (5, "v5!", "w5", 5) in rows_of(t.read())
