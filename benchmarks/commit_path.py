"""The commit path (issue 33 items 1-3): StreamingConnection txns/s by durability, against
deltalake on the same Arrow rows, in one run.

Prints, for 1,000-row txns (``--small`` of them) and 200,000-row txns (``--big``):
acidstream at transaction batches of 1 and 10, with ``durability`` fsync and flush
(``--modes``), row tuples and Arrow input; deltalake ``write_deltalake(mode="append")``.
Targets (issue 33): 200 x 1,000-row Arrow commits >= 10x deltalake at batch 1; 10 x
200,000-row Arrow appends >= 1.0x deltalake at batch 1 and 10.

Run before/after in one sitting with the older code first on ``PYTHONPATH`` (a worktree
of the start commit): ``--modes fsync`` there, as it has no durability setting.

Usage: python benchmarks/commit_path.py [--small 200] [--big 10] [--modes fsync,flush]
"""

from __future__ import annotations

import argparse
import inspect
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictDelimitedInputWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store

# The deltalake peer is streaming.py's (one copy of the peer for both benchmarks).
_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))
from streaming import delta_run  # noqa: E402


def _table(n: int, seed: int) -> pa.Table:
    ids = pa.array(range(seed * 10_000_000, seed * 10_000_000 + n), pa.int64())
    names = pa.array([f"name-{(seed * 7919 + i) % 999_983:010x}" for i in range(n)])
    sal = pa.array([(seed + i * 31) % 1_000_000 for i in range(n)], pa.int32())
    return pa.table({"id": ids, "name": names, "salary": sal})


def acid_run(root: Path, tables: list[pa.Table], *, batch: int, mode: str, rows: bool) -> float:
    """Seconds to write ``tables``, one txn each, through one StreamingConnection."""
    wh = root / f"acid_{batch}_{mode}_{int(rows)}"
    store = open_store(f"sqlite:///{wh}/metastore.db", warehouse=str(wh))
    store.create_table(
        TableDef(db="default", name="t",
                 columns=(("id", "bigint"), ("name", "string"), ("salary", "int")),
                 parameters={"transactional": "true"})
    )  # fmt: skip
    kwargs: dict[str, Any] = {}
    if "durability" in inspect.signature(StreamingOptions).parameters:
        kwargs["durability"] = mode
    elif mode != "fsync":
        raise SystemExit("this code has no durability setting: use --modes fsync")
    payload = [list(zip(*(c.to_pylist() for c in t.columns), strict=True)) for t in tables]
    t0 = time.perf_counter()
    with StreamingConnection(
        "t",
        record_writer=StrictDelimitedInputWriter(field_delimiter=","),
        store=store,
        options=StreamingOptions(txns_per_batch=batch, **kwargs),
    ) as conn:
        for k, t in enumerate(tables):
            conn.begin_transaction()
            if rows:
                conn.write_rows(payload[k])
            else:
                conn.write_arrow(t)
            conn.commit_transaction()
    secs = time.perf_counter() - t0
    store.close()
    return secs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=200, help="1,000-row txns")
    ap.add_argument("--big", type=int, default=10, help="200,000-row txns")
    ap.add_argument("--modes", default="fsync,flush")
    ap.add_argument("--no-rows", action="store_true", help="Arrow input only")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    root = Path(tempfile.mkdtemp(prefix="acid_commit_path_"))
    out: list[tuple[str, str, float]] = []
    try:
        for label, n, count in (("1k", 1000, args.small), ("200k", 200_000, args.big)):
            if not count:
                continue
            tables = [_table(n, k) for k in range(count)]
            d = root / label
            d.mkdir()
            secs = delta_run(d, tables)
            out.append((label, "deltalake append", count / secs))
            for mode in modes:
                for batch in (1, 10):
                    for rows in (False,) if args.no_rows or label == "200k" else (False, True):
                        name = f"acid {'rows' if rows else 'arrow'} batch {batch} {mode}"
                        secs = acid_run(d, tables, batch=batch, mode=mode, rows=rows)
                        out.append((label, name, count / secs))
            shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    peers = {label: rate for label, name, rate in out if name == "deltalake append"}
    print(f"{'txns':<5} {'writer':<32} {'txns/s':>9} {'vs deltalake':>13}")
    for label, name, rate in out:
        print(f"{label:<5} {name:<32} {rate:>9.1f} {rate / peers[label]:>12.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
