"""``acidstream sink-state``: what a table recorded for each writer that resumes from it.

Writers that must not replay store an idempotency record in the table's parameters, in
the same metastore transaction as their data (``docs/sink.md``, ``docs/ingest.md``):

* the Spark sink (``acidstream.sinks.foreach_batch.META_PREFIX`` + sink id): ``{sink_id, lineage,
  batch_id, offsets, write_ids, txn_ids, rows, bad_records}``; ``offsets`` are the next
  offsets to read per topic and partition, the ``startingOffsets`` of a restart without
  the Spark checkpoint;
* ``acidstream ingest --resume`` (``_meta.acidstream.ingest.`` + a digest of the input
  path): ``{file, offset}``, the byte offset the next run starts from.

This module reads them back, for deciding where a stream will restart. The prefixes are
the writers' own, repeated here because ``recovery`` sits below the CLI and the sink
(the import rule); ``tests/recovery`` checks they stay equal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from acidstream.txn.catalog import TableDef

__all__ = ["INGEST_PREFIX", "SINK_PREFIX", "SinkRecord", "sink_records"]

SINK_PREFIX = "_meta.acidstream.sink."
"""``acidstream.sinks.foreach_batch.META_PREFIX``."""
INGEST_PREFIX = "_meta.acidstream.ingest."
"""``acidstream.cli.ingest_cmds.RESUME_PREFIX``."""


@dataclass(frozen=True)
class SinkRecord:
    """One writer's last committed record.

    Attributes:
        kind: ``sink`` (Spark sink) or ``ingest`` (``acidstream ingest --resume``).
        key: The table parameter.
        writer: The sink id, or the input file.
        position: Where the writer restarts: the batch id and offsets, or the byte offset.
        value: The whole record (parsed JSON; ``{"raw": text}`` when not JSON).
    """

    kind: str
    key: str
    writer: str
    position: str
    value: dict[str, Any]


def _parse(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {"raw": raw}
    return value if isinstance(value, dict) else {"raw": raw}


def _offsets_text(offsets: Any) -> str:
    if not isinstance(offsets, dict) or not offsets:
        return "no offsets"
    parts = []
    for topic, per in sorted(offsets.items()):
        if isinstance(per, dict):
            pos = ",".join(f"{p}:{o}" for p, o in sorted(per.items(), key=lambda x: int(x[0])))
            parts.append(f"{topic}[{pos}]")
    return " ".join(parts)


def sink_records(table: TableDef, *, sink_id: str | None = None) -> list[SinkRecord]:
    """Every resume record in ``table``'s parameters (only ``sink_id``'s when given)."""
    out: list[SinkRecord] = []
    for key, raw in sorted(table.parameters.items()):
        if key.startswith(SINK_PREFIX):
            sid = key[len(SINK_PREFIX) :]
            if sink_id is not None and sid != sink_id:
                continue
            v = _parse(raw)
            position = (
                f"after batch {v.get('batch_id')} (lineage {v.get('lineage')}); "
                f"next offsets {_offsets_text(v.get('offsets'))}"
            )
            out.append(SinkRecord("sink", key, sid, position, v))
        elif key.startswith(INGEST_PREFIX) and sink_id is None:
            v = _parse(raw)
            file = str(v.get("file", key[len(INGEST_PREFIX) :]))
            out.append(SinkRecord("ingest", key, file, f"byte offset {v.get('offset')}", v))
    return out
