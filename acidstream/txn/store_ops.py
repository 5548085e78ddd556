"""The base of the store's operation mixins: what every one of them may use.

:class:`~acidstream.txn.store.TxnStore` is assembled from one mixin per concern (transactions,
locks, snapshots, catalog, housekeeping), each in the module that holds its SQL. They
share the connection, the clock and the warehouse root through this base.
"""

from __future__ import annotations

from collections.abc import Callable

from acidstream.txn.db import Database

__all__ = ["StoreOps"]


class StoreOps:
    """State shared by the store's mixins; :class:`~acidstream.txn.store.TxnStore` sets it."""

    _db: Database
    _clock: Callable[[], float]
    warehouse: str | None

    def _now_ms(self) -> int:
        """Now, in milliseconds since the epoch (Hive's unit), from the injectable clock."""
        return int(self._clock() * 1000)
