"""Major compaction on Spark (one task per bucket, the driver commits) gives the same table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acidstream.compaction import Cleaner, Worker
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnState, TxnStore
from tests.compaction.conftest import MakeTbl, b0, rows

pytestmark = pytest.mark.spark


def test_spark_engine_compacts_each_bucket_in_its_own_task(
    store: TxnStore, make_tbl: MakeTbl, spark: Any
) -> None:
    t = make_tbl("t", buckets=3)
    ws = [t.insert(rows(b * 100, b * 100 + 50), bucket=b) for b in (0, 1, 2)]
    t.streaming_batch(["commit", "abort", "commit"], 10, start=1000, bucket=2)
    t.delete([(ws[0], b0(0, 0), 4), (ws[2], b0(0, 2), 49)])
    t.insert(rows(500, 510), bucket=1, outcome="abort")
    before = t.read()
    q = CompactionQueue(store)
    q.request("default", "t", major=True)
    out = Worker(store, queue=q, engine="spark", spark=spark).run_once()
    assert out is not None and out.state == "r", out
    assert out.buckets == 3 and out.inserts == before.num_rows
    assert out.txn_id is not None and store.txn_state(out.txn_id) is TxnState.COMMITTED
    files = sorted(p.name for p in Path(out.output_dirs[0]).glob("bucket_*"))
    assert files == ["bucket_00000", "bucket_00001", "bucket_00002"]
    assert t.read().equals(before)
    Cleaner(store, queue=q).run_once()
    assert t.read().equals(before)
