"""acid/ I/O benchmark: ACID write and snapshot-read throughput against their floors.

Prints, in one run on this machine:
  * write rows/s of a 1M-row insert delta (Arrow input -> pyarrow engine; row tuples -> pyorc
    engine) vs pyarrow's plain ORC write of the same rows and the pyorc floor (pyorc writing the
    same tuples, plain schema, no ACID logic). Target: ACID write >= 0.8x the pyorc floor.
  * read rows/s of a 1M-row table with 20 insert deltas and 10% of its rows deleted (one delete
    delta) vs pyarrow reading the same insert files with no merge. Target: >= 0.7x the raw read.

Usage: python benchmarks/acid_io.py [--rows 1000000] [--repeat 3] [--dir /tmp/x]
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

import numpy as np
import pyarrow as pa
import pyarrow.orc as po
import pyorc

from acidstream.acid import bucket_codec
from acidstream.acid.reader import read_path
from acidstream.acid.schema import TableSchema
from acidstream.acid.snapshot import ValidTxnList, ValidWriteIdList
from acidstream.acid.writer import write_delete_delta, write_delta

SCHEMA = TableSchema.parse("id bigint, name string, salary int")


def _data(n: int) -> tuple[pa.Table, list[tuple[int, str, int]]]:
    rnd = random.Random(7)
    names = [f"name-{rnd.getrandbits(40):010x}" for _ in range(n)]
    ids = np.arange(n, dtype=np.int64)
    salary = np.asarray([rnd.randrange(10**6) for _ in range(n)], dtype=np.int32)
    table = pa.table({"id": ids, "name": names, "salary": salary})
    rows = list(zip(ids.tolist(), names, salary.tolist(), strict=True))
    return table, rows


def _best(fn: Callable[[int], None], repeat: int) -> float:
    times = []
    for i in range(repeat):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return min(times)


def bench_write(root: Path, n: int, repeat: int) -> dict[str, float]:
    table, rows = _data(n)
    print(f"[write] {n:,} rows x {repeat} repeats ...", flush=True)

    def pyarrow_plain(i: int) -> None:
        po.write_table(table, str(root / f"plain_{i}.orc"), compression="zlib")

    def pyorc_floor(i: int) -> None:
        with open(root / f"floor_{i}.orc", "wb") as f:
            w = pyorc.Writer(f, SCHEMA.orc_row_schema(), compression=pyorc.CompressionKind.ZLIB)
            w.writerows(rows)
            w.close()

    def acid_arrow(i: int) -> None:
        write_delta(str(root / f"acid_arrow_{i}"), SCHEMA, 1, table)

    def acid_tuples(i: int) -> None:
        write_delta(str(root / f"acid_tuples_{i}"), SCHEMA, 1, rows)

    out = {}
    for name, fn in (
        ("pyarrow plain ORC", pyarrow_plain),
        ("pyorc floor", pyorc_floor),
        ("acid delta (Arrow input)", acid_arrow),
        ("acid delta (tuple input)", acid_tuples),
    ):
        out[name] = n / _best(fn, repeat)
        print(f"[write] {name:<28} {out[name]:>12,.0f} rows/s", flush=True)
    return out


def bench_read(root: Path, n: int, deltas: int, deleted: float, repeat: int) -> dict[str, float]:
    table, _ = _data(n)
    tdir = root / "read_table"
    per = n // deltas
    files = []
    print(
        f"[read] building {deltas} deltas of {per:,} rows and deleting {deleted:.0%} ...",
        flush=True,
    )
    for k in range(deltas):
        files.append(write_delta(str(tdir), SCHEMA, k + 1, table.slice(k * per, per)))
    rnd = random.Random(11)
    b = bucket_codec.encode(0, 0)
    victims = rnd.sample(range(deltas * per), int(deltas * per * deleted))
    write_delete_delta(str(tdir), SCHEMA, deltas + 1, [(v // per + 1, b, v % per) for v in victims])
    write_ids = ValidWriteIdList.from_string(f"bench.t:{deltas + 1}:9223372036854775807::")
    expect = deltas * per - len(victims)

    def raw(_: int) -> None:
        pa.concat_tables([po.ORCFile(f).read() for f in files])

    def acid(_: int) -> None:
        t = read_path(str(tdir), write_ids=write_ids, txns=ValidTxnList())
        if t.num_rows != expect:
            raise SystemExit(f"acid read returned {t.num_rows} rows, expected {expect}")

    total = deltas * per
    out = {}
    for name, fn in (("pyarrow raw read (no merge)", raw), ("acid snapshot read", acid)):
        out[name] = total / _best(fn, repeat)
        print(f"[read]  {name:<28} {out[name]:>12,.0f} rows/s", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--deltas", type=int, default=20)
    ap.add_argument("--deleted", type=float, default=0.10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--dir", default=None, help="scratch directory (default: a temp dir, removed after)"
    )
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="acid_io_"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        w = bench_write(root, args.rows, args.repeat)
        r = bench_read(root, args.rows, args.deltas, args.deleted, args.repeat)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    floor = w["pyorc floor"]
    rows = [
        ("write: acid (Arrow) / pyorc floor", w["acid delta (Arrow input)"] / floor, 0.8),
        ("write: acid (tuples) / pyorc floor", w["acid delta (tuple input)"] / floor, None),
        (
            "write: acid (Arrow) / pyarrow plain",
            w["acid delta (Arrow input)"] / w["pyarrow plain ORC"],
            None,
        ),
        (
            "read:  acid / pyarrow raw",
            r["acid snapshot read"] / r["pyarrow raw read (no merge)"],
            0.7,
        ),
    ]
    print()
    print(f"{'ratio':<38} {'value':>7} {'target':>8}  status")
    ok = True
    for label, value, target in rows:
        status = "-" if target is None else ("met" if value >= target else "MISSED")
        ok &= status != "MISSED"
        tgt = "" if target is None else f">= {target:.1f}"
        print(f"{label:<38} {value:>7.2f} {tgt:>8}  {status}")
    print(f"\npython {sys.version.split()[0]}, pyarrow {pa.__version__}, pyorc {pyorc.__version__}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
