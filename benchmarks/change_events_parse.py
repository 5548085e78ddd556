"""Change-event parser benchmark: ``ChangeParser.parse`` events/s against Arrow's JSON reader.

Debezium-shaped values (schemas disabled, 70% updates, 20% creates, 10% deletes; a
tombstone after every other delete) for a table ``id bigint, name string, amount
decimal(12,2), status string, updated_at timestamp, lsn bigint`` go through
``ChangeParser.parse`` (what every upsert-sink task runs on its records), the ordering
``source.lsn``. The peer, in the same run on the same lines: ``pyarrow.json.read_json`` of
the non-NULL values with type inference (Arrow parsing the JSON alone, nothing converted,
no key or ordering checked). Each repetition runs both back to back, alternating the order;
each side keeps its best. No target: the ratio is reported.

Usage: python benchmarks/change_events_parse.py [--events 300000] [--repeat 5] [--schemas]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import time

import pyarrow as pa
import pyarrow.json as pa_json

from acidstream.acid.schema import TableSchema
from acidstream.ingest.change_events import ChangeParser, ChangeSpec

SCHEMA = TableSchema.of(
    [("id", "bigint"), ("name", "string"), ("amount", "decimal(12,2)"), ("status", "string"),
     ("updated_at", "timestamp"), ("lsn", "bigint")]
)  # fmt: skip


def events(n: int, *, schemas: bool, seed: int = 31) -> pa.Table:
    rng = random.Random(seed)
    keys: list[bytes] = []
    values: list[bytes | None] = []
    lsn = 0
    while len(values) < n:
        lsn += 1
        k = rng.randrange(n // 3 + 1)
        op = rng.choices(["u", "c", "d"], weights=[70, 20, 10])[0]
        row = {"id": k, "name": f"name-{k}", "amount": f"{rng.randrange(10**6)}.{rng.randrange(100):02d}",
               "status": rng.choice(["new", "paid", "shipped"]), "updated_at": "2026-11-27 12:00:00.123456"}  # fmt: skip
        payload = {"before": {"id": k} if op != "c" else None, "after": None if op == "d" else row,
                   "source": {"version": "2.7.0", "connector": "postgresql", "name": "pg", "ts_ms": 1_800_000_000_000 + lsn,
                              "db": "shop", "schema": "public", "table": "orders", "lsn": lsn},
                   "op": op, "ts_ms": 1_800_000_000_100 + lsn}  # fmt: skip
        doc = (
            {"schema": {"type": "struct", "name": "pg.public.orders.Envelope"}, "payload": payload}
            if schemas
            else payload
        )
        key = json.dumps({"id": k}).encode()
        keys.append(key)
        values.append(json.dumps(doc).encode())
        if op == "d" and lsn % 2:
            keys.append(key)
            values.append(None)
    n = len(values)
    return pa.table({
        "key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
        "topic": pa.array(["pg.public.orders"] * n), "partition": pa.array([0] * n, pa.int32()),
        "offset": pa.array(range(n), pa.int64()),
        "timestamp": pa.array([1_800_000_000_000] * n, pa.timestamp("ms")),
    })  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--schemas", action="store_true", help="Debezium schemas enabled")
    args = ap.parse_args()
    batch = events(args.events, schemas=args.schemas)
    lines = b"\n".join(v for v in batch.column("value").to_pylist() if v is not None)
    parser = ChangeParser(ChangeSpec(format="debezium", key=("id",), ordering="source.lsn"), SCHEMA)
    best = {"parse": float("inf"), "pyarrow.json": float("inf")}

    def ours() -> None:
        got = parser.parse(batch)
        assert not got.rejected and got.events.num_rows == batch.num_rows

    def peer() -> None:
        t = pa_json.read_json(io.BytesIO(lines))
        assert t.num_rows > 0

    for r in range(args.repeat):
        order = [("parse", ours), ("pyarrow.json", peer)]
        for name, fn in order if r % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    n = batch.num_rows
    print(f"{n} records ({len(lines) / n:.0f} B/value avg), schemas={'on' if args.schemas else 'off'}, "
          f"best of {args.repeat}, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for name, s in best.items():
        print(f"  {name:13s} {n / s:>12,.0f} events/s  ({s:.3f} s)")
    print(f"  ratio parse / pyarrow.json = {best['pyarrow.json'] / best['parse']:.2f}")


if __name__ == "__main__":
    main()
