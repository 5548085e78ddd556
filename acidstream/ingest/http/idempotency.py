"""Idempotency keys: a retried request is answered with its first response, never re-written.

Group commit puts several requests into one txn, but a commit stores ONE key/value
atomically (``commit_transaction(key=..., value=...)``). The scheme, per table:

- before the commit, each keyed request of the group writes a *pointer*
  ``_meta.acidstream.http.idem.<sha256(key)>`` = ``{"txn": T, "body_sha256": ...}`` (a
  plain table parameter, not atomic with anything);
- the commit itself stores the *marker* ``_meta.acidstream.http.txn.<T>`` = ``{<sha256
  (key)>: {"body_sha256": ..., "response": {...}}, ...}`` for every keyed request of the
  group, atomically: the marker exists if and only if txn ``T`` committed.

A request with a key looks up the pointer, then the marker of the txn it names. Marker
present with this key: the first attempt committed; answer its response (or 422 when
the body differs). No marker: the txn did not commit (yet): if the metastore shows it
open, the first attempt is still in flight (409 + ``Retry-After``; after a crash the
housekeeper aborts it within ``txn_timeout_s``); otherwise it never landed and the
request is written afresh (its pointer is overwritten). A pointer written for a txn that
later aborted is therefore harmless, and no commit's keys can be lost.

Both records carry the time they were written (``at``, seconds since the epoch). Keys
expire: after each housekeeping pass the server deletes pointers and markers older than
``idempotency_retention_s`` (24 h by default, at least the txn timeout, so a key always
outlives the txn that may commit it); a retry after that is written afresh. Two servers
given the same key at the same instant may both write it (one process serialises its own
requests by key).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from acidstream.txn.store import TxnState, TxnStore

__all__ = [
    "IDEM_PREFIX",
    "RECORD_PREFIX",
    "TXN_PREFIX",
    "IdempotencyIndex",
    "Lookup",
    "Outcome",
    "body_hash",
    "key_hash",
    "marker_entry",
    "marker_key",
    "pointer_key",
    "pointer_value",
]

RECORD_PREFIX = "_meta.acidstream.http."
IDEM_PREFIX = RECORD_PREFIX + "idem."
TXN_PREFIX = RECORD_PREFIX + "txn."
MAX_KEY_CHARS = 255  # longer Idempotency-Key headers are refused (400)


def key_hash(key: str) -> str:
    """The digest naming a client's key in table parameters (any characters, fixed size)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]


def body_hash(*parts: bytes) -> str:
    """Digest of what a request asks to write (partition and decoded body)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "big"))
        h.update(p)
    return h.hexdigest()


def pointer_key(khash: str) -> str:
    return IDEM_PREFIX + khash


def marker_key(txn_id: int) -> str:
    return f"{TXN_PREFIX}{txn_id}"


def pointer_value(txn_id: int, bhash: str, *, at: float) -> str:
    return json.dumps({"txn": txn_id, "body_sha256": bhash, "at": at}, separators=(",", ":"))


def marker_entry(bhash: str, response: Mapping[str, Any], *, at: float) -> dict[str, Any]:
    return {"body_sha256": bhash, "response": dict(response), "at": at}


class Outcome(Enum):
    FRESH = "fresh"  # never committed: write it
    REPLAY = "replay"  # committed with this body: answer the stored response
    MISMATCH = "mismatch"  # the key was used with another body: 422
    IN_PROGRESS = "in_progress"  # another attempt holds the key right now: 409


@dataclass(frozen=True)
class Lookup:
    outcome: Outcome
    response: Mapping[str, Any] | None = None


class IdempotencyIndex:
    """Lookups of one server: keys in flight in this process, recently committed keys,
    and the metastore (through ``store``, used by one thread at a time).

    Args:
        store: a store connection of its own (lookups run on worker threads).
        cache_size: committed keys remembered in memory per server.
    """

    def __init__(self, store: TxnStore, *, cache_size: int = 10_000) -> None:
        self._store = store
        self._store_lock = threading.Lock()
        self._lock = threading.Lock()
        self._inflight: set[tuple[str, str]] = set()
        self._recent: OrderedDict[tuple[str, str], tuple[str, Mapping[str, Any]]] = OrderedDict()
        self._cache_size = cache_size

    def claim(self, table: str, khash: str, bhash: str, *, db_table: tuple[str, str]) -> Lookup:
        """Look a key up; ``FRESH`` also claims it for this process until :meth:`release`.
        Blocking (metastore reads): call it off the event loop."""
        slot = (table, khash)
        with self._lock:
            if slot in self._inflight:
                return Lookup(Outcome.IN_PROGRESS)
            hit = self._recent.get(slot)
            if hit is not None:
                return _compare(hit[0], hit[1], bhash)
            self._inflight.add(slot)
        try:
            found = self._lookup_store(db_table, khash, bhash)
        except BaseException:
            self.release(table, khash)
            raise
        if found.outcome is not Outcome.FRESH:
            self.release(table, khash)
        return found

    def release(self, table: str, khash: str) -> None:
        with self._lock:
            self._inflight.discard((table, khash))

    def committed(
        self, table: str, entries: Mapping[str, Mapping[str, Any]], *, release: bool = True
    ) -> None:
        """Remember a commit's keys (``marker`` entries) and release their claims."""
        with self._lock:
            for khash, e in entries.items():
                self._recent[(table, khash)] = (e["body_sha256"], e["response"])
                self._recent.move_to_end((table, khash))
                if release:
                    self._inflight.discard((table, khash))
            while len(self._recent) > self._cache_size:
                self._recent.popitem(last=False)

    def _lookup_store(self, db_table: tuple[str, str], khash: str, bhash: str) -> Lookup:
        db, table = db_table
        with self._store_lock:
            get: Callable[[str], str | None] = lambda k: self._store.get_table_param(db, table, k)  # noqa: E731
            raw = get(pointer_key(khash))
            if raw is None:
                return Lookup(Outcome.FRESH)
            ptr = json.loads(raw)
            txn = int(ptr["txn"])
            marker = get(marker_key(txn))
            if marker is not None:
                entry = json.loads(marker).get(khash)
                if entry is not None:
                    return _compare(entry["body_sha256"], entry["response"], bhash)
            if self._store.txn_state(txn) is TxnState.OPEN:
                if ptr.get("body_sha256") != bhash:
                    return Lookup(Outcome.MISMATCH)
                return Lookup(Outcome.IN_PROGRESS)
            # Not open (any more): its marker is final now; it may have committed between
            # the first read and the state check.
            marker = get(marker_key(txn))
            if marker is not None:
                entry = json.loads(marker).get(khash)
                if entry is not None:
                    return _compare(entry["body_sha256"], entry["response"], bhash)
        return Lookup(Outcome.FRESH)

    def prune(self, table: str, db_table: tuple[str, str], *, older_than: float) -> int:
        """Delete the pointers and markers of a table written before ``older_than``
        (seconds since the epoch), in one metastore transaction; returns how many.
        A record without a readable time is kept. Blocking: call it off the event loop."""
        db, name = db_table
        with self._store_lock:
            records = self._store.table_params_with_prefix(db, name, RECORD_PREFIX)
            expired: list[str] = []
            keys: set[str] = set()
            for key, raw in records.items():
                at = _written_at(raw)
                if at is None or at >= older_than:
                    continue
                expired.append(key)
                if key.startswith(IDEM_PREFIX):
                    keys.add(key[len(IDEM_PREFIX) :])
            if not expired:
                return 0
            n = self._store.delete_table_params(db, name, expired)
        with self._lock:
            for khash in keys:
                self._recent.pop((table, khash), None)
        return n

    def close(self) -> None:
        with self._store_lock:
            self._store.close()


def _written_at(raw: str | None) -> float | None:
    """The ``at`` of a pointer, or the oldest ``at`` of a marker's entries."""
    try:
        value = json.loads(raw or "")
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    if "txn" in value:
        at = value.get("at")
        return float(at) if isinstance(at, (int, float)) else None
    times: list[float] = []
    for e in value.values():
        at = e.get("at") if isinstance(e, dict) else None
        if not isinstance(at, (int, float)):
            return None
        times.append(float(at))
    return min(times) if times else None


def _compare(stored_bhash: str, response: Mapping[str, Any], bhash: str) -> Lookup:
    if stored_bhash != bhash:
        return Lookup(Outcome.MISMATCH)
    return Lookup(Outcome.REPLAY, response)
