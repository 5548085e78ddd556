"""The mutation writer of the chaos harness (``tests.chaos.scenarios_mutation``): run with
``python -m tests.chaos.child '<json spec>'`` and ``"writer": "mutation"``.

It runs a list of statements the parent drew from its seed (``spec["ops"]``), from
``spec["start"]`` (and, for a streaming insert in flight, ``spec["start_chunk"]``) to the
end, through the public API: ``acidstream.table(...).delete / update / merge`` and a
``StreamingConnection`` for the inserts. What it prints (one flushed line each) is what the
parent needs to decide, from the metastore, which statements committed:

- ``op I start`` before statement ``I``;
- ``txns AGENT ID,...`` each time this process opens txns (``TxnStore.open_batch`` and ``open_txns`` are wrapped
  here, in the child only): the txn ids a statement or a chunk of an insert will commit;
- ``op I chunk J committed`` after each chunk of an insert;
- ``op I done {result}`` after a statement returned (a MERGE's result says ``replayed``);
- ``kill STEP#N`` just before the hook SIGKILLs the process at the N-th hit of a step.

The hook counts hits of its step only inside a row-level statement (``scope: mutation``),
so ``commit_txn.*`` or ``batch.*`` kills a DELETE/UPDATE/MERGE, not a streaming insert, or
only inside a MERGE (``scope: merge``); with ``scope: any`` every hit counts. A row written by statement ``I`` in the parent's run ``R``
carries ``msg = "oIrR"`` (an insert's chunk ``J``: ``"oIcJrR"``), so the parent can tell a
row of an aborted attempt from one of the committed attempt.

Exit codes: 0 done; anything else (the SIGKILL aside) is a failure the parent reports.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from typing import Any


def _say(line: str) -> None:
    print(line, flush=True)


def tag(op: int, run: int, chunk: int | None = None) -> str:
    """The ``msg`` of the rows statement ``op`` writes in run ``run`` (chunk of an insert)."""
    return f"o{op}r{run}" if chunk is None else f"o{op}c{chunk}r{run}"


def insert_record(row_id: int, msg: str) -> bytes:
    """A streaming insert's record: ``v`` and ``ds`` follow from the id (the parent's
    model computes the same)."""
    return json.dumps({"id": row_id, "msg": msg, "v": row_id % 17, "ds": f"d{row_id % 3}"}).encode()


def _watch_txns(say: Callable[[str], None]) -> None:
    """Print every txn id this process opens, before it is used (after the metastore
    committed the open): the parent asks the metastore for their states. A transaction
    batch opens its txns with ``open_batch`` (txns, write ids and a first lock in one
    round trip); anything else with ``open_txns``: both are watched."""
    from acidstream.txn.store import TxnStore

    original = TxnStore.open_txns
    original_batch = TxnStore.open_batch

    def open_txns(self: TxnStore, n: int, **kw: Any) -> list[int]:
        ids = original(self, n, **kw)
        say(f"txns {kw.get('agent_info') or '-'} {','.join(map(str, ids))}")
        return ids

    def open_batch(self: TxnStore, n: int, *args: Any, **kw: Any) -> Any:
        opened = original_batch(self, n, *args, **kw)
        say(f"txns {kw.get('agent_info') or '-'} {','.join(map(str, opened.txn_ids))}")
        return opened

    setattr(TxnStore, "open_txns", open_txns)  # noqa: B010 (mypy: a method replaced)
    setattr(TxnStore, "open_batch", open_batch)  # noqa: B010


_SCOPES = {"mutation": ("delete", "update", "merge"), "merge": ("merge",)}
"""The statements whose hits a hook's ``scope`` counts (``any``: every hit)."""


def _install_hook(spec: dict[str, Any], state: dict[str, Any], say: Callable[[str], None]) -> None:
    from acidstream.acid import faults

    fault = spec.get("hook")
    if not fault:
        return
    step, at, scope = fault["step"], int(fault["at"]), fault.get("scope", "any")

    def hook(name: str) -> None:
        if name != step or (scope != "any" and state["statement"] not in _SCOPES[scope]):
            return
        state["hits"] += 1
        if state["hits"] == at:
            say(f"kill {name}#{at}")
            os.kill(os.getpid(), signal.SIGKILL)

    faults.set_hook(hook)


def _merge_source(op: dict[str, Any]) -> Any:
    import pyarrow as pa

    rows = op["source"]
    return pa.table(
        {
            "id": pa.array([r["id"] for r in rows], pa.int32()),
            "v": pa.array([r["v"] for r in rows], pa.int32()),
            "dv": pa.array([r["dv"] for r in rows], pa.int32()),
            "ds": pa.array([r["ds"] for r in rows], pa.string()),
            "op": pa.array([r["op"] for r in rows], pa.string()),
        }
    )


def _statement(table: Any, op: dict[str, Any], msg: str) -> Any:
    """Run one DELETE / UPDATE / MERGE through the Table handle; its result."""
    kind = op["kind"]
    if kind == "delete":
        return table.delete(op["where"])
    if kind == "update":
        sets = {"msg": f"'{msg}'", **op["set"]}
        return table.update(sets, op["where"])
    assert kind == "merge", kind
    b = table.merge(_merge_source(op), on=op["on"])
    for clause in op["clauses"]:
        if clause == "delete":
            b = b.when_matched_delete(condition="src.op = 'd'")
        elif clause == "update":
            sets = {"v": "tgt.v + src.dv", "msg": f"'{msg}'"}
            if op["move"]:
                sets["ds"] = "src.ds"
            b = b.when_matched_update(set=sets)
        else:
            values = {"id": "src.id", "msg": f"'{msg}'", "v": "src.v", "ds": "src.ds"}
            b = b.when_not_matched_insert(values=values)
    return b.execute(idempotency_key=op["key"])


def _insert(
    store: Any, spec: dict[str, Any], i: int, op: dict[str, Any], first_chunk: int,
    say: Callable[[str], None],
) -> None:  # fmt: skip
    from acidstream.ingest.connection import StreamingConnection, StreamingOptions
    from acidstream.ingest.record_writers import StrictJsonWriter

    opts = StreamingOptions(
        txns_per_batch=int(op["txns_per_batch"]),
        memory_limit_bytes=int(op["memory_limit_bytes"]),
        housekeeping_interval_s=None,
    )
    with StreamingConnection(
        spec["table"], record_writer=StrictJsonWriter(), store=store, options=opts
    ) as c:
        for j in range(first_chunk, len(op["chunks"])):
            lo, hi = op["chunks"][j]
            c.begin_transaction()
            c.write_many(insert_record(k, tag(i, spec["run"], j)) for k in range(lo, hi))
            c.commit_transaction()
            say(f"op {i} chunk {j} committed")


def run_mutations(spec: dict[str, Any], say: Callable[[str], None] = _say) -> int:
    """Run ``spec["ops"]`` from ``spec["start"]``; see the module docstring."""
    import acidstream
    from acidstream.txn.store import open_store

    state: dict[str, Any] = {"statement": None, "hits": 0}
    _watch_txns(say)
    _install_hook(spec, state, say)
    table = acidstream.table(
        spec["table"], metastore=spec["store_url"], warehouse=spec["warehouse"]
    )
    store = open_store(spec["store_url"])
    try:
        for i in range(int(spec["start"]), len(spec["ops"])):
            op = spec["ops"][i]
            say(f"op {i} start")
            if op["kind"] == "insert":
                first = int(spec["start_chunk"]) if i == spec["start"] else 0
                _insert(store, spec, i, op, first, say)
                say(f"op {i} done {{}}")
                continue
            state["statement"] = op["kind"]
            result = _statement(table, op, tag(i, spec["run"]))
            state["statement"] = None
            done = {
                "replayed": bool(result.replayed),
                "write_id": result.write_id,
                "deleted": result.rows_deleted,
                "updated": result.rows_updated,
                "inserted": getattr(result, "rows_inserted", 0),
            }
            say(f"op {i} done {json.dumps(done)}")
    finally:
        store.close()
    say("done")
    return 0
