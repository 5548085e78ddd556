"""Compaction output opened by ORC Java (the reader Hive uses): rows, stripes, schema and
the ACID metadata Hive needs, for major and minor outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.orc as orc
import pytest

from acidstream.compaction import Worker
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnStore
from tests.compaction.conftest import MakeTbl, b0, rows

pytestmark = pytest.mark.spark

ACID_KEYS = {"hive.acid.key.index", "hive.acid.stats", "hive.acid.version"}


@pytest.mark.parametrize("major", [True, False], ids=["major", "minor"])
def test_jvm_orc_reads_every_compacted_file(
    major: bool, store: TxnStore, make_tbl: MakeTbl, jvm_orc: Any
) -> None:
    t = make_tbl("t", buckets=2)
    ws = [t.insert(rows(b * 1000, b * 1000 + 30_000), bucket=b) for b in (0, 1)]
    t.streaming_batch(["commit", "abort", "commit"], 500, start=100_000, bucket=1)
    t.delete([(ws[0], b0(0, 0), 3), (ws[1], b0(0, 1), 7)])
    q = CompactionQueue(store)
    q.request("default", "t", major=major)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r"
    files = [f for d in out.output_dirs for f in sorted(Path(d).glob("bucket_*"))]
    assert len(files) >= (2 if major else 3)
    for f in files:
        got = jvm_orc.read(str(f))
        py = orc.ORCFile(str(f))
        assert got["rows"] == got["rows_read"] == py.nrows > 0
        assert got["stripes"] == py.nstripes
        assert got["schema"] == t.schema.orc_event_schema()
        assert set(got["metadata"]) == ACID_KEYS
        assert got["metadata"]["hive.acid.version"] == "2"
        assert got["metadata"]["hive.acid.key.index"].count(";") == got["stripes"]
