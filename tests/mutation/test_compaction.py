"""The compactor over a mutated table (statement-id deltas and delete deltas of DELETE,
UPDATE and MERGE): minor and major compaction keep exactly the rows a reader saw before.
(Compaction is not the mutation package's; this pins what it already does with
mutation output, for issue 30 item 7.)"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from acidstream import Table
from acidstream.compaction import Worker
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert, rows_of


@pytest.mark.parametrize("major", [False, True], ids=["minor", "major"])
def test_compaction_keeps_a_mutated_tables_rows(
    major: bool,
    store: TxnStore,
    make_table: MakeTable,
    insert: Insert,
    handle: Callable[[str], Table],
) -> None:
    make_table("t", "id int, v string", buckets=("id", 2))
    insert("t", [{"id": i, "v": f"v{i}"} for i in range(10)])
    t = handle("t")
    t.delete("id = 3")
    t.update({"v": "'X'"}, "id >= 8")
    src = pa.table(
        {"id": pa.array([1, 2, 20], pa.int32()), "v": ["m1", "m2", "m20"], "op": ["u", "d", "i"]}
    )
    (
        t.merge(src, on="id")
        .when_matched_delete(condition="src.op = 'd'")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    before = rows_of(t.read(), ["id", "v"])
    assert before == [(0, "v0"), (1, "m1"), (4, "v4"), (5, "v5"), (6, "v6"), (7, "v7"),
                      (8, "X"), (9, "X"), (20, "m20")]  # fmt: skip
    q = CompactionQueue(store)
    q.request("default", "t", major=major)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r"
    names = sorted(d.rsplit("/", 1)[-1] for d in out.output_dirs)
    assert names[0].startswith("base_0000004_v" if major else "delete_delta_0000001_0000004_v")
    assert rows_of(t.read(), ["id", "v"]) == before
