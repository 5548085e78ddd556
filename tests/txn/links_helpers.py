"""Helpers of the namespace and link tests: namespaces ``a`` and ``b``, a table ``b.t1``
partitioned by ``ds``, rows written through the streaming connection."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from acidstream.acid.layout import ParsedBase, ParsedDelta, parse_dir_name
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_json import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore


def make_namespaces(store: TxnStore, *, partitioned: bool = True) -> TableDef:
    """Namespaces ``a`` and ``b``; ``b.t1 (id bigint, msg string)`` partitioned by ``ds``."""
    store.create_database("a")
    store.create_database("b")
    return store.create_table(
        TableDef(
            db="b",
            name="t1",
            columns=(("id", "bigint"), ("msg", "string")),
            partition_keys=(("ds", "string"),) if partitioned else (),
            parameters={"transactional": "true"},
        )
    )


def write(
    store: TxnStore, batches: Sequence[tuple[str | None, range]], *, table: str = "t1"
) -> None:
    """One committed txn per ``(ds, ids)``, by a writer bound to namespace ``b``."""
    opts = StreamingOptions(namespace="b", housekeeping_interval_s=None)
    with StreamingConnection(
        table, record_writer=StrictJsonWriter(), store=store, options=opts
    ) as c:
        for ds, ids in batches:
            c.begin_transaction()
            c.write_rows([(i, f"m{i}") for i in ids], partition=[ds] if ds is not None else [])
            c.commit_transaction()


@dataclass
class Walk:
    """What ``os.walk`` finds under some directories (the usage test's reference)."""

    files: int = 0
    bytes: int = 0
    bases: int = 0
    deltas: int = 0
    delete_deltas: int = 0


def walk(*roots: str) -> Walk:
    out = Walk()
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for d in dirnames:
                p = parse_dir_name(d)
                if isinstance(p, ParsedBase):
                    out.bases += 1
                elif isinstance(p, ParsedDelta):
                    if p.is_delete:
                        out.delete_deltas += 1
                    else:
                        out.deltas += 1
            for f in filenames:
                out.files += 1
                out.bytes += os.path.getsize(os.path.join(dirpath, f))
    return out
