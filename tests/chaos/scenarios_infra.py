"""Chaos scenarios around the writers' infrastructure: a Spark task's retry, the Kafka broker
and the metastore's server restarted mid-stream, and clock jumps (``docs/chaos.md``).

Each scenario has the harness's signature ``(store_url, warehouse, seed) -> Result`` and
raises :class:`~tests.chaos.harness.InvariantViolation` when an invariant breaks; the
harness registers them with its own.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acidstream.txn.store import open_store
from tests.chaos import harness
from tests.chaos.child import EXIT_OTHER_TYPED, EXIT_TXN_ABORTED
from tests.chaos.harness import (
    CONNECTION_STEPS,
    FUTURE_S,
    KAFKA_COLUMNS,
    TXN_TIMEOUT_S,
    ZOMBIE_STEPS,
    InvariantViolation,
    Observer,
    Result,
    _events_and_batches,
    _finish,
    check_exactly_once,
    check_no_open_txns,
    committed_next,
    connection_spec,
    make_table,
    repair,
    snapshot_ids,
    start_child,
)

TASK_STEP = "sink.task_after_flush"


def _produce(producer: Any, topic: str, ids: range, seed: int) -> None:
    """Events ``ids`` of the seed's deterministic stream (``id`` is the event number)."""
    from acidstream.jobs.sample_events import sample_event

    rnd = random.Random(seed)
    for i in range(ids.stop):
        ev = sample_event(i, rnd)  # drawn in order, so event i is the same in every run
        if i >= ids.start:
            producer.send(topic, value=ev)
    producer.flush()


def _kafka_spec(
    store_url: str, warehouse: str, topic: str, bootstrap: str, *, per_trigger: int, txns: int,
    master: str = "local[2]",
) -> dict[str, Any]:  # fmt: skip
    flat = {
        "kafka.topic": topic, "table.name": "default.events", "table.columns": KAFKA_COLUMNS,
        "table.partitioned_by": "ds string", "warehouse": warehouse, "metastore": store_url,
        "checkpoint": f"{warehouse}/_ckpt", "sink.sink_id": "chaos", "spark.master": master,
        "kafka.max_offsets_per_trigger": per_trigger, "sink.txns_per_batch": txns,
        "compaction": "off",
    }  # fmt: skip
    return {"writer": "kafka", "flat": flat, "bootstrap": bootstrap, "hook": None}


def _check_after_fault(store_url: str, events: int, label: str) -> Any:
    """After a fault, before recovery: no duplicate and no row the topic does not hold."""
    with open_store(store_url) as store:
        table = store.get_table("default", "events")
        seen = snapshot_ids(store, table)
    if len(set(seen)) != len(seen) or not set(seen) <= set(range(events)):
        dup = len(seen) - len(set(seen))
        raise InvariantViolation(
            f"{label}: the table shows {dup} duplicated rows or rows the topic does not hold"
        )
    return table


def _finish_kafka(store_url: str, spec: dict[str, Any], events: int, label: str) -> Any:
    """Repair, restart the job without fault, check every invariant; returns the table."""
    table = _check_after_fault(store_url, events, label)
    repair(store_url, table, label)
    p = start_child(spec)
    _out, err = p.communicate(timeout=600)
    if p.returncode != 0:
        raise InvariantViolation(f"{label}: restarted job failed: {err[-1500:]}")
    with open_store(store_url) as store:
        check_exactly_once(snapshot_ids(store, table), events, label)
    check_no_open_txns(store_url, label)
    repair(store_url, table, label)
    return table


def scenario_kafka_task_retry(store_url: str, warehouse: str, seed: int) -> Result:
    """A sink task's first attempt is SIGKILLed after its file's first flush (part of the
    file and its side file on disk); Spark (``local[2,N]``: up to N attempts) retries the
    task, which rewrites the file: the job ends normally, each event once, every file
    whole."""
    from tests.chaos.harness import KAFKA

    broker = KAFKA.get("broker")
    if broker is None:
        return "skipped: no broker (the runner starts one with --kafka-iterations)", None
    rng = random.Random(seed)
    events = rng.randint(150, 500)
    per_trigger = rng.choice((100, 200, 500))
    txns = rng.randint(2, 4)  # the first flush is a txn boundary inside the file
    attempts = rng.randint(2, 4)
    label = f"seed {seed} kafka task(batch {txns}, local[2,{attempts}]) SIGKILL at {TASK_STEP}"
    topic = f"chaos_{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 3)
    producer = broker.producer()
    try:
        _produce(producer, topic, range(events), seed)
    finally:
        producer.close()
    spec = _kafka_spec(store_url, warehouse, topic, broker.bootstrap, per_trigger=per_trigger,
                       txns=txns, master=f"local[2,{attempts}]")  # fmt: skip
    marks = Path(warehouse).parent / "fault-marks"
    marks.mkdir(parents=True, exist_ok=True)
    # Armed in every process the job starts (the driver never reaches the step; the Python
    # workers inherit the environment); the marker lets only the first hit kill.
    env = {"ACIDSTREAM_FAULTS": TASK_STEP, "ACIDSTREAM_FAULTS_ONCE": str(marks)}
    p = start_child(spec, extra_env=env)
    _out, err = p.communicate(timeout=600)
    fired = (marks / TASK_STEP).exists()
    if p.returncode != 0:
        raise InvariantViolation(
            f"{label}: the job did not survive the task's retry ({p.returncode}): {err[-1500:]}"
        )
    with open_store(store_url) as store:
        table = store.get_table("default", "events")
        # Straight after the run, before any repair: the retry left each event once.
        check_exactly_once(snapshot_ids(store, table), events, label)
    check_no_open_txns(store_url, label)
    repair(store_url, table, label)
    what = "task attempt 0 killed, retried" if fired else "step not reached"
    return f"{what}; {events} events", table


def scenario_kafka_broker_restart(store_url: str, warehouse: str, seed: int) -> Result:
    """The Kafka broker (Tansu on S3 storage) is SIGKILLed after the job committed a
    micro-batch, stays down a while, restarts on the same port and storage; more events
    arrive after it. The job survives or fails typed; after recovery every event is in
    the table once."""
    from tests.chaos.services import S3Broker, s3_broker_unavailable

    reason = s3_broker_unavailable()
    if reason is not None:
        return f"skipped: {reason}", None
    rng = random.Random(seed)
    events = rng.randint(150, 400)
    late = rng.randint(0, events // 3)  # produced only after the restart
    per_trigger = rng.choice((60, 100, 150))
    txns = rng.randint(1, 3)
    after = rng.randint(1, 2)  # committed micro-batches before the kill
    outage = rng.uniform(0.2, 3.0)
    label = (
        f"seed {seed} kafka(batch {txns}) broker SIGKILL after batch #{after}, {outage:.1f}s down"
    )
    home = Path(warehouse).parent
    broker = S3Broker(f"chaos-{uuid.uuid4().hex[:10]}", home / "tansu.log")
    broker.start()
    try:
        topic = "events"
        broker.create_topic(topic, 3)
        producer = broker.producer()
        try:
            _produce(producer, topic, range(events - late), seed)
        finally:
            producer.close()
        spec = _kafka_spec(store_url, warehouse, topic, broker.bootstrap,
                           per_trigger=per_trigger, txns=txns)  # fmt: skip
        spec["flat"]["kafka.end_offsets_from"] = "fetch"  # see S3Broker.producer
        with open(home / "job.err", "w") as err_file:
            p = start_child(spec, stderr=err_file)
            assert p.stdout is not None
            seen = 0
            for line in p.stdout:
                if line.startswith("batch "):
                    seen += 1
                    if seen >= after:
                        break
            broker.kill()
            killed_mid = p.poll() is None
            time.sleep(outage)  # the outage itself: how long the broker stays down
            broker.start()
            producer = broker.producer()
            try:
                _produce(producer, topic, range(events - late, events), seed)
            finally:
                producer.close()
            p.communicate(timeout=600)
        err = (home / "job.err").read_text(errors="replace")
        if p.returncode not in (0, EXIT_OTHER_TYPED):
            raise InvariantViolation(f"{label}: the job exited {p.returncode}: {err[-1500:]}")
        table = _finish_kafka(store_url, spec, events, label)
    finally:
        broker.kill()
    first = "survived" if p.returncode == 0 else "failed typed"
    return f"{first} ({'mid-stream' if killed_mid else 'job had ended'}); {events} events", table


def _jumped_clock(path: Path) -> Callable[[], float]:
    def clock() -> float:
        return time.time() + float(path.read_text().strip() or 0)

    return clock


def scenario_clock_jump(store_url: str, warehouse: str, seed: int) -> Result:
    """The wall clock jumps while a writer is alive between heartbeats (held at a step,
    its threads running). Forward past the txn timeout: the housekeeper (same clock)
    reaps the writer's txns, the writer fails typed at its next metastore step, nothing
    committed is lost, nothing aborted is visible. Backward: nothing is reaped and the
    writer finishes."""
    rng = random.Random(seed)
    events, per_txn, txns, memory = _events_and_batches(rng, rng.random() < 0.6)
    step = rng.choice(ZOMBIE_STEPS)
    forward = rng.random() < 0.6
    jump = (TXN_TIMEOUT_S + rng.uniform(1, FUTURE_S)) * (1 if forward else -1)
    n_txns = -(-events // per_txn)
    per_batch = step.startswith("open_batch")
    at = rng.randint(1, min(3, max(1, -(-n_txns // txns) if per_batch else n_txns)))
    label = f"seed {seed} connection(batch {txns}) clock {jump:+.0f}s at {step}#{at}"
    clock_file = Path(warehouse).parent / "clock-offset"
    clock_file.write_text("0")
    clock = _jumped_clock(clock_file)
    with open_store(store_url, warehouse=warehouse) as store:
        table = make_table(store)
        spec = connection_spec(
            store_url, table, events=events, rows_per_txn=per_txn, txns_per_batch=txns,
            memory_limit_bytes=memory, hook={"step": step, "at": at, "action": "hold"},
        )  # fmt: skip
        spec["clock_file"] = str(clock_file)
        obs = Observer(store, table, label)
        p = start_child(spec, stdin=True)
        assert p.stdout is not None and p.stdin is not None
        held = any(line.startswith("holding") for line in p.stdout)
        if not held:
            p.wait(timeout=120)
            if p.returncode != 0:
                raise InvariantViolation(f"{label}: writer exited {p.returncode} unheld")
            _finish(store_url, table, spec, label, obs)
            return f"not reached at {step}#{at}; {events} events", table
        before, committed = snapshot_ids(store, table), committed_next(store, table)
        open_before = {t.txn_id for t in store.show_txns() if t.state.name == "OPEN"}
        clock_file.write_text(str(jump))  # the jump, seen by the writer and the housekeeper
        with open_store(store_url, clock=clock) as keeper:
            reaped = keeper.reap_timed_out(timeout_s=TXN_TIMEOUT_S)
        if forward and not set(reaped) & open_before:
            raise InvariantViolation(f"{label}: the jump forward reaped none of {open_before}")
        if not forward and reaped:
            raise InvariantViolation(f"{label}: a jump backward reaped live txns {reaped}")
        obs.snap()
        p.stdin.write("go\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=120)
        want = EXIT_TXN_ABORTED if forward else 0
        if p.returncode != want:
            raise InvariantViolation(
                f"{label}: writer exited {p.returncode}, expected {want} (out {out[-300:]!r} "
                f"err {err[-600:]!r})"
            )
        if forward:
            after = snapshot_ids(store, table)
            if sorted(after) != sorted(before) or committed_next(store, table) != committed:
                raise InvariantViolation(
                    f"{label}: the reaped writer changed the table ({len(before)} -> "
                    f"{len(after)} rows)"
                )
        obs.snap()
        if forward:
            with open_store(store_url, warehouse=warehouse, clock=clock) as s:
                from acidstream.recovery.repair import repair_table

                rep = repair_table(s, table, apply=True, txn_timeout_s=TXN_TIMEOUT_S)
                if any(a.error for a in rep.actions):
                    raise InvariantViolation(f"{label}: repair failed: {rep.actions}")
        _finish(store_url, table, spec, label, obs)
    what = "reaped, writer failed typed" if forward else "nothing reaped, writer finished"
    return f"{what}; {events} events", table


def scenario_pg_restart(store_url: str, warehouse: str, seed: int) -> Result:
    """The metastore's PostgreSQL server (a private cluster, never the shared one) restarts
    (``immediate``: a crash and WAL recovery; ``fast``: backends terminated) while the writer
    is at a random step, inside or outside a metastore transaction. The writer carries on
    (the store reconnects and retries what is safe) or fails typed; after recovery every
    event is in the table once."""
    from tests.chaos.services import private_postgres

    pg = private_postgres()
    if isinstance(pg, str):
        return f"skipped: {pg}", None
    if f":{pg.port}/" not in store_url:
        return "skipped: needs the private PostgreSQL backend (pg-private)", None
    rng = random.Random(seed)
    events, per_txn, txns, memory = _events_and_batches(rng, rng.random() < 0.6)
    step = rng.choice([s for s in CONNECTION_STEPS if not s.startswith("abort_txn")])
    mode = rng.choice(("immediate", "fast"))
    n_txns = -(-events // per_txn)
    per_batch = step.startswith(("open_batch", "abort_txn"))
    at = rng.randint(1, max(1, -(-n_txns // txns) if per_batch else n_txns))
    label = f"seed {seed} connection(batch {txns}) pg restart -m {mode} at {step}#{at}"
    with open_store(store_url, warehouse=warehouse) as store:
        table = make_table(store)
        spec = connection_spec(
            store_url, table, events=events, rows_per_txn=per_txn, txns_per_batch=txns,
            memory_limit_bytes=memory,
            hook={"step": step, "at": at, "action": "pg_restart",
                  "restart_cmd": pg.restart_cmd(mode)},
        )  # fmt: skip
        obs = Observer(store, table, label)
        p = start_child(spec)
        obs.watch(p)
        out, err = p.communicate(timeout=300)
        if p.returncode not in (0, EXIT_TXN_ABORTED, EXIT_OTHER_TYPED):
            raise InvariantViolation(f"{label}: writer exited {p.returncode}: {err[-800:]}")
        obs.snap()
        repair(store_url, table, label)
        _finish(store_url, table, spec, label, obs)
    fired = "restarted server" in out
    typed = [
        ln[len("typed-error ") :][:120] for ln in out.splitlines() if ln.startswith("typed-error")
    ]
    first = f"failed typed ({typed[0]})" if typed else "carried on"
    what = f"restarted, writer {first}" if fired else "step not reached"
    return f"{what} at {step}#{at}; {events} events", table


SCENARIOS: dict[str, Callable[[str, str, int], Result]] = {
    "connection-clock-jump": scenario_clock_jump,
    "connection-pg-restart": scenario_pg_restart,
    "kafka-task-retry": scenario_kafka_task_retry,
    "kafka-broker-restart": scenario_kafka_broker_restart,
}
FAULTS = {
    "connection-clock-jump": "wall clock jumps (forward past the txn timeout / backward) "
    "between heartbeats",
    "connection-pg-restart": "metastore PostgreSQL server restarted mid-stream (private cluster)",
    "kafka-task-retry": "SIGKILL of a sink task's first attempt after its first flush; Spark retry",
    "kafka-broker-restart": "Kafka broker SIGKILLed mid-stream, restarted on the same storage",
}

harness.SCENARIOS.update(SCENARIOS)
harness.FAULTS.update(FAULTS)
