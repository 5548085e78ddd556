"""``acidstream fsck | repair | sink-state`` at the command line (issue 28): a repair that
fails on a read-only file system says so (one line, exit 4, never "applied"), and every
command keeps to the namespace binding and reads through links. Both metastore backends."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from acidstream.cli.main import EXIT_ERROR, EXIT_STORAGE
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnState, TxnStore
from tests.chaos.harness import connection_spec, run_child
from tests.plugins.store_fixture import Cli
from tests.plugins.tmpfs_fixture import Tmpfs, make_read_only
from tests.recovery.test_repair import tree
from tests.txn.links_helpers import make_namespaces, write


def _refused(result: tuple[int, str, str], fragment: str, code: int = EXIT_ERROR) -> None:
    got, _out, err = result
    assert got == code, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("acidstream: error: ") and fragment in err, err


# ---------------------------------------------------------------------------------------------
# item 4: a repair that fails on the file system


def test_apply_on_a_read_only_file_system_reports_each_failure_and_exits_4(
    store: TxnStore, tmpfs: Tmpfs, cli: Cli
) -> None:
    mnt = tmpfs(size="32m")
    t = store.create_table(
        TableDef(
            db="default",
            name="t",
            columns=(("id", "int"), ("msg", "string")),
            parameters={"transactional": "true"},
            location=str(mnt / "t"),
        )
    )
    # Leftovers: the directory of a writer killed before its only commit, a stray file
    # (which also breaks the listing: reported, not repairable, the 4th action).
    spec = connection_spec(store.url, t, events=10, rows_per_txn=10, txns_per_batch=1)
    code, _o, err = run_child(spec, faults=["batch.before_commit"])
    assert code == -signal.SIGKILL, err
    (mnt / "t" / "junk.txt").write_text("not orc")
    make_read_only(mnt)
    before = tree(str(mnt / "t"))
    code, out, err = cli("repair", "default.t", "--apply", "--txn-timeout", "0.000001")
    _refused((code, out, err), "repair of default.t: 2 of 4 actions failed", EXIT_STORAGE)
    assert "Read-only file system (EROFS)" in err
    lines = out.splitlines()
    assert not any(ln.endswith(": applied") for ln in lines), out
    assert "default.t: NOT repaired: 2 actions failed, 1 done" in lines, out
    failed = [ln for ln in lines if "FAILED (StorageError):" in ln]
    assert {ln.split()[0] for ln in failed} == {"remove_dir", "quarantine"}, out
    assert tree(str(mnt / "t")) == before
    # The metastore was writable: the dead writer's txn is aborted (done, and said so).
    assert all(x.state != TxnState.OPEN for x in store.show_txns())


def test_apply_on_a_read_only_file_system_in_json_also_exits_4(
    store: TxnStore, tmpfs: Tmpfs, cli: Cli
) -> None:
    mnt = tmpfs(size="8m")
    store.create_table(
        TableDef(
            db="default",
            name="t",
            columns=(("id", "int"),),
            parameters={"transactional": "true"},
            location=str(mnt / "t"),
        )
    )
    (mnt / "t").mkdir()
    (mnt / "t" / "junk.txt").write_text("x")
    make_read_only(mnt)
    code, out, err = cli("repair", "default.t", "--apply", "--format", "json")
    _refused((code, out, err), "actions failed; quarantine", EXIT_STORAGE)
    (action,) = [a for a in json.loads(out)["actions"] if a["action"] == "quarantine"]
    assert action["failed"] and not action["done"] and "EROFS" in action["error"]


# ---------------------------------------------------------------------------------------------
# item 9: the namespace binding; item 13: sink-state through a link


def _namespaced(store: TxnStore) -> TableDef:
    t = make_namespaces(store)
    write(store, [("1", range(0, 3)), ("2", range(10, 12))])
    store.set_table_param("b", "t1", "_meta.acidstream.ingest.abc", '{"file": "x", "offset": 7}')
    return t


def test_unbound_client_in_namespace_mode_is_refused_fsck_repair_and_sink_state(
    store: TxnStore, cli: Cli
) -> None:
    t = _namespaced(store)
    assert cli("namespace-mode", "on")[0] == 0
    _refused(cli("fsck", "b.t1"), "namespace mode is on")
    _refused(cli("repair", "b.t1"), "namespace mode is on")
    _refused(cli("repair", "b.t1", "--apply"), "namespace mode is on")
    _refused(cli("sink-state", "b.t1"), "namespace mode is on")
    # A path is no way around it.
    assert t.location is not None
    _refused(cli("fsck", t.location), "namespace mode is on")
    _refused(cli("fsck", str(Path(t.location) / "ds=1")), "namespace mode is on")
    # Bound to b, or naming b's table from b, they run.
    assert cli("fsck", "t1", "--namespace", "b")[0] == 0
    assert cli("fsck", t.location, "--namespace", "b")[0] == 0
    code, out, _ = cli("repair", "b.t1", "--namespace", "b")
    assert code == 0 and "nothing to repair" in out, out
    code, out, _ = cli("sink-state", "t1", "--namespace", "b", "--format", "json")
    assert code == 0 and [r["value"]["offset"] for r in json.loads(out)] == [7], out


def test_a_client_bound_elsewhere_is_refused(store: TxnStore, cli: Cli) -> None:
    _namespaced(store)
    for argv in (("fsck", "b.t1"), ("repair", "b.t1", "--apply"), ("sink-state", "b.t1")):
        _refused(cli(*argv, "--namespace", "a"), "outside namespace a")


def test_sink_state_and_fsck_follow_a_link_repair_refuses_it(store: TxnStore, cli: Cli) -> None:
    _namespaced(store)
    store.create_link("a", "b", "t1")  # static: no partition yet
    assert cli("alter-link", "a", "t1@b", "add-partition", "ds=1")[0] == 0
    code, out, err = cli("sink-state", "t1@b", "--namespace", "a", "--format", "json")
    assert code == 0, err
    assert [r["value"] for r in json.loads(out)] == [{"file": "x", "offset": 7}]
    code, out, err = cli("fsck", "t1@b", "--namespace", "a", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["table"] == "b.t1" and report["partitions_checked"] == 1, report
    _refused(cli("repair", "t1@b", "--namespace", "a"), "links are read-only")
    _refused(cli("repair", "a.t1@b", "--apply"), "cannot repair a.t1@b")


def test_sink_state_of_a_link_without_a_binding_reads_its_target(store: TxnStore, cli: Cli) -> None:
    """``ls t1@b`` works for the default namespace's link; so does ``sink-state t1@b``."""
    _namespaced(store)
    store.create_link("default", "b", "t1", dynamic=True)
    code, out, err = cli("sink-state", "t1@b", "--format", "json")
    assert code == 0, err
    assert [r["value"] for r in json.loads(out)] == [{"file": "x", "offset": 7}]


def test_fsck_of_a_dynamic_link_checks_the_whole_target(store: TxnStore, cli: Cli) -> None:
    _namespaced(store)
    store.create_link("a", "b", "t1", dynamic=True)
    code, out, err = cli("fsck", "t1@b", "--namespace", "a", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["partitions_checked"] == 2
