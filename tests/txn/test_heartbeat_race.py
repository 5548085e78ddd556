"""A heartbeat racing commits must never report a committed txn as lost (issue 10, item 3).

The heartbeat thread of a writer computes the range of its batch's uncommitted txns, then
heartbeats it; meanwhile the writer commits the first of them. The store must report such
a txn as committed, never as aborted or unknown, on both backends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from acidstream.txn import HeartbeatResult, TxnStore
from tests.plugins.store_fixture import FakeClock

TOTAL_TXNS = 5000
BEAT_INTERVAL_S = 0.01
MIN_BEATS = 10


class _Writer:
    """Opens batches and commits their txns one by one, publishing what is uncommitted."""

    def __init__(self, store: TxnStore, batch: int) -> None:
        self.store = store
        self.batch = batch
        self.lock = threading.Lock()
        self.range: tuple[int, int] | None = None  # the batch's uncommitted txns
        self.committed_hi = 0  # every txn <= this that we opened is committed
        self.first = 0

    def run(self, enough: Callable[[], bool]) -> None:
        """Commit at least ``TOTAL_TXNS`` txns, and on (up to ten times as many) until
        ``enough()``: the heartbeat thread's pace against the commits' varies with the load."""
        done = 0
        while done < TOTAL_TXNS or (not enough() and done < 10 * TOTAL_TXNS):
            ids = self.store.open_txns(self.batch, user="u", host="h", agent_info="race")
            if not self.first:
                self.first = ids[0]
            with self.lock:
                self.range = (ids[0], ids[-1])
            for t in ids:
                self.store.commit_txn(t)
                with self.lock:
                    self.committed_hi = t
                    self.range = (t + 1, ids[-1]) if t < ids[-1] else None
            done += len(ids)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 1000])
def test_heartbeat_racing_commits_reports_no_false_aborts(
    store_factory: Callable[[], TxnStore], batch: int
) -> None:
    writer = _Writer(store_factory(), batch)
    beater = store_factory()  # the heartbeat thread has its own connection, as in ingest
    stop = threading.Event()
    beats: list[tuple[tuple[int, int], int, HeartbeatResult, int]] = []
    errors: list[BaseException] = []

    def beat() -> None:
        try:
            while not stop.is_set():
                with writer.lock:
                    rng, before = writer.range, writer.committed_hi
                if rng is not None:
                    res = beater.heartbeat_txn_range(*rng)
                    with writer.lock:
                        after = writer.committed_hi
                    beats.append((rng, before, res, after))
                stop.wait(BEAT_INTERVAL_S)
        except BaseException as e:  # surfaced by the assertion below
            errors.append(e)

    thread = threading.Thread(target=beat)
    thread.start()
    try:
        writer.run(enough=lambda: len(beats) >= MIN_BEATS)
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    assert len(beats) >= MIN_BEATS, f"only {len(beats)} heartbeats ran: the race was not exercised"
    raced = 0
    for (lo, hi), before, res, after in beats:
        assert res.lost == frozenset(), f"range {lo}..{hi}: false loss {res}"
        # exact: what is reported committed was committed while the heartbeat ran (the
        # writer publishes a commit just after making it: at most one more is done)...
        assert all(lo <= t <= after + 1 for t in res.committed), (lo, hi, res, after)
        # ...and nothing committed before the range was computed is inside it
        assert before < lo
        raced += bool(res.committed)
    print(f"batch={batch}: {len(beats)} heartbeats, {raced} raced a commit")
    assert raced > 0, "no heartbeat overlapped a commit: the race was not exercised"


def test_heartbeat_classifies_each_txn_of_the_range_exactly(
    store: TxnStore, clock: FakeClock
) -> None:
    a, b, c, d = store.open_txns(4, user="u", host="h")
    store.commit_txn(a)
    store.abort_txn(b)
    clock.advance(10)
    store.commit_txn(c)
    res = store.heartbeat_txn_range(a, d + 1)
    assert (res.committed, res.aborted, res.nosuch) == ({a, c}, {b}, {d + 1})
    assert res.lost == {b, d + 1}
    info = {t.txn_id: t for t in store.show_txns()}
    assert info[d].last_heartbeat_ms == int(clock.now * 1000)  # the open one was heartbeaten
    assert info[c].last_heartbeat_ms < int(clock.now * 1000)  # the others were not
    # Long after, the housekeeper purges committed records: those txns are then unknown,
    # as in Hive; a commit can no longer be racing a heartbeat by then.
    clock.advance(3600)
    assert store.purge_committed_txns(retention_s=300) == 2
    res = store.heartbeat_txn_range(a, d)
    assert (res.committed, res.aborted, res.nosuch) == (frozenset(), {b}, {a, c})
    assert store.txn_state(a) is None
