"""Transaction commit throughput of the txn store: open + allocate write id + commit, one txn each.

Run: ``.venv/bin/python benchmarks/txn_commit.py [--n 3000] [--pg-url URL]``

Prints commits/s for SQLite (a temporary file) and PostgreSQL (a temporary schema
in the ``test`` database), and the ratio against the targets (1,000/s and 300/s).
Each commit is three store calls, each its own database transaction.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from acidstream.txn import TableDef, TxnStore, open_store

TARGETS = {"sqlite": 1000.0, "postgres": 300.0}
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


def _run(store: TxnStore, n: int) -> float:
    store.create_table(
        TableDef("default", "bench", (("id", "int"),), parameters={"transactional": "true"}),
        if_not_exists=True,
    )
    for _ in range(50):  # warm up caches and prepared statements
        (t,) = store.open_txns(1, user="bench", host="localhost", agent_info="txn_commit")
        store.allocate_write_ids([t], "default", "bench")
        store.commit_txn(t)
    start = time.perf_counter()
    for _ in range(n):
        (t,) = store.open_txns(1, user="bench", host="localhost", agent_info="txn_commit")
        store.allocate_write_ids([t], "default", "bench")
        store.commit_txn(t)
    return n / (time.perf_counter() - start)


def _report(name: str, rate: float) -> None:
    target = TARGETS[name]
    print(
        f"{name:9s} {rate:8.0f} commits/s  target {target:6.0f}/s  ratio {rate / target:5.2f}x"
        + ("" if rate >= target else "  BELOW TARGET")
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000, help="commits per backend")
    ap.add_argument("--pg-url", default=DEFAULT_PG, help="PostgreSQL database to use")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as d:
        with open_store(f"sqlite:///{d}/metastore.db", warehouse=f"{d}/wh") as store:
            _report("sqlite", _run(store, args.n))

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in args.pg_url else "?"
    try:
        store = open_store(f"{args.pg_url}{sep}schema={schema}", warehouse="/tmp/bench-wh")
    except Exception as e:
        print(f"postgres  skipped: {e}")
        return 0
    try:
        _report("postgres", _run(store, args.n))
    finally:
        store.close()
        import psycopg

        with psycopg.connect(args.pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
