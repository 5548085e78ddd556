"""The upsert writer of the chaos harness (``tests.chaos.scenarios_upsert``): run with
``python -m tests.chaos.child '<json spec>'`` and ``"writer": "upsert"``.

It applies a change log the parent drew from its seed (``spec["batches"]``: a list of
batches, each a list of events ``[id, op, v, lsn, ds]`` with ``op`` ``"u"`` (upsert) or
``"d"`` (delete)) batch by batch to a keyed table, one txn per batch, through one of two
paths (``spec["path"]``):

- ``engine``: :func:`acidstream.mutation.changes.apply_changes` with the ordering column
  ``lsn`` (and ``ordering_guard`` when ``spec["guard"]``), the event's position in its
  batch as ``__acid_offset``, and a ``commit_param`` recording the batch number, as the
  upsert sink records its batch id;
- ``connection``: a :class:`~acidstream.ingest.connection.StreamingConnection` opened with
  ``StreamingOptions(mode="upsert")``: ``upsert`` / ``delete`` per event in arrival order,
  ``commit_transaction(key=RESUME_KEY, value=...)`` (the last change of a key in a txn wins).

The batch number committed with each batch (table parameter :data:`RESUME_KEY`,
``{"next": b + 1}``) is where a restarted child resumes; the parent may start it earlier
(``spec["start"]``), as Spark re-delivers a micro-batch: a batch the table already
records is skipped, never applied twice (the sink's rule). What it prints (one flushed
line each):

- ``batch B skipped`` / ``batch B committed {result}``;
- ``kill STEP#N`` just before the hook SIGKILLs the process at the N-th hit of a step;
- ``done`` at the end.

Exit codes: 0 done; anything else (the SIGKILL aside) is a failure the parent reports.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from typing import Any

RESUME_KEY = "_meta.chaos.upsert"
"""Table parameter holding ``{"next": b}``: batches ``0..b-1`` committed (with their data)."""


def _say(line: str) -> None:
    print(line, flush=True)


def committed_batches(store: Any, table: str) -> int:
    """How many batches the table records as committed (0: none)."""
    db, name = table.split(".")
    raw = store.get_table_param(db, name, RESUME_KEY)
    return int(json.loads(raw)["next"]) if raw else 0


def _install_hook(spec: dict[str, Any], say: Callable[[str], None]) -> None:
    from acidstream.acid import faults

    fault = spec.get("hook")
    if not fault:
        return
    step, at = fault["step"], int(fault["at"])
    hits = {"n": 0}

    def hook(name: str) -> None:
        if name != step:
            return
        hits["n"] += 1
        if hits["n"] == at:
            say(f"kill {name}#{at}")
            os.kill(os.getpid(), signal.SIGKILL)

    faults.set_hook(hook)


def events_table(batch: list[list[Any]], partitioned: bool) -> Any:
    """A batch as the engine's events: ``id, v, lsn`` (+ ``ds``), ``__acid_delete`` and
    the arrival position as ``__acid_offset`` (the tie-breaker after ``lsn``). A delete
    carries its key and ``lsn`` only, as a Debezium delete has no ``after``."""
    import pyarrow as pa

    from acidstream.mutation.changes import DELETE_COLUMN, OFFSET_COLUMN

    dels = [e[1] == "d" for e in batch]
    cols: dict[str, Any] = {
        "id": pa.array([e[0] for e in batch], pa.int32()),
        "v": pa.array([None if d else e[2] for e, d in zip(batch, dels, strict=True)], pa.int32()),
        "lsn": pa.array([e[3] for e in batch], pa.int64()),
    }
    if partitioned:
        cols["ds"] = pa.array([None if d else e[4] for e, d in zip(batch, dels, strict=True)])
    cols[DELETE_COLUMN] = pa.array(dels, pa.bool_())
    cols[OFFSET_COLUMN] = pa.array(range(len(batch)), pa.int64())
    return pa.table(cols)


def _result(r: Any) -> dict[str, Any]:
    return {"events": r.events, "keys": r.keys, "inserted": r.inserted, "updated": r.updated,
            "deleted": r.deleted, "absent_deletes": r.absent_deletes,
            "skipped_late": r.skipped_late, "write_id": r.write_id}  # fmt: skip


def _batch_param(b: int) -> Callable[[Any], tuple[str, str]]:
    """The ``commit_param`` of batch ``b``: its number, committed with its data."""
    return lambda _result: (RESUME_KEY, json.dumps({"next": b + 1}))


def _run_engine(spec: dict[str, Any], store: Any, say: Callable[[str], None]) -> None:
    from acidstream.acid.table_name import TableName
    from acidstream.mutation.changes import ChangeOptions, apply_changes

    name = TableName.parse(spec["table"])
    options = ChangeOptions(key=("id",), ordering="lsn", ordering_guard=bool(spec["guard"]))
    for b in range(int(spec["start"]), len(spec["batches"])):
        if committed_batches(store, spec["table"]) > b:
            say(f"batch {b} skipped")
            continue
        events = events_table(spec["batches"][b], bool(spec["partitioned"]))
        result = apply_changes(store, name, events, options, commit_param=_batch_param(b))
        say(f"batch {b} committed {json.dumps(_result(result))}")


def _run_connection(spec: dict[str, Any], store: Any, say: Callable[[str], None]) -> None:
    from acidstream.ingest.connection import StreamingConnection, StreamingOptions
    from acidstream.ingest.record_writers import StrictJsonWriter

    opts = StreamingOptions(mode="upsert", housekeeping_interval_s=None)
    partitioned = bool(spec["partitioned"])
    with StreamingConnection(
        spec["table"], record_writer=StrictJsonWriter(), store=store, options=opts
    ) as c:
        for b in range(int(spec["start"]), len(spec["batches"])):
            if committed_batches(store, spec["table"]) > b:
                say(f"batch {b} skipped")
                continue
            c.begin_transaction()
            for k, op, v, lsn, ds in spec["batches"][b]:
                if op == "d":
                    c.delete({"id": k})
                    continue
                rec: dict[str, Any] = {"id": k, "v": v, "lsn": lsn}
                if partitioned:
                    rec["ds"] = ds
                c.upsert(json.dumps(rec).encode())
            c.commit_transaction(key=RESUME_KEY, value=json.dumps({"next": b + 1}))
            result = c.last_changes
            say(f"batch {b} committed {json.dumps(_result(result) if result else {})}")


def run_upserts(spec: dict[str, Any], say: Callable[[str], None] = _say) -> int:
    """Apply ``spec["batches"]`` from ``spec["start"]``; see the module docstring."""
    from acidstream.txn.store import open_store

    _install_hook(spec, say)
    store = open_store(spec["store_url"], warehouse=spec["warehouse"])
    try:
        if spec["path"] == "engine":
            _run_engine(spec, store, say)
        else:
            _run_connection(spec, store, say)
    finally:
        store.close()
    say("done")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(run_upserts(json.loads(sys.argv[1])))
