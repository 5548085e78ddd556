"""``acidstream fsck`` on tables damaged for real: a StreamingConnection writer SIGKILLed
mid-batch in a child process, txns aborted, a partition deleted from the catalog, garbage
files dropped in. Both metastore backends (the ``store`` fixture)."""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from acidstream.acid.errors import AcidStreamError
from acidstream.cli import recovery_cmds
from acidstream.recovery.fsck import EXIT_CLEAN, EXIT_ERRORS, EXIT_WARNINGS, fsck_path, fsck_table
from acidstream.recovery.sink_state import INGEST_PREFIX, SINK_PREFIX
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore
from tests.chaos.harness import (
    connection_spec,
    future_store,
    make_table,
    run_child,
    snapshot_ids,
)


def killed_writer(
    store: TxnStore, table: TableDef, *, step: str = "commit_txn.before_commit", at: int = 3
) -> int:
    """Write events with a batch of 4 txns and auto-flushes; SIGKILL at the ``at``-th hit of
    ``step``. Returns how many events were committed."""
    spec = connection_spec(
        store.url, table, events=200, rows_per_txn=20, txns_per_batch=4,
        memory_limit_bytes=300, hook={"step": step, "at": at, "action": "kill"},
    )  # fmt: skip
    code, out, err = run_child(spec)
    assert code == -signal.SIGKILL, err
    done = [int(line.split()[1]) for line in out.splitlines() if line.startswith("committed")]
    return done[-1] if done else 0


def clean_writer(store: TxnStore, table: TableDef, *, events: int = 60, batch: int = 3) -> None:
    spec = connection_spec(store.url, table, events=events, rows_per_txn=10, txns_per_batch=batch)
    code, _out, err = run_child(spec)
    assert code == 0, err


def kinds(report: Any) -> set[str]:
    return {f.kind for f in report.findings}


def test_clean_table_is_clean(store: TxnStore) -> None:
    t = make_table(store, partitioned=True)
    clean_writer(store, t)
    report = fsck_table(store, t)
    assert report.clean, report.findings
    assert report.exit_code == EXIT_CLEAN
    assert report.files_checked >= 3  # one file per partition at least
    assert report.partitions_checked == 3


def test_killed_writer_is_reported_live_then_dead(store: TxnStore) -> None:
    t = make_table(store)
    committed = killed_writer(store, t)
    assert committed == 40
    # Just after the kill the txns are open and recent: a writer in progress, no warning.
    now = fsck_table(store, t)
    assert "streaming_in_progress" in kinds(now)
    assert now.clean
    # Past the txn timeout they are a dead writer's.
    with future_store(store.url) as later:
        late = fsck_table(later, t, txn_timeout_s=300)
        assert "timed_out_txn" in kinds(late)
        assert late.exit_code == EXIT_WARNINGS
        later.reap_timed_out(timeout_s=300)
        reaped = fsck_table(later, t)
    dead = reaped.of_kind("dead_writer_side_file")
    assert len(dead) == 1 and dead[0].write_ids == (1, 4)
    assert "timed_out_txn" not in kinds(reaped)
    # The committed rows still read exactly.
    assert sorted(snapshot_ids(store, t)) == list(range(committed))


def test_aborted_write_id_directory_is_reported(store: TxnStore) -> None:
    t = make_table(store)
    clean_writer(store, t, events=30, batch=1)
    # batch 1: a txn killed after its files were written, before its commit.
    spec = connection_spec(store.url, t, events=60, rows_per_txn=10, txns_per_batch=1)
    code, _o, err = run_child(spec, faults=["batch.before_commit"])
    assert code == -signal.SIGKILL, err
    with future_store(store.url) as later:
        later.reap_timed_out(timeout_s=300)
        report = fsck_table(later, t)
    aborted = report.of_kind("aborted_dir")
    assert [Path(f.path).name for f in aborted] == ["delta_0000004_0000004"]
    assert report.exit_code == EXIT_WARNINGS


def test_partly_aborted_directory_is_information_only(store: TxnStore) -> None:
    from acidstream.ingest.connection import StreamingConnection, StreamingOptions
    from acidstream.ingest.record_writers import StrictJsonWriter

    t = make_table(store)
    with StreamingConnection(
        t.full_name, record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(txns_per_batch=3, housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        for k, commit in enumerate((True, False, True)):
            c.begin_transaction()
            c.write_many(json.dumps({"id": k, "msg": "m"}).encode() for _ in range(2))
            if commit:
                c.commit_transaction()
            else:
                c.abort_transaction()
    report = fsck_table(store, t)
    assert "partly_aborted_dir" in kinds(report)
    assert "aborted_dir" not in kinds(report)
    assert report.clean


def test_garbage_files_are_unknown(store: TxnStore) -> None:
    t = make_table(store)
    clean_writer(store, t)
    root = Path(t.location or "")
    (root / "junk.txt").write_text("not orc")
    delta = next(root.glob("delta_*"))
    (delta / "bucket_00000.tmp").write_bytes(b"x")
    (root / "stray_dir").mkdir()
    report = fsck_table(store, t)
    unknown = sorted(Path(f.path).name for f in report.of_kind("unknown_file"))
    assert unknown == ["bucket_00000.tmp", "junk.txt", "stray_dir"]
    # Hive's getAcidState takes a loose file for an original (pre-ACID) file: with
    # junk.txt there the partition cannot be read at all, and fsck says so.
    with pytest.raises(AcidStreamError):
        snapshot_ids(store, t)
    assert [f.path for f in report.of_kind("unreadable_file")] == [str(root)]
    assert report.exit_code == EXIT_ERRORS


def test_partition_catalog_and_disk_mismatch(store: TxnStore) -> None:
    t = make_table(store, partitioned=True)
    clean_writer(store, t)
    store.database.run(
        "test_drop_partition",
        lambda tx: tx.x(
            "DELETE FROM PARTITIONS WHERE PART_DB = ? AND PART_TBL = ? AND PART_NAME = ?",
            "default", "t", "ds=d1",
        ),
    )  # fmt: skip
    store.add_partition("default", "t", {"ds": "empty"})  # registered, never written
    report = fsck_table(store, t)
    assert [Path(f.path).name for f in report.of_kind("partition_not_in_catalog")] == ["ds=d1"]
    assert [Path(f.path).name for f in report.of_kind("partition_missing_on_disk")] == ["ds=empty"]


def test_corrupt_committed_file_is_an_error(store: TxnStore) -> None:
    t = make_table(store)
    clean_writer(store, t)
    f = next(p for p in Path(t.location or "").rglob("bucket_*") if "flush" not in p.name)
    data = bytearray(f.read_bytes())
    data[-30:] = b"\xff" * 30  # the tail: postscript and footer
    f.write_bytes(bytes(data))
    report = fsck_table(store, t)
    assert [x.path for x in report.of_kind("unreadable_file")] == [str(f)]
    assert report.exit_code == EXIT_ERRORS


def test_unregistered_path_is_checked_without_snapshot(store: TxnStore, tmp_path: Path) -> None:
    t = make_table(store)
    clean_writer(store, t)
    report = fsck_path(t.location or "")
    assert "no_snapshot" in kinds(report)
    assert report.clean and report.files_checked >= 1


def _cli(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    recovery_cmds.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_json_and_exit_code(
    store: TxnStore, warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    t = make_table(store)
    killed_writer(store, t)
    args = _cli(["fsck", "default.t", "--metastore", store.url, "--warehouse", warehouse,
                 "--format", "json", "--txn-timeout", "0.000001"])  # fmt: skip
    code = args.func(args)
    out = json.loads(capsys.readouterr().out)
    assert code == EXIT_WARNINGS == out["exit_code"]
    assert {f["kind"] for f in out["findings"]} >= {"timed_out_txn", "streaming_in_progress"}
    args = _cli(["fsck", "default.t", "--metastore", store.url, "--warehouse", warehouse])
    assert args.func(args) == EXIT_CLEAN  # the default timeout: the writer may be alive
    text = capsys.readouterr().out
    assert "default.t: clean" in text


def test_sink_state_lists_sink_and_ingest_records(
    store: TxnStore, warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from acidstream.cli.ingest_cmds import RESUME_PREFIX
    from acidstream.sinks.foreach_batch import META_PREFIX

    assert (SINK_PREFIX, INGEST_PREFIX) == (META_PREFIX, RESUME_PREFIX)
    make_table(store)
    value = {"sink_id": "job", "lineage": "abc", "batch_id": 7,
             "offsets": {"events": {"0": 12, "1": 30}}, "write_ids": [5, 6], "rows": 40}  # fmt: skip
    store.set_table_param("default", "t", SINK_PREFIX + "job", json.dumps(value))
    store.set_table_param(
        "default", "t", INGEST_PREFIX + "0123", json.dumps({"file": "/x.jsonl", "offset": 99})
    )
    args = _cli(["sink-state", "default.t", "--metastore", store.url, "--warehouse", warehouse])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "after batch 7 (lineage abc); next offsets events[0:12,1:30]" in text
    assert "/x.jsonl" in text and "byte offset 99" in text
    args = _cli(["sink-state", "default.t", "--metastore", store.url, "--warehouse", warehouse,
                 "--sink-id", "job", "--format", "json"])  # fmt: skip
    assert args.func(args) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["value"]["batch_id"] for r in records] == [7]
