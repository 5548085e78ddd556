"""List bucketing in the catalog (issue 15, item 1): SkewedInfo stored on both backends,
partitions keep the skew they were created with, validation, migration of older stores."""

from __future__ import annotations

import re

import pytest

from acidstream.acid.errors import ConfigError
from acidstream.acid.list_bucketing import (
    DEFAULT_DIR_NAME,
    DEFAULT_KEY,
    SkewedInfo,
    check_skewed_location,
    parse_skewed_location,
    parse_skewed_values,
)
from acidstream.txn import TableDef, TxnStore, open_store
from acidstream.txn.catalog import ORC_INPUT_FORMAT, ORC_OUTPUT_FORMAT, ORC_SERDE, validate_table
from acidstream.txn.db import Database, Tx
from acidstream.txn.migrations import MIGRATIONS, SCHEMA_VERSION

SKEW_X = SkewedInfo(col_names=("x",), col_values=(("6",), ("20",)), stored_as_dirs=True)


def _table(name: str = "t", *, skewed: SkewedInfo | None = SKEW_X, **kw: object) -> TableDef:
    fields: dict[str, object] = {
        "columns": (("x", "int"), ("y", "string"), ("z", "int")),
        "partition_keys": (("ds", "string"),),
        "parameters": {"transactional": "true"},
        "skewed": skewed,
    }
    fields.update(kw)
    return TableDef(db="db", name=name, **fields)  # type: ignore[arg-type]


@pytest.fixture
def db_store(store: TxnStore) -> TxnStore:
    store.create_database("db")
    return store


# -- round trips -------------------------------------------------------------------------


def test_every_field_round_trips(db_store: TxnStore) -> None:
    skew = SkewedInfo(
        col_names=("X", "y"),  # names are stored lower-case
        col_values=(("6", "a b"), ("20", "it's/=%"), ("-1", "")),
        location_map={("20", "it's/=%"): "hot/20", (DEFAULT_KEY,): "cold"},
        stored_as_dirs=True,
    )
    created = db_store.create_table(_table(skewed=skew))
    expected = SkewedInfo(
        col_names=("x", "y"),
        col_values=skew.col_values,
        location_map={("20", "it's/=%"): "hot/20", (DEFAULT_KEY,): "cold"},
        stored_as_dirs=True,
    )
    assert created.skewed == expected
    assert db_store.get_table("db", "t").skewed == expected
    assert [t.skewed for t in db_store.list_tables("db")] == [expected]
    # The directories follow from the stored definition.
    assert expected.all_dirs() == (
        "x=6/y=a b",
        "hot/20",
        f"x=-1/y={'__HIVE_DEFAULT_PARTITION__'}",
        "cold",
    )


def test_not_stored_as_dirs_and_not_skewed_round_trip(db_store: TxnStore) -> None:
    hint = SkewedInfo(col_names=("z",), col_values=(("1",),), stored_as_dirs=False)
    assert db_store.create_table(_table("a", skewed=hint)).skewed == hint
    assert db_store.get_table("db", "a").skewed == hint
    assert db_store.create_table(_table("b", skewed=None)).skewed is None
    assert db_store.get_table("db", "b").skewed is None
    # Two tables' definitions do not mix.
    assert {t.name: t.skewed for t in db_store.list_tables("db")} == {"a": hint, "b": None}


def test_create_if_not_exists_returns_the_stored_skew(db_store: TxnStore) -> None:
    db_store.create_table(_table())
    again = db_store.create_table(_table(skewed=None), if_not_exists=True)
    assert again.skewed == SKEW_X


# -- partitions keep their own skew ----------------------------------------------------------


def test_partitions_keep_the_skew_they_were_created_with(db_store: TxnStore) -> None:
    db_store.create_table(_table())
    before = db_store.add_partition("db", "t", ["d1"])
    assert not before.exists and before.skewed == SKEW_X

    new_skew = SkewedInfo(col_names=("y", "z"), col_values=(("a", "1"),), stored_as_dirs=True)
    altered = db_store.set_skewed("db", "t", new_skew)
    assert altered.skewed == new_skew
    after = db_store.add_partition("db", "t", {"ds": "d2"})
    assert after.skewed == new_skew
    # Re-adding an existing partition reports its own skew, not the table's.
    again = db_store.add_partition("db", "t", ["d1"])
    assert again.exists and again.skewed == SKEW_X

    db_store.set_skewed("db", "t", None)
    unskewed = db_store.add_partition("db", "t", ["d3"])
    assert unskewed.skewed is None
    assert {p.name: p.skewed for p in db_store.list_partitions("db", "t")} == {
        "ds=d1": SKEW_X,
        "ds=d2": new_skew,
        "ds=d3": None,
    }
    assert db_store.get_table("db", "t").skewed is None


def test_get_partitions_reads_the_named_ones(db_store: TxnStore) -> None:
    db_store.create_table(_table())
    made = {p: db_store.add_partition("db", "t", [p]) for p in ("a", "b")}
    db_store.set_skewed("db", "t", None)
    db_store.add_partition("db", "t", ["c"])
    got = db_store.get_partitions("db", "t", ["ds=a", "ds=c", "ds=missing", "ds=a"])
    assert sorted(got) == ["ds=a", "ds=c"]
    assert (got["ds=a"].location, got["ds=a"].skewed, got["ds=a"].values) == (
        made["a"].location, SKEW_X, ("a",),
    )  # fmt: skip
    assert got["ds=c"].exists and got["ds=c"].skewed is None
    listed = {p.name: p for p in db_store.list_partitions("db", "t")}
    assert all(listed[n] == p for n, p in got.items())
    assert db_store.get_partitions("db", "t", []) == {}


def test_partition_skews_reads_only_the_partitions_with_their_own(db_store: TxnStore) -> None:
    """What a writer needs of a table that is not skewed now: the partitions that keep a
    skew of their own, without listing the others."""
    db_store.create_table(_table(skewed=None))
    for d in ("p1", "p2"):
        db_store.add_partition("db", "t", [d])
    assert db_store.partition_skews("db", "t") == {}  # never skewed: nothing to read
    db_store.set_skewed("db", "t", SKEW_X)
    db_store.add_partition("db", "t", ["s1"])
    db_store.set_skewed("db", "t", None)
    db_store.add_partition("db", "t", ["p3"])
    assert db_store.partition_skews("db", "t") == {"ds=s1": SKEW_X}
    listed = {p.name: p.skewed for p in db_store.list_partitions("db", "t")}
    assert {n: s for n, s in listed.items() if s is not None} == {"ds=s1": SKEW_X}
    assert len(listed) == 4


def test_dynamic_partitions_of_a_commit_copy_the_table_skew(db_store: TxnStore) -> None:
    """The writers' registration (``add_dynamic_partitions`` -> ``ensure_partitions_by_name``)."""
    db_store.create_table(_table())
    (txn,) = db_store.open_txns(1, user="u", host="h")
    wid = db_store.allocate_write_ids([txn], "db", "t")[txn]
    infos = db_store.add_dynamic_partitions(txn, wid, "db", "t", ["ds=a", "ds=b"])
    assert [(p.name, p.exists, p.skewed) for p in infos] == [
        ("ds=a", False, SKEW_X),
        ("ds=b", False, SKEW_X),
    ]
    db_store.commit_txn(txn)
    hint = SkewedInfo(col_names=("x",), col_values=(("6",),), stored_as_dirs=False)
    db_store.set_stored_as_dirs("db", "t", False)
    db_store.set_skewed("db", "t", hint)
    (txn2,) = db_store.open_txns(1, user="u", host="h")
    wid2 = db_store.allocate_write_ids([txn2], "db", "t")[txn2]
    infos = db_store.add_dynamic_partitions(txn2, wid2, "db", "t", ["ds=b", "ds=c"])
    assert [(p.name, p.exists, p.skewed) for p in infos] == [
        ("ds=b", True, SKEW_X),
        ("ds=c", False, hint),
    ]


def test_registration_of_many_and_repeated_partitions(db_store: TxnStore) -> None:
    """More names than one query takes (chunks), and a name given twice in one call."""
    db_store.create_table(_table())
    (txn,) = db_store.open_txns(1, user="u", host="h")
    names = [f"ds={i:03d}" for i in range(450)]
    first = db_store.add_dynamic_partitions(txn, 1, "db", "t", [*names, names[0]])
    assert [p.exists for p in first] == [False] * 450 + [True]
    assert all(p.skewed == SKEW_X for p in first)
    db_store.set_skewed("db", "t", None)
    again = db_store.add_dynamic_partitions(txn, 1, "db", "t", [*names, "ds=new"])
    assert [(p.name, p.exists, p.skewed) for p in again] == [
        *((n, True, SKEW_X) for n in names),
        ("ds=new", False, None),
    ]


def test_alter_location_and_stored_as_dirs_change_only_the_table(db_store: TxnStore) -> None:
    db_store.create_table(_table())
    db_store.add_partition("db", "t", ["old"])
    t = db_store.set_skewed_location("db", "t", ("6",), "hot6/")
    assert t.skewed is not None and t.skewed.location_map == {("6",): "hot6"}
    t = db_store.set_skewed_locations("db", "t", {("20",): "x=twenty", (DEFAULT_KEY,): "rest"})
    assert t.skewed is not None
    assert t.skewed.all_dirs() == ("hot6", "x=twenty", "rest")
    t = db_store.set_stored_as_dirs("db", "t", False)
    assert t.skewed == SkewedInfo(
        col_names=("x",),
        col_values=(("6",), ("20",)),
        location_map={("6",): "hot6", ("20",): "x=twenty", (DEFAULT_KEY,): "rest"},
        stored_as_dirs=False,
    )
    assert not t.skewed.is_list_bucketed
    assert db_store.add_partition("db", "t", ["new"]).skewed == t.skewed
    (old,) = [p for p in db_store.list_partitions("db", "t") if p.name == "ds=old"]
    assert old.skewed == SKEW_X
    # SKEWED BY replaces the definition, location map included.
    t = db_store.set_skewed("db", "t", SKEW_X)
    assert t.skewed == SKEW_X


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"bucket_cols": ("x",), "num_buckets": 4}, "cannot be combined with hash bucketing"),
        ({"partition_keys": ()}, "needs a partitioned table"),
        ({"skewed": SkewedInfo(col_names=("ds",), col_values=(("a",),))}, "'ds' is a partition column"),
        ({"skewed": SkewedInfo(col_names=("w",), col_values=(("a",),))}, "'w' is not a column"),
        ({"skewed": SkewedInfo(col_names=("x", "X"), col_values=(("1", "2"),))}, "'x' is listed twice"),
        ({"skewed": SkewedInfo(col_names=("x", "y"), col_values=(("1",),))}, "has 1 values; SKEWED BY \\(x, y\\) needs 2"),
        ({"skewed": SkewedInfo(col_names=("x",), col_values=(("1",), ("1",)))}, "\\('1'\\) is listed twice"),
        ({"skewed": SkewedInfo(col_names=("x",), col_values=())}, "at least one value tuple"),
        ({"skewed": SkewedInfo(col_names=(), col_values=(("1",),))}, "at least one column"),
        ({"columns": (("_x", "int"),), "skewed": SkewedInfo(col_names=("_x",), col_values=(("1",),))}, "taken for hidden files"),
        ({"skewed": SkewedInfo(col_names=("y",), col_values=(("a\x00b",),))}, "NUL"),
        ({"skewed": SkewedInfo(col_names=("y",), col_values=(("v" * 300,),))}, "bytes escaped"),
        ({"skewed": SkewedInfo(col_names=("x",), col_values=(("6",),), location_map={("7",): "d"})}, "not a declared skewed value tuple"),
        ({"skewed": SkewedInfo(col_names=("x",), col_values=(("6",), ("7",)), location_map={("7",): "x=6"})}, "share the directory 'x=6'"),
        ({"skewed": SkewedInfo(col_names=("x", "y"), col_values=(("6", "a"), ("6", "b")), location_map={("6", "a"): "x=6"})}, "'x=6/y=b' would sit inside 'x=6'"),
    ],
    ids=[
        "hash-bucketed", "unpartitioned", "partition-key", "unknown-column", "duplicate-column",
        "arity", "duplicate-tuple", "no-values", "no-columns", "hidden-dir", "nul-value", "long-value",
        "location-key", "shared-dir", "nested-dir",
    ],
)  # fmt: skip
def test_invalid_definitions_are_refused(changes: dict[str, object], message: str) -> None:
    """The rules (``validate_table``, which create_table and set_skewed both run)."""
    fields: dict[str, object] = {"skewed": SKEW_X, **changes}
    with pytest.raises(ConfigError, match=message):
        validate_table(_table(**fields))  # type: ignore[arg-type]


def test_the_store_refuses_invalid_skew_and_keeps_nothing(db_store: TxnStore) -> None:
    with pytest.raises(ConfigError, match="cannot be combined with hash bucketing"):
        db_store.create_table(_table(bucket_cols=("x",), num_buckets=4))
    with pytest.raises(ConfigError, match="needs a partitioned table"):
        db_store.create_table(_table(partition_keys=()))
    assert db_store.list_tables("db") == []  # nothing half-created
    db_store.create_table(_table())
    bad = SkewedInfo(col_names=("x", "y"), col_values=(("1",),))
    with pytest.raises(ConfigError, match=r"has 1 values; SKEWED BY \(x, y\) needs 2"):
        db_store.set_skewed("db", "t", bad)
    with pytest.raises(ConfigError, match="is absolute"):
        db_store.set_skewed_location("db", "t", ("6",), "/abs/hot")
    with pytest.raises(ConfigError, match="not a declared skewed value tuple"):
        db_store.set_skewed_locations("db", "t", {("6",): "ok", ("7",): "seven"})
    assert db_store.get_table("db", "t").skewed == SKEW_X  # unchanged


@pytest.mark.parametrize(
    ("typ", "value", "message"),
    [
        ("int", "06", "would never match: Hive writes this int value as '6'; declare that"),
        ("int", "six", "'six' of 'v' is not a int value"),
        ("tinyint", "300", "is not a tinyint value"),
        ("double", "6", "writes this double value as '6.0'"),
        ("double", "1e10", "as '1.0E10'"),
        ("boolean", "TRUE", "as 'true'"),
        ("decimal(5,2)", "1.50", "as '1.5'"),
        ("decimal(5,2)", "1234", "is not a decimal(5,2) value"),
        ("date", "2024-1-5", "is not a date value"),
        ("varchar(3)", "abcd", "as 'abc'"),
        ("char(3)", "ab", "as 'ab '"),
        ("array<int>", "1", "must have a primitive type"),
    ],
)
def test_declared_values_must_be_the_text_hive_writes(typ: str, value: str, message: str) -> None:
    """A row matches a declared tuple when its value prints as the tuple's text, so a value
    no row of the column's type prints so is refused instead of never matching."""
    table = TableDef(
        "db",
        "t",
        (("v", typ), ("y", "string")),
        partition_keys=(("ds", "string"),),
        parameters={"transactional": "true"},
        skewed=SkewedInfo(col_names=("v",), col_values=((value,),), stored_as_dirs=True),
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_table(table)


@pytest.mark.parametrize(
    ("typ", "value"),
    [
        ("int", "-6"),
        ("bigint", "9223372036854775807"),
        ("double", "6.0"),
        ("float", "0.1"),
        ("double", "1.0E10"),
        ("boolean", "false"),
        ("decimal(5,2)", "1.5"),
        ("date", "2024-01-05"),
        ("char(3)", "ab "),
        ("string", "06"),
        ("timestamp", "2024-01-05 10:00:00"),
        ("int", ""),
    ],
)
def test_declared_values_in_hive_text_are_accepted(typ: str, value: str) -> None:
    skew = SkewedInfo(col_names=("v",), col_values=((value,),), stored_as_dirs=True)
    table = TableDef(
        "db",
        "t",
        (("v", typ),),
        partition_keys=(("ds", "string"),),
        parameters={"transactional": "true"},
        skewed=skew,
    )
    assert validate_table(table).skewed == skew


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("/abs/dir", "is absolute: list-bucketing directories of a transactional table sit inside"),
        ("hdfs://nn/x", "is absolute"),
        ("c:/x", "is absolute"),
        ("a/../b", "'..'"),
        ("a//b", "empty"),
        ("delta_0000001_0000001", "ACID directory"),
        ("x/base_5", "ACID directory"),
        ("delete_delta_1_1", "ACID directory"),
        ("bucket_00000", "bucket file"),
        ("_tmp", "hidden"),
        (".hidden", "hidden"),
    ],
)
def test_skewed_locations_must_be_relative_directories(location: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_skewed_location(location)
    assert check_skewed_location(" hot/x=6/ ") == "hot/x=6"


def test_alter_needs_a_skewed_table(db_store: TxnStore) -> None:
    db_store.create_table(_table(skewed=None))
    with pytest.raises(ConfigError, match=r"db\.t is not skewed: NOT STORED AS DIRECTORIES"):
        db_store.set_stored_as_dirs("db", "t", False)
    with pytest.raises(ConfigError, match=r"db\.t is not skewed: SET SKEWED LOCATION"):
        db_store.set_skewed_location("db", "t", ("6",), "d")


def test_partition_named_like_the_default_directory_is_refused(db_store: TxnStore) -> None:
    db_store.create_table(_table("plain", skewed=None))
    db_store.add_partition("db", "plain", [DEFAULT_DIR_NAME])  # not list-bucketed: fine
    db_store.create_table(_table())
    with pytest.raises(ConfigError, match=f"ds={DEFAULT_DIR_NAME} is the default list-bucketing"):
        db_store.add_partition("db", "t", [DEFAULT_DIR_NAME])
    (txn,) = db_store.open_txns(1, user="u", host="h")
    with pytest.raises(ConfigError, match="default list-bucketing directory name"):
        db_store.add_dynamic_partitions(txn, 1, "db", "t", ["ds=ok", f"ds={DEFAULT_DIR_NAME}"])
    assert db_store.list_partitions("db", "t") == []  # the whole registration rolled back
    # Declared only (not stored as directories): no directory to confuse it with.
    db_store.set_stored_as_dirs("db", "t", False)
    assert db_store.add_partition("db", "t", [DEFAULT_DIR_NAME]).skewed is not None


# -- the value-list syntax ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cols", "expected"),
    [
        ("(6),(20)", 1, (("6",), ("20",))),
        ("6, 20", 1, (("6",), ("20",))),
        ("(6,20)", 1, (("6",), ("20",))),
        ("((6),(20))", 1, (("6",), ("20",))),
        ("(6)", 1, (("6",),)),
        ("('a',1),('b',2)", 2, (("a", "1"), ("b", "2"))),
        ("(('a',1), ('b',2))", 2, (("a", "1"), ("b", "2"))),
        ("('a',1)", 2, (("a", "1"),)),
        ("('it''s', \"x\\\"y\")", 2, (("it's", 'x"y'),)),
        ("(' a,b ')", 1, ((" a,b ",),)),
    ],
)
def test_value_lists_parse_as_hive_writes_them(
    text: str, cols: int, expected: tuple[tuple[str, ...], ...]
) -> None:
    assert parse_skewed_values(text, cols) == expected


@pytest.mark.parametrize("text", ["", "(6", "(6),,(7)", "('a'", "6 7", "(6)(7)", "()"])
def test_value_list_syntax_errors(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_skewed_values(text, 1)


def test_skewed_location_syntax() -> None:
    assert parse_skewed_location("(6)=hot", 1) == (("6",), "hot")
    assert parse_skewed_location("6 = x=6", 1) == (("6",), "x=6")
    assert parse_skewed_location("('a',1)='a dir'", 2) == (("a", "1"), "a dir")
    with pytest.raises(ConfigError, match="VALUES=LOCATION"):
        parse_skewed_location("(6)", 1)
    with pytest.raises(ConfigError, match="no location"):
        parse_skewed_location("(6)=", 1)


# -- older stores --------------------------------------------------------------------------------


def _database(url: str) -> Database:
    if url.startswith("sqlite:"):
        from acidstream.txn.store_sqlite import SqliteDatabase

        return SqliteDatabase(url)
    from acidstream.txn.store_postgres import PostgresDatabase

    return PostgresDatabase(url)


def _make_version_2_store(url: str) -> None:
    """A metastore with only migrations 1 and 2, holding a partitioned table as version 2
    stored it (no list-bucketing tables)."""
    db = _database(url)

    def body(tx: Tx) -> None:
        tx.x("CREATE TABLE SCHEMA_VERSION (VERSION INTEGER NOT NULL)")
        for version, statements in MIGRATIONS:
            if version <= 2:
                for sql in statements:
                    tx.x(sql)
                tx.x("INSERT INTO SCHEMA_VERSION (VERSION) VALUES (?)", version)
        tx.x(
            "INSERT INTO TBLS (TBL_DB, TBL_NAME, TBL_TYPE, LOCATION, INPUT_FORMAT, "
            "OUTPUT_FORMAT, SERDE, NUM_BUCKETS, OWNER, CREATE_TIME) "
            "VALUES ('default', 'old', 'MANAGED_TABLE', '/w/old', ?, ?, ?, -1, '', 0)",
            ORC_INPUT_FORMAT,
            ORC_OUTPUT_FORMAT,
            ORC_SERDE,
        )
        tx.xmany(
            "INSERT INTO TBL_COLUMNS (COL_DB, COL_TBL, COL_KIND, COL_IDX, COL_NAME, COL_TYPE, "
            "COL_ORDER) VALUES ('default', 'old', ?, 0, ?, ?, NULL)",
            [("c", "x", "int"), ("p", "ds", "string")],
        )
        tx.x(
            "INSERT INTO TABLE_PARAMS (TP_DB, TP_TBL, PARAM_KEY, PARAM_VALUE) "
            "VALUES ('default', 'old', 'transactional', 'true')"
        )
        tx.x(
            "INSERT INTO PARTITIONS (PART_DB, PART_TBL, PART_NAME, LOCATION, CREATE_TIME) "
            "VALUES ('default', 'old', 'ds=a', '/w/old/ds=a', 0)"
        )

    try:
        db.run("make_version_2", body)
        assert db.run("check", lambda tx: tx.has_table("SKEWED_INFO"), write=False) is False
    finally:
        db.close()


def test_a_version_2_store_is_listed_read_only_as_not_skewed(store_url: str) -> None:
    _make_version_2_store(store_url)
    with open_store(store_url, read_only=True) as ro:
        assert ro.schema_version == 2  # not migrated
        (t,) = ro.list_tables()
        assert (t.full_name, t.skewed) == ("default.old", None)
        assert ro.get_table("default", "old").skewed is None
        assert [(p.name, p.skewed) for p in ro.list_partitions("default", "old")] == [
            ("ds=a", None)
        ]
    with open_store(store_url, read_only=True) as ro:
        assert ro.schema_version == 2  # still not migrated by the read-only open


def test_a_version_2_store_is_migrated_when_opened_read_write(store_url: str) -> None:
    _make_version_2_store(store_url)
    with open_store(store_url) as rw:
        assert rw.schema_version == SCHEMA_VERSION >= 3
        assert rw.database.run("has", lambda tx: tx.has_table("SKEWED_INFO"), write=False)
        assert rw.get_table("default", "old").skewed is None
        rw.set_skewed("default", "old", SKEW_X)
        assert rw.add_partition("default", "old", ["b"]).skewed == SKEW_X
        assert {p.name: p.skewed for p in rw.list_partitions("default", "old")} == {
            "ds=a": None,
            "ds=b": SKEW_X,
        }
    with open_store(store_url, read_only=True) as ro:
        assert ro.schema_version == SCHEMA_VERSION
        assert ro.get_table("default", "old").skewed == SKEW_X
