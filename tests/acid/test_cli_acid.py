"""``acidstream read | dump | ls``: output forms and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acidstream.acid.schema import TableSchema
from acidstream.acid.writer import write_delete_delta, write_delta
from acidstream.cli.main import main
from tests.acid.orc_builders import write_side_file
from tests.acid.test_corpus import CLI_COMPLETE  # noqa: F401  (stubs cli.txn_cmds if missing)

SCHEMA = TableSchema.parse("id int, price decimal(10,2), day date")


@pytest.fixture
def table(tmp_path: Path) -> Path:
    import datetime as dt
    import decimal

    write_delta(
        str(tmp_path),
        SCHEMA,
        1,
        [(1, decimal.Decimal("1.50"), dt.date(2024, 1, 2)), (2, None, None)],
    )
    write_delete_delta(str(tmp_path), SCHEMA, 2, [(1, 536870912, 1)])
    return tmp_path


def run(capsys: Any, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_read_jsonl_with_row_id_and_string_forms(table: Path, capsys: Any) -> None:
    code, out, _ = run(capsys, "read", str(table), "--row-id")
    assert code == 0
    assert [json.loads(x) for x in out.splitlines()] == [
        {
            "row__id": {"writeid": 1, "bucketid": 536870912, "rowid": 0},
            "id": 1,
            "price": "1.50",
            "day": "2024-01-02",
        }
    ]
    code, out, _ = run(
        capsys, "read", str(table), "--write-ids", "db.t:1:9223372036854775807::", "--columns", "id"
    )
    assert [json.loads(x) for x in out.splitlines()] == [{"id": 1}, {"id": 2}]


def test_read_table_format(table: Path, capsys: Any) -> None:
    code, out, _ = run(capsys, "read", str(table), "--format", "table")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["id", "price", "day"] and lines[-1] == "(1 rows)"
    assert lines[2].split() == ["1", "1.50", "2024-01-02"]


def test_dump_prints_metadata_then_events(table: Path, capsys: Any) -> None:
    f = next(table.glob("delete_delta_*/bucket_00000"))
    code, out, _ = run(capsys, "dump", str(f))
    lines = [json.loads(x) for x in out.splitlines()]
    assert code == 0
    meta = lines[0]["metadata"]
    assert meta["is_acid"] and meta["acid_version"] == 2 and meta["acid_stats"] == [0, 0, 1]
    assert meta["key_index"] == [[1, 536870912, 1]] and meta["flush_lengths"] is None
    assert lines[1:] == [
        {
            "operation": 2,
            "originalTransaction": 1,
            "bucket": 536870912,
            "rowId": 1,
            "currentTransaction": 2,
            "row": None,
        }
    ]


def test_ls_lists_deltas(table: Path, capsys: Any) -> None:
    code, out, _ = run(capsys, "ls", str(table))
    assert code == 0
    kinds = [line.split()[1] for line in out.splitlines()[2:]]
    assert kinds == ["delta", "delete_delta"]
    assert out.splitlines()[0].split() == ["PARTITION", "KIND", "NAME", "DETAIL"]


@pytest.mark.parametrize(
    "args, phrase",
    [
        (["read", "/nonexistent/table"], "no such"),
        (["read", "db.table"], "db.table"),
        (["ls", "/nonexistent/table"], "no such"),
        (["dump", "/nonexistent/file"], "no such"),
        (["read", "{t}", "--columns", "nope"], "unknown column"),
        (["read", "{t}", "--write-ids", "garbage"], "ValidWriteIdList"),
        (["dump", "{f}", "--flush-length", "zz"], "--flush-length"),
    ],
)
def test_errors_are_one_line(table: Path, capsys: Any, args: list[str], phrase: str) -> None:
    f = next(table.glob("delta_*/bucket_00000"))
    argv = [a.format(t=table, f=f) for a in args]
    code, _out, err = run(capsys, *argv)
    assert (
        code == 1
        and phrase in err
        and len(err.strip().splitlines()) == 1
        and "Traceback" not in err
    )


def test_corrupt_side_file_error(tmp_path: Path, capsys: Any) -> None:
    d = tmp_path / "delta_0000001_0000002"
    d.mkdir()
    src = Path(write_delta(str(tmp_path / "x"), SCHEMA, 1, [(1, None, None)]))
    (d / "bucket_00000").write_bytes(src.read_bytes())
    write_side_file(d / "bucket_00000", [], raw=b"")
    for argv in (["read", str(tmp_path)], ["dump", str(d / "bucket_00000")], ["ls", str(tmp_path)]):
        code, _, err = run(capsys, *argv)
        assert code == 1 and "not readable" in err and len(err.strip().splitlines()) == 1


EVERY_TYPE = TableSchema.parse(
    "b boolean, ti tinyint, si smallint, i int, l bigint, f float, d double, "
    "dec decimal(38,18), s string, vc varchar(4), ch char(3), bin binary, dt date, "
    "ts timestamp, arr array<double>, ms map<string,int>, mi map<int,string>, "
    "st struct<x:int,y:binary>"
)


def _strict_loads(line: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(line, parse_constant=refuse)


def test_jsonl_has_one_strict_form_per_type(tmp_path: Path, capsys: Any) -> None:
    import datetime as dt
    import decimal

    rows = [
        (
            True, -128, 32767, -5, 9223372036854775807, 0.1, float("nan"),
            decimal.Decimal("-0.000000000000000001"), "sé\n\"q\"", "abcd", "x", b"plain text",
            dt.date(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59),
            [float("inf"), float("-inf"), 1.5], {"k": 1}, {2: "two"}, (7, b"\xff\x00"),
        ),
        (None,) * 18,
    ]  # fmt: skip
    write_delta(str(tmp_path), EVERY_TYPE, 1, rows)
    code, out, _ = run(capsys, "read", str(tmp_path))
    assert code == 0
    got = [_strict_loads(x) for x in out.splitlines()]
    assert got[0] == {
        "b": True,
        "ti": -128,
        "si": 32767,
        "i": -5,
        "l": 9223372036854775807,
        "f": 0.1,
        "d": "NaN",
        "dec": "-0.000000000000000001",
        "s": 'sé\n"q"',
        "vc": "abcd",
        "ch": "x  ",
        "bin": "cGxhaW4gdGV4dA==",  # base64 even when the bytes are text
        "dt": "0001-01-01",
        "ts": "9999-12-31T23:59:59",
        "arr": ["Infinity", "-Infinity", 1.5],
        "ms": {"k": 1},
        "mi": [{"key": 2, "value": "two"}],
        "st": {"x": 7, "y": "/wA="},
    }
    assert got[1] == dict.fromkeys(EVERY_TYPE.names)
    # The table format prints the same forms, NULL for null.
    code, out, _ = run(capsys, "read", str(tmp_path), "--format", "table", "--columns", "d,dec,bin")
    assert out.splitlines()[2].split() == ["NaN", "-0.000000000000000001", "cGxhaW4gdGV4dA=="]
    assert out.splitlines()[3].split() == ["NULL", "NULL", "NULL"]


def test_dump_is_strict_json_with_wide_timestamps(tmp_path: Path, capsys: Any) -> None:
    import datetime as dt

    schema = TableSchema.parse("ts timestamp, d double")
    path = write_delta(str(tmp_path), schema, 1, [(dt.datetime(9999, 12, 31), float("nan"))])
    code, out, err = run(capsys, "dump", path)
    assert code == 0, err
    events = [_strict_loads(x) for x in out.splitlines()[1:]]
    assert [e["row"] for e in events] == [{"ts": "9999-12-31T00:00:00", "d": "NaN"}]


def _metastore_args(tmp_path: Path) -> list[str]:
    return ["--metastore", f"sqlite:///{tmp_path}/ms.db", "--warehouse", str(tmp_path / "wh")]


def test_empty_catalog_table_reads_as_zero_rows(tmp_path: Path, capsys: Any) -> None:
    ms = _metastore_args(tmp_path)
    code, _, err = run(
        capsys,
        "create-table",
        "db.empty",
        "id int, name string",
        "--partitioned-by",
        "ds string",
        *ms,
    )
    assert code == 0, err
    code, out, err = run(capsys, "read", "db.empty", "--format", "table", *ms)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["id", "name", "ds"] and lines[-1] == "(0 rows)"
    code, out, err = run(capsys, "read", "db.empty", *ms)
    assert code == 0 and out == "", err
    code, out, err = run(capsys, "ls", "db.empty", *ms)
    assert code == 0 and out.splitlines()[0].split() == ["PARTITION", "KIND", "NAME", "DETAIL"]
    assert len(out.splitlines()) == 2
    code, out, err = run(capsys, "read", "db.empty", "--columns", "nope", *ms)
    assert code == 1 and "unknown column" in err


def test_empty_directory_table_prints_header(tmp_path: Path, capsys: Any) -> None:
    write_delta(str(tmp_path), SCHEMA, 1, [(1, None, None)])
    code, out, _ = run(
        capsys,
        "read",
        str(tmp_path),
        "--format",
        "table",
        "--write-ids",
        "db.t:0:9223372036854775807::",
    )
    assert code == 0 and out.splitlines()[0].split() == ["id", "price", "day"]
    assert out.splitlines()[-1] == "(0 rows)"


def test_undecodable_values_are_one_line_errors(tmp_path: Path, capsys: Any) -> None:
    import decimal

    table = tmp_path / "t"
    write_delta(str(table), SCHEMA, 1, [(1, decimal.Decimal("12345678.90"), None)])
    ms = _metastore_args(tmp_path)
    # The catalog says decimal(3,2): the file's value cannot be cast to it.
    code, _, err = run(
        capsys, "create-table", "db.narrow", "id int, price decimal(3,2), day date",
        "--location", str(table), *ms,
    )  # fmt: skip
    assert code == 0, err
    # The delta was written outside the metastore: name its write id in the snapshot.
    snap = ["--write-ids", "db.narrow:1:9223372036854775807::", "--txns", "1:9223372036854775807::"]
    code, _, err = run(capsys, "read", "db.narrow", *snap, *ms)
    assert code == 1 and "decimal" in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


class _BrokenOrc:
    """An ORC file whose stripes fail to decode the way corrupt files make pyarrow fail."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def read(self, columns: Any = None) -> Any:
        raise self.error

    def read_stripe(self, i: int, columns: Any = None) -> Any:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        OSError("bad read in RleDecoderV2::readByte"),
        __import__("pyarrow").ArrowException(
            "Unknown error: Data error in ZlibDecompressionStream"
        ),
        __import__("pyarrow").ArrowInvalid("Invalid: bad decimal"),
    ],
)
def test_decoding_failures_become_acid_format_errors(tmp_path: Path, error: Exception) -> None:
    from acidstream.acid.errors import AcidFormatError
    from acidstream.acid.orc_read import read_orc_columns
    from acidstream.acid.storage import Storage

    storage, _ = Storage.for_path(str(tmp_path))
    for stripe in (None, 0):
        with pytest.raises(AcidFormatError, match=r"x\.orc: cannot decode ORC data"):
            read_orc_columns(
                _BrokenOrc(error),  # type: ignore[arg-type]
                storage=storage,
                path="x.orc",
                length=None,
                stripe=stripe,
            )


def test_values_python_cannot_hold_are_acid_format_errors() -> None:
    import pyarrow as pa

    from acidstream.acid.errors import AcidFormatError
    from acidstream.acid.json_values import json_lines

    beyond = pa.table({"d": pa.array([3_000_000], pa.date32())})  # year 10183: not a Hive date
    with pytest.raises(AcidFormatError, match="column 'd'"):
        list(json_lines(beyond))
