"""fsck, repair and ``acidstream ls`` over the directories Hive 3 mutations leave (issue 30
item 7): ``delete_delta_W_W_SSSS`` and several statements per write id are a clean table's
directories (no finding, nothing planned); an aborted or dead mutation's directories are
aborted leftovers, reported and removed as an insert's are.
"""

from __future__ import annotations

from pathlib import Path

from acidstream.acid import layout
from acidstream.acid.writer import write_delete_delta, write_delta
from acidstream.compaction import Cleaner, Worker
from acidstream.recovery.fsck import EXIT_CLEAN, EXIT_WARNINGS, fsck_table
from acidstream.recovery.repair import repair_table
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.locks import DataOperationType, LockComponent, LockRequest, LockType
from acidstream.txn.store import TxnStore
from tests.acid.test_mutation_read import build_history
from tests.chaos.harness import future_store
from tests.mutation_tables import MutationTable, create_table, row, rows_of
from tests.plugins.store_fixture import Cli


def _names(t: MutationTable, partition: str = "") -> set[str]:
    return {p.name for p in Path(t.dir(partition)).iterdir()}


def _merge_dirs(w: int) -> set[str]:
    """The directories of a MERGE with insert, update and delete clauses at write id ``w``."""
    return {
        layout.delta_dir_name(w, w, statement_id=s, delete=d)
        for s, d in ((0, False), (1, False), (1, True), (2, True))
    }


def _open_update_txn(store: TxnStore, *, user: str) -> int:
    """Open an UPDATE txn on ``default.t`` holding its SHARED_WRITE lock; its write id."""
    txn = store.open_txns(1, user=user, host="h")[0]
    w = store.allocate_write_ids([txn], "default", "t")[txn]
    store.lock(
        LockRequest(
            (LockComponent(LockType.SHARED_WRITE, "default", "t", None,
                           operation=DataOperationType.UPDATE),),
            txn_id=txn, user=user, host="h",
        )
    )  # fmt: skip
    return w


def test_fsck_finds_a_mutated_table_clean_and_repair_plans_nothing(store: TxnStore) -> None:
    t = MutationTable(store, create_table(store, partitioned=True))
    build_history(t, partition="ds=a")
    t.insert([row(i) for i in range(50, 60)], partition="ds=b")
    t.update({51: row(51, 0)}, partition="ds=b")
    report = fsck_table(store, t.table)
    assert report.findings == (), report.findings
    assert report.exit_code == EXIT_CLEAN
    assert report.dirs_checked == len(_names(t, "ds=a")) + len(_names(t, "ds=b"))
    plan = repair_table(store, t.table)
    assert plan.actions == ()
    before = {p: _names(t, p) for p in ("ds=a", "ds=b")}
    applied = repair_table(store, t.table, apply=True)
    assert applied.actions == () and applied.after is not None and applied.after.findings == ()
    assert {p: _names(t, p) for p in ("ds=a", "ds=b")} == before


def test_after_compaction_the_mutation_dirs_are_obsolete_until_cleaned(store: TxnStore) -> None:
    """Compacted mutation directories are ``obsolete_dir`` (information: the Cleaner's
    work, nothing for repair); once cleaned, nothing is reported."""
    t = MutationTable(store, create_table(store))
    build_history(t)
    mutation_dirs = _names(t)
    q = CompactionQueue(store)
    q.request("default", "t", None, major=False)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r", out
    report = fsck_table(store, t.table)
    assert {f.kind for f in report.findings} == {"obsolete_dir"}
    assert {Path(f.path).name for f in report.findings} == mutation_dirs
    assert report.exit_code == EXIT_CLEAN
    assert repair_table(store, t.table).actions == ()
    Cleaner(store).run_once()
    assert fsck_table(store, t.table).findings == ()
    assert rows_of(t.read()) == t.expected()


def test_an_aborted_mutation_is_an_aborted_leftover(store: TxnStore) -> None:
    t = MutationTable(store, create_table(store))
    build_history(t)
    expected = t.expected()
    w = t.merge(inserts=[row(900)], updates={0: row(0, -1)}, deletes=[3], outcome="abort")
    u = t.update({6: row(6, -6)}, outcome="abort")
    leftovers = _merge_dirs(w) | {
        layout.delta_dir_name(u, u, statement_id=0, delete=d) for d in (False, True)
    }
    report = fsck_table(store, t.table)
    assert report.exit_code == EXIT_WARNINGS
    assert {f.kind for f in report.findings} == {"aborted_dir"}
    assert {Path(f.path).name for f in report.findings} == leftovers
    plan = repair_table(store, t.table)
    assert {(a.action, Path(a.path).name) for a in plan.actions} == {
        ("remove_dir", n) for n in leftovers
    }
    repair_table(store, t.table, apply=True)
    assert not leftovers & _names(t)
    assert fsck_table(store, t.table).findings == ()
    assert rows_of(t.read()) == expected


def test_a_dead_mutations_directories_go_once_its_txn_is_reaped(store: TxnStore) -> None:
    """A mutation whose writer died with its txn open: fsck (judging as repair does, its
    timed-out txn counted as aborted) plans to abort it and remove its directories."""
    t = MutationTable(store, create_table(store))
    build_history(t)
    expected = t.expected()
    w = _open_update_txn(store, user="dead")
    victim = t.keys_of([7])
    write_delta(t.dir(), t.schema, w, [row(901)], statement_id=0)
    write_delta(t.dir(), t.schema, w, [row(7, -7)], statement_id=1)
    write_delete_delta(t.dir(), t.schema, w, victim, statement_id=1)
    write_delete_delta(t.dir(), t.schema, w, t.keys_of([8]), statement_id=2)
    assert fsck_table(store, t.table).findings == ()  # a live writer's: nothing to say
    with future_store(store.url) as later:
        plan = repair_table(later, t.table)
        assert plan.actions[0].action == "abort_txns"
        assert {Path(a.path).name for a in plan.actions[1:]} == _merge_dirs(w)
        assert {a.action for a in plan.actions[1:]} == {"remove_dir"}
        done = repair_table(later, t.table, apply=True)
        assert not done.failed
    assert not _merge_dirs(w) & _names(t)
    assert rows_of(t.read()) == expected


def test_a_mutation_file_being_written_is_no_error(store: TxnStore) -> None:
    """A mutation writes its files without side files (one txn: Hive writes none). One
    that does not decode yet is, while its txn is open, a ``write_in_progress`` (info:
    no reader opens it); once the txn is aborted (or would be by repair, its writer
    dead), the directory is an ``aborted_dir`` removed whole, and the torn file no
    ``unreadable_file`` error. Before, both said "error: unreadable" (exit 7)."""
    t = MutationTable(store, create_table(store))
    build_history(t)
    expected = t.expected()
    w = _open_update_txn(store, user="writer")
    write_delta(t.dir(), t.schema, w, [row(7, -7)], statement_id=0)
    (torn,) = write_delete_delta(t.dir(), t.schema, w, t.keys_of([7]), statement_id=0)
    data = Path(torn).read_bytes()
    Path(torn).write_bytes(data[: len(data) // 2])  # the writer is mid-file
    live = fsck_table(store, t.table)
    assert [(f.kind, f.path) for f in live.findings] == [("write_in_progress", torn)]
    assert live.exit_code == EXIT_CLEAN
    assert repair_table(store, t.table).actions == ()
    assert rows_of(t.read()) == expected
    dirs = {layout.delta_dir_name(w, w, statement_id=0, delete=d) for d in (False, True)}
    with future_store(store.url) as later:  # its writer died: repair's view
        plan = repair_table(later, t.table)
        assert plan.before.exit_code == EXIT_WARNINGS
        assert {f.kind for f in plan.before.findings} == {"timed_out_txn", "aborted_dir"}
        assert [a.action for a in plan.actions] == ["abort_txns", "remove_dir", "remove_dir"]
        assert {Path(a.path).name for a in plan.actions[1:]} == dirs
        done = repair_table(later, t.table, apply=True)
        assert not done.failed and done.after is not None and done.after.findings == ()
    assert not dirs & _names(t)
    assert rows_of(t.read()) == expected


def test_ls_shows_statement_ids(store: TxnStore, cli: Cli) -> None:
    t = MutationTable(store, create_table(store))
    w = build_history(t)
    a = t.merge(inserts=[row(900)], updates={0: row(0, -1)}, deletes=[3], outcome="abort")
    code, out, err = cli("ls", "default.t")
    assert code == 0, err
    rows = [line.split(None, 3) for line in out.splitlines()[2:]]
    by_name = {r[2]: (r[1], r[3] if len(r) > 3 else "") for r in rows}
    m = w["merge"]
    for stmt, delete in ((0, False), (1, False), (1, True), (2, True)):
        name = layout.delta_dir_name(m, m, statement_id=stmt, delete=delete)
        kind, detail = by_name[name]
        assert kind == ("delete_delta" if delete else "delta")
        assert f"statement {stmt}" in detail, detail
    assert "statement 0" in by_name[layout.delta_dir_name(1, 1, statement_id=0)][1]
    for name in _merge_dirs(a):
        kind, detail = by_name[name]
        assert kind == "aborted"
        assert "statement" in detail, detail
