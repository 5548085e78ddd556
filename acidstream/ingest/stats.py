"""Connection statistics, as Hive streaming's ``ConnectionStats``."""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["ConnectionStats"]


@dataclass(frozen=True)
class ConnectionStats:
    """A snapshot of a connection's counters (Hive's ``ConnectionStats`` fields)."""

    records_written: int = 0
    records_size: int = 0
    committed_transactions: int = 0
    aborted_transactions: int = 0
    auto_flushes: int = 0
    metastore_calls: int = 0
    created_partitions: int = 0
    total_partitions: int = 0
    bad_records: int = 0

    def __str__(self) -> str:
        return (
            f"{{records-written: {self.records_written}, records-size: {self.records_size}, "
            f"committed-transactions: {self.committed_transactions}, "
            f"aborted-transactions: {self.aborted_transactions}, auto-flushes: {self.auto_flushes}, "
            f"metastore-calls: {self.metastore_calls}, created-partitions: {self.created_partitions}, "
            f"total-partitions: {self.total_partitions} }}"
        )


class StatsCounter:
    """Thread-safe counters behind ``ConnectionStats`` (the heartbeat thread counts too)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._v: dict[str, int] = dict.fromkeys(ConnectionStats.__dataclass_fields__, 0)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._v[name] += n

    def snapshot(self) -> ConnectionStats:
        with self._lock:
            return ConnectionStats(**self._v)
