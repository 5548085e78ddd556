"""``read_path``: deletes, write-id validity, flush lengths, registries, projection,
predicates, partitions, ROW__IDs and errors, on tables written by ``acidstream.acid.writer``."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream.acid import bucket_codec
from acidstream.acid.directory import get_acid_state
from acidstream.acid.errors import AcidFormatError, ConfigError, TableNotFoundError
from acidstream.acid.partitions import Partition
from acidstream.acid.reader import iter_batches, read_path
from acidstream.acid.schema import TableSchema
from acidstream.acid.snapshot import ValidTxnList
from acidstream.acid.storage import Storage
from acidstream.acid.writer import (
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
    assert ids(read_path(t, write_ids=snap)) == [0, 2, 3, 4, 21, 22, 23, 24]
    assert ids(read_path(t, write_ids=snap, delete_event_cap=0)) == [0, 2, 3, 4, 21, 22, 23, 24]
    # Everything valid (no list): write id 2 visible, both delete deltas apply.
    assert ids(read_path(t)) == [0, 3, 4, *range(10, 15), 21, 22, 23, 24]
    # Below the deletes' write ids nothing is deleted.
    assert ids(read_path(t, write_ids="db.t:3:9223372036854775807::")) == [
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
    got = read_path(t).to_pylist()
    assert sorted((r["id"], r["name"]) for r in got) == [(0, "updated"), (1, "n1"), (2, "n2")]


def test_row_ids_of_acid_and_original_files(tmp_path: Path) -> None:
    t = tmp_path
    write_original(
        t / "000001_0",
        {"id": [7, 8], "name": ["a", "b"]},
        types={"id": pa.int32(), "name": pa.string()},
    )
    write_delta(str(t), SCHEMA, 10000001, rows(0, 2), bucket_id=3, statement_id=2)
    got = read_path(t, include_row_id=True)
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
    got = read_path(tmp_path, include_row_id=True)
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
    assert ids(read_path(t)) == [0, 2, 3, 10, 11]
    # The compactor txn 30 is still open for this reader: its base is invisible (and not
    # even "oldest"), so the reader uses the deltas, which still hold the history.
    assert ids(read_path(t, txns="100:30:30:")) == [10, 11, 100, 101, 102]
    # Write id 2 open for this reader: the visible compacted base_3 is too new.
    from acidstream.acid.errors import NotEnoughHistoryError

    with pytest.raises(NotEnoughHistoryError):
        read_path(t, write_ids="db.t:5:2:2:")


def test_streaming_file_read_up_to_its_flush_length(tmp_path: Path) -> None:
    st, root = Storage.for_path(str(tmp_path))
    path = st.join(root, "delta_0000001_0000002", "bucket_00000")
    w = AcidFileWriter(st, path, SCHEMA, kind="insert", bucket_id=0, streaming=True, side_file=True)
    w.insert(1, rows(0, 3))
    w.flush()
    w.insert(2, rows(10, 3))  # written but not flushed: beyond the side file's length
    assert ids(read_path(tmp_path)) == [0, 1, 2]
    w.flush()
    assert ids(read_path(tmp_path, write_ids="db.t:1:9223372036854775807::")) == [0, 1, 2]
    assert ids(read_path(tmp_path)) == [0, 1, 2, 10, 11, 12]
    w.close()
    assert ids(read_path(tmp_path)) == [0, 1, 2, 10, 11, 12]


def test_corrupt_side_file_is_one_clear_error(tmp_path: Path) -> None:
    p = Path(write_delta(str(tmp_path), SCHEMA, 1, rows(0, 2)))
    d = tmp_path / "delta_0000001_0000002"
    d.mkdir()
    (d / "bucket_00000").write_bytes(p.read_bytes())
    write_side_file(d / "bucket_00000", [], raw=b"\x00\x01")
    with pytest.raises(AcidFormatError, match="not a whole number"):
        read_path(tmp_path)


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
    a = read_path(t, include_row_id=True)
    b = read_path(t, include_row_id=True, delete_event_cap=10)
    assert a.to_pylist() == b.to_pylist()
    got = {(r["writeid"], r["rowid"]) for r in a.column("row__id").to_pylist()}
    assert got == expect and a.num_rows == len(expect)


def test_sort_merge_loads_only_the_events_of_each_stripe_interval(tmp_path: Path) -> None:
    from acidstream.acid.delete_registry import SortMergedDeletes, delete_files
    from acidstream.acid.directory import get_acid_state
    from acidstream.acid.snapshot import ValidTxnList, ValidWriteIdList

    t, _ = _multi_stripe_table(tmp_path, 200_000, 3_000, 3)
    st = get_acid_state(t, write_ids=None, txns=ValidTxnList())
    reg = SortMergedDeletes(Storage.for_path("/")[0], delete_files(st), ValidWriteIdList())
    import pyarrow.orc as orc

    f = orc.ORCFile(str(next(Path(t).glob("delta_0000001_*/bucket_00000"))))
    from acidstream.acid.delete_registry import key_table

    qual = frozenset(d.delta for d in delete_files(st))
    for i in range(f.nstripes):
        s = f.read_stripe(i, columns=["originalTransaction", "bucket", "rowId"])
        reg.deleted(key_table(s.column(0), s.column(1), s.column(2)), qual)
    assert 0 < reg.peak_events < reg.size


def test_projection_and_predicates(tmp_path: Path) -> None:
    t = str(tmp_path)
    write_delta(t, SCHEMA, 1, rows(0, 10))
    p = read_path(t, columns=["NAME"])
    assert p.schema.names == ["name"] and p.num_rows == 10
    f = read_path(t, columns=["name"], filter=[("id", ">=", 7)])
    assert f.schema.names == ["name"] and f.column("name").to_pylist() == ["n7", "n8", "n9"]
    e = read_path(t, filter=(pc.field("id") < 2) | (pc.field("name") == "n9"))
    assert ids(e) == [0, 1, 9]
    assert ids(read_path(t, filter=[("id", "in", [3, 4]), ("name", "!=", "n4")])) == [3]
    with pytest.raises(ConfigError, match="unknown column"):
        read_path(t, columns=["nope"])
    with pytest.raises(ConfigError, match="operator"):
        read_path(t, filter=[("id", "~", 1)])


def test_partitioned_table(tmp_path: Path) -> None:
    for day, base in (("2024-01-01", 0), ("2024-01-02", 100)):
        part = tmp_path / f"ds={day}" / "country=a%2Fb"
        write_delta(str(part), SCHEMA, 1, rows(base, 2))
    got = read_path(tmp_path)
    assert got.schema.names == ["id", "name", "ds", "country"]
    assert sorted((r["id"], r["ds"], r["country"]) for r in got.to_pylist()) == [
        (0, "2024-01-01", "a/b"),
        (1, "2024-01-01", "a/b"),
        (100, "2024-01-02", "a/b"),
        (101, "2024-01-02", "a/b"),
    ]
    one = read_path(tmp_path / "ds=2024-01-02" / "country=a%2Fb", columns=["id", "ds"])
    assert one.to_pylist() == [{"id": 100, "ds": "2024-01-02"}, {"id": 101, "ds": "2024-01-02"}]
    assert ids(read_path(tmp_path, filter=[("ds", "=", "2024-01-01")])) == [0, 1]


def test_iter_batches_yields_the_same_rows(tmp_path: Path) -> None:
    t = str(tmp_path)
    write_delta(t, SCHEMA, 1, rows(0, 3))
    write_delta(t, SCHEMA, 2, rows(3, 3))
    batches = list(iter_batches(t))
    assert len(batches) == 2
    assert pa.concat_tables(batches).to_pylist() == read_path(t).to_pylist()


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError):
        read_path(tmp_path / "missing")
    ty = {"id": pa.int32(), "name": pa.string()}
    write_original(
        tmp_path / "delete_delta_0000002_0000002_0000" / "bucket_00000",
        {"id": [1], "name": ["x"]},
        types=ty,
    )
    write_delta(str(tmp_path), SCHEMA, 1, rows(0, 1))
    with pytest.raises(AcidFormatError, match=r"hive\.acid\.version"):
        read_path(tmp_path)


def test_delete_event_in_wrong_bucket_file_is_rejected(tmp_path: Path) -> None:
    t = str(tmp_path)
    write_delta(t, SCHEMA, 1, rows(0, 2))
    (p,) = write_delete_delta(t, SCHEMA, 2, [(1, bucket_codec.encode(1, 0), 0)])
    Path(p).rename(Path(p).with_name("bucket_00000"))
    with pytest.raises(AcidFormatError, match="different bucket ids"):
        read_path(t)


# ---------------------------------------------------------------------------------------------
# fast paths (grouped rowId deletes, ACID columns skipped, threaded file reads) equal the
# general path and a brute-force expectation

_ACID_ROW = pa.struct([("id", pa.int32()), ("name", pa.string())])


def _write_events(path: Path, keys: list[tuple[int, int, int, int]], *, delete: bool) -> None:
    """A bare ACID event file (no Hive metadata): ``(origTxn, bucket, rowId, currentTxn)``."""
    import pyarrow.orc as orc

    path.parent.mkdir(parents=True, exist_ok=True)
    n = len(keys)
    row = (
        pa.nulls(n, _ACID_ROW)
        if delete
        else pa.StructArray.from_arrays(
            [pa.array([k[2] for k in keys], pa.int32()), pa.array([f"r{k}" for k in keys])],
            fields=list(_ACID_ROW),
        )
    )
    orc.write_table(
        pa.table(
            {
                "operation": pa.array([2 if delete else 0] * n, pa.int32()),
                "originalTransaction": pa.array([k[0] for k in keys], pa.int64()),
                "bucket": pa.array([k[1] for k in keys], pa.int32()),
                "rowId": pa.array([k[2] for k in keys], pa.int64()),
                "currentTransaction": pa.array([k[3] for k in keys], pa.int64()),
                "row": row,
            }
        ),
        str(path),
    )


def _mixed_table(tmp_path: Path, seed: int) -> tuple[str, list[tuple[int, int, int]], list[str]]:
    """Deltas of every shape, deletes hitting each; returns (table, all data keys, snapshots)."""
    rnd = random.Random(seed)
    t = str(tmp_path)
    keys: list[tuple[int, int, int]] = []  # (writeId, bucket, rowId) of every data row
    b1 = bucket_codec.encode(1, 0)
    # Hive-shaped single-write-id deltas (dense rowIds), two buckets and a second statement.
    for w in (1, 2, 3):
        n = rnd.randrange(50, 400)
        write_delta(t, SCHEMA, w, rows(1000 * w, n))
        keys += [(w, B0, r) for r in range(n)]
    write_delta(t, SCHEMA, 2, rows(5000, 70), bucket_id=1)
    keys += [(2, b1, r) for r in range(70)]
    b3s1 = bucket_codec.encode(0, 1)
    write_delta(t, SCHEMA, 3, rows(6000, 40), statement_id=1)
    keys += [(3, b3s1, r) for r in range(40)]
    # A streaming delta of write ids 4..5 (two groups in one file).
    st, root = Storage.for_path(t)
    path = st.join(root, "delta_0000004_0000005", "bucket_00000")
    w = AcidFileWriter(st, path, SCHEMA, kind="insert", bucket_id=0, streaming=True)
    w.insert(4, rows(7000, 30))
    w.insert(5, rows(8000, 25))
    w.close()
    keys += [(4, B0, r) for r in range(30)] + [(5, B0, r) for r in range(25)]
    # A single-write-id delta whose rowIds are neither dense nor ordered (not Hive's
    # writer, but legal input): still one (writeId, bucket) group.
    odd = rnd.sample(range(10_000), 60)
    _write_events(
        tmp_path / "delta_0000006_0000006_0000" / "bucket_00000",
        [(6, B0, r, 6) for r in odd],
        delete=False,
    )
    keys += [(6, B0, r) for r in odd]
    # A single-write-id delta holding rows of an older write id (several groups).
    mixed = [(7, B0, r, 7) for r in range(20)] + [(1, B0, 100_000 + r, 7) for r in range(20)]
    _write_events(tmp_path / "delta_0000007_0000007_0000" / "bucket_00000", mixed, delete=False)
    keys += [(o, b, r) for o, b, r, _ in mixed]
    # Deletes: Hive-shaped deltas, plus one unordered file with duplicate events.
    victims = rnd.sample(keys, len(keys) // 4)
    half = len(victims) // 2
    write_delete_delta(t, SCHEMA, 8, victims[:half])
    rest = [k for k in victims[half:] if bucket_codec.decode_writer_id(k[1]) == 0]
    rest += rnd.sample(rest, min(10, len(rest)))  # duplicates
    rest += [(2, B0, 10**6), (99, B0, 0)]  # events matching nothing
    rnd.shuffle(rest)
    _write_events(
        tmp_path / "delete_delta_0000009_0000009_0000" / "bucket_00000",
        [(o, b, r, 9) for o, b, r in rest],
        delete=True,
    )
    snaps = [
        "db.t:9:9223372036854775807::",
        "db.t:9:5:5:",  # write id 5 open: part of the streaming delta invisible
        "db.t:9:2:2,8:",  # 2 open, delete delta 8 aborted
        "db.t:7:9223372036854775807::",  # no deletes visible
    ]
    return t, keys, snaps


def _expected(
    tmp_path: Path, keys: list[tuple[int, int, int]], snap: str
) -> list[tuple[int, int, int]]:
    """Brute force from the files themselves: visible rows minus valid delete events."""
    import pyarrow.orc as orc

    from acidstream.acid.snapshot import ValidWriteIdList

    wl = ValidWriteIdList.from_string(snap)
    deleted: set[tuple[int, int, int]] = set()
    for f in tmp_path.glob("delete_delta_*/bucket_*"):
        for r in orc.ORCFile(str(f)).read().to_pylist():
            if wl.is_write_id_valid(r["currentTransaction"]):
                deleted.add((r["originalTransaction"], r["bucket"], r["rowId"]))
    visible = []
    for f in tmp_path.glob("delta_*/bucket_*"):
        if f.name.endswith("_flush_length"):
            continue
        for r in orc.ORCFile(str(f)).read().to_pylist():
            k = (r["originalTransaction"], r["bucket"], r["rowId"])
            if wl.is_write_id_valid(r["currentTransaction"]) and k not in deleted:
                visible.append(k)
    assert set(visible) <= set(keys)
    return sorted(visible)


def _row_ids(t: pa.Table) -> list[tuple[int, int, int]]:
    return sorted(
        (r["writeid"], r["bucketid"], r["rowid"]) for r in t.column("row__id").to_pylist()
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fast_paths_equal_sort_merge_and_brute_force(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acidstream.acid import reader

    t, keys, snaps = _mixed_table(tmp_path, seed)
    for snap in snaps:
        expect = _expected(tmp_path, keys, snap)
        with_ids = read_path(t, write_ids=snap, include_row_id=True)
        assert _row_ids(with_ids) == expect
        merged = read_path(t, write_ids=snap, include_row_id=True, delete_event_cap=0)
        assert with_ids.to_pylist() == merged.to_pylist()
        # Without ROW__ID (the fast path), the same rows in the same order.
        fast = read_path(t, write_ids=snap)
        assert fast.to_pylist() == with_ids.drop_columns(["row__id"]).to_pylist()
        assert fast.to_pylist() == read_path(t, write_ids=snap, delete_event_cap=0).to_pylist()
        # Projection and predicates on top.
        proj = read_path(t, write_ids=snap, columns=["name"], filter=[("id", ">=", 3000)])
        assert proj.column("name").to_pylist() == [
            r["name"] for r in fast.to_pylist() if r["id"] >= 3000
        ]
        # One thread gives the same table.
        monkeypatch.setattr(reader, "READ_THREADS", 1)
        assert read_path(t, write_ids=snap).to_pylist() == fast.to_pylist()
        monkeypatch.setattr(reader, "READ_THREADS", 3)
        monkeypatch.setattr(reader, "THREADED_READ_MIN_AVG_BYTES", 0)  # threads for small files
        batches = list(iter_batches(t, write_ids=snap))
        monkeypatch.setattr(reader, "READ_THREADS", 1)
        assert [b.to_pylist() for b in batches] == [
            b.to_pylist() for b in iter_batches(t, write_ids=snap)
        ]
        monkeypatch.undo()


def test_fast_path_on_original_files_equals_sort_merge(tmp_path: Path) -> None:
    ty = {"id": pa.int32(), "name": pa.string()}
    write_original(tmp_path / "000000_0", {"id": list(range(50)), "name": ["a"] * 50}, types=ty)
    write_original(
        tmp_path / "000000_0_copy_1", {"id": list(range(50, 80)), "name": ["b"] * 30}, types=ty
    )
    write_original(tmp_path / "000001_0", {"id": list(range(80, 90)), "name": ["c"] * 10}, types=ty)
    b1 = bucket_codec.encode(1, 0)
    dels = [(0, B0, 0), (0, B0, 49), (0, B0, 50), (0, B0, 79), (0, B0, 80), (0, b1, 3)]
    write_delete_delta(str(tmp_path), SCHEMA, 1, dels)
    got = read_path(tmp_path)
    # Row ids run on across same-bucket files: 0..49 in 000000_0, 50..79 in its copy.
    assert ids(got) == [i for i in range(90) if i not in (0, 49, 50, 79, 83)]
    assert got.to_pylist() == read_path(tmp_path, delete_event_cap=0).to_pylist()
    with_ids = read_path(tmp_path, include_row_id=True)
    assert with_ids.drop_columns(["row__id"]).to_pylist() == got.to_pylist()


def test_deleted_row_mask_matches_isin() -> None:
    import numpy as np

    from acidstream.acid.delete_registry import deleted_row_mask

    rnd = np.random.default_rng(5)
    for _ in range(300):
        n = int(rnd.integers(0, 60))
        start = int(rnd.integers(-5, 40))
        kind = rnd.integers(0, 3)
        if kind == 0:
            rows_ = np.arange(start, start + n, dtype=np.int64)  # dense (Hive)
        elif kind == 1:
            rows_ = np.sort(rnd.choice(200, n, replace=False)).astype(np.int64)
        else:
            rows_ = rnd.integers(-3, 80, n).astype(np.int64)  # unordered, duplicates
        dels = np.unique(rnd.integers(-5, 100, int(rnd.integers(0, 40)))).astype(np.int64)
        mask = deleted_row_mask(rows_, dels)
        want = np.isin(rows_, dels)
        if mask is None:
            assert not want.any()
        else:
            assert mask.tolist() == want.tolist()
    big = np.iinfo(np.int64).max
    edge = np.array([big - 1, big], dtype=np.int64)
    mask = deleted_row_mask(edge, np.array([big], dtype=np.int64))
    assert mask is not None and mask.tolist() == [False, True]


def test_row_id_groups_sort_dedupe_and_drop_null_keys() -> None:
    from acidstream.acid.delete_registry import RowIdGroups, key_table

    keys = key_table(
        pa.array([3, 1, 1, 3, None, 1, 2], pa.int64()),
        pa.array([B0, B0, B0, B0, B0, -5, B0], pa.int32()),
        pa.array([7, 9, 2, 7, 1, 4, None], pa.int64()),
    )
    g = RowIdGroups(keys)
    assert {k: v.tolist() for k, v in g.groups.items()} == {
        (1, -5): [4],
        (1, B0): [2, 9],
        (3, B0): [7],
    }
    assert g.min_key == (1, -5, 4)
    assert g.row_ids(2, B0).tolist() == []
    # Several groups in one batch: not the fast path's business.
    fast, _ = g.deleted(
        pa.array([1, 3], pa.int64()), pa.array([B0, B0], pa.int32()), pa.array([2, 7], pa.int64())
    )
    assert not fast
    fast, mask = g.deleted(
        pa.array([1, 1, 1], pa.int64()),
        pa.array([B0] * 3, pa.int32()),
        pa.array([1, 2, 9], pa.int64()),
    )
    assert fast and mask is not None and mask.tolist() == [False, True, True]
    sorted_keys = key_table(
        pa.array([1, 1, 2], pa.int64()),
        pa.array([B0, B0, B0], pa.int32()),
        pa.array([0, 5, 1], pa.int64()),
    )
    assert {k: v.tolist() for k, v in RowIdGroups(sorted_keys).groups.items()} == {
        (1, B0): [0, 5],
        (2, B0): [1],
    }


def test_threaded_reads_raise_the_first_error_in_file_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acidstream.acid import reader

    t = str(tmp_path)
    for w in range(1, 4):
        write_delta(t, SCHEMA, w, rows(10 * w, 3))
    # A plain ORC file where a full-ACID one must be: fails when read, not when planned.
    write_original(
        tmp_path / "delta_0000004_0000005" / "bucket_00000",
        {"id": [1], "name": ["x"]},
        types={"id": pa.int32(), "name": pa.string()},
    )
    write_delta(t, SCHEMA, 6, rows(60, 3))
    monkeypatch.setattr(reader, "READ_THREADS", 2)
    monkeypatch.setattr(reader, "THREADED_READ_MIN_AVG_BYTES", 0)  # threads for small files
    it = iter_batches(t)
    got = [next(it) for _ in range(3)]
    assert sorted(x for b in got for x in ids(b)) == [10, 11, 12, 20, 21, 22, 30, 31, 32]
    with pytest.raises(AcidFormatError):
        next(it)


def test_filter_of_the_wrong_type_is_a_config_error(tmp_path: Path) -> None:

    write_delta(str(tmp_path), TableSchema.parse("id int, name string"), 1, [(1, "a")])
    with pytest.raises(ConfigError, match="cannot apply the filter"):
        read_path(tmp_path, filter=[("name", ">", 3)])


def test_multi_stripe_files_stream_stripe_by_stripe(tmp_path: Path) -> None:
    import pyarrow.orc as orc

    from acidstream.acid.orc_inspect import inspect_orc
    from acidstream.acid.writer import OrcWriterOptions

    rnd = random.Random(7)
    n = 60_000
    names = [f"{rnd.getrandbits(64):016x}" for _ in range(n)]
    schema = TableSchema.parse("id int, name string")
    # An original file and an ACID delta, each of several stripes.
    orc.write_table(
        pa.table({"id": pa.array(range(n), pa.int32()), "name": names}),
        str(tmp_path / "000000_0"),
        stripe_size=64 * 1024,
    )
    delta = write_delta(
        str(tmp_path), schema, 1, pa.table({"id": pa.array(range(n, 2 * n), pa.int32()), "name": names}),
        options=OrcWriterOptions(stripe_size=8 * 64 * 1024),
    )  # fmt: skip
    storage, _ = Storage.for_path(str(tmp_path))
    for p in (str(tmp_path / "000000_0"), delta):
        assert inspect_orc(storage, p)[1].nstripes > 2
    b0 = bucket_codec.encode(0)
    dead = [(0, b0, r) for r in range(0, n, 997)] + [(1, b0, r) for r in range(5, n, 1009)]
    write_delete_delta(str(tmp_path), schema, 2, dead)
    expected = [i for i in range(n) if i % 997] + [n + r for r in range(n) if (r - 5) % 1009]
    for cap in (10_000_000, 0):
        batches = list(iter_batches(tmp_path, include_row_id=True, delete_event_cap=cap))
        assert len(batches) > 4  # one per stripe, not one per file
        got = pa.concat_tables(batches).to_pylist()
        assert [r["id"] for r in got] == expected
        # Synthetic rowIds continue across the original file's stripes.
        assert all(r["row__id"]["rowid"] == r["id"] % n for r in got)


def test_partition_directories_are_decoded_by_the_partition_name_codec(tmp_path: Path) -> None:
    from acidstream.acid.partition_name import DEFAULT_PARTITION_NAME, make_partition_name
    from acidstream.acid.partitions import discover_partitions, partition_values_of_path

    schema = TableSchema.parse("id int")
    names = {
        make_partition_name(["ds", "c"], ["2024-01-01", "a/b:c%"]): 1,
        make_partition_name(["ds", "c"], ["2024-01-01", None]): 2,
    }
    for name, i in names.items():
        write_delta(str(tmp_path / name), schema, 1, [(i,)])
    (tmp_path / "_tmp.ds=x").mkdir()  # hidden: not a partition
    storage, root = Storage.for_path(str(tmp_path))
    parts = {p.values for p in discover_partitions(storage, root)}
    assert parts == {
        (("ds", "2024-01-01"), ("c", None)),
        (("ds", "2024-01-01"), ("c", "a/b:c%")),
    }
    assert DEFAULT_PARTITION_NAME in next(iter(n for n, i in names.items() if i == 2))
    got = {r["id"]: (r["ds"], r["c"]) for r in read_path(tmp_path).to_pylist()}
    assert got == {1: ("2024-01-01", "a/b:c%"), 2: ("2024-01-01", None)}
    leaf = next(iter(names))
    assert partition_values_of_path(f"{root}/{leaf}") == (("ds", "2024-01-01"), ("c", "a/b:c%"))


def test_small_files_are_read_in_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threads only for files averaging THREADED_READ_MIN_AVG_BYTES: per small file, the
    GIL-holding work outweighs the decoding threads could overlap."""
    from acidstream.acid import reader

    t = str(tmp_path)
    for w in range(1, 4):
        write_delta(t, SCHEMA, w, rows(10 * w, 3))
    states = [(Partition(t, ()), get_acid_state(t, write_ids=None, txns=ValidTxnList()))]
    monkeypatch.setattr(reader, "READ_THREADS", 4)
    assert reader._threads_for(states) == 1
    monkeypatch.setattr(reader, "THREADED_READ_MIN_AVG_BYTES", 1)
    assert reader._threads_for(states) == 4
    assert reader._threads_for([]) == 1
