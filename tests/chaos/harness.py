"""The chaos harness: seeded fault schedules over the project's writers, and the invariants
checked after every recovery (``docs/chaos.md``).

One *iteration* is ``(scenario, fault, seed)``: a :class:`random.Random` seeded with the
seed draws the schedule (which step, at which hit, how many events, batch sizes), the
writer runs in a child process (:mod:`tests.chaos.child`) and meets the fault, the
operator's recovery runs (``acidstream repair --apply`` with the txn timeout elapsed,
then the writer restarted without fault), and the invariants are checked:

1. every event of the source is in the table exactly once;
2. no aborted or uncommitted row is visible at any snapshot taken during the run
   (each snapshot shows exactly the events ``0..k-1`` for some ``k``, and ``k`` never goes
   back: a row of an aborted or open txn would show as a gap, a duplicate or an id past
   the committed prefix);
3. no txn or lock is left open once the housekeeper's timeout has passed;
4. every data file is readable at its flush length (by the JVM ORC reader when a
   ``jvm_orc`` checker is given, on a sample in the fast tier; else by fsck's decoder);
5. ``acidstream fsck`` is clean after ``acidstream repair --apply``.

Replay one iteration: ``.venv/bin/python -m tests.chaos.run --replay SCENARIO:SEED:BACKEND``
(the seed fixes the whole schedule).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from acidstream.acid.reader import read_path
from acidstream.recovery.fsck import FsckReport, fsck_table
from acidstream.recovery.repair import RepairReport, repair_table
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnState, TxnStore, open_store
from tests.chaos.child import EXIT_STORAGE, EXIT_TXN_ABORTED, RESUME_KEY

ROOT = Path(__file__).resolve().parents[2]
FUTURE_S = 3600.0
"""How far the recovering operator's clock is ahead: every dead writer's txn has timed out."""
TXN_TIMEOUT_S = 300.0

# Steps of acid.faults a StreamingConnection passes through (docs/architecture.md "Test
# hooks"): the batch's own, and each store operation's before/after and inner steps.
CONNECTION_STEPS: tuple[str, ...] = (
    "open_batch.before_commit",
    "open_batch.after_commit",
    "lock.before_commit",
    "lock.after_commit",
    "batch.before_commit",
    "commit_txn.after_write_set",
    "commit_txn.after_completed_components",
    "commit_txn.after_key_value",
    "commit_txn.before_commit",
    "commit_txn.after_commit",
    "batch.after_commit",
    "abort_txn.before_commit",
    "abort_txn.after_commit",
)
PARTITION_STEPS: tuple[str, ...] = (
    "add_dynamic_partitions.before_commit",
    "add_dynamic_partitions.after_commit",
)
COMPACTION_STEPS: tuple[str, ...] = (
    "compaction.after_bucket",
    "compaction.after_files",
    "compaction.after_commit",
    "cleaner.before_delete",
)
ZOMBIE_STEPS: tuple[str, ...] = (
    "batch.before_commit",
    "lock.after_commit",
    "open_batch.after_commit",
)
PG_COMMIT_STEPS: tuple[str, ...] = (
    "commit_txn.after_write_set",
    "commit_txn.after_completed_components",
    "commit_txn.after_key_value",
)


class InvariantViolation(AssertionError):
    """An invariant failed; the message names the seed, the fault and what broke."""


# ---------------------------------------------------------------------------------------------
# metastores, tables, writers, reads


def pg_unreachable() -> str | None:
    """Why the PostgreSQL test server cannot be used, or ``None``."""
    from tests.plugins.store_fixture import _pg_unreachable

    return _pg_unreachable()


@contextmanager
def backend_url(backend: str, directory: str) -> Iterator[str]:
    """An empty metastore URL: a SQLite file in ``directory``, or a fresh PostgreSQL
    schema (dropped afterwards) on the test server."""
    if backend == "sqlite":
        yield f"sqlite:///{directory}/metastore.db"
        return
    import uuid

    import psycopg

    from tests.plugins.store_fixture import PG_URL

    if backend == "pg-private":  # a cluster of our own, which scenarios may restart
        from tests.chaos.services import private_postgres

        pg = private_postgres()
        if isinstance(pg, str):
            raise RuntimeError(f"no private PostgreSQL cluster: {pg}")
        PG_URL = pg.url

    schema = f"acidchaos_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}schema={schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def make_table(
    store: TxnStore, name: str = "t", *, partitioned: bool = False, buckets: int | None = None
) -> TableDef:
    """The harness's table: ``id int, msg string`` (+ ``ds string`` partitions)."""
    return store.create_table(
        TableDef(
            db="default",
            name=name,
            columns=(("id", "int"), ("msg", "string")),
            partition_keys=(("ds", "string"),) if partitioned else (),
            bucket_cols=("id",) if buckets else (),
            num_buckets=buckets or -1,
            parameters={"transactional": "true"},
        )
    )


DURABILITY_ENV = "ACIDSTREAM_CHAOS_DURABILITY"
"""The writers' durability in this run (``fsync`` when unset): ``tests/chaos/run.py
--durability`` sets it for itself, its child processes inherit it, and the connection
writer (``child.run_connection``, in a child or inline) passes it to its connection."""

FLUSH_SCENARIOS = frozenset({
    "connection-batch1-kill", "connection-batchN-kill", "connection-partitioned-kill",
    "connection-footer-kill", "connection-sigstop-zombie", "connection-pg-terminate",
    "connection-clock-jump",
})  # fmt: skip
"""The scenarios run with ``--durability flush``: the connection writer's process kills
and metastore faults, which ``flush`` must survive as ``fsync`` does (a killed process
leaves its bytes to the OS). Storage faults (``faulty://`` fails syncs) and power loss are
not: ``flush`` makes no promise against a machine crash."""


def chaos_durability() -> str:
    """This run's writer durability (:data:`DURABILITY_ENV`; read when a writer starts)."""
    return os.environ.get(DURABILITY_ENV) or "fsync"


def child_env(faults: Sequence[str] = ()) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ACIDSTREAM_FAULTS", None)
    if faults:
        env["ACIDSTREAM_FAULTS"] = ",".join(faults)
    return env


def start_child(
    spec: dict[str, Any],
    *,
    faults: Sequence[str] = (),
    extra_env: dict[str, str] | None = None,
    stdin: bool = False,
    stderr: Any = subprocess.PIPE,
) -> subprocess.Popen[str]:
    """The writer of ``spec`` in a child process (stdout piped, one line per step; stdin
    piped when the parent releases a held step)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.chaos.child", json.dumps(spec)],
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env={**child_env(faults), **(extra_env or {})},
        cwd=str(ROOT),
    )


def run_child(
    spec: dict[str, Any], *, faults: Sequence[str] = (), timeout_s: float = 120.0
) -> tuple[int, str, str]:
    """Run a writer to its end: ``(exit code, stdout, stderr)`` (SIGKILL is ``-9``)."""
    p = start_child(spec, faults=faults)
    out, err = p.communicate(timeout=timeout_s)
    return p.returncode, out, err


class InlineWriter:
    """An unfaulted writer (a restart after recovery) run on a thread of this process:
    a fresh store connection and writer, as a restarted process would have, without
    paying a child's start-up again. ``poll()`` / ``wait()`` like a ``Popen``."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from tests.chaos import child

        if spec.get("hook") or spec.get("faulty"):
            raise ValueError("an inline writer runs without faults")
        run = child.run_compactor if spec["writer"] == "compactor" else child.run_connection
        self.returncode: int | None = None
        self.lines: list[str] = []
        self.error = ""

        def target() -> None:
            try:
                code = run(spec, self.lines.append)
            except BaseException:  # reported as the writer's failure, with its traceback
                import traceback

                self.error = traceback.format_exc()
                code = 1
            self.returncode = code

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()

    def poll(self) -> int | None:
        return None if self._thread.is_alive() else self.returncode

    def wait(self, timeout: float) -> int:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise subprocess.TimeoutExpired("inline writer", timeout)
        assert self.returncode is not None
        return self.returncode


def connection_spec(
    store_url: str,
    table: TableDef,
    *,
    events: int,
    rows_per_txn: int,
    txns_per_batch: int,
    memory_limit_bytes: int = 1 << 20,
    hook: dict[str, Any] | None = None,
    faulty: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "writer": "connection",
        "store_url": store_url,
        "table": table.full_name,
        "events": events,
        "rows_per_txn": rows_per_txn,
        "txns_per_batch": txns_per_batch,
        "memory_limit_bytes": memory_limit_bytes,
        "partitioned": table.is_partitioned,
        "hook": hook,
        "faulty": faulty,
    }


def snapshot_ids(store: TxnStore, table: TableDef) -> list[int]:
    """The ``id`` column of the table at the store's current snapshot, read as every reader
    of the project reads: under a txn opened before the snapshot, so a Cleaner running
    meanwhile (a restarted compactor) keeps the files the read opens."""
    (txn,) = store.open_txns(1, user="chaos", host="observer", agent_info="chaos-observer")
    try:
        txns = store.get_valid_txns(txn)
        wids = store.get_valid_write_ids(table.db, table.name, txns)
        assert table.location is not None
        from acidstream.acid.storage import Storage

        storage, root = Storage.for_path(table.location)
        if not storage.exists(root):
            return []  # nothing written yet
        t: pa.Table = read_path(table.location, write_ids=wids, txns=txns, schema=table.schema)
        return [int(x) for x in t.column("id").to_pylist()]
    finally:
        store.commit_txn(txn)


def future_store(store_url: str) -> TxnStore:
    """A store whose clock is :data:`FUTURE_S` ahead: the operator's view once the txn
    timeout has passed (a clock jump, without waiting)."""
    return open_store(store_url, clock=lambda: time.time() + FUTURE_S)


# ---------------------------------------------------------------------------------------------
# invariants


def committed_next(store: TxnStore, table: TableDef) -> int:
    """The next event the writer will write: committed atomically with each txn."""
    raw = store.get_table_param(table.db, table.name, RESUME_KEY)
    return int(json.loads(raw)["next"]) if raw else 0


def check_snapshot(ids: Sequence[int], low: int, high: int, label: str) -> int:
    """A snapshot's ids must be exactly ``0..k-1`` with ``low <= k <= high``, where ``low``
    and ``high`` are the committed positions read just before and just after it: rows of
    an open or aborted txn show as an id past the committed position, a gap or a
    duplicate. Returns ``k``."""
    got = sorted(ids)
    k = len(got)
    if got != list(range(k)):
        dup = sorted({x for x in got if got.count(x) > 1})[:5]
        raise InvariantViolation(
            f"{label}: a snapshot shows rows that are not a committed prefix "
            f"({k} rows, max {got[-1] if got else None}, duplicates {dup})"
        )
    if not low <= k <= high:
        raise InvariantViolation(
            f"{label}: a snapshot shows {k} events while {low}..{high} were committed "
            "(uncommitted or aborted rows are visible, or committed ones are missing)"
        )
    return k


@dataclass
class Observer:
    """Snapshots taken while writers run, each checked by :func:`check_snapshot`."""

    store: TxnStore
    table: TableDef
    label: str
    prefixes: list[int] = field(default_factory=list)

    def snap(self) -> None:
        low = committed_next(self.store, self.table)
        ids = snapshot_ids(self.store, self.table)
        high = committed_next(self.store, self.table)
        k = check_snapshot(ids, low, high, self.label)
        if self.prefixes and k < self.prefixes[-1]:
            raise InvariantViolation(
                f"{self.label}: a snapshot shows {k} events after one showed {self.prefixes[-1]}"
            )
        self.prefixes.append(k)

    def watch(self, proc: subprocess.Popen[str] | InlineWriter, *, max_snaps: int = 3) -> None:
        """Snapshot while ``proc`` runs (at most ``max_snaps``), then once after it ends."""
        n = 0
        while proc.poll() is None and n < max_snaps:
            self.snap()
            n += 1
        self.snap()


def check_exactly_once(ids: Sequence[int], n: int, label: str) -> None:
    got = sorted(ids)
    if got != list(range(n)):
        missing = sorted(set(range(n)) - set(got))[:5]
        dup = sorted({x for x in got if got.count(x) > 1})[:5]
        raise InvariantViolation(
            f"{label}: table has {len(got)} rows for {n} events (missing {missing}, "
            f"duplicates {dup}, extra {[x for x in got if x >= n][:5]})"
        )


def check_no_open_txns(store_url: str, label: str) -> None:
    """After the housekeeper's timeout (reaped with a future clock) no txn or lock is open."""
    with future_store(store_url) as s:
        s.reap_timed_out(timeout_s=TXN_TIMEOUT_S)
        still = [t.txn_id for t in s.show_txns() if t.state == TxnState.OPEN]
        locks = s.database.run(
            "chaos_locks", lambda tx: tx.q("SELECT COUNT(*) FROM HIVE_LOCKS"), write=False
        )[0][0]
    if still or locks:
        raise InvariantViolation(f"{label}: open txns {still} and {locks} locks after the timeout")


def check_fsck_clean(store: TxnStore, table: TableDef, label: str) -> FsckReport:
    report = fsck_table(store, table, txn_timeout_s=TXN_TIMEOUT_S)
    if not report.clean:
        bad = [f"{f.kind} {f.path}: {f.detail}" for f in report.findings if f.severity > 0]
        raise InvariantViolation(f"{label}: fsck not clean after repair: {bad}")
    return report


def repair(store_url: str, table: TableDef, label: str) -> RepairReport:
    """The operator's recovery: ``repair --apply`` once the txn timeout has passed; fsck
    must be clean afterwards (invariant 5)."""
    with future_store(store_url) as s:
        report = repair_table(s, table, apply=True, txn_timeout_s=TXN_TIMEOUT_S)
        failed = [a for a in report.actions if a.error]
        if failed:
            raise InvariantViolation(f"{label}: repair actions failed: {failed}")
        check_fsck_clean(s, table, label)
    return report


def data_files(table: TableDef) -> list[tuple[str, int]]:
    """Every bucket file of the table and the length a reader uses (the side file's last
    length when there is one)."""
    from acidstream.acid.orc_inspect import read_flush_lengths
    from acidstream.acid.storage import Storage

    assert table.location is not None
    storage, root = Storage.for_path(table.location)
    out = []
    for p in sorted(Path(root).rglob("bucket_*")):
        if p.name.endswith("_flush_length") or any(part.startswith((".", "_")) for part in p.parts):
            continue
        lengths = read_flush_lengths(storage, str(p))
        out.append((str(p), lengths[-1] if lengths else p.stat().st_size))
    return out


# ---------------------------------------------------------------------------------------------
# iterations


@dataclass(frozen=True)
class Outcome:
    """One iteration's result, for the report."""

    scenario: str
    fault: str
    seed: int
    ok: bool
    detail: str
    seconds: float
    files: tuple[tuple[str, int], ...] = ()


Result = tuple[str, TableDef | None]
"""A scenario's summary line and its table (``None`` when it did not run)."""


def _finish(
    store_url: str, table: TableDef, spec: dict[str, Any], label: str, obs: Observer
) -> None:
    """Restart the writer without fault until it is done, then check every invariant."""
    spec = {**spec, "hook": None, "faulty": None}
    p = InlineWriter(spec)
    obs.watch(p)
    code = p.wait(timeout=180)
    if code != 0:
        raise InvariantViolation(
            f"{label}: restarted writer failed ({code}): {p.lines[-3:]} {p.error[-800:]}"
        )
    with open_store(store_url) as s:
        check_exactly_once(snapshot_ids(s, table), int(spec["events"]), label)
        raw = s.get_table_param(table.db, table.name, RESUME_KEY)
        if raw is None or json.loads(raw)["next"] != spec["events"]:
            raise InvariantViolation(f"{label}: resume key says {raw}, not {spec['events']}")
    check_no_open_txns(store_url, label)
    repair(store_url, table, label)


def _events_and_batches(rng: random.Random, batch_gt_1: bool) -> tuple[int, int, int, int]:
    rows_per_txn = rng.randint(3, 40)
    txns = rng.randint(2, 5) if batch_gt_1 else 1
    events = rows_per_txn * rng.randint(3, 8) + rng.randint(0, rows_per_txn - 1)
    memory = rng.choice([200, 2000, 1 << 20])  # small limits force auto-flushes mid-txn
    return events, rows_per_txn, txns, memory


def scenario_connection_kill(
    store_url: str, warehouse: str, seed: int, *, batch_gt_1: bool, partitioned: bool = False,
    steps: tuple[str, ...] | None = None,
) -> Result:  # fmt: skip
    """SIGKILL a StreamingConnection writer at a random step and hit, recover, finish."""
    rng = random.Random(seed)
    if steps is None:
        steps = CONNECTION_STEPS + (PARTITION_STEPS if partitioned else ())
    step = rng.choice(steps)
    events, per_txn, txns, memory = _events_and_batches(rng, batch_gt_1)
    n_txns = -(-events // per_txn)
    per_batch = step.startswith(("open_batch", "abort_txn"))
    at = rng.randint(1, max(1, -(-n_txns // txns) if per_batch else n_txns))
    if step == "file.after_footer":  # a footer per file flush, fewer than txns
        at = min(at, rng.randint(1, 3))
    label = f"seed {seed} connection(batch {txns}) SIGKILL at {step}#{at}"
    with open_store(store_url, warehouse=warehouse) as store:
        table = make_table(store, partitioned=partitioned)
        spec = connection_spec(
            store_url, table, events=events, rows_per_txn=per_txn, txns_per_batch=txns,
            memory_limit_bytes=memory, hook={"step": step, "at": at, "action": "kill"},
        )  # fmt: skip
        obs = Observer(store, table, label)
        # The first hit of a step uses ACIDSTREAM_FAULTS itself; later hits the hook.
        faults = [step] if at == 1 else []
        if faults:
            spec["hook"] = None
        p = start_child(spec, faults=faults)
        obs.watch(p)
        _out, err = p.communicate(timeout=180)
        if p.returncode not in (-signal.SIGKILL, 0):
            raise InvariantViolation(f"{label}: writer exited {p.returncode}: {err[-800:]}")
        killed = p.returncode == -signal.SIGKILL
        obs.snap()
        repair(store_url, table, label)
        obs.snap()
        _finish(store_url, table, spec, label, obs)
    return f"{'killed' if killed else 'not reached'} at {step}#{at}; {events} events", table


def _wait_stopped(p: subprocess.Popen[str], label: str, *, timeout_s: float = 120.0) -> None:
    """Block until the child has stopped itself: ``waitpid`` with ``WUNTRACED`` (the
    kernel's stop notification, not a poll), on a helper thread so that it is bounded. A
    child that exits instead, or is still running after ``timeout_s`` (it is then
    killed), is reaped here, its status handed to ``p``, and the scenario fails."""
    status: list[int] = []
    waiter = threading.Thread(
        target=lambda: status.append(os.waitpid(p.pid, os.WUNTRACED)[1]), daemon=True
    )
    waiter.start()
    waiter.join(timeout_s)
    if waiter.is_alive():
        p.kill()  # waitpid returns with the kill
        waiter.join()
        p.returncode = os.waitstatus_to_exitcode(status[0])
        raise InvariantViolation(f"{label}: the writer did not stop within {timeout_s:g}s")
    if os.WIFSTOPPED(status[0]):
        return
    p.returncode = os.waitstatus_to_exitcode(status[0])
    raise InvariantViolation(f"{label}: the writer exited {p.returncode} instead of stopping")


def scenario_connection_stop(store_url: str, warehouse: str, seed: int) -> Result:
    """SIGSTOP a writer past the txn timeout (its txns are reaped and repair runs), SIGCONT:
    the zombie must not commit and must fail with a typed error."""
    rng = random.Random(seed)
    events, per_txn, txns, memory = _events_and_batches(rng, rng.random() < 0.6)
    # Steps outside a metastore DB transaction: a process frozen inside one holds the
    # SQLite write lock (or PostgreSQL row locks) and every other client waits on it.
    step = rng.choice(ZOMBIE_STEPS)
    n_txns = -(-events // per_txn)
    per_batch = step.startswith("open_batch")
    at = rng.randint(1, min(3, max(1, -(-n_txns // txns) if per_batch else n_txns)))
    label = f"seed {seed} connection(batch {txns}) SIGSTOP at {step}#{at}"
    with open_store(store_url, warehouse=warehouse) as store:
        table = make_table(store)
        spec = connection_spec(
            store_url, table, events=events, rows_per_txn=per_txn, txns_per_batch=txns,
            memory_limit_bytes=memory, hook={"step": step, "at": at, "action": "stop"},
        )  # fmt: skip
        obs = Observer(store, table, label)
        p = start_child(spec)
        assert p.stdout is not None
        paused = False
        for line in p.stdout:
            if line.startswith("paused"):
                paused = True
                break
        if not paused:  # the writer finished before the step's hit came
            p.wait(timeout=120)
            if p.returncode != 0:
                raise InvariantViolation(f"{label}: writer exited {p.returncode} unpaused")
            obs.snap()
            _finish(store_url, table, spec, label, obs)
            return f"not reached at {step}#{at}; {events} events", table
        # "paused" is printed just before the child stops itself: wait for the stop
        # (an event), or a SIGCONT sent in between is lost and the child stays stopped.
        _wait_stopped(p, label)
        # The writer is frozen: its heartbeats stop. Past the timeout the housekeeper
        # aborts its txns; the operator's repair runs while the zombie still exists.
        before = snapshot_ids(store, table)
        with future_store(store_url) as keeper:  # the housekeeper, past the timeout
            reaped = keeper.reap_timed_out(timeout_s=TXN_TIMEOUT_S)
        if not reaped:
            raise InvariantViolation(f"{label}: the paused writer had no open txn to reap")
        repair(store_url, table, label)
        obs.snap()
        os.kill(p.pid, signal.SIGCONT)
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGUSR1)  # the child dumps every thread's stack
            time.sleep(1)  # the dump is written by the child; nothing to wait on
            p.kill()
            out, err = p.communicate()
            raise InvariantViolation(
                f"{label}: the zombie hung after SIGCONT (out {out[-200:]!r}); stacks:\n"
                f"{err[-4000:]}"
            ) from None
        if "resumed" not in out:
            raise InvariantViolation(f"{label}: zombie did not resume: {out[-300:]}")
        if p.returncode != EXIT_TXN_ABORTED:
            raise InvariantViolation(
                f"{label}: the zombie exited {p.returncode}, not with TxnAbortedError "
                f"(out: {out[-400:]!r} err: {err[-600:]!r})"
            )
        after = snapshot_ids(store, table)
        if sorted(after) != sorted(before):
            raise InvariantViolation(
                f"{label}: the zombie changed the table after its txns were reaped "
                f"({len(before)} -> {len(after)} rows)"
            )
        obs.snap()
        _finish(store_url, table, spec, label, obs)
    return f"zombie refused ({out.strip().splitlines()[-1][:60]}); {events} events", table


def scenario_pg_terminate(store_url: str, warehouse: str, seed: int) -> Result:
    """PostgreSQL: the writer's backend is terminated inside commit_txn's DB transaction."""
    if not store_url.startswith("postgresql"):
        return "skipped: needs the PostgreSQL backend", None
    from tests.plugins.store_fixture import PG_URL

    rng = random.Random(seed)
    events, per_txn, txns, memory = _events_and_batches(rng, rng.random() < 0.5)
    step = rng.choice(PG_COMMIT_STEPS)
    at = rng.randint(1, 3)
    label = f"seed {seed} connection(batch {txns}) pg_terminate_backend at {step}#{at}"
    with open_store(store_url, warehouse=warehouse) as store:
        table = make_table(store)
        spec = connection_spec(
            store_url, table, events=events, rows_per_txn=per_txn, txns_per_batch=txns,
            memory_limit_bytes=memory,
            hook={"step": step, "at": at, "action": "pg_terminate", "admin_url": PG_URL},
        )  # fmt: skip
        obs = Observer(store, table, label)
        p = start_child(spec)
        obs.watch(p)
        out, err = p.communicate(timeout=180)
        if p.returncode != 0:
            raise InvariantViolation(f"{label}: writer exited {p.returncode}: {err[-800:]}")
        with open_store(store_url) as s:
            check_exactly_once(snapshot_ids(s, table), events, label)
        check_no_open_txns(store_url, label)
        repair(store_url, table, label)
    fired = "terminated" in out
    return f"{'backend terminated, commit retried' if fired else 'step not reached'}", table


def scenario_storage_fault(store_url: str, warehouse: str, seed: int) -> Result:
    """ENOSPC / EIO on the warehouse (``faulty://``) at a random write or flush."""
    import errno

    rng = random.Random(seed)
    events, per_txn, txns, memory = _events_and_batches(rng, rng.random() < 0.6)
    op = rng.choice(("write", "flush"))
    at = rng.randint(1, 12)
    err_no = rng.choice((errno.ENOSPC, errno.EIO))
    label = f"seed {seed} connection(batch {txns}) {errno.errorcode[err_no]} at {op}#{at}"
    from tests.plugins import faulty_fs

    faulty_fs.install()  # readers in this process see faulty:// too (never armed here)
    with open_store(store_url, warehouse=warehouse) as store:
        table = store.create_table(
            TableDef(
                db="default", name="t", columns=(("id", "int"), ("msg", "string")),
                parameters={"transactional": "true"}, location=f"faulty://{warehouse}/t",
            )
        )  # fmt: skip
        spec = connection_spec(
            store_url, table, events=events, rows_per_txn=per_txn, txns_per_batch=txns,
            memory_limit_bytes=memory, faulty={"op": op, "at": at, "err": err_no},
        )  # fmt: skip
        obs = Observer(store, table, label)
        p = start_child(spec)
        obs.watch(p)
        _out, err = p.communicate(timeout=180)
        if p.returncode not in (0, EXIT_STORAGE):
            raise InvariantViolation(f"{label}: writer exited {p.returncode}: {err[-800:]}")
        obs.snap()
        repair(store_url, table, label)
        _finish(store_url, table, spec, label, obs)
    summary = "typed StorageError" if p.returncode == EXIT_STORAGE else "fault not reached"
    return summary, table


def scenario_compactor_kill(store_url: str, warehouse: str, seed: int) -> Result:
    """SIGKILL the compactor at a compaction step; restart it; data must be unchanged."""
    rng = random.Random(seed)
    step = rng.choice(COMPACTION_STEPS)
    major = rng.random() < 0.6
    events, per_txn, txns, memory = _events_and_batches(rng, rng.random() < 0.5)
    label = f"seed {seed} compactor({'major' if major else 'minor'}) SIGKILL at {step}"
    with open_store(store_url, warehouse=warehouse) as store:
        table = make_table(store, buckets=rng.choice((None, 2)))
        spec = connection_spec(
            store_url, table, events=events, rows_per_txn=per_txn, txns_per_batch=txns,
            memory_limit_bytes=memory,
        )  # fmt: skip
        w = InlineWriter(spec)
        if w.wait(timeout=180) != 0:
            raise InvariantViolation(f"{label}: writer failed: {w.lines[-3:]} {w.error[-800:]}")
        obs = Observer(store, table, label)
        obs.snap()
        comp = {"writer": "compactor", "store_url": store_url, "table": table.full_name,
                "major": major, "hook": None}  # fmt: skip
        p = start_child(comp, faults=[step])
        obs.watch(p)
        _o, err = p.communicate(timeout=180)
        if p.returncode not in (-signal.SIGKILL, 0):
            raise InvariantViolation(f"{label}: compactor exited {p.returncode}: {err[-800:]}")
        killed = p.returncode == -signal.SIGKILL
        repair(store_url, table, label)
        obs.snap()
        w = InlineWriter({**comp, "enqueue": False})
        obs.watch(w)
        if w.wait(timeout=180) != 0:
            raise InvariantViolation(f"{label}: restarted compactor failed: {w.error[-800:]}")
        obs.snap()
        check_exactly_once(snapshot_ids(store, table), events, label)
        check_no_open_txns(store_url, label)
        repair(store_url, table, label)
    return f"{'killed' if killed else 'not reached'} at {step}; {events} events", table


KAFKA_DRIVER_STEPS: tuple[str, ...] = (
    "sink.after_open",
    "sink.during_heartbeat",
    "sink.after_files",
    "sink.after_commit",
    "commit_txns.after_completed_components",
    "commit_txns.before_state",
    "commit_txns.before_commit",
    "commit_txns.after_commit",
    "open_batch.after_commit",
)
KAFKA_COLUMNS = "id bigint, user_name string, amount decimal(10,2), event_time timestamp"

KAFKA: dict[str, Any] = {}
"""``{"broker": EmbeddedBroker}`` once the runner started one (Kafka scenarios need it)."""


def scenario_kafka_driver_kill(store_url: str, warehouse: str, seed: int) -> Result:
    """SIGKILL the Kafka job's driver at a random step of a random micro-batch (a
    transaction batch of several txns per micro-batch, tasks writing streaming files),
    recover, restart it: every event of the topic once."""
    import uuid

    from acidstream.jobs.sample_events import sample_event

    broker = KAFKA.get("broker")
    if broker is None:
        return "skipped: no broker (the runner starts one with --kafka-iterations)", None
    rng = random.Random(seed)
    step = rng.choice(KAFKA_DRIVER_STEPS)
    events = rng.randint(200, 700)
    per_trigger = rng.choice((100, 150, 250))
    txns = rng.randint(1, 3)
    at = rng.randint(1, max(1, events // per_trigger))
    label = f"seed {seed} kafka driver(batch {txns}) SIGKILL at {step}#{at}"
    topic = f"chaos_{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 3)
    producer = broker.producer()
    rnd = random.Random(seed)
    for i in range(events):
        producer.send(topic, value=sample_event(i, rnd))
    producer.flush()
    producer.close()
    flat = {
        "kafka.topic": topic, "table.name": "default.events", "table.columns": KAFKA_COLUMNS,
        "table.partitioned_by": "ds string", "warehouse": warehouse, "metastore": store_url,
        "checkpoint": f"{warehouse}/_ckpt", "sink.sink_id": "chaos", "spark.master": "local[2]",
        "kafka.max_offsets_per_trigger": per_trigger, "sink.txns_per_batch": txns,
        "compaction": "off",
    }  # fmt: skip
    spec = {"writer": "kafka", "flat": flat, "bootstrap": broker.bootstrap,
            "hook": {"step": step, "at": at, "action": "kill"}}  # fmt: skip
    p = start_child(spec)
    _out, err = p.communicate(timeout=600)
    if p.returncode not in (-signal.SIGKILL, 0):
        raise InvariantViolation(f"{label}: driver exited {p.returncode}: {err[-1500:]}")
    killed = p.returncode == -signal.SIGKILL
    with open_store(store_url) as store:
        table = store.get_table("default", "events")
        seen = snapshot_ids(store, table)
        if len(set(seen)) != len(seen) or not set(seen) <= set(range(events)):
            raise InvariantViolation(f"{label}: after the kill the table shows duplicates or "
                                     "rows the topic does not hold")  # fmt: skip
        repair(store_url, table, label)
        p = start_child({**spec, "hook": None})
        _out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise InvariantViolation(f"{label}: restarted driver failed: {err[-1500:]}")
        check_exactly_once(snapshot_ids(store, table), events, label)
    check_no_open_txns(store_url, label)
    repair(store_url, table, label)
    return f"{'killed' if killed else 'not reached'} at {step}#{at}; {events} events", table


HTTP_STEPS: tuple[str, ...] = (
    "open_batch.after_commit",
    "lock.after_commit",
    "batch.before_commit",
    "commit_txn.after_write_set",
    "commit_txn.after_key_value",
    "commit_txn.before_commit",
    "commit_txn.after_commit",
    "commit_txns.before_state",
    "commit_txns.after_commit",
    "batch.after_commit",
)


def scenario_http_kill(store_url: str, warehouse: str, seed: int) -> Result:
    """SIGKILL the HTTP ingest server at a random step; the client retries every request
    with its idempotency key (restarting the server when it died) until acknowledged.
    Every acknowledged record exactly once; nothing unsent ever visible."""
    import httpx

    from tests.http.conftest import ServerProcess, base_config, jsonl, write_config

    rng = random.Random(seed)
    step = rng.choice(HTTP_STEPS)
    requests, lines = rng.randint(5, 12), rng.randint(5, 40)
    label = f"seed {seed} http server SIGKILL at {step}"
    home = Path(warehouse).parent
    servers: list[ServerProcess] = []

    def start(faults: str) -> ServerProcess:
        cfg = base_config(
            store_url, warehouse, {"default.h": {}},
            # A short timeout: a restarted server's housekeeper aborts the dead one's txns
            # (and frees its idempotency keys) within seconds; the client retries meanwhile.
            txn_timeout_s=2, housekeeping_interval_s=0.5,
        )  # fmt: skip
        path = write_config(home / f"http_{len(servers)}.yaml", cfg)
        srv = ServerProcess(path, home / f"http_{len(servers)}.log", {"ACIDSTREAM_FAULTS": faults})
        servers.append(srv)
        srv.start()
        return srv

    with open_store(store_url, warehouse=warehouse) as store:
        table = make_table(store, "h")
        restarts = 0
        try:
            server = start(step)
            for r in range(requests):
                ids = list(range(r * lines, (r + 1) * lines))
                for _attempt in range(200):
                    try:
                        resp = httpx.post(
                            f"{server.url}/v1/tables/default.h", content=jsonl(ids), timeout=60,
                            headers={"Content-Type": "application/x-ndjson",
                                     "Idempotency-Key": f"r{r}"},
                        )  # fmt: skip
                    except httpx.TransportError:
                        assert server.proc is not None
                        code = server.proc.wait(30)  # the connection broke: the server died
                        if code != -signal.SIGKILL:
                            raise InvariantViolation(f"{label}: server exited {code}") from None
                        server = start("")
                        restarts += 1
                        continue
                    if resp.status_code == 200:
                        break
                    if resp.status_code in (409, 429, 503):  # retry later, as the server says
                        time.sleep(min(float(resp.headers.get("retry-after", "1")), 0.3))
                        continue
                    raise InvariantViolation(
                        f"{label}: request r{r}: {resp.status_code} {resp.text}"
                    )
                else:
                    raise InvariantViolation(f"{label}: request r{r} never acknowledged")
                seen = snapshot_ids(store, table)
                if len(set(seen)) != len(seen) or set(seen) != set(range((r + 1) * lines)):
                    raise InvariantViolation(
                        f"{label}: after request r{r} was acknowledged the table shows "
                        f"{len(seen)} rows ({len(set(seen))} distinct) for {(r + 1) * lines} sent"
                    )
        finally:
            for srv in servers:
                srv.kill()
        check_exactly_once(snapshot_ids(store, table), requests * lines, label)
    check_no_open_txns(store_url, label)
    repair(store_url, table, label)
    return f"{restarts} restart(s) at {step}; {requests * lines} records", table


SCENARIOS: dict[str, Callable[[str, str, int], Result]] = {
    "connection-batch1-kill": lambda u, w, s: scenario_connection_kill(u, w, s, batch_gt_1=False),
    "connection-batchN-kill": lambda u, w, s: scenario_connection_kill(u, w, s, batch_gt_1=True),
    "connection-partitioned-kill": lambda u, w, s: scenario_connection_kill(
        u, w, s, batch_gt_1=True, partitioned=True
    ),
    "connection-footer-kill": lambda u, w, s: scenario_connection_kill(
        u, w, s, batch_gt_1=s % 2 == 1, steps=("file.after_footer",)
    ),
    "connection-sigstop-zombie": scenario_connection_stop,
    "connection-pg-terminate": scenario_pg_terminate,
    "connection-storage-fault": scenario_storage_fault,
    "compactor-kill": scenario_compactor_kill,
    "kafka-driver-kill": scenario_kafka_driver_kill,
    "http-server-kill": scenario_http_kill,
}
"""Scenario name -> ``(store_url, warehouse, seed) -> summary``; raises on a violation."""

FAULTS = {
    "connection-batch1-kill": "SIGKILL at a random named step",
    "connection-batchN-kill": "SIGKILL at a random named step",
    "connection-partitioned-kill": "SIGKILL at a random named step (dynamic partitions)",
    "connection-footer-kill": "SIGKILL between a flush's footer and its side-file length",
    "connection-sigstop-zombie": "SIGSTOP past the txn timeout, reap + repair, SIGCONT",
    "connection-pg-terminate": "PostgreSQL backend terminated mid-commit",
    "connection-storage-fault": "ENOSPC / EIO on the warehouse (faulty://)",
    "compactor-kill": "SIGKILL at a compaction / cleaner step",
    "kafka-driver-kill": "SIGKILL of the Kafka job's driver at a random sink/commit step",
    "http-server-kill": "SIGKILL of the HTTP ingest server at a random commit step",
}


def run_iteration(scenario: str, seed: int, store_url: str, warehouse: str) -> Outcome:
    """Run one iteration; a violated invariant is a failed outcome, not an exception."""
    start = time.monotonic()
    files: tuple[tuple[str, int], ...] = ()
    try:
        detail, table = SCENARIOS[scenario](store_url, warehouse, seed)
        ok = True
        if table is not None:
            files = tuple(data_files(table))
    except InvariantViolation as e:
        detail, ok = str(e), False
    except subprocess.TimeoutExpired as e:  # a hung process is a failed iteration, not a crash
        detail, ok = f"seed {seed} {scenario}: a process hung: {e}", False
    return Outcome(scenario, FAULTS[scenario], seed, ok, detail, time.monotonic() - start, files)


# The infrastructure and admin-command scenarios use this module's helpers and add
# themselves to SCENARIOS and FAULTS: imported once everything above exists.
import tests.chaos.scenarios_admin  # noqa: E402
import tests.chaos.scenarios_infra  # noqa: E402
import tests.chaos.scenarios_mutation  # noqa: E402
import tests.chaos.scenarios_upsert  # noqa: E402, F401
