"""The housekeeper: timed-out txns of dead writers are aborted, obsolete records purged, and
no purge changes what any snapshot sees (issue 11, item 1)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from acidstream.acid.errors import ConfigError
from acidstream.cli import housekeeping_cmds
from acidstream.txn import TxnState, TxnStore
from acidstream.txn.housekeeper import Housekeeper, HousekeepingReport
from acidstream.txn.locks import DataOperationType as Op
from tests.plugins.store_fixture import FakeClock
from tests.txn.conftest import make_table, write_lock

ROOT = Path(__file__).resolve().parents[2]

# A writer that holds an open txn with a write id and a lock, heartbeating it, until killed.
_WRITER = """
import sys, time
from acidstream.txn import open_store
from acidstream.txn.locks import DataOperationType, LockComponent, LockRequest, LockType
store = open_store(sys.argv[1])
(txn,) = store.open_txns(1, user="writer", host="h", agent_info="killed-writer")
store.allocate_write_ids([txn], "default", "t")
resp = store.lock(LockRequest((LockComponent(LockType.SHARED_WRITE, "default", "t",
    operation=DataOperationType.INSERT),), txn_id=txn, user="writer", host="h"))
print(txn, resp.lock_id, flush=True)
while True:
    store.heartbeat_txn_range(txn, txn)
    time.sleep(0.1)
"""

TIMEOUT_S = 1.5
INTERVAL_S = 0.25


class _Reports:
    """Collects a running housekeeper's reports; tests wait on it instead of sleeping."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.items: list[tuple[float, HousekeepingReport]] = []

    def __call__(self, report: HousekeepingReport) -> None:
        with self.cond:
            self.items.append((time.monotonic(), report))
            self.cond.notify_all()

    def wait_for(self, pred: Callable[[], bool], timeout_s: float) -> bool:
        with self.cond:
            return self.cond.wait_for(pred, timeout=timeout_s)


@pytest.mark.slow
def test_killed_writer_txn_is_aborted_and_unlocked_within_timeout_plus_interval(
    store_url: str, store: TxnStore
) -> None:
    make_table(store)
    store.set_setting("txn_timeout_s", TIMEOUT_S)  # the metastore's, not the housekeeper's
    reports = _Reports()
    keeper = Housekeeper(store_url, interval_s=INTERVAL_S, on_report=reports)
    keeper.start()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, store_url], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert writer.stdout is not None
        txn, lock_id = (int(x) for x in writer.stdout.readline().split())
        # While the writer lives, passes over twice the timeout leave its txn alone.
        seen = len(reports.items)
        passes = int(2 * TIMEOUT_S / INTERVAL_S) + 1
        assert reports.wait_for(lambda: len(reports.items) >= seen + passes, 30)
        assert store.txn_state(txn) is TxnState.OPEN
        assert [lk.lock_id for lk in store.show_locks()] == [lock_id]
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        killed = time.monotonic()

        def aborted() -> bool:
            return any(txn in r.timed_out_txns for _, r in reports.items)

        assert reports.wait_for(aborted, TIMEOUT_S + INTERVAL_S + 10)
        when = next(t for t, r in reports.items if txn in r.timed_out_txns)
    finally:
        writer.kill()
        writer.wait()
        keeper.stop()
    took = when - killed
    print(f"killed writer's txn {txn} aborted {took:.2f}s after SIGKILL "
          f"(timeout {TIMEOUT_S}s + interval {INTERVAL_S}s)")  # fmt: skip
    # the last heartbeat was at most 0.1 s before the kill; allow for a pass's own run time
    # and scheduling on a loaded machine
    assert took <= TIMEOUT_S + INTERVAL_S + 1.0
    assert store.txn_state(txn) is TxnState.ABORTED
    reason = {t.txn_id: t for t in store.show_txns()}[txn].abort_reason
    assert reason is not None and reason.startswith("ABORT_TIMEOUT")
    assert store.show_locks() == []
    assert store.heartbeat_txn_range(txn, txn).aborted == {txn}


def _validity(store: TxnStore) -> tuple[list[bool], list[bool], list[bool]]:
    vt = store.get_valid_txns()
    wl = store.get_valid_write_ids("default", "t", vt)
    txns = range(1, vt.high_watermark + 1)
    wids = range(1, wl.high_watermark + 1)
    return (
        [vt.is_txn_valid(t) for t in txns],
        [vt.is_txn_aborted(t) for t in txns],
        [wl.is_write_id_valid(w) for w in wids],
    )


def _txn(store: TxnStore, op: Op) -> int:
    (t,) = store.open_txns(1, user="u", host="h")
    store.allocate_write_ids([t], "default", "t")
    write_lock(store, t, op)
    return t


def test_pass_purges_obsolete_records_and_keeps_every_snapshot(
    store_url: str, store: TxnStore, clock: FakeClock
) -> None:
    make_table(store)
    a = _txn(store, Op.INSERT)
    store.commit_txn(a)
    b = _txn(store, Op.INSERT)
    store.abort_txn(b)  # aborted with data: must stay excluded from every snapshot
    c = _txn(store, Op.INSERT)
    store.commit_txn(c)
    u = _txn(store, Op.UPDATE)
    store.commit_txn(u)  # a WRITE_SET row with commit id u
    (o,) = store.open_txns(1, user="u", host="h")
    store.allocate_write_ids([o], "default", "t")
    store.database.run(
        "history",
        lambda tx: tx.xmany(
            "INSERT INTO COMPLETED_COMPACTIONS (CC_ID, CC_DATABASE, CC_TABLE, CC_STATE, "
            "CC_TYPE) VALUES (?, 'default', 't', ?, 'a')",
            [(i, st) for i, st in enumerate("sssssffffaaa", start=1)],
        ),
    )
    before = _validity(store)
    clock.advance(3600)
    store.heartbeat_txn_range(o, o)  # o's writer is alive

    keeper = Housekeeper(store_url, clock=clock, history_retention_s=600)
    with keeper:
        report = keeper.run_once()
        again = keeper.run_once()
    assert report.errors == ()
    assert report.timed_out_txns == ()
    assert report.write_set_rows == 1  # commit id u < the lowest open txn o
    assert report.txn_to_write_id_rows == 1  # a's only: b is aborted, c and u are above it
    assert report.completed_component_rows == 2  # a's and c's; u's is the latest and 'Y'
    assert report.compaction_history_rows == 2 + 1 + 1  # keep 3 s, 3 f, 2 a
    assert report.committed_txn_rows == 3  # a, c, u
    assert (again.write_set_rows, again.txn_to_write_id_rows, again.committed_txn_rows) == (
        0,
        0,
        0,
    )
    assert _validity(store) == before  # no snapshot changed
    assert [t.txn_id for t in store.show_txns()] == [b, o]
    assert store.txn_state(a) is None  # its record is purged (after the retention)
    assert store.txn_state(b) is TxnState.ABORTED
    assert store.txn_components(b)  # the aborted txn's components stay for the cleaner
    assert store.write_id_for_txn(b, "default", "t") is not None


def test_pass_aborts_only_timed_out_txns(store_url: str, store: TxnStore, clock: FakeClock) -> None:
    make_table(store)
    old, young = store.open_txns(2, user="u", host="h")
    write_lock(store, old, Op.INSERT)
    clock.advance(200)
    store.heartbeat_txn_range(young, young)
    clock.advance(150)
    with Housekeeper(store_url, clock=clock) as keeper:  # the default timeout: 300 s
        assert keeper.run_once().timed_out_txns == (old,)
    assert store.txn_state(young) is TxnState.OPEN
    assert store.show_locks() == []


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="interval_s"):
        Housekeeper("sqlite:///x.db", interval_s=0)
    with pytest.raises(ConfigError, match="history_retention_s"):
        Housekeeper("sqlite:///x.db", history_retention_s=0)


def test_retention_is_at_least_the_metastores_txn_timeout(
    store_url: str, store: TxnStore, clock: FakeClock
) -> None:
    """A committed txn's record outlives the metastore's timeout even when the
    housekeeper's retention is shorter: a heartbeat racing its commit still finds it."""
    make_table(store)
    store.set_setting("txn_timeout_s", 900)
    (t,) = store.open_txns(1, user="u", host="h")
    store.commit_txn(t)
    clock.advance(600)  # past the 60 s retention, not past the 900 s timeout
    with Housekeeper(store_url, clock=clock, history_retention_s=60) as keeper:
        report = keeper.run_once()
    assert report.txn_timeout_s == 900
    assert report.committed_txn_rows == 0
    assert store.txn_state(t) is TxnState.COMMITTED


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="acidstream")
    housekeeping_cmds.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def test_cli_runs_one_pass_and_prints_a_summary(
    store_url: str, store: TxnStore, capsys: pytest.CaptureFixture[str]
) -> None:
    make_table(store)
    (t,) = store.open_txns(1, user="u", host="h")
    store.database.run(
        "stale", lambda tx: tx.x("UPDATE TXNS SET TXN_LAST_HEARTBEAT = 0 WHERE TXN_ID = ?", t)
    )
    store.set_setting("txn_timeout_s", 60)
    assert _cli(["housekeeping", "--metastore", store_url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["step", "result"]
    assert out[2].split() == ["txn", "timeout", "(metastore)", "60", "s"]
    assert out[3].split() == ["timed-out", "txns", "aborted", "1", "(txnid", f"{t})"]
    assert any(line.startswith("committed TXNS rows purged") for line in out)
    assert store.txn_state(t) is TxnState.ABORTED


def test_cli_on_a_missing_metastore_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no metastore at"):
        _cli(["housekeeping", "--metastore", f"sqlite:///{tmp_path}/none/m.db"])
    assert not (tmp_path / "none").exists()
