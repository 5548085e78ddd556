"""A worker process SIGKILLed in the middle of a compaction, then a restarted compactor:
no row is lost or doubled, and what the dead worker wrote is cleaned away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from acidstream.compaction import Cleaner, Compactor
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnState, TxnStore
from tests.compaction.conftest import MakeTbl, b0, rows
from tests.plugins.store_fixture import FakeClock

pytestmark = pytest.mark.slow

CHILD = """
import sys
from acidstream.txn.store import open_store
from acidstream.compaction import Cleaner, Compactor
store = open_store(sys.argv[1])
Compactor(store, initiator=False, cleaner=False).run_once()
print("survived")
"""


@pytest.mark.parametrize(
    "step", ["compaction.after_bucket", "compaction.after_files", "compaction.after_commit"]
)
def test_worker_killed_mid_compaction_then_restart(
    step: str, store: TxnStore, store_url: str, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    t = make_tbl("t", buckets=3)
    ws = [t.insert(rows(b * 100, b * 100 + 40), bucket=b) for b in (0, 1, 2)]
    t.delete([(ws[0], b0(0, 0), 1), (ws[2], b0(0, 2), 5)])
    t.insert(rows(400, 420), bucket=1, outcome="abort")
    t.insert(rows(500, 510), bucket=2)
    before = t.read()
    q = CompactionQueue(store)
    cq_id, _ = q.request("default", "t", major=True)

    env = {**os.environ, "ACIDSTREAM_FAULTS": step}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, store_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "survived" not in proc.stdout
    rec = q.get(cq_id)
    assert rec is not None and rec.state == "w" and rec.txn_id is not None
    killed_txn = rec.txn_id
    if step == "compaction.after_commit":
        assert store.txn_state(killed_txn) is TxnState.COMMITTED
    else:
        assert store.txn_state(killed_txn) is TxnState.OPEN
    assert t.read().equals(before)  # whatever the dead worker wrote is invisible

    clock.advance(301)
    lines: list[str] = []
    report = Compactor(store, initiator=False, clock=clock, on_event=lines.append).run_once()
    assert report.recovered, lines
    assert t.read().equals(before)
    final = q.get(cq_id)
    assert final is not None and final.state == "s"
    if step == "compaction.after_commit":
        assert report.compactions == []  # the committed work was kept, not redone
    else:
        assert store.txn_state(killed_txn) is not TxnState.OPEN
        assert [c.state for c in report.compactions] == ["r"]
    names = sorted(p.name for p in Path(t.dir()).iterdir())
    assert len([n for n in names if n.startswith("base_")]) == 1, names
    assert not [n for n in names if n.startswith(("delta_", "delete_delta_"))], names
    if step != "compaction.after_commit":
        assert not [n for n in names if n.endswith(f"_v{killed_txn:07d}")], names
    assert t.read().equals(before)


CLEANER_CHILD = """
import os, signal, sys
from acidstream.acid import faults
from acidstream.txn.store import open_store
from acidstream.compaction import Cleaner
seen = [0]
def hook(step):
    if step == "cleaner.before_delete":
        seen[0] += 1
        if seen[0] == int(sys.argv[2]):
            os.kill(os.getpid(), signal.SIGKILL)
faults.set_hook(hook)
store = open_store(sys.argv[1])
Cleaner(store).run_once()
print("survived")
"""


@pytest.mark.parametrize("kill_at", [1, 2, 4])
def test_cleaner_killed_mid_delete_then_restart(
    kill_at: int, store: TxnStore, store_url: str, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    """The cleaner dies before its ``kill_at``-th directory delete (and one directory it was
    deleting is left half-deleted); readers see the same rows throughout, and a restarted
    cleaner finishes: only the base is left, no row lost, doubled or resurrected (the
    aborted and the deleted rows stay invisible after their txns are forgotten)."""
    t = make_tbl("t", buckets=3)
    ws = [t.insert(rows(b * 100, b * 100 + 40), bucket=b) for b in (0, 1, 2)]
    t.delete([(ws[0], b0(0, 0), 1), (ws[2], b0(0, 2), 5)])
    t.insert(rows(400, 420), bucket=1, outcome="abort")
    t.insert(rows(500, 510), bucket=2)
    before = t.read()
    assert before.num_rows == 120 + 10 - 2
    q = CompactionQueue(store)
    cq_id, _ = q.request("default", "t", major=True)
    report = Compactor(store, initiator=False, cleaner=False, clock=clock).run_once()
    assert [c.state for c in report.compactions] == ["r"]
    old = sorted(
        p.name for p in Path(t.dir()).iterdir() if p.name.startswith(("delta_", "delete_delta_"))
    )
    assert len(old) == 6  # four insert deltas, one delete delta, one aborted delta

    proc = subprocess.run(
        [sys.executable, "-c", CLEANER_CHILD, store_url, str(kill_at)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "survived" not in proc.stdout
    left = sorted(
        p.name for p in Path(t.dir()).iterdir() if p.name.startswith(("delta_", "delete_delta_"))
    )
    assert len(left) == len(old) - (kill_at - 1), left  # died mid-way, as intended
    rec = q.get(cq_id)
    assert rec is not None and rec.state == "r"  # not yet cleaned: will be retried
    assert t.read().equals(before)
    # What a kill inside a recursive delete leaves: a directory without some of its files.
    half = next(Path(t.dir()) / n for n in left if (Path(t.dir()) / n / "bucket_00000").exists())
    (half / "bucket_00000").unlink()
    assert t.read().equals(before)

    clock.advance(301)  # aborted txns may be forgotten once their data is gone
    cleaned = Cleaner(store, clock=clock).run_once()
    assert [c.state for c in cleaned if c.id == cq_id] == ["succeeded"]
    final = q.get(cq_id)
    assert final is not None and final.state == "s"
    names = sorted(p.name for p in Path(t.dir()).iterdir())
    assert [n for n in names if not n.startswith("base_")] == [], names
    assert len(names) == 1
    assert t.read().equals(before)
    # The aborted txn was forgotten only because its delta is gone: it now reads as
    # committed, and its rows must not come back.
    txns = store.get_valid_txns()
    assert not txns.aborted_txns
    assert t.read().equals(before)
