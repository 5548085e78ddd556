"""The initiator: Hive's thresholds and defaults, per-table overrides, and its skips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acidstream.acid import faults
from acidstream.compaction import Cleaner, CompactorConfig, Initiator, Worker
from acidstream.compaction.config import table_thresholds
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnStore
from tests.compaction.conftest import MakeTbl, Tbl, rows
from tests.plugins.store_fixture import FakeClock

NUM = "compactorthreshold.hive.compactor.delta.num.threshold"
PCT = "compactorthreshold.hive.compactor.delta.pct.threshold"
ABORTS = "compactorthreshold.hive.compactor.abortedtxn.threshold"


def _deltas(t: Tbl, n: int, *, per: int = 1, start: int = 0) -> None:
    for i in range(n):
        t.insert(rows(start + i * per, start + (i + 1) * per))


def _major(store: TxnStore, name: str = "t") -> None:
    q = CompactionQueue(store)
    q.request("default", name, major=True)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r"


def _decisions(
    store: TxnStore, clock: FakeClock, **kw: object
) -> dict[str, tuple[bool | None, str]]:
    init = Initiator(store, config=CompactorConfig(**kw), clock=clock)  # type: ignore[arg-type]
    return {d.target: (d.major if d.id is not None else None, d.reason) for d in init.run_once()}


def test_more_than_ten_deltas_without_base_is_major(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    t = make_tbl()
    _deltas(t, 10)
    assert _decisions(store, clock)["default.t"][0] is None  # 10 is not > 10
    t.insert(rows(100, 101))
    major, why = _decisions(store, clock)["default.t"]
    assert major is True and "11 deltas" in why and "no base" in why
    assert [c.state for c in CompactionQueue(store).show()] == ["i"]
    # Already queued: not queued twice.
    assert _decisions(store, clock)["default.t"] == (
        None,
        "a compaction is already queued or working",
    )


def test_many_small_deltas_over_a_big_base_are_minor(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    t = make_tbl(params={PCT: "100"})  # the size rule out of the way: only the count counts
    t.insert(rows(0, 5000))
    _major(store)
    _deltas(t, 11, start=10_000)
    major, why = _decisions(store, clock)["default.t"]
    assert major is False and "11 deltas" in why


def test_delta_size_over_base_size_is_major(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    t = make_tbl()
    t.insert(rows(0, 100))
    _major(store)
    t.insert(rows(1000, 1100))  # one delta as big as the base: 1.0 > 0.1
    major, why = _decisions(store, clock)["default.t"]
    assert major is True and "delta/base size" in why


def test_small_delta_over_big_base_starts_nothing(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    t = make_tbl()
    t.insert(rows(0, 20000))
    _major(store)
    t.insert(rows(50_000, 50_001))
    assert _decisions(store, clock)["default.t"][0] is None


def test_table_overrides_the_thresholds(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    t = make_tbl(params={NUM: "2"})
    _deltas(t, 3)
    major, why = _decisions(store, clock)["default.t"]
    assert major is True and "3 deltas > 2" in why
    cfg = table_thresholds(CompactorConfig(), {NUM.upper(): "7", PCT: "0.5"})
    assert cfg.delta_num_threshold == 7 and cfg.delta_pct_threshold == 0.5


def test_no_auto_compaction_is_skipped(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    t = make_tbl(params={"no_auto_compaction": "true"})
    _deltas(t, 12)
    assert _decisions(store, clock)["default.t"] == (None, "no_auto_compaction=true")
    assert CompactionQueue(store).show() == []


def test_many_aborts_are_major_and_an_old_abort_is_minor(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    many = make_tbl("many", params={ABORTS: "3"})
    old = make_tbl("old")
    for i in range(3):
        many.insert(rows(i, i + 1), outcome="abort")
    old.insert(rows(0, 1), outcome="abort")
    got = _decisions(store, clock)
    assert got["default.many"][0] is True and "3 aborted txns" in got["default.many"][1]
    assert got["default.old"][0] is None
    clock.advance(13 * 3600)  # older than hive.compactor.aborted.txn.time.threshold (12h)
    got = _decisions(store, clock)
    assert got["default.old"][0] is False and "abort" in got["default.old"][1]


def test_partitions_are_candidates_one_by_one(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    t = make_tbl(partitioned=True, params={NUM: "2"})
    for i in range(3):
        t.insert(rows(i, i + 1), partition="ds=a")
    t.insert(rows(10, 11), partition="ds=b")
    got = _decisions(store, clock)
    assert got["default.t/ds=a"][0] is True
    assert got["default.t/ds=b"][0] is None


def test_repeated_failures_stop_initiation_until_the_retry_time(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    t = make_tbl(params={NUM: "1"})
    _deltas(t, 3)
    q = CompactionQueue(store, clock=clock)

    def boom(step: str) -> None:
        if step == "compaction.after_files":
            raise OSError("no space left")

    faults.set_hook(boom)
    try:
        for _ in range(2):
            assert _decisions(store, clock)["default.t"][0] is True
            out = Worker(store, queue=q).run_once()
            assert out is not None and out.state == "f"
    finally:
        faults.set_hook(None)
    major, why = _decisions(store, clock)["default.t"]
    assert major is None and "2 consecutive compactions" in why
    states = [c.state for c in q.show()]
    assert states == ["f", "f", "a"]
    clock.advance(8 * 24 * 3600)  # past metastore.compactor.initiator.failed.retry.time (7d)
    assert _decisions(store, clock)["default.t"][0] is True


def test_housekeeping_reads_partitions_by_name_not_by_listing_them(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The initiator, the worker and the cleaner find a partition's directory and skew
    by its name: listing every partition per candidate made a pass quadratic in them."""
    t = make_tbl(partitioned=True, params={NUM: "2"})
    for i in range(3):
        t.insert(rows(i, i + 1), partition="ds=a")
    t.insert(rows(10, 11), partition="ds=b")
    before = t.read(partition="ds=a")

    def no_listing(self: TxnStore, db: str, table: str) -> list[Any]:
        raise AssertionError(f"listed every partition of {db}.{table}")

    monkeypatch.setattr(TxnStore, "list_partitions", no_listing)
    assert _decisions(store, clock)["default.t/ds=a"][0] is True
    q = CompactionQueue(store, clock=clock)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r" and out.target == "default.t/ds=a"
    assert [c.id for c in Cleaner(store, queue=q).run_once()] == [out.id]
    monkeypatch.undo()
    assert t.read(partition="ds=a").equals(before)
    assert [p.name[:5] for p in Path(t.dir("ds=a")).iterdir() if p.is_dir()] == ["base_"]
