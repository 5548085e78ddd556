"""``repair`` never deletes a dead writer's committed rows, whatever became of its side file
(issue 28, item 2), and ``--apply`` carries out exactly the plan the dry run shows.

The writer is a StreamingConnection in a child process, SIGKILLed before the commit of
the third txn of a batch of five: two txns (20 rows) are committed in one delta, then the
side file is damaged as a disk or an operator may leave it. Both metastore backends."""

from __future__ import annotations

import hashlib
import signal
from pathlib import Path

import pytest

from acidstream.acid.side_file import decode_flush_lengths, encode_flush_length
from acidstream.recovery.fsck import EXIT_CLEAN, fsck_table
from acidstream.recovery.repair import RepairReport, repair_table
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore
from tests.chaos.harness import (
    connection_spec,
    data_files,
    future_store,
    make_table,
    run_child,
    snapshot_ids,
)

COMMITTED = 20


def batch_killed_after_two_commits(store: TxnStore, table: TableDef) -> Path:
    """A batch of 5 txns of 10 rows, killed before the third commit; returns the data file
    (whose side file is intact)."""
    spec = connection_spec(
        store.url, table, events=100, rows_per_txn=10, txns_per_batch=5,
        hook={"step": "commit_txn.before_commit", "at": 3, "action": "kill"},
    )  # fmt: skip
    code, out, err = run_child(spec)
    assert code == -signal.SIGKILL, err
    assert [ln for ln in out.splitlines() if ln.startswith("committed")][-1] == "committed 20"
    assert sorted(snapshot_ids(store, table)) == list(range(COMMITTED))
    ((path, _),) = data_files(table)
    return Path(path)


def plan_and_apply(store: TxnStore, table: TableDef) -> tuple[RepairReport, RepairReport]:
    """The dry run, then ``--apply``, as the operator runs them once the txns timed out."""
    with future_store(store.url) as later:
        plan = repair_table(later, table, txn_timeout_s=300)
        done = repair_table(later, table, apply=True, txn_timeout_s=300)
    return plan, done


def steps(report: RepairReport) -> list[tuple[str, str]]:
    return [(a.action, a.path) for a in report.actions]


def _side_empty(raw: bytes, size: int) -> bytes:
    return b""


def _side_partial(raw: bytes, size: int) -> bytes:
    return raw[:3]  # a partial 8-byte record and nothing else


def _side_short(raw: bytes, size: int) -> bytes:
    return raw[:8] + raw[8:11]  # the first flush, then a torn entry: short of txn 2


def _side_garbage(raw: bytes, size: int) -> bytes:
    return b"\xff\x13garbage!" * 2  # whole 8-byte entries of nonsense


def _side_past_end(raw: bytes, size: int) -> bytes:
    return raw + encode_flush_length(size + 4096)


@pytest.mark.parametrize(
    "damage", [_side_empty, _side_partial, _side_short, _side_garbage, _side_past_end]
)
def test_damaged_side_file_of_a_dead_writer_keeps_every_committed_row(
    store: TxnStore, damage: object
) -> None:
    t = make_table(store)
    path = batch_killed_after_two_commits(store, t)
    side = Path(f"{path}_flush_length")
    size = path.stat().st_size
    assert callable(damage)
    side.write_bytes(damage(side.read_bytes(), size))
    plan, done = plan_and_apply(store, t)
    # The dry run shows the file action, and it is what --apply did.
    assert steps(plan) == steps(done)
    (finding,) = [f for f in plan.before.findings if f.path == str(path)]
    assert finding.kind == "bad_side_file" and finding.cut_to is not None, finding
    (recover,) = [a for a in done.actions if a.action == "recover_file"]
    assert recover.done and recover.error is None, recover
    # Never deleted: cut to the last readable footer, which holds every committed row.
    assert path.exists() and path.stat().st_size == finding.cut_to
    assert not side.exists()
    assert sorted(snapshot_ids(store, t)) == list(range(COMMITTED))
    assert done.after is not None and done.after.clean, done.after.findings
    assert done.exit_code == EXIT_CLEAN


def test_empty_side_file_dry_run_shows_the_cut_and_no_removal(store: TxnStore) -> None:
    """The issue's case: the side file truncated to 0 bytes. The dry run used to show no
    file action and --apply then removed the file ("never flushed") with its 20 rows."""
    t = make_table(store)
    path = batch_killed_after_two_commits(store, t)
    Path(f"{path}_flush_length").write_bytes(b"")
    plan, done = plan_and_apply(store, t)
    assert [a.action for a in plan.actions] == ["abort_txns", "recover_file"]
    assert "bad_side_file" in plan.actions[1].detail
    assert all("removed (never flushed)" not in a.detail for a in done.actions)
    assert sorted(snapshot_ids(store, t)) == list(range(COMMITTED))


def test_wrong_but_readable_side_file_is_not_cut_below_a_committed_txn(store: TxnStore) -> None:
    """A side file cut to its first whole entry: the file decodes there, but the second
    txn's committed rows lie past it; the cut goes to the last readable footer instead."""
    t = make_table(store)
    path = batch_killed_after_two_commits(store, t)
    side = Path(f"{path}_flush_length")
    first = next(x for x in decode_flush_lengths(side.read_bytes()) if x > 0)  # txn 1's
    side.write_bytes(encode_flush_length(first))
    with future_store(store.url) as later:
        later.reap_timed_out(timeout_s=300)
        report = fsck_table(later, t)
    (finding,) = report.of_kind("bad_side_file")
    assert finding.cut_to is not None and finding.cut_to > first
    assert "short of committed rows" in finding.detail and "[2]" in finding.detail
    _plan, done = plan_and_apply(store, t)
    assert sorted(snapshot_ids(store, t)) == list(range(COMMITTED))
    assert done.after is not None and done.after.clean


def test_footer_past_the_side_file_holding_aborted_rows_only_is_cut_off(store: TxnStore) -> None:
    """The writer died between its third flush's footer and its length in the side file
    (``file.after_footer``): the rows past the side file's length are the uncommitted
    txn's, so the side file is right and the cut is its length."""
    t = make_table(store)
    path = batch_killed_after_two_commits(store, t)
    side = Path(f"{path}_flush_length")
    lengths = decode_flush_lengths(side.read_bytes())
    side.write_bytes(b"".join(encode_flush_length(x) for x in lengths[:-1]))
    plan, done = plan_and_apply(store, t)
    (finding,) = [f for f in plan.before.findings if f.path == str(path)]
    assert finding.kind == "dead_writer_side_file" and finding.cut_to == lengths[-2], finding
    assert path.stat().st_size == lengths[-2]
    assert sorted(snapshot_ids(store, t)) == list(range(COMMITTED))
    assert done.after is not None and done.after.clean


def test_never_flushed_file_is_quarantined_not_deleted(store: TxnStore) -> None:
    """A bucket file the dead writer opened in its uncommitted txn and never flushed (an
    empty side file, no footer) in a delta whose other write ids are committed: it is
    moved to the quarantine with its side file, byte for byte, not deleted."""
    t = make_table(store)
    path = batch_killed_after_two_commits(store, t)
    never = path.with_name("bucket_00001")
    never.write_bytes(b"ORC" + b"\x00stripe bytes without a footer" * 4)
    Path(f"{never}_flush_length").write_bytes(b"")
    digest = hashlib.sha1(never.read_bytes()).hexdigest()
    plan, done = plan_and_apply(store, t)
    assert steps(plan) == steps(done)
    (moved,) = [a for a in done.actions if a.path == str(never)]
    assert moved.action == "recover_file" and moved.done, moved
    root = Path(t.location or "")
    kept = root / ".acidstream_quarantine" / path.parent.name / "bucket_00001"
    assert hashlib.sha1(kept.read_bytes()).hexdigest() == digest
    assert (kept.parent / "bucket_00001_flush_length").exists()
    assert not never.exists()
    assert sorted(snapshot_ids(store, t)) == list(range(COMMITTED))
    assert done.after is not None and done.after.clean, done.after.findings


def test_dry_run_lists_exactly_what_apply_does_for_every_finding_kind(store: TxnStore) -> None:
    """One partitioned table holding every finding kind repair plans for; the dry run's
    (action, path) list equals the applied one, and the finding kinds are all there."""
    t = make_table(store, partitioned=True)
    clean = connection_spec(store.url, t, events=30, rows_per_txn=10, txns_per_batch=3)
    code, _o, err = run_child(clean)
    assert code == 0, err
    # A dead writer's batch: its side files emptied (bad_side_file), its txns timed out.
    spec = connection_spec(
        store.url, t, events=60, rows_per_txn=10, txns_per_batch=4,
        hook={"step": "commit_txn.before_commit", "at": 2, "action": "kill"},
    )  # fmt: skip
    code, _o, err = run_child(spec)
    assert code == -signal.SIGKILL, err
    root = Path(t.location or "")
    sides = sorted(root.rglob("bucket_*_flush_length"))
    assert sides
    sides[0].write_bytes(b"")
    # A writer killed before its only commit: an aborted directory once reaped.
    spec = connection_spec(store.url, t, events=100, rows_per_txn=10, txns_per_batch=1)
    code, _o, err = run_child(spec, faults=["batch.before_commit"])
    assert code == -signal.SIGKILL, err
    # A partition the catalog lost, one the disk lost, a stray file, an unreadable file.
    store.database.run(
        "test_drop_partition",
        lambda tx: tx.x(
            "DELETE FROM PARTITIONS WHERE PART_DB = ? AND PART_TBL = ? AND PART_NAME = ?",
            "default", "t", "ds=d2",
        ),
    )  # fmt: skip
    store.add_partition("default", "t", {"ds": "gone"})
    (root / "ds=d0" / "junk.txt").write_text("not orc")
    committed_delta = sorted((root / "ds=d1").glob("delta_*"))[0]
    (committed_delta / "bucket_00007").write_bytes(b"ORC not really")
    with future_store(store.url) as later:
        plan = repair_table(later, t, txn_timeout_s=300)
        kinds = {f.kind for f in plan.before.findings}
        done = repair_table(later, t, apply=True, txn_timeout_s=300)
    assert {
        "timed_out_txn",
        "bad_side_file",
        "dead_writer_side_file",
        "aborted_dir",
        "partition_not_in_catalog",
        "partition_missing_on_disk",
        "unknown_file",
        "unreadable_file",
    } <= kinds, kinds
    assert steps(plan) == steps(done)
    assert {a.action for a in done.actions} >= {
        "abort_txns", "recover_file", "remove_dir", "register_partition", "quarantine", "none",
    }  # fmt: skip
    assert [a for a in done.actions if a.error] == []


@pytest.mark.parametrize("side", [b"", encode_flush_length(0), b"\x00\x00\x00"])
def test_a_dead_writers_file_in_a_wholly_aborted_directory_is_no_side_file_error(
    store: TxnStore, side: bytes
) -> None:
    """A writer killed before its first commit, its txns reaped: whatever its side file
    holds (nothing, a length of 0, a torn entry), no committed row can be in the file, so
    fsck reports the aborted directory (a warning) and no ``bad_side_file`` error, and
    repair removes the directory."""
    t = make_table(store)
    clean = connection_spec(store.url, t, events=20, rows_per_txn=10, txns_per_batch=1)
    code, _o, err = run_child(clean)
    assert code == 0, err
    spec = connection_spec(
        store.url, t, events=40, rows_per_txn=10, txns_per_batch=2,
        hook={"step": "commit_txn.before_commit", "at": 1, "action": "kill"},
    )  # fmt: skip
    code, _o, err = run_child(spec)
    assert code == -signal.SIGKILL, err
    dead = [Path(p) for p, _ in data_files(t) if Path(f"{p}_flush_length").exists()]
    assert len(dead) == 1
    Path(f"{dead[0]}_flush_length").write_bytes(side)
    plan, done = plan_and_apply(store, t)
    kinds = {f.kind for f in plan.before.findings}
    assert "aborted_dir" in kinds and "bad_side_file" not in kinds, plan.before.findings
    assert plan.before.exit_code != 7, plan.before.findings
    assert steps(plan) == steps(done)
    assert not dead[0].parent.exists()
    assert sorted(snapshot_ids(store, t)) == list(range(20))
    assert done.after is not None and done.after.clean, done.after.findings
