"""A mutation reads only what it can touch (issue 30 item 4): partitions its predicate (or
the MERGE source's partition values) rules out, and, for a MERGE on the key of a table
bucketed on it, the buckets no source key hashes to, are never opened. Shown by making
those files unreadable: the mutation still succeeds and changes exactly the right rows,
while a read of the whole table fails on them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream import Table
from acidstream.acid.bucket_hash import bucket_number
from acidstream.acid.errors import AcidStreamError
from acidstream.acid.schema import TableSchema
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert, rows_of

INT = TableSchema.parse("id int").columns[0][1]


def _poison(files: list[Path]) -> Callable[[], None]:
    """Overwrite data files with bytes no ORC reader accepts (same length); returns what
    puts them back (the whole-table reads of the checks need them)."""
    assert files
    saved = {f: f.read_bytes() for f in files}
    for f in files:
        f.write_bytes(b"\xff" * f.stat().st_size)

    def restore() -> None:
        for f, data in saved.items():
            f.write_bytes(data)

    return restore


@pytest.fixture
def parts(make_table: MakeTable, insert: Insert, handle: Callable[[str], Table]) -> Table:
    make_table("pp", "id int, v string", partitioned_by=[("ds", "string"), ("h", "int")])
    insert(
        "pp", [{"id": i, "v": "x", "ds": "d1" if i < 10 else "d2", "h": i % 2} for i in range(20)]
    )
    return handle("pp")


def test_delete_and_update_skip_partitions_the_predicate_rules_out(
    parts: Table, warehouse: str
) -> None:
    root = Path(warehouse) / "pp"
    restore = _poison(sorted((root / "ds=d2").rglob("bucket_*")))
    with pytest.raises(AcidStreamError):
        parts.read()  # the poisoned files are really unreadable
    res = parts.delete((pc.field("ds") == "d1") & (pc.field("id") < 3))
    assert res.rows_deleted == 3
    res = parts.update({"v": pc.scalar("y")}, (pc.field("ds") == "d1") & (pc.field("h") == "1"))
    assert res.rows_updated == 4 and res.partitions == ("ds=d1/h=1",)
    restore()
    got = rows_of(parts.read(filter=[("ds", "=", "d1")]), ["id", "v"])
    assert got == [(i, "y" if i % 2 else "x") for i in range(3, 10)]


def test_merge_reads_only_the_partitions_of_the_source_keys(parts: Table, warehouse: str) -> None:
    root = Path(warehouse) / "pp"
    restore = _poison(
        sorted((root / "ds=d2").rglob("bucket_*"))
        + sorted((root / "ds=d1" / "h=0").rglob("bucket_*"))
    )
    src = pa.table(
        {
            "id": pa.array([1, 3, 99], pa.int32()),
            "v": ["a", "b", "c"],
            "ds": ["d1"] * 3,
            "h": pa.array([1, 1, 1], pa.int32()),
        }
    )
    res = (
        parts.merge(src, on=["id", "ds", "h"])
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (res.rows_updated, res.rows_inserted) == (2, 1)
    restore()
    got = rows_of(parts.read(filter=[("ds", "=", "d1"), ("h", "=", "1")]), ["id", "v"])
    assert got == [(1, "a"), (3, "b"), (5, "x"), (7, "x"), (9, "x"), (99, "c")]


def test_merge_on_the_bucketing_key_reads_only_the_source_keys_buckets(
    make_table: MakeTable, insert: Insert, handle: Callable[[str], Table], warehouse: str
) -> None:
    make_table("bk", "id int, v string", buckets=("id", 8))
    insert("bk", [{"id": i, "v": "x"} for i in range(200)])
    t = handle("bk")
    keys = [5, 17, 1000]
    wanted = {bucket_number([k], [INT], 8) for k in keys}
    root = Path(warehouse) / "bk"
    others = [f for f in root.rglob("bucket_*") if int(f.name.split("_")[1]) not in wanted]
    assert len(others) >= 4
    restore = _poison(others)
    src = pa.table({"id": pa.array(keys, pa.int32()), "v": ["a", "b", "c"]})
    res = t.merge(src, on="id").when_matched_update_all().when_not_matched_insert_all().execute()
    assert (res.rows_updated, res.rows_inserted) == (2, 1)
    assert {int(Path(f).name.split("_")[1]) for f in res.files_written} <= wanted
    with pytest.raises(AcidStreamError):
        t.read()
    restore()
    got = dict(rows_of(t.read(), ["id", "v"]))
    assert len(got) == 201 and (got[5], got[17], got[1000]) == ("a", "b", "c")
