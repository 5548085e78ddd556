"""Streaming ingest benchmark: StreamingConnection commits vs Hive's own writer, deltalake, pyiceberg.

Prints, in one run on this machine, for the same rows:
  * 1,000-row transactions (``--small-txns``, 200): commits/s of acidstream's
    ``StreamingConnection`` (typed rows, Arrow tables and delimited records; transaction batches
    of 1 and of 10; with ``durability: flush`` too when the connection has that option), of
    Hive 2.3's own writer (``OrcRecordUpdater`` driven as hcatalog streaming drives it, from a
    Java program: ``benchmarks/hive_writer``; with and without an fsync per commit), of
    deltalake ``write_deltalake(mode="append")`` and of pyiceberg ``append`` (SQLite catalog);
  * 200,000-row transactions (``--big-txns``, 10): rows/s of the same writers and of the pyorc
    floor (pyorc writing the same tuples to one plain ORC file, no transactions).
Hive's writer times itself inside its JVM (the JVM start, class loading and a warm-up are not
timed); every table it writes is read back with ``acidstream read`` (rows and id sum checked,
not timed). CPU seconds are the whole process's (Python: ``time.process_time``; Java: the JVM's).

Targets (issue 33), each printed PASS/FAIL with the ratio against the same run's peer:
  * StreamingConnection (rows and Arrow, batch 1 and 10) >= 1.0x Hive's writer with fsync;
  * the same with ``durability: flush`` >= 1.0x Hive's writer without fsync;
  * 10 x 200,000-row Arrow appends >= 1.0x Hive's writer (without fsync) and >= 1.0x deltalake,
    at batch 1 and at batch 10;
  * 200 x 1,000-row Arrow commits at batch 1 >= 10x deltalake.
Older targets, still printed: >= 300 commits/s at 1,000 rows/txn (batch 10); batch 10 >= 1.5x
the commits/s of batch 1; 200,000-row txns >= 0.7x the pyorc floor.

Usage: python benchmarks/streaming.py [--small-txns 200] [--big-txns 10] [--skip-peers]
       [--skip-hive] [--strict]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyorc

from acidstream.acid.schema import TableSchema
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictDelimitedInputWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store

# benchmarks/ is sys.path[0] when this file runs as a script; hive_writer sits beside it.
_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))
from hive_writer.driver import (  # noqa: E402
    HiveCase,
    HivePeerError,
    HivePeerUnavailable,
    HiveResult,
    HiveWriter,
)

SCHEMA = TableSchema.parse("id bigint, name string, salary int")
Row = tuple[int, str, int]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Result:
    """One timed case: ``scenario`` is ``1k`` or ``200k``; CPU seconds of the whole process."""

    scenario: str
    name: str
    txns: int
    rows: int
    seconds: float
    cpu_seconds: float

    @property
    def commits_per_s(self) -> float:
        return self.txns / self.seconds

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds


def _rows(n: int, seed: int) -> list[Row]:
    rnd = random.Random(seed)
    return [
        (seed * 10_000_000 + i, f"name-{rnd.getrandbits(40):010x}", rnd.randrange(10**6))
        for i in range(n)
    ]


def _arrow(rows: list[Row]) -> pa.Table:
    ids, names, sal = zip(*rows, strict=True)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array(names),
            "salary": pa.array(sal, pa.int32()),
        }
    )


def durability_supported() -> bool:
    """Whether ``StreamingOptions`` has the ``durability`` setting (issue 33 item 1)."""
    return "durability" in {f.name for f in dataclasses.fields(StreamingOptions)}


def acid_run(
    root: Path,
    batches: list[list[Row]],
    *,
    txn_batch: int,
    records: bool = False,
    arrow: list[pa.Table] | None = None,
    durability: str | None = None,
) -> float:
    """Writes ``batches`` (one txn each) through a ``StreamingConnection`` on a new SQLite
    warehouse; returns the seconds from the connection's open to its close."""
    wh = root / "acid"
    store = open_store(f"sqlite:///{wh}/metastore.db", warehouse=str(wh))
    store.create_table(
        TableDef(db="default", name="t", columns=tuple((n, str(t)) for n, t in SCHEMA.columns),
                 parameters={"transactional": "true"})
    )  # fmt: skip
    payloads = (
        [[f"{a},{b},{c}".encode() for a, b, c in rows] for rows in batches] if records else None
    )
    # Only passed when asked for, so the benchmark runs on code without the setting.
    extra = {} if durability is None else {"durability": durability}
    options = StreamingOptions(txns_per_batch=txn_batch, **extra)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    with StreamingConnection(
        "t",
        record_writer=StrictDelimitedInputWriter(field_delimiter=","),
        store=store,
        options=options,
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


def pyorc_floor(root: Path, batches: list[list[Row]]) -> float:
    t0 = time.perf_counter()
    with open(root / "floor.orc", "wb") as f:
        w = pyorc.Writer(f, SCHEMA.orc_row_schema(), compression=pyorc.CompressionKind.ZLIB)
        for rows in batches:
            w.writerows(rows)
        w.close()
    return time.perf_counter() - t0


def hive_name(batch: int, fsync: bool, mode: str = "objects") -> str:
    """The report's name of a Hive writer case."""
    what = "delimited records" if mode == "delimited" else "writables"
    return f"Hive 2.3 writer ({what}, batch {batch}, {'fsync' if fsync else 'hflush'})"


def hive_cases(scenario: str, rows_per_txn: int, txns: int) -> list[HiveCase]:
    """Hive's writer at batch 1 and 10, with and without fsync (and, for 1,000-row txns, the
    delimited records of acidstream's delimited case)."""
    cases = [
        HiveCase(
            name=f"{scenario}-b{batch}-{'fsync' if fsync else 'hflush'}",
            rows_per_txn=rows_per_txn,
            txns=txns,
            txns_per_batch=batch,
            fsync=fsync,
        )
        for batch in (1, 10)
        for fsync in (True, False)
    ]
    if scenario == "1k":
        cases.append(
            HiveCase(
                name="1k-b10-fsync-delimited",
                rows_per_txn=rows_per_txn,
                txns=txns,
                txns_per_batch=10,
                fsync=True,
                mode="delimited",
            )
        )
    return cases


class Runner:
    """Runs the cases of one benchmark run and keeps their results."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.results: list[Result] = []
        self.hive_results: list[HiveResult] = []
        self.notes: list[str] = []
        self.id_sums: dict[str, int] = {}

    def run(
        self, scenario: str, name: str, batches: list[list[Row]], fn: Callable[[Path], float]
    ) -> None:
        d = self.root / f"{scenario}_{len(self.results)}"
        d.mkdir()
        print(f"[{scenario}] {name} ...", flush=True)
        c0 = time.process_time()
        secs = fn(d)
        cpu = time.process_time() - c0
        rows = sum(map(len, batches))
        self.results.append(
            Result(
                scenario=scenario,
                name=name,
                txns=len(batches),
                rows=rows,
                seconds=secs,
                cpu_seconds=cpu,
            )
        )

    def run_hive(self, hive: HiveWriter | None, scenario: str, batches: list[list[Row]]) -> None:
        if hive is None:
            return
        size = len(batches[0])
        print(f"[{scenario}] Hive 2.3 writer (javac + one JVM; timed inside) ...", flush=True)
        flat = [r for rows in batches for r in rows]
        for hr in hive.run(flat, hive_cases(scenario, size, len(batches))):
            self.hive_results.append(hr)
            c = hr.case
            self.results.append(
                Result(
                    scenario=scenario,
                    name=hive_name(c.txns_per_batch, c.fsync, c.mode),
                    txns=c.txns,
                    rows=hr.rows,
                    seconds=hr.seconds,
                    cpu_seconds=hr.cpu_seconds,
                )
            )

    def get(self, scenario: str, name: str) -> Result | None:
        return next((r for r in self.results if r.scenario == scenario and r.name == name), None)


def _acid_name(kind: str, batch: int, durability: str | None = None) -> str:
    return f"acidstream ({kind}, batch {batch}{', flush' if durability == 'flush' else ''})"


def _run_all(args: argparse.Namespace, run: Runner, hive: HiveWriter | None, flush: bool) -> None:
    small = [_rows(1000, k) for k in range(args.small_txns)]
    small_arrow = [_arrow(r) for r in small]
    durabilities: list[str | None] = [None, "flush"] if flush else [None]
    for durability in durabilities:
        for batch in (1, 10):
            run.run(
                "1k",
                _acid_name("rows", batch, durability),
                small,
                partial(acid_run, batches=small, txn_batch=batch, durability=durability),
            )
            run.run(
                "1k",
                _acid_name("Arrow", batch, durability),
                small,
                partial(
                    acid_run,
                    batches=small,
                    txn_batch=batch,
                    arrow=small_arrow,
                    durability=durability,
                ),
            )
    run.run(
        "1k",
        _acid_name("delimited records", 10),
        small,
        lambda d: acid_run(d, small, txn_batch=10, records=True),
    )
    run.run_hive(hive, "1k", small)
    if not args.skip_peers:
        run.run("1k", "deltalake append", small, lambda d: delta_run(d, small_arrow))
        run.run(
            "1k", "pyiceberg append (SQLite catalog)", small, lambda d: iceberg_run(d, small_arrow)
        )

    big = [_rows(200_000, 100 + k) for k in range(args.big_txns)]
    big_arrow = [_arrow(r) for r in big]
    run.run("200k", "pyorc floor (no txns)", big, lambda d: pyorc_floor(d, big))
    run.run("200k", _acid_name("rows", 1), big, lambda d: acid_run(d, big, txn_batch=1))
    for durability in durabilities:
        for batch in (1, 10):
            run.run(
                "200k",
                _acid_name("Arrow", batch, durability),
                big,
                partial(
                    acid_run, batches=big, txn_batch=batch, arrow=big_arrow, durability=durability
                ),
            )
    run.run_hive(hive, "200k", big)
    if not args.skip_peers:
        run.run("200k", "deltalake append", big, lambda d: delta_run(d, big_arrow))
        run.run(
            "200k", "pyiceberg append (SQLite catalog)", big, lambda d: iceberg_run(d, big_arrow)
        )

    run.id_sums["1k"] = sum(r[0] for rows in small for r in rows)
    run.id_sums["200k"] = sum(r[0] for rows in big for r in rows)


def _read_back(run: Runner, hive: HiveWriter) -> None:
    """Reads every table Hive's writer wrote back with acidstream's CLI (not timed)."""
    for i, hr in enumerate(run.hive_results):
        scenario = hr.case.name.split("-", 1)[0]
        checked = hive.read_back(hr, expected_id_sum=run.id_sums[scenario])
        run.hive_results[i] = checked
        if checked.read_back is not None:
            print(
                f"read back {hr.case.name}: {checked.read_back.rows:,} rows, id sum matches "
                f"({checked.read_back.seconds:.1f} s, not timed)",
                flush=True,
            )


def _report(run: Runner, flush: bool) -> tuple[int, int]:
    """Prints the table and the targets; returns (targets met, targets judged)."""
    print()
    print(
        f"{'scenario':<6} {'writer':<52} {'txns':>5} {'commits/s':>10} {'rows/s':>12} {'secs':>7} {'cpu s':>7}"
    )
    for r in run.results:
        print(
            f"{r.scenario:<6} {r.name:<52} {r.txns:>5} {r.commits_per_s:>10,.1f} "
            f"{r.rows_per_s:>12,.0f} {r.seconds:>7.2f} {r.cpu_seconds:>7.2f}"
        )
    for note in run.notes:
        print(note)
    met = judged = 0

    def target(label: str, scenario: str, ours: str, peer: str, factor: float) -> None:
        nonlocal met, judged
        a, b = run.get(scenario, ours), run.get(scenario, peer)
        if a is None or b is None:
            print(f"  {label}: skipped ({peer if b is None else ours} not run)")
            return
        ratio = a.commits_per_s / b.commits_per_s
        ok = ratio >= factor
        met += ok
        judged += 1
        what = "commits/s" if scenario == "1k" else "rows/s"
        ours_v = a.commits_per_s if scenario == "1k" else a.rows_per_s
        peer_v = b.commits_per_s if scenario == "1k" else b.rows_per_s
        print(
            f"  {label}: {ratio:.2f}x ({ours_v:,.1f} vs {peer_v:,.1f} {what}; "
            f"target >= {factor:g}x): {'PASS' if ok else 'FAIL'}"
        )

    print()
    print("Issue 33 targets (same run):")
    for kind in ("rows", "Arrow"):
        for batch in (1, 10):
            target(
                f"1k {kind} batch {batch} vs Hive with fsync",
                "1k",
                _acid_name(kind, batch),
                hive_name(batch, True),
                1.0,
            )
    if flush:
        for kind in ("rows", "Arrow"):
            for batch in (1, 10):
                target(
                    f"1k {kind} batch {batch}, durability flush, vs Hive without fsync",
                    "1k",
                    _acid_name(kind, batch, "flush"),
                    hive_name(batch, False),
                    1.0,
                )
    else:
        print(
            "  durability flush vs Hive without fsync: skipped: durability option not available "
            "(StreamingOptions has no 'durability' setting in this code)"
        )
    for batch in (1, 10):
        target(
            f"200k Arrow batch {batch} vs Hive without fsync",
            "200k",
            _acid_name("Arrow", batch),
            hive_name(batch, False),
            1.0,
        )
    for batch in (1, 10):
        target(
            f"200k Arrow batch {batch} vs deltalake",
            "200k",
            _acid_name("Arrow", batch),
            "deltalake append",
            1.0,
        )
    target("1k Arrow batch 1 vs deltalake", "1k", _acid_name("Arrow", 1), "deltalake append", 10.0)
    print("Also (not targets):")
    for batch in (1, 10):
        for scen in ("200k",):
            a, b = run.get(scen, _acid_name("Arrow", batch)), run.get(scen, hive_name(batch, True))
            if a and b:
                print(
                    f"  200k Arrow batch {batch} vs Hive with fsync: {a.rows_per_s / b.rows_per_s:.2f}x"
                )
    a, b = (
        run.get("1k", _acid_name("delimited records", 10)),
        run.get("1k", hive_name(10, True, "delimited")),
    )
    if a and b:
        print(
            f"  1k delimited records batch 10 vs Hive's StrictDelimitedInputWriter path with fsync: "
            f"{a.commits_per_s / b.commits_per_s:.2f}x"
        )

    print()
    print("Older targets:")
    b10, b1 = run.get("1k", _acid_name("rows", 10)), run.get("1k", _acid_name("rows", 1))
    if b10 and b1:
        print(
            f"  1,000-row txns, rows, batch 10: {b10.commits_per_s:,.0f} commits/s "
            f"(target >= 300): {'met' if b10.commits_per_s >= 300 else 'MISSED'}"
        )
        amort = b10.commits_per_s / b1.commits_per_s
        print(
            f"  batch 10 = {amort:.2f}x the commits/s of batch 1 (target >= 1.5): "
            f"{'met' if amort >= 1.5 else 'MISSED'}"
        )
    floor = run.get("200k", "pyorc floor (no txns)")
    for kind in ("rows", "Arrow"):
        acid = run.get("200k", _acid_name(kind, 1))
        if floor and acid:
            ratio = acid.rows_per_s / floor.rows_per_s
            print(
                f"  200,000-row txns, {kind}: {ratio:.2f}x the pyorc floor (target >= 0.7): "
                f"{'met' if ratio >= 0.7 else 'MISSED'}"
            )
    return met, judged


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--small-txns", type=int, default=200, help="number of 1,000-row transactions")
    ap.add_argument("--big-txns", type=int, default=10, help="number of 200,000-row transactions")
    ap.add_argument("--skip-peers", action="store_true", help="do not run deltalake / pyiceberg")
    ap.add_argument("--skip-hive", action="store_true", help="do not run Hive's writer (Java)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when an issue 33 target fails")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="acid_streaming_"))
    run = Runner(root)
    flush = durability_supported()
    hive: HiveWriter | None = None
    try:
        if not args.skip_hive:
            try:
                hive = HiveWriter(work_dir=root / "hive")
                hive.compile()
            except HivePeerUnavailable as e:
                run.notes.append(f"Hive's writer skipped: {e}")
                hive = None
        _run_all(args, run, hive, flush)
        # The figures first: reading Hive's tables back takes long on a loaded machine.
        met, judged = _report(run, flush)
        print()
        print(f"issue 33 targets: {met} of {judged} PASS")
        print(
            f"python {sys.version.split()[0]}, pyarrow {pa.__version__}, pyorc {pyorc.__version__}"
        )
        if hive is not None:
            print()
            _read_back(run, hive)
    except HivePeerError as e:
        print(f"streaming.py: Hive's writer: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if args.strict and met < judged else 0


if __name__ == "__main__":
    raise SystemExit(main())
