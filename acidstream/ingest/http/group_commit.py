"""Group commit: one writer thread per table; requests that arrive within the window share
one txn, and each is answered only after that txn committed.

A :class:`TableWriter` owns the table's :class:`~acidstream.ingest.connection.StreamingConnection`
(not safe for concurrent calls) and the thread that uses it: request handlers parse their
body (on worker threads), then :meth:`TableWriter.submit` queues a :class:`WriteRequest`
and awaits its future. The thread takes the first queued request, begins a txn, and keeps
adding requests (``write_arrow`` of their parsed rows) until the window's time, rows or
bytes run out; then it writes the idempotency pointers, commits with the idempotency
marker as the commit's key/value (``acidstream.ingest.http.idempotency``) and resolves every
request's future on the event loop. A failed group is aborted and every request in it
gets the error (nothing of it is visible); the connection is then reopened.

Upserts and deletes of a keyed table (``?mode=upsert|delete``,
:mod:`acidstream.ingest.http.changes`) go through a second connection, opened for
upserts; a group holds either appends or changes, never both: the group closes at the
first queued request of the other kind, which starts the next group (arrival order kept).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

import pyarrow as pa

from acidstream.acid.errors import SerializationError
from acidstream.acid.placement import TableLayout
from acidstream.acid.schema import TableSchema
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.http.changes import APPEND, count_changes, write_changes
from acidstream.ingest.http.config import CommitWindow, TableSettings, record_writer
from acidstream.ingest.http.idempotency import (
    IdempotencyIndex,
    marker_entry,
    marker_key,
    pointer_key,
    pointer_value,
)
from acidstream.ingest.http.metrics import Metrics
from acidstream.ingest.record_writers import BoundRecordWriter
from acidstream.ingest.upserts import KeyedWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.config import StoreConfig
from acidstream.txn.store import TxnStore
from acidstream.txn.table_key import TableKey, table_key

__all__ = ["CommitResult", "TableWriter", "WriteRequest", "record_writer"]

log = logging.getLogger(__name__)

PartitionValues = tuple[str | None, ...]
_NO_LIMIT = 1 << 62
# Rows queued while a group's window is open that the writer takes and encodes into the
# txn's files at once, rather than at the window's end: the commit then has less left to
# do. Large enough that an ORC write stays efficient (small requests still go in one
# write per group).
_ENCODE_EARLY_ROWS = 4096
Rows: TypeAlias = "pa.Table | list[tuple[object, ...]]"


@dataclass(kw_only=True)
class WriteRequest:
    """One request's parsed rows on their way into a group.

    Attributes:
        groups: the good rows by partition (values in key order; ``()`` unpartitioned).
        accepted: good rows in ``groups``.
        nbytes: bytes of the good records.
        rejected: ``(record, position, error)`` of each bad record (dead letters).
        response: the response body without the write ids (the commit adds them).
        idem: ``(sha256 of the Idempotency-Key, sha256 of the body)``, or ``None``.
        mode: ``append``, ``upsert`` or ``delete`` (:mod:`acidstream.ingest.http.changes`).
        future: resolved with a :class:`CommitResult` or the exception, on ``loop``.
    """

    groups: Sequence[tuple[PartitionValues, Rows]]
    accepted: int
    nbytes: int
    rejected: Sequence[tuple[bytes, str, SerializationError]] = ()
    response: Mapping[str, Any]
    idem: tuple[str, str] | None = None
    mode: str = APPEND
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[CommitResult]
    received: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class CommitResult:
    """What a committed request is answered with."""

    response: Mapping[str, Any]
    txn_id: int
    write_id: int
    group_requests: int


class TableWriter:
    """The one writer of one table in this server (see the module docstring).

    Args:
        settings: the table's configuration.
        store_config: where the metastore and the warehouse are.
        window: the group-commit window.
        max_queue: requests waiting for a commit beyond which :meth:`submit` refuses (429).
        index: the server's idempotency index (told about committed keys).
        metrics: the server's metrics.
    """

    def __init__(
        self,
        settings: TableSettings,
        *,
        store_config: StoreConfig,
        window: CommitWindow,
        max_queue: int,
        index: IdempotencyIndex,
        metrics: Metrics,
    ) -> None:
        self.settings = settings
        self.name = settings.qualified
        self._store_config = store_config
        self._window = window
        self._max_queue = max_queue
        self._index = index
        self._metrics = metrics
        self._options = StreamingOptions(
            housekeeping_interval_s=None,  # the server runs one housekeeper for all tables
            dead_letter_path=settings.dead_letter_path,
            agent_info=f"acidstream-http:{self.name}",
            namespace=settings.namespace,
        )
        self._writer = record_writer(settings)
        self._cond = threading.Condition()
        self._queue: deque[WriteRequest] = deque()
        self._pending = 0  # submitted and not yet answered (queued + the open group)
        self._stopping = False
        self._hurry = False
        self._idle = False  # the thread waits for a group's first request
        self._last_deadline = 0.0  # when the previous group's window closed (monotonic)
        self._queued_rows = self._queued_bytes = 0
        self._room_rows = self._room_bytes = _NO_LIMIT  # what the open group can still take
        self._store: TxnStore | None = None
        self._conn: StreamingConnection | None = None
        self._upserts: StreamingConnection | None = None  # a keyed table's changes
        self._upserts_store: TxnStore | None = None
        self._thread: threading.Thread | None = None
        self.table: TableDef
        self.schema: TableSchema
        self.layout: TableLayout
        self.dynamic_writer: BoundRecordWriter | None = None
        self.static_writer: BoundRecordWriter
        self.key: TableKey | None = None
        # The writers of ?mode=upsert|delete: as above, and a NULL key rejects the line.
        self.keyed_static_writer: BoundRecordWriter | None = None
        self.keyed_dynamic_writer: BoundRecordWriter | None = None

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> None:
        """Open the connection (blocking: the table is looked up) and start the thread.
        ``TableNotFoundError`` when the table is missing or not transactional."""
        self._connect()
        conn = self._conn
        assert conn is not None
        self.table, self.schema = conn.table, conn.schema
        # The connection's placement (partitions' own list bucketing included), so the
        # server rejects at parse time what the connection would refuse.
        self.layout = conn.layout
        try:
            self.static_writer = self._writer.bind(self.schema)
            if self.table.is_partitioned:
                self.dynamic_writer = self._writer.bind(
                    self.schema, partition_columns=self.table.partition_keys
                )
            self.key = table_key(self.table)
            if self.key is not None:
                self._keyed_writers(self.key)
        except BaseException:
            self._disconnect()  # e.g. the regex's groups do not fit the columns
            raise
        self._thread = threading.Thread(target=self._run, name=f"http-writer-{self.name}")
        self._thread.daemon = True
        self._thread.start()

    def _keyed_writers(self, key: TableKey) -> None:
        cols = [n for n, _ in self.table.columns]
        self.keyed_static_writer = KeyedWriter(
            self.static_writer, columns=cols, partition_columns=(), key=key
        )
        if self.dynamic_writer is not None:
            self.keyed_dynamic_writer = KeyedWriter(
                self.dynamic_writer,
                columns=cols,
                partition_columns=self.table.partition_names,
                key=key,
            )

    def _connect_upserts(self) -> StreamingConnection:
        """The upsert connection (opened at the first change group; its own store
        connection, so its txns never interleave with the append connection's)."""
        if self._upserts is None:
            store = self._store_config.open()
            try:
                self._upserts = StreamingConnection(
                    self.name,
                    record_writer=self._writer,
                    store=store,
                    options=replace(self._options, mode="upsert"),
                )
            except BaseException:
                store.close()
                raise
            self._upserts_store = store
        return self._upserts

    def _connect(self) -> StreamingConnection:
        if self._conn is None:
            store = self._store_config.open()
            try:
                self._conn = StreamingConnection(
                    self.name, record_writer=self._writer, store=store, options=self._options
                )
            except BaseException:
                store.close()
                raise
            self._store = store
        return self._conn

    def _disconnect(self) -> None:
        up, up_store = self._upserts, self._upserts_store
        self._upserts = self._upserts_store = None
        try:
            if up is not None:
                up.close()
        except Exception as e:  # its txns are aborted anyway
            log.warning("closing the upsert connection of %s failed: %s", self.name, e)
        finally:
            if up_store is not None:
                up_store.close()
        conn, store = self._conn, self._store
        self._conn = self._store = None
        try:
            if conn is not None:
                conn.close()
        except Exception as e:  # closing a broken connection: its txns are aborted anyway
            log.warning("closing the connection of %s failed: %s", self.name, e)
        finally:
            if store is not None:
                store.close()

    def stop(self, timeout_s: float | None = None) -> None:
        """Commit what is queued, answer it, close the connection (its open txns are
        aborted) and end the thread. Blocking."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def hurry(self) -> None:
        """Draining: close groups without waiting for the rest of their window."""
        with self._cond:
            self._hurry = True
            self._cond.notify_all()

    @property
    def pending(self) -> int:
        return self._pending

    # ------------------------------------------------------------------ queue
    def submit(self, req: WriteRequest) -> bool:
        """Queue a request; ``False`` when the queue is full or the writer is stopping.

        The writer thread is woken only when it waits for a group's first request or the
        queue holds what the open group still has room for: waking it per request would
        hand the GIL back and forth hundreds of times a second for nothing."""
        with self._cond:
            if self._stopping or self._pending >= self._max_queue:
                return False
            self._queue.append(req)
            self._queued_rows += req.accepted
            self._queued_bytes += req.nbytes
            self._pending += 1
            self._metrics.queue_requests.labels(self.name).set(self._pending)
            if (
                self._idle
                or self._queued_rows >= self._room_rows
                or self._queued_bytes >= self._room_bytes
            ):
                self._cond.notify()
        return True

    def _take_first(self) -> WriteRequest | None:
        """The first request of a new group (waits for one); ``None``: stopping."""
        with self._cond:
            self._idle = True
            try:
                while not self._queue:
                    if self._stopping:
                        return None
                    self._cond.wait()
            finally:
                self._idle = False
            return self._pop()

    def _take_more(
        self, deadline: float, rows: int, nbytes: int, appends: bool = True
    ) -> tuple[list[WriteRequest], bool]:
        """More of a group: wait until the window closes (its deadline, draining, or
        enough queued to fill the group) or ``_ENCODE_EARLY_ROWS`` rows are queued, then
        take every queued request that fits and is of the group's kind
        (``appends``: the group holds appends, else changes). Returns them and whether the group is
        closed (else the caller encodes them and asks again)."""
        w = self._window
        with self._cond:
            # submit() wakes us once this many rows (or bytes) are queued: what fills the
            # group, or the early mark, whichever is less.
            self._room_rows = min(w.max_rows - rows, _ENCODE_EARLY_ROWS)
            self._room_bytes = w.max_bytes - nbytes
            try:
                while not (
                    self._stopping
                    or self._hurry
                    or self._queued_rows >= self._room_rows
                    or self._queued_bytes >= self._room_bytes
                ):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                closed = self._stopping or self._hurry or time.monotonic() >= deadline
            finally:
                self._room_rows = self._room_bytes = _NO_LIMIT
            taken: list[WriteRequest] = []
            while self._queue and rows < w.max_rows and nbytes < w.max_bytes:
                if (self._queue[0].mode == APPEND) != appends:
                    closed = True  # the next request is of the other kind: its own group
                    break
                req = self._pop()
                taken.append(req)
                rows += req.accepted
                nbytes += req.nbytes
            return taken, closed or rows >= w.max_rows or nbytes >= w.max_bytes

    def _pop(self) -> WriteRequest:
        req = self._queue.popleft()
        self._queued_rows -= req.accepted
        self._queued_bytes -= req.nbytes
        return req

    def _answered(self, n: int) -> None:
        with self._cond:
            self._pending -= n
            self._metrics.queue_requests.labels(self.name).set(self._pending)

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        try:
            while True:
                first = self._take_first()
                if first is None:
                    return
                self._group(first)
        finally:
            self._disconnect()

    def _group(self, first: WriteRequest) -> None:
        group = [first]
        w = self._window
        # The window opens when the group's first request arrived (it may have queued
        # during the previous commit), but never before the previous window closed: at
        # most one commit per window, and no request waits a window plus a whole commit
        # more than it must.
        deadline = max(first.received, self._last_deadline) + w.max_delay_ms / 1000.0
        opened = False
        appends = first.mode == APPEND
        conn: StreamingConnection | None = None
        try:
            conn = self._connect() if appends else self._connect_upserts()
            conn.begin_transaction()
            opened = True
            self._metrics.open_txns.inc()
            rows, nbytes = first.accepted, first.nbytes
            todo = [first]  # taken, not yet written
            closed = rows >= w.max_rows or nbytes >= w.max_bytes
            while not closed:
                more, closed = self._take_more(deadline, rows, nbytes, appends)
                group.extend(more)
                todo.extend(more)
                rows += sum(r.accepted for r in more)
                nbytes += sum(r.nbytes for r in more)
                if not appends:
                    continue  # changes are applied at commit (ingest.upserts)
                if not closed and sum(r.accepted for r in todo) >= _ENCODE_EARLY_ROWS:
                    # The window is still open: encode what came so far while it does,
                    # so the commit at its end has less left to do.
                    _write_requests(conn, todo)
                    conn.encode_buffered()
                    self._metrics.early_rows.labels(self.name).inc(sum(r.accepted for r in todo))
                    todo = []
            self._last_deadline = max(deadline, time.monotonic())
            if appends:
                _write_requests(conn, todo)
            else:
                write_changes(conn, todo)
            result = self._commit(conn, group)
        except Exception as e:
            log.error("group of %d requests for %s failed: %s", len(group), self.name, e)
            self._fail(group, e, conn)
            if opened:
                self._metrics.open_txns.dec()
            self._disconnect()  # a fresh connection for the next group
            return
        self._metrics.open_txns.dec()
        _resolve(group, result)
        self._answered(len(group))

    def _commit(self, conn: StreamingConnection, group: list[WriteRequest]) -> list[CommitResult]:
        txn, wid = conn.current_txn_id, conn.current_write_id
        assert txn is not None and wid is not None and self._store is not None
        db, table = conn.db, conn.table_name
        entries: dict[str, dict[str, Any]] = {}
        results: list[CommitResult] = []
        now = time.time()  # when the keys were used: they expire from here (idempotency)
        for r in group:
            resp = {**r.response, "txn_ids": [txn], "write_ids": [wid]}
            results.append(CommitResult(resp, txn, wid, len(group)))
            if r.idem is not None:
                khash, bhash = r.idem
                # The pointer first (a plain parameter); the marker below lands atomically
                # with the commit, so a pointer to a txn that never commits is ignored.
                self._store.set_table_param(
                    db, table, pointer_key(khash), pointer_value(txn, bhash, at=now)
                )
                entries[khash] = marker_entry(bhash, resp, at=now)
        key = value = None
        if entries:
            key, value = marker_key(txn), json.dumps(entries, separators=(",", ":"))
        t0 = time.monotonic()
        conn.commit_transaction(key=key, value=value)
        m, name = self._metrics, self.name
        m.commit_seconds.labels(name).observe(time.monotonic() - t0)
        m.commits.labels(name, "committed").inc()
        m.group_requests.labels(name).observe(len(group))
        rows = sum(r.accepted for r in group)
        m.group_rows.labels(name).observe(rows)
        m.records.labels(name, "accepted").inc(rows)
        m.bytes.labels(name, "accepted").inc(sum(r.nbytes for r in group))
        if conn.key is not None:
            count_changes(m, name, group, conn)
        if entries:
            self._index.committed(name, entries)
        return results

    def _fail(
        self, group: list[WriteRequest], error: Exception, conn: StreamingConnection | None
    ) -> None:
        self._metrics.commits.labels(self.name, "failed").inc()
        if conn is not None:
            try:
                if conn.current_txn_id is not None and _is_open(conn):
                    conn.abort_transaction()
            except Exception as e:  # the connection is dropped next; its txns end there
                log.warning("aborting the failed group's txn of %s: %s", self.name, e)
        for r in group:
            if r.idem is not None:
                self._index.release(self.name, r.idem[0])
        _resolve(group, [error] * len(group))
        self._answered(len(group))


def _write_requests(conn: StreamingConnection, requests: Sequence[WriteRequest]) -> None:
    """Hand requests' rows (and their rejected records) to the open txn."""
    rowsets: dict[PartitionValues, list[Rows]] = {}
    for req in requests:
        for values, data in req.groups:
            rowsets.setdefault(values, []).append(data)
        for record, position, err in req.rejected:
            conn.reject(record, err, position=position)
    _write_rows(conn, rowsets)


def _write_rows(conn: StreamingConnection, rowsets: Mapping[PartitionValues, list[Rows]]) -> None:
    """Hand a group's rows to the connection: per partition, one Arrow table and one list
    of row tuples, so a group of many small requests costs one ORC write per partition,
    not one per request."""
    for values, parts in rowsets.items():
        tables = [p for p in parts if isinstance(p, pa.Table)]
        rows = [r for p in parts if not isinstance(p, pa.Table) for r in p]
        if rows:
            conn.write_rows(rows, partition=values)
        if not tables:
            continue
        try:
            data = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        except pa.ArrowInvalid:  # schemas differ (never expected): write them one by one
            for t in tables:
                conn.write_arrow(t, partition=values)
            continue
        conn.write_arrow(data, partition=values)


def _is_open(conn: StreamingConnection) -> bool:
    state = conn.state
    return state is not None and state.name == "OPEN"


def _resolve(group: list[WriteRequest], outcomes: Sequence[CommitResult | BaseException]) -> None:
    """Answer a group's requests: one hand-off to each event loop, not one per request."""

    def set_all(pairs: list[tuple[WriteRequest, CommitResult | BaseException]]) -> None:
        for req, outcome in pairs:
            if req.future.done():
                continue
            if isinstance(outcome, BaseException):
                req.future.set_exception(outcome)
            else:
                req.future.set_result(outcome)

    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[WriteRequest, CommitResult | BaseException]]] = {}  # fmt: skip
    for req, outcome in zip(group, outcomes, strict=True):
        by_loop.setdefault(req.loop, []).append((req, outcome))
    for loop, pairs in by_loop.items():
        try:
            loop.call_soon_threadsafe(set_all, pairs)
        except RuntimeError:  # the loop is closed: nobody waits for the answers any more
            pass
