"""Namespace binding (namespaces are databases): a client bound to A names only A's tables
and links; namespace mode (a metastore setting) binds clients without a namespace to
``default``. Every entry point asks ``acidstream.txn.namespaces``; both backends."""

from __future__ import annotations

from pathlib import Path

import pytest

import acidstream
from acidstream.acid.errors import (
    ConfigError,
    LinkReadOnlyError,
    NamespaceError,
    TableNotFoundError,
)
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_json import StrictJsonWriter
from acidstream.sinks.foreach_batch import AcidSink
from acidstream.txn.catalog import TableDef
from acidstream.txn.migrations import MIGRATIONS
from acidstream.txn.namespaces import (
    NameRef,
    bind_write_name,
    check_namespace_mode,
    parse_name,
    resolve_read,
    resolve_write,
)
from acidstream.txn.store import TxnStore, open_store
from tests.txn.links_helpers import make_namespaces, write


def _conn(store: TxnStore, name: str, namespace: str | None) -> StreamingConnection:
    opts = StreamingOptions(namespace=namespace, housekeeping_interval_s=None)
    return StreamingConnection(name, record_writer=StrictJsonWriter(), store=store, options=opts)


def test_names_parse_into_table_namespace_and_link_owner() -> None:
    assert parse_name("T") == NameRef(None, "t")
    assert parse_name(" A.T ") == NameRef("a", "t")
    assert parse_name("T1@B") == NameRef(None, "t1", "b")
    assert parse_name("a.t1@b") == NameRef("a", "t1", "b")
    for bad in ("", "a.b.c", "t@", "@b", "t@b@c", "a.", "t-1", "t@b.c"):
        with pytest.raises(ConfigError, match="bad table name"):
            parse_name(bad)
    with pytest.raises(ConfigError, match="bad namespace"):
        bind_write_name("t", namespace="a.b")


def test_schema_version_4_holds_the_link_tables(store: TxnStore) -> None:
    versions = [v for v, _ in MIGRATIONS]
    assert versions == sorted(versions) and 4 in versions
    assert store.schema_version == versions[-1]
    assert store.database.run("t", lambda tx: tx.has_table("TBL_LINKS"), write=False)
    assert store.namespace_mode() is False  # off until turned on


def test_a_migration_missing_below_the_highest_is_applied(store_url: str) -> None:
    """A metastore migrated to 4 before a lower version existed (a gap) gets it later:
    migrations apply by recorded version, not above the highest. Simulated by forgetting
    version 2's record (its statements are idempotent)."""
    s = open_store(store_url)
    try:
        s.database.run("forget", lambda tx: tx.x("DELETE FROM SCHEMA_VERSION WHERE VERSION = 2"))
    finally:
        s.close()
    s = open_store(store_url)
    try:
        got = s.database.run(
            "versions", lambda tx: [r[0] for r in tx.q("SELECT VERSION FROM SCHEMA_VERSION")]
        )
    finally:
        s.close()
    assert sorted(got) == [v for v, _ in MIGRATIONS]


def test_bound_client_names_only_its_namespace(store: TxnStore) -> None:
    make_namespaces(store)
    assert resolve_write(store, "t1", namespace="b") == resolve_write(store, "b.t1", namespace="b")
    assert str(resolve_read(store, "T1", namespace="B").table) == "b.t1"
    for resolve in (resolve_read, resolve_write):
        with pytest.raises(NamespaceError, match=r"^b\.t1 is outside namespace a \(the client"):
            resolve(store, "b.t1", namespace="a")  # type: ignore[operator]
    with pytest.raises(TableNotFoundError, match="namespace zz does not exist"):
        resolve_read(store, "t1", namespace="zz")
    # Without namespace mode an unbound client names any db.table, as before namespaces.
    assert str(resolve_write(store, "b.t1")) == "b.t1"
    assert str(resolve_read(store, "t1").table) == "default.t1"


def test_namespace_mode_binds_clients_without_a_namespace_to_default(
    store: TxnStore, store_url: str
) -> None:
    make_namespaces(store)
    store.set_namespace_mode(True)
    other = open_store(store_url)  # the setting is in the metastore: every client sees it
    try:
        assert other.namespace_mode() is True
    finally:
        other.close()
    with pytest.raises(NamespaceError, match="namespace mode is on"):
        resolve_read(store, "b.t1")
    with pytest.raises(NamespaceError, match="namespace mode is on"):
        check_namespace_mode(store, bind_write_name("b.t1"), namespace=None)
    assert str(resolve_write(store, "default.t")) == "default.t"
    assert str(resolve_write(store, "t1", namespace="b")) == "b.t1"
    store.set_namespace_mode(False)
    assert str(resolve_write(store, "b.t1")) == "b.t1"


def test_streaming_connection_is_bound_by_its_namespace_option(store: TxnStore) -> None:
    make_namespaces(store)
    write(store, [("1", range(0, 2))])  # namespace b, table "t1"
    with pytest.raises(NamespaceError, match="outside namespace a"):
        _conn(store, "b.t1", "a")
    store.set_namespace_mode(True)
    with pytest.raises(NamespaceError, match="namespace mode is on"):
        _conn(store, "b.t1", None)
    # Bound to default: T is default.T (here missing).
    with pytest.raises(TableNotFoundError, match="db:default, table:t1"):
        _conn(store, "t1", None)
    with _conn(store, "b.t1", "b") as c:
        assert (c.db, c.table_name) == ("b", "t1")


def test_sink_is_bound_by_its_namespace(store: TxnStore) -> None:
    make_namespaces(store)
    sink = AcidSink(table="t1", namespace="b", metastore=store.url)
    assert (sink.db, sink.table_name) == ("b", "t1")
    with pytest.raises(NamespaceError, match="outside namespace a"):
        AcidSink(table="b.t1", namespace="a", metastore=store.url)
    # Namespace mode is checked when the sink opens its store, on the driver.
    store.set_namespace_mode(True)
    unbound = AcidSink(table="b.t1", metastore=store.url)
    with pytest.raises(NamespaceError, match="namespace mode is on"):
        check_namespace_mode(store, unbound.name, namespace=unbound.namespace)


def test_http_table_settings_take_a_namespace(tmp_path: Path) -> None:
    from acidstream.ingest.http.config import ServerConfig, TableSettings

    assert TableSettings(name="t1", namespace="b").qualified == "b.t1"
    with pytest.raises(NamespaceError, match="outside namespace a"):
        TableSettings(name="b.t1", namespace="a").qualified  # noqa: B018
    cfg = tmp_path / "http.yaml"
    cfg.write_text("tables: {t1: {namespace: b}}\n")
    assert list(ServerConfig.load(cfg, env={}).tables) == ["b.t1"]  # served as /tables/b.t1
    cfg.write_text("tables: {t1@b: {namespace: a}}\n")
    with pytest.raises(LinkReadOnlyError, match="cannot serve t1@b"):
        ServerConfig.load(cfg, env={})


def test_reads_are_bound_too(store: TxnStore) -> None:
    t = make_namespaces(store)
    write(store, [("1", range(0, 2))])
    wh = store.warehouse
    assert t.location is not None
    kw = {"metastore": store.url, "warehouse": wh}
    assert acidstream.read_table("t1", namespace="b", **kw).num_rows == 2
    with pytest.raises(NamespaceError, match="outside namespace a"):
        acidstream.read_table("b.t1", namespace="a", **kw)
    # A registered path is its table: the same binding applies.
    with pytest.raises(NamespaceError, match="outside namespace a"):
        acidstream.read_table(t.location, namespace="a", **kw)
    assert acidstream.read_table(t.location, namespace="b", **kw).num_rows == 2
    store.set_namespace_mode(True)
    with pytest.raises(NamespaceError, match="namespace mode is on"):
        acidstream.read_table("b.t1", **kw)


def test_tables_of_two_namespaces_with_one_name_stay_apart(store: TxnStore) -> None:
    make_namespaces(store)
    store.create_table(
        TableDef(db="a", name="t1", columns=(("id", "bigint"), ("msg", "string")),
                 parameters={"transactional": "true"})
    )  # fmt: skip
    write(store, [("1", range(0, 2))])
    with _conn(store, "t1", "a") as c:
        c.begin_transaction()
        c.write_rows([(7, "a")])
        c.commit_transaction()
    kw = {"metastore": store.url, "warehouse": store.warehouse}
    assert acidstream.read_table("t1", namespace="a", **kw).column("id").to_pylist() == [7]
    assert sorted(acidstream.read_table("t1", namespace="b", **kw).column("id").to_pylist()) == [
        0,
        1,
    ]
