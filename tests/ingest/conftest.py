"""Fixtures for ingest tests: tables in a real metastore (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pytest

from acidstream.acid.reader import read_path
from acidstream.acid.schema import TableSchema
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore

MakeTable = Callable[..., TableDef]


@pytest.fixture
def make_table(store: TxnStore) -> MakeTable:
    """Create a transactional table: ``make_table("t", "id int, msg string", partitioned_by=...)``."""

    def make(
        name: str,
        columns: str,
        *,
        partitioned_by: Sequence[tuple[str, str]] = (),
        buckets: tuple[str, int] | None = None,
        bucketing_version: int = 2,
    ) -> TableDef:
        cols = tuple((n, str(t)) for n, t in TableSchema.parse(columns).columns)
        t = TableDef(
            db="default",
            name=name,
            columns=cols,
            partition_keys=tuple(partitioned_by),
            bucket_cols=(buckets[0],) if buckets else (),
            num_buckets=buckets[1] if buckets else -1,
            parameters={"transactional": "true", "bucketing_version": str(bucketing_version)},
        )
        return store.create_table(t)

    return make


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI's embedded defaults under ``tmp_path``: the warehouse (and its SQLite
    metastore) from ``ACIDSTREAM_WAREHOUSE``, no ``ACIDSTREAM_METASTORE``."""
    wh = tmp_path / "wh"
    monkeypatch.setenv("ACIDSTREAM_WAREHOUSE", str(wh))
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    return wh


def snapshot_read(store: TxnStore, table: TableDef, **kw: object) -> pa.Table:
    """Read a table as a new reader would: the store's current snapshot."""
    txns = store.get_valid_txns()
    wids = store.get_valid_write_ids(table.db, table.name, txns)
    assert table.location is not None
    kw.setdefault("schema", table.schema)
    return read_path(table.location, write_ids=wids, txns=txns, **kw)  # type: ignore[arg-type]
