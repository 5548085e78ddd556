"""A partitioned table with no partition directory yet (created and never written, or a
directory an empty Spark micro-batch created) still has its partition columns: read by
name, in Python and through the CLI, it is zero rows with the catalog's columns, typed as
a read of the same table with rows types them (issue 28, follow-up of item 13)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import acidstream
from acidstream.acid.reader import read_path
from acidstream.cli.main import main


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``db.p`` (partitioned by ``ds string, h int``) in the CLI's embedded defaults under
    ``tmp_path``, never written; its location (which does not exist yet)."""
    monkeypatch.setenv("ACIDSTREAM_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    assert (
        main(["create-table", "db.p", "id int, msg string", "--partitioned-by", "ds string, h int"])
        == 0
    )
    location = tmp_path / "wh" / "db.db" / "p"
    assert not location.exists()
    return location


def _schema_with_rows(tmp_path: Path, columns: list[str] | None) -> pa.Schema:
    """The schema a read of ``db.p`` has once a row is committed (the reference)."""
    src = tmp_path / "row.jsonl"
    src.write_text('{"id": 1, "msg": "a", "ds": "x", "h": 7}\n')
    assert main(["ingest", "db.p", "--format", "json", str(src)]) == 0
    t = acidstream.read_table("db.p", columns=columns)
    assert t.num_rows == 1
    return t.schema


@pytest.mark.parametrize("directory", ["exists", "missing"])
@pytest.mark.parametrize("columns", [None, ["id", "ds"], ["h"]])
def test_read_table_of_a_partitioned_table_with_no_partition_has_its_partition_columns(
    table: Path, tmp_path: Path, directory: str, columns: list[str] | None
) -> None:
    if directory == "exists":
        table.mkdir(parents=True)
    empty = acidstream.read_table("db.p", columns=columns)
    assert empty.num_rows == 0
    assert empty.column_names == (columns or ["id", "msg", "ds", "h"])
    assert empty.schema == _schema_with_rows(tmp_path, columns)


def test_reader_given_the_partition_keys_keeps_them_without_any_partition(table: Path) -> None:
    """``acidstream.acid.reader`` itself: the catalog's keys are columns before any directory exists."""
    table.mkdir(parents=True)
    t = read_path(str(table), partition_keys=("ds", "h"), columns=["ds", "h"])
    assert (t.num_rows, t.column_names) == (0, ["ds", "h"])


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acidstream", *argv], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("directory", ["exists", "missing"])
def test_cli_read_of_a_partitioned_table_with_no_partition_has_its_partition_columns(
    table: Path, directory: str
) -> None:
    if directory == "exists":
        table.mkdir(parents=True)
    r = _cli("read", "db.p", "--columns", "id,ds,h", "--format", "table")
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.splitlines() == ["id  ds  h", "--  --  -", "(0 rows)"]
    r = _cli("read", "db.p")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
