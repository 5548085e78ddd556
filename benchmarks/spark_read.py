"""Spark reading an ACID table through ``acidtable`` vs plain ORC and the Python reader.

One run builds, in a temporary warehouse with an embedded (SQLite) metastore:

* an ACID table of ``--rows`` rows (``id bigint, name string, salary int``) in ``--deltas``
  insert deltas (one committed txn each), then one delete txn removing ``--deleted``
  (default 5%) of the rows at random;
* the same rows as ``--deltas`` plain ORC files (the engine floor: Spark's native ORC
  reader, no merge, no deletes).

Then it times, best of ``--repeat``, one aggregate over every row (``count(*)``,
``sum(salary)``, ``max(name)``):

* ``spark.read.format("acidtable")`` (snapshot, deletes applied), in local[2];
* ``spark.read.orc`` of the plain files (target: acidtable >= 0.6x its rows/s);
* ``acidstream.acid.reader.read_path`` + pyarrow compute, single process.

Rates are rows of input (before deletes) per second, so the three are comparable.

Usage: python benchmarks/spark_read.py [--rows 10000000] [--deltas 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
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
import pyarrow.orc as po

from acidstream.acid import bucket_codec
from acidstream.acid.reader import read_path
from acidstream.acid.schema import TableSchema
from acidstream.acid.writer import write_delete_delta, write_delta
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore, open_store

COLUMNS = "id bigint, name string, salary int"


def _slice(lo: int, hi: int) -> pa.Table:
    ids = np.arange(lo, hi, dtype=np.int64)
    rnd = np.random.default_rng(lo)
    names = pa.array([f"name-{x:012d}" for x in rnd.integers(0, 10**12, hi - lo)], pa.string())
    salary = rnd.integers(0, 10**6, hi - lo).astype(np.int32)
    return pa.table({"id": ids, "name": names, "salary": salary})


def _commit_write(store: TxnStore, fn: Callable[[int], Any]) -> int:
    txn = store.open_txns(1, user="bench", host="h")[0]
    wid = store.allocate_write_ids([txn], "default", "bench")[txn]
    fn(wid)
    store.commit_txn(txn)
    return wid


def build(root: Path, rows: int, deltas: int, deleted: float) -> tuple[str, str, str, int]:
    """The ACID table and the plain ORC copy; returns (metastore url, warehouse, orc dir,
    surviving row count)."""
    wh = str(root / "wh")
    url = f"sqlite:///{root}/metastore.db"
    orc_dir = root / "orc"
    orc_dir.mkdir(parents=True)
    schema = TableSchema.parse(COLUMNS)
    store = open_store(url, warehouse=wh)
    try:
        t = store.create_table(
            TableDef(
                db="default",
                name="bench",
                columns=tuple((n, str(ht)) for n, ht in schema.columns),
                parameters={"transactional": "true"},
            )
        )
        assert t.location is not None
        loc = t.location
        per = rows // deltas
        rnd = np.random.default_rng(1)
        keys: list[tuple[int, int, int]] = []
        b0 = bucket_codec.encode(0)
        for i in range(deltas):
            lo, hi = i * per, rows if i == deltas - 1 else (i + 1) * per
            data = _slice(lo, hi)
            wid = _commit_write(store, lambda w, d=data: write_delta(loc, schema, w, d))  # type: ignore[misc]
            po.write_table(data, str(orc_dir / f"part-{i:05d}.orc"))
            n_del = int((hi - lo) * deleted)
            for r in sorted(rnd.choice(hi - lo, n_del, replace=False).tolist()):
                keys.append((wid, b0, int(r)))
            if (i + 1) % 10 == 0:
                print(f"  wrote {i + 1}/{deltas} deltas", flush=True)
        _commit_write(store, lambda w: write_delete_delta(loc, schema, w, keys))
    finally:
        store.close()
    return url, wh, str(orc_dir), rows - len(keys)


def _best(fn: Callable[[], tuple[int, ...]], repeat: int) -> tuple[float, tuple[int, ...]]:
    best = float("inf")
    out: tuple[int, ...] = ()
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--deltas", type=int, default=100)
    ap.add_argument("--deleted", type=float, default=0.05)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--skip-python", action="store_true", help="skip the read_table run")
    args = ap.parse_args(argv)

    root = Path(args.dir or tempfile.mkdtemp(prefix="spark_read_"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        print(f"building {args.rows:,} rows in {args.deltas} deltas, {args.deleted:.0%} deleted")
        t0 = time.perf_counter()
        url, wh, orc_dir, alive = build(root, args.rows, args.deltas, args.deleted)
        print(f"  built in {time.perf_counter() - t0:.1f}s; {alive:,} rows visible")

        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        from acidstream.sources.acid_table import AcidTableSource

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("spark_read_bench")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.memory", "4g")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(AcidTableSource)
        aggs = [F.count(F.lit(1)), F.sum("salary"), F.max("name")]

        def acid() -> tuple[int, ...]:
            df = (
                spark.read.format("acidtable")
                .option("metastore", url)
                .option("warehouse", wh)
                .load("default.bench")
            )
            r = df.agg(*aggs).collect()[0]
            return int(r[0]), int(r[1])

        def orc() -> tuple[int, ...]:
            r = spark.read.orc(orc_dir).agg(*aggs).collect()[0]
            return int(r[0]), int(r[1])

        results: dict[str, float] = {}
        t_acid, out_acid = _best(acid, args.repeat)
        assert out_acid[0] == alive, (out_acid, alive)
        results["acidtable"] = args.rows / t_acid
        t_orc, out_orc = _best(orc, args.repeat)
        assert out_orc[0] == args.rows
        results["spark.read.orc"] = args.rows / t_orc
        parts = (
            spark.read.format("acidtable")
            .option("metastore", url)
            .option("warehouse", wh)
            .load("default.bench")
            .rdd.getNumPartitions()
        )
        spark.stop()

        if not args.skip_python:
            store = open_store(url, warehouse=wh)
            try:
                tbl = store.get_table("default", "bench")
                txns = store.get_valid_txns()
                wids = store.get_valid_write_ids("default", "bench", txns)
            finally:
                store.close()
            assert tbl.location is not None
            loc = tbl.location

            def python() -> tuple[int, ...]:
                t = read_path(loc, write_ids=wids, txns=txns)
                return t.num_rows, int(pc.sum(t.column("salary")).as_py() or 0)

            t_py, out_py = _best(python, args.repeat)
            assert out_py == out_acid, (out_py, out_acid)
            results["python read_table"] = args.rows / t_py

        print(f"\n{args.rows:,} rows, {args.deltas} deltas, {args.deleted:.0%} deleted; "
              f"acidtable input partitions: {parts}; best of {args.repeat}")  # fmt: skip
        for name, rate in results.items():
            print(f"  {name:<18} {rate / 1e6:6.2f} M rows/s   {args.rows / rate:6.2f} s")
        ratio = results["acidtable"] / results["spark.read.orc"]
        print(f"  acidtable / spark.read.orc = {ratio:.2f}x (target >= 0.6x)")
        if "python read_table" in results:
            print(f"  acidtable / read_table     = "
                  f"{results['acidtable'] / results['python read_table']:.2f}x")  # fmt: skip
        return 0
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
