"""List-bucketing benchmark: a filter on a skewed value, with and without list bucketing.

Two tables of one metastore (SQLite) get the same rows through the streaming connection:
``lb`` is skewed on ``x`` with the 10 frequent values stored as directories, ``plain`` is
not. 10 values hold 80% of the rows, the other 20% spread over many values. The query
``x = <a skewed value>`` is read by name through the Python reader (``acidstream.read_table``:
snapshot and each partition's skew from the metastore), best of ``--repeat``:

  * ``lb``, pruned: only that value's directory of each delta is read;
  * ``plain``: every file is read and filtered (the peer; target: lb >= 5x faster);
  * ``lb`` read with a ``pyarrow`` expression (no pruning), for reference.

Every read's rows are checked equal (same count, same sum) before a figure is printed.

Usage: python benchmarks/list_bucketing.py [--rows 3000000] [--txns 10] [--repeat 3] [--dir D]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import acidstream
from acidstream.acid.list_bucketing import SkewedInfo
from acidstream.ingest.connection import StreamingConnection
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store

SKEWED = tuple(range(100, 1100, 100))  # the 10 frequent values of x
TARGET = 5.0


def _data(n: int, seed: int) -> pa.Table:
    """``n`` rows: 80% spread evenly over ``SKEWED``, 20% over 100,000 other values."""
    rng = np.random.default_rng(seed)
    frequent = rng.random(n) < 0.8
    x = np.where(
        frequent,
        np.asarray(SKEWED, dtype=np.int32)[rng.integers(0, len(SKEWED), n)],
        rng.integers(2_000, 102_000, n).astype(np.int32),
    )
    payload = pc.binary_join_element_wise(
        "event-", pa.array(rng.integers(0, 10**12, n).astype(str)), ""
    )
    return pa.table({"x": x, "payload": payload, "v": rng.integers(0, 10**6, n)})


def _create(store: Any, name: str, skewed: SkewedInfo | None) -> None:
    store.create_table(
        TableDef(
            db="default",
            name=name,
            columns=(("x", "int"), ("payload", "string"), ("v", "bigint")),
            partition_keys=(("p", "string"),),
            parameters={"transactional": "true"},
            skewed=skewed,
        )
    )


def _best(fn: Callable[[], pa.Table], repeat: int) -> tuple[float, pa.Table]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    assert out is not None
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=3_000_000)
    ap.add_argument("--txns", type=int, default=10, help="committed txns (deltas) per table")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="lb_bench_"))
    root.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{root / 'metastore.db'}"
    wh = str(root / "wh")
    skew = SkewedInfo(
        col_names=("x",), col_values=tuple((str(v),) for v in SKEWED), stored_as_dirs=True
    )
    try:
        store = open_store(url, warehouse=wh)
        _create(store, "lb", skew)
        _create(store, "plain", None)
        per = args.rows // args.txns
        t0 = time.perf_counter()
        conns = [
            StreamingConnection(name, record_writer=StrictJsonWriter(), store=store)
            for name in ("lb", "plain")
        ]
        for i in range(args.txns):
            data = _data(per, seed=i)  # the same rows into both tables
            for c in conns:
                c.begin_transaction()
                c.write_arrow(data, partition=["1"])
                c.commit_transaction()
        for c in conns:
            c.close()
        store.close()
        rows = per * args.txns
        print(f"[write] 2 tables x {rows:,} rows in {args.txns} txns: "
              f"{time.perf_counter() - t0:.1f} s", flush=True)  # fmt: skip
        value = SKEWED[3]
        kw: dict[str, Any] = {"metastore": url, "warehouse": wh}
        where = [("x", "=", value)]

        def lb() -> pa.Table:
            return acidstream.read_table("default.lb", filter=where, **kw)

        def plain() -> pa.Table:
            return acidstream.read_table("default.plain", filter=where, **kw)

        def lb_unpruned() -> pa.Table:
            return acidstream.read_table("default.lb", filter=pc.field("x") == value, **kw)

        results = {}
        for label, fn in (
            ("lb, pruned", lb),
            ("plain (no lb)", plain),
            ("lb, unpruned", lb_unpruned),
        ):
            secs, t = _best(fn, args.repeat)
            results[label] = (secs, t.num_rows, pc.sum(t.column("v")).as_py())
            print(f"[read]  x = {value} {label:<16} {secs * 1000:8.1f} ms  "
                  f"{t.num_rows:,} rows", flush=True)  # fmt: skip
        checks = {(n, s) for _, n, s in results.values()}
        if len(checks) != 1:
            print(f"MISMATCH between reads: {results}")
            return 1
        ratio = results["plain (no lb)"][0] / results["lb, pruned"][0]
        status = "met" if ratio >= TARGET else "MISSED"
        print(f"\nx = <skewed value>: plain / list-bucketed read time = {ratio:.1f}x "
              f"(target >= {TARGET:.0f}x)  {status}")  # fmt: skip
        ref = results["lb, unpruned"][0] / results["lb, pruned"][0]
        print(f"same lb table read without pruning / pruned = {ref:.1f}x")
        print(f"python {sys.version.split()[0]}, pyarrow {pa.__version__}")
        return 0 if status == "met" else 1
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
