"""Sample events for the embedded main job and the benchmark (driver side)."""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
import time
from typing import Any

__all__ = ["produce_debezium_sample_events", "produce_sample_events", "sample_event"]

_DAYS = ("2026-11-18", "2026-11-19", "2026-11-20")


def sample_event(i: int, rnd: random.Random) -> bytes:
    """One JSON event matching ``configs/kafka_to_table.yaml``'s table."""
    day = _DAYS[i % len(_DAYS)]
    t = dt.datetime.fromisoformat(day) + dt.timedelta(seconds=rnd.randrange(86400))
    return json.dumps(
        {"id": i, "user_name": f"user{rnd.randrange(10_000)}", "amount": f"{rnd.randrange(100_000) / 100:.2f}",
         "event_time": t.strftime("%Y-%m-%d %H:%M:%S"), "ds": day}
    ).encode()  # fmt: skip


def produce_sample_events(
    producer: Any, topic: str, n: int, *, bad_every: int = 0, seed: int = 1, progress: bool = True
) -> int:
    """Send ``n`` events (ids ``0..n-1``) plus a malformed record after every ``bad_every``
    good ones (0: none). Returns how many bad records were sent. Prints progress lines."""
    rnd = random.Random(seed)
    bad = 0
    last = time.monotonic()
    for i in range(n):
        producer.send(topic, value=sample_event(i, rnd))
        if bad_every and (i + 1) % bad_every == 0:
            producer.send(topic, value=b'{"id": "not-a-number", ' + str(i).encode())
            bad += 1
        now = time.monotonic()
        if progress and now - last >= 1.0:
            print(f"produce: {i + 1:,}/{n:,} events", file=sys.stderr, flush=True)
            last = now
    producer.flush()
    return bad


def _debezium(op: str, before: Any, after: Any, lsn: int) -> bytes:
    now = int(time.time() * 1000)
    source = {"connector": "postgresql", "name": "pg", "db": "shop", "schema": "public",
              "table": "orders", "lsn": lsn, "ts_ms": now}  # fmt: skip
    return json.dumps(
        {"before": before, "after": after, "source": source, "op": op, "ts_ms": now}
    ).encode()


def produce_debezium_sample_events(
    producer: Any, topic: str, n: int, *, bad_every: int = 0, seed: int = 1, progress: bool = True
) -> tuple[int, int]:
    """Send ``n`` Debezium change events (schemas disabled) of a ``shop.public.orders``
    table matching ``configs/cdc_debezium.yaml``'s: a snapshot of ``n // 10`` rows, then
    70% updates, 20% inserts and 10% deletes (each followed by its tombstone), keyed by
    Debezium's key JSON, ``source.lsn`` increasing; plus a malformed record after every
    ``bad_every`` events (0: none). Returns ``(bad records, keys the table must hold)``:
    the number of orders alive at the end."""
    rnd = random.Random(seed)
    live: dict[int, dict[str, Any]] = {}
    next_id = lsn = bad = 0
    last = time.monotonic()

    def row(k: int) -> dict[str, Any]:
        return {"id": k, "customer": f"c{rnd.randrange(5000)}",
                "status": rnd.choice(("new", "paid", "shipped", "returned")),
                "amount": f"{rnd.randrange(100_000) / 100:.2f}"}  # fmt: skip

    for i in range(n):
        lsn += 1
        roll = rnd.random()
        if i < n // 10 or roll < 0.2 or not live:
            k, op = next_id, "r" if i < n // 10 else "c"
            next_id += 1
            live[k] = row(k)
            value: bytes | None = _debezium(op, None, live[k], lsn)
        elif roll < 0.9:
            k = rnd.choice(list(live)) if len(live) < 64 else rnd.randrange(next_id)
            if k not in live:  # a deleted id: update a live one instead
                k = next(iter(live))
            before, live[k] = live[k], row(k)
            value = _debezium("u", before, live[k], lsn)
        else:
            k = next(iter(live)) if len(live) < 64 else rnd.randrange(next_id)
            if k not in live:
                k = next(iter(live))
            value = _debezium("d", live.pop(k), None, lsn)
        key = json.dumps({"id": k}).encode()
        producer.send(topic, key=key, value=value)
        if value is not None and b'"op": "d"' in value:
            producer.send(topic, key=key, value=None)  # Debezium's tombstone after a delete
        if bad_every and (i + 1) % bad_every == 0:
            producer.send(topic, value=b'{"op": "u", "after": ' + str(i).encode())
            bad += 1
        now = time.monotonic()
        if progress and now - last >= 1.0:
            print(f"produce: {i + 1:,}/{n:,} change events", file=sys.stderr, flush=True)
            last = now
    producer.flush()
    return bad, len(live)
