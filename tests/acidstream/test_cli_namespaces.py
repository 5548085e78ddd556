"""The namespace and link commands: namespace-mode, create/alter/drop/show-links, usage, and
``acidstream read 'T1@B' --namespace A``; every refusal is one line and exit 1. Both
backends."""

from __future__ import annotations

import json
from pathlib import Path

from acidstream.cli.main import EXIT_ERROR, EXIT_INTERNAL
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnStore
from tests.plugins.store_fixture import Cli
from tests.txn.links_helpers import make_namespaces, walk, write


def _refused(result: tuple[int, str, str], fragment: str) -> None:
    code, _out, err = result
    assert code == EXIT_ERROR and code != EXIT_INTERNAL, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("acidstream: error: ") and fragment in err, err


def test_namespace_mode_is_shown_and_set(store: TxnStore, cli: Cli) -> None:
    assert cli("namespace-mode")[1] == "namespace mode is off\n"
    assert cli("namespace-mode", "on")[0] == 0
    assert store.namespace_mode() is True
    assert cli("namespace-mode")[1] == "namespace mode is on\n"
    assert cli("namespace-mode", "off")[1] == "namespace mode is off\n"
    assert store.namespace_mode() is False


def test_links_are_created_altered_shown_read_and_dropped(store: TxnStore, cli: Cli) -> None:
    make_namespaces(store)
    write(store, [("1", range(0, 3)), ("2", range(10, 12))])
    code, out, _ = cli("create-link", "a", "t1@b")
    assert code == 0 and out == "created static link a.t1@b -> b.t1\n"
    assert cli("alter-link", "A", "T1@B", "add-partition", "ds=1")[1] == "a.t1@b: partitions ds=1\n"
    code, out, _ = cli("show-links", "--namespace", "a")
    assert code == 0 and out.splitlines()[2].split() == ["a", "t1@b", "b.t1", "ds=1"]
    code, out, _ = cli("read", "t1@b", "--namespace", "a", "--columns", "id")
    assert code == 0 and sorted(json.loads(x)["id"] for x in out.splitlines()) == [0, 1, 2]
    code, out, _ = cli("ls", "t1@b", "--namespace", "a")  # only the partition it exposes
    assert code == 0 and {r.split()[0] for r in out.splitlines()[2:]} == {"ds=1"}, out
    code, out, _ = cli("ls", "b.t1")  # the owner's table: both
    assert code == 0 and {r.split()[0] for r in out.splitlines()[2:]} == {"ds=1", "ds=2"}, out
    assert cli("alter-link", "a", "t1@b", "drop-partition", "ds=1")[0] == 0
    assert cli("read", "t1@b", "--namespace", "a")[1] == ""  # a static link without partitions
    assert cli("create-link", "default", "t1@b", "--dynamic")[0] == 0
    code, out, _ = cli("show-links", "--format", "json")
    got = {(x["namespace"], x["dynamic"], tuple(x["partitions"])) for x in json.loads(out)}
    assert got == {("a", False, ()), ("default", True, ())}
    code, out, _ = cli("read", "t1@b", "--columns", "id")  # unbound: the default namespace's
    assert code == 0 and len(out.splitlines()) == 5
    assert cli("drop-link", "a", "t1@b")[1] == "dropped link a.t1@b\n"
    assert [x.full_name for x in store.list_links()] == ["default.t1@b"]


def test_refusals_are_one_line(store: TxnStore, cli: Cli, tmp_path: Path) -> None:
    make_namespaces(store)
    write(store, [("1", range(0, 2))])
    store.create_link("a", "b", "t1")
    _refused(cli("create-link", "a", "t1"), "not a link name")
    _refused(cli("create-link", "a", "t1@b"), "already exists")
    _refused(cli("create-link", "a", "nope@b"), "b.nope not found")
    _refused(cli("alter-link", "a", "t1@b", "add-partition", "ds=9"), "has no partition ds=9")
    _refused(cli("alter-link", "a", "t1@b", "add-partition", "x"), "bad partition")
    _refused(cli("drop-link", "a", "t2@b"), "no link t2@b in namespace a")
    _refused(cli("read", "b.t1", "--namespace", "a"), "outside namespace a")
    _refused(cli("read", "t1@b", "--namespace", "zz"), "namespace zz does not exist")
    # Every write path refuses a link.
    data = tmp_path / "rows.jsonl"
    data.write_text('{"id": 1, "msg": "x", "ds": "1"}\n')
    _refused(cli("ingest", "a.t1@b", "--format", "json", str(data)), "links are read-only")
    _refused(cli("compact", "a.t1@b", "--type", "major"), "cannot compact a.t1@b")
    _refused(cli("repair", "a.t1@b", "--apply"), "cannot repair a.t1@b")
    assert CompactionQueue(store).show() == []
    cli("namespace-mode", "on")
    _refused(cli("read", "b.t1"), "namespace mode is on")
    _refused(cli("usage", "--namespace", "zz"), "zz does not exist")


def test_usage_table_and_json_match_a_walk_of_the_files(store: TxnStore, cli: Cli) -> None:
    t = make_namespaces(store)
    write(store, [("1", range(0, 3)), ("2", range(3, 5))])
    store.create_link("a", "b", "t1", dynamic=True)
    assert t.location is not None
    w = walk(t.location)
    code, out, _ = cli("usage", "--format", "json")
    assert code == 0
    by_ns = {u["namespace"]: u for u in json.loads(out)}
    assert set(by_ns) == {"a", "b", "default"}
    b = by_ns["b"]
    assert (b["files"], b["bytes"], b["deltas"], b["bases"], b["delete_deltas"]) == (
        w.files, w.bytes, w.deltas, w.bases, w.delete_deltas,
    )  # fmt: skip
    assert (b["tables"], b["partitions"], b["linked_by"]) == (1, 2, 1)
    assert (by_ns["a"]["links"], by_ns["a"]["bytes"]) == (1, 0)
    code, out, _ = cli("usage", "--namespace", "b")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:5] == [
        "namespace",
        "tables",
        "partitions",
        "files",
        "bytes",
    ]
    assert lines[2].split()[:5] == ["b", "1", "2", str(w.files), str(w.bytes)]
    assert len(lines) == 3


def test_ingest_is_bound_by_namespace(store: TxnStore, cli: Cli, tmp_path: Path) -> None:
    make_namespaces(store)
    data = tmp_path / "rows.jsonl"
    data.write_text('{"id": 1, "msg": "x", "ds": "1"}\n{"id": 2, "msg": "y", "ds": "2"}\n')
    _refused(cli("ingest", "b.t1", "--namespace", "a", "--format", "json", str(data)), "outside")
    assert cli("ingest", "t1", "--namespace", "b", "--format", "json", str(data))[0] == 0
    code, out, _ = cli("read", "t1", "--namespace", "b", "--columns", "id")
    assert code == 0 and sorted(json.loads(x)["id"] for x in out.splitlines()) == [1, 2]
