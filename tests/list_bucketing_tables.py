"""The list-bucketed test table every list-bucketing test file builds on: ``default.t``
(``x int, s string``) partitioned by ``p``, skewed on ``x`` with the values 6 and 20
stored as directories."""

from __future__ import annotations

from acidstream.acid.list_bucketing import SkewedInfo
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore

SKEW = SkewedInfo(col_names=("x",), col_values=(("6",), ("20",)), stored_as_dirs=True)


def make_lb_table(store: TxnStore, skewed: SkewedInfo | None = SKEW) -> TableDef:
    """Create ``default.t`` with ``skewed`` (``None``: a plain table of the same shape)."""
    return store.create_table(
        TableDef(
            db="default",
            name="t",
            columns=(("x", "int"), ("s", "string")),
            partition_keys=(("p", "string"),),
            parameters={"transactional": "true"},
            skewed=skewed,
        )
    )
