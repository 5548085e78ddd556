"""Sample events for the embedded main job and the benchmark (driver side)."""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
import time
from typing import Any

__all__ = ["produce_sample_events", "sample_event"]

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
