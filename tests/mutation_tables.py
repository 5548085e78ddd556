"""Tables in the states a Hive 3 mutation leaves, built with the acid writer and a model.

The row-level DELETE/UPDATE/MERGE API is not needed to produce those states: a mutation
is one txn (a ``TransactionBatch`` of size 1 with operation UPDATE or DELETE, so the
metastore records its write set as Hive's) whose statements write

- ``delete_delta_W_W_SSSS/bucket_N``: delete events (``write_delete_delta``) naming the
  old ROW__IDs, one file per writer id of the deleted rows, sorted;
- ``delta_W_W_SSSS/bucket_N``: the new row versions (``write_delta``), rowIds from 0 per
  file, the bucket property ``V1(N, S)`` carrying the statement id (spec §3.1, §3.3).

A Hive 3 UPDATE is statement 0 for both (``delete_delta_W_W_0000`` + ``delta_W_W_0000``);
a MERGE gives each WHEN branch its own statement id (insert ``delta_W_W_0000``, update
``delete_delta_W_W_0001`` + ``delta_W_W_0001``, delete ``delete_delta_W_W_0002``).

:class:`MutationTable` keeps a model (ROW__ID -> row per partition, and a copy after
every committed write id for time travel) that the tests compare the readers against.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from acidstream.acid import bucket_codec
from acidstream.acid.bucket_hash import bucket_number
from acidstream.acid.reader import read_path
from acidstream.acid.schema import TableSchema
from acidstream.acid.table_name import TableName
from acidstream.acid.writer import write_delete_delta, write_delta
from acidstream.txn.batch import TransactionBatch
from acidstream.txn.catalog import TableDef
from acidstream.txn.locks import DataOperationType
from acidstream.txn.store import TxnStore

Key = tuple[int, int, int]  # (originalTransaction, bucket property, rowId)
Row = tuple[Any, ...]
# partition name ("" for an unpartitioned table) -> ROW__ID -> row
State = dict[str, dict[Key, Row]]

SCHEMA = "id bigint, name string, salary int"


def row(i: int, salary: int | None = None) -> Row:
    return (i, f"name-{i}", i * 10 if salary is None else salary)


def create_table(
    store: TxnStore, name: str = "t", *, buckets: int = 0, partitioned: bool = False
) -> TableDef:
    cols = tuple((n, str(t)) for n, t in TableSchema.parse(SCHEMA).columns)
    return store.create_table(
        TableDef(
            db="default",
            name=name,
            columns=cols,
            partition_keys=(("ds", "string"),) if partitioned else (),
            bucket_cols=("id",) if buckets else (),
            num_buckets=buckets or -1,
            parameters={"transactional": "true"},
        )
    )


@dataclass
class MutationTxn:
    """One txn's statements, buffered: written to disk when the txn ends (committed or
    aborted; an aborted mutation leaves its directories, as a failed Hive query does)."""

    table: MutationTable
    partition: str
    write_id: int
    inserts: dict[tuple[int, int], list[Row]] = field(default_factory=dict)  # (stmt, bucket)
    deletes: dict[int, list[Key]] = field(default_factory=dict)  # stmt -> keys
    added: dict[Key, Row] = field(default_factory=dict)
    removed: set[Key] = field(default_factory=set)
    written: bool = False

    def insert(self, rows: Sequence[Row], *, stmt: int = 0) -> list[Key]:
        """New rows (an INSERT branch, or an update's new versions) in ``delta_W_W_stmt``;
        each goes to its bucket (Hive's hash on ``id`` when bucketed, else writer 0)."""
        keys = []
        for r in rows:
            b = self.table.bucket_of(r)
            rows_of = self.inserts.setdefault((stmt, b), [])
            k = (self.write_id, bucket_codec.encode(b, stmt), len(rows_of))
            rows_of.append(r)
            self.added[k] = r
            keys.append(k)
        return keys

    def delete(self, keys: Sequence[Key], *, stmt: int = 0) -> None:
        """Delete events for ``keys`` in ``delete_delta_W_W_stmt``."""
        live = self.table.visible(self.partition)
        for k in keys:
            assert k in live or k in self.added, f"{k} is not a live row"
        self.deletes.setdefault(stmt, []).extend(keys)
        self.removed.update(keys)

    def update(self, changes: Mapping[Key, Row], *, stmt: int = 0) -> list[Key]:
        """Split-update: delete events of the old versions and the new versions, both in
        statement ``stmt``; returns the new versions' ROW__IDs."""
        self.delete(list(changes), stmt=stmt)
        return self.insert(list(changes.values()), stmt=stmt)

    def write(self) -> None:
        """Write the statements' files (once; the txn's end calls it too)."""
        if self.written:
            return
        self.written = True
        d = self.table.dir(self.partition)
        schema = self.table.schema
        for (stmt, b), rows in sorted(self.inserts.items()):
            write_delta(d, schema, self.write_id, rows, bucket_id=b, statement_id=stmt)
        for stmt, keys in sorted(self.deletes.items()):
            write_delete_delta(d, schema, self.write_id, keys, statement_id=stmt)


class MutationTable:
    """A transactional table written txn by txn, with the model of what it holds."""

    def __init__(
        self,
        store: TxnStore,
        table: TableDef,
    ) -> None:
        self.store = store
        self.table = table
        self.name = TableName(table.db, table.name)
        self.model: State = {}
        self.history: dict[int, State] = {0: {}}  # committed write id -> state after it
        self.inserted: set[Key] = set()  # insert events of committed txns
        self.deleted: dict[Key, int] = {}  # delete events of committed txns -> their write id

    @property
    def schema(self) -> TableSchema:
        return self.table.schema

    def dir(self, partition: str = "") -> str:
        assert self.table.location is not None
        return f"{self.table.location}/{partition}" if partition else self.table.location

    def bucket_of(self, r: Row) -> int:
        if self.table.num_buckets <= 0:
            return 0
        types = [dict(self.schema.columns)["id"]]
        return bucket_number([r[0]], types, self.table.num_buckets)

    def visible(self, partition: str = "") -> dict[Key, Row]:
        return self.model.get(partition, {})

    def keys_of(self, ids: Sequence[int], partition: str = "") -> list[Key]:
        """The live ROW__IDs of the rows whose ``id`` is in ``ids``."""
        want = set(ids)
        return [k for k, r in sorted(self.visible(partition).items()) if r[0] in want]

    @contextmanager
    def txn(
        self, op: DataOperationType, *, partition: str = "", outcome: str = "commit"
    ) -> Iterator[MutationTxn]:
        """One txn of ``op``: its statements are written and it commits (or aborts:
        ``outcome``) when the block ends."""
        if partition:
            values = dict(kv.split("=", 1) for kv in partition.split("/"))
            self.store.add_partition(self.table.db, self.table.name, values)
        batch = TransactionBatch(
            self.store,
            self.name,
            size=1,
            operation=op,
            heartbeat_interval_s=3600.0,
            partition=partition or None,
        )
        try:
            batch.begin_next()
            tx = MutationTxn(self, partition, batch.current_write_id)
            yield tx
            tx.write()
            if outcome == "commit":
                batch.commit()
                state = copy.deepcopy(self.model)
                part = state.setdefault(partition, {})
                for k in tx.removed:
                    part.pop(k, None)
                for k, r in tx.added.items():
                    if k not in tx.removed:
                        part[k] = r
                self.model = state
                self.inserted.update(tx.added)
                self.deleted.update(dict.fromkeys(tx.removed, tx.write_id))
                self.history[tx.write_id] = copy.deepcopy(state)
            else:
                assert outcome == "abort", outcome
                batch.abort()
        finally:
            batch.close()

    # -------------------------------------------------------------- the Hive statements

    def insert(self, rows: Sequence[Row], *, partition: str = "") -> int:
        """``INSERT INTO``: ``delta_W_W_0000``."""
        with self.txn(DataOperationType.INSERT, partition=partition) as tx:
            tx.insert(rows)
        return tx.write_id

    def update(self, changes: Mapping[int, Row], *, partition: str = "", **kw: Any) -> int:
        """``UPDATE`` of the rows with these ids (id -> new row): statement 0 writes
        ``delete_delta_W_W_0000`` and ``delta_W_W_0000``."""
        by_id = {r[0]: k for k, r in self.visible(partition).items()}
        with self.txn(DataOperationType.UPDATE, partition=partition, **kw) as tx:
            tx.update({by_id[i]: r for i, r in changes.items()})
        return tx.write_id

    def delete(self, ids: Sequence[int], *, partition: str = "", **kw: Any) -> int:
        """``DELETE`` of the rows with these ids: ``delete_delta_W_W_0000``."""
        with self.txn(DataOperationType.DELETE, partition=partition, **kw) as tx:
            tx.delete(self.keys_of(ids, partition))
        return tx.write_id

    def merge(
        self,
        *,
        inserts: Sequence[Row] = (),
        updates: Mapping[int, Row] | None = None,
        deletes: Sequence[int] = (),
        partition: str = "",
        **kw: Any,
    ) -> int:
        """``MERGE`` with an insert, an update and a delete clause, each its own statement:
        ``delta_W_W_0000``; ``delete_delta_W_W_0001`` + ``delta_W_W_0001``;
        ``delete_delta_W_W_0002``."""
        by_id = {r[0]: k for k, r in self.visible(partition).items()}
        with self.txn(DataOperationType.UPDATE, partition=partition, **kw) as tx:
            if inserts:
                tx.insert(inserts, stmt=0)
            if updates:
                tx.update({by_id[i]: r for i, r in updates.items()}, stmt=1)
            if deletes:
                tx.delete([by_id[i] for i in deletes], stmt=2)
        return tx.write_id

    # -------------------------------------------------------------- reads and the model

    def read(self, *, as_of: int | None = None, partition: str = "", **kw: Any) -> pa.Table:
        """What ``read_path`` (with ``kw``) shows with the store's current snapshot (capped
        at ``as_of``)."""
        txns = self.store.get_valid_txns()
        wids = self.store.get_valid_write_ids(self.table.db, self.table.name, txns)
        return read_path(
            self.dir(partition),
            write_ids=wids.capped(as_of),
            txns=txns,
            include_row_id=True,
            schema=self.schema,
            **kw,
        )

    def expected(self, *, as_of: int | None = None, partition: str | None = None) -> list[Any]:
        """The model's rows as sorted ``(row__id, id, name, salary[, ds])`` tuples: all
        partitions (with their ``ds``) when ``partition`` is None on a partitioned table."""
        state = (
            self.model
            if as_of is None
            else self.history[max(w for w in self.history if w <= as_of)]
        )
        out: list[Any] = []
        for part, rows in state.items():
            if partition is not None and part != partition:
                continue
            extra = (part.split("=", 1)[1],) if part and partition is None else ()
            out.extend((k, *r, *extra) for k, r in rows.items())
        return sorted(out)


def rows_of(t: pa.Table) -> list[Any]:
    """A read's rows as sorted ``(row__id tuple, col, ...)`` tuples (``row__id`` first)."""
    d = t.to_pylist()
    out = []
    for r in d:
        rid = r.pop("row__id")
        out.append(((rid["writeid"], rid["bucketid"], rid["rowid"]), *r.values()))
    return sorted(out)


def values_of(t: pa.Table) -> list[Any]:
    """A read's rows without ``row__id``, sorted."""
    cols = [c for c in t.column_names if c != "row__id"]
    return sorted(tuple(r[c] for c in cols) for r in t.to_pylist())
