"""Compaction keeps timestamps exactly: nanoseconds, and Hive's whole range (9999-12-31).

The input files are built with pyarrow's ORC writer directly (the ACID event columns),
so what they hold does not depend on the project's writer; the outputs are read back
with pyarrow (in-range values, to the nanosecond) and with pyorc (the whole range).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pyorc
import pytest

from acidstream.acid import bucket_codec, layout
from acidstream.compaction import Worker
from acidstream.compaction.worker import CompactionOutcome
from acidstream.txn.catalog import TableDef
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.locks import DataOperationType, LockComponent, LockRequest, LockType
from acidstream.txn.store import TxnStore

NS_A = 1_577_934_245_123_456_789  # 2020-01-02 03:04:05.123456789
NS_B = 1_600_000_000_000_000_001  # 2020-09-13 12:26:40.000000001
NS_C = -1_000_000_001  # 1969-12-31 23:59:58.999999999: pyarrow's own writer gets it wrong
FAR = dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
HALF = dt.datetime(2020, 1, 1, 0, 0, 0, 500000)


def _table(store: TxnStore) -> TableDef:
    return store.create_table(
        TableDef(
            "default",
            "ts",
            (("id", "int"), ("ts", "timestamp")),
            parameters={"transactional": "true"},
        )
    )


def _write_txn(store: TxnStore, table: TableDef, ids: list[int], ts: pa.Array) -> int:
    """One committed txn whose delta file holds ``ts`` (pyarrow's ORC writer, ACID columns)."""
    txn = store.open_txns(1, user="test", host="h")[0]
    wid = store.allocate_write_ids([txn], table.db, table.name)[txn]
    lock = LockComponent(
        LockType.SHARED_WRITE, table.db, table.name, None, operation=DataOperationType.INSERT
    )
    store.lock(LockRequest((lock,), txn_id=txn, user="test", host="h"))
    assert table.location is not None
    d = Path(table.location) / layout.delta_dir_name(wid, wid, statement_id=0)
    d.mkdir(parents=True)
    (d / layout.ACID_FORMAT_FILE).write_bytes(b"2")
    n = len(ids)
    row = pa.StructArray.from_arrays([pa.array(ids, pa.int32()), ts], names=["id", "ts"])
    events = pa.table(
        {
            "operation": pa.array([0] * n, pa.int32()),
            "originalTransaction": pa.array([wid] * n, pa.int64()),
            "bucket": pa.array([bucket_codec.encode(0, 0)] * n, pa.int32()),
            "rowId": pa.array(range(n), pa.int64()),
            "currentTransaction": pa.array([wid] * n, pa.int64()),
            "row": row,
        }
    )
    orc.write_table(events, str(d / layout.bucket_file_name(0)))
    store.commit_txn(txn)
    return wid


def _compact(store: TxnStore, *, major: bool) -> CompactionOutcome:
    q = CompactionQueue(store)
    q.request("default", "ts", None, major=major)
    out = Worker(store, queue=q).run_once()
    assert out is not None
    return out


def _pyorc_ts(path: str) -> list[tuple[int, int]]:
    """``(seconds, nanoseconds)`` of every row's ``ts``, read by pyorc (the whole range)."""

    class Exact(pyorc.converters.ORCConverter):
        @staticmethod
        def from_orc(seconds: int, nanoseconds: int, timezone: object) -> tuple[int, int]:
            return (seconds, nanoseconds)

        @staticmethod
        def to_orc(*args: object) -> object:
            raise NotImplementedError

    with open(path, "rb") as f:
        r = pyorc.Reader(
            f,
            struct_repr=pyorc.StructRepr.DICT,
            converters={pyorc.TypeKind.TIMESTAMP: Exact},
            timezone=zoneinfo.ZoneInfo("UTC"),
        )
        return [ev["row"]["ts"] for ev in r]


def _outputs(out: CompactionOutcome) -> list[str]:
    return sorted(str(p) for d in out.output_dirs for p in Path(d).glob("bucket_*"))


@pytest.mark.parametrize("major", [True, False])
def test_nanoseconds_survive_compaction_exactly(store: TxnStore, major: bool) -> None:
    t = _table(store)
    _write_txn(store, t, [1], pa.array([NS_A], pa.timestamp("ns")))
    _write_txn(store, t, [2, 3], pa.array([NS_B, NS_C], pa.timestamp("ns")))
    assert orc.ORCFile(
        next(Path(t.location or "").glob("delta_0000002*/bucket_00000")).as_posix()
    ).read().column("row").combine_chunks().field("ts").cast(pa.int64()).to_pylist() == [
        NS_B,
        NS_C,
    ]  # the input as pyarrow reads it (and as the compactor does)
    out = _compact(store, major=major)
    assert out.state == "r", out.message
    (path,) = _outputs(out)
    # Read back by pyorc as ORC stores them (seconds, nanoseconds), as Hive reads them.
    assert _pyorc_ts(path) == [divmod(v, 10**9) for v in (NS_A, NS_B, NS_C)]


@pytest.mark.parametrize("major", [True, False])
def test_9999_12_31_is_compacted_to_the_microsecond(store: TxnStore, major: bool) -> None:
    """pyarrow cannot decode 9999-12-31 into nanoseconds; the compaction still succeeds and
    writes every value unchanged (microsecond precision is all these files hold)."""
    t = _table(store)
    _write_txn(store, t, [1, 2], pa.array([FAR, None], pa.timestamp("us")))
    _write_txn(store, t, [3], pa.array([HALF], pa.timestamp("us")))
    out = _compact(store, major=major)
    assert out.state == "r", out.message
    (path,) = _outputs(out)

    def exact(v: dt.datetime) -> tuple[int, int]:
        us = (v - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
        s, frac = divmod(us, 10**6)
        return (s, frac * 1000)

    got = _pyorc_ts(path)
    assert got == [exact(FAR), None, exact(HALF)]


def test_nanoseconds_next_to_9999_fail_the_compaction_without_loss(store: TxnStore) -> None:
    """Arrow has no type holding both 9999-12-31 and nanosecond digits: the compaction fails
    (its txn aborts, nothing becomes visible) rather than drop digits."""
    t = _table(store)
    _write_txn(store, t, [1], pa.array([FAR], pa.timestamp("us")))
    _write_txn(store, t, [2], pa.array([NS_A], pa.timestamp("ns")))
    out = _compact(store, major=True)
    assert out.state == "f"
    assert "without changing its values" in (out.message or "")
    assert t.location is not None
    assert sorted(p.name for p in Path(t.location).iterdir() if p.name.startswith("delta_")) == [
        layout.delta_dir_name(1, 1, statement_id=0),
        layout.delta_dir_name(2, 2, statement_id=0),
    ]


def test_original_files_with_9999_12_31_compact_through_the_reader(store: TxnStore) -> None:
    """With original (pre-ACID) files the rows come through ``acidstream.acid.reader``: read in
    nanoseconds first, and again in microseconds when a value is past 2262."""
    t = _table(store)
    assert t.location is not None
    Path(t.location).mkdir(parents=True, exist_ok=True)
    orc.write_table(
        pa.table({"id": pa.array([7], pa.int32()), "ts": pa.array([FAR], pa.timestamp("us"))}),
        str(Path(t.location) / "000000_0"),
    )
    _write_txn(store, t, [8], pa.array([NS_A], pa.timestamp("ns")))
    out = _compact(store, major=True)
    # The delta's nanosecond digit cannot sit next to 9999-12-31 in one Arrow column.
    assert out.state == "f" and "without changing its values" in (out.message or "")
    t2 = store.create_table(
        TableDef("default", "ts2", (("id", "int"), ("ts", "timestamp")),
                 parameters={"transactional": "true"})
    )  # fmt: skip
    assert t2.location is not None
    Path(t2.location).mkdir(parents=True, exist_ok=True)
    orc.write_table(
        pa.table({"id": pa.array([7], pa.int32()), "ts": pa.array([FAR], pa.timestamp("us"))}),
        str(Path(t2.location) / "000000_0"),
    )
    _write_txn(store, t2, [8], pa.array([HALF], pa.timestamp("us")))
    q = CompactionQueue(store)
    q.request("default", "ts2", None, major=True)
    out2 = Worker(store, queue=q).run_once()
    assert out2 is not None and out2.state == "r", out2.message
    (path,) = _outputs(out2)
    s_far, us_far = divmod((FAR - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1), 10**6)
    s_half, us_half = divmod(
        (HALF - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1), 10**6
    )
    assert _pyorc_ts(path) == [(s_far, us_far * 1000), (s_half, us_half * 1000)]
