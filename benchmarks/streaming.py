"""Streaming ingest benchmark: StreamingConnection commits vs deltalake, pyiceberg and the pyorc floor.

Prints, in one run on this machine:
  * commits/s and rows/s for 1,000-row transactions (acidstream with transaction batches of 1
    and of 10, deltalake ``write_deltalake(mode="append")``, pyiceberg ``append`` on a SQLite
    catalog), all on the embedded/local setup and the same rows;
  * rows/s for 200,000-row transactions, the same writers, and the pyorc floor (pyorc writing
    the same tuples to one plain ORC file, no transactions).
Targets: >= 300 commits/s at 1,000 rows/txn; batches of 10 >= 1.5x the commits/s of batches of 1;
>= 0.7x the pyorc floor for 200,000-row txns.

Usage: python benchmarks/streaming.py [--small-txns 300] [--big-txns 5] [--skip-peers]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyorc

from acidstream.acid.schema import TableSchema
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictDelimitedInputWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store

SCHEMA = TableSchema.parse("id bigint, name string, salary int")


def _rows(n: int, seed: int) -> list[tuple[int, str, int]]:
    rnd = random.Random(seed)
    return [
        (seed * 10_000_000 + i, f"name-{rnd.getrandbits(40):010x}", rnd.randrange(10**6))
        for i in range(n)
    ]


def _arrow(rows: list[tuple[int, str, int]]) -> pa.Table:
    ids, names, sal = zip(*rows, strict=True)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array(names),
            "salary": pa.array(sal, pa.int32()),
        }
    )


def acid_run(
    root: Path,
    batches: list[list[tuple[int, str, int]]],
    *,
    txn_batch: int,
    records: bool,
    arrow: list[pa.Table] | None = None,
) -> float:
    wh = root / f"acid_{txn_batch}_{int(records)}"
    store = open_store(f"sqlite:///{wh}/metastore.db", warehouse=str(wh))
    store.create_table(
        TableDef(db="default", name="t", columns=tuple((n, str(t)) for n, t in SCHEMA.columns),
                 parameters={"transactional": "true"})
    )  # fmt: skip
    payloads = (
        [[f"{a},{b},{c}".encode() for a, b, c in rows] for rows in batches] if records else None
    )
    t0 = time.perf_counter()
    with StreamingConnection(
        "t",
        record_writer=StrictDelimitedInputWriter(field_delimiter=","),
        store=store,
        options=StreamingOptions(txns_per_batch=txn_batch),
    ) as conn:
        for k, rows in enumerate(batches):
            conn.begin_transaction()
            if arrow is not None:
                conn.write_arrow(arrow[k])
            elif payloads is not None:
                conn.write_block(payloads[k])  # the columnar record path (ingest, HTTP)
            else:
                conn.write_rows(rows)
            conn.commit_transaction()
    secs = time.perf_counter() - t0
    store.close()
    return secs


def delta_run(root: Path, tables: list[pa.Table]) -> float:
    from deltalake import write_deltalake

    path = str(root / "delta")
    t0 = time.perf_counter()
    for t in tables:
        write_deltalake(path, t, mode="append")
    return time.perf_counter() - t0


def iceberg_run(root: Path, tables: list[pa.Table]) -> float:
    from pyiceberg.catalog.sql import SqlCatalog

    wh = root / "iceberg"
    wh.mkdir()
    cat = SqlCatalog("bench", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", schema=tables[0].schema)
    t0 = time.perf_counter()
    for t in tables:
        tbl.append(t)
    return time.perf_counter() - t0


def pyorc_floor(root: Path, batches: list[list[tuple[int, str, int]]]) -> float:
    t0 = time.perf_counter()
    with open(root / "floor.orc", "wb") as f:
        w = pyorc.Writer(f, SCHEMA.orc_row_schema(), compression=pyorc.CompressionKind.ZLIB)
        for rows in batches:
            w.writerows(rows)
        w.close()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--small-txns", type=int, default=300, help="number of 1,000-row transactions")
    ap.add_argument("--big-txns", type=int, default=5, help="number of 200,000-row transactions")
    ap.add_argument("--skip-peers", action="store_true", help="do not run deltalake / pyiceberg")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="acid_streaming_"))
    results: list[tuple[str, str, int, int, float]] = []

    def run(scenario: str, name: str, txns: int, rows: int, fn: Callable[[Path], float]) -> float:
        d = root / f"{scenario}_{len(results)}"
        d.mkdir()
        print(f"[{scenario}] {name} ...", flush=True)
        secs = fn(d)
        results.append((scenario, name, txns, rows, secs))
        return secs

    try:
        small = [_rows(1000, k) for k in range(args.small_txns)]
        small_arrow = [_arrow(r) for r in small]
        n_small = sum(map(len, small))
        run(
            "1k",
            "acidstream (rows, batch 1)",
            len(small),
            n_small,
            lambda d: acid_run(d, small, txn_batch=1, records=False),
        )
        run(
            "1k",
            "acidstream (rows, batch 10)",
            len(small),
            n_small,
            lambda d: acid_run(d, small, txn_batch=10, records=False),
        )
        run(
            "1k",
            "acidstream (delimited records, batch 10)",
            len(small),
            n_small,
            lambda d: acid_run(d, small, txn_batch=10, records=True),
        )
        if not args.skip_peers:
            run("1k", "deltalake append", len(small), n_small, lambda d: delta_run(d, small_arrow))
            run(
                "1k",
                "pyiceberg append (SQLite catalog)",
                len(small),
                n_small,
                lambda d: iceberg_run(d, small_arrow),
            )

        big = [_rows(200_000, 100 + k) for k in range(args.big_txns)]
        big_arrow = [_arrow(r) for r in big]
        n_big = sum(map(len, big))
        floor = run("200k", "pyorc floor (no txns)", len(big), n_big, lambda d: pyorc_floor(d, big))
        acid_big = run(
            "200k",
            "acidstream (rows, batch 1)",
            len(big),
            n_big,
            lambda d: acid_run(d, big, txn_batch=1, records=False),
        )
        run(
            "200k",
            "acidstream (Arrow, batch 1)",
            len(big),
            n_big,
            lambda d: acid_run(d, big, txn_batch=1, records=False, arrow=big_arrow),
        )
        run(
            "200k",
            "acidstream (rows, batch 5)",
            len(big),
            n_big,
            lambda d: acid_run(d, big, txn_batch=5, records=False),
        )
        if not args.skip_peers:
            run("200k", "deltalake append", len(big), n_big, lambda d: delta_run(d, big_arrow))
            run(
                "200k",
                "pyiceberg append (SQLite catalog)",
                len(big),
                n_big,
                lambda d: iceberg_run(d, big_arrow),
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print()
    print(f"{'scenario':<6} {'writer':<42} {'txns':>6} {'commits/s':>10} {'rows/s':>12}")
    for scenario, name, txns, rows, secs in results:
        print(f"{scenario:<6} {name:<42} {txns:>6} {txns / secs:>10,.1f} {rows / secs:>12,.0f}")
    small_rate = max(
        r[2] / r[4] for r in results if r[0] == "1k" and r[1] == "acidstream (rows, batch 10)"
    )
    single_rate = max(
        r[2] / r[4] for r in results if r[0] == "1k" and r[1] == "acidstream (rows, batch 1)"
    )
    ratio = floor / acid_big
    arrow_big = next(r[4] for r in results if r[1] == "acidstream (Arrow, batch 1)")
    print()
    print(
        f"1,000-row txns, batch 10: {small_rate:,.0f} commits/s (target >= 300): {'met' if small_rate >= 300 else 'MISSED'}"
    )
    print(f"1,000-row txns, batch 1:  {single_rate:,.0f} commits/s")
    amortized = small_rate / single_rate
    print(
        f"transaction batch amortizes: batch 10 = {amortized:.2f}x the commits/s of batch 1 "
        f"(target >= 1.5): {'met' if amortized >= 1.5 else 'MISSED'}"
    )
    print(
        f"200,000-row txns, row tuples: {ratio:.2f}x the pyorc floor (target >= 0.7): {'met' if ratio >= 0.7 else 'MISSED'}"
    )
    aratio = floor / arrow_big
    print(
        f"200,000-row txns, Arrow input: {aratio:.2f}x the pyorc floor (target >= 0.7): {'met' if aratio >= 0.7 else 'MISSED'}"
    )
    print(f"python {sys.version.split()[0]}, pyarrow {pa.__version__}, pyorc {pyorc.__version__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
