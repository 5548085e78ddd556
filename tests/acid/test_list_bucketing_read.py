"""Reading tables whose deltas and bases hold list-bucketing directories: the listing
(``DataFile.lb_dir``), and reads that prune by predicates equal unpruned reads."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.directory import get_acid_state
from acidstream.acid.file_writer import AcidFileWriter, RowIdSequence
from acidstream.acid.hive_text import hive_text
from acidstream.acid.layout import base_dir_name, bucket_file_name, delta_dir_name
from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME, SkewedInfo
from acidstream.acid.reader import read_path, scan
from acidstream.acid.schema import TableSchema
from acidstream.acid.snapshot import ValidTxnList
from acidstream.acid.storage import Storage
from acidstream.acid.writer import write_delete_delta
from tests.acid.orc_builders import write_side_file

ALL_TXNS = ValidTxnList()
SCHEMA = TableSchema.parse("x int, s string")


def write_lb_file(
    directory: Path,
    write_id: int,
    lb_dir: str,
    rows: Sequence[tuple[Any, ...]],
    *,
    bucket_id: int = 0,
    kind: str = "insert",
    row_ids: RowIdSequence | None = None,
) -> Path:
    """One ACID file ``directory/lb_dir/bucket_N`` (``lb_dir`` may be ``""``)."""
    st, _ = Storage.for_path(str(directory))
    sub = directory / lb_dir if lb_dir else directory
    path = sub / bucket_file_name(bucket_id)
    w = AcidFileWriter(
        st,
        str(path),
        SCHEMA,
        kind=kind,  # type: ignore[arg-type]
        bucket_id=bucket_id,
        statement_id=0 if kind == "insert" else -1,
        row_ids=row_ids,
    )
    w.insert(write_id, rows)
    w.close()
    return path


def delta(part: Path, write_id: int) -> Path:
    return part / delta_dir_name(write_id, write_id, statement_id=0)


def test_files_in_list_bucketing_dirs_are_listed_with_their_lb_dir(tmp_path: Path) -> None:
    part = tmp_path / "ds=1"
    d = delta(part, 1)
    write_lb_file(d, 1, "x=6", [(6, "a")])
    write_lb_file(d, 1, DEFAULT_DIR_NAME, [(7, "b")], bucket_id=1)
    write_lb_file(d, 1, "", [(8, "c")], bucket_id=2)
    b = part / base_dir_name(3)
    write_lb_file(b, 3, "x=6/y=a", [(6, "a")], kind="base")
    write_lb_file(b, 3, f"{DEFAULT_DIR_NAME}/{DEFAULT_DIR_NAME}", [(6, "z")], kind="base")
    (b / "not_lb").mkdir()  # neither k=v nor the default directory: not read, as before
    s = get_acid_state(str(part), write_ids=None, txns=ALL_TXNS)
    assert s.base is not None
    assert sorted((f.lb_dir, f.name) for f in s.base.files) == [
        (f"{DEFAULT_DIR_NAME}/{DEFAULT_DIR_NAME}", "bucket_00000"),
        ("x=6/y=a", "bucket_00000"),
    ]
    assert s.deltas == ()  # the base at 3 hides delta 1: selection is unchanged


def test_delta_files_directly_and_in_lb_dirs(tmp_path: Path) -> None:
    part = tmp_path / "ds=1"
    d = delta(part, 1)
    write_lb_file(d, 1, "", [(8, "c")], bucket_id=2)
    write_lb_file(d, 1, "x=6", [(6, "a")])
    write_lb_file(d, 1, DEFAULT_DIR_NAME, [(7, "b")], bucket_id=1)
    s = get_acid_state(str(part), write_ids=None, txns=ALL_TXNS)
    (only,) = s.deltas
    got = [
        (f.lb_dir, f.name, f.bucket_id, Path(f.path).relative_to(d).as_posix()) for f in only.files
    ]
    assert got == [
        ("", "bucket_00002", 2, "bucket_00002"),
        (DEFAULT_DIR_NAME, "bucket_00001", 1, f"{DEFAULT_DIR_NAME}/bucket_00001"),
        ("x=6", "bucket_00000", 0, "x=6/bucket_00000"),
    ]


def test_side_file_in_an_lb_dir_gives_the_logical_length(tmp_path: Path) -> None:
    part = tmp_path / "ds=1"
    d = part / delta_dir_name(1, 2)  # a streaming delta (a transaction batch)
    f = write_lb_file(d, 1, "x=6", [(6, "a")])
    size = f.stat().st_size
    write_side_file(f, [size - 1])  # a flushed length below the file's size
    s = get_acid_state(str(part), write_ids=None, txns=ALL_TXNS)
    (df,) = s.deltas[0].files
    assert df.lb_dir == "x=6" and df.length == size and df.logical_length == size - 1


def test_location_map_dirs_are_recognised_when_given(tmp_path: Path) -> None:
    part = tmp_path / "ds=1"
    d = delta(part, 1)
    write_lb_file(d, 1, "custom/six", [(6, "a")])
    info = SkewedInfo(
        col_names=("x",), col_values=(("6",),), location_map={("6",): "custom/six"},
        stored_as_dirs=True,
    )  # fmt: skip
    plain = get_acid_state(str(part), write_ids=None, txns=ALL_TXNS)
    assert plain.deltas[0].files == ()
    mapped = get_acid_state(
        str(part), write_ids=None, txns=ALL_TXNS, lb_location_dirs=info.all_dirs()
    )
    assert [f.lb_dir for f in mapped.deltas[0].files] == ["custom/six"]


@pytest.mark.parametrize("hidden", ["_tmp", ".x=6"])
def test_hidden_subdirectories_are_not_lb_dirs(tmp_path: Path, hidden: str) -> None:
    part = tmp_path / "ds=1"
    d = delta(part, 1)
    write_lb_file(d, 1, hidden, [(6, "a")])
    assert get_acid_state(str(part), write_ids=None, txns=ALL_TXNS).deltas[0].files == ()


# ------------------------------------------------------------------------------- reads

XSKEW = SkewedInfo(col_names=("x",), col_values=(("6",), ("20",)), stored_as_dirs=True)


def place_rows(
    directory: Path, write_id: int, info: SkewedInfo, rows: Sequence[tuple[Any, ...]]
) -> dict[str, int]:
    """Rows split by list-bucketing directory as the writers place them (Hive's text of
    the skewed values against the declared tuples), one file per directory sharing one
    rowId numbering; returns rows per directory."""
    cols = dict(SCHEMA.columns)
    names = SCHEMA.names
    arrays = {n: pa.array([r[i] for r in rows], cols[n].to_arrow()) for i, n in enumerate(names)}
    texts = [hive_text(arrays[c], cols[c]).to_pylist() for c in info.col_names]
    declared = set(info.col_values)
    by_dir: dict[str, list[tuple[Any, ...]]] = {}
    for r, tup in zip(rows, zip(*texts, strict=True), strict=True):
        d = info.dir_of(tup) if tup in declared else info.default_dir
        by_dir.setdefault(d, []).append(r)
    seq = RowIdSequence()
    for d, rs in sorted(by_dir.items()):
        write_lb_file(directory, write_id, d, rs, row_ids=seq)
    return {d: len(rs) for d, rs in by_dir.items()}


def skewed_table(root: Path) -> dict[tuple[tuple[str, str | None], ...], SkewedInfo]:
    """``root/ds=1`` (list-bucketed on x) and ``root/ds=2`` (plain), three deltas each."""
    for w in (1, 2, 3):
        rows = [(x, f"w{w}r{x}") for x in (6, 6, 20, 7, 8, w)]
        place_rows(delta(root / "ds=1", w), w, XSKEW, rows)
        write_lb_file(delta(root / "ds=2", w), w, "", rows)
    return {(("ds", "1"),): XSKEW}


def sorted_rows(t: pa.Table) -> list[tuple[Any, ...]]:
    rows = zip(*(t.column(i).to_pylist() for i in range(t.num_columns)), strict=True)
    return sorted(rows, key=repr)  # NULLs do not compare


@pytest.mark.parametrize(
    ("preds", "skipped"),
    [
        ([("x", "=", 6)], 6),  # x=20 and the default dir of three deltas
        ([("x", "in", (6, 20))], 3),
        ([("x", "=", 7)], 6),
        ([("x", "!=", 6)], 3),
        ([("x", "=", 6), ("s", "=", "w1r6")], 6),
        ([("x", ">", 6)], 0),  # not understood: every directory
        ([("s", "=", "w1r6")], 0),
    ],
)
def test_pruned_read_equals_the_unpruned_read(
    tmp_path: Path, preds: list[tuple[str, str, Any]], skipped: int
) -> None:
    skews = skewed_table(tmp_path)
    full = read_path(tmp_path, filter=preds, schema=SCHEMA)
    s = scan(tmp_path, filter=preds, schema=SCHEMA, skews=skews)
    got = pa.concat_tables([s.schema.empty_table(), *s.batches])
    assert sorted_rows(got) == sorted_rows(full)
    assert s.lb_files_skipped == skipped
    assert full.num_rows > 0


def test_without_skews_or_schema_or_with_an_expression_nothing_is_pruned(tmp_path: Path) -> None:
    import pyarrow.compute as pc

    skews = skewed_table(tmp_path)
    want = sorted_rows(read_path(tmp_path, filter=[("x", "=", 6)], schema=SCHEMA))
    for kw in (
        {"filter": [("x", "=", 6)], "schema": SCHEMA},  # a bare location: no catalog
        {"filter": [("x", "=", 6)], "skews": skews},  # no schema: types unknown
        {"filter": pc.field("x") == 6, "schema": SCHEMA, "skews": skews},
    ):
        s = scan(tmp_path, **kw)  # type: ignore[arg-type]
        assert s.lb_files_skipped == 0
        assert sorted_rows(pa.concat_tables([s.schema.empty_table(), *s.batches])) == want


def test_every_row_of_lb_dirs_is_read_and_deletes_apply_across_them(tmp_path: Path) -> None:
    part = tmp_path / "ds=1"
    counts = place_rows(delta(part, 1), 1, XSKEW, [(6, "a"), (7, "b"), (20, "c"), (6, "d")])
    assert counts == {"x=6": 2, "x=20": 1, DEFAULT_DIR_NAME: 1}
    t = read_path(part, include_row_id=True)
    by_s = {r["s"]: r["row__id"] for r in t.to_pylist()}
    assert sorted(by_s) == ["a", "b", "c", "d"]
    # One numbering per bucket across the directories: ROW__IDs are unique.
    assert len({(k["writeid"], k["bucketid"], k["rowid"]) for k in by_s.values()}) == 4
    gone = [by_s["d"], by_s["b"]]
    write_delete_delta(
        str(part), SCHEMA, 2, [(k["writeid"], k["bucketid"], k["rowid"]) for k in gone]
    )
    skews = {(("ds", "1"),): XSKEW}
    for preds in (None, [("x", "=", 6)], [("x", "=", 7)]):
        full = read_path(part, filter=preds, schema=SCHEMA)
        pruned = read_path(part, filter=preds, schema=SCHEMA, skews=skews)
        assert sorted_rows(pruned) == sorted_rows(full)
        assert "d" not in full.column("s").to_pylist() and "b" not in full.column("s").to_pylist()


def test_streaming_file_in_an_lb_dir_is_read_up_to_its_flush_length(tmp_path: Path) -> None:
    part = tmp_path / "ds=1"
    st_, _ = Storage.for_path(str(part))
    path = part / delta_dir_name(1, 2) / "x=6" / "bucket_00000"
    w = AcidFileWriter(
        st_, str(path), SCHEMA, kind="insert", bucket_id=0, streaming=True, side_file=True
    )
    w.insert(1, [(6, "a")])
    w.flush()
    w.insert(2, [(6, "b")])  # written but not flushed: beyond the side file's length
    skews = {(("ds", "1"),): XSKEW}
    assert read_path(part, filter=[("x", "=", 6)], schema=SCHEMA, skews=skews).column(
        "s"
    ).to_pylist() == ["a"]
    w.close()
    assert sorted(read_path(part).column("s").to_pylist()) == ["a", "b"]


def test_base_with_lb_dirs_is_pruned_too(tmp_path: Path) -> None:
    part = tmp_path / "ds=1"
    b = part / base_dir_name(5)
    write_lb_file(b, 5, "x=6", [(6, "a")], kind="base")
    write_lb_file(b, 5, DEFAULT_DIR_NAME, [(7, "b")], kind="base", bucket_id=1)
    s = scan(part, filter=[("x", "=", 7)], schema=SCHEMA, skews={(("ds", "1"),): XSKEW})
    assert s.lb_files_skipped == 1
    assert next(t for t in s.batches if t.num_rows).column("s").to_pylist() == ["b"]


# Filters as the reader takes them: (column, op, value), ANDed.
PREDS = st.lists(
    st.one_of(
        st.tuples(st.just("x"), st.sampled_from(["=", "!=", ">", "<="]), st.integers(5, 8)),
        st.tuples(
            st.just("x"), st.sampled_from(["in", "not in"]),
            st.lists(st.integers(5, 8), min_size=1, max_size=3).map(tuple),
        ),
        st.tuples(st.just("s"), st.sampled_from(["=", "!="]), st.sampled_from(["a", "b"])),
        st.tuples(st.just("x"), st.sampled_from(["is null", "is not null"]), st.none()),
    ),
    min_size=1,
    max_size=3,
)  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(
    declared=st.lists(st.integers(5, 8), min_size=1, max_size=3, unique=True),
    rows=st.lists(
        st.tuples(st.one_of(st.none(), st.integers(5, 8)), st.sampled_from(["a", "b"])),
        min_size=1,
        max_size=12,
    ),
    preds=PREDS,
)
def test_pruned_scan_equals_filtered_full_scan(
    tmp_path_factory: pytest.TempPathFactory,
    declared: list[int],
    rows: list[tuple[Any, ...]],
    preds: list[tuple[str, str, Any]],
) -> None:
    root = tmp_path_factory.mktemp("lb")
    info = SkewedInfo(
        col_names=("x",), col_values=tuple((str(v),) for v in declared), stored_as_dirs=True
    )
    place_rows(delta(root / "ds=1", 1), 1, info, rows)
    full = read_path(root, filter=preds, schema=SCHEMA)
    pruned = read_path(root, filter=preds, schema=SCHEMA, skews={(("ds", "1"),): info})
    assert sorted_rows(pruned) == sorted_rows(full)


def test_empty_snapshot_takes_its_columns_from_a_file_in_an_lb_dir(tmp_path: Path) -> None:
    part = tmp_path / "ds=1"
    write_lb_file(delta(part, 1), 1, "x=6", [(6, "a")])
    t = read_path(part, write_ids="db.t:1:9223372036854775807::1")  # write id 1 aborted
    assert t.num_rows == 0 and t.column_names == ["x", "s", "ds"]
