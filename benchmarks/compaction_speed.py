"""Compaction benchmark: read time before vs after a major compaction, compaction speed
against a pyarrow floor, and streaming ingest while the compactor runs.

The table: 1,000 insert deltas x 100 rows (one txn each) plus one delete delta removing
10% of the rows, in the embedded SQLite metastore. Prints:
  * snapshot read time before and after the major compaction (target: after >= 10x faster);
  * compaction throughput (input events per second: inserts + delete events read, through
    the worker's whole run: metastore calls, directory listing, merge, sort, ACID writer)
    vs the floor: pyarrow reading the same files and writing the surviving rows (with the
    ACID columns, same ORC settings) as one ORC file, no merge and no metastore.
    Target: >= 0.7x the floor. Both are the best of --repeat runs: the table (files and
    metastore) is restored from a copy before each compaction.
  * streaming ingest rate (benchmarks/streaming.py's 1,000-row transactions, batches of 10,
    StreamingConnection) alone vs while a compactor process compacts the table being
    written, in the same metastore; best of --stream-repeat alternated runs each.
    Target: >= 0.8x the rate alone.

    The compactor keeps Hive's default thresholds (more than 10 deltas; delta/base size
    above 0.1 makes it major), which choose what is compacted, but loops far more often
    than the defaults (initiator every 1 s instead of ``hive.compactor.check.interval``
    300 s, cleaner every 1 s instead of ``hive.compactor.cleaner.run.interval`` 5 s, idle
    worker poll 0.5 s instead of 5 s; intervals are settings, not rules), and the ingest
    is long (--stream-txns 2000 txns, about 10 s; the txns cycle over 200 distinct
    1,000-row batches so the rows need not all sit in memory), so compactions run while it
    is measured: with 10-txn batches the table gains a delta every ~50 ms. Which
    compactions overlapped the measured ingest is read from the metastore afterwards
    (each compaction's start and commit time, as SHOW COMPACTIONS has them); the benchmark
    prints them and exits with status 1 if any measured run with the compactor had none.

Usage: python benchmarks/compaction_speed.py [--deltas 1000] [--rows 100] [--repeat 3] [--dir /tmp/x]
           [--stream-txns 2000] [--stream-repeat 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Run as a script, this file's directory comes first on sys.path and its name would
# shadow the ``compaction`` package it measures.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.orc as po  # noqa: E402

from acidstream.acid import bucket_codec  # noqa: E402
from acidstream.acid.orc_options import OrcWriterOptions  # noqa: E402
from acidstream.acid.reader import read_path  # noqa: E402
from acidstream.acid.schema import TableSchema  # noqa: E402
from acidstream.acid.writer import write_delete_delta, write_delta  # noqa: E402
from acidstream.compaction import Compactor, CompactorConfig, Worker  # noqa: E402
from acidstream.ingest.connection import StreamingConnection, StreamingOptions  # noqa: E402
from acidstream.ingest.record_writers import StrictDelimitedInputWriter  # noqa: E402
from acidstream.txn.catalog import TableDef  # noqa: E402
from acidstream.txn.compaction_sql import CompactionQueue  # noqa: E402
from acidstream.txn.store import TxnStore, open_store  # noqa: E402


def _best(fn: Callable[[], object], repeat: int) -> float:
    return _best2(fn, repeat)[0]


def _best2(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(best wall-clock seconds, best CPU seconds of this process) of ``repeat`` runs."""
    wall, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return min(wall), min(cpu)


def _build(store: TxnStore, deltas: int, per: int) -> tuple[TableDef, int, int]:
    """The table; returns (table, inserted rows, delete events)."""
    table = store.create_table(
        TableDef(
            "default",
            "bench",
            (("id", "bigint"), ("name", "string"), ("salary", "int")),
            parameters={"transactional": "true"},
        )
    )
    assert table.location is not None
    rnd = random.Random(7)
    txns: list[int] = []
    for lo in range(0, deltas, 1000):
        txns += store.open_txns(min(1000, deltas - lo), user="bench", host="h")
    wids = store.allocate_write_ids(txns, "default", "bench")
    bucket = bucket_codec.encode(0, 0)
    keys: list[tuple[int, int, int]] = []
    for i, txn in enumerate(txns):
        ids = np.arange(i * per, (i + 1) * per, dtype=np.int64)
        data = pa.table(
            {
                "id": ids,
                "name": [f"name-{rnd.getrandbits(40):010x}" for _ in range(per)],
                "salary": np.asarray([rnd.randrange(10**6) for _ in range(per)], np.int32),
            }
        )
        write_delta(table.location, table.schema, wids[txn], data)
        keys += [(wids[txn], bucket, r) for r in sorted(rnd.sample(range(per), per // 10))]
    store.commit_txns(txns)
    dtxn = store.open_txns(1, user="bench", host="h")[0]
    dwid = store.allocate_write_ids([dtxn], "default", "bench")[dtxn]
    write_delete_delta(table.location, table.schema, dwid, keys)
    store.commit_txn(dtxn)
    return table, deltas * per, len(keys)


def _read(store: TxnStore, table: TableDef) -> int:
    txns = store.get_valid_txns()
    wids = store.get_valid_write_ids(table.db, table.name, txns)
    assert table.location is not None
    return read_path(table.location, write_ids=wids, txns=txns, schema=table.schema).num_rows


def _floor(location: str, out: Path, rows_out: int) -> None:
    """pyarrow: read every data file, write the surviving rows with ACID columns once."""
    tables = []
    for f in sorted(Path(location).glob("*/bucket_*")):
        tables.append(po.ORCFile(str(f)).read())
    inserts = pa.concat_tables([t for t in tables if t.column("row").null_count == 0])
    # The same ORC settings as the compactor's base writer (ZLIB, 64 MiB stripes, row
    # index, dictionary threshold 0.8): the floor measures the ACID work, not the options.
    po.write_table(inserts.slice(0, rows_out), str(out), **OrcWriterOptions().arrow_kwargs())


def _restore(pristine: Path, root: Path) -> None:
    """Put the table's files and metastore back as they were before any compaction."""
    for name in ("warehouse", "metastore.db"):
        target, src = root / name, pristine / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        if src.is_dir():
            shutil.copytree(src, target)
        else:
            shutil.copy2(src, target)


def _compact_once(root: Path, pristine: Path, expect: int) -> tuple[float, float]:
    """Restore the table, then time one whole worker run of a queued major compaction."""
    _restore(pristine, root)
    store = open_store(f"sqlite:///{root}/metastore.db", warehouse=str(root / "warehouse"))
    try:
        q = CompactionQueue(store)
        q.request("default", "bench", major=True)
        t, c = time.perf_counter(), time.process_time()
        outcome = Worker(store, queue=q).run_once()
        secs, cpu = time.perf_counter() - t, time.process_time() - c
        assert outcome is not None and outcome.state == "r", outcome
        assert outcome.inserts == expect, (outcome.inserts, expect)
    finally:
        store.close()
    return secs, cpu


STREAM_SCHEMA = TableSchema.parse("id bigint, name string, salary int")


def _stream_rows(n: int, seed: int) -> list[tuple[int, str, int]]:
    """benchmarks/streaming.py's rows."""
    rnd = random.Random(seed)
    return [
        (seed * 10_000_000 + i, f"name-{rnd.getrandbits(40):010x}", rnd.randrange(10**6))
        for i in range(n)
    ]


def _compactor_process(url: str, warehouse: str, ready: Any, stop: Any, done: Any) -> None:
    """The compactor daemon in its own process (``acidstream compactor``'s loops: initiator
    every 1 s, worker poll 0.5 s, cleaner 1 s; Hive's defaults are 300 s / 5 s / 5 s) until
    ``stop``; reports the CPU seconds it used."""
    store = open_store(url, warehouse=warehouse)
    # Hive's thresholds (10 deltas), loops much faster than Hive's so a short run sees work.
    config = CompactorConfig(check_interval_s=1.0, worker_poll_s=0.5, cleaner_interval_s=1.0)
    compactor = Compactor(store, config=config, on_event=lambda line: None)
    compactor.start()
    started = time.process_time()  # imports and start-up are not part of the measured run
    ready.set()
    stop.wait()
    compactor.stop()
    done.put(time.process_time() - started)
    store.close()


@dataclass(frozen=True)
class IngestRun:
    """One measured streaming ingest: its duration and, with the compactor, the compactions
    (start, commit) in wall-clock seconds that overlapped it."""

    seconds: float
    window: tuple[float, float]
    compactions: tuple[tuple[float, float], ...] = ()
    compactor_cpu: float = 0.0

    @property
    def inside(self) -> int:
        """Compactions that started and committed while the ingest was being measured."""
        lo, hi = self.window
        return sum(lo <= a and b <= hi for a, b in self.compactions)

    @property
    def busy_fraction(self) -> float:
        """Share of the measured ingest during which a compaction was running."""
        lo, hi = self.window
        spans = sorted((max(a, lo), min(b, hi)) for a, b in self.compactions)
        covered, end = 0.0, lo
        for a, b in spans:
            a = max(a, end)
            if b > a:
                covered, end = covered + b - a, b
        return covered / (hi - lo)


def _compaction_spans(store: TxnStore, lo: float, hi: float) -> tuple[tuple[float, float], ...]:
    """(start, commit) seconds of the compactions that committed and overlap [lo, hi]: the
    queue and history as SHOW COMPACTIONS lists them."""
    out = []
    for rec in CompactionQueue(store).show():
        if rec.start_ms is None or rec.commit_time_ms is None:
            continue  # refused, failed or never started: it did no work to overlap
        a, b = rec.start_ms / 1000, rec.commit_time_ms / 1000
        if a < hi and b > lo:
            out.append((a, b))
    return tuple(sorted(out))


def _ingest(
    root: Path, batches: list[list[tuple[int, str, int]]], txns: int, *, compact: bool
) -> IngestRun:
    """benchmarks/streaming.py's scenario (batches of 10 txns), ``txns`` 1,000-row txns
    cycling over ``batches``. With ``compact``, a compactor process works on the same table
    and the run reports the compactions that overlapped the measured ingest."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    url, wh = f"sqlite:///{root}/metastore.db", str(root / "warehouse")
    store = open_store(url, warehouse=wh)
    store.create_table(
        TableDef("default", "t", tuple((n, str(t)) for n, t in STREAM_SCHEMA.columns),
                 parameters={"transactional": "true"})
    )  # fmt: skip
    ctx = multiprocessing.get_context("spawn")
    ready, stop, done = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = (
        ctx.Process(target=_compactor_process, args=(url, wh, ready, stop, done))
        if compact
        else None
    )
    cpu = 0.0
    try:
        if proc is not None:
            proc.start()
            if not ready.wait(300):  # its loops run before the clock starts
                raise RuntimeError("the compactor process did not start")
        w0, t0 = time.time(), time.perf_counter()
        with StreamingConnection(
            "t",
            record_writer=StrictDelimitedInputWriter(field_delimiter=","),
            store=store,
            options=StreamingOptions(txns_per_batch=10),
        ) as conn:
            for k in range(txns):
                conn.begin_transaction()
                conn.write_rows(batches[k % len(batches)])
                conn.commit_transaction()
        secs = time.perf_counter() - t0
        window = (w0, w0 + secs)
    finally:
        stop.set()
        if proc is not None:
            cpu = done.get(timeout=600)
            proc.join()
    try:
        spans = _compaction_spans(store, *window) if compact else ()
    finally:
        store.close()
    run = IngestRun(secs, window, spans, cpu)
    if compact:
        print(
            f"[stream] {secs:.1f}s; {len(spans)} compactions overlapped it ({run.inside} "
            f"wholly inside), one running {run.busy_fraction:.0%} of the time; "
            f"compactor CPU {cpu:.1f}s",
            flush=True,
        )
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deltas", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=100, help="rows per delta")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    ap.add_argument(
        "--stream-txns", type=int, default=2000, help="1,000-row txns per run (0: skip)"
    )
    ap.add_argument("--stream-repeat", type=int, default=2)
    args = ap.parse_args(argv)
    status = 0
    root = Path(args.dir or tempfile.mkdtemp(prefix="acid-compaction-bench-"))
    try:
        store = open_store(f"sqlite:///{root}/metastore.db", warehouse=str(root / "warehouse"))
        print(f"[build] {args.deltas:,} deltas x {args.rows} rows + 10% deleted ...", flush=True)
        t0 = time.perf_counter()
        table, inserted, deleted = _build(store, args.deltas, args.rows)
        print(f"[build] {time.perf_counter() - t0:.1f}s", flush=True)
        assert table.location is not None
        visible = _read(store, table)
        assert visible == inserted - deleted, (visible, inserted, deleted)
        before = _best(lambda: _read(store, table), args.repeat)
        floor, floor_cpu = _best2(
            lambda: _floor(table.location or "", root / "floor.orc", visible), args.repeat
        )
        store.close()

        print(f"[compact] {args.repeat} runs, each on a fresh copy ...", flush=True)
        pristine = root / "pristine"
        pristine.mkdir()
        shutil.copytree(root / "warehouse", pristine / "warehouse")
        shutil.copy2(root / "metastore.db", pristine / "metastore.db")
        runs = [_compact_once(root, pristine, visible) for _ in range(args.repeat)]
        compact_s, compact_cpu = min(r[0] for r in runs), min(r[1] for r in runs)
        store = open_store(f"sqlite:///{root}/metastore.db", warehouse=str(root / "warehouse"))
        assert _read(store, table) == visible
        after = _best(lambda: _read(store, table), args.repeat)
        store.close()

        batches = [_stream_rows(1000, k) for k in range(min(args.stream_txns, 200))]
        alone: list[float] = []
        busy: list[IngestRun] = []
        for i in range(args.stream_repeat if batches else 0):
            print(f"[stream] run {i + 1}: alone, then with the compactor ...", flush=True)
            alone.append(_ingest(root / "stream", batches, args.stream_txns, compact=False).seconds)
            busy.append(_ingest(root / "stream", batches, args.stream_txns, compact=True))

        events = inserted + deleted
        print()
        print(
            f"table: {args.deltas:,} deltas x {args.rows} rows, {deleted:,} deleted, {visible:,} visible"
        )
        print(f"read before compaction:  {before * 1000:9.1f} ms")
        print(
            f"read after compaction:   {after * 1000:9.1f} ms   speed-up {before / after:6.1f}x (target >= 10x)"
        )
        print(
            f"major compaction:        {compact_s * 1000:9.1f} ms   {events / compact_s:12,.0f} events/s"
        )
        print(f"pyarrow floor:           {floor * 1000:9.1f} ms   {events / floor:12,.0f} events/s")
        print(f"compaction / floor:      {floor / compact_s:9.2f}x (target >= 0.7x)")
        print(
            f"  CPU seconds (less sensitive to a busy machine): compaction "
            f"{compact_cpu * 1000:.0f} ms, floor {floor_cpu * 1000:.0f} ms, "
            f"{floor_cpu / compact_cpu:.2f}x"
        )
        if alone:
            rows = args.stream_txns * 1000
            best = min(busy, key=lambda r: r.seconds)
            rate_alone, rate_busy = rows / min(alone), rows / best.seconds
            print(f"streaming ingest alone:  {rate_alone:12,.0f} rows/s")
            print(
                f"ingest with compactor:   {rate_busy:12,.0f} rows/s   (that run: "
                f"{len(best.compactions)} compactions overlapped it, {best.inside} wholly "
                f"inside, one running {best.busy_fraction:.0%} of the time)"
            )
            print(f"ingest ratio:            {rate_busy / rate_alone:9.2f}x (target >= 0.8x)")
            idle = [i + 1 for i, r in enumerate(busy) if not r.compactions]
            if idle:
                print(
                    f"FAILED: no compaction overlapped the measured ingest of run(s) "
                    f"{', '.join(map(str, idle))}: the ingest ratio measures nothing; "
                    "stream longer (--stream-txns)",
                    file=sys.stderr,
                )
                status = 1
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
