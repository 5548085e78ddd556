"""Row placement into list-bucketing directories (``Placement.lb_groups``), Hive's text of
skewed values, and one rowId numbering per bucket across the directories."""

from __future__ import annotations

import datetime
import decimal
import pickle
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from acidstream.acid.errors import SerializationError
from acidstream.acid.hive_text import hive_text, java_float_text
from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME, DEFAULT_KEY, SkewedInfo
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.placement import Placement, TableLayout
from acidstream.acid.row_keys import RowIdSequence
from acidstream.acid.schema import parse_hive_type

DEFAULT2 = f"{DEFAULT_DIR_NAME}/{DEFAULT_DIR_NAME}"


def skew(cols: tuple[str, ...], *values: tuple[str, ...], **kw: Any) -> SkewedInfo:
    return SkewedInfo(col_names=cols, col_values=tuple(values), stored_as_dirs=True, **kw)


def layout(tmp_path: Path, columns: str, sk: SkewedInfo | None, **kw: Any) -> TableLayout:
    cols = tuple(tuple(c.strip().split(" ", 1)) for c in columns.split(","))
    return TableLayout(
        location=str(tmp_path / "t"),
        columns=cols,  # type: ignore[arg-type]
        partition_keys=("p",),
        skewed=sk,
        **kw,
    )


def groups(place: Placement, part: str, data: pa.Table) -> dict[str, list[dict[str, Any]]]:
    out = {d: t.to_pylist() for d, t in place.lb_groups(part, data)}
    assert len(out) == len(place.lb_groups(part, data))  # one group per directory
    return out


def test_rows_go_to_their_tuple_dir_or_the_default_dir_named_as_hive_names_them(
    tmp_path: Path,
) -> None:
    # Column names are lower-cased; names and values escaped; one default name per column.
    sk = skew(("X", "S"), ("6", "a/b"), ("20", "Q:R"))
    place = Placement(layout(tmp_path, "x int, s string", sk))
    data = pa.table(
        {
            "x": [6, 20, 6, 7, None, 20, 6],
            "s": ["a/b", "Q:R", "b", "a/b", "a/b", "q:r", "a/b"],
        }
    )
    got = groups(place, "p=1", data)
    assert got == {
        "x=6/s=a%2Fb": [{"x": 6, "s": "a/b"}, {"x": 6, "s": "a/b"}],
        "x=20/s=Q%3AR": [{"x": 20, "s": "Q:R"}],
        DEFAULT2: [
            {"x": 6, "s": "b"},
            {"x": 7, "s": "a/b"},
            {"x": None, "s": "a/b"},
            {"x": 20, "s": "q:r"},
        ],
    }


def test_an_empty_declared_value_is_named_like_hives_default_partition(tmp_path: Path) -> None:
    sk = skew(("s",), ("",), ("k",))
    place = Placement(layout(tmp_path, "x int, s string", sk))
    got = groups(place, "p=1", pa.table({"x": [1, 2, 3], "s": ["", "k", None]}))
    assert got == {
        "s=__HIVE_DEFAULT_PARTITION__": [{"x": 1, "s": ""}],
        "s=k": [{"x": 2, "s": "k"}],
        # NULL is no declared value (Hive prints no text for it).
        DEFAULT_DIR_NAME: [{"x": 3, "s": None}],
    }


def test_location_map_directories_are_used(tmp_path: Path) -> None:
    sk = skew(("x",), ("6",), location_map={("6",): "six", (DEFAULT_KEY,): "rest"})
    place = Placement(layout(tmp_path, "x int", sk))
    got = groups(place, "p=1", pa.table({"x": [6, 7]}))
    assert got == {"six": [{"x": 6}], "rest": [{"x": 7}]}


@pytest.mark.parametrize(
    ("hive", "values", "texts"),
    [
        ("double", [1.0, 0.1, 1e10, 1.5e-05, -0.0, float("nan"), float("inf")],
         ["1.0", "0.1", "1.0E10", "1.5E-5", "-0.0", "NaN", "Infinity"]),
        ("float", [0.1, 16777216.0], ["0.1", "1.6777216E7"]),
        ("boolean", [True, False], ["true", "false"]),
        ("tinyint", [-5, 7], ["-5", "7"]),
        ("decimal(10,2)", [decimal.Decimal("1.50"), decimal.Decimal("0.00"), decimal.Decimal("10.00")],
         ["1.5", "0", "10"]),
        ("date", [datetime.date(2024, 2, 29)], ["2024-02-29"]),
        ("timestamp", [datetime.datetime(2024, 1, 2, 3, 4, 5), datetime.datetime(1969, 12, 31, 23, 59, 59, 500000)],
         ["2024-01-02 03:04:05", "1969-12-31 23:59:59.5"]),
        ("char(4)", ["ab", "abcdef"], ["ab  ", "abcd"]),
        ("varchar(3)", ["abcdef"], ["abc"]),
        ("binary", [b"ab"], ["61 62"]),
    ],
)  # fmt: skip
def test_hive_text_is_what_java_prints(hive: str, values: list[Any], texts: list[str]) -> None:
    t = parse_hive_type(hive)
    arr = pa.array([*values, None], t.to_arrow())
    assert hive_text(arr, t).to_pylist() == [*texts, None]


def test_java_float_text_switches_to_scientific_at_javas_bounds() -> None:
    assert [java_float_text(x) for x in (0.001, 0.0009, 9999999.0, 1e7)] == [
        "0.001",
        "9.0E-4",
        "9999999.0",
        "1.0E7",
    ]


def test_skewed_values_of_every_kind_match_their_hive_text(tmp_path: Path) -> None:
    sk = skew(("d", "b"), ("1.0", "true"))
    place = Placement(layout(tmp_path, "d double, b boolean", sk))
    got = groups(place, "p=1", pa.table({"d": [1.0, 1.0, 1.5], "b": [True, False, True]}))
    assert got == {
        "d=1.0/b=true": [{"d": 1.0, "b": True}],
        DEFAULT2: [{"d": 1.0, "b": False}, {"d": 1.5, "b": True}],
    }


def test_rows_to_table_routes_like_arrow_blocks(tmp_path: Path) -> None:
    sk = skew(("c",), ("ab",))
    place = Placement(layout(tmp_path, "c char(2), n int", sk))
    t = place.rows_to_table([("ab", 1), ("zz", 2)])
    assert groups(place, "p=1", t) == {
        "c=ab": [{"c": "ab", "n": 1}],
        DEFAULT_DIR_NAME: [{"c": "zz", "n": 2}],
    }
    with pytest.raises(SerializationError):
        place.rows_to_table([("ab", "not a number")])


def test_partition_created_before_the_skew_keeps_the_plain_layout(tmp_path: Path) -> None:
    sk = skew(("x",), ("6",))
    place = Placement(layout(tmp_path, "x int", sk, partition_skews={"p=old": None}))
    data = pa.table({"x": [6, 7]})
    assert place.lb_groups("p=old", data) == [("", data)]
    assert not place.is_list_bucketed("p=old")
    # A partition this write creates takes the table's skew...
    assert set(groups(place, "p=new", data)) == {"x=6", DEFAULT_DIR_NAME}
    # ...unless the catalog says it was created with another one.
    place.note_partition("p=new", None)
    assert place.lb_groups("p=new", data) == [("", data)]


def test_partition_keeps_its_own_skew_when_the_table_is_no_longer_skewed(tmp_path: Path) -> None:
    own = skew(("x",), ("7",))
    place = Placement(layout(tmp_path, "x int", None, partition_skews={"p=1": own}))
    assert set(groups(place, "p=1", pa.table({"x": [6, 7]}))) == {"x=7", DEFAULT_DIR_NAME}
    assert not place.is_list_bucketed("p=2")


def test_a_list_bucketed_partition_named_like_the_default_dir_is_refused_when_noted(
    tmp_path: Path,
) -> None:
    place = Placement(layout(tmp_path, "x int", None))
    name = place.partition_dir([DEFAULT_DIR_NAME])  # the table is not list-bucketed: allowed
    place.note_partition(name, None)  # nor is this partition
    with pytest.raises(SerializationError, match=DEFAULT_DIR_NAME):
        place.note_partition(name, skew(("x",), ("7",)))  # but this one is


def test_skew_not_stored_as_directories_places_nothing_in_directories(tmp_path: Path) -> None:
    declared = SkewedInfo(col_names=("x",), col_values=(("6",),), stored_as_dirs=False)
    lay = TableLayout.of(_Table(str(tmp_path), declared), partitions=[_Part("p=1", declared)])
    assert lay.skewed is None and lay.partition_skews == {"p=1": None}


def test_default_dir_name_as_partition_value_is_a_bad_record(tmp_path: Path) -> None:
    place = Placement(layout(tmp_path, "x int", skew(("x",), ("6",))))
    with pytest.raises(SerializationError, match=DEFAULT_DIR_NAME):
        place.partition_dir([DEFAULT_DIR_NAME])
    assert place.partition_dir(["ok"]) == "p=ok"
    # Not list-bucketed: an ordinary value.
    plain = Placement(layout(tmp_path, "x int", None))
    assert plain.partition_dir([DEFAULT_DIR_NAME]) == f"p={DEFAULT_DIR_NAME}"


def test_table_without_skew_gets_its_block_back_untouched(tmp_path: Path) -> None:
    place = Placement(layout(tmp_path, "x int", None))
    data = pa.table({"x": [6]})
    [(lb, same)] = place.lb_groups("p=1", data)
    assert lb == "" and same is data


def test_layout_with_skews_pickles(tmp_path: Path) -> None:
    lay = layout(tmp_path, "x int", skew(("x",), ("6",)), partition_skews={"p=old": None})
    assert pickle.loads(pickle.dumps(lay)) == lay


def test_bucket_file_inside_the_delta(tmp_path: Path) -> None:
    place = Placement(layout(tmp_path, "x int", skew(("x",), ("6",))))
    assert place.bucket_file("p=1", 5, 5, 2, 0, "x=6") == str(
        tmp_path / "t" / "p=1" / "delta_0000005_0000005_0002" / "x=6" / "bucket_00000"
    )
    assert place.bucket_file("p=1", 5, 5, -1, 0) == str(
        tmp_path / "t" / "p=1" / "delta_0000005_0000005" / "bucket_00000"
    )


def test_files_of_one_bucket_share_its_row_ids(tmp_path: Path) -> None:
    place = Placement(layout(tmp_path, "x int", skew(("x",), ("6",))))
    seq = RowIdSequence()
    writers = {
        lb: place.insert_writer(
            "p=1",
            0,
            min_write_id=1,
            max_write_id=2,
            statement_id=-1,
            streaming=False,
            options=OrcWriterOptions(),
            lb_dir=lb,
            row_ids=seq,
        )
        for lb in ("x=6", DEFAULT_DIR_NAME)
    }
    for wid in (1, 2):
        data = pa.table({"x": [6, 7, 6, 8]})
        for lb, rows in place.lb_groups("p=1", data):
            writers[lb].insert_arrow(wid, rows)
    for w in writers.values():
        w.close()
    keys = []
    for lb in writers:
        path = place.bucket_file("p=1", 1, 2, -1, 0, lb)
        ev = pa_orc.read_table(path)
        keys += list(
            zip(
                *(ev.column(c).to_pylist() for c in ("originalTransaction", "bucket", "rowId")),
                strict=True,
            )
        )
    assert len(keys) == 8 and len(set(keys)) == 8
    # Per write id the rowIds are dense across the bucket's files.
    for wid in (1, 2):
        assert sorted(r for o, _, r in keys if o == wid) == [0, 1, 2, 3]
    # The delta carries the format marker even with every file in a subdirectory.
    assert (tmp_path / "t" / "p=1" / "delta_0000001_0000002" / "_orc_acid_version").exists()


class _Table:
    def __init__(self, root: str, sk: SkewedInfo) -> None:
        self.location = root
        self.columns = (("x", "int"),)
        self.partition_names = ("p",)
        self.bucket_cols: tuple[str, ...] = ()
        self.num_buckets = -1
        self.bucketing_version = 2
        self.full_name = "default.t"
        self.skewed = sk


class _Part:
    def __init__(self, name: str, sk: SkewedInfo) -> None:
        self.name = name
        self.skewed = sk


@pytest.mark.parametrize(
    ("hive", "arrow", "values", "declared"),
    [
        ("int", pa.int64(), [6, 7, -6, 60, 6], ["6", "-6"]),
        ("bigint", pa.int64(), [2**40, 5, 2**40 + 1], [str(2**40)]),
        ("string", pa.large_string(), ["a", "A", "a ", "b"], ["a", "b"]),
        ("date", pa.date32(), [datetime.date(2024, 2, 29), datetime.date(2024, 3, 1)],
         ["2024-02-29"]),
        ("boolean", pa.bool_(), [True, False, True], ["true"]),
    ],
)  # fmt: skip
def test_rows_matched_on_their_values_agree_with_their_text(
    tmp_path: Path, hive: str, arrow: pa.DataType, values: list[Any], declared: list[str]
) -> None:
    # Integers, strings, dates and booleans are matched on the values themselves (also
    # when the block's Arrow type is wider than the table's); the directory each row gets
    # must be the one its Hive text names.
    sk = skew(("v",), *[(d,) for d in declared])
    place = Placement(layout(tmp_path, f"v {hive}", sk))
    data = pa.table({"v": pa.array([*values, None], arrow)})
    t = parse_hive_type(hive)
    expected: dict[str, list[Any]] = {}
    for v, text in zip(
        data.column("v").to_pylist(), hive_text(data.column("v"), t).to_pylist(), strict=True
    ):
        d = f"v={text}" if text in declared else DEFAULT_DIR_NAME
        expected.setdefault(d, []).append(v)
    got = {d: g.column("v").to_pylist() for d, g in place.lb_groups("p=1", data)}
    assert got == expected
    assert len(got) >= 2
