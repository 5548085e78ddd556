"""The catalog: Hive's validation, partition names, default locations, persistence."""

from __future__ import annotations

import pytest

from acidstream.acid.errors import ConfigError, TableNotFoundError
from acidstream.acid.partition_name import (
    DEFAULT_PARTITION_NAME,
    escape_path_name,
    make_partition_name,
    parse_partition_name,
    unescape_path_name,
)
from acidstream.txn import TableDef, TxnStore
from acidstream.txn.catalog import default_table_location, validate_table

COLS = (("id", "int"), ("name", "string"))


def _t(**kw: object) -> TableDef:
    args: dict[str, object] = {"columns": COLS, "parameters": {"transactional": "true"}}
    args.update(kw)
    return TableDef("db", "t", **args)  # type: ignore[arg-type]


def test_transactional_properties_default_and_bucketing_version() -> None:
    t = validate_table(_t())
    assert t.parameters["transactional_properties"] == "default"
    assert t.parameters["bucketing_version"] == "2"
    assert t.is_full_acid and t.bucketing_version == 2
    mm = validate_table(
        _t(parameters={"transactional": "TRUE", "transactional_properties": "insert_only"})
    )
    assert mm.is_insert_only and not mm.is_full_acid


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"parameters": {"transactional": "true", "transactional_properties": "x"}}, "default"),
        ({"table_type": "EXTERNAL_TABLE"}, "cannot be external"),
        ({"input_format": "org.apache.hadoop.mapred.TextInputFormat"}, "ACID compliant format"),
        ({"sort_cols": (("id", 1),)}, "since it is sorted"),
        ({"bucket_cols": ("nope",), "num_buckets": 4}, "not a table column"),
        ({"bucket_cols": ("id",)}, "positive number of buckets"),
        ({"partition_keys": (("id", "int"),)}, "repeats a column"),
        ({"partition_keys": (("p", "array<int>"),)}, "primitive type"),
        ({"columns": (("id", "nosuchtype"),)}, "nosuchtype"),
        (
            {"parameters": {"transactional": "false", "transactional_properties": "default"}},
            "not transactional",
        ),
    ],
)
def test_validation_failures(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_table(_t(**kw))


def test_insert_only_tables_need_not_be_orc() -> None:
    t = _t(
        parameters={"transactional": "true", "transactional_properties": "insert_only"},
        input_format="org.apache.hadoop.mapred.TextInputFormat",
    )
    assert validate_table(t).is_insert_only


def test_escape_path_name_matches_hive() -> None:
    assert escape_path_name("a/b:c=d%e") == "a%2Fb%3Ac%3Dd%25e"
    assert escape_path_name("x\"#'*?\\{[]^\x01\x7f") == "x%22%23%27%2A%3F%5C%7B%5B%5D%5E%01%7F"
    assert escape_path_name("2024-01-01 10 h") == "2024-01-01 10 h"
    assert unescape_path_name("a%2Fb%3Ac%3Dd%25e") == "a/b:c=d%e"


def test_partition_names() -> None:
    assert (
        make_partition_name(["DS", "h"], ["2024/01", None])
        == f"ds=2024%2F01/h={DEFAULT_PARTITION_NAME}"
    )
    assert make_partition_name(["ds"], [""]) == f"ds={DEFAULT_PARTITION_NAME}"
    assert parse_partition_name("ds=2024%2F01/h=3") == [("ds", "2024/01"), ("h", "3")]
    with pytest.raises(ConfigError):
        make_partition_name(["a", "b"], ["1"])


def test_default_locations() -> None:
    assert default_table_location("/wh", "default", "t") == "/wh/t"
    assert default_table_location("/wh/", "sales", "t") == "/wh/sales.db/t"


def test_create_get_list_tables(store: TxnStore, warehouse: str) -> None:
    store.create_database("Sales")
    t = store.create_table(
        TableDef(
            "sales",
            "Orders",
            (("id", "int"), ("amount", "decimal(10,2)")),
            partition_keys=(("ds", "string"),),
            bucket_cols=("id",),
            num_buckets=4,
            parameters={"transactional": "true", "orc.compress": "ZLIB"},
        )
    )
    assert t.location == f"{warehouse}/sales.db/orders"
    got = store.get_table("SALES", "orders")
    assert got == t
    assert got.columns == (("id", "int"), ("amount", "decimal(10,2)"))
    assert got.partition_keys == (("ds", "string"),)
    assert got.bucket_cols == ("id",) and got.num_buckets == 4
    assert got.parameters["orc.compress"] == "ZLIB"
    d = store.create_table(TableDef("default", "plain", COLS))
    assert d.location == f"{warehouse}/plain"
    assert [x.full_name for x in store.list_tables()] == ["default.plain", "sales.orders"]
    assert [x.full_name for x in store.list_tables("sales")] == ["sales.orders"]
    assert {db.name for db in store.list_databases()} == {"default", "sales"}


def test_create_table_errors(store: TxnStore) -> None:
    store.create_table(TableDef("default", "t", COLS))
    with pytest.raises(ConfigError, match="already exists"):
        store.create_table(TableDef("default", "t", COLS))
    assert store.create_table(TableDef("default", "t", COLS), if_not_exists=True).name == "t"
    with pytest.raises(TableNotFoundError, match="Database nope"):
        store.create_table(TableDef("nope", "t", COLS))
    with pytest.raises(TableNotFoundError):
        store.get_table("default", "missing")
    with pytest.raises(ConfigError, match="already exists"):
        store.create_database("default")


def test_explicit_location_is_kept(store: TxnStore) -> None:
    t = store.create_table(TableDef("default", "x", COLS, location="/data/x/"))
    assert t.location == "/data/x"


def test_add_partition_creates_once(store: TxnStore, warehouse: str) -> None:
    store.create_table(
        TableDef("default", "p", COLS, partition_keys=(("ds", "string"), ("h", "int")))
    )
    first = store.add_partition("default", "p", ["2024-01-01", "3"])
    assert (first.name, first.exists) == ("ds=2024-01-01/h=3", False)
    assert first.location == f"{warehouse}/p/ds=2024-01-01/h=3"
    again = store.add_partition("default", "p", {"h": "3", "ds": "2024-01-01"})
    assert again.exists and again.location == first.location
    null = store.add_partition("default", "p", [None, "1"])
    assert null.name == f"ds={DEFAULT_PARTITION_NAME}/h=1"
    assert [p.name for p in store.list_partitions("default", "p")] == [
        "ds=2024-01-01/h=3",
        f"ds={DEFAULT_PARTITION_NAME}/h=1",
    ]
    with pytest.raises(ConfigError):
        store.add_partition("default", "p", {"ds": "x"})


def test_table_params(store: TxnStore) -> None:
    store.create_table(TableDef("default", "t", COLS))
    assert store.get_table_param("default", "t", "nope") is None
    store.set_table_param("default", "t", "k", "v")
    assert store.get_table_param("default", "t", "k") == "v"
    with pytest.raises(TableNotFoundError):
        store.get_table_param("default", "missing", "k")
