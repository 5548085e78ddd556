"""A reader txn held by the user's driver process: the exact end of a batch read's protection.

The ``acidtable`` source cannot tell when a query's action ends (see
``docs/spark_reader.md``); :class:`AcidReadTxn` lets the caller say so: the txn is opened
before the snapshot, heartbeaten meanwhile, and committed when the ``with`` block ends.
"""

from __future__ import annotations

import getpass
import logging
import socket
import threading
from types import TracebackType
from typing import Any

from acidstream.acid.errors import AcidStreamError, ConfigError, TransactionError, TxnAbortedError
from acidstream.acid.snapshot import ValidTxnList

__all__ = ["LEASE_AGENT", "AcidReadTxn", "reader_user"]

log = logging.getLogger(__name__)

LEASE_AGENT = "acidtable-read:"
"""``agent_info`` prefix of the reader txns of ``acidtable`` (``show_txns`` shows them)."""


def reader_user() -> str:
    """The user name recorded on reader txns."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        return "acidtable"


class AcidReadTxn:
    """A reader txn held by the user's driver process for the duration of some reads.

    ``with AcidReadTxn(metastore=url) as rt:`` opens the txn and takes its snapshot;
    ``spark.read.format("acidtable").options(**rt.options()).load("db.t")`` reads under it
    (no lease txn of the source's own), and the block's end commits it, after which the
    Cleaner may remove files the reads used. A heartbeat thread keeps it alive meanwhile.

    Args:
        metastore / warehouse: as for the rest of the project (arguments > environment).
        heartbeat_s: heartbeat interval (well under the txn timeout).
        agent_info: what ``show_txns`` shows after :data:`LEASE_AGENT` (who reads what).
    """

    def __init__(
        self,
        *,
        metastore: str | None = None,
        warehouse: str | None = None,
        heartbeat_s: float = 60.0,
        agent_info: str = "AcidReadTxn",
    ) -> None:
        from acidstream.txn.config import StoreConfig

        self.config = StoreConfig.resolve(metastore=metastore, warehouse=warehouse)
        self.heartbeat_s = heartbeat_s
        self.agent_info = agent_info
        self.txn_id: int | None = None
        self.txns: ValidTxnList | None = None
        self._store: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Set (by a heartbeat) once the metastore no longer has the txn open.
        self._lost: TransactionError | None = None

    def __enter__(self) -> AcidReadTxn:
        self._store = self.config.open()
        try:
            self.txn_id = self._store.open_txns(
                1,
                user=reader_user(),
                host=socket.gethostname(),
                agent_info=f"{LEASE_AGENT}{self.agent_info}",
            )[0]
            self.txns = self._store.get_valid_txns(self.txn_id)
        except BaseException:
            self._store.close()
            self._store = None
            raise
        self._thread = threading.Thread(target=self._beat, name="acidtable-read-txn", daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        from acidstream.txn.store import open_store

        store = open_store(self.config.metastore_url, warehouse=self.config.warehouse)
        try:
            while not self._stop.wait(self.heartbeat_s):
                try:
                    self._beat_once(store)
                except TransactionError:
                    return  # lost: nothing left to keep alive (options() and close() say so)
                except AcidStreamError as e:  # the next beat may succeed
                    log.warning("heartbeat of read txn %s failed: %s", self.txn_id, e)
        finally:
            store.close()

    def _beat_once(self, store: Any) -> None:
        """Heartbeat the txn; ``TransactionError`` (remembered) once it is no longer open."""
        assert self.txn_id is not None
        if (
            self._lost is None
            and self.txn_id in store.heartbeat_txn_range(self.txn_id, self.txn_id).lost
        ):
            self._lost = TransactionError(
                f"read txn {self.txn_id} was aborted (a heartbeat came later than the txn "
                "timeout?): the Cleaner may have removed files of its snapshot; read again "
                "under a new AcidReadTxn"
            )
            log.error("%s", self._lost)
        if self._lost is not None:
            raise self._lost

    def check(self) -> None:
        """Heartbeat now and raise ``TransactionError`` if the txn is no longer open (its
        snapshot's files are then no longer protected): for a caller about to read again
        after a long pause."""
        if self._store is None or self.txn_id is None:
            raise ConfigError("AcidReadTxn.check() outside its with block")
        self._beat_once(self._store)

    def options(self) -> dict[str, str]:
        """The ``acidtable`` options that read under this txn and snapshot."""
        if self.txn_id is None or self.txns is None:
            raise ConfigError("AcidReadTxn.options() outside its with block")
        if self._lost is not None:
            raise self._lost
        return {
            "readTxnId": str(self.txn_id),
            "validTxns": self.txns.to_string(),
            "metastore": self.config.metastore_url,
            "warehouse": self.config.warehouse,
        }

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.close()
        except TransactionError as e:
            if exc is None:
                raise
            log.error("%s", e)  # the block's own error is the one to see

    def close(self) -> None:
        """Commit the txn (the reads are done) and stop heartbeating; idempotent. Raises
        ``TransactionError`` if the txn was aborted meanwhile (reads made under it may
        have missed files the Cleaner removed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            if self._store is not None and self.txn_id is not None:
                if self._lost is not None:
                    raise self._lost
                try:
                    self._store.commit_txn(self.txn_id)
                except TxnAbortedError:
                    self._beat_once(self._store)  # raises the explanation
                    raise
        finally:
            if self._store is not None:
                self._store.close()
            self._store = None
