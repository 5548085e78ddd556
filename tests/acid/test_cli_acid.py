"""``acidstream read | dump | ls``: output forms and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acid.schema import TableSchema
from acid.writer import write_delete_delta, write_delta
from cli.main import main
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
