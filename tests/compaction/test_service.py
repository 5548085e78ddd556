"""The Compactor service in-process: background loops compact and clean, then stop."""

from __future__ import annotations

import threading

from acidstream.compaction import Compactor, CompactorConfig
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnStore
from tests.compaction.conftest import MakeTbl, rows


def test_started_compactor_compacts_and_cleans_then_stops(
    store: TxnStore, make_tbl: MakeTbl
) -> None:
    t = make_tbl(params={"compactorthreshold.hive.compactor.delta.num.threshold": "2"})
    for i in range(3):
        t.insert(rows(i * 10, i * 10 + 10))
    before = t.read()
    cleaned = threading.Event()
    lines: list[str] = []

    def on_event(line: str) -> None:
        lines.append(line)
        if line.startswith("cleaner compaction"):
            cleaned.set()

    config = CompactorConfig(check_interval_s=0.05, cleaner_interval_s=0.05, worker_poll_s=0.05)
    compactor = Compactor(store, config=config, on_event=on_event)
    compactor.start()
    try:
        assert cleaned.wait(60), lines
    finally:
        compactor.stop(timeout=30)
    assert any("queued major compaction" in x for x in lines)
    assert any("ready for cleaning" in x for x in lines)
    assert [c.state for c in CompactionQueue(store).show()] == ["s"]
    assert t.read().equals(before)
