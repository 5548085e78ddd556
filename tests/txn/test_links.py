"""Links (Hive's Links design): metadata in namespace A pointing at B's table, read-only,
static links restricted to their partitions, dynamic ones following B's; reads through a
link take the same snapshot as direct reads, also while B's table is streamed into and
compacted. Both backends."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import acidstream
from acidstream.acid.errors import (
    AcidFormatError,
    ConfigError,
    LinkReadOnlyError,
    NamespaceError,
    TableNotFoundError,
)
from acidstream.compaction.cleaner import Cleaner
from acidstream.compaction.worker import Worker
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_json import StrictJsonWriter
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.namespaces import resolve_read
from acidstream.txn.store import TxnState, TxnStore
from acidstream.txn.usage import namespace_usage
from tests.txn.links_helpers import make_namespaces, walk, write


def _ids(t: object) -> list[int]:
    return sorted(t.column("id").to_pylist())  # type: ignore[attr-defined]


def _read(store_url: str, warehouse: str, name: str, **kw: object) -> list[int]:
    return _ids(acidstream.read_table(name, metastore=store_url, warehouse=warehouse, **kw))


# ------------------------------------------------------------------------ metadata


def test_link_metadata_lives_in_a_and_copies_no_data(store: TxnStore) -> None:
    t = make_namespaces(store)
    write(store, [("1", range(0, 3))])
    assert t.location is not None
    before = walk(t.location)
    link = store.create_link("a", "b", "t1")
    assert (link.full_name, link.dynamic, link.partitions) == ("a.t1@b", False, ())
    assert [x.full_name for x in store.list_links("a")] == ["a.t1@b"]
    assert store.list_links("b") == []
    assert walk(t.location) == before  # nothing written, nothing copied
    store.drop_link("a", "b", "t1")
    assert store.list_links() == []
    assert _read_count(store) == 3  # B's table is untouched by the drop


def _read_count(store: TxnStore) -> int:
    return len(acidstream.read_table("b.t1", metastore=store.url, warehouse=store.warehouse))


def test_link_creation_is_checked(store: TxnStore) -> None:
    make_namespaces(store)
    with pytest.raises(TableNotFoundError, match="Database zz does not exist"):
        store.create_link("zz", "b", "t1")
    with pytest.raises(TableNotFoundError, match=r"b\.nope not found"):
        store.create_link("a", "b", "nope")
    with pytest.raises(ConfigError, match="another namespace's table"):
        store.create_link("b", "b", "t1")
    store.create_link("a", "b", "t1")
    with pytest.raises(ConfigError, match="already exists"):
        store.create_link("a", "b", "t1", dynamic=True)
    with pytest.raises(TableNotFoundError, match="no link t1@b in namespace default"):
        store.get_link("default", "b", "t1")


def test_static_link_partitions_are_validated(store: TxnStore) -> None:
    make_namespaces(store)
    write(store, [("1", range(0, 2))])
    store.create_link("a", "b", "t1")
    assert store.alter_link_partition("a", "b", "t1", "ds=1", add=True).partitions == ("ds=1",)
    with pytest.raises(TableNotFoundError, match="has no partition ds=2"):
        store.alter_link_partition("a", "b", "t1", "ds=2", add=True)
    with pytest.raises(ConfigError, match="already exposes"):
        store.alter_link_partition("a", "b", "t1", "DS=1", add=True)
    with pytest.raises(ConfigError, match="partition keys"):
        store.alter_link_partition("a", "b", "t1", "hr=1", add=True)
    with pytest.raises(ConfigError, match="does not expose"):
        store.alter_link_partition("a", "b", "t1", "ds=9", add=False)
    assert store.alter_link_partition("a", "b", "t1", "ds=1", add=False).partitions == ()
    store.create_link("default", "b", "t1", dynamic=True)
    with pytest.raises(ConfigError, match="dynamic link"):
        store.alter_link_partition("default", "b", "t1", "ds=1", add=True)


# ------------------------------------------------------------------------ reads


def test_static_link_reads_only_its_partitions(store: TxnStore, store_url: str) -> None:
    make_namespaces(store)
    write(store, [("1", range(0, 3)), ("2", range(10, 13)), ("3", range(20, 23))])
    wh = store.warehouse
    assert wh is not None
    store.create_link("a", "b", "t1")
    # A static link with no partition yet exposes nothing.
    assert _read(store_url, wh, "t1@b", namespace="a") == []
    store.alter_link_partition("a", "b", "t1", "ds=1", add=True)
    store.alter_link_partition("a", "b", "t1", "ds=3", add=True)
    got = acidstream.read_table("t1@b", namespace="a", metastore=store_url, warehouse=wh)
    assert _ids(got) == [0, 1, 2, 20, 21, 22]
    assert sorted(set(got.column("ds").to_pylist())) == ["1", "3"]
    # The reader's own filter is ANDed with the link's partitions.
    assert _read(store_url, wh, "t1@b", namespace="a", filter=[("id", ">", 1)]) == [2, 20, 21, 22]
    # New rows in an exposed partition show; a partition added to B later does not.
    write(store, [("1", range(3, 5)), ("4", range(30, 32))])
    assert _read(store_url, wh, "t1@b", namespace="a") == [0, 1, 2, 3, 4, 20, 21, 22]
    # Fully qualified, and without namespace mode the link is named a.t1@b.
    assert _read(store_url, wh, "a.t1@b") == [0, 1, 2, 3, 4, 20, 21, 22]
    assert _read(store_url, wh, "b.t1") == [0, 1, 2, 3, 4, 10, 11, 12, 20, 21, 22, 30, 31]


def test_static_link_partition_dropped_by_the_owner_reads_as_nothing(store: TxnStore) -> None:
    make_namespaces(store)
    write(store, [("1", range(0, 2)), ("2", range(10, 12))])
    store.create_link("a", "b", "t1")
    store.alter_link_partition("a", "b", "t1", "ds=1", add=True)
    store.alter_link_partition("a", "b", "t1", "ds=2", add=True)
    # The owner drops ds=2 from its catalog (acidstream has no DROP PARTITION; Hive's does
    # this to the metastore row), leaving the link's entry behind.
    store.database.run(
        "drop_partition",
        lambda tx: tx.x("DELETE FROM PARTITIONS WHERE PART_DB = 'b' AND PART_NAME = 'ds=2'"),
    )
    link = store.get_link("a", "b", "t1")
    assert link.partitions == ("ds=1", "ds=2") and link.missing == ("ds=2",)
    assert resolve_read(store, "t1@b", namespace="a").partitions == frozenset({"ds=1"})
    assert _read(store.url, store.warehouse or "", "t1@b", namespace="a") == [0, 1]
    # Re-registered by the owner, it shows again.
    store.add_partition("b", "t1", ["2"])
    assert _read(store.url, store.warehouse or "", "t1@b", namespace="a") == [0, 1, 10, 11]


def test_dynamic_link_follows_added_partitions(store: TxnStore, store_url: str) -> None:
    make_namespaces(store)
    wh = store.warehouse or ""
    write(store, [("1", range(0, 2))])
    store.create_link("a", "b", "t1", dynamic=True)
    assert _read(store_url, wh, "t1@b", namespace="a") == [0, 1]
    write(store, [("2", range(10, 12))])
    assert _read(store_url, wh, "t1@b", namespace="a") == [0, 1, 10, 11]
    assert resolve_read(store, "t1@b", namespace="a").partitions is None


def test_link_to_an_unpartitioned_table_exposes_it_whole(store: TxnStore) -> None:
    make_namespaces(store, partitioned=False)
    write(store, [(None, range(0, 3))])
    store.create_link("a", "b", "t1")
    assert _read(store.url, store.warehouse or "", "t1@b", namespace="a") == [0, 1, 2]
    with pytest.raises(ConfigError, match="not partitioned"):
        store.alter_link_partition("a", "b", "t1", "ds=1", add=True)


def test_link_reads_take_the_same_snapshot_as_direct_reads(store: TxnStore) -> None:
    make_namespaces(store)
    wh = store.warehouse or ""
    write(store, [("1", range(0, 3))])
    store.create_link("a", "b", "t1", dynamic=True)
    txns = store.get_valid_txns()
    wids = store.get_valid_write_ids("b", "t1", txns)
    write(store, [("1", range(3, 6))])  # committed after the snapshot
    snap = {"write_ids": wids, "txns": txns}
    direct = acidstream.read_table("b.t1", metastore=store.url, warehouse=wh, **snap)
    linked = acidstream.read_table("t1@b", namespace="a", metastore=store.url, warehouse=wh, **snap)
    assert _ids(linked) == _ids(direct) == [0, 1, 2]
    assert _read(store.url, wh, "t1@b", namespace="a") == list(range(6))


# ------------------------------------------------------------------------ writes


def test_every_python_writer_refuses_a_link(store: TxnStore) -> None:
    from acidstream.ingest.http.config import TableSettings as HttpTable
    from acidstream.jobs.config import TableSettings as JobTable
    from acidstream.sinks.foreach_batch import AcidSink

    make_namespaces(store)
    store.create_link("a", "b", "t1", dynamic=True)
    opts = StreamingOptions(namespace="a", housekeeping_interval_s=None)
    for name, options in (("t1@b", opts), ("a.t1@b", None)):
        with pytest.raises(LinkReadOnlyError, match="links are read-only"):
            StreamingConnection(
                name, record_writer=StrictJsonWriter(), store=store, options=options
            )
    with pytest.raises(LinkReadOnlyError, match="cannot sink into t1@b"):
        AcidSink(table="t1@b", namespace="a", metastore=store.url)
    with pytest.raises(LinkReadOnlyError, match="cannot serve t1@b"):
        HttpTable(name="t1@b")
    with pytest.raises(LinkReadOnlyError, match=r"cannot run the Kafka job into a\.t1@b"):
        JobTable(name="a.t1@b", columns="id bigint")
    assert [t for t in store.show_txns() if t.state == TxnState.OPEN] == []  # none opened


# ------------------------------------------------------------- streaming + compaction


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_reads_through_a_link_see_exactly_committed_txns_while_streamed_and_compacted(
    dynamic: bool, store_factory: Callable[[], TxnStore]
) -> None:
    """A writer thread commits txns of 4 rows into ds=x (and, for the static link, ds=y
    which the link does not expose) while the main thread compacts, cleans and reads
    through the link: every read holds whole txns only, a prefix of the commits, between
    what was committed before the read and after it."""
    admin = store_factory()
    make_namespaces(admin)
    admin.add_partition("b", "t1", ["x"])
    admin.add_partition("b", "t1", ["y"])
    admin.create_link("a", "b", "t1", dynamic=dynamic)
    if not dynamic:
        admin.alter_link_partition("a", "b", "t1", "ds=x", add=True)
    n_txns, per = 24, 4
    committed = [0]  # txns of ds=x committed so far (the writer's count)
    # txns whose commit has begun: a read may see a commit before the writer's count does
    begun = [0]
    failure: list[BaseException] = []
    started = threading.Event()
    # The writer waits halfway until a read has run, and before its last txn until a read
    # has begun past halfway, so reads surely see the stream at several points (a fast
    # writer once finished its second half during one slow read and compaction).
    go_on = threading.Event()
    late_read = threading.Event()

    def writer() -> None:
        try:
            s = store_factory()
            opts = StreamingOptions(namespace="b", housekeeping_interval_s=None)
            with StreamingConnection(
                "t1", record_writer=StrictJsonWriter(), store=s, options=opts
            ) as c:
                for i in range(n_txns):
                    c.begin_transaction()
                    c.write_rows([(i * per + k, "x") for k in range(per)], partition=["x"])
                    if not dynamic:
                        c.write_rows([(100_000 + i, "y")], partition=["y"])
                    begun[0] = i + 1
                    c.commit_transaction()
                    committed[0] = i + 1
                    started.set()
                    if i + 1 == n_txns // 2:
                        go_on.wait(timeout=60)
                    if i + 2 == n_txns:
                        late_read.wait(timeout=60)
        except BaseException as e:
            failure.append(e)
            started.set()
            raise

    t = threading.Thread(target=writer, name="link-writer")
    t.start()
    started.wait(timeout=60)
    reader = store_factory()
    queue = CompactionQueue(admin)
    reads = compactions = 0
    seen: set[int] = set()
    wh = admin.warehouse or ""
    while t.is_alive() or reads < 3:
        lo = committed[0]
        got = _read(reader.url, wh, "t1@b", namespace="a")
        hi = begun[0]
        reads += 1
        m, rem = divmod(len(got), per)
        assert rem == 0 and got == list(range(m * per)), f"not whole txns: {got}"
        assert lo <= m <= hi, (lo, m, hi)
        seen.add(m)
        go_on.set()
        if lo > n_txns // 2:
            late_read.set()
        if reads % 3 == 0:
            queue.request("b", "t1", "ds=x", major=reads % 2 == 0)
            out = Worker(admin, queue=queue).run_once()
            compactions += out is not None and out.state == "r"
            Cleaner(admin).run_once()
    t.join()
    assert not failure, failure
    assert compactions >= 1
    assert min(seen) <= n_txns // 2 < max(seen)  # reads saw the stream at several points
    final = _read(reader.url, wh, "t1@b", namespace="a")
    assert final == list(range(n_txns * per))
    direct = _read(reader.url, wh, "b.t1")
    assert len(direct) == n_txns * per + (0 if dynamic else n_txns)


# ------------------------------------------------------------------------ usage


def test_usage_equals_a_walk_of_the_files_and_counts_linked_data_once(
    store: TxnStore,
) -> None:
    t = make_namespaces(store)
    store.create_table(
        t.__class__(
            db="a", name="own", columns=(("id", "bigint"), ("msg", "string")),
            parameters={"transactional": "true"},
        )
    )  # fmt: skip
    write(store, [("1", range(0, 3)), ("2", range(3, 6)), ("1", range(6, 9))])
    opts = StreamingOptions(namespace="a", housekeeping_interval_s=None)
    with StreamingConnection(
        "own", record_writer=StrictJsonWriter(), store=store, options=opts
    ) as c:
        c.begin_transaction()
        c.write_rows([(1, "a")])
        c.commit_transaction()
    q = CompactionQueue(store)
    q.request("b", "t1", "ds=1", major=True)
    assert Worker(store, queue=q).run_once() is not None
    store.create_link("a", "b", "t1", dynamic=True)
    store.create_link("default", "b", "t1")
    by_ns = {u.namespace: u for u in namespace_usage(store)}
    own = store.get_table("a", "own")
    assert own.location is not None and t.location is not None
    for ns, roots, tables, parts in (("a", [own.location], 1, 0), ("b", [t.location], 1, 2)):
        u, w = by_ns[ns], walk(*roots)
        assert (u.files, u.bytes, u.bases, u.deltas, u.delete_deltas) == (
            w.files, w.bytes, w.bases, w.deltas, w.delete_deltas,
        ), ns  # fmt: skip
        assert (u.tables, u.partitions) == (tables, parts)
    assert by_ns["b"].bases == 1 and by_ns["b"].deltas >= 3
    # Linked data is counted at its owner only; links show as counts.
    assert (by_ns["a"].links, by_ns["a"].linked_by) == (1, 0)
    assert (by_ns["default"].links, by_ns["default"].bytes, by_ns["default"].files) == (1, 0, 0)
    assert by_ns["b"].linked_by == 2
    assert [u.namespace for u in namespace_usage(store, "b")] == ["b"]
    with pytest.raises(TableNotFoundError):
        namespace_usage(store, "zz")


def test_namespace_binding_refuses_other_namespaces_for_link_reads(store: TxnStore) -> None:
    make_namespaces(store)
    store.create_link("a", "b", "t1")
    with pytest.raises(NamespaceError, match=r"^default\.t1@b is outside namespace a "):
        resolve_read(store, "default.t1@b", namespace="a")


def test_static_link_reads_never_open_the_other_partitions(store: TxnStore) -> None:
    """A static link's read scans only its partition directories: a corrupt file in a
    partition it does not expose breaks a direct read of B's table, not the link's."""
    from pathlib import Path

    t = make_namespaces(store)
    write(store, [("1", range(0, 2)), ("2", range(10, 12))])
    store.create_link("a", "b", "t1")
    store.alter_link_partition("a", "b", "t1", "ds=1", add=True)
    assert t.location is not None
    for f in (Path(t.location) / "ds=2").glob("delta_*/bucket_*"):
        f.write_bytes(b"not an ORC file")
    wh = store.warehouse or ""
    with pytest.raises(AcidFormatError, match=r"ds=2/delta_.*not a readable ORC file"):
        _read(store.url, wh, "b.t1")
    assert _read(store.url, wh, "t1@b", namespace="a") == [0, 1]
