"""Connection-open benchmark: opening a ``StreamingConnection`` on a table of many partitions.

A Spark task or an HTTP writer opens a connection per micro-batch or per table, so what an open
costs must not grow with the table. Two partitioned tables of one SQLite metastore: ``one`` with
a single partition, ``many`` with ``--partitions`` of them (created through the catalog
beforehand, not timed). Each open is timed on its own (best of ``--repeat``), then writes and
commits one row to an existing partition, so the connection is checked usable; the last line
prints the ratio of the two opens (target: ``many`` within 3x of ``one``). The same holds for
what the Spark sink's driver does once per micro-batch before its tasks run: the table's layout
(``acidstream.sinks.foreach_batch._table_layout``), timed on both tables with the same target.

Usage: python benchmarks/connection_open.py [--partitions 30000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acidstream.txn.store import TxnStore

TARGET = 3.0


def _open_seconds(store: TxnStore, table: str, repeat: int) -> float:
    from acidstream.ingest.connection import StreamingConnection, StreamingOptions
    from acidstream.ingest.record_writers import StrictJsonWriter

    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        conn = StreamingConnection(
            table,
            record_writer=StrictJsonWriter(),
            store=store,
            static_partition=["d00000"],
            options=StreamingOptions(txns_per_batch=1, housekeeping_interval_s=None),
        )
        best = min(best, time.perf_counter() - t0)
        with conn:
            conn.begin_transaction()
            conn.write_many([b'{"id": 1}'])
            conn.commit_transaction()
    return best


def _layout_seconds(store: TxnStore, table: str, repeat: int) -> float:
    from acidstream.sinks.foreach_batch import _table_layout

    t = store.get_table("default", table)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        _table_layout(store, t, "default", table)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    from acidstream.txn.catalog import TableDef
    from acidstream.txn.store import open_store

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=30_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="acid_open_"))
    store = open_store(f"sqlite:///{root}/metastore.db", warehouse=str(root))
    try:
        for name, n in (("one", 1), ("many", args.partitions)):
            store.create_table(
                TableDef(db="default", name=name, columns=(("id", "int"),),
                         partition_keys=(("d", "string"),), parameters={"transactional": "true"})
            )  # fmt: skip
            t0 = time.perf_counter()
            for i in range(n):
                store.add_partition("default", name, [f"d{i:05d}"])
            print(f"{name}: {n:,} partitions created in {time.perf_counter() - t0:.1f} s")
        one = _open_seconds(store, "one", args.repeat)
        many = _open_seconds(store, "many", args.repeat)
        print(f"open, 1 partition:           {one * 1000:8.2f} ms")
        print(f"open, {args.partitions:,} partitions: {many * 1000:8.2f} ms")
        ratio = many / one
        verdict = "met" if ratio <= TARGET else "MISSED"
        print(f"{args.partitions:,} partitions / 1 partition: {ratio:.2f}x "
              f"(target <= {TARGET:.0f}x): {verdict}")  # fmt: skip
        lone = _layout_seconds(store, "one", args.repeat)
        lmany = _layout_seconds(store, "many", args.repeat)
        print(f"sink layout per micro-batch, 1 partition:           {lone * 1000:8.2f} ms")
        print(
            f"sink layout per micro-batch, {args.partitions:,} partitions: {lmany * 1000:8.2f} ms"
        )
        lratio = lmany / lone
        lverdict = "met" if lratio <= TARGET else "MISSED"
        print(f"sink layout, {args.partitions:,} partitions / 1 partition: {lratio:.2f}x "
              f"(target <= {TARGET:.0f}x): {lverdict}")  # fmt: skip
        return 0 if ratio <= TARGET and lratio <= TARGET else 1
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
