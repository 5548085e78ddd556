"""A writer process for the chaos harness: ``python -m tests.chaos.child '<json spec>'``.

Runs one of the project's writers over the harness's deterministic events and dies, pauses
or fails where the spec says. Faults come from :mod:`acidstream.acid.faults`: ``ACIDSTREAM_FAULTS``
(set by the parent) kills at the first hit of a step; the in-process hook here kills,
pauses (SIGSTOP) or terminates the PostgreSQL backend at the N-th hit of a step.

Exactly once across restarts: every commit stores ``{"next": i}`` (the next event to
write) under :data:`RESUME_KEY` atomically with the txn (``commit_transaction(key=...)``);
a restarted writer continues from it.

Exit codes: 0 done; :data:`EXIT_TXN_ABORTED` a commit was refused because the txn was
aborted (the zombie case, printed as ``typed-error <class>``); :data:`EXIT_STORAGE` a
typed storage failure; anything else is a failure the harness reports.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

RESUME_KEY = "_meta.chaos.next"
EXIT_TXN_ABORTED = 17
EXIT_STORAGE = 18
EXIT_OTHER_TYPED = 19


def event(i: int, partitioned: bool) -> bytes:
    """Event ``i`` of every run (the source the invariants compare against)."""
    rec: dict[str, Any] = {"id": i, "msg": f"event-{i}-" + "x" * (i % 7)}
    if partitioned:
        rec["ds"] = f"d{i % 3}"
    return json.dumps(rec).encode()


def _install_hook(spec: dict[str, Any], store: Any) -> None:
    from acidstream.acid import faults

    fault = spec.get("hook")
    if not fault:
        return
    step, at, action = fault["step"], int(fault["at"]), fault["action"]
    hits = {"n": 0}

    def hook(name: str) -> None:
        if name != step:
            return
        hits["n"] += 1
        if hits["n"] != at:
            return
        if action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif action == "stop":
            print(f"paused {name}", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
            print("resumed", flush=True)
        elif action == "hold":  # alive (threads run), blocked until the parent says go
            print(f"holding {name}", flush=True)
            sys.stdin.readline()
            print("released", flush=True)
        elif action == "pg_restart":  # the metastore's server restarts under the writer
            import subprocess

            subprocess.run(fault["restart_cmd"], check=True, capture_output=True, timeout=60)
            print(f"restarted server at {name}", flush=True)
        elif action == "pg_terminate":
            import psycopg

            pid = store.database.backend_pid
            with psycopg.connect(fault["admin_url"], autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
            print(f"terminated backend {pid} at {name}", flush=True)

    faults.set_hook(hook)


def _clock(path: str | None) -> Callable[[], float]:
    """The writer's wall clock: ``time.time()`` plus the offset in ``path`` (a clock jump the
    parent simulates by rewriting the file), or plain ``time.time``."""
    if not path:
        return time.time

    def clock() -> float:
        with open(path) as f:
            return time.time() + float(f.read().strip() or 0)

    return clock


def _print(line: str) -> None:
    print(line, flush=True)


def run_connection(spec: dict[str, Any], say: Callable[[str], None] = _print) -> int:
    """StreamingConnection: ``rows_per_txn`` events per txn, resuming from the table.
    ``say`` gets one line per step (stdout in a child; the harness runs an unfaulted
    restart in its own process with a quiet one)."""
    from acidstream.acid.errors import StorageError, TransactionError, TxnAbortedError
    from acidstream.ingest.connection import StreamingConnection, StreamingOptions
    from acidstream.ingest.record_writers import StrictJsonWriter
    from acidstream.txn.store import open_store

    store = open_store(spec["store_url"], clock=_clock(spec.get("clock_file")))
    db, name = spec["table"].split(".")
    raw = store.get_table_param(db, name, RESUME_KEY)
    start = json.loads(raw)["next"] if raw else 0
    n, per_txn = int(spec["events"]), int(spec["rows_per_txn"])
    partitioned = bool(spec.get("partitioned"))
    _install_hook(spec, store)
    from tests.plugins import faulty_fs

    faulty_fs.install()  # faulty:// table locations resolve; armed only when asked
    if spec.get("faulty"):
        f = spec["faulty"]
        faulty_fs.PLAN.arm(f["op"], int(f["at"]), int(f["err"]))
    opts = StreamingOptions(
        txns_per_batch=int(spec["txns_per_batch"]),
        memory_limit_bytes=int(spec.get("memory_limit_bytes", 1 << 20)),
        housekeeping_interval_s=None,
        durability=os.environ.get("ACIDSTREAM_CHAOS_DURABILITY") or "fsync",  # run.py --durability
    )
    say(f"start {start}")
    try:
        with StreamingConnection(
            spec["table"], record_writer=StrictJsonWriter(), store=store, options=opts
        ) as c:
            say(f"durability {c.durability}")
            i = start
            while i < n:
                c.begin_transaction()
                hi = min(n, i + per_txn)
                c.write_many(event(k, partitioned) for k in range(i, hi))
                c.commit_transaction(key=RESUME_KEY, value=json.dumps({"next": hi}))
                say(f"committed {hi}")
                i = hi
    except TxnAbortedError as e:
        say(f"typed-error {type(e).__name__}: {e}")
        return EXIT_TXN_ABORTED
    except StorageError as e:
        say(f"typed-error {type(e).__name__}: {e}")
        return EXIT_STORAGE
    except TransactionError as e:
        say(f"typed-error {type(e).__name__}: {e}")
        return EXIT_OTHER_TYPED
    finally:
        store.close()
    say("done")
    return 0


def run_compactor(spec: dict[str, Any], say: Callable[[str], None] = _print) -> int:
    """``acidstream.compaction.service.Compactor``: queue a compaction (unless ``enqueue`` is false,
    e.g. on a restart that recovers a dead worker's request), then one pass: recover,
    work, clean."""
    from acidstream.compaction.service import Compactor
    from acidstream.txn.compaction_sql import CompactionQueue
    from acidstream.txn.store import open_store

    store = open_store(spec["store_url"])
    _install_hook(spec, store)
    db, name = spec["table"].split(".")
    try:
        if spec.get("enqueue", True):
            CompactionQueue(store).request(db, name, major=bool(spec.get("major", True)))
        Compactor(store, initiator=False).run_once()
    finally:
        store.close()
    say("done")
    return 0


def run_kafka(spec: dict[str, Any]) -> int:
    """The Kafka job's driver (``acidstream.jobs.kafka_job.run_kafka_job``) until the topic is read
    (``availableNow``); the hook runs in the driver only."""
    from acidstream.acid.errors import AcidStreamError
    from acidstream.jobs.config import KafkaJobConfig
    from acidstream.jobs.kafka_job import run_kafka_job

    _install_hook(spec, None)
    cfg = KafkaJobConfig.load(None, overrides=spec["flat"], env={})
    try:
        res = run_kafka_job(cfg, bootstrap=spec["bootstrap"])
    except AcidStreamError as e:
        print(f"typed-error {type(e).__name__}: {e}", flush=True)
        return EXIT_OTHER_TYPED
    print(f"RESULT committed {res.batches_committed} skipped {res.batches_skipped}", flush=True)
    return 0


def main(argv: list[str]) -> int:
    import faulthandler

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # stacks of a hung writer
    spec = json.loads(argv[0])
    kind = spec["writer"]
    if kind == "connection":
        return run_connection(spec)
    if kind == "compactor":
        return run_compactor(spec)
    if kind == "kafka":
        return run_kafka(spec)
    if kind == "mutation":  # DELETE / UPDATE / MERGE and inserts (scenarios_mutation)
        from tests.chaos.child_mutation import run_mutations

        return run_mutations(spec)
    raise SystemExit(f"unknown writer {kind!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
