"""Rows a write id inserted and deleted itself, which minor compaction drops.

A txn with several statements (a multi-statement txn, or a MERGE whose later clause deletes
a row an earlier one wrote) may delete a row it inserted: the insert event is in
``delta_W_W_S1`` and the delete event, ``originalTransaction = currentTransaction = W``, in
``delete_delta_W_W_S2`` with ``S1 < S2``. Readers apply it because a delete delta of the
same write id qualifies for a split of a lower statement id
(``VectorizedOrcAcidRowBatchReader.isQualifiedDeleteDeltaForSplit``). A minor compaction of
that one write id writes ``delta_W_W_vT`` and ``delete_delta_W_W_vT``: no statement ids any
more, so the delete delta no longer qualifies for the delta (Hive's rule, and ours) and the
row would come back. No snapshot ever saw it (it became visible and deleted in one commit),
so the compactor leaves out both events. Runs in the compactor's process.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["drop_self_deleted"]

_KEY = ["o", "b", "r"]


def _member(t: pa.Table, keys: pa.Table) -> pa.Array:
    """Boolean mask over ``t``: True where its (o, b, r) is one of ``keys``."""
    n = t.num_rows
    idx = pa.array(range(n), pa.int64())
    probe = t.select(_KEY).append_column("__i", idx)
    hits = probe.join(keys, keys=_KEY, join_type="left semi").column("__i")
    return pc.is_in(idx, value_set=hits.combine_chunks() if hits.num_chunks else idx[:0])


def drop_self_deleted(
    inserts: pa.Table | None, deletes: Sequence[pa.Table]
) -> tuple[pa.Table | None, list[pa.Table]]:
    """``inserts`` without the events a delete event of their own write id names, and
    ``deletes`` without those delete events. Event tables have the columns o, b, r, c
    (originalTransaction, bucket, rowId, currentTransaction); everything else is kept."""
    own = [d.filter(pc.equal(d.column("o"), d.column("c"))).select(_KEY) for d in deletes]
    own = [d for d in own if d.num_rows]
    if inserts is None or not inserts.num_rows or not own:
        return inserts, list(deletes)
    own_keys = pa.concat_tables(own).group_by(_KEY).aggregate([])
    gone = _member(inserts, own_keys)
    if not pc.any(gone).as_py():
        return inserts, list(deletes)
    matched = inserts.filter(gone).select(_KEY).group_by(_KEY).aggregate([])
    kept: list[pa.Table] = []
    for d in deletes:
        drop = pc.and_(pc.equal(d.column("o"), d.column("c")), _member(d, matched))
        kept.append(d.filter(pc.invert(drop)))
    return inserts.filter(pc.invert(gone)), kept
