"""Helpers for compaction tests: tables written txn by txn through the store and the acid writer.

Every write takes the txn's write lock first, so its ``TXN_COMPONENTS`` row exists (as
with Hive's and our streaming writers), which the initiator and cleaner rely on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from acidstream.acid import bucket_codec, layout
from acidstream.acid.reader import read_path
from acidstream.acid.schema import TableSchema
from acidstream.acid.storage import Storage
from acidstream.acid.writer import AcidFileWriter, write_delete_delta, write_delta
from acidstream.txn.catalog import TableDef
from acidstream.txn.locks import DataOperationType, LockComponent, LockRequest, LockType
from acidstream.txn.store import TxnStore
from tests.plugins.store_fixture import FakeClock

SCHEMA = "id bigint, name string, salary int"


def rows(lo: int, hi: int) -> list[tuple[int, str, int]]:
    return [(i, f"name-{i}", i * 10) for i in range(lo, hi)]


@dataclass
class Tbl:
    """A test table with helpers to write it txn by txn."""

    store: TxnStore
    table: TableDef
    open_txns: list[int] = field(default_factory=list)
    live_writers: list[AcidFileWriter] = field(default_factory=list)

    @property
    def schema(self) -> TableSchema:
        return self.table.schema

    def dir(self, partition: str | None = None) -> str:
        assert self.table.location is not None
        return self.table.location if partition is None else f"{self.table.location}/{partition}"

    def begin(self, op: DataOperationType, partition: str | None = None) -> tuple[int, int]:
        """Open a txn, take its write lock (recording the component), get a write id."""
        if partition is not None:
            self.store.add_partition(self.table.db, self.table.name, _values(partition))
        txn = self.store.open_txns(1, user="test", host="h")[0]
        wid = self.store.allocate_write_ids([txn], self.table.db, self.table.name)[txn]
        self.store.lock(
            LockRequest(
                (
                    LockComponent(
                        LockType.SHARED_WRITE,
                        self.table.db,
                        self.table.name,
                        partition,
                        operation=op,
                    ),
                ),
                txn_id=txn,
                user="test",
                host="h",
            )
        )
        return txn, wid

    def end(self, txn: int, outcome: str) -> None:
        if outcome == "commit":
            self.store.commit_txn(txn)
        elif outcome == "abort":
            self.store.abort_txn(txn)
        else:
            self.open_txns.append(txn)

    def insert(
        self,
        data: Sequence[tuple[Any, ...]],
        *,
        partition: str | None = None,
        bucket: int = 0,
        statement: int = 0,
        outcome: str = "commit",
        txn_wid: tuple[int, int] | None = None,
    ) -> int:
        """One txn inserting ``data`` into ``delta_w_w_stmt/bucket_N``; returns the write id."""
        txn, wid = txn_wid or self.begin(DataOperationType.INSERT, partition)
        write_delta(
            self.dir(partition),
            self.schema,
            wid,
            list(data),
            bucket_id=bucket,
            statement_id=statement,
        )
        if txn_wid is None:
            self.end(txn, outcome)
        return wid

    def delete(
        self,
        keys: Sequence[tuple[int, int, int]],
        *,
        partition: str | None = None,
        statement: int = 0,
        outcome: str = "commit",
        txn_wid: tuple[int, int] | None = None,
    ) -> int:
        """One txn deleting ROW__IDs ``(writeid, bucketid, rowid)``; returns the write id."""
        txn, wid = txn_wid or self.begin(DataOperationType.DELETE, partition)
        write_delete_delta(self.dir(partition), self.schema, wid, keys, statement_id=statement)
        if txn_wid is None:
            self.end(txn, outcome)
        return wid

    def streaming_batch(
        self,
        outcomes: Sequence[str],
        per_txn: int,
        *,
        start: int,
        partition: str | None = None,
        bucket: int = 0,
    ) -> tuple[int, int]:
        """A streaming txn batch in one ``delta_lo_hi/bucket_N`` with a side file, each txn
        committed, aborted or left open (``outcomes``); returns (lo, hi) write ids."""
        if partition is not None:
            self.store.add_partition(self.table.db, self.table.name, _values(partition))
        txns = self.store.open_txns(len(outcomes), user="test", host="h")
        wmap = self.store.allocate_write_ids(txns, self.table.db, self.table.name)
        lo, hi = wmap[txns[0]], wmap[txns[-1]]
        st, root = Storage.for_path(self.dir(partition))
        d = layout.delta_dir_name(lo, hi)
        w = AcidFileWriter(
            st,
            st.join(root, d, layout.bucket_file_name(bucket)),
            self.schema,
            kind="insert",
            bucket_id=bucket,
            streaming=True,
            side_file=True,
        )
        base = start
        for txn, outcome in zip(txns, outcomes, strict=True):
            self.store.lock(
                LockRequest(
                    (
                        LockComponent(
                            LockType.SHARED_READ,
                            self.table.db,
                            self.table.name,
                            partition,
                            operation=DataOperationType.INSERT,
                        ),
                    ),
                    txn_id=txn,
                    user="test",
                    host="h",
                )
            )
            w.insert(wmap[txn], rows(base, base + per_txn))
            base += per_txn
            w.flush()
            self.end(txn, outcome)
        if all(o != "open" for o in outcomes):
            w.close()
        else:
            self.live_writers.append(w)  # keeps the side file, as a live batch does
        return lo, hi

    def finish_open(self, outcome: str = "commit") -> None:
        for t in self.open_txns:
            self.end(t, outcome)
        self.open_txns.clear()

    def read(self, *, partition: str | None = None, **kw: Any) -> pa.Table:
        """What a new reader sees now (the store's snapshot), sorted by ROW__ID."""
        txns = self.store.get_valid_txns()
        wids = self.store.get_valid_write_ids(self.table.db, self.table.name, txns)
        t = read_path(
            self.dir(partition),
            write_ids=wids,
            txns=txns,
            include_row_id=True,
            schema=self.schema,
            **kw,
        )
        return sort_rows(t)


def sort_rows(t: pa.Table) -> pa.Table:
    rid = t.column("row__id").combine_chunks()
    keyed = t.append_column("_o", rid.field(0)).append_column("_b", rid.field(1))
    keyed = keyed.append_column("_r", rid.field(2))
    order = keyed.sort_by([("_o", "ascending"), ("_b", "ascending"), ("_r", "ascending")])
    return order.drop_columns(["_o", "_b", "_r"])


def _values(partition: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for kv in partition.split("/"):
        k, v = kv.split("=", 1)
        out[k] = v
    return out


def b0(stmt: int = 0, bucket: int = 0) -> int:
    return bucket_codec.encode(bucket, stmt)


MakeTbl = Callable[..., Tbl]


@pytest.fixture
def make_tbl(store: TxnStore) -> MakeTbl:
    """``make_tbl("t", partitioned=False, buckets=0, **params)``: a transactional table."""

    def make(
        name: str = "t",
        *,
        partitioned: bool = False,
        buckets: int = 0,
        params: dict[str, str] | None = None,
    ) -> Tbl:
        cols = tuple((n, str(t)) for n, t in TableSchema.parse(SCHEMA).columns)
        t = TableDef(
            db="default",
            name=name,
            columns=cols,
            partition_keys=(("ds", "string"),) if partitioned else (),
            bucket_cols=("id",) if buckets else (),
            num_buckets=buckets or -1,
            parameters={"transactional": "true", **(params or {})},
        )
        return Tbl(store, store.create_table(t))

    return make


@pytest.fixture
def fake_clock(clock: FakeClock) -> FakeClock:
    return clock


def partitioned_on(store: TxnStore, root: Path) -> Tbl:
    """``default.t`` (partitioned by ``ds``) located under ``root`` (e.g. a tmpfs to make
    read-only), two committed deltas of 3 rows in ``ds=a``."""
    t = Tbl(
        store,
        store.create_table(
            TableDef(
                db="default",
                name="t",
                columns=(("id", "bigint"), ("name", "string"), ("salary", "int")),
                partition_keys=(("ds", "string"),),
                parameters={"transactional": "true"},
                location=str(root / "t"),
            )
        ),
    )
    t.insert(rows(0, 3), partition="ds=a")
    t.insert(rows(3, 6), partition="ds=a")
    return t
