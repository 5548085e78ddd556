"""``acidstream create-table --skewed-by``, ``alter-table``, ``describe``, ``tables``: list
bucketing from the shell (issue 15, item 1), on both backends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME, SkewedInfo
from acidstream.cli.main import main
from acidstream.txn import open_store
from tests.txn.test_list_bucketing_catalog import _make_version_2_store


@pytest.fixture
def base(store_url: str, tmp_path: Path) -> list[str]:
    """Store options of a fresh metastore, on each backend."""
    return ["--metastore", store_url, "--warehouse", str(tmp_path / "wh")]


@pytest.fixture
def sqlite_base(tmp_path: Path) -> list[str]:
    """Store options of a fresh SQLite metastore: the error tests check the command line's
    handling, the same on every backend (the rules are tested on both in tests/txn)."""
    return ["--metastore", f"sqlite:///{tmp_path}/m.db", "--warehouse", str(tmp_path / "wh")]


def _create(base: list[str], *extra: str, table: str = "db.t") -> int:
    return main(
        ["create-table", table, "x int, y string", "--partitioned-by", "ds string", *extra, *base]
    )


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("acidstream: error: "), err
    assert "Traceback" not in err
    return err.strip()


def test_create_table_with_skew_and_list_it(
    base: list[str], store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _create(base, "--skewed-by", "x", "--on", "(6),(20)", "--stored-as-directories") == 0
    assert (
        _create(base, "--skewed-by", "y, x", "--on", "(('a b',1),('it''s',2))", table="db.u") == 0
    )
    assert main(["create-table", "db.v", "x int", *base]) == 0
    capsys.readouterr()
    with open_store(base[1]) as store:
        assert store.get_table("db", "t").skewed == SkewedInfo(
            col_names=("x",), col_values=(("6",), ("20",)), stored_as_dirs=True
        )
        assert store.get_table("db", "u").skewed == SkewedInfo(
            col_names=("y", "x"), col_values=(("a b", "1"), ("it's", "2")), stored_as_dirs=False
        )
        assert store.get_table("db", "v").skewed is None
    assert main(["tables", "db", *base]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-1] == "skewed_by"
    rows = {line.split()[0]: line for line in lines[2:]}
    assert rows["db.t"].endswith("(x) ON ('6'), ('20') STORED AS DIRECTORIES")
    assert rows["db.u"].endswith("(y, x) ON ('a b', '1'), ('it\\'s', '2')")
    assert rows["db.v"].endswith("db.db/v")  # no skew: the column is empty


def test_alter_table_changes_only_partitions_created_afterwards(
    base: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _create(base, "--skewed-by", "x", "--on", "6,20", "--stored-as-directories") == 0
    capsys.readouterr()
    with open_store(base[1]) as store:
        store.add_partition("db", "t", ["before"])
    alter = ["alter-table", "db.t", *base]
    assert (
        main([*alter, "--set-skewed-location", "(6)=hot6", "--set-skewed-location", "20=x=20"]) == 0
    )
    assert main([*alter, "--not-stored-as-directories"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "altered db.t: (x) ON ('6'), ('20') STORED AS DIRECTORIES",
        "altered db.t: (x) ON ('6'), ('20')",
    ]
    with open_store(base[1]) as store:
        t = store.get_table("db", "t")
        assert t.skewed is not None
        assert dict(t.skewed.location_map) == {("6",): "hot6", ("20",): "x=20"}
        assert not t.skewed.stored_as_dirs
        store.add_partition("db", "t", ["middle"])
    assert main([*alter, "--skewed-by", "y", "--on", "('a')", "--stored-as-directories"]) == 0
    with open_store(base[1]) as store:
        store.add_partition("db", "t", ["after"])
    assert main([*alter, "--not-skewed"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "altered db.t: not skewed"
    with open_store(base[1]) as store:
        parts = {p.name: p.skewed for p in store.list_partitions("db", "t")}
        assert store.get_table("db", "t").skewed is None
    assert parts["ds=before"] == SkewedInfo(
        col_names=("x",), col_values=(("6",), ("20",)), stored_as_dirs=True
    )
    assert parts["ds=middle"] is not None and not parts["ds=middle"].stored_as_dirs
    assert parts["ds=after"] == SkewedInfo(
        col_names=("y",), col_values=(("a",),), stored_as_dirs=True
    )
    assert main(["describe", "db.t", "--partitions", *base]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "ds=before  (x) ON ('6'), ('20') STORED AS DIRECTORIES" in out
    assert "ds=middle  (x) ON ('6'), ('20')" in out
    assert "ds=after  (y) ON ('a') STORED AS DIRECTORIES" in out


def test_describe_shows_skew_locations_and_directories(
    base: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _create(base, "--skewed-by", "x", "--on", "(6),(20)", "--stored-as-directories") == 0
    assert main(["alter-table", "db.t", "--set-skewed-location", "(6)=hot/6", *base]) == 0
    capsys.readouterr()
    assert main(["describe", "db.t", *base]) == 0
    out = {
        line.split("  ", 1)[0]: line.split("  ", 1)[1].strip() if "  " in line else ""
        for line in capsys.readouterr().out.splitlines()
    }
    assert out["table"] == "db.t"
    assert out["columns"] == "x int, y string"
    assert out["partitioned_by"] == "ds string"
    assert out["skewed_by"] == "(x) ON ('6'), ('20') STORED AS DIRECTORIES"
    assert out["skewed_locations"] == "('6') -> hot/6"
    assert out["list_bucketing_dirs"] == f"hot/6, x=20, {DEFAULT_DIR_NAME}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--on", "(6)"], "--on and --stored-as-directories need --skewed-by COLS"),
        (["--skewed-by", "x"], "--skewed-by needs --on VALUES"),
        (["--skewed-by", "x", "--on", "(6"], "expected ',' or ')'"),
        (["--skewed-by", "x", "--on", "(6),(6)"], "('6') is listed twice"),
        (["--skewed-by", "x,", "--on", "(6)"], "--skewed-by must be COL[,COL...]"),
        (["--skewed-by", "ds", "--on", "(6)"], "'ds' is a partition column"),
        (["--skewed-by", "w", "--on", "(6)"], "'w' is not a column"),
        (["--skewed-by", "x,y", "--on", "(6)"], "has 1 values; SKEWED BY (x, y) needs 2"),
        (["--skewed-by", "x", "--on", "(06)"], "Hive writes this int value as '6'; declare that"),
        (["--skewed-by", "x", "--on", "(6)", "--buckets", "x:4"], "cannot be combined with hash bucketing"),
    ],
)  # fmt: skip
def test_create_table_errors_are_one_line(
    sqlite_base: list[str], args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _create(sqlite_base, *args) == 1
    assert message in _one_error_line(capsys)


def test_create_unpartitioned_skewed_table_is_refused(
    base: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["create-table", "db.t", "x int", "--skewed-by", "x", "--on", "(1)", *base]) == 1
    assert "db.t: list bucketing (SKEWED BY) needs a partitioned table" in _one_error_line(capsys)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give exactly one of"),
        (["--not-skewed", "--not-stored-as-directories"], "give exactly one of"),
        (["--set-skewed-location", "(6)=/abs/hot"], "is absolute: list-bucketing directories"),
        (["--set-skewed-location", "(6)=../up"], "'..'"),
        (["--set-skewed-location", "(6)=delta_1_1"], "ACID directory"),
        (["--set-skewed-location", "(7)=seven"], "('7'): not a declared skewed value tuple"),
        (["--set-skewed-location", "(6)"], "expected VALUES=LOCATION"),
    ],
)
def test_alter_table_errors_are_one_line(
    sqlite_base: list[str], args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = sqlite_base
    assert _create(base, "--skewed-by", "x", "--on", "(6),(20)", "--stored-as-directories") == 0
    capsys.readouterr()
    assert main(["alter-table", "db.t", *args, *base]) == 1
    assert message in _one_error_line(capsys)
    with open_store(base[1]) as store:  # unchanged
        assert store.get_table("db", "t").skewed == SkewedInfo(
            col_names=("x",), col_values=(("6",), ("20",)), stored_as_dirs=True
        )


def test_alter_a_table_that_is_not_skewed(
    base: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _create(base) == 0
    capsys.readouterr()
    assert main(["alter-table", "db.t", "--not-stored-as-directories", *base]) == 1
    assert "db.t is not skewed" in _one_error_line(capsys)
    assert main(["alter-table", "db.nope", "--not-skewed", *base]) == 1
    assert "db.nope not found" in _one_error_line(capsys)


def test_alter_table_creates_no_metastore(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/none/m.db"
    assert main(["alter-table", "t", "--not-skewed", "--metastore", url]) == 1
    assert f"no metastore at {url}" in _one_error_line(capsys)
    assert not (tmp_path / "none").exists()


def test_errors_through_the_command_have_no_traceback(base: list[str]) -> None:
    """The real entry point in a child process: one line on stderr, exit code 1."""
    assert _create(base) == 0
    done = subprocess.run(
        [sys.executable, "-m", "acidstream.cli.main", "alter-table", "db.t",
         "--skewed-by", "w", "--on", "(6)", *base],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert (
        done.stderr == "acidstream: error: db.t: skewed column 'w' is not a column of the table\n"
    )
    assert done.stdout == ""


def test_tables_lists_a_version_2_store_read_only(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _make_version_2_store(store_url)
    assert main(["tables", "--metastore", store_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["table", "transactional", "partitioned_by", "buckets", "location"]
    assert lines[2].split()[0] == "default.old"
    assert main(["describe", "default.old", "--partitions", "--metastore", store_url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "ds=a  not skewed" in out
    with open_store(store_url, read_only=True) as ro:
        assert ro.schema_version == 2  # the listing migrated nothing
