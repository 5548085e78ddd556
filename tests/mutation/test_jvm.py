"""Every file a DELETE, UPDATE and MERGE writes, opened by ORC Java (the reader Hive uses):
all rows read, the ACID event schema with the full row struct (also in delete deltas),
Hive's ACID metadata (key index: one entry per stripe; stats; version)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc
import pytest

from acidstream import Table
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert

pytestmark = pytest.mark.spark

ACID_KEYS = {"hive.acid.key.index", "hive.acid.stats", "hive.acid.version"}


def test_jvm_orc_reads_every_mutation_file(
    make_table: MakeTable,
    insert: Insert,
    handle: Callable[[str], Table],
    store: Any,
    jvm_orc: Any,
) -> None:
    tdef = make_table(
        "j", "id int, v string, d decimal(10,2), c char(3)", partitioned_by=[("ds", "string")],
        buckets=("id", 2),
    )  # fmt: skip
    insert("j", [{"id": i, "v": f"v{i}", "d": "1.50", "c": "ab", "ds": "a"} for i in range(50)])
    t = handle("j")
    written: list[str] = []
    written += t.delete(pc.field("id") < 5).files_written
    written += t.update(
        {"v": pc.scalar("u"), "ds": pc.scalar("b")}, pc.field("id") > 40
    ).files_written
    src = pa.table(
        {"id": pa.array([10, 11, 500], pa.int32()), "v": ["m", "m", "new"], "op": ["u", "d", "i"]}
    )
    merged = (
        t.merge(src, on=["id"])
        .when_matched_delete(condition=pc.field("src.op") == "d")
        .when_matched_update(set={"v": pc.field("src.v")})
        .when_not_matched_insert(values={"id": pc.field("src.id"), "v": pc.field("src.v"), "ds": pc.scalar("a")})
        .execute()
    )  # fmt: skip
    written += merged.files_written
    kinds = {Path(f).parent.name.split("_0")[0] for f in written}
    assert kinds == {"delete_delta", "delta"}
    assert len(written) >= 8
    schema = tdef.schema.orc_event_schema()
    for f in written:
        got = jvm_orc.read(f)
        py = orc.ORCFile(f)
        assert got["rows"] == got["rows_read"] == py.nrows > 0, f
        assert got["schema"] == schema, f
        assert set(got["metadata"]) == ACID_KEYS
        assert got["metadata"]["hive.acid.version"] == "2"
        assert got["metadata"]["hive.acid.key.index"].count(";") == got["stripes"]
        ins, upd, dels = map(int, got["metadata"]["hive.acid.stats"].split(","))
        if Path(f).parent.name.startswith("delete_delta"):
            assert (ins, upd, dels) == (0, 0, got["rows"])
        else:
            assert (ins, upd, dels) == (got["rows"], 0, 0)
