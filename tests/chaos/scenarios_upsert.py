"""Chaos scenarios for change data capture (issue 31 item 5): change logs applied by key,
the writer SIGKILLed at every step of a batch, restarted, replaying (``docs/chaos.md``).

``upsert-kill``: a keyed table (``acidstream.key=id``; partitioned by ``ds`` or not,
bucketed on ``id`` or not) and a seeded Debezium-like change log in batches: inserts and
updates (``[id, "u", v, lsn, ds]``; an update may move its row to another partition),
deletes (``[id, "d", ...]``) of present and absent keys, events duplicated (the same
event again, in its batch or the next) and reordered (a batch shuffled against ``lsn``
order, an event held back to the next batch). A writer child
(:mod:`tests.chaos.child_upsert`) applies the batches, one txn each, through
``apply_changes`` (ordering ``lsn``, with or without ``ordering_guard``; a ``commit_param``
records the batch number, as the upsert sink records its batch id) or through a
``StreamingConnection`` in upsert mode (arrival order; the batch number committed with
``commit_transaction(key=...)``). Its first 2-4 runs are each SIGKILLed once at a step of a
batch (``mutation.*``, the batch's ``open_batch`` / ``lock`` /
``add_dynamic_partitions`` / ``commit_txn.*`` / ``batch.*`` steps) at a seeded hit, or at
a random moment; each restart resumes from the batch number the table recorded, or
earlier (a re-delivery: the child must skip the batches the table records, never apply
one twice). After each run:

1. the batch number the table records never goes back; every batch the child said it
   committed is below it; no batch was committed twice; a finished child committed all;
2. fsck reports no data loss; the housekeeper (past the txn timeout) and
   ``repair --apply`` run, fsck is clean;
3. the table read by name equals the model: the fold of the batches up to the recorded
   one (per batch, per key the last event by ``(lsn, position)`` — arrival order for the
   connection —; an upsert replaces or inserts the key's row, a delete removes it; with
   the guard an event older than the key's row is skipped), no key twice, nothing of an
   uncommitted batch; the counts each committed batch printed (inserted, updated,
   deleted, absent deletes, late) equal the model's;
4. sometimes (and at least once) ``acidstream compact ... --type major|minor --wait`` runs
   through the CLI, and 2-3 hold again.

Reads while a child runs must show the fold up to some batch at or after the one recorded
when the child started: never a batch in part.

``kafka-upsert-kill``: the Kafka job in upsert mode (``sink.format: debezium``,
``sink.ordering: source.lsn``, ``sink.ordering_guard: true``) over a topic of Debezium
envelopes (keyed by ``{"id": k}``, 1-3 partitions, a key always in one partition), with
tombstones after deletes, deletes of absent keys, records sent twice in a row (a producer
retry) and two updates of one key published in the reverse of their ``lsn`` order. The
driver is SIGKILLed at a step of a micro-batch (the ``UpsertSink``'s ``CRASH_POINTS``, the
engine's ``mutation.*`` and the commit's steps), the table checked against the fold of
the records below the offsets the table recorded, repaired, the job restarted (the Spark
checkpoint replays a batch the table already holds: skipped), and the table checked
against the fold of the whole topic. The log is drawn so that the fold does not depend on
where micro-batches cut it (no upsert is published after a newer delete of its key): per
key the newest ``lsn`` wins, a delete removes.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store
from tests.chaos import harness
from tests.chaos.child_upsert import RESUME_KEY
from tests.chaos.harness import (
    KAFKA,
    ROOT,
    TXN_TIMEOUT_S,
    InvariantViolation,
    Result,
    check_no_open_txns,
    child_env,
    future_store,
    repair,
    start_child,
)
from tests.chaos.scenarios_admin import DATA_LOSS_KINDS

TABLE = "u"
CHILD_TIMEOUT_S = 180.0
MAX_RUNS = 14
PARTITIONS = ("d0", "d1", "d2")
ABSENT_BASE = 10_000
"""Ids of deletes of keys the log never inserts start here."""

MUTATION_STEPS: tuple[str, ...] = (
    "mutation.after_open",
    "mutation.after_find",
    "mutation.after_delete_delta",
    "mutation.after_delta",
    "mutation.before_commit",
    "mutation.after_commit",
)
"""Steps of ``acidstream.mutation`` an ``apply_changes`` batch passes (the connection's
upsert commit passes the middle three: it runs the engine's plan in its own txn)."""
CONNECTION_MUTATION_STEPS = MUTATION_STEPS[1:4]
COMMIT_STEPS: tuple[str, ...] = (
    "open_batch.after_commit",
    "lock.after_commit",
    "batch.before_commit",
    "commit_txn.after_write_set",
    "commit_txn.after_completed_components",
    "commit_txn.after_key_value",
    "commit_txn.before_commit",
    "commit_txn.after_commit",
    "batch.after_commit",
)
PARTITION_STEPS: tuple[str, ...] = (
    "add_dynamic_partitions.before_commit",
    "add_dynamic_partitions.after_commit",
)

Event = list[Any]
"""``[id, op, v, lsn, ds]``; ``op`` ``"u"`` (upsert) or ``"d"`` (delete)."""
Row = tuple[int, int, str | None]
"""A key's row in the model: ``(v, lsn, ds)``."""
Model = dict[int, Row]


# ---------------------------------------------------------------------------------------------
# the change log and its fold


def plan_log(rng: random.Random, *, partitioned: bool) -> list[list[Event]]:
    """A seeded change log in batches (module docstring): lsn grows with each new event;
    duplicates keep their lsn; batches are shuffled or locally swapped against lsn order;
    some events are held back to the next batch (late)."""
    keys = rng.randint(6, 40)
    lsn = 0
    batches: list[list[Event]] = []
    carry: list[Event] = []
    n_batches = rng.randint(4, 9)
    for b in range(n_batches):
        batch, carry = carry, []
        for _ in range(rng.randint(2, 30)):
            lsn += rng.randint(1, 3)
            r = rng.random()
            if r < 0.07:
                e: Event = [ABSENT_BASE + rng.randrange(50), "d", 0, lsn, None]
            else:
                op = rng.choices(("u", "d"), weights=(4, 1))[0]
                ds = rng.choice(PARTITIONS) if partitioned else None
                e = [rng.randrange(keys), op, rng.randrange(1000), lsn, ds]
            late = b + 1 < n_batches and rng.random() < 0.08
            (carry if late else batch).append(e)
            if rng.random() < 0.12:  # the same event again (at-least-once delivery)
                dup_late = b + 1 < n_batches and rng.random() < 0.3
                (carry if dup_late else batch).append(list(e))
        if rng.random() < 0.4:
            rng.shuffle(batch)
        else:
            for i in range(len(batch) - 1):
                if rng.random() < 0.2:
                    batch[i], batch[i + 1] = batch[i + 1], batch[i]
        batches.append(batch)
    if carry:
        batches[-1].extend(carry)
    return batches


@dataclass
class Counts:
    """What a batch did (as ``ChangeResult`` counts it)."""

    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    absent_deletes: int = 0
    skipped_late: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def fold_batch(model: Model, batch: list[Event], *, by_lsn: bool, guard: bool) -> Counts:
    """Batch ``batch`` applied to ``model`` (in place) with the engine's rules: per key the
    last event (by ``(lsn, position)`` with ``by_lsn``, else by position); a delete removes
    the key's row (absent: counted); an upsert replaces it (split-update) or inserts it;
    with ``guard`` an event whose lsn is below the row's is skipped (counted late)."""
    last: dict[int, tuple[tuple[int, int], Event]] = {}
    for pos, e in enumerate(batch):
        order = (e[3] if by_lsn else 0, pos)
        if e[0] not in last or order >= last[e[0]][0]:
            last[e[0]] = (order, e)
    c = Counts()
    for k, (_o, e) in last.items():
        row = model.get(k)
        if row is not None and guard and e[3] < row[1]:
            c.skipped_late += 1
        elif e[1] == "d":
            if row is None:
                c.absent_deletes += 1
            else:
                del model[k]
                c.deleted += 1
        elif row is None:
            model[k] = (e[2], e[3], e[4])
            c.inserted += 1
        else:
            model[k] = (e[2], e[3], e[4])
            c.updated += 1
    return c


def _rows(model: Model) -> Counter[tuple[Any, ...]]:
    return Counter((k, v, lsn, ds) for k, (v, lsn, ds) in model.items())


# ---------------------------------------------------------------------------------------------
# one iteration's state and checks


@dataclass
class Progress:
    """Where an iteration is: the table's batches committed, the models after each prefix
    of batches, what the runs did."""

    store_url: str
    warehouse: str
    label: str
    batches: list[list[Event]]
    path: str
    guard: bool
    partitioned: bool
    states: list[Counter[tuple[Any, ...]]] = field(default_factory=list)
    counts: list[Counts] = field(default_factory=list)
    committed: int = 0
    log: list[str] = field(default_factory=list)
    kills: int = 0
    skips: int = 0
    compactions: int = 0

    def __post_init__(self) -> None:
        model: Model = {}
        self.states = [_rows(model)]
        for batch in self.batches:
            by_lsn = self.path == "engine"
            self.counts.append(fold_batch(model, batch, by_lsn=by_lsn, guard=self.guard))
            self.states.append(_rows(model))

    def fail(self, what: str) -> InvariantViolation:
        return InvariantViolation(f"{self.label}: {what} (after: {'; '.join(self.log[-6:])})")

    def table(self) -> TableDef:
        with open_store(self.store_url) as s:
            return s.get_table("default", TABLE)

    def recorded(self) -> int:
        """The batch number the table records (batches ``0..n-1`` committed)."""
        with open_store(self.store_url) as s:
            raw = s.get_table_param("default", TABLE, RESUME_KEY)
        return int(json.loads(raw)["next"]) if raw else 0


def read_rows(p: Progress, when: str) -> Counter[tuple[Any, ...]]:
    """The table read by name; a key twice fails here."""
    from acidstream import read_table
    from acidstream.acid.errors import AcidStreamError

    try:
        t = read_table(f"default.{TABLE}", metastore=p.store_url, warehouse=p.warehouse)
    except (AcidStreamError, OSError) as e:
        raise p.fail(f"{when}: read by name failed: {type(e).__name__}: {e}") from e
    cols = [t.column(c).to_pylist() for c in ("id", "v", "lsn")]
    ds = t.column("ds").to_pylist() if p.partitioned else [None] * t.num_rows
    got = Counter(zip(*cols, ds, strict=True))
    twice = sorted(k for k, n in Counter(r[0] for r in got.elements()).items() if n > 1)
    if twice:
        raise p.fail(f"{when}: keys twice in the table: {twice[:5]}")
    return got


def check_table(p: Progress, when: str) -> int:
    """Invariant 3: the table equals the fold of the committed batches."""
    got = read_rows(p, when)
    want = p.states[p.committed]
    if got != want:
        missing, extra = sorted((want - got).elements()), sorted((got - want).elements())
        near = [k for k, s in enumerate(p.states) if s == got]
        raise p.fail(
            f"{when}: the table ({sum(got.values())} rows) is not the fold of the "
            f"{p.committed} committed batches ({sum(want.values())} rows): missing "
            f"{len(missing)} {missing[:4]}, extra {len(extra)} {extra[:4]}; it equals the "
            f"fold of batches {near or 'none'}"
        )
    return sum(want.values())


def check_no_data_loss(p: Progress, when: str) -> None:
    """Invariant 2 (first half): fsck finds no lost data before any repair."""
    from acidstream.recovery.fsck import fsck_table

    with open_store(p.store_url) as s:
        report = fsck_table(s, s.get_table("default", TABLE), txn_timeout_s=TXN_TIMEOUT_S)
    bad = [f"{f.kind} {f.path}: {f.detail}" for f in report.findings if f.kind in DATA_LOSS_KINDS]
    if bad:
        raise p.fail(f"{when}: fsck reports data loss: {bad[:4]}")


def settle(p: Progress, run: int, start: int, out: str, finished: bool) -> None:
    """Invariant 1: what the child said against the batch number the table records."""
    before, now = p.committed, p.recorded()
    if now < before:
        raise p.fail(f"run {run}: the table records {now} batches, {before} before the run")
    said: list[int] = []
    for line in out.splitlines():
        w = line.split(" ", 3)
        if w[0] != "batch":
            continue
        b = int(w[1])
        if w[2] == "skipped":
            if b >= before:
                raise p.fail(f"run {run}: batch {b} skipped though only {before} were committed")
            p.skips += 1
            continue
        said.append(b)
        if not before <= b < now:
            raise p.fail(f"run {run}: batch {b} said committed; the table records {before}->{now}")
        got, want = json.loads(w[3]), p.counts[b].as_dict()
        if {k: got.get(k) for k in want} != want:
            raise p.fail(f"run {run}: batch {b} counted {got}, the model {want}")
    # Each batch is said after its commit: a kill between the two leaves one unsaid.
    if said != list(range(before, before + len(said))) or len(said) not in (
        now - before,
        now - before - 1,
    ):
        raise p.fail(f"run {run} from {start}: said committed {said}; table {before}->{now}")
    if finished and (now != len(p.batches) or len(said) != now - before):
        raise p.fail(
            f"run {run} finished, said {said}; the table records {now} of {len(p.batches)}"
        )
    p.committed = now


def _kill_plan(rng: random.Random, p: Progress) -> tuple[dict[str, Any] | None, float | None, str]:
    """``(hook, kill_after_s, what)``: a step of a batch at a seeded hit, or a moment."""
    r = rng.random()
    if r > 0.85:
        after = rng.uniform(0.6, 3.0)  # a child starts in ~1 s and applies a batch in ~0.1 s
        return None, after, f"moment {after:.1f}s"
    steps = (MUTATION_STEPS if p.path == "engine" else CONNECTION_MUTATION_STEPS) + COMMIT_STEPS
    if p.partitioned:
        steps += PARTITION_STEPS
    step = rng.choice(steps)
    at = rng.randint(1, max(1, min(4, len(p.batches) - p.committed)))
    return {"step": step, "at": at}, None, f"{step}#{at}"


def _start(spec: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.chaos.child_upsert", json.dumps(spec)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=child_env(), cwd=str(ROOT),
    )  # fmt: skip


def _run_child(p: Progress, run: int, spec: dict[str, Any], kill_after: float | None) -> str:
    """One child run, reads checked while it goes on; returns its stdout."""
    ahead = p.states[p.committed :]
    child = _start(spec)
    deadline = None if kill_after is None else time.monotonic() + kill_after
    for _ in range(3):  # reads meanwhile: the fold up to some batch, never a batch in part
        if child.poll() is not None or (deadline is not None and time.monotonic() > deadline):
            break
        got = read_rows(p, f"while run {run} went on")
        if got not in ahead:
            raise p.fail(f"while run {run} went on, a read showed {sum(got.values())} rows: "
                         "not the fold of a prefix of batches (a batch partly visible)")  # fmt: skip
    if deadline is not None:
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGKILL)
    try:
        out, err = child.communicate(timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        raise p.fail(f"run {run} hung: {out[-300:]!r} {err[-300:]!r}") from None
    if child.returncode not in (0, -signal.SIGKILL) or "Traceback" in err:
        raise p.fail(f"run {run} exited {child.returncode}: {err[-1500:]}")
    return out


def _compact(p: Progress, rng: random.Random) -> str:
    """``acidstream compact [--partition ds=..] --type major|minor --wait`` via the CLI."""
    kind = rng.choice(("major", "minor"))
    args = ["compact", f"default.{TABLE}", "--type", kind, "--wait"]
    where = "table"
    if p.partitioned:
        parts = sorted({r[3] for r in p.states[p.committed]})
        if not parts:
            return f"compact {kind}: no partition with rows"
        where = f"ds={rng.choice(parts)}"
        args[2:2] = ["--partition", where]
    argv = [sys.executable, "-m", "acidstream", *args, "--metastore", p.store_url,
            "--warehouse", p.warehouse]  # fmt: skip
    r = subprocess.run(argv, capture_output=True, text=True, env=child_env(), cwd=str(ROOT),
                       timeout=CHILD_TIMEOUT_S)  # fmt: skip
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    # A one-line refusal (e.g. "none of the compaction thresholds met") is an answer.
    refused = r.returncode == 1 and len(lines) == 1
    if (r.returncode != 0 and not refused) or "Traceback" in r.stderr:
        raise p.fail(f"`acidstream {' '.join(args)}` exited {r.returncode}: {r.stderr[-800:]}")
    p.compactions += not refused
    return f"compact {kind} {where}" + (f" refused ({lines[0][-60:]})" if refused else "")


def scenario_upsert(store_url: str, warehouse: str, seed: int) -> Result:
    """A change log applied by key, the writer killed at a step of a batch or a moment,
    again and again, restarted from the recorded batch (or earlier); the table checked
    against the fold of the committed batches after each run (module docstring)."""
    rng = random.Random(seed)
    path = rng.choice(("engine", "connection"))
    guard = path == "engine" and rng.random() < 0.5
    partitioned = rng.random() < 0.5
    buckets = rng.choice((None, 2, 4))
    batches = plan_log(rng, partitioned=partitioned)
    n_events = sum(map(len, batches))
    label = (f"seed {seed} upsert({path}{' guard' if guard else ''}, {len(batches)} batches, "
             f"{n_events} events, {'partitioned, ' if partitioned else ''}"
             f"{buckets or 'no'} buckets)")  # fmt: skip
    p = Progress(store_url, warehouse, label, batches, path, guard, partitioned)
    with open_store(store_url, warehouse=warehouse) as store:
        store.create_table(
            TableDef(
                db="default", name=TABLE, columns=(("id", "int"), ("v", "int"), ("lsn", "bigint")),
                partition_keys=(("ds", "string"),) if partitioned else (),
                bucket_cols=("id",) if buckets else (), num_buckets=buckets or -1,
                parameters={"transactional": "true", "acidstream.key": "id"},
            )
        )  # fmt: skip
    killed_runs = rng.randint(2, 4)
    run = 0
    while True:
        run += 1
        if run > MAX_RUNS:
            raise p.fail(f"batch {p.committed} of {len(batches)} not done after {MAX_RUNS} runs")
        hook, kill_after, what = _kill_plan(rng, p) if run <= killed_runs else (None, None, "")
        start = p.committed
        if p.committed and rng.random() < 0.35:  # a re-delivery of committed batches
            start = max(0, p.committed - rng.randint(1, 2))
        spec = {"store_url": store_url, "warehouse": warehouse, "table": f"default.{TABLE}",
                "batches": batches, "path": path, "guard": guard, "partitioned": partitioned,
                "start": start, "hook": hook}  # fmt: skip
        out = _run_child(p, run, spec, kill_after)
        finished = "done" in out.splitlines()
        p.kills += not finished
        before = p.committed
        settle(p, run, start, out, finished)
        killed = next((ln[5:] for ln in out.splitlines() if ln.startswith("kill ")), what)
        ended = f"finished{f' ({what}: not reached)' if what else ''}" if finished else (
            f"killed at {killed} in batch {p.committed}")  # fmt: skip
        p.log.append(f"run {run} from {start} ({before} committed): {ended}")
        check_no_data_loss(p, f"after run {run}")
        with future_store(store_url) as keeper:  # the housekeeper, past the txn timeout
            keeper.reap_timed_out(timeout_s=TXN_TIMEOUT_S)
        repair(store_url, p.table(), p.label)
        check_table(p, f"after run {run}")
        if rng.random() < 0.35 and p.committed:
            p.log.append(_compact(p, rng))
            check_table(p, f"after {p.log[-1]}")
            check_no_data_loss(p, f"after {p.log[-1]}")
        if finished:
            break
    if not p.compactions:  # every iteration compacts at least once
        p.log.append(_compact(p, rng))
        check_table(p, f"after {p.log[-1]}")
        check_no_data_loss(p, f"after {p.log[-1]}")
    check_no_open_txns(store_url, label)
    repair(store_url, p.table(), label)
    n = check_table(p, "at the end")
    t: Counter[str] = Counter()
    for c in p.counts:
        t.update(c.as_dict())
    summary = (f"{label.split(' ', 2)[2]}: {'; '.join(p.log)}; {p.kills} kills, {p.skips} batch replays skipped, "
               f"{p.compactions} compactions; {t['inserted']} inserted, {t['updated']} updated, "
               f"{t['deleted']} deleted, {t['absent_deletes']} absent deletes, "
               f"{t['skipped_late']} late; {n} rows")  # fmt: skip
    return summary, p.table()


# ---------------------------------------------------------------------------------------------
# the Kafka job in upsert mode


KAFKA_UPSERT_STEPS: tuple[str, ...] = (
    "upsert.after_parse",
    "upsert.before_commit",
    "upsert.after_commit",
    "mutation.after_find",
    "mutation.before_commit",
    "commit_txn.after_key_value",
    "commit_txn.after_commit",
)
"""Driver steps of an upsert micro-batch: the sink's ``CRASH_POINTS`` (checked against
``acidstream.sinks.upsert_sink.CRASH_POINTS`` in the test), the engine's, the commit's."""
KAFKA_UPSERT_COLUMNS = "id bigint, v bigint, lsn bigint"


@dataclass(frozen=True)
class KafkaRecord:
    """One record of the topic: the key's id, its op (``c``/``u``/``d``, ``t`` a
    tombstone), value, lsn, and where it lands."""

    id: int
    op: str
    v: int
    lsn: int
    partition: int
    offset: int


def kafka_log(rng: random.Random, partitions: int) -> list[KafkaRecord]:
    """The topic's records in publish order (module docstring): a connector's log, then
    two same-key upserts swapped where adjacent, then records sent twice in a row."""
    keys = rng.randint(10, 60)
    alive: set[int] = set()
    lsn = 0
    base: list[tuple[int, str, int, int]] = []
    for _ in range(rng.randint(120, 400)):
        lsn += 1
        if rng.random() < 0.04:
            base.append((1_000_000 + rng.randrange(100), "d", 0, lsn))  # a key never inserted
            continue
        k = rng.randrange(keys)
        op = ("d" if rng.random() < 0.2 else "u") if k in alive else "c"
        base.append((k, op, rng.randrange(10_000), lsn))
        if op == "d":
            alive.discard(k)
            if rng.random() < 0.6:
                base.append((k, "t", 0, lsn))  # the tombstone after a delete
        else:
            alive.add(k)
    i = 0
    while i < len(base) - 1:  # out of order: same-key upserts only (never across a delete)
        a, b = base[i], base[i + 1]
        if a[0] == b[0] and a[1] in "cu" and b[1] in "cu" and rng.random() < 0.7:
            base[i], base[i + 1] = b, a
            i += 2
            continue
        i += 1
    published: list[tuple[int, str, int, int]] = []
    for r in base:
        published.append(r)
        if rng.random() < 0.08:
            published.append(r)  # a producer retry: the same record again
    offsets = [0] * partitions
    out = []
    for k, op, v, n in published:
        part = k % partitions
        out.append(KafkaRecord(k, op, v, n, part, offsets[part]))
        offsets[part] += 1
    return out


def kafka_fold(records: list[KafkaRecord]) -> dict[int, tuple[int, int]]:
    """Per key the newest lsn wins (a tombstone never does: it has none); a delete
    removes. ``id -> (v, lsn)``."""
    newest: dict[int, KafkaRecord] = {}
    for r in records:
        if r.op == "t":
            continue
        if r.id not in newest or r.lsn >= newest[r.id].lsn:
            newest[r.id] = r
    return {k: (r.v, r.lsn) for k, r in newest.items() if r.op != "d"}


def _envelope(r: KafkaRecord) -> bytes | None:
    if r.op == "t":
        return None
    row = {"id": r.id, "v": r.v}
    payload = {
        "before": {"id": r.id} if r.op in ("u", "d") else None,
        "after": None if r.op == "d" else row,
        "op": r.op,
        "source": {"lsn": r.lsn, "ts_ms": 1_700_000_000_000 + r.lsn},
        "ts_ms": 1_700_000_000_000 + r.lsn + 5,
    }
    return json.dumps(payload).encode()


def _kafka_table(
    store_url: str, warehouse: str
) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
    """The table ``id -> (v, lsn)`` (a key twice raises) and the offsets it recorded."""
    from acidstream import read_table
    from acidstream.sinks.foreach_batch import SinkOptions

    with open_store(store_url) as s:
        raw = s.get_table_param("default", "cdc", SinkOptions(sink_id="chaos").meta_key)
    t = read_table("default.cdc", metastore=store_url, warehouse=warehouse)
    ids = t.column("id").to_pylist()
    if len(ids) != len(set(ids)):
        dup = sorted(k for k, n in Counter(ids).items() if n > 1)
        raise InvariantViolation(f"keys twice in the table: {dup[:5]}")
    rows = zip(ids, t.column("v").to_pylist(), t.column("lsn").to_pylist(), strict=True)
    offsets = {}
    if raw:
        for _topic, parts in json.loads(raw)["offsets"].items():
            offsets = {int(k): int(v) for k, v in parts.items()}
    return {k: (v, n) for k, v, n in rows}, offsets


def _check_kafka(
    store_url: str, warehouse: str, records: list[KafkaRecord], label: str, when: str
) -> dict[int, int]:
    """The table equals the fold of the records below the offsets it recorded."""
    got, offsets = _kafka_table(store_url, warehouse)
    below = [r for r in records if r.offset < offsets.get(r.partition, 0)]
    want = kafka_fold(below)
    if got != want:
        missing = sorted(set(want.items()) - set(got.items()))[:4]
        extra = sorted(set(got.items()) - set(want.items()))[:4]
        raise InvariantViolation(
            f"{label}: {when}: the table ({len(got)} keys) is not the fold of the {len(below)} "
            f"records below its offsets {offsets} ({len(want)} keys): missing {missing}, "
            f"extra {extra}"
        )
    return offsets


def scenario_kafka_upsert_kill(store_url: str, warehouse: str, seed: int) -> Result:
    """SIGKILL the Kafka job's driver in upsert mode at a step of a micro-batch, recover,
    restart: the table equals the fold of the topic (module docstring)."""
    import uuid

    broker = KAFKA.get("broker")
    if broker is None:
        return "skipped: no broker (the runner starts one with --kafka-iterations)", None
    rng = random.Random(seed)
    partitions = rng.randint(1, 3)
    records = kafka_log(rng, partitions)
    per_trigger = rng.choice((40, 80, 150))
    step = rng.choice(KAFKA_UPSERT_STEPS)
    at = rng.randint(1, max(1, len(records) // per_trigger))
    label = (f"seed {seed} kafka upsert({len(records)} records, {partitions} partitions, "
             f"{per_trigger} per trigger) SIGKILL at {step}#{at}")  # fmt: skip
    topic = f"chaos_cdc_{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions)
    producer = broker.producer()
    sent = [
        producer.send(topic, key=json.dumps({"id": r.id}).encode(), value=_envelope(r),
                      partition=r.partition)
        for r in records
    ]  # fmt: skip
    producer.flush()
    landed = [(m.partition, m.offset) for m in (f.get(timeout=30) for f in sent)]
    producer.close()
    if landed != [(r.partition, r.offset) for r in records]:  # the model's positions
        raise InvariantViolation(f"{label}: records landed elsewhere than planned")
    flat = {
        "kafka.topic": topic, "table.name": "default.cdc", "table.columns": KAFKA_UPSERT_COLUMNS,
        "warehouse": warehouse, "metastore": store_url, "checkpoint": f"{warehouse}/_ckpt",
        "sink.sink_id": "chaos", "spark.master": "local[2]",
        "kafka.max_offsets_per_trigger": per_trigger, "compaction": "off",
        "sink.mode": "upsert", "sink.format": "debezium", "sink.key": ["id"],
        "sink.ordering": "source.lsn", "sink.ordering_guard": True,
    }  # fmt: skip
    spec = {"writer": "kafka", "flat": flat, "bootstrap": broker.bootstrap,
            "hook": {"step": step, "at": at, "action": "kill"}}  # fmt: skip
    p = start_child(spec)
    out, err = p.communicate(timeout=600)
    if p.returncode not in (-signal.SIGKILL, 0):
        raise InvariantViolation(f"{label}: driver exited {p.returncode}: {err[-1500:]}")
    killed = p.returncode == -signal.SIGKILL
    after_kill = _check_kafka(store_url, warehouse, records, label, "after the kill")
    with open_store(store_url) as store:
        table = store.get_table("default", "cdc")
    repair(store_url, table, label)
    p = start_child({**spec, "hook": None})
    out, err = p.communicate(timeout=600)
    if p.returncode != 0:
        raise InvariantViolation(f"{label}: restarted driver failed: {err[-1500:]}")
    ends = [0] * partitions
    for r in records:
        ends[r.partition] = r.offset + 1
    final = _check_kafka(store_url, warehouse, records, label, "at the end")
    if final != {i: n for i, n in enumerate(ends) if n}:
        raise InvariantViolation(f"{label}: the table recorded offsets {final}, the topic {ends}")
    check_no_open_txns(store_url, label)
    repair(store_url, table, label)
    result = next((ln for ln in out.splitlines() if ln.startswith("RESULT")), "RESULT ?")
    return (f"{'killed' if killed else 'not reached'} at {step}#{at} (offsets {after_kill}); "
            f"restart {result[7:]}; {len(records)} records, "
            f"{len(kafka_fold(records))} keys"), table  # fmt: skip


SCENARIOS = {"upsert-kill": scenario_upsert, "kafka-upsert-kill": scenario_kafka_upsert_kill}
FAULTS = {
    "upsert-kill": "a change log (duplicates, reordering, deletes of absent keys) applied by "
    "key through apply_changes or an upsert connection, the writer SIGKILLed at a "
    "mutation/commit step or a random moment, restarted from (or before) the recorded batch; "
    "table = fold of the committed batches",
    "kafka-upsert-kill": "SIGKILL of the Kafka job's driver in upsert mode (Debezium, "
    "duplicates, reordered updates, tombstones) at an UpsertSink/engine/commit step; table = "
    "fold of the topic below the recorded offsets",
}

harness.SCENARIOS.update(SCENARIOS)
harness.FAULTS.update(FAULTS)
