"""One corpus of poison records, shared by the API, CLI and Kafka-job tests.

Each of these was once accepted by ``write()`` and then failed the commit (losing the
whole txn, and wedging the Kafka job on every restart). Now each is rejected at the
point of entry with a reason, and the good records around it are committed.
"""

from __future__ import annotations

import json

COLUMNS = "id bigint, user_name string, amount decimal(10,2), event_time timestamp"
PARTITIONED_BY = "ds string"


def good(i: int, **over: object) -> bytes:
    rec: dict[str, object] = {
        "id": i, "user_name": f"u{i}", "amount": "1.25", "event_time": "2026-11-23 10:00:00",
        "ds": "2026-11-23",
    }  # fmt: skip
    rec.update(over)
    return json.dumps(rec).encode()


POISON: list[tuple[str, bytes]] = [
    ("timestamp after 9999", good(-1, event_time="10000-01-01 00:00:00")),
    ("timestamp year 0", good(-2, event_time="0000-12-31 23:59:59")),
    ("lone surrogate", b'{"id": -3, "user_name": "\\ud800", "ds": "2026-11-23"}'),
    ("partition value with NUL", good(-4, ds="a\u0000b")),
    ("partition name over 255 bytes", good(-5, ds="x" * 300)),
    ("decimal 1e400", b'{"id": -6, "amount": 1e400, "ds": "2026-11-23"}'),
    ("decimal too wide", good(-7, amount="123456789012.5")),
    ("not JSON", b"{oops"),
]

# Valid at the edges of Hive's range: these must be committed, not rejected.
EDGES: list[bytes] = [
    good(1_000_001, event_time="9999-12-31 23:59:59"),
    good(1_000_002, event_time="0001-01-01 00:00:00"),
]


def corpus(n_good: int = 40) -> tuple[list[bytes], list[int]]:
    """Good records with the poison ones spread among them, and the ids that must land."""
    records: list[bytes] = []
    ids: list[int] = []
    for i in range(n_good):
        records.append(good(i))
        ids.append(i)
        if i % 5 == 0 and i // 5 < len(POISON):
            records.append(POISON[i // 5][1])
    records += EDGES
    ids += [1_000_001, 1_000_002]
    return records, sorted(ids)
