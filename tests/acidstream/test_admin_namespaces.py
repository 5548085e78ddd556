"""The namespace binding holds for the table and txn commands too (issue 28, item 9):
``set-location``, ``alter-table``, ``describe``, ``create-table``, ``tables``, ``locks`` and
``abort`` refuse (or leave out) what ``read`` refuses; ``describe`` of a link describes its target, ``alter-table``
of a link is refused as read-only (item 13). Every refusal is one line, exit 1, and changes
nothing. Both backends."""

from __future__ import annotations

import json

import pytest

from acidstream.acid.errors import TableNotFoundError
from acidstream.cli.main import EXIT_ERROR
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_json import StrictJsonWriter
from acidstream.txn.store import TxnStore
from acidstream.txn.txn_sql import TxnState
from tests.plugins.store_fixture import Cli
from tests.txn.links_helpers import make_namespaces, write


def _refused(result: tuple[int, str, str], *fragments: str) -> None:
    code, _out, err = result
    assert code == EXIT_ERROR, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("acidstream: error: "), err
    for f in fragments:
        assert f in err, err


def _ids(cli: Cli, name: str, *extra: str) -> list[int]:
    code, out, err = cli("read", name, "--columns", "id", *extra)
    assert code == 0, err
    return sorted(json.loads(x)["id"] for x in out.splitlines())


def test_an_unbound_client_in_namespace_mode_cannot_touch_another_namespace(
    store: TxnStore, cli: Cli, tmp_path: object
) -> None:
    t = make_namespaces(store)
    write(store, [("1", range(0, 3)), ("2", range(3, 5))])
    assert cli("namespace-mode", "on")[0] == 0
    mode = "namespace mode is on"
    _refused(cli("set-location", "b.t1", f"{tmp_path}/elsewhere"), "b.t1 is outside", mode)
    _refused(cli("set-location", "--database", "b", f"{tmp_path}/b2"), "namespace b", mode)
    _refused(cli("alter-table", "b.t1", "--not-skewed"), "b.t1 is outside", mode)
    _refused(cli("describe", "b.t1"), "b.t1 is outside", mode)
    _refused(cli("create-table", "b.t2", "id int"), "b.t2 is outside", mode)
    _refused(cli("tables", "b"), "namespace b", mode)
    # nothing changed: same location, no new table, every committed row still read
    assert store.get_table("b", "t1").location == t.location
    assert store.get_database("b").location != f"{tmp_path}/b2"
    with pytest.raises(TableNotFoundError):
        store.get_table("b", "t2")
    assert _ids(cli, "t1", "--namespace", "b") == [0, 1, 2, 3, 4]
    # the default namespace is the unbound client's own
    assert cli("create-table", "d1", "id int")[0] == 0
    code, out, _ = cli("tables")
    assert code == 0 and [r.split()[0] for r in out.splitlines()[2:]] == ["default.d1"]
    assert cli("describe", "d1")[0] == 0


def test_a_bound_client_names_only_its_namespace(store: TxnStore, cli: Cli) -> None:
    make_namespaces(store)
    write(store, [("1", range(0, 2))])
    _refused(cli("describe", "b.t1", "--namespace", "a"), "outside namespace a")
    _refused(cli("alter-table", "b.t1", "--not-skewed", "--namespace", "a"), "outside")
    _refused(cli("set-location", "b.t1", "/tmp/x", "--namespace", "a"), "outside")
    _refused(cli("create-table", "b.t9", "id int", "--namespace", "a"), "outside")
    _refused(cli("tables", "b", "--namespace", "a"), "namespace b", "bound to namespace a")
    code, out, _ = cli("describe", "t1", "--namespace", "b")
    assert code == 0 and out.splitlines()[0].split() == ["table", "b.t1"]
    assert cli("create-table", "t2", "id int", "--namespace", "b")[0] == 0
    assert store.get_table("b", "t2").db == "b"
    code, out, _ = cli("tables", "--namespace", "b")
    assert code == 0 and [r.split()[0] for r in out.splitlines()[2:]] == ["b.t1", "b.t2"]


def test_abort_is_refused_for_a_txn_of_another_namespace(store: TxnStore, cli: Cli) -> None:
    make_namespaces(store, partitioned=False)
    opts = StreamingOptions(namespace="b", housekeeping_interval_s=None)
    with StreamingConnection(
        "t1", record_writer=StrictJsonWriter(), store=store, options=opts
    ) as c:
        txn = c.begin_transaction()
        c.write_rows([(1, "x")])
        _refused(cli("abort", str(txn), "--namespace", "a"), f"abort txnid:{txn}", "namespace b")
        # its lock is listed to its own namespace only
        assert len(cli("locks", "--namespace", "a")[1].splitlines()) == 2  # the header only
        assert f" {txn} " in cli("locks", "--namespace", "b")[1]
        cli("namespace-mode", "on")
        _refused(cli("abort", str(txn)), "namespace mode is on")
        assert store.txn_state(txn) == TxnState.OPEN
        code, out, err = cli("abort", str(txn), "--namespace", "b")
        assert code == 0 and out == f"aborted txnid:{txn}\n", err
        assert store.txn_state(txn) == TxnState.ABORTED


def test_describe_follows_a_link_and_alter_table_refuses_it(store: TxnStore, cli: Cli) -> None:
    make_namespaces(store)
    write(store, [("1", range(0, 2)), ("2", range(2, 4))])
    store.create_link("a", "b", "t1")
    store.alter_link_partition("a", "b", "t1", "ds=1", add=True)
    code, out, err = cli("describe", "t1@b", "--namespace", "a", "--partitions")
    assert code == 0, err
    lines = out.splitlines()
    fields = {ln.split()[0]: ln.split(None, 1)[1] for ln in lines if ln and " " in ln}
    assert fields["link"] == "a.t1@b (read-only)"
    assert fields["link_partitions"] == "ds=1"
    assert fields["table"] == "b.t1"
    assert fields["partitioned_by"] == "ds string"
    assert [ln.split()[0] for ln in lines[lines.index("") + 1 :]] == ["ds=1"]  # exposed only
    assert cli("describe", "a.t1@b")[0] == 0  # naming its namespace, unbound
    _refused(
        cli("alter-table", "t1@b", "--namespace", "a", "--not-skewed"),
        "cannot alter t1@b",
        "links are read-only",
    )
    _refused(cli("alter-table", "a.t1@b", "--skewed-by", "id", "--on", "(1)"), "read-only")
    _refused(cli("set-location", "a.t1@b", "/tmp/x"), "links are read-only")
    _refused(cli("create-table", "x@b", "id int"), "links are read-only")
    assert store.get_table("b", "t1").skewed is None
