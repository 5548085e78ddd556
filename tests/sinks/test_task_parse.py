"""The sinks' executor tasks parse their whole micro-batch in one bulk pass (issue 33).

``mapInArrow`` hands a task its rows in Arrow batches of
``spark.sql.execution.arrow.maxRecordsPerBatch`` (10,000) rows; the append task's JSON
record writer (``encode_block``) and the upsert task's change-event parser must each see
the task's records once, all of them, not once per Arrow batch. The tasks run here as an
executor runs them (no TaskContext: task 0), on real files; the parsers are the real ones,
wrapped only to count their calls.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark", reason="the sinks' tasks import pyspark's TaskContext")

from acidstream.acid.placement import TableLayout
from acidstream.ingest import record_json
from acidstream.ingest.change_events import ChangeParser, ChangeSpec
from acidstream.sinks.foreach_batch import SinkOptions, _TaskPlan, _write_task
from acidstream.sinks.upsert_sink import _parse_task, _ParsePlan

PER_BATCH = 1_000  # rows per Arrow batch handed to the task
BATCHES = 3


def _batches(values: list[bytes | None]) -> list[pa.RecordBatch]:
    """The values as a Kafka micro-batch split into Arrow batches of PER_BATCH rows."""
    out = []
    for start in range(0, len(values), PER_BATCH):
        chunk = values[start : start + PER_BATCH]
        out.append(
            pa.RecordBatch.from_pydict(
                {
                    "value": pa.array(chunk, pa.binary()),
                    "topic": pa.array(["t"] * len(chunk), pa.string()),
                    "partition": pa.array([0] * len(chunk), pa.int32()),
                    "offset": pa.array(range(start, start + len(chunk)), pa.int64()),
                }
            )
        )
    return out


def _count_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Wrap ``owner.name`` (a method taking a block first) to record each block's size."""
    sizes: list[int] = []
    real = getattr(owner, name)

    def counted(self: Any, block: Any, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(block))
        return real(self, block, *args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return sizes


def test_append_task_encodes_its_whole_micro_batch_in_one_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = PER_BATCH * BATCHES
    values: list[bytes | None] = [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in range(n)]
    values[PER_BATCH + 7] = b"{not json"  # a bad record in the second Arrow batch
    values[2 * PER_BATCH + 3] = None  # a tombstone: skipped, not parsed
    sizes = _count_calls(monkeypatch, record_json._BoundJson, "encode_block")
    plan = _TaskPlan(
        table=TableLayout(
            location=str(tmp_path / "t"), columns=(("id", "int"), ("name", "string"))
        ),
        source="default.t",
        write_ids=(1,),
        options=SinkOptions(skip_bad_records=True),
        has_offsets=True,
    )
    (meta,) = list(_write_task(plan, iter(_batches(values))))
    rows = meta.to_pylist()
    assert sizes == [n - 1], "one encode_block over every non-tombstone record of the task"
    assert sum(r["rows"] for r in rows if r["path"]) == n - 2
    (summary,) = [r for r in rows if not r["path"]]
    assert summary["bad"] == 1
    assert json.loads(summary["offsets"]) == {"t": {"0": n}}


def test_upsert_task_parses_its_whole_micro_batch_in_one_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = PER_BATCH * BATCHES
    # Every key twice, the second version in a later Arrow batch: one event per key remains.
    values: list[bytes | None] = [
        json.dumps({"id": i % (n // 2), "name": f"v{i}"}).encode() for i in range(n)
    ]
    sizes = _count_calls(monkeypatch, ChangeParser, "parse")
    plan = _ParsePlan(
        spec=ChangeSpec(format="json", key=("id",)),
        columns=(("id", "int"), ("name", "string")),
        partition_keys=(),
        key=("id",),
        ordering=None,
        source="default.t",
        dead_letter_path=None,
        skip_bad_records=False,
        file_prefix="upsert_test",
        value_column="value",
    )
    (out,) = list(_parse_task(plan, iter(_batches(values))))
    row = out.to_pylist()[0]
    assert sizes == [n], "one parse over the task's whole micro-batch"
    assert (row["rows"], row["n_events"], row["bad"]) == (n, n, 0)
    events = pa.ipc.open_stream(io.BytesIO(row["events"])).read_all()
    assert events.num_rows == n // 2
    assert sorted(events.column("name").to_pylist()) == sorted(f"v{i}" for i in range(n // 2, n))
