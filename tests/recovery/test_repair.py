"""``acidstream repair`` on tables damaged for real, on both metastore backends: it clears
what a failure left, and never deletes or cuts what a committed write id needs."""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
from pathlib import Path

import pytest

from acidstream.acid.side_file import decode_flush_lengths
from acidstream.cli import recovery_cmds
from acidstream.recovery.fsck import EXIT_CLEAN, EXIT_WARNINGS, fsck_table
from acidstream.recovery.repair import repair_table
from acidstream.txn.store import TxnState, TxnStore
from tests.chaos.harness import (
    connection_spec,
    data_files,
    future_store,
    make_table,
    run_child,
    snapshot_ids,
)
from tests.recovery.test_fsck import clean_writer, killed_writer


def tree(root: str) -> dict[str, str]:
    """Every file under ``root`` with a digest of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(Path(root).rglob("*"))
        if p.is_file()
    }


def test_dry_run_changes_nothing(store: TxnStore) -> None:
    t = make_table(store)
    killed_writer(store, t)
    before = tree(t.location or "")
    txns = [(x.txn_id, x.state) for x in store.show_txns()]
    with future_store(store.url) as later:
        report = repair_table(later, t, txn_timeout_s=300)
    assert not report.applied
    # The plan shows what the abort makes repairable too: the dead writer's file.
    assert [a.action for a in report.actions] == ["abort_txns", "recover_file"]
    assert tree(t.location or "") == before
    assert [(x.txn_id, x.state) for x in store.show_txns()] == txns


def test_killed_streaming_writer_is_recovered(store: TxnStore) -> None:
    t = make_table(store)
    committed = killed_writer(store, t, at=3)
    rows_before = sorted(snapshot_ids(store, t))
    assert rows_before == list(range(committed))
    ((path, _),) = data_files(t)
    size = Path(path).stat().st_size
    side = Path(path + "_flush_length")
    last = decode_flush_lengths(side.read_bytes())[-1]
    with future_store(store.url) as later:
        report = repair_table(later, t, apply=True, txn_timeout_s=300)
    done = {a.action: a for a in report.actions}
    assert done["abort_txns"].done and done["recover_file"].done
    assert all(x.state != TxnState.OPEN for x in store.show_txns())
    # Cut to the last flush (the file may have had nothing past it) and the side file gone.
    assert Path(path).stat().st_size == last <= size
    assert not side.exists()
    assert sorted(snapshot_ids(store, t)) == rows_before
    assert report.after is not None and report.after.clean
    assert report.exit_code == EXIT_CLEAN
    # The table takes writes again and reads them all.
    spec = connection_spec(store.url, t, events=200, rows_per_txn=20, txns_per_batch=4)
    code, _o, err = run_child(spec)
    assert code == 0, err
    assert sorted(snapshot_ids(store, t)) == list(range(200))
    assert fsck_table(store, t).clean


def test_trailing_garbage_past_the_flush_is_cut(store: TxnStore) -> None:
    """A writer that died between writing stripes and its footer leaves bytes past the
    last flush length: they are cut, the committed prefix stays byte for byte."""
    t = make_table(store)
    committed = killed_writer(store, t, at=3)
    ((path, last),) = data_files(t)
    with open(path, "ab") as f:
        f.write(b"\x00half-written stripe" * 50)
    prefix = Path(path).read_bytes()[:last]
    with future_store(store.url) as later:
        report = repair_table(later, t, apply=True, txn_timeout_s=300)
    assert Path(path).read_bytes() == prefix
    assert report.after is not None and report.after.clean
    assert sorted(snapshot_ids(store, t)) == list(range(committed))


def test_aborted_directory_removed_committed_ones_kept(store: TxnStore) -> None:
    t = make_table(store)
    clean_writer(store, t, events=30, batch=1)
    spec = connection_spec(store.url, t, events=60, rows_per_txn=10, txns_per_batch=1)
    code, _o, err = run_child(spec, faults=["batch.before_commit"])
    assert code == -signal.SIGKILL, err
    root = Path(t.location or "")
    dirs_before = sorted(p.name for p in root.iterdir())
    assert "delta_0000004_0000004" in dirs_before
    with future_store(store.url) as later:
        report = repair_table(later, t, apply=True, txn_timeout_s=300)
    removed = [Path(a.path).name for a in report.actions if a.action == "remove_dir"]
    assert removed == ["delta_0000004_0000004"]
    assert sorted(p.name for p in root.iterdir()) == [
        d for d in dirs_before if d != "delta_0000004_0000004"
    ]
    assert sorted(snapshot_ids(store, t)) == list(range(30))
    assert report.after is not None and report.after.clean


def test_writer_killed_before_its_first_commit_leaves_an_aborted_directory(
    store: TxnStore,
) -> None:
    """Chaos seed 10018 (connection-partitioned-kill): every txn of the batch ends aborted,
    so after the reap the write ids above the first one are past the snapshot's collapsed
    high watermark; they are still aborted (asked through their txns), the directories
    go whole, and no action trips on a side file inside them."""
    t = make_table(store, partitioned=True)
    spec = connection_spec(store.url, t, events=100, rows_per_txn=10, txns_per_batch=3)
    code, _o, err = run_child(spec, faults=["add_dynamic_partitions.after_commit"])
    assert code == -signal.SIGKILL, err
    with future_store(store.url) as later:
        report = repair_table(later, t, apply=True, txn_timeout_s=300)
    assert [a.error for a in report.actions if a.error] == []
    removed = sorted(Path(a.path).parent.name for a in report.actions if a.action == "remove_dir")
    assert removed == ["ds=d0", "ds=d1", "ds=d2"]
    assert not list(Path(t.location or "").rglob("delta_*"))
    assert report.after is not None and report.after.clean
    assert snapshot_ids(store, t) == []


def test_directory_with_a_committed_write_id_is_never_removed(store: TxnStore) -> None:
    """A batch whose middle txn aborted: the directory holds aborted rows, but committed
    write ids need it; repair leaves it, its bytes and its rows alone."""
    from acidstream.ingest.connection import StreamingConnection, StreamingOptions
    from acidstream.ingest.record_writers import StrictJsonWriter

    t = make_table(store)
    with StreamingConnection(
        t.full_name, record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(txns_per_batch=3, housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        for k, commit in enumerate((True, False, True)):
            c.begin_transaction()
            c.write_many(json.dumps({"id": k, "msg": "m"}).encode() for _ in range(1))
            if commit:
                c.commit_transaction()
            else:
                c.abort_transaction()
    before = tree(t.location or "")
    with future_store(store.url) as later:
        report = repair_table(later, t, apply=True, txn_timeout_s=300)
    assert [a for a in report.actions if a.action != "abort_txns"] == []
    assert tree(t.location or "") == before
    assert sorted(snapshot_ids(store, t)) == [0, 2]


def test_live_writer_is_left_alone(store: TxnStore) -> None:
    """Txns that still heartbeat (recent, within the timeout) are not a dead writer's:
    nothing of theirs is aborted, cut or removed."""
    t = make_table(store)
    killed_writer(store, t)
    before = tree(t.location or "")
    report = repair_table(store, t, apply=True, txn_timeout_s=300)  # the real clock: recent
    assert [a.action for a in report.actions] == []
    assert tree(t.location or "") == before
    assert any(x.state == TxnState.OPEN for x in store.show_txns())


def test_partition_registered_and_garbage_quarantined(store: TxnStore) -> None:
    t = make_table(store, partitioned=True)
    clean_writer(store, t)
    store.database.run(
        "test_drop_partition",
        lambda tx: tx.x(
            "DELETE FROM PARTITIONS WHERE PART_DB = ? AND PART_TBL = ? AND PART_NAME = ?",
            "default", "t", "ds=d2",
        ),
    )  # fmt: skip
    root = Path(t.location or "")
    (root / "ds=d0" / "junk.txt").write_text("not orc")
    report = repair_table(store, t, apply=True)
    assert "ds=d2" in [p.name for p in store.list_partitions("default", "t")]
    moved = root / ".acidstream_quarantine" / "ds=d0" / "junk.txt"
    assert moved.read_text() == "not orc"
    assert not (root / "ds=d0" / "junk.txt").exists()
    assert report.after is not None and report.after.clean
    assert sorted(snapshot_ids(store, t)) == list(range(60))


def _cli(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    recovery_cmds.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_dry_run_then_apply(
    store: TxnStore, warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    t = make_table(store)
    committed = killed_writer(store, t)
    base = ["--metastore", store.url, "--warehouse", warehouse, "--txn-timeout", "0.000001"]
    args = _cli(["repair", "default.t", *base])
    assert args.func(args) == EXIT_WARNINGS
    text = capsys.readouterr().out
    assert "abort_txns" in text and "dry run" in text
    assert any(x.state == TxnState.OPEN for x in store.show_txns())
    args = _cli(["repair", "default.t", "--apply", *base])
    assert args.func(args) == EXIT_CLEAN
    text = capsys.readouterr().out
    assert "recover_file" in text and "default.t: clean" in text
    assert sorted(snapshot_ids(store, t)) == list(range(committed))
