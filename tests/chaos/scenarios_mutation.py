"""Chaos scenario for row-level mutations (issue 30 item 7): DELETE, UPDATE and MERGE killed
at every step, with streaming inserts between them (``docs/chaos.md``).

One iteration: a partitioned (``ds``), bucketed (on ``id``) table and a seeded list of
statements: streaming inserts (one txn per chunk, several txns per batch), DELETE by
predicate, UPDATE by key and by predicate (some moving rows to another partition, ``d3``
included, which only a move creates), MERGE with WHEN MATCHED DELETE / UPDATE (some moving
rows) and WHEN NOT MATCHED INSERT clauses in a seeded order, each MERGE with an idempotency
key. A writer child (:mod:`tests.chaos.child_mutation`) runs them and is SIGKILLed at a
step inside a statement (``mutation.*``, the batch's and the store's commit steps, counted
only inside a statement) or at a random moment; it is restarted until every statement ran.

After every child's end, the statement in flight is decided from the metastore, never
assumed: its txn's state (``txn_state``, asked before the housekeeper runs) says whether it
committed (all of it) or not (nothing of it); a killed insert's chunks committed as a
prefix. A statement that did not commit runs again in the next child; a killed MERGE runs
again with the same idempotency key whatever its state, and must then be a replay
(``replayed=True``, no txn) when the first run committed. Then:

1. fsck reports no data loss (before any repair);
2. the housekeeper (past the txn timeout) and ``repair --apply`` run; fsck is clean;
3. the table read by name equals the model: the statements that committed, applied in
   order to a Python model of the table (rows ``(id, msg, v, ds)``), no row twice, no row
   of an attempt whose txn did not commit (each attempt writes its own ``msg`` tag);
4. sometimes ``acidstream compact --partition ds=.. --type major|minor --wait`` runs
   through the CLI, and the table still equals the model.

While a child runs, reads by name must show one of the states between statements (or an
insert's chunks): nothing of a statement is ever visible partly.
"""

from __future__ import annotations

import itertools
import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnState, open_store
from tests.chaos import harness
from tests.chaos.child_mutation import tag
from tests.chaos.harness import (
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

TABLE = "m"
MUTATION_AGENT = "acidstream-mutation"
"""``agent_info`` of a statement's txn (``acidstream.mutation.run.AGENT``)."""

MUTATION_STEPS: tuple[str, ...] = (
    "mutation.after_open",
    "mutation.after_find",
    "mutation.after_delete_delta",
    "mutation.after_delta",
    "mutation.before_commit",
    "mutation.after_commit",
)
STATEMENT_COMMIT_STEPS: tuple[str, ...] = (
    "open_batch.after_commit",
    "lock.after_commit",
    "batch.before_commit",
    "add_dynamic_partitions.before_commit",
    "add_dynamic_partitions.after_commit",
    "commit_txn.after_write_set",
    "commit_txn.after_completed_components",
    "commit_txn.after_key_value",
    "commit_txn.before_commit",
    "commit_txn.after_commit",
    "batch.after_commit",
)
"""Steps a statement passes through outside ``acidstream/mutation`` (its one-txn batch)."""

PARTITIONS = ("d0", "d1", "d2", "d3")
CHILD_TIMEOUT_S = 180.0
MAX_RUNS = 12

Model = dict[int, tuple[str, int, str]]
"""id -> (msg, v, ds): the table as the committed statements left it."""


# ---------------------------------------------------------------------------------------------
# statements and the model


def where_sql(pred: dict[str, Any]) -> str:
    """A predicate (``vmod``, ``ids``, ``range``) as Hive SQL text."""
    if pred["t"] == "vmod":
        ds = f" AND ds = '{pred['ds']}'" if pred["ds"] else ""
        return f"v % {pred['m']} = {pred['r']}{ds}"
    if pred["t"] == "ids":
        return f"id IN ({', '.join(str(i) for i in pred['ids'])})"
    return f"id BETWEEN {pred['lo']} AND {pred['hi']}"


def holds(pred: dict[str, Any], row_id: int, row: tuple[str, int, str]) -> bool:
    """The same predicate in Python (``v`` is never negative: ``%`` agrees with Hive's)."""
    _msg, v, ds = row
    if pred["t"] == "vmod":
        return v % pred["m"] == pred["r"] and (not pred["ds"] or ds == pred["ds"])
    if pred["t"] == "ids":
        return row_id in pred["ids"]
    return bool(pred["lo"] <= row_id <= pred["hi"])


def apply_statement(model: Model, op: dict[str, Any], msg: str) -> None:
    """Statement ``op`` (not an insert) applied to ``model``, its rows tagged ``msg``."""
    kind = op["kind"]
    if kind in ("delete", "update"):
        hit = [i for i, row in model.items() if holds(op["pred"], i, row)]
        for i in hit:
            _m, v, ds = model.pop(i)
            if kind == "update":
                model[i] = (msg, v + op.get("v_add", 0), op.get("move_to") or ds)
        return
    matched = [c for c in op["clauses"] if c != "insert"]
    for s in op["source"]:  # source keys are unique: the order of rows does not matter
        i = s["id"]
        if i not in model:
            if "insert" in op["clauses"]:
                model[i] = (msg, s["v"], s["ds"])
            continue
        for c in matched:  # the first WHEN MATCHED clause whose condition holds
            if c == "delete" and s["op"] == "d":
                del model[i]
                break
            if c == "update":
                _m, v, ds = model[i]
                model[i] = (msg, v + s["dv"], s["ds"] if op["move"] else ds)
                break


def apply_chunk(model: Model, op: dict[str, Any], chunk: int, msg: str) -> None:
    """Chunk ``chunk`` of a streaming insert (``child_mutation.insert_record``'s rows)."""
    lo, hi = op["chunks"][chunk]
    for i in range(lo, hi):
        model[i] = (msg, i % 17, f"d{i % 3}")


def _pred(rng: random.Random, ids: list[int], *, by_key: bool = False) -> dict[str, Any]:
    r = rng.random()
    if by_key or (ids and r < 0.25):
        n = 1 if by_key else rng.randint(1, 4)
        chosen = rng.sample(ids, min(n, len(ids))) if ids else []
        if not chosen or rng.random() < 0.1:
            chosen.append(999_999)  # a key no row has: the statement still commits
        return {"t": "ids", "ids": sorted(chosen)}
    if ids and r < 0.45:
        lo = rng.choice(ids)
        return {"t": "range", "lo": lo, "hi": lo + rng.randint(0, 15)}
    m = rng.randint(4, 9)
    return {"t": "vmod", "m": m, "r": rng.randrange(m), "ds": rng.choice((None, *PARTITIONS))}


def plan_statements(rng: random.Random) -> list[dict[str, Any]]:
    """The iteration's statements; keys are drawn from the table as the statements before
    left it (each statement eventually runs once, in order)."""
    model: Model = {}
    next_id, next_merge_id = 0, 100_000
    ops: list[dict[str, Any]] = []
    kinds = ("insert", "delete", "update-key", "update-pred", "merge")
    for i in range(rng.randint(8, 14)):
        kind = "insert" if i == 0 else rng.choices(kinds, weights=(3, 2, 2, 2, 3))[0]
        ids = sorted(model)
        op: dict[str, Any]
        if kind == "insert":
            count, k = rng.randint(12, 60), rng.randint(1, 4)
            cuts = sorted(rng.sample(range(1, count), k - 1)) if k > 1 else []
            bounds = [0, *cuts, count]
            op = {"kind": "insert", "txns_per_batch": rng.randint(1, 3),
                  "memory_limit_bytes": rng.choice((200, 2000, 1 << 20)),
                  "chunks": [[next_id + a, next_id + b] for a, b in itertools.pairwise(bounds)]}  # fmt: skip
            next_id += count
        elif kind == "delete":
            pred = _pred(rng, ids)
            op = {"kind": "delete", "pred": pred, "where": where_sql(pred)}
        elif kind.startswith("update"):
            pred = _pred(rng, ids, by_key=kind == "update-key")
            op = {"kind": "update", "by": kind[7:], "pred": pred, "where": where_sql(pred)}
            if kind == "update-pred" and rng.random() < 0.5:  # a partition move
                op["move_to"] = rng.choice([d for d in PARTITIONS if d != pred.get("ds")])
                op["set"] = {"ds": f"'{op['move_to']}'"}
            else:
                op["v_add"] = rng.randint(1, 9)
                op["set"] = {"v": f"v + {op['v_add']}"}
        else:
            matched = rng.sample(ids, min(len(ids), rng.randint(0, 8)))
            source = [{"id": k, "v": rng.randint(0, 40), "dv": rng.randint(1, 9),
                       "ds": rng.choice(PARTITIONS), "op": rng.choice("ud")} for k in matched]  # fmt: skip
            for _ in range(rng.randint(0 if matched else 1, 8)):
                source.append({"id": next_merge_id, "v": rng.randint(0, 40), "dv": 0,
                               "ds": rng.choice(PARTITIONS[:3]), "op": "i"})  # fmt: skip
                next_merge_id += 1
            clauses = [c for c, p in (("delete", 0.7), ("update", 0.85), ("insert", 0.85))
                       if rng.random() < p] or ["update"]  # fmt: skip
            rng.shuffle(clauses)
            op = {"kind": "merge", "source": source, "clauses": clauses,
                  "on": rng.choice((["id"], "src.id = tgt.id")), "move": rng.random() < 0.3,
                  "key": f"chaos-merge-{i}"}  # fmt: skip
        if op["kind"] == "insert":
            for j in range(len(op["chunks"])):
                apply_chunk(model, op, j, "plan")
        else:
            apply_statement(model, op, "plan")
        ops.append(op)
    return ops


# ---------------------------------------------------------------------------------------------
# one iteration's state


@dataclass
class Progress:
    """Where the statements are: the next one to run (and chunk of an insert), the model of
    what committed, the tags of attempts that did not, the MERGEs already applied."""

    store_url: str
    warehouse: str
    label: str
    ops: list[dict[str, Any]]
    op: int = 0
    chunk: int = 0
    model: Model = field(default_factory=dict)
    aborted_tags: set[str] = field(default_factory=set)
    merged: set[int] = field(default_factory=set)
    log: list[str] = field(default_factory=list)
    kills: int = 0
    replays: int = 0
    compactions: int = 0

    def fail(self, what: str) -> InvariantViolation:
        return InvariantViolation(f"{self.label}: {what} (after: {'; '.join(self.log[-6:])})")

    def table(self) -> TableDef:
        with open_store(self.store_url) as s:
            return s.get_table("default", TABLE)

    def states_ahead(self, run: int) -> Iterator[Model]:
        """The table's possible states while run ``run`` goes on: now, then after each of
        its statements (each chunk of an insert), as a reader may see them."""
        model = dict(self.model)
        yield dict(model)
        for i in range(self.op, len(self.ops)):
            op = self.ops[i]
            if op["kind"] == "insert":
                for j in range(self.chunk if i == self.op else 0, len(op["chunks"])):
                    apply_chunk(model, op, j, tag(i, run, j))
                    yield dict(model)
            elif i not in self.merged:
                apply_statement(model, op, tag(i, run))
                yield dict(model)


def _rows(model: Model) -> Counter[tuple[Any, ...]]:
    return Counter((i, msg, v, ds) for i, (msg, v, ds) in model.items())


def read_rows_by_name(p: Progress, when: str) -> Counter[tuple[Any, ...]]:
    """The table read by name (the catalog's location, the metastore's snapshot)."""
    from acidstream import read_table
    from acidstream.acid.errors import AcidStreamError

    try:
        t = read_table(f"default.{TABLE}", metastore=p.store_url, warehouse=p.warehouse)
    except (AcidStreamError, OSError) as e:
        raise p.fail(f"{when}: read by name failed: {type(e).__name__}: {e}") from e
    cols = [t.column(c).to_pylist() for c in ("id", "msg", "v", "ds")]
    return Counter(zip(*cols, strict=True))


def check_table(p: Progress, when: str) -> int:
    """Invariant 3: the read equals the model; no row twice, none of a failed attempt."""
    got = read_rows_by_name(p, when)
    ids = Counter(r[0] for r in got.elements())
    twice = sorted(i for i, n in ids.items() if n > 1)
    if twice:
        raise p.fail(f"{when}: rows shown twice: ids {twice[:5]}")
    stale = sorted(r for r in got if r[1] in p.aborted_tags)
    if stale:
        raise p.fail(f"{when}: rows of attempts whose txn did not commit: {stale[:4]}")
    want = _rows(p.model)
    if got != want:
        missing, extra = sorted((want - got).elements()), sorted((got - want).elements())
        raise p.fail(
            f"{when}: read by name shows {sum(got.values())} rows, the model "
            f"{sum(want.values())} (missing {len(missing)} {missing[:4]}, extra "
            f"{len(extra)} {extra[:4]})"
        )
    return len(want)


def check_no_data_loss(p: Progress, when: str) -> None:
    """Invariant 1: fsck finds no lost data (leftovers of a dead writer are repair's)."""
    from acidstream.recovery.fsck import fsck_table

    with open_store(p.store_url) as s:
        report = fsck_table(s, s.get_table("default", TABLE), txn_timeout_s=TXN_TIMEOUT_S)
    bad = [f"{f.kind} {f.path}: {f.detail}" for f in report.findings if f.kind in DATA_LOSS_KINDS]
    if bad:
        raise p.fail(f"{when}: fsck reports data loss: {bad[:4]}")


# ---------------------------------------------------------------------------------------------
# deciding what a child's run committed


@dataclass
class OpSeen:
    """What the child printed about one statement."""

    txns: list[tuple[str, int]] = field(default_factory=list)
    chunks_said: set[int] = field(default_factory=set)
    done: dict[str, Any] | None = None


def parse_child(out: str) -> tuple[dict[int, OpSeen], str]:
    """The child's lines per statement, and the ``kill`` line's step (``""``: none)."""
    seen: dict[int, OpSeen] = {}
    current: OpSeen | None = None
    killed = ""
    for line in out.splitlines():
        w = line.split(" ", 3)
        if w[0] == "op" and w[2] == "start":
            current = seen.setdefault(int(w[1]), OpSeen())
        elif w[0] == "txns" and current is not None:
            current.txns += [(w[1], int(t)) for t in w[2].split(",")]
        elif w[0] == "op" and w[2] == "chunk":
            seen[int(w[1])].chunks_said.add(int(w[3].split()[0]))
        elif w[0] == "op" and w[2] == "done":
            seen[int(w[1])].done = json.loads(w[3])
        elif w[0] == "kill":
            killed = w[1]
    return seen, killed


def settle(p: Progress, run: int, seen: dict[int, OpSeen]) -> list[int]:
    """Decide from the metastore what run ``run`` committed: the model, the aborted tags and
    where the next run starts. Returns the txns that did not commit (the housekeeper must
    abort those still open)."""
    failed: list[int] = []
    with open_store(p.store_url) as s:
        for i in sorted(seen):
            op, info = p.ops[i], seen[i]
            if op["kind"] == "insert":
                failed += _settle_insert(p, run, i, info, s.txn_state)
            else:
                failed += _settle_statement(p, run, i, info, s.txn_state)
    return failed


def _settle_insert(
    p: Progress, run: int, i: int, info: OpSeen, state: Callable[[int], TxnState | None]
) -> list[int]:
    op = p.ops[i]
    first = p.chunk if i == p.op else 0
    txns = [t for agent, t in info.txns if agent != MUTATION_AGENT]
    chunks = range(first, len(op["chunks"]))
    states = [state(t) for t in txns]
    committed = [j for j, st in zip(chunks, states, strict=False) if st == TxnState.COMMITTED]
    if committed != list(chunks[: len(committed)]) or not info.chunks_said <= set(committed):
        raise p.fail(
            f"insert {i}: chunks {list(chunks)} on txns {txns} have states {states} "
            f"(said committed: {sorted(info.chunks_said)})"
        )
    if any(st == TxnState.COMMITTED for st in states[len(chunks) :]):
        raise p.fail(f"insert {i}: a txn no chunk used committed ({txns}, {states})")
    for j in committed:
        apply_chunk(p.model, op, j, tag(i, run, j))
    for j in chunks[len(committed) :]:
        p.aborted_tags.add(tag(i, run, j))
    if len(committed) == len(chunks):
        p.op, p.chunk = i + 1, 0
    else:
        p.op, p.chunk = i, first + len(committed)
    return [t for t, st in zip(txns, states, strict=True) if st != TxnState.COMMITTED]


def _settle_statement(
    p: Progress, run: int, i: int, info: OpSeen, state: Callable[[int], TxnState | None]
) -> list[int]:
    op = p.ops[i]
    txns = [t for agent, t in info.txns if agent == MUTATION_AGENT]
    if len(txns) > 1:
        raise p.fail(f"{op['kind']} {i} opened {len(txns)} txns, not one: {txns}")
    st = state(txns[0]) if txns else None
    if i in p.merged:  # run again with its idempotency key: a replay, never a second apply
        if txns:
            raise p.fail(f"merge {i} ran again with its key after it committed: txn {txns}")
        if info.done is not None:
            if not info.done["replayed"]:
                raise p.fail(f"merge {i} ran again with its key: not a replay ({info.done})")
            p.replays += 1
            p.op, p.chunk = i + 1, 0
        return []
    if info.done is not None and st != TxnState.COMMITTED:
        raise p.fail(f"{op['kind']} {i} returned {info.done} but its txn {txns} is {st}")
    if info.done is not None and info.done["replayed"]:
        raise p.fail(f"{op['kind']} {i} ran for the first time yet says it is a replay")
    if st != TxnState.COMMITTED:  # all or nothing: nothing; it runs again
        p.aborted_tags.add(tag(i, run))
        p.op, p.chunk = i, 0
        return txns
    apply_statement(p.model, op, tag(i, run))
    if op["kind"] == "merge":
        p.merged.add(i)
    # A killed MERGE runs again with its key (it must replay); the others go on.
    again = op["kind"] == "merge" and info.done is None
    p.op, p.chunk = (i, 0) if again else (i + 1, 0)
    return []


# ---------------------------------------------------------------------------------------------
# the scenario


MERGE_COMMITTED_STEPS: tuple[str, ...] = (
    "mutation.after_commit",
    "commit_txn.after_commit",
    "batch.after_commit",
)
"""Steps after a statement's commit: a MERGE killed there must replay when run again."""


def _kill_plan(rng: random.Random) -> tuple[dict[str, Any] | None, float | None, str]:
    """``(hook, kill_after_s, what)``: a step inside a statement (a fifth of the time just
    after a MERGE's commit, the replay case), or a random moment."""
    r = rng.random()
    if r < 0.2:
        step = rng.choice(MERGE_COMMITTED_STEPS)
        return {"step": step, "at": 1, "scope": "merge"}, None, f"{step}#1 (a MERGE)"
    if r < 0.55:
        step = rng.choice(MUTATION_STEPS)
    elif r < 0.85:
        step = rng.choice(STATEMENT_COMMIT_STEPS)
    else:
        after = rng.uniform(0.8, 3.5)  # a child runs its statements in 2-6 s
        return None, after, f"moment {after:.1f}s"
    at = rng.randint(1, 2)
    return {"step": step, "at": at, "scope": "mutation"}, None, f"{step}#{at}"


def _run_child(p: Progress, run: int, spec: dict[str, Any], kill_after: float | None) -> str:
    """One child run, reads checked while it goes on; returns its stdout."""
    states = [_rows(m) for m in p.states_ahead(run)]
    child = start_child(spec)
    deadline = None if kill_after is None else time.monotonic() + kill_after
    for _ in range(3):  # reads meanwhile: always a state between statements
        if child.poll() is not None or (deadline is not None and time.monotonic() > deadline):
            break
        got = read_rows_by_name(p, f"while run {run} went on")
        if got not in states:
            raise p.fail(f"while run {run} went on, a read showed {sum(got.values())} rows: "
                         "not a state between statements (a statement partly visible)")  # fmt: skip
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
        raise p.fail(f"run {run} exited {child.returncode}: {err[-1200:]}")
    return out


def _compact(p: Progress, rng: random.Random) -> str:
    """``acidstream compact --partition ds=.. --type major|minor --wait`` via the CLI."""
    kind = rng.choice(("major", "minor"))
    ds = rng.choice(sorted({ds for _m, _v, ds in p.model.values()}))
    args = ["compact", f"default.{TABLE}", "--partition", f"ds={ds}", "--type", kind, "--wait"]
    argv = [sys.executable, "-m", "acidstream", *args, "--metastore", p.store_url,
            "--warehouse", p.warehouse]  # fmt: skip
    r = subprocess.run(argv, capture_output=True, text=True, env=child_env(), cwd=str(ROOT),
                       timeout=CHILD_TIMEOUT_S)  # fmt: skip
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    # A one-line refusal is an answer (e.g. Hive's "none of the compaction thresholds met"
    # for a partition a major compaction left with nothing to do); the table is checked.
    refused = r.returncode == 1 and len(lines) == 1
    if (r.returncode != 0 and not refused) or "Traceback" in r.stderr:
        raise p.fail(f"`acidstream {' '.join(args)}` exited {r.returncode}: {r.stderr[-800:]}")
    p.compactions += not refused
    return f"compact {kind} ds={ds}" + (f" refused ({lines[0][-60:]})" if refused else "")


def scenario_mutation(store_url: str, warehouse: str, seed: int) -> Result:
    """DELETE / UPDATE / MERGE and streaming inserts, the writer killed at a step inside a
    statement or at a random moment, again and again; the table checked against the model
    of committed statements after each kill (module docstring)."""
    rng = random.Random(seed)
    buckets = rng.choice((2, 4))
    ops = plan_statements(rng)
    kinds = Counter(op["kind"] for op in ops)
    label = (f"seed {seed} mutation({len(ops)} statements "
             f"{', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}; {buckets} buckets)")  # fmt: skip
    p = Progress(store_url, warehouse, label, ops)
    with open_store(store_url, warehouse=warehouse) as store:
        store.create_table(
            TableDef(
                db="default", name=TABLE, columns=(("id", "int"), ("msg", "string"), ("v", "int")),
                partition_keys=(("ds", "string"),), bucket_cols=("id",), num_buckets=buckets,
                parameters={"transactional": "true"},
            )
        )  # fmt: skip
    killed_runs = rng.randint(2, 4)
    run = 0
    while p.op < len(ops):
        run += 1
        if run > MAX_RUNS:
            raise p.fail(f"statement {p.op} of {len(ops)} still not done after {MAX_RUNS} runs")
        hook, kill_after, what = _kill_plan(rng) if run <= killed_runs else (None, None, "")
        spec = {"writer": "mutation", "store_url": store_url, "warehouse": warehouse,
                "table": f"default.{TABLE}", "ops": ops, "start": p.op, "start_chunk": p.chunk,
                "run": run, "hook": hook}  # fmt: skip
        start = p.op
        out = _run_child(p, run, spec, kill_after)
        seen, step = parse_child(out)
        finished = "done" in out.splitlines()
        if not finished:
            p.kills += 1
        failed = settle(p, run, seen)
        where = f"killed at {step or what} in statement {max(seen, default=start)}"
        ended = f"finished{f' ({what}: not reached)' if what else ''}" if finished else where
        p.log.append(f"run {run} from {start}: {ended}")
        check_no_data_loss(p, f"after run {run}")
        with future_store(store_url) as keeper:  # the housekeeper, past the txn timeout
            keeper.reap_timed_out(timeout_s=TXN_TIMEOUT_S)
            still = [t for t in failed if keeper.txn_state(t) != TxnState.ABORTED]
        if still:
            raise p.fail(f"txns of run {run} neither committed nor aborted: {still}")
        repair(store_url, p.table(), p.label)
        check_table(p, f"after run {run}")
        if rng.random() < 0.35 and p.model:  # a partition with rows to compact
            p.log.append(_compact(p, rng))
            check_table(p, f"after {p.log[-1]}")
            check_no_data_loss(p, f"after {p.log[-1]}")
    check_no_open_txns(store_url, label)
    repair(store_url, p.table(), label)
    n = check_table(p, "at the end")
    summary = (f"{'; '.join(p.log)}; {p.kills} kills, {p.replays} MERGE replays, "
               f"{p.compactions} compactions, {n} rows")  # fmt: skip
    return summary, p.table()


SCENARIOS = {"mutation-kill": scenario_mutation}
FAULTS = {
    "mutation-kill": "DELETE/UPDATE/MERGE and streaming inserts, the writer SIGKILLed at a "
    "mutation/commit step or a random moment, again and again; table = model of committed "
    "statements, MERGE replays",
}

harness.SCENARIOS.update(SCENARIOS)
harness.FAULTS.update(FAULTS)
