"""A MERGE decodes only the target columns it uses (keys, partition columns, columns a
WHEN MATCHED condition or SET value names, columns an UPDATE clause leaves as they were),
and gives the same table as when it read every column. The ORC reads are spied on."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from acidstream import Table
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert, rows_of


def _table(make_table: MakeTable, insert: Insert, handle: Callable[[str], Table]) -> Table:
    make_table("m", "id int, v string, w string, n int", buckets=("id", 4))
    insert("m", [{"id": i, "v": f"v{i}", "w": f"w{i}", "n": i} for i in range(40)])
    return handle("m")


SOURCE = pa.table(
    {
        "id": pa.array([3, 5, 100], pa.int32()),
        "v": ["V3", "V5", "V100"],
        "w": ["W3", "W5", "W100"],
        "n": pa.array([-3, -5, -100], pa.int32()),
    }
)


def test_update_set_star_reads_only_the_key(
    make_table: MakeTable, insert: Insert, handle: Callable[[str], Table], decoded: list[str]
) -> None:
    t = _table(make_table, insert, handle)
    r = t.merge(SOURCE, on=["id"]).when_matched_update_all().when_not_matched_insert_all().execute()
    assert (r.rows_updated, r.rows_inserted) == (2, 1)
    rows = [c for c in decoded if c.startswith("row.")]
    assert rows and set(rows) == {"row.id"}, decoded
    got = rows_of(t.read())
    assert (
        (3, "V3", "W3", -3) in got
        and (5, "V5", "W5", -5) in got
        and (100, "V100", "W100", -100) in got
    )
    assert (4, "v4", "w4", 4) in got and len(got) == 41


def test_columns_a_clause_uses_or_keeps_are_read(
    make_table: MakeTable, insert: Insert, handle: Callable[[str], Table], decoded: list[str]
) -> None:
    """SET v from the source, n = tgt.n + 1; w is kept as it was; condition on tgt.n."""
    t = _table(make_table, insert, handle)
    r = (
        t.merge(SOURCE, on=["id"])
        .when_matched_update(set={"v": "src.v", "n": "tgt.n + 1"}, condition="tgt.n > 4")
        .when_matched_delete()
        .execute()
    )
    assert (r.rows_updated, r.rows_deleted) == (1, 1)
    assert {c for c in decoded if c.startswith("row.")} == {"row.id", "row.w", "row.n"}
    got = rows_of(t.read())
    assert (5, "V5", "w5", 6) in got  # updated: w kept from the target
    assert not [row for row in got if row[0] == 3]  # deleted (tgt.n = 3 fails the condition)
    assert len(got) == 39
