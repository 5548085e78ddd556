"""``acidstream read --columns``: a column list that names nothing, a column twice or a
column the table lacks is refused in one line, never read as "no columns" (issue 28, 13)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from acidstream.cli.main import EXIT_ERROR, EXIT_USAGE, main


@pytest.fixture
def wh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI's embedded defaults under ``tmp_path``, and a partitioned table with rows."""
    monkeypatch.setenv("ACIDSTREAM_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    assert (
        main(["create-table", "db.t", "id int, msg string", "--partitioned-by", "ds string"]) == 0
    )
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1, "msg": "a", "ds": "x"}\n{"id": 2, "msg": "b", "ds": "y"}\n')
    assert main(["ingest", "db.t", "--format", "json", str(src)]) == 0
    return tmp_path / "wh"


def _read(*argv: str) -> subprocess.CompletedProcess[str]:
    """``acidstream read ARGV`` in a process of its own (a usage error exits it)."""
    return subprocess.run(
        [sys.executable, "-m", "acidstream", "read", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("columns", "complaint"),
    [
        (",", "column 1 of ',' is empty"),
        ("id,,msg", "column 2 of 'id,,msg' is empty"),
        ("id,", "column 2 of 'id,' is empty"),
        ("", "column 1 of '' is empty"),
        ("id,ID", "column 'ID' is named twice in 'id,ID' (columns 1 and 2)"),
    ],
)
def test_read_columns_naming_no_column_or_one_twice_is_a_usage_error(
    wh: Path, columns: str, complaint: str
) -> None:
    proc = _read("db.t", "--columns", columns)
    assert proc.returncode == EXIT_USAGE, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"acidstream read: error: argument --columns: {complaint} (see acidstream read --help)"
    ]
    assert "Traceback" not in proc.stderr


def test_read_columns_naming_a_column_the_table_lacks_is_one_error_line(
    wh: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["read", "db.t", "--columns", "id,nope"]) == EXIT_ERROR
    out = capsys.readouterr()
    assert out.out == ""
    # the columns it has include the partition columns, which --columns takes too
    assert out.err.splitlines() == [
        "acidstream: error: --columns: unknown column 'nope' in table db.t; its columns are id, msg, ds"
    ]
    assert main(["read", "db.t", "--columns", "DS,id"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert sorted(rows, key=lambda r: r["id"]) == [{"ds": "x", "id": 1}, {"ds": "y", "id": 2}]


def test_read_columns_of_a_partitioned_table_with_no_partition_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table directory exists but holds no partition (an empty Spark batch leaves it so):
    the partition column is still a column, and the read has zero rows."""
    monkeypatch.setenv("ACIDSTREAM_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    capsys.readouterr()
    assert main(["create-table", "db.p", "id int", "--partitioned-by", "ds string"]) == 0
    location = Path(capsys.readouterr().out.split(" at ", 1)[1].strip())
    location.mkdir(parents=True)
    assert main(["read", "db.p", "--columns", "id,ds", "--format", "table"]) == 0
    assert capsys.readouterr().out.splitlines() == ["id  ds", "--  --", "(0 rows)"]
