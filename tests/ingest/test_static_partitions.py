"""Static partition values follow the conversion and checks of dynamic ones: converted to
the column's type and named by Hive's string of the value (``h=007`` is ``h=7``), refused
with a ConfigError when they do not convert; and the connection's other inputs
(``static_partition`` given as a str, ``write(None)``) are refused as what they are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.cli.main import EXIT_ERROR, main
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.dead_letter import read_dead_letters
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable, snapshot_read

PARTS = (("ds", "date"), ("h", "int"))


def _conn(store: TxnStore, table: str = "p", **kw: Any) -> StreamingConnection:
    opts = kw.pop("options", None)
    return StreamingConnection(
        table, record_writer=StrictJsonWriter(), store=store, options=opts, **kw
    )


def _rec(i: int, **extra: Any) -> bytes:
    return json.dumps({"id": i, "msg": f"m{i}", **extra}).encode()


def _dirs(t: TableDef) -> set[str]:
    assert t.location is not None
    root = Path(t.location)
    return {str(p.relative_to(root)) for p in root.glob("ds=*/h=*")}


def _partitions(store: TxnStore, t: TableDef) -> set[str]:
    return {p.name for p in store.list_partitions(t.db, t.name)}


def test_static_and_dynamic_rows_of_one_value_land_in_one_partition(
    store: TxnStore, make_table: MakeTable
) -> None:
    t = make_table("p", "id int, msg string", partitioned_by=PARTS)
    with _conn(store, static_partition={"ds": "2024-1-5", "h": "007"}) as c:
        c.begin_transaction()
        c.write_many([_rec(1), _rec(2)])
        c.commit_transaction()
    with _conn(store, static_partition=["2024-01-05", "+7"]) as c:  # in key order
        c.begin_transaction()
        c.write(_rec(3))
        c.commit_transaction()
    with _conn(store) as c:  # dynamic: the values are the records' trailing fields
        c.begin_transaction()
        c.write(_rec(4, ds="2024-01-05", h="007"))
        c.write(_rec(5, ds="2024-01-05", h=7))
        c.commit_transaction()
    assert _partitions(store, t) == {"ds=2024-01-05/h=7"}
    assert _dirs(t) == {"ds=2024-01-05/h=7"}
    data = snapshot_read(store, t)
    assert sorted(data.column("id").to_pylist()) == [1, 2, 3, 4, 5]
    assert set(data.column("h").to_pylist()) == {"7"}  # partition values read as text


@pytest.mark.parametrize(
    ("static", "fragment"),
    [
        (
            {"ds": "2024-01-05", "h": "notanint"},
            "'h' of default.p: 'notanint' does not convert to int",
        ),
        (
            {"ds": "2024-13-45", "h": "1"},
            "'ds' of default.p: '2024-13-45' does not convert to date",
        ),
        ({"ds": "2024-01-05", "h": "99999999999"}, "'99999999999' does not convert to int"),
        ({"ds": "2024-01-05", "h": "1.5"}, "'1.5' does not convert to int"),
        ({"ds": "2024-01-05", "h": 7}, "give partition values as text"),
        ({"ds": "2024-01-05"}, "must give exactly ['ds', 'h']"),
        ({"ds": "2024-01-05", "h": "1", "x": "2"}, "must give exactly ['ds', 'h']"),
        (["2024-01-05"], "needs 2 values"),
        ("2024", "is a str: give a mapping"),
        (b"2024", "is a bytes: give a mapping"),
    ],
)
def test_a_static_value_that_does_not_convert_is_refused_before_anything_is_written(
    store: TxnStore, make_table: MakeTable, static: Any, fragment: str
) -> None:
    t = make_table("p", "id int, msg string", partitioned_by=PARTS)
    with pytest.raises(ConfigError) as e:
        _conn(store, static_partition=static)
    assert fragment in str(e.value)
    assert _partitions(store, t) == set() and _dirs(t) == set()
    assert store.show_txns() == []


def test_string_partition_values_are_kept_as_given_and_default_names_the_default(
    store: TxnStore, make_table: MakeTable
) -> None:
    t = make_table("s", "id int", partitioned_by=[("k", "string"), ("v", "varchar(3)")])
    with _conn(store, "s", static_partition={"K": "007", "v": "abcdef"}) as c:
        c.begin_transaction()
        c.write(b'{"id": 1}')
        c.commit_transaction()
    with _conn(store, "s", static_partition={"k": "", "v": "__HIVE_DEFAULT_PARTITION__"}) as c:
        c.begin_transaction()
        c.write(b'{"id": 2}')
        c.commit_transaction()
    with _conn(store, "s") as c:  # dynamic: varchar(3) truncates as the static value did
        c.begin_transaction()
        c.write(b'{"id": 3, "k": "007", "v": "abcxyz"}')
        c.commit_transaction()
    assert _partitions(store, t) == {
        "k=007/v=abc",
        "k=__HIVE_DEFAULT_PARTITION__/v=__HIVE_DEFAULT_PARTITION__",
    }


def test_write_rows_and_arrow_partition_values_are_converted_too(
    store: TxnStore, make_table: MakeTable
) -> None:
    t = make_table("p", "id int, msg string", partitioned_by=PARTS)
    with _conn(store) as c:
        c.begin_transaction()
        c.write_rows([(1, "a")], partition=["2024-01-05", "007"])
        c.write_arrow(pa.table({"id": [2], "msg": ["b"]}), partition=("2024-1-5", "7"))
        with pytest.raises(ConfigError, match=r"'h' of default\.p: 'x' does not convert to int"):
            c.write_rows([(3, "c")], partition=["2024-01-05", "x"])
        c.commit_transaction()
    assert _partitions(store, t) == {"ds=2024-01-05/h=7"}
    assert sorted(snapshot_read(store, t).column("id").to_pylist()) == [1, 2]


def test_write_none_is_a_serialization_error_and_the_txn_goes_on(
    store: TxnStore, make_table: MakeTable, tmp_path: Path
) -> None:
    t = make_table("t", "id int, msg string")
    dead = tmp_path / "dead"
    with _conn(store, "t", options=StreamingOptions(dead_letter_path=str(dead))) as c:
        c.begin_transaction()
        with pytest.raises(SerializationError, match="a record is bytes, not NoneType"):
            c.write(None)  # type: ignore[arg-type]
        with pytest.raises(SerializationError, match="not str"):
            c.write_many([_rec(1), "text"])  # type: ignore[list-item]
        with pytest.raises(SerializationError, match="not NoneType"):
            c.write_block([_rec(9), None])  # type: ignore[list-item]
        c.write(_rec(2))
        c.commit_transaction()
        assert c.stats().bad_records == 2  # write_block refused the block whole
    # Nothing to replay was written as a dead letter; the good records are committed.
    assert list(read_dead_letters(str(dead))) == []
    assert sorted(snapshot_read(store, t).column("id").to_pylist()) == [1, 2]


# ---------------------------------------------------------------- the CLI


def _ingest(tmp_path: Path, *args: str, lines: list[dict[str, Any]]) -> tuple[int, str]:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    proc = subprocess.run(
        [sys.executable, "-m", "acidstream", "ingest", "p", "--format", "json", *args, str(src)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, proc.stderr


def test_cli_static_partition_is_converted_and_joins_the_dynamic_one(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["create-table", "p", "id int", "--partitioned-by", "ds date, h int"]) == 0
    code, err = _ingest(
        tmp_path, "--partition", "ds=2024-1-5", "--partition", "h=007", lines=[{"id": 1}]
    )
    assert code == 0, err
    code, err = _ingest(tmp_path, lines=[{"id": 2, "ds": "2024-01-05", "h": 7}])
    assert code == 0, err
    assert {str(p.relative_to(env / "p")) for p in (env / "p").glob("*/*")} == {"ds=2024-01-05/h=7"}
    capsys.readouterr()
    assert main(["read", "p"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert sorted((r["id"], r["ds"], r["h"]) for r in rows) == [
        (1, "2024-01-05", "7"),
        (2, "2024-01-05", "7"),
    ]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            ["--partition", "ds=2024-01-05", "--partition", "h=notanint"],
            "'notanint' does not convert to int",
        ),
        (
            ["--partition", "ds=2024-13-45", "--partition", "h=1"],
            "'2024-13-45' does not convert to date",
        ),
        (
            ["--partition", "ds=2024-01-05", "--partition", "h=1", "--partition", "h=2"],
            "--partition names 'h' twice",
        ),
    ],
)
def test_cli_bad_static_partition_is_one_line_and_creates_nothing(
    env: Path, tmp_path: Path, args: list[str], fragment: str
) -> None:
    assert main(["create-table", "p", "id int", "--partitioned-by", "ds date, h int"]) == 0
    code, err = _ingest(tmp_path, *args, lines=[{"id": 1}])
    assert code == EXIT_ERROR, err
    assert err.startswith("acidstream: error: ") and err.count("\n") == 1, err
    assert fragment in err and "Traceback" not in err
    assert not (env / "p").exists() or list((env / "p").iterdir()) == []
