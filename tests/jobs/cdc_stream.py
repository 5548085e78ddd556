"""A Debezium change log for the upsert job's tests, and its fold (what the table must be).

:class:`DebeziumLog` makes the Kafka records a Debezium connector would publish for a
source table ``(id bigint, name string, amount bigint)``: snapshot reads and inserts
(``r``/``c``), updates (``u``), deletes (``d``) each followed by a tombstone (a NULL value
with the key), with the envelope's schema on or off at random (``{"schema", "payload"}``
or the payload itself), keyed by Debezium's key JSON. On top of a connector's output it
adds what the issue's trackers ask about: the same record sent twice in a row (a producer
retry), two updates of one key published in the reverse of their ``source.lsn`` order,
deletes of keys never inserted, and bad records (not JSON, a missing key).

:meth:`DebeziumLog.fold` is the model: per key the event with the largest ``source.lsn``
wins, a delete removes the key. Tombstones change nothing there (each follows its key's
delete).
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from typing import Any

COLUMNS = "id bigint, name string, amount bigint, lsn bigint"
"""The table: the source's columns plus ``lsn`` (``source.lsn``: what ordering_guard compares)."""
ABSENT_BASE = 1_000_000
"""Ids of deletes of keys that never existed start here."""


@dataclass(frozen=True)
class Record:
    """One Kafka record: ``key`` and ``value`` bytes (``value`` None: a tombstone)."""

    key: bytes | None
    value: bytes | None


def _key_json(k: int, schemas: bool) -> bytes:
    payload = {"id": k}
    if schemas:
        schema = {"type": "struct", "name": "db.inventory.items.Key", "optional": False,
                  "fields": [{"field": "id", "type": "int64", "optional": False}]}  # fmt: skip
        return json.dumps({"schema": schema, "payload": payload}).encode()
    return json.dumps(payload).encode()


_ROW_SCHEMA = {
    "type": "struct", "optional": True, "name": "db.inventory.items.Value",
    "fields": [{"field": "id", "type": "int64", "optional": False},
               {"field": "name", "type": "string", "optional": True},
               {"field": "amount", "type": "int64", "optional": True}],
}  # fmt: skip


class DebeziumLog:
    """The records of a random change log, and the state they fold to."""

    def __init__(self, seed: int, *, key_schemas: bool = False) -> None:
        self.rng = random.Random(seed)
        # One key format per connector: the key bytes pick the Kafka partition, so all
        # events of one id stay in one partition, in order (what Debezium relies on).
        self.key_schemas = key_schemas
        self.lsn = 1000
        self.live: dict[int, dict[str, Any]] = {}  # the source table now
        self.next_id = 0
        self.next_absent = ABSENT_BASE
        self.latest: dict[int, tuple[int, dict[str, Any] | None]] = {}  # id -> (lsn, row|None)
        self.bad = 0
        self.tombstones = 0

    # ------------------------------------------------------------------ envelopes
    def _envelope(
        self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int
    ) -> bytes:
        now = int(time.time() * 1000)
        source = {"version": "2.5.0.Final", "connector": "postgresql", "name": "db",
                  "ts_ms": now, "db": "inventory", "table": "items", "lsn": lsn}  # fmt: skip
        payload = {"before": before, "after": after, "source": source, "op": op, "ts_ms": now}
        if self.rng.random() < 0.5:
            return json.dumps(payload).encode()
        schema = {"type": "struct", "name": "db.inventory.items.Envelope",
                  "fields": [dict(_ROW_SCHEMA, field="before"), dict(_ROW_SCHEMA, field="after"),
                             {"field": "source", "type": "struct", "fields": []},
                             {"field": "op", "type": "string"},
                             {"field": "ts_ms", "type": "int64", "optional": True}]}  # fmt: skip
        return json.dumps({"schema": schema, "payload": payload}).encode()

    def _record(self, k: int, value: bytes | None) -> Record:
        return Record(_key_json(k, self.key_schemas), value)

    def _change(self, op: str, k: int, after: dict[str, Any] | None) -> Record:
        self.lsn += self.rng.randint(1, 5)
        before = self.live.get(k)
        if op == "d" and before is None:
            before = {"id": k, "name": None, "amount": None}  # a key the table never had
        rec = self._record(k, self._envelope(op, before, after, self.lsn))
        prev = self.latest.get(k)
        if prev is None or self.lsn > prev[0]:
            self.latest[k] = (self.lsn, None if after is None else {**after, "lsn": self.lsn})
        if after is None:
            self.live.pop(k, None)
        else:
            self.live[k] = after
        return rec

    def _row(self, k: int) -> dict[str, Any]:
        return {"id": k, "name": f"n{k}-{self.rng.randrange(10**6)}",
                "amount": self.rng.randrange(-(10**9), 10**9)}  # fmt: skip

    # ------------------------------------------------------------------ changes
    def insert(self, op: str = "c") -> list[Record]:
        k = self.next_id
        self.next_id += 1
        return [self._change(op, k, self._row(k))]

    def update(self, k: int) -> list[Record]:
        return [self._change("u", k, self._row(k))]

    def delete(self, k: int) -> list[Record]:
        """A delete and the tombstone Debezium publishes after it."""
        self.tombstones += 1
        return [self._change("d", k, None), self._record(k, None)]

    def absent_delete(self) -> list[Record]:
        k = self.next_absent
        self.next_absent += 1
        return [self._change("d", k, None)]

    def reordered_updates(self, k: int) -> list[Record]:
        """Two updates of ``k`` published newest first (the older one is late)."""
        older, newer = self.update(k), self.update(k)
        return newer + older

    def bad_records(self) -> list[Record]:
        """A record that is not JSON and an insert without its key column."""
        self.bad += 2
        self.lsn += 1
        no_key = self._envelope("c", None, {"name": "x", "amount": 1}, self.lsn)
        return [Record(None, b"{not json"), Record(None, no_key)]

    def snapshot(self, n: int) -> list[Record]:
        """A connector's initial snapshot: ``n`` reads (``op: r``)."""
        return [r for _ in range(n) for r in self.insert("r")]

    def changes(
        self, n: int, *, duplicates: bool = True, exclude: frozenset[int] = frozenset()
    ) -> list[Record]:
        """About ``n`` records of random changes (inserts 20%, updates 60%, deletes 10%,
        reordered pairs, absent deletes), some sent twice in a row; keys in ``exclude``
        are left alone."""
        out: list[Record] = []
        while len(out) < n:
            roll = self.rng.random()
            live = sorted(set(self.live) - exclude)
            if roll < 0.2 or not live:
                recs = self.insert()
            elif roll < 0.8:
                recs = self.update(self.rng.choice(live))
            elif roll < 0.9:
                recs = self.delete(self.rng.choice(live))
            elif roll < 0.95:
                recs = self.reordered_updates(self.rng.choice(live))
            else:
                recs = self.absent_delete()
            out.extend(recs)
            if duplicates and self.rng.random() < 0.08:
                out.extend(recs)  # a producer retry: the same records again
        return out

    def orphan_tombstones(self, n: int, *, after_update: bool = False) -> list[Record]:
        """Tombstones alone (their delete compacted away): each deletes a live key; with
        ``after_update`` each follows an update of its key (a tombstone is newer than
        everything before it in its partition)."""
        out = []
        for k in self.rng.sample(sorted(self.live), min(n, len(self.live))):
            if after_update:
                out.extend(self.update(k))
            self.lsn += 1
            self.latest[k] = (self.lsn, None)
            self.live.pop(k)
            self.tombstones += 1
            out.append(self._record(k, None))
        return out

    # ------------------------------------------------------------------ the model
    def fold(self) -> dict[int, dict[str, Any]]:
        """The table the log folds to: per key its newest version, deleted keys gone."""
        return {k: row for k, (_, row) in sorted(self.latest.items()) if row is not None}
