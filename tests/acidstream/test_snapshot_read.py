"""Reads take the snapshot a Hive reader would: aborted and uncommitted rows never show."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

import acidstream
from acidstream.cli.main import main
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.snapshot_read import NoSnapshotWarning, iter_table_batches
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable


def _aborted_rows_on_disk(store: TxnStore, make_table: MakeTable) -> str:
    """A table whose batch file holds an aborted txn's rows (auto-flushed before the abort)."""
    t = make_table("t", "id int, msg string", partitioned_by=[("ds", "string")])
    with StreamingConnection(
        "t", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(txns_per_batch=3, memory_limit_bytes=100),
    ) as c:  # fmt: skip
        c.begin_transaction()
        c.write_many(b'{"id": %d, "ds": "a"}' % i for i in range(5))
        c.commit_transaction()
        c.begin_transaction()
        c.write_many(b'{"id": %d, "ds": "a"}' % i for i in range(100, 105))  # auto-flushed
        c.abort_transaction()
        assert c.stats().auto_flushes > 0
    assert t.location is not None
    return t.location


def test_python_read_by_name_or_registered_path_hides_aborted_rows(
    store: TxnStore, make_table: MakeTable, store_url: str, warehouse: str
) -> None:
    loc = _aborted_rows_on_disk(store, make_table)
    kw = {"metastore": store_url, "warehouse": warehouse}
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoSnapshotWarning)
        by_name = acidstream.read_table("default.t", **kw)
        by_path = acidstream.read_table(loc, **kw)
        by_partition = acidstream.read_table(f"{loc}/ds=a", **kw)
    for got in (by_name, by_path, by_partition):
        assert sorted(got.column("id").to_pylist()) == [0, 1, 2, 3, 4]


def test_unregistered_path_warns_that_no_snapshot_was_given(
    store: TxnStore, make_table: MakeTable, store_url: str, warehouse: str, tmp_path: Path
) -> None:
    loc = _aborted_rows_on_disk(store, make_table)
    copy = tmp_path / "copy"
    shutil.copytree(loc, copy)
    with pytest.warns(NoSnapshotWarning, match="no snapshot"):
        got = acidstream.read_table(str(copy), metastore=store_url, warehouse=warehouse)
    assert sorted(got.column("id").to_pylist()) == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]


def test_cli_read_of_a_registered_location_uses_the_metastore_snapshot(
    store: TxnStore, make_table: MakeTable, store_url: str, warehouse: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    loc = _aborted_rows_on_disk(store, make_table)
    base = ["--metastore", store_url, "--warehouse", warehouse, "--columns", "id"]
    capsys.readouterr()
    assert main(["read", loc, *base]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 5 and err == ""
    copy = tmp_path / "copy"
    shutil.copytree(loc, copy)
    assert main(["read", str(copy), *base]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 10
    assert err.startswith("acidstream: warning: no snapshot") and err.count("\n") == 1


def test_empty_catalog_table_reads_as_zero_rows(
    store: TxnStore, make_table: MakeTable, store_url: str, warehouse: str
) -> None:
    make_table("e", "id int, msg string")
    got = acidstream.read_table("e", metastore=store_url, warehouse=warehouse)
    assert got.num_rows == 0 and got.column_names == ["id", "msg"]


def _five_deltas(store: TxnStore, make_table: MakeTable) -> None:
    make_table("t", "id int")
    for k in range(5):
        with StreamingConnection(
            "t", record_writer=StrictJsonWriter(), store=store,
            options=StreamingOptions(txns_per_batch=1, housekeeping_interval_s=None),
        ) as c:  # fmt: skip
            c.begin_transaction()
            c.write_many(b'{"id": %d}' % (k * 10 + i) for i in range(10))
            c.commit_transaction()


def _compact_and_clean(store: TxnStore) -> list[object]:
    from acidstream.compaction import Cleaner, Worker
    from acidstream.txn.compaction_sql import CompactionQueue

    q = CompactionQueue(store)
    q.request("default", "t", None, major=True)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r", out
    return list(Cleaner(store).run_once())


def _read_txns(store: TxnStore) -> list[object]:
    return [t for t in store.show_txns() if "acidstream-read default.t" in (t.agent_info or "")]


def test_a_streaming_read_holds_a_read_txn_that_keeps_the_cleaner_off_its_files(
    store: TxnStore, make_table: MakeTable, store_url: str, warehouse: str
) -> None:
    """A read by name opens a txn before its snapshot (as Hive's readers do): a major
    compaction committed mid-read cannot have its obsolete deltas cleaned until the read
    ends, so the read finishes with every row instead of failing on a vanished file."""
    from acidstream.txn.store import TxnState

    _five_deltas(store, make_table)
    kw = {"metastore": store_url, "warehouse": warehouse}
    batches = iter_table_batches("default.t", **kw)
    first = next(batches)
    (lease,) = _read_txns(store)
    assert lease.state is TxnState.OPEN
    assert _compact_and_clean(store) == []  # the read's txn is older: nothing cleaned yet
    rest = list(batches)
    assert sorted(
        first.column("id").to_pylist() + [i for b in rest for i in b.column("id").to_pylist()]
    ) == list(range(50))
    assert [t.state for t in _read_txns(store)] in ([TxnState.COMMITTED], [])
    from acidstream.compaction import Cleaner

    assert Cleaner(store).run_once()  # the read is over: now the deltas go
    assert sorted(acidstream.read_table("default.t", **kw).column("id").to_pylist()) == list(
        range(50)
    )


def test_a_dropped_read_and_the_cli_read_commit_their_read_txns(
    store: TxnStore, make_table: MakeTable, store_url: str, warehouse: str,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from acidstream.txn.store import TxnState

    _five_deltas(store, make_table)
    kw = {"metastore": store_url, "warehouse": warehouse}
    batches = iter_table_batches("default.t", **kw)
    next(batches)
    batches.close()  # the caller stops early: the read txn ends with it
    assert main(["read", "default.t", "--metastore", store_url, "--warehouse", warehouse]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 50
    # An explicit snapshot is the caller's business: no read txn of ours.
    acidstream.read_table("default.t", write_ids="default.t:5:9223372036854775807::", **kw)
    states = [t.state for t in _read_txns(store)]
    assert TxnState.OPEN not in states
    assert len(store.show_txns()) - 5 == len(states) <= 2  # the 5 writes + at most 2 reads
