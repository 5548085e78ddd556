"""Every valid Hive timestamp accepted by a record writer commits and reads back exactly
(a record accepted at write time must never fail at commit): before 1970 with a
fraction, year 1 with a microsecond, 9999-12-31 23:59:59.999999, through the
connection's columnar block path into single-txn files and stitched streaming files."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable, snapshot_read

D = dt.datetime
# One txn per list: the first and last need the writer's exact path, the middle one not.
TXNS: list[list[tuple[int, str, str, D, D]]] = [
    [
        (1, "1969-07-20 20:17:40.5", "0001-01-01 00:00:00.000001",
         D(1969, 7, 20, 20, 17, 40, 500000), D(1, 1, 1, 0, 0, 0, 1)),
        (2, "9999-12-31 23:59:59.999999", "1960-01-01 00:00:00.000999",
         D(9999, 12, 31, 23, 59, 59, 999999), D(1960, 1, 1, 0, 0, 0, 999)),
    ],
    [
        (3, "2024-02-29 01:02:03.456789", "0001-01-01 00:00:00",
         D(2024, 2, 29, 1, 2, 3, 456789), D(1, 1, 1)),
    ],
    [
        (4, "1900-01-01 00:00:00.25", "9999-12-31 23:59:59",
         D(1900, 1, 1, 0, 0, 0, 250000), D(9999, 12, 31, 23, 59, 59)),
    ],
]  # fmt: skip


def _record(r: tuple[int, str, str, D, D]) -> bytes:
    return json.dumps({"id": r[0], "at": r[1], "until": r[2]}).encode()


@pytest.mark.parametrize("path", ["write_block", "write"])
@pytest.mark.parametrize("batch", [1, 3])
def test_valid_timestamps_commit_and_read_back_exactly(
    store: TxnStore, make_table: MakeTable, batch: int, path: str
) -> None:
    t = make_table("ts_range", "id int, at timestamp, until timestamp")
    conn = StreamingConnection(
        "ts_range",
        record_writer=StrictJsonWriter(),
        store=store,
        options=StreamingOptions(txns_per_batch=batch),
    )
    with conn as c:
        for txn in TXNS:
            c.begin_transaction()
            records = [_record(r) for r in txn]
            if path == "write_block":
                res = c.write_block(records)
                assert res.accepted == len(records) and not res.rejected
            else:
                for rec in records:
                    c.write(rec)
            c.commit_transaction()
    got: list[dict[str, Any]] = sorted(snapshot_read(store, t).to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": r[0], "at": r[3], "until": r[4]} for txn in TXNS for r in txn]
