"""One name rule for databases and tables (Hive's: ``[A-Za-z0-9_]``, 1 to 128 characters,
a leading digit allowed): every accepted name is readable everywhere, every other name is
refused at create, and tables an older acidstream created under a looser rule stay usable."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acidstream import read_table
from acidstream.acid.bucket_codec import MAX_BUCKET_ID
from acidstream.acid.errors import ConfigError
from acidstream.cli.main import EXIT_ERROR, main
from acidstream.ingest.connection import StreamingConnection
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import (
    ORC_INPUT_FORMAT,
    ORC_OUTPUT_FORMAT,
    ORC_SERDE,
    TableDef,
    validate_table,
)
from acidstream.txn.db import Tx
from acidstream.txn.store import TxnStore

NAME_MAX_LENGTH = 128  # Hive's, acid.table_name.NAME_MAX_LENGTH
ALPHABET = string.ascii_letters + string.digits + "_"
NAMES = st.text(alphabet=ALPHABET, min_size=1, max_size=NAME_MAX_LENGTH)
COLS = (("id", "int"), ("msg", "string"))
REFUSED = [
    "\u212a",
    "日本",
    "x²",
    "ﬁ",
    "a-b",
    "a b",
    "a.b",
    "",
    " ",
    "é",
    "٣",
    "x" * (NAME_MAX_LENGTH + 1),
]


def _table(db: str, name: str, **kw: object) -> TableDef:
    return TableDef(db, name, COLS, parameters={"transactional": "true"}, **kw)  # type: ignore[arg-type]


def _ingest(store: TxnStore, name: str, ids: list[int]) -> None:
    with StreamingConnection(name, record_writer=StrictJsonWriter(), store=store) as c:
        c.begin_transaction()
        c.write_many(json.dumps({"id": i, "msg": f"m{i}"}).encode() for i in ids)
        c.commit_transaction()


def _read_ids(store: TxnStore, name: str, warehouse: str) -> list[int]:
    data = read_table(name, metastore=store.url, warehouse=warehouse)
    return sorted(data.column("id").to_pylist())


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(db=NAMES, table=NAMES)
def test_every_accepted_name_round_trips_create_ingest_read(
    store: TxnStore, warehouse: str, db: str, table: str
) -> None:
    # One store for every example: a name drawn again (any case) is the same table.
    seen: dict[str, list[int]] = _ROUND_TRIPS.setdefault(store.url, {})
    store.create_database(db, if_not_exists=True)
    created = store.create_table(_table(db, table), if_not_exists=True)
    assert (created.db, created.name) == (db.lower(), table.lower())
    name = f"{db}.{table}"
    key = name.lower()
    new_ids = [len(seen.get(key, [])) + k for k in range(3)]
    seen.setdefault(key, []).extend(new_ids)
    _ingest(store, name, new_ids)
    assert _read_ids(store, name, warehouse) == seen[key]
    assert _read_ids(store, name.upper(), warehouse) == seen[key]
    assert (db.lower(), table.lower()) in {(t.db, t.name) for t in store.list_tables(db)}


_ROUND_TRIPS: dict[str, dict[str, list[int]]] = {}


@pytest.mark.parametrize("bad", REFUSED)
def test_a_name_outside_the_rule_is_refused_at_create(store: TxnStore, bad: str) -> None:
    with pytest.raises(ConfigError, match=r"\[A-Za-z0-9_\], 1 to 128 characters"):
        store.create_database(bad)
    with pytest.raises(ConfigError, match=r"\[A-Za-z0-9_\], 1 to 128 characters"):
        store.create_table(_table("default", bad))
    assert store.list_tables() == [] and [d.name for d in store.list_databases()] == ["default"]


@settings(max_examples=60, deadline=None)
@given(
    name=st.text(min_size=1, max_size=20).filter(
        lambda s: any(c not in ALPHABET for c in s.strip())
    )
)
def test_any_character_outside_the_alphabet_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="invalid table name"):
        validate_table(_table("default", name))


def test_the_longest_name_is_accepted_and_one_more_is_refused(store: TxnStore) -> None:
    longest = "a" * NAME_MAX_LENGTH
    assert store.create_table(_table("default", longest)).name == longest
    with pytest.raises(ConfigError, match="longer than 128 characters"):
        store.create_table(_table("default", longest + "a"))


# ---------------------------------------------------------------- the CLI, end to end


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI's embedded defaults under ``tmp_path``."""
    wh = tmp_path / "wh"
    monkeypatch.setenv("ACIDSTREAM_WAREHOUSE", str(wh))
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    return wh


@pytest.mark.parametrize("name", ["db.1x", "9db.t", "9db.9", "_x._y"])
def test_cli_names_with_a_leading_digit_are_read_listed_and_described(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assert main(["create-table", name, "id int, msg string"]) == 0
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "msg": "m"}) + "\n" for i in range(5)))
    assert main(["ingest", name, "--format", "json", str(src)]) == 0
    capsys.readouterr()
    assert main(["read", name, "--columns", "id"]) == 0
    out, err = capsys.readouterr()
    assert sorted(json.loads(x)["id"] for x in out.splitlines()) == list(range(5)), err
    assert main(["ls", name]) == 0
    assert "delta_0000001_0000001" in capsys.readouterr().out
    assert main(["describe", name]) == 0
    assert name.split(".")[1] in capsys.readouterr().out
    assert main(["tables"]) == 0
    assert name in capsys.readouterr().out


@pytest.mark.parametrize("name", ["db.日本", "db.x²", "日本.t", "db." + "t" * 300])
def test_cli_create_table_refuses_a_name_outside_the_rule_in_one_line(
    env: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    capsys.readouterr()
    assert main(["create-table", name, "id int, msg string"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("acidstream: error: invalid ") and err.count("\n") == 1, err
    assert "[A-Za-z0-9_], 1 to 128 characters" in err
    assert not (env / "db.db").exists() or not any((env / "db.db").iterdir())


# ---------------------------------------------------------------- bucket counts


def test_more_buckets_than_the_bucket_codec_holds_are_refused(store: TxnStore) -> None:
    most = MAX_BUCKET_ID + 1
    ok = store.create_table(_table("default", "most", bucket_cols=("id",), num_buckets=most))
    assert ok.num_buckets == 4096
    for n in (most + 1, 100_000):
        with pytest.raises(ConfigError, match="at most 4096"):
            store.create_table(_table("default", f"b{n}", bucket_cols=("id",), num_buckets=n))
    for n in (0, -1):
        with pytest.raises(ConfigError, match="positive number of buckets"):
            store.create_table(_table("default", f"z{-n}", bucket_cols=("id",), num_buckets=n))
    assert [t.name for t in store.list_tables()] == ["most"]


def test_cli_buckets_over_the_limit_are_refused_at_create_table(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["create-table", "t", "id int, msg string", "--buckets", "id:100000"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("acidstream: error: ") and "at most 4096" in err, err
    assert err.count("\n") == 1
    assert main(["create-table", "t", "id int, msg string", "--buckets", "id:4096"]) == 0


def test_a_bucket_at_the_limit_is_written_and_read(store: TxnStore, warehouse: str) -> None:
    store.create_table(_table("default", "wide", bucket_cols=("id",), num_buckets=4096))
    _ingest(store, "wide", list(range(50)))
    assert _read_ids(store, "wide", warehouse) == list(range(50))


# ---------------------------------------------------------------- older metastores


def _legacy_table(store: TxnStore, db: str, name: str, location: str) -> None:
    """A table as an older acidstream stored it when its name passed ``str.isalnum``."""

    def body(tx: Tx) -> None:
        tx.x(
            "INSERT INTO DBS (NAME, LOCATION, DESCRIPTION, OWNER, CREATE_TIME) "
            "VALUES (?, NULL, '', '', 0) ON CONFLICT (NAME) DO NOTHING",
            db,
        )
        tx.x(
            "INSERT INTO TBLS (TBL_DB, TBL_NAME, TBL_TYPE, LOCATION, INPUT_FORMAT, "
            "OUTPUT_FORMAT, SERDE, NUM_BUCKETS, OWNER, CREATE_TIME) "
            "VALUES (?, ?, 'MANAGED_TABLE', ?, ?, ?, ?, -1, '', 0)",
            db,
            name,
            location,
            ORC_INPUT_FORMAT,
            ORC_OUTPUT_FORMAT,
            ORC_SERDE,
        )
        tx.xmany(
            "INSERT INTO TBL_COLUMNS (COL_DB, COL_TBL, COL_KIND, COL_IDX, COL_NAME, COL_TYPE, "
            "COL_ORDER) VALUES (?, ?, 'c', ?, ?, ?, NULL)",
            [(db, name, i, n, t) for i, (n, t) in enumerate(COLS)],
        )
        tx.xmany(
            "INSERT INTO TABLE_PARAMS (TP_DB, TP_TBL, PARAM_KEY, PARAM_VALUE) VALUES (?, ?, ?, ?)",
            [(db, name, "transactional", "true"), (db, name, "bucketing_version", "2")],
        )

    store.database.run("legacy_table", body)


@pytest.mark.parametrize(("db", "name"), [("db", "日本"), ("x²", "t"), ("db", "ﬁle")])
def test_a_table_an_older_version_created_stays_readable_and_writable(
    store: TxnStore, warehouse: str, tmp_path: Path, db: str, name: str
) -> None:
    # Decision: the stricter rule applies to new names only; a table already in a
    # metastore is looked up as before, so no existing table becomes unreachable.
    _legacy_table(store, db, name, str(tmp_path / "legacy"))
    full = f"{db}.{name}"
    assert _read_ids(store, full, warehouse) == []
    _ingest(store, full, [1, 2, 3])
    assert _read_ids(store, full, warehouse) == [1, 2, 3]
    assert (db, name) in {(t.db, t.name) for t in store.list_tables()}
    # ...but no second such table can be created.
    with pytest.raises(ConfigError, match="invalid"):
        store.create_table(_table(db, name + "2"))
