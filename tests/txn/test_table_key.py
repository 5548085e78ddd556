"""Table keys (``acidstream.key`` / ``acidstream.ordering``): checked by the catalog at
create, in Python and the CLI alike, and read back with ``table_key`` (both backends)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from acidstream.acid.errors import ConfigError, TableNotFoundError
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore
from acidstream.txn.table_key import TableKey, table_key
from tests.plugins.store_fixture import Cli


def _table(params: dict[str, str], *, partitioned: bool = False, name: str = "k") -> TableDef:
    return TableDef(
        db="default",
        name=name,
        columns=(("id", "int"), ("b", "string"), ("v", "bigint"), ("tags", "array<string>")),
        partition_keys=(("ds", "string"),) if partitioned else (),
        parameters={"transactional": "true", **params},
    )


def test_key_and_ordering_read_back(store: TxnStore) -> None:
    t = store.create_table(_table({"acidstream.key": " ID , b", "acidstream.ordering": "V"}))
    assert table_key(store.get_table(t.db, t.name)) == TableKey(columns=("id", "b"), ordering="v")


def test_unkeyed_table_has_no_key(store: TxnStore) -> None:
    t = store.create_table(_table({}))
    assert table_key(t) is None


def test_partition_column_may_be_in_the_key_or_not(store: TxnStore) -> None:
    t = store.create_table(_table({"acidstream.key": "id"}, partitioned=True))
    assert table_key(t) == TableKey(columns=("id",))
    t = store.create_table(_table({"acidstream.key": "id,ds"}, partitioned=True, name="k2"))
    assert table_key(t) == TableKey(columns=("id", "ds"))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"acidstream.key": "nope"}, "'nope', which is not a column"),
        ({"acidstream.key": "id,id"}, "names 'id' twice"),
        ({"acidstream.key": "id,"}, "give column names"),
        ({"acidstream.key": "tags"}, "'tags' of type array<string>"),
        ({"acidstream.ordering": "v"}, "acidstream.ordering needs acidstream.key"),
        ({"acidstream.key": "id", "acidstream.ordering": "w"}, "'w', which is not a data column"),
        ({"acidstream.key": "id", "acidstream.ordering": "tags"}, "ordering column must be"),
        (
            {"acidstream.key": "id", "transactional_properties": "insert_only"},
            "needs a full ACID table",
        ),
    ],
)
def test_bad_key_is_refused_at_create(
    store: TxnStore, params: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        store.create_table(_table(params))
    with pytest.raises(TableNotFoundError):
        store.get_table("default", "k")  # nothing stored


def test_key_on_non_transactional_table_refused(store: TxnStore) -> None:
    t = replace(_table({}), parameters={"acidstream.key": "id"})
    with pytest.raises(ConfigError, match="needs a full ACID table"):
        store.create_table(t)


def test_cli_create_table_checks_the_key(cli: Cli, store: TxnStore) -> None:
    code, _, err = cli(
        "create-table", "db.a", "id int, v string", "--tblproperty", "acidstream.key=idd"
    )
    assert code != 0 and "acidstream.key names 'idd'" in err
    code, out, err = cli(
        "create-table", "db.a", "id int, v string", "--tblproperty", "acidstream.key=id"
    )
    assert code == 0, err
    assert out.startswith("created db.a")
    assert table_key(store.get_table("db", "a")) == TableKey(columns=("id",))
