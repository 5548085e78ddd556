"""``read_table``: deletes, write-id validity, flush lengths, registries, projection,
predicates, partitions, ROW__IDs and errors, on tables written by ``acid.writer``."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acid import bucket_codec
from acid.errors import AcidFormatError, ConfigError, TableNotFoundError
from acid.reader import iter_batches, read_table
from acid.schema import TableSchema
from acid.storage import Storage
from acid.writer import (
    AcidFileWriter,
    OrcWriterOptions,
    write_base,
    write_delete_delta,
    write_delta,
)
from tests.acid.orc_builders import write_original, write_side_file

SCHEMA = TableSchema.parse("id int, name string")
B0 = bucket_codec.encode(0, 0)


def rows(n0: int, n: int) -> list[tuple[int, str]]:
    return [(i, f"n{i}") for i in range(n0, n0 + n)]


def ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


def test_invalid_write_ids_and_deletes(tmp_path: Path) -> None:
    t = str(tmp_path)
    write_delta(t, SCHEMA, 1, rows(0, 5))
    write_delta(t, SCHEMA, 2, rows(10, 5))  # aborted
    write_delta(t, SCHEMA, 3, rows(20, 5))
    write_delete_delta(t, SCHEMA, 4, [(1, B0, 1), (3, B0, 0)])
    write_delete_delta(t, SCHEMA, 5, [(1, B0, 2)])  # open: its deletes do not count
    snap = "db.t:5:5:5:2"
    assert ids(read_table(t, write_ids=snap)) == [0, 2, 3, 4, 21, 22, 23, 24]
    assert ids(read_table(t, write_ids=snap, delete_event_cap=0)) == [0, 2, 3, 4, 21, 22, 23, 24]
    # Everything valid (no list): write id 2 visible, both delete deltas apply.
    assert ids(read_table(t)) == [0, 3, 4, *range(10, 15), 21, 22, 23, 24]
    # Below the deletes' write ids nothing is deleted.
    assert ids(read_table(t, write_ids="db.t:3:9223372036854775807::")) == [
        *range(5),
        *range(10, 15),
        *range(20, 25),
    ]


def test_delete_of_same_write_id_other_statement(tmp_path: Path) -> None:
    # An UPDATE-like txn: the insert branch (stmt 1) and delete branch (stmt 0) of write id 2.
    t = str(tmp_path)
    write_delta(t, SCHEMA, 1, rows(0, 3))
    write_delete_delta(t, SCHEMA, 2, [(1, B0, 0)], statement_id=0)
    write_delta(t, SCHEMA, 2, [(0, "updated")], bucket_id=0, statement_id=1)
    got = read_table(t).to_pylist()
    assert sorted((r["id"], r["name"]) for r in got) == [(0, "updated"), (1, "n1"), (2, "n2")]


def test_row_ids_of_acid_and_original_files(tmp_path: Path) -> None:
    t = tmp_path
    write_original(
        t / "000001_0",
        {"id": [7, 8], "name": ["a", "b"]},
        types={"id": pa.int32(), "name": pa.string()},
    )
    write_delta(str(t), SCHEMA, 10000001, rows(0, 2), bucket_id=3, statement_id=2)
    got = read_table(t, include_row_id=True)
    assert got.schema.names == ["row__id", "id", "name"]
    assert got.column("row__id").to_pylist() == [
        {"writeid": 0, "bucketid": bucket_codec.encode(1, 0), "rowid": 0},
        {"writeid": 0, "bucketid": bucket_codec.encode(1, 0), "rowid": 1},
        {"writeid": 10000001, "bucketid": bucket_codec.encode(3, 2), "rowid": 0},
        {"writeid": 10000001, "bucketid": bucket_codec.encode(3, 2), "rowid": 1},
    ]


def test_raw_delta_from_load_data_gets_the_directory_write_id(tmp_path: Path) -> None:
    ty = {"id": pa.int32(), "name": pa.string()}
    write_original(
        tmp_path / "delta_0000005_0000005_0001" / "000002_0",
        {"id": [1, 2], "name": ["x", "y"]},
        types=ty,
    )
    got = read_table(tmp_path, include_row_id=True)
    assert got.column("row__id").to_pylist() == [
        {"writeid": 5, "bucketid": bucket_codec.encode(2, 1), "rowid": 0},
        {"writeid": 5, "bucketid": bucket_codec.encode(2, 1), "rowid": 1},
    ]


def test_base_and_deltas(tmp_path: Path) -> None:
    t = str(tmp_path)
    write_delta(t, SCHEMA, 1, rows(100, 3))  # obsolete under the base
    write_base(t, SCHEMA, 3, rows(0, 4), visibility_txn_id=30)
    write_delta(t, SCHEMA, 4, rows(10, 2))
    write_delete_delta(t, SCHEMA, 5, [(3, B0, 1)])
    assert ids(read_table(t)) == [0, 2, 3, 10, 11]
    # The compactor txn 30 is still open for this reader: its base is invisible (and not
    # even "oldest"), so the reader uses the deltas, which still hold the history.
    assert ids(read_table(t, txns="100:30:30:")) == [10, 11, 100, 101, 102]
    # Write id 2 open for this reader: the visible compacted base_3 is too new.
    from acid.errors import NotEnoughHistoryError

    with pytest.raises(NotEnoughHistoryError):
        read_table(t, write_ids="db.t:5:2:2:")


def test_streaming_file_read_up_to_its_flush_length(tmp_path: Path) -> None:
    st, root = Storage.for_path(str(tmp_path))
    path = st.join(root, "delta_0000001_0000002", "bucket_00000")
    w = AcidFileWriter(st, path, SCHEMA, kind="insert", bucket_id=0, streaming=True, side_file=True)
    w.insert(1, rows(0, 3))
    w.flush()
    w.insert(2, rows(10, 3))  # written but not flushed: beyond the side file's length
    assert ids(read_table(tmp_path)) == [0, 1, 2]
    w.flush()
    assert ids(read_table(tmp_path, write_ids="db.t:1:9223372036854775807::")) == [0, 1, 2]
    assert ids(read_table(tmp_path)) == [0, 1, 2, 10, 11, 12]
    w.close()
    assert ids(read_table(tmp_path)) == [0, 1, 2, 10, 11, 12]


def test_corrupt_side_file_is_one_clear_error(tmp_path: Path) -> None:
    p = Path(write_delta(str(tmp_path), SCHEMA, 1, rows(0, 2)))
    d = tmp_path / "delta_0000001_0000002"
    d.mkdir()
    (d / "bucket_00000").write_bytes(p.read_bytes())
    write_side_file(d / "bucket_00000", [], raw=b"\x00\x01")
    with pytest.raises(AcidFormatError, match="not a whole number"):
        read_table(tmp_path)


def _multi_stripe_table(
    tmp_path: Path, n: int, deletes: int, seed: int
) -> tuple[str, set[tuple[int, int]]]:
    t = str(tmp_path)
    small = OrcWriterOptions(stripe_size=64 * 1024, base_delta_ratio=1, row_index_stride=1000)
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int32()),
            "name": pa.array([f"name-{i:08d}" for i in range(n)]),
        }
    )
    write_delta(t, SCHEMA, 1, data, options=small)
    write_delta(t, SCHEMA, 2, data.slice(0, n // 2), bucket_id=1, options=small)
    rnd = random.Random(seed)
    victims1 = rnd.sample(range(n), deletes)
    victims2 = rnd.sample(range(n // 2), deletes // 2)
    keys = [(1, B0, r) for r in victims1] + [(2, bucket_codec.encode(1, 0), r) for r in victims2]
    rnd.shuffle(keys)
    write_delete_delta(t, SCHEMA, 3, keys[: len(keys) // 2], options=small)
    write_delete_delta(t, SCHEMA, 4, keys[len(keys) // 2 :], options=small)
    v1, v2 = set(victims1), set(victims2)
    return t, {(1, x) for x in range(n) if x not in v1} | {
        (2, x) for x in range(n // 2) if x not in v2
    }


@pytest.mark.parametrize("seed", [1, 2])
def test_sort_merge_fallback_equals_in_memory_registry(tmp_path: Path, seed: int) -> None:
    t, expect = _multi_stripe_table(tmp_path, 200_000, 3_000, seed)
    import pyarrow.orc as orc

    assert orc.ORCFile(str(next(Path(t).glob("delta_0000001_*/bucket_00000")))).nstripes > 1
    a = read_table(t, include_row_id=True)
    b = read_table(t, include_row_id=True, delete_event_cap=10)
    assert a.to_pylist() == b.to_pylist()
    got = {(r["writeid"], r["rowid"]) for r in a.column("row__id").to_pylist()}
    assert got == expect and a.num_rows == len(expect)


def test_sort_merge_loads_only_the_events_of_each_stripe_interval(tmp_path: Path) -> None:
    from acid.delete_registry import SortMergedDeletes
    from acid.directory import get_acid_state
    from acid.reader import _delete_files
    from acid.snapshot import ValidTxnList, ValidWriteIdList

    t, _ = _multi_stripe_table(tmp_path, 200_000, 3_000, 3)
    st = get_acid_state(t, write_ids=None, txns=ValidTxnList())
    reg = SortMergedDeletes(Storage.for_path("/")[0], _delete_files(st), ValidWriteIdList())
    import pyarrow.orc as orc

    f = orc.ORCFile(str(next(Path(t).glob("delta_0000001_*/bucket_00000"))))
    from acid.delete_registry import key_table

    qual = frozenset(d.delta for d in _delete_files(st))
    for i in range(f.nstripes):
        s = f.read_stripe(i, columns=["originalTransaction", "bucket", "rowId"])
        reg.deleted(key_table(s.column(0), s.column(1), s.column(2)), qual)
    assert 0 < reg.peak_events < reg.size


def test_projection_and_predicates(tmp_path: Path) -> None:
    t = str(tmp_path)
    write_delta(t, SCHEMA, 1, rows(0, 10))
    p = read_table(t, columns=["NAME"])
    assert p.schema.names == ["name"] and p.num_rows == 10
    f = read_table(t, columns=["name"], filter=[("id", ">=", 7)])
    assert f.schema.names == ["name"] and f.column("name").to_pylist() == ["n7", "n8", "n9"]
    e = read_table(t, filter=(pc.field("id") < 2) | (pc.field("name") == "n9"))
    assert ids(e) == [0, 1, 9]
    assert ids(read_table(t, filter=[("id", "in", [3, 4]), ("name", "!=", "n4")])) == [3]
    with pytest.raises(ConfigError, match="unknown column"):
        read_table(t, columns=["nope"])
    with pytest.raises(ConfigError, match="operator"):
        read_table(t, filter=[("id", "~", 1)])


def test_partitioned_table(tmp_path: Path) -> None:
    for day, base in (("2024-01-01", 0), ("2024-01-02", 100)):
        part = tmp_path / f"ds={day}" / "country=a%2Fb"
        write_delta(str(part), SCHEMA, 1, rows(base, 2))
    got = read_table(tmp_path)
    assert got.schema.names == ["id", "name", "ds", "country"]
    assert sorted((r["id"], r["ds"], r["country"]) for r in got.to_pylist()) == [
        (0, "2024-01-01", "a/b"),
        (1, "2024-01-01", "a/b"),
        (100, "2024-01-02", "a/b"),
        (101, "2024-01-02", "a/b"),
    ]
    one = read_table(tmp_path / "ds=2024-01-02" / "country=a%2Fb", columns=["id", "ds"])
    assert one.to_pylist() == [{"id": 100, "ds": "2024-01-02"}, {"id": 101, "ds": "2024-01-02"}]
    assert ids(read_table(tmp_path, filter=[("ds", "=", "2024-01-01")])) == [0, 1]


def test_iter_batches_yields_the_same_rows(tmp_path: Path) -> None:
    t = str(tmp_path)
    write_delta(t, SCHEMA, 1, rows(0, 3))
    write_delta(t, SCHEMA, 2, rows(3, 3))
    batches = list(iter_batches(t))
    assert len(batches) == 2
    assert pa.concat_tables(batches).to_pylist() == read_table(t).to_pylist()


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError):
        read_table(tmp_path / "missing")
    ty = {"id": pa.int32(), "name": pa.string()}
    write_original(
        tmp_path / "delete_delta_0000002_0000002_0000" / "bucket_00000",
        {"id": [1], "name": ["x"]},
        types=ty,
    )
    write_delta(str(tmp_path), SCHEMA, 1, rows(0, 1))
    with pytest.raises(AcidFormatError, match=r"hive\.acid\.version"):
        read_table(tmp_path)


def test_delete_event_in_wrong_bucket_file_is_rejected(tmp_path: Path) -> None:
    t = str(tmp_path)
    write_delta(t, SCHEMA, 1, rows(0, 2))
    (p,) = write_delete_delta(t, SCHEMA, 2, [(1, bucket_codec.encode(1, 0), 0)])
    Path(p).rename(Path(p).with_name("bucket_00000"))
    with pytest.raises(AcidFormatError, match="different bucket ids"):
        read_table(t)
