"""Upserts and deletes over HTTP: ``POST /v1/tables/{db}.{table}?mode=upsert|delete``.

A keyed table (table property ``acidstream.key``, :mod:`acidstream.txn.table_key`) takes,
besides appends (``?mode=append``, the default):

- ``?mode=upsert``: each line is a record (the table's ``format``, parsed as for an
  append); its row replaces the row of its key, or is inserted;
- ``?mode=delete``: each line is a record naming a key (same format; only the key
  columns are read, the others may be missing); the key's row is deleted (a key not in
  the table is a counted no-op).

A line with a NULL key column is rejected like a bad line (reported, dead letters). The
table's writer (:mod:`acidstream.ingest.http.group_commit`) commits upsert and delete
requests in txns of their own, never in an append's: a group holds either appends or
changes, in arrival order; the changes of a group are collapsed per key (the last one
wins, by arrival) and applied by an upsert connection
(:mod:`acidstream.ingest.upserts`: EXCL_WRITE on the table, so two servers upserting one
table take turns). ``docs/http_ingest.md`` documents it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from acidstream.ingest.connection import StreamingConnection
from acidstream.ingest.http.metrics import Metrics
from acidstream.ingest.http.problems import Problem
from acidstream.txn.table_key import TableKey

if TYPE_CHECKING:
    from acidstream.ingest.http.group_commit import WriteRequest

__all__ = ["APPEND", "CHANGE_MODES", "MODES", "count_changes", "request_mode", "write_changes"]

APPEND = "append"
CHANGE_MODES = ("upsert", "delete")
MODES = (APPEND, *CHANGE_MODES)


def request_mode(params: Mapping[str, str], key: TableKey | None, table: str) -> str:
    """A request's ``?mode=``: ``append`` (the default), or ``upsert``/``delete`` of a
    keyed table. Raises ``Problem``: 400 for an unknown mode, 409 for a change of a table
    without a key (the table, not the request, is what must change)."""
    mode = params.get("mode", APPEND)
    if mode not in MODES:
        raise Problem(400, "Bad Request", f"?mode={mode}: use one of {', '.join(MODES)}")
    if mode != APPEND and key is None:
        raise Problem(
            409,
            "Conflict",
            f"?mode={mode} needs a keyed table: {table} has no key (table property "
            "acidstream.key, set when the table is created)",
            extra={"table": table},
        )
    return mode


def write_changes(conn: StreamingConnection, requests: Sequence[WriteRequest]) -> None:
    """Hand change requests' rows to the open upsert txn, in request order (the order
    decides which change of a key wins), and their rejected records to the dead letters."""
    for req in requests:
        delete = req.mode == "delete"
        for values, data in req.groups:
            if isinstance(data, pa.Table):
                if delete:
                    conn.delete_arrow(data, partition=values)
                else:
                    conn.upsert_arrow(data, partition=values)
            elif delete:
                conn.delete_rows(data, partition=values)
            else:
                conn.upsert_rows(data, partition=values)
        for record, position, err in req.rejected:
            conn.reject(record, err, position=position)


def count_changes(
    metrics: Metrics, table: str, requests: Sequence[WriteRequest], conn: StreamingConnection
) -> None:
    """Count a committed change group in the metrics: the records by mode, and what the
    commit did with them (``inserted``, ``updated``, ``deleted``, ``absent_deletes``)."""
    for mode in CHANGE_MODES:
        n = sum(r.accepted for r in requests if r.mode == mode)
        if n:
            metrics.changes.labels(table, mode).inc(n)
    res = conn.last_changes
    if res is None:
        return
    done = {
        "inserted": res.inserted,
        "updated": res.updated,
        "deleted": res.deleted,
        "absent_deletes": res.absent_deletes,
    }
    for k, v in done.items():
        if v:
            metrics.change_results.labels(table, k).inc(v)
