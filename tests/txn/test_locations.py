"""Locations are stored absolute, whatever the cwd of the process that reads them (issue 10,
item 2); a relative location from an older metastore is refused, then fixed explicitly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acidstream.acid.errors import ConfigError
from acidstream.cli.main import main
from acidstream.txn import TableDef, TxnStore, open_store

ROOT = Path(__file__).resolve().parents[2]


def _run(cwd: Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACIDSTREAM_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


_CREATE = """
import sys
from acidstream.cli.main import main
url = sys.argv[1]
sys.exit(
    main(["create-table", "db1.t", "id int", "--partitioned-by", "ds string",
          "--metastore", url, "--warehouse", "wh"])
    or main(["create-table", "db1.u", "id int", "--location", "elsewhere/u",
             "--metastore", url, "--warehouse", "wh"])
)
"""

_READ = """
import json, sys
from acidstream.txn import open_store
with open_store(sys.argv[1], warehouse="wh") as s:
    t, u = s.get_table("db1", "t"), s.get_table("db1", "u")
    p = s.add_partition("db1", "t", {"ds": "2024-01-01"})
    print(json.dumps({"t": t.location, "u": u.location, "p": p.location}))
"""


def test_locations_resolved_once_name_the_same_tree_from_every_cwd(
    store_url: str, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    created = _run(a, _CREATE, store_url)
    assert created.returncode == 0, created.stderr
    # another process, another cwd, the same relative warehouse setting
    read = _run(b, _READ, store_url)
    assert read.returncode == 0, read.stderr
    got = json.loads(read.stdout)
    assert got == {
        "t": f"{a}/wh/db1.db/t",
        "u": f"{a}/elsewhere/u",
        "p": f"{a}/wh/db1.db/t/ds=2024-01-01",
    }
    assert not (b / "wh").exists()


def _make_old_style(store: TxnStore) -> None:
    """What an older acidstream stored: a table and partition relative to its cwd."""
    store.create_table(
        TableDef(
            "default",
            "old",
            (("id", "int"),),
            partition_keys=(("ds", "string"),),
            parameters={"transactional": "true"},
        )
    )
    store.add_partition("default", "old", ["x"])
    store.database.run(
        "make_old",
        lambda tx: (
            tx.x("UPDATE TBLS SET LOCATION = './warehouse/old' WHERE TBL_NAME = 'old'"),
            tx.x("UPDATE PARTITIONS SET LOCATION = './warehouse/old/ds=x'"),
        ),
    )


def test_relative_location_from_an_old_metastore_is_refused_then_migrated(
    store: TxnStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _make_old_style(store)
    with pytest.raises(ConfigError, match=r"default\.old .*'\./warehouse/old'.*set-location"):
        store.get_table("default", "old")
    with pytest.raises(ConfigError, match="relative location"):
        store.add_partition("default", "old", ["y"])
    # a listing still shows it, flagged
    assert [t.location for t in store.list_tables()] == ["./warehouse/old"]
    url = store.url
    assert main(["tables", "--metastore", url]) == 0
    assert "./warehouse/old (relative: run set-location)" in capsys.readouterr().out
    # the explicit migration: table and its default-placed partitions move together
    real = tmp_path / "real" / "old"
    assert main(["set-location", "default.old", str(real), "--metastore", url]) == 0
    assert f"default.old now at {real}" in capsys.readouterr().out
    with open_store(url) as other:
        assert other.get_table("default", "old").location == str(real)
        assert [p.location for p in other.list_partitions("default", "old")] == [f"{real}/ds=x"]


def test_database_and_explicit_locations_are_made_absolute(
    store: TxnStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    d = store.create_database("sales", location="rel/sales.db")
    assert d.location == f"{tmp_path}/rel/sales.db"
    t = store.create_table(
        TableDef("sales", "o", (("id", "int"),), parameters={"transactional": "true"})
    )
    assert t.location == f"{tmp_path}/rel/sales.db/o"
    u = store.create_table(
        TableDef(
            "sales", "p", (("id", "int"),), parameters={"transactional": "true"}, location="x/p"
        )
    )
    assert u.location == f"{tmp_path}/x/p"
    url = TableDef("sales", "q", (("id", "int"),), location="hdfs://nn:8020/w/q")
    assert store.create_table(url).location == "hdfs://nn:8020/w/q"  # a URL is kept as is
