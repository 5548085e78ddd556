"""``acidstream compact | compactions | compactor`` end to end on a real metastore."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from acidstream.cli.compaction_cmds import SHOW_COMPACTIONS_COLUMNS, register
from acidstream.txn.store import TxnState, TxnStore
from tests.compaction.conftest import MakeTbl, b0, rows
from tests.plugins.store_fixture import FakeClock

ROOT = Path(__file__).resolve().parents[2]


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="acidstream")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def test_compact_wait_then_show_compactions(
    store: TxnStore,
    store_url: str,
    warehouse: str,
    make_tbl: MakeTbl,
    capsys: pytest.CaptureFixture[str],
) -> None:
    t = make_tbl(partitioned=True)
    w = t.insert(rows(0, 10), partition="ds=a")
    t.insert(rows(10, 20), partition="ds=a")
    t.delete([(w, b0(), 0)], partition="ds=a")
    before = t.read()
    common = ["--metastore", store_url, "--warehouse", warehouse]
    assert (
        _cli(["compact", "default.t", "--partition", "ds=a", "--type", "major", "--wait", *common])
        == 0
    )
    out = capsys.readouterr().out
    assert "compaction 1 queued (major, default.t/ds=a)" in out
    assert "compaction 1 major default.t/ds=a: ready for cleaning" in out
    assert "compaction 1: succeeded" in out
    assert t.read().equals(before)
    assert [p.name[:5] for p in Path(t.dir("ds=a")).iterdir() if p.is_dir()] == ["base_"]

    assert _cli(["compactions", *common]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == list(SHOW_COMPACTIONS_COLUMNS)
    row = lines[2].split()
    assert row[:6] == ["1", "default", "t", "ds=a", "MAJOR", "succeeded"]


def test_compactor_once_initiates_compacts_and_cleans(
    store: TxnStore,
    store_url: str,
    warehouse: str,
    make_tbl: MakeTbl,
    capsys: pytest.CaptureFixture[str],
) -> None:
    t = make_tbl()
    for i in range(11):
        t.insert(rows(i * 10, i * 10 + 10))
    before = t.read()
    assert _cli(["compactor", "--once", "--metastore", store_url, "--warehouse", warehouse]) == 0
    out = capsys.readouterr().out
    assert "initiator default.t: queued major compaction 1 (11 deltas > 10 and no base)" in out
    assert "compaction 1 major default.t: ready for cleaning" in out
    assert "cleaner compaction 1 default.t: succeeded, deleted 11 dirs" in out
    assert t.read().equals(before)


def test_compactor_once_also_aborts_timed_out_txns(
    store: TxnStore,
    store_url: str,
    warehouse: str,
    make_tbl: MakeTbl,
    clock: FakeClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A killed writer's txn (last heartbeat 10 minutes ago) is aborted by the compactor's
    pass; a live one (heartbeat now) is left alone."""
    make_tbl()
    clock.now -= 600
    (dead,) = store.open_txns(1, user="killed-writer", host="h")
    clock.now += 600
    (live,) = store.open_txns(1, user="live-writer", host="h")
    assert _cli(["compactor", "--once", "--metastore", store_url, "--warehouse", warehouse]) == 0
    out = capsys.readouterr().out
    assert f"housekeeping: timed-out txns aborted: 1 (txnid {dead})" in out
    assert store.txn_state(dead) is TxnState.ABORTED
    assert store.txn_state(live) is TxnState.OPEN


@pytest.mark.slow
def test_compactor_daemon_runs_the_housekeeper(
    store: TxnStore, store_url: str, warehouse: str, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    """The daemon's housekeeper loop aborts a dead writer's txn while it runs; SIGTERM stops
    the daemon cleanly (exit 0)."""
    make_tbl()
    clock.now -= 600
    (dead,) = store.open_txns(1, user="killed-writer", host="h")
    argv = [sys.executable, "-m", "acidstream", "compactor", "--metastore", store_url,
            "--warehouse", warehouse, "--housekeeping-interval", "0.2"]  # fmt: skip
    daemon = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    # Without a housekeeping line the loop below would wait for ever: kill the daemon after
    # 60 s, which ends its output and fails the assertion instead.
    watchdog = threading.Timer(60, daemon.kill)
    watchdog.start()
    try:
        assert daemon.stdout is not None
        seen = []
        for line in daemon.stdout:  # the daemon prints each pass that changed something
            seen.append(line)
            if "housekeeping: timed-out txns aborted" in line:
                break
        assert f"housekeeping: timed-out txns aborted: 1 (txnid {dead})\n" in seen, seen
        assert store.txn_state(dead) is TxnState.ABORTED
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0
    finally:
        watchdog.cancel()
        daemon.kill()
        daemon.wait()
