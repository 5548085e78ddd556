"""Row-level mutations benchmark (issue 30): acidstream's DELETE, UPDATE and MERGE against
deltalake's ``delete``, ``update`` and ``merge`` on the same rows in the same run, plus
pyiceberg's ``upsert`` at a size it finishes.

The table: ``id bigint, v string, x double``, 8 buckets on ``id``, ``--rows`` rows (10M by
default): a base (``--rows - deltas * delta_rows`` rows, written in one txn and made a base
by a major compaction, the Cleaner run) plus ``--deltas`` streaming txns of
``--delta-rows`` rows, one delta directory each; SQLite metastore. deltalake gets the same
rows: one write of the base rows, then one append per delta.

Operations, each on both systems from the same starting state: before every timed
operation the table's files and metastore (acidstream) or the table directory (deltalake)
are restored from a copy of the state after the build (``shutil.copytree`` into the same
path, so the metastore's locations stay right; the copy is not timed and leaves both
systems' files in the page cache alike):

  * delete 1% by predicate: ``id % 100 = 7``;
  * update 10,000 rows by key: ``SET v = 'updated' WHERE id IN (<10,000 keys>)``;
  * merge 100,000 source rows on ``id``: 50,000 existing keys (update all) and 50,000
    new ones (insert all).

Targets: merge >= 3x deltalake's merge; delete and update >= 2x deltalake's (ratio =
deltalake's seconds / acidstream's). After each operation both tables are read in full and
compared: row count and an order-independent checksum (DuckDB ``sum(hash(id, v, x))``);
a difference fails the run (the systems would not have done the same work).

Then, on acidstream alone:
  * a 100-row MERGE (50 updates, 50 inserts) into the 10M-row table and into a 1M-row
    table built the same way (``--small-rows``): target <= 1.5x the small table's time;
  * ``--read-merges`` MERGEs of ``--read-merge-rows`` rows each (half updates, half
    inserts), then a full read vs a full read of the same rows written to a fresh table
    in one txn (no delete deltas): target >= 0.5x; then a major compaction of the merged
    table and the read again: target >= 0.9x.

pyiceberg ``upsert`` (SQLite catalog) of ``--iceberg-merge-rows`` source rows into a table
of ``--small-rows`` rows (base + the same appends), beside acidstream's and deltalake's
merge of the same source into their small tables; for information, no target.

Exit status 1 when a target is missed or a checksum differs.

Usage: python benchmarks/mutations.py [--rows 10000000] [--small-rows 1000000] [--deltas 20]
           [--delta-rows 50000] [--repeat 2] [--read-merges 20] [--read-merge-rows 10000]
           [--iceberg-merge-rows 10000] [--skip-iceberg] [--read-only] [--quick] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Run as a script, this file's directory comes first on sys.path; keep benchmark names
# from shadowing packages (as the other benchmarks do).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

import acidstream  # noqa: E402
from acidstream.compaction import Cleaner, Worker  # noqa: E402
from acidstream.ingest.connection import StreamingConnection, StreamingOptions  # noqa: E402
from acidstream.ingest.record_writers import StrictJsonWriter  # noqa: E402
from acidstream.txn.catalog import TableDef  # noqa: E402
from acidstream.txn.compaction_sql import CompactionQueue  # noqa: E402
from acidstream.txn.store import TxnStore, open_store  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("x", pa.float64())])
BUCKETS = 8
CHUNK = 1_000_000  # rows per write_arrow call while building


# ---------------------------------------------------------------------------- rows


def rows(lo: int, hi: int, tag: str = "name") -> pa.Table:
    """Rows with ids ``lo`` .. ``hi - 1``: ``v = '<tag>-<id>'``, ``x`` from the id."""
    ids = pa.array(np.arange(lo, hi, dtype=np.int64))
    v = pc.binary_join_element_wise(tag, pc.cast(ids, pa.string()), "-")
    x = pc.divide(pc.cast(pc.multiply(ids, 7919), pa.float64()), 1000.0)
    return pa.table([ids, v, x], schema=SCHEMA)


def merge_source(
    rng: np.random.Generator, existing: int, new_from: int, n: int, tag: str
) -> pa.Table:
    """``n`` source rows: ``n // 2`` keys drawn from ``0 .. existing - 1`` (updates), the
    rest new keys from ``new_from`` on (inserts)."""
    upd = np.sort(rng.choice(existing, n // 2, replace=False)).astype(np.int64)
    ins = np.arange(new_from, new_from + n - n // 2, dtype=np.int64)
    ids = pa.array(np.concatenate([upd, ins]))
    v = pc.binary_join_element_wise(tag, pc.cast(ids, pa.string()), "-")
    x = pc.cast(pc.negate(ids), pa.float64())
    return pa.table([ids, v, x], schema=SCHEMA)


def checksum(t: pa.Table) -> tuple[int, int]:
    """(rows, order-independent checksum of every row's id, v and x)."""
    con = duckdb.connect()
    con.register("t", t.select(["id", "v", "x"]))
    n, s = con.execute("SELECT count(*), sum(hash(id, v, x)) FROM t").fetchone()  # type: ignore[misc]
    con.close()
    return int(n), int(s or 0)


# ---------------------------------------------------------------------- acidstream


class Acid:
    """One acidstream table (``default.bench``) under ``root``: build, restore, mutate."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = f"sqlite:///{root}/metastore.db"
        self.wh = str(root / "warehouse")

    def store(self) -> TxnStore:
        return open_store(self.url, warehouse=self.wh)

    def handle(self, name: str = "default.bench") -> Any:
        return acidstream.table(name, metastore=self.url, warehouse=self.wh)

    def create(self, store: TxnStore, name: str) -> None:
        store.create_table(
            TableDef(
                "default", name, (("id", "bigint"), ("v", "string"), ("x", "double")),
                bucket_cols=("id",), num_buckets=BUCKETS,
                parameters={"transactional": "true"},
            )
        )  # fmt: skip

    def insert(self, store: TxnStore, name: str, parts: list[pa.Table]) -> None:
        """One streaming txn per table of ``parts`` (one delta directory each)."""
        with StreamingConnection(
            f"default.{name}", record_writer=StrictJsonWriter(), store=store,
            options=StreamingOptions(txns_per_batch=1, housekeeping_interval_s=None),
        ) as c:  # fmt: skip
            for t in parts:
                c.begin_transaction()
                for off in range(0, t.num_rows, CHUNK):
                    c.write_arrow(t.slice(off, CHUNK))
                c.commit_transaction()

    def compact(self, store: TxnStore, name: str) -> None:
        """A major compaction of ``default.name``, then the Cleaner (obsolete files go)."""
        q = CompactionQueue(store)
        q.request("default", name, major=True)
        outcome = Worker(store, queue=q).run_once()
        if outcome is None or outcome.state != "r":
            raise RuntimeError(f"major compaction of {name} failed: {outcome}")
        Cleaner(store, queue=q).run_once()

    def build(self, base: pa.Table, deltas: list[pa.Table]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        store = self.store()
        try:
            self.create(store, "bench")
            self.insert(store, "bench", [base])
            self.compact(store, "bench")
            self.insert(store, "bench", deltas)
        finally:
            store.close()

    def read(self, name: str = "default.bench") -> pa.Table:
        return self.handle(name).read()


def snapshot(root: Path, copy: Path) -> None:
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(root, copy)


def restore(copy: Path, root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(copy, root)


# ----------------------------------------------------------------------- deltalake


def delta_build(path: Path, base: pa.Table, deltas: list[pa.Table]) -> None:
    from deltalake import write_deltalake

    write_deltalake(str(path), base)
    for t in deltas:
        write_deltalake(str(path), t, mode="append")


def delta_read(path: Path) -> pa.Table:
    from deltalake import DeltaTable

    return pa.table(DeltaTable(str(path)).to_pyarrow_table())


def delta_merge(path: Path, src: pa.Table) -> None:
    from deltalake import DeltaTable

    (
        DeltaTable(str(path))
        .merge(src, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


def acid_merge(acid: Acid, src: pa.Table, name: str = "default.bench") -> Any:
    return (
        acid.handle(name)
        .merge(src, on=["id"])
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


def lookup_counts(acid: Acid, src: pa.Table) -> str:
    """What a MERGE's key lookup of ``src``'s ids reads in ``acid``'s table (files,
    stripes, row groups), in a txn opened for it and aborted."""
    from acidstream.acid.key_lookup import LookupCounts
    from acidstream.mutation.target import Target, read_rows

    store = acid.store()
    try:
        txn = store.open_txns(1, user="bench", host="localhost")[0]
        try:
            t = Target.open(store, store.get_table("default", "bench"), txn)
            c = LookupCounts()
            read_rows(t, t.partitions(), columns=["id"], keys=src.select(["id"]), counts=c)
            return c.text()
        finally:
            store.abort_txn(txn)
    finally:
        store.close()


# ----------------------------------------------------------------------- reporting


@dataclass(frozen=True)
class Line:
    """One printed comparison: ``value`` against ``target`` (``higher``: value must be >=)."""

    what: str
    detail: str
    value: float
    target: float
    higher: bool = True

    @property
    def met(self) -> bool:
        return self.value >= self.target if self.higher else self.value <= self.target

    def text(self) -> str:
        op = ">=" if self.higher else "<="
        verdict = "met" if self.met else "MISSED"
        return f"{self.what:<34} {self.detail:<58} {self.value:6.2f}x (target {op} {self.target}x) {verdict}"


CPU: dict[float, float] = {}
"""CPU seconds of this process (every thread: deltalake's Rust pool included) of the run
each wall-clock figure :func:`timed` returned came from, keyed by that figure."""


def timed(fn: Callable[[], object], before: Callable[[], object], repeat: int) -> float:
    """Best wall-clock seconds of ``repeat`` runs of ``fn``, ``before`` untimed before each
    (the run's CPU seconds are kept in :data:`CPU`)."""
    best, best_cpu = float("inf"), 0.0
    for _ in range(repeat):
        before()
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        secs, cpu = time.perf_counter() - t0, time.process_time() - c0
        if secs < best:
            best, best_cpu = secs, cpu
    CPU[best] = best_cpu
    return best


def paired(
    a: Callable[[], object],
    b: Callable[[], object],
    before_a: Callable[[], object],
    before_b: Callable[[], object],
    repeat: int,
) -> tuple[float, float]:
    """Best seconds of ``a`` and of ``b``, run alternately ``repeat`` times each: on a
    shared machine whose load changes by the minute, both see the same conditions."""
    sa, sb = [], []
    for _ in range(repeat):
        sa.append(timed(a, before_a, 1))
        sb.append(timed(b, before_b, 1))
    return min(sa), min(sb)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--small-rows", type=int, default=1_000_000)
    ap.add_argument("--deltas", type=int, default=20)
    ap.add_argument("--delta-rows", type=int, default=50_000, help="rows per delta (large table)")
    ap.add_argument("--repeat", type=int, default=2, help="best of N for the three operations")
    ap.add_argument("--read-merges", type=int, default=20)
    ap.add_argument("--read-merge-rows", type=int, default=10_000)
    ap.add_argument("--iceberg-merge-rows", type=int, default=10_000)
    ap.add_argument("--skip-iceberg", action="store_true")
    ap.add_argument(
        "--read-only",
        action="store_true",
        help="only the reads after --read-merges MERGEs (and after a major compaction)",
    )
    ap.add_argument(
        "--quick", action="store_true", help="1M / 100k rows: a smoke run, not a result"
    )
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.small_rows, args.delta_rows = 1_000_000, 100_000, 5_000
        args.read_merges, args.read_merge_rows, args.iceberg_merge_rows = 5, 2_000, 1_000
    status = 0
    tmp = Path(args.dir or tempfile.mkdtemp(prefix="acid-mutations-bench-"))
    rng = np.random.default_rng(30)
    lines: list[Line] = []
    table: list[str] = []

    def row(system: str, op: str, n: int, secs: float) -> None:
        cpu = CPU.get(secs, float("nan"))
        table.append(f"{op:<30} {system:<11} {secs:8.2f} s {n / secs:13,.0f} rows/s {cpu:8.2f} s")

    def check(op: str, a: pa.Table, d: pa.Table) -> None:
        nonlocal status
        ca, cd = checksum(a), checksum(d)
        same = "equal" if ca == cd else "DIFFERENT"
        log(f"  {op}: acidstream {ca[0]:,} rows, deltalake {cd[0]:,} rows, checksums {same}")
        if ca != cd:
            status = 1

    try:
        big_delta_rows = args.deltas * args.delta_rows
        small_delta_rows = args.small_rows // 10 // max(args.deltas, 1)
        n = args.rows
        base_n = n - big_delta_rows
        assert base_n > 0, "--rows must exceed deltas * delta-rows"

        def parts(total: int, per: int) -> tuple[pa.Table, list[pa.Table]]:
            b = total - args.deltas * per
            return rows(0, b), [rows(b + k * per, b + (k + 1) * per) for k in range(args.deltas)]

        base, deltas = parts(n, args.delta_rows)
        acid = Acid(tmp / "acid")
        dpath = tmp / "delta"
        log(
            f"build: acidstream {n:,} rows (base {base_n:,} + {args.deltas} x {args.delta_rows:,}) ..."
        )
        t0 = time.perf_counter()
        acid.build(base, deltas)
        if args.read_only:
            # The read targets alone: the same table and MERGEs, no other system.
            log(f"build: acidstream {time.perf_counter() - t0:.1f}s")
            del base, deltas
            status |= read_after_merges(acid, args, rng, n, row, lines)
            status |= report(args, n, table, lines)
            if status:
                print("FAILED: a target missed or a checksum differs (above)", file=sys.stderr)
            return status
        log(f"build: acidstream {time.perf_counter() - t0:.1f}s; deltalake ...")
        t0 = time.perf_counter()
        delta_build(dpath, base, deltas)
        log(f"build: deltalake {time.perf_counter() - t0:.1f}s")
        del base, deltas
        acid_copy, delta_copy = tmp / "acid.copy", tmp / "delta.copy"
        snapshot(acid.root, acid_copy)
        snapshot(dpath, delta_copy)
        check("after build", acid.read(), delta_read(dpath))

        def reset_acid() -> None:
            restore(acid_copy, acid.root)

        def reset_delta() -> None:
            restore(delta_copy, dpath)

        def reset() -> None:
            reset_acid()
            reset_delta()

        # ---- delete 1% by predicate
        from deltalake import DeltaTable

        # The first statement of a process imports the SQL compiler (sqlglot, ~0.5 s):
        # a cost of the process, not of a DELETE; import it before timing.
        import acidstream.merge_builder
        import acidstream.mutation  # noqa: F401

        pred = "id % 100 = 7"
        s_acid, s_delta = paired(
            lambda: acid.handle().delete(pred), lambda: DeltaTable(str(dpath)).delete(pred),
            reset_acid, reset_delta, args.repeat,
        )  # fmt: skip
        a = acid.read()
        n_del = n - a.num_rows
        check("delete", a, delta_read(dpath))
        row("acidstream", "delete 1% (id % 100 = 7)", n_del, s_acid)
        row("deltalake", "delete 1% (id % 100 = 7)", n_del, s_delta)
        lines.append(
            Line("delete vs deltalake", f"{s_delta:.2f}s / {s_acid:.2f}s", s_delta / s_acid, 2.0)
        )

        # ---- update 10,000 rows by key
        keys = np.sort(rng.choice(n, 10_000, replace=False))
        where = f"id IN ({', '.join(map(str, keys.tolist()))})"
        s_acid, s_delta = paired(
            lambda: acid.handle().update(set={"v": "'updated'"}, where=where),
            lambda: DeltaTable(str(dpath)).update(updates={"v": "'updated'"}, predicate=where),
            reset_acid, reset_delta, args.repeat,
        )  # fmt: skip
        a = acid.read()
        check("update", a, delta_read(dpath))
        row("acidstream", "update 10,000 by key", len(keys), s_acid)
        row("deltalake", "update 10,000 by key", len(keys), s_delta)
        lines.append(
            Line("update vs deltalake", f"{s_delta:.2f}s / {s_acid:.2f}s", s_delta / s_acid, 2.0)
        )

        # ---- merge 100,000 (half updates, half inserts)
        src = merge_source(rng, n, n, 100_000, "merged")
        res: list[Any] = []
        s_acid, s_delta = paired(
            lambda: res.append(acid_merge(acid, src)), lambda: delta_merge(dpath, src),
            reset_acid, reset_delta, args.repeat,
        )  # fmt: skip
        a = acid.read()
        log(
            f"  acidstream merge: {res[-1].rows_updated:,} updated, {res[-1].rows_inserted:,} inserted"
        )
        check("merge", a, delta_read(dpath))
        del a
        row("acidstream", "merge 100,000 (50% upd)", src.num_rows, s_acid)
        row("deltalake", "merge 100,000 (50% upd)", src.num_rows, s_delta)
        lines.append(
            Line("merge vs deltalake", f"{s_delta:.2f}s / {s_acid:.2f}s", s_delta / s_acid, 3.0)
        )

        # ---- 100-row merge: the big table vs a small one built the same way
        small = Acid(tmp / "small")
        sdelta = tmp / "small-delta"
        sbase, sdeltas = parts(args.small_rows, small_delta_rows)
        log(f"build: small tables {args.small_rows:,} rows ...")
        small.build(sbase, sdeltas)
        delta_build(sdelta, sbase, sdeltas)
        del sbase, sdeltas
        small_copy, sdelta_copy = tmp / "small.copy", tmp / "small-delta.copy"
        snapshot(small.root, small_copy)
        snapshot(sdelta, sdelta_copy)
        src100 = merge_source(rng, args.small_rows, n + 1_000_000, 100, "m100")
        rep = max(args.repeat, 3)
        s_big, s_small = paired(
            lambda: acid_merge(acid, src100), lambda: acid_merge(small, src100),
            reset_acid, lambda: restore(small_copy, small.root), rep,
        )  # fmt: skip
        row("acidstream", f"merge 100 into {n / 1e6:g}M", 100, s_big)
        row("acidstream", f"merge 100 into {args.small_rows / 1e6:g}M", 100, s_small)
        lines.append(
            Line(f"merge 100: {n / 1e6:g}M vs {args.small_rows / 1e6:g}M table",
                 f"{s_big:.2f}s / {s_small:.2f}s", s_big / s_small, 1.5, higher=False)
        )  # fmt: skip
        # What the MERGE's key lookup of those 100 keys reads in each table (untimed).
        reset_acid()
        restore(small_copy, small.root)
        for label, tab in ((f"{n / 1e6:g}M", acid), (f"{args.small_rows / 1e6:g}M", small)):
            log(f"  key lookup of the 100 keys, {label} table: {lookup_counts(tab, src100)}")

        # ---- pyiceberg upsert at a size it finishes, beside the others on the small tables
        if not args.skip_iceberg:
            isrc = merge_source(rng, args.small_rows, n + 2_000_000, args.iceberg_merge_rows, "ice")
            s_ia = timed(
                lambda: acid_merge(small, isrc), lambda: restore(small_copy, small.root), 1
            )
            s_id = timed(lambda: delta_merge(sdelta, isrc), lambda: restore(sdelta_copy, sdelta), 1)
            ice_t, s_ice = iceberg_upsert(tmp / "iceberg", args, isrc, parts, small_delta_rows)
            ci, cs = checksum(ice_t), checksum(small.read())
            log(
                f"  iceberg upsert: {ci[0]:,} rows, acidstream {cs[0]:,}: checksums {'equal' if ci == cs else 'DIFFERENT'}"
            )
            if ci != cs:
                status = 1
            label = f"merge {isrc.num_rows:,} into {args.small_rows / 1e6:g}M"
            row("acidstream", label, isrc.num_rows, s_ia)
            row("deltalake", label, isrc.num_rows, s_id)
            row("pyiceberg", label + " (upsert)", isrc.num_rows, s_ice)

        # ---- reads after --read-merges merges, and after a major compaction
        reset()
        status |= read_after_merges(acid, args, rng, n, row, lines)
        status |= report(args, n, table, lines)
        if status:
            print("FAILED: a target missed or a checksum differs (above)", file=sys.stderr)
    finally:
        if not args.dir:
            shutil.rmtree(tmp, ignore_errors=True)
    return status


def report(args: argparse.Namespace, n: int, table: list[str], lines: list[Line]) -> int:
    """Print the table of timings and the ratio lines; 1 when a target is missed."""
    status = 0
    print()
    print(f"table: {n:,} rows (id bigint, v string, x double), {BUCKETS} buckets on id, "
          f"base + {args.deltas} deltas; best of {args.repeat} (100-row merges: of 3, reads: of 5), "
          "the two sides of each ratio run alternately")  # fmt: skip
    print()
    print(f"{'operation':<30} {'system':<11} {'seconds':>10} {'rows/s':>20} {'CPU':>10}")
    for t in table:
        print(t)
    print()
    for line in lines:
        print(line.text())
        if not line.met:
            status = 1
    return status


def read_after_merges(
    acid: Acid,
    args: argparse.Namespace,
    rng: np.random.Generator,
    n: int,
    row: Callable[[str, str, int, float], None],
    lines: list[Line],
) -> int:
    """``--read-merges`` MERGEs into ``acid``, then its full read against the same rows
    written in one txn (no delete deltas), then after a major compaction; appends the rows
    and ratio lines, returns 1 when a checksum differs."""
    status = 0
    log(f"read: {args.read_merges} merges of {args.read_merge_rows:,} rows ...")
    next_id = n + 3_000_000
    for k in range(args.read_merges):
        m = merge_source(rng, n, next_id, args.read_merge_rows, f"r{k}")
        next_id += args.read_merge_rows
        acid_merge(acid, m)
    merged = acid.read()
    store = acid.store()
    try:
        acid.create(store, "ref")
        acid.insert(store, "ref", [merged])
    finally:
        store.close()
    ref = acid.read("default.ref")
    same = checksum(ref) == checksum(merged)
    log(f"  reference table: {ref.num_rows:,} rows, checksum {'equal' if same else 'DIFFERENT'}")
    if not same:
        status = 1
    del ref
    rep = max(args.repeat, 5)
    s_ref, s_merged = paired(
        lambda: acid.read("default.ref"), lambda: acid.read(), lambda: None, lambda: None, rep
    )
    store = acid.store()
    try:
        acid.compact(store, "bench")
    finally:
        store.close()
    compacted = acid.read()
    same = checksum(compacted) == checksum(merged)
    log(
        f"  after major compaction: {compacted.num_rows:,} rows, checksum {'equal' if same else 'DIFFERENT'}"
    )
    if not same:
        status = 1
    del compacted
    s_ref2, s_comp = paired(
        lambda: acid.read("default.ref"), lambda: acid.read(), lambda: None, lambda: None, rep
    )
    nr = merged.num_rows
    del merged
    row("acidstream", "read, no delete deltas", nr, s_ref)
    row("acidstream", f"read after {args.read_merges} merges", nr, s_merged)
    row("acidstream", "read, no delete deltas (again)", nr, s_ref2)
    row("acidstream", "read after major compaction", nr, s_comp)
    lines.append(
        Line(
            f"read after {args.read_merges} merges",
            f"{s_ref:.2f}s / {s_merged:.2f}s",
            s_ref / s_merged,
            0.5,
        )
    )
    lines.append(
        Line(
            "read after major compaction",
            f"{s_ref2:.2f}s / {s_comp:.2f}s",
            s_ref2 / s_comp,
            0.9,
        )
    )

    return status


def iceberg_upsert(
    root: Path,
    args: argparse.Namespace,
    src: pa.Table,
    parts: Callable[[int, int], tuple[pa.Table, list[pa.Table]]],
    per: int,
) -> tuple[pa.Table, float]:
    """pyiceberg (SQLite catalog): the small table's rows (base + appends), then one timed
    ``upsert`` of ``src`` on ``id``; returns (the table after it, seconds)."""
    from pyiceberg.catalog.sql import SqlCatalog

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    cat = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}")
    cat.create_namespace("db")
    base, deltas = parts(args.small_rows, per)
    tbl = cat.create_table("db.t", schema=base.schema)
    tbl.append(base)
    for t in deltas:
        tbl.append(t)
    log(f"  iceberg: {args.small_rows:,} rows; upsert of {src.num_rows:,} ...")
    secs = timed(lambda: tbl.upsert(src, join_cols=["id"]), lambda: None, 1)
    return pa.table(cat.load_table("db.t").scan().to_arrow()), secs


if __name__ == "__main__":
    sys.exit(main())
