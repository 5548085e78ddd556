"""Write whole ACID directories: an insert delta, a delete delta or a base, in one call.

``write_delta``, ``write_delete_delta`` and ``write_base`` name the directory and bucket
file as Hive does and write it with ``acidstream.acid.file_writer.AcidFileWriter`` (Hive's
``OrcRecordUpdater``); this module also re-exports that writer and ``OrcWriterOptions``,
the names most callers import from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from acidstream.acid import bucket_codec, layout
from acidstream.acid.file_writer import AcidFileWriter, Engine, FileKind
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.schema import TableSchema
from acidstream.acid.storage import Storage

__all__ = [
    "AcidFileWriter",
    "OrcWriterOptions",
    "write_base",
    "write_delete_delta",
    "write_delta",
]


# ---------------------------------------------------------------------- helpers
def _engine_for(rows: object) -> Engine:
    # Columnar input goes to pyarrow; row tuples are cheaper to hand to pyorc than to transpose.
    return "arrow" if isinstance(rows, pa.Table) else "pyorc"


def _storage_and_dir(
    table_dir: str, storage: Storage | None, storage_options: Mapping[str, Any] | None
) -> tuple[Storage, str]:
    """The given storage, or ``table_dir``'s opened with ``storage_options`` (endpoint,
    credentials of a remote filesystem)."""
    if storage is not None:
        return storage, table_dir
    return Storage.for_path(table_dir, storage_options=storage_options)


def _write_inserts(
    st: Storage,
    path: str,
    schema: TableSchema,
    write_id: int,
    rows: Iterable[Sequence[Any]] | pa.Table,
    *,
    kind: FileKind,
    bucket_id: int,
    statement_id: int,
    options: OrcWriterOptions | None,
) -> str:
    with AcidFileWriter(
        st,
        path,
        schema,
        kind=kind,
        bucket_id=bucket_id,
        statement_id=statement_id,
        options=options,
        engine=_engine_for(rows),
    ) as w:
        if isinstance(rows, pa.Table):
            w.insert_arrow(write_id, rows)
        else:
            w.insert(write_id, rows)
    return path


def write_delta(
    table_dir: str,
    schema: TableSchema,
    write_id: int,
    rows: Iterable[Sequence[Any]] | pa.Table,
    *,
    bucket_id: int = 0,
    statement_id: int = 0,
    storage: Storage | None = None,
    storage_options: Mapping[str, Any] | None = None,
    options: OrcWriterOptions | None = None,
) -> str:
    """Write one insert delta ``delta_w_w[_stmt]/bucket_N`` for one write id; returns its path."""
    st, root = _storage_and_dir(table_dir, storage, storage_options)
    d = layout.delta_dir_name(write_id, write_id, statement_id=statement_id)
    path = st.join(root, d, layout.bucket_file_name(bucket_id))
    return _write_inserts(
        st, path, schema, write_id, rows,
        kind="insert", bucket_id=bucket_id, statement_id=statement_id, options=options,
    )  # fmt: skip


def write_delete_delta(
    table_dir: str,
    schema: TableSchema,
    write_id: int,
    keys: Iterable[tuple[int, int, int]],
    *,
    statement_id: int = 0,
    storage: Storage | None = None,
    storage_options: Mapping[str, Any] | None = None,
    options: OrcWriterOptions | None = None,
) -> list[str]:
    """Write split-update delete events ``(originalTransaction, bucket, rowId)`` made by
    ``write_id`` into ``delete_delta_w_w[_stmt]/bucket_N``, one file per writer id of the
    deleted rows, each sorted by ROW__ID. Returns the paths written."""
    st, root = _storage_and_dir(table_dir, storage, storage_options)
    by_writer: dict[int, list[tuple[int, int, int]]] = {}
    for k in keys:
        by_writer.setdefault(bucket_codec.decode_writer_id(k[1]), []).append(
            (int(k[0]), int(k[1]), int(k[2]))
        )
    d = layout.delta_dir_name(write_id, write_id, statement_id=statement_id, delete=True)
    paths = []
    for writer_id in sorted(by_writer):
        ks = sorted(set(by_writer[writer_id]))
        path = st.join(root, d, layout.bucket_file_name(writer_id))
        with AcidFileWriter(
            st,
            path,
            schema,
            kind="delete",
            bucket_id=writer_id,
            statement_id=statement_id,
            options=options,
        ) as w:
            w.delete(write_id, ks)
        paths.append(path)
    return paths


def write_base(
    table_dir: str,
    schema: TableSchema,
    write_id: int,
    rows: Iterable[Sequence[Any]] | pa.Table,
    *,
    bucket_id: int = 0,
    visibility_txn_id: int = 0,
    storage: Storage | None = None,
    storage_options: Mapping[str, Any] | None = None,
    options: OrcWriterOptions | None = None,
) -> str:
    """Write ``base_w[_vT]/bucket_N`` holding ``rows`` as inserts of ``write_id``
    (an INSERT OVERWRITE base); returns its path."""
    st, root = _storage_and_dir(table_dir, storage, storage_options)
    d = layout.base_dir_name(write_id, visibility_txn_id=visibility_txn_id)
    path = st.join(root, d, layout.bucket_file_name(bucket_id))
    return _write_inserts(
        st, path, schema, write_id, rows,
        kind="base", bucket_id=bucket_id, statement_id=-1, options=options,
    )  # fmt: skip
