"""DELETE, UPDATE and MERGE on disk, file by file, as Hive 3 writes them (spec §3.3, §9 item
8): directory names and statement ids, delete events (operation 2, the deleted row's
ROW__ID, ``currentTransaction`` = the mutation's write id, ``row`` NULL) sorted and one file
per writer id, new versions bucketed by Hive's hash with fresh rowIds and the statement id
in the bucket property, acid stats and key index in every footer. Both metastore backends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc
import pytest

from acidstream import Table
from acidstream.acid import bucket_codec
from acidstream.acid.bucket_hash import bucket_number
from acidstream.acid.schema import TableSchema
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert

ROW_ID = ["originalTransaction", "bucket", "rowId"]
INT = TableSchema.parse("id int").columns[0][1]


def _events(path: str | Path) -> pa.Table:
    return orc.ORCFile(str(path)).read()


def _meta(path: str | Path) -> dict[bytes, bytes]:
    return dict(orc.ORCFile(str(path)).metadata)


def _dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def _hive_bucket(i: int, n: int) -> int:
    return bucket_number([i], [INT], n, bucketing_version=2)


@pytest.fixture
def bucketed(
    make_table: MakeTable, insert: Insert, handle: Callable[[str], Table], warehouse: str
) -> tuple[Table, Path]:
    """``default.t (id int, v string)`` clustered by id into 4 buckets, 40 rows, write id 1."""
    make_table("t", "id int, v string", buckets=("id", 4))
    insert("t", [{"id": i, "v": f"v{i}"} for i in range(40)])
    return handle("t"), Path(warehouse) / "t"


def test_delete_writes_one_sorted_delete_delta_file_per_writer_id(
    bucketed: tuple[Table, Path],
) -> None:
    t, root = bucketed
    gone = [i for i in range(40) if i % 3 == 0]
    res = t.delete(pc.field("id").isin(gone))
    assert res.rows_deleted == len(gone) and res.write_id == 2
    assert _dirs(root) == ["delete_delta_0000002_0000002_0000", "delta_0000001_0000001"]
    dd = root / "delete_delta_0000002_0000002_0000"
    assert (dd / "_orc_acid_version").read_text() == "2"
    files = sorted(p.name for p in dd.iterdir() if p.name.startswith("bucket_"))
    expected_buckets = sorted({_hive_bucket(i, 4) for i in gone})
    assert files == [f"bucket_{b:05d}" for b in expected_buckets]
    assert sorted(res.files_written) == sorted(str(dd / f) for f in files)
    seen = 0
    for name in files:
        ev = _events(dd / name)
        n = ev.num_rows
        seen += n
        writer = int(name.split("_")[1])
        assert ev.column("operation").to_pylist() == [2] * n
        assert ev.column("currentTransaction").to_pylist() == [2] * n
        assert ev.column("originalTransaction").to_pylist() == [1] * n
        assert ev.column("row").null_count == n  # row NULL, as Hive writes delete events
        assert {bucket_codec.decode_writer_id(b) for b in ev.column("bucket").to_pylist()} == {
            writer
        }
        keys = list(zip(*(ev.column(c).to_pylist() for c in ROW_ID), strict=True))
        assert keys == sorted(keys) and len(set(keys)) == n
        meta = _meta(dd / name)
        assert meta[b"hive.acid.stats"] == f"0,0,{n}".encode()
        assert meta[b"hive.acid.key.index"] == (",".join(map(str, keys[-1])) + ";").encode()
        # the delete events name the rows that had these ids in the insert delta
        data = _events(root / "delta_0000001_0000001" / name)
        by_key = {
            (o, b, r): row["id"]
            for o, b, r, row in zip(
                *(data.column(c).to_pylist() for c in [*ROW_ID, "row"]), strict=True
            )
        }
        assert sorted(by_key[k] for k in keys) == sorted(
            i for i in gone if _hive_bucket(i, 4) == writer
        )
    assert seen == len(gone)
    assert sorted(t.read().column("id").to_pylist()) == [i for i in range(40) if i % 3]


def test_update_is_a_delete_event_plus_a_new_version_in_statement_0(
    bucketed: tuple[Table, Path],
) -> None:
    t, root = bucketed
    res = t.update({"v": pc.scalar("new")}, pc.field("id") < 10)
    assert res.rows_updated == 10 and res.write_id == 2
    assert _dirs(root) == [
        "delete_delta_0000002_0000002_0000",
        "delta_0000001_0000001",
        "delta_0000002_0000002_0000",
    ]
    new = root / "delta_0000002_0000002_0000"
    for f in sorted(new.glob("bucket_*")):
        b = int(f.name.split("_")[1])
        ev = _events(f)
        rows = ev.column("row").to_pylist()
        assert {_hive_bucket(r["id"], 4) for r in rows} == {b}  # bucketed by Hive's hash
        assert ev.column("operation").to_pylist() == [0] * ev.num_rows
        assert ev.column("originalTransaction").to_pylist() == [2] * ev.num_rows
        assert ev.column("currentTransaction").to_pylist() == [2] * ev.num_rows
        assert ev.column("bucket").to_pylist() == [bucket_codec.encode(b, 0)] * ev.num_rows
        assert ev.column("rowId").to_pylist() == list(range(ev.num_rows))
        assert {r["v"] for r in rows} == {"new"}
        assert _meta(f)[b"hive.acid.stats"] == f"{ev.num_rows},0,0".encode()
    got = t.read()
    assert sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)) == [
        (i, "new" if i < 10 else f"v{i}") for i in range(40)
    ]


def test_updating_the_bucketing_column_rebuckets_the_row(bucketed: tuple[Table, Path]) -> None:
    t, root = bucketed
    t.update({"id": pc.field("id") + 1000}, pc.field("id") == 5)
    files = list((root / "delta_0000002_0000002_0000").glob("bucket_*"))
    assert [f.name for f in files] == [f"bucket_{_hive_bucket(1005, 4):05d}"]
    assert [r["id"] for r in _events(files[0]).column("row").to_pylist()] == [1005]
    ids = sorted(t.read().column("id").to_pylist())
    assert 5 not in ids and 1005 in ids and len(ids) == 40


def test_merge_statement_ids_per_when_clause(bucketed: tuple[Table, Path]) -> None:
    """The seed's example: WHEN MATCHED UPDATE, WHEN NOT MATCHED INSERT; the INSERT clause
    writes ``delta_W_W_0000``, the UPDATE clause ``delete_delta_W_W_0001`` and
    ``delta_W_W_0001``; a DELETE clause comes last with its own statement id."""
    t, root = bucketed
    src = pa.table(
        {
            "id": [1, 2, 100, 101],
            "v": ["u1", "d2", "i100", "i101"],
            "op": ["u", "d", "i", "i"],
        }
    )
    res = (
        t.merge(src, on=["id"])
        .when_matched_update(set={"v": pc.field("src.v")}, condition=pc.field("src.op") == "u")
        .when_matched_delete()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (res.rows_updated, res.rows_deleted, res.rows_inserted) == (1, 1, 2)
    assert _dirs(root) == [
        "delete_delta_0000002_0000002_0001",
        "delete_delta_0000002_0000002_0002",
        "delta_0000001_0000001",
        "delta_0000002_0000002_0000",
        "delta_0000002_0000002_0001",
    ]
    for name, stmt in [("delta_0000002_0000002_0000", 0), ("delta_0000002_0000002_0001", 1)]:
        for f in (root / name).glob("bucket_*"):
            b = int(f.name.split("_")[1])
            assert set(_events(f).column("bucket").to_pylist()) == {bucket_codec.encode(b, stmt)}
    upd_del = _events(next((root / "delete_delta_0000002_0000002_0001").glob("bucket_*")))
    del_del = _events(next((root / "delete_delta_0000002_0000002_0002").glob("bucket_*")))
    assert upd_del.num_rows == 1 and del_del.num_rows == 1
    # delete events carry the deleted rows' bucket property (statement 0 of write id 1)
    assert upd_del.column("bucket").to_pylist() == [bucket_codec.encode(_hive_bucket(1, 4), 0)]
    assert del_del.column("bucket").to_pylist() == [bucket_codec.encode(_hive_bucket(2, 4), 0)]
    got = t.read()
    model = {i: f"v{i}" for i in range(40)} | {1: "u1", 100: "i100", 101: "i101"}
    del model[2]
    assert (
        dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)) == model
    )


def test_update_of_a_partition_column_moves_the_row(
    make_table: MakeTable,
    insert: Insert,
    handle: Callable[[str], Table],
    warehouse: str,
    store: TxnStore,
) -> None:
    make_table("p", "id int, v string", partitioned_by=[("ds", "string")])
    insert("p", [{"id": i, "v": "x", "ds": "a"} for i in range(5)])
    t = handle("p")
    res = t.update({"ds": pc.scalar("b")}, pc.field("id") == 2)
    assert res.partitions == ("ds=a", "ds=b")
    root = Path(warehouse) / "p"
    assert _dirs(root / "ds=a") == ["delete_delta_0000002_0000002_0000", "delta_0000001_0000001"]
    assert _dirs(root / "ds=b") == ["delta_0000002_0000002_0000"]
    got = t.read()
    assert sorted(zip(got.column("id").to_pylist(), got.column("ds").to_pylist(), strict=True)) == [
        (0, "a"), (1, "a"), (2, "b"), (3, "a"), (4, "a"),
    ]  # fmt: skip
    # the catalog knows the partition the row moved to (registered at commit)
    assert {p.name for p in store.list_partitions("default", "p")} == {"ds=a", "ds=b"}


def test_a_delete_matching_nothing_commits_an_empty_txn(bucketed: tuple[Table, Path]) -> None:
    t, root = bucketed
    res = t.delete(pc.field("id") > 1000)
    assert res.rows_deleted == 0 and res.files_written == () and res.write_id == 2
    assert _dirs(root) == ["delta_0000001_0000001"]
    assert t.read().num_rows == 40
