"""Chaos scenarios for the operator's admin commands: compaction (with and without
``--partition``), the compactor's pass, the cleaner, ``repair --apply``, ``set-location`` and
``fsck``, each run through the real ``acidstream`` command in a child process, some of them
SIGKILLed at a named fault step or at a random moment (``docs/chaos.md``).

One iteration: a table (partitioned or not) gets committed streaming data and a killed
writer's leftovers (open txns of a dead writer, or aborted ones once the housekeeper reaped
them; in ``admin-torn-side-file`` also the issue-28 case of a dead writer's side file cut to
0 bytes while its file holds committed txns), then a seeded random sequence of admin
commands runs, with more streaming ingest (sometimes killed: new leftovers) between them. After EVERY command:

1. the command ended as a command may: 0, a refusal (exit 1, at most one line on stderr),
   fsck's 6 or 7 (its findings judged below), or the SIGKILL the schedule sent; never a
   traceback, never 70;
2. the table read *by name* (``acidstream.read_table``, the catalog's current location and
   snapshot) holds exactly the committed rows (``id`` and, partitioned, ``ds``), each once;
   no row of an aborted or open txn;
3. ``fsck`` reports no data loss: no catalog partition without its directory, no unknown
   file (a base at a partitioned table's root), no unreadable file.

Snapshots are also taken while each command runs (under a read txn, as readers take them).
At the end the writer finishes its events and the harness's own invariants run (repair
``--apply`` past the txn timeout, fsck clean, every event once, no txn or lock left open).

A command may legitimately refuse (``set-location`` of a table holding data, a compaction of
a partitioned table without ``--partition``): that is fine, as long as no committed row is
lost or duplicated.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store
from tests.chaos import harness
from tests.chaos.child import EXIT_OTHER_TYPED, EXIT_STORAGE, EXIT_TXN_ABORTED
from tests.chaos.harness import (
    COMPACTION_STEPS,
    CONNECTION_STEPS,
    PARTITION_STEPS,
    ROOT,
    TXN_TIMEOUT_S,
    InvariantViolation,
    Result,
    check_no_open_txns,
    child_env,
    committed_next,
    connection_spec,
    future_store,
    make_table,
    repair,
    start_child,
)

TABLE = "a"
"""The scenarios' table name (``default.a``)."""

PARTITION_VALUES = ("d0", "d1", "d2")
"""The ``ds`` values the harness's writer produces (``tests.chaos.child.event``)."""

DATA_LOSS_KINDS = frozenset({"partition_missing_on_disk", "unknown_file", "unreadable_file"})
"""fsck findings that mean committed data is gone or no longer where readers look:
a catalog partition without its directory, a file or directory at a place no reader
looks (a base at a partitioned table's root), a data file that does not decode.
``bad_side_file`` is not among them: it is fsck's "kept, the operator decides" for a dead
writer's file repair will not cut (e.g. a footer past the side file's last length, in a
directory of aborted write ids); a committed row it hid would fail the read check."""

TORN_KINDS = frozenset({"unreadable_file"})
"""What fsck may say while the deliberately torn side file is torn (its file does not
decode at an unreadable length): the operator's decision, not data loss."""

OPS_PLAIN = ("ingest", "compact-major", "compact-minor", "compactor", "cleaner", "repair",
             "set-location", "fsck")  # fmt: skip
OPS_PARTITIONED = (*OPS_PLAIN, "compact-partition-major", "compact-partition-minor")
# Compactions are drawn more often: they are where a table can be destroyed.
WEIGHTS = {"compact-major": 3, "compact-minor": 2, "compact-partition-major": 3,
           "compact-partition-minor": 2, "compactor": 2, "cleaner": 2, "repair": 2,
           "ingest": 2, "set-location": 1, "fsck": 1}  # fmt: skip

CLI_TIMEOUT_S = 180.0


@dataclass
class TornSideFile:
    """A dead writer's side file the scenario cut to 0 bytes (issue 28, item 2), and its
    original bytes, which the "operator" puts back at the end if it is still there."""

    path: Path
    original: bytes


@dataclass
class AdminRun:
    """One iteration's state: where the table is, what was done, what is torn."""

    store_url: str
    warehouse: str
    partitioned: bool
    label: str
    events: int
    torn: TornSideFile | None = None
    kill_every: bool = False
    steps: list[str] = field(default_factory=list)
    moves: int = 0
    commands: int = 0

    def table(self) -> TableDef:
        """The table as the catalog has it now (``set-location`` may have re-pointed it)."""
        with open_store(self.store_url) as s:
            return s.get_table("default", TABLE)

    def fail(self, what: str) -> InvariantViolation:
        done = "; ".join(self.steps[-8:])
        return InvariantViolation(f"{self.label}: {what} (after: {done})")


# ---------------------------------------------------------------------------------------------
# the model and the checks


def expected_rows(run: AdminRun) -> Counter[tuple[Any, ...]]:
    """The committed rows: events ``0..next-1`` (the writer's resume key is committed
    atomically with each txn), with their ``ds`` when partitioned."""
    with open_store(run.store_url) as s:
        n = committed_next(s, run.table())
    if run.partitioned:
        return Counter((i, PARTITION_VALUES[i % 3]) for i in range(n))
    return Counter((i,) for i in range(n))


def read_by_name(run: AdminRun, when: str) -> Counter[tuple[Any, ...]] | None:
    """The table read by name with the metastore's snapshot, as a user reads it; ``None``
    when the read refuses typed because of the deliberately torn side file."""
    from acidstream import read_table
    from acidstream.acid.errors import AcidStreamError

    try:
        t = read_table(f"default.{TABLE}", metastore=run.store_url, warehouse=run.warehouse)
    except AcidStreamError as e:
        if run.torn is not None and run.torn.path.exists() and "side file" in str(e):
            return None  # a reader refuses a file whose side file is unreadable (Hive too)
        raise run.fail(f"{when}: read by name failed: {type(e).__name__}: {e}") from e
    except OSError as e:
        raise run.fail(f"{when}: read by name failed: {type(e).__name__}: {e}") from e
    ids = [int(x) for x in t.column("id").to_pylist()]
    if not run.partitioned:
        return Counter((i,) for i in ids)
    if "ds" not in t.column_names:
        raise run.fail(f"{when}: read by name lost the partition column ds ({len(ids)} rows)")
    return Counter(zip(ids, t.column("ds").to_pylist(), strict=True))


def check_rows(run: AdminRun, when: str) -> None:
    """Invariant 2: the read equals the committed rows, exactly once, nothing else."""
    got = read_by_name(run, when)
    if got is None:
        return
    want = expected_rows(run)
    if got == want:
        return
    missing = sorted((want - got).elements())
    extra = sorted((got - want).elements())
    raise run.fail(
        f"{when}: read by name shows {sum(got.values())} rows for {sum(want.values())} "
        f"committed (missing {len(missing)} {missing[:4]}, extra or duplicated {len(extra)} "
        f"{extra[:4]})"
    )


def check_fsck(run: AdminRun, when: str) -> None:
    """Invariant 3: fsck reports no data loss (leftovers are fine: repair's work)."""
    from acidstream.recovery.fsck import fsck_table

    with open_store(run.store_url) as s:
        report = fsck_table(s, s.get_table("default", TABLE), txn_timeout_s=TXN_TIMEOUT_S)
    bad = []
    for f in report.findings:
        torn = run.torn is not None and run.torn.path.exists()
        if torn and f.kind in TORN_KINDS:
            continue
        if f.kind in DATA_LOSS_KINDS:
            bad.append(f"{f.kind} {f.path}: {f.detail}")
    if bad:
        raise run.fail(f"{when}: fsck reports data loss: {bad[:4]}")


# ---------------------------------------------------------------------------------------------
# commands


def acidstream(
    run: AdminRun,
    args: list[str],
    *,
    faults: tuple[str, ...] = (),
    kill_after_s: float | None = None,
    observe: bool = True,
) -> tuple[int, str, str]:
    """Run ``acidstream ARGS`` against the run's metastore and warehouse in a child process;
    with ``faults`` it SIGKILLs itself at the first of those steps, with ``kill_after_s``
    it is SIGKILLed at that moment if still running. With ``observe``, snapshots are taken
    (and checked) while it runs. Returns ``(exit code, stdout, stderr)``."""
    argv = [sys.executable, "-m", "acidstream", *args, "--metastore", run.store_url,
            "--warehouse", run.warehouse]  # fmt: skip
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=child_env(faults), cwd=str(ROOT))  # fmt: skip
    if kill_after_s is not None:
        try:
            p.wait(timeout=kill_after_s)  # the random moment: a deadline, not a poll
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
    elif observe:
        for _ in range(2):  # readers meanwhile see the committed rows, exactly once
            if p.poll() is not None:
                break
            check_rows(run, f"while `{args[0]}` ran")
    try:
        out, err = p.communicate(timeout=CLI_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise run.fail(
            f"`acidstream {' '.join(args)}` hung: {out[-300:]!r} {err[-300:]!r}"
        ) from None
    return p.returncode, out, err


def check_exit(run: AdminRun, args: list[str], code: int, out: str, err: str) -> str:
    """Invariant 1; returns how the command ended, for the step log."""
    cmd = f"`acidstream {' '.join(args)}`"
    if "Traceback" in err or "Traceback" in out:
        raise run.fail(f"{cmd} printed a traceback (exit {code}): {err[-1200:]}")
    if code == -signal.SIGKILL:
        return "killed"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if code == 0:
        return "ok"
    if code == 1 and len(lines) <= 1:
        return f"refused ({(lines or out.splitlines()[-1:] or [''])[0][:90]})"
    if code == 6 and args[0] in ("fsck", "repair"):
        return "leftovers"
    if code == 7 and args[0] in ("fsck", "repair"):
        return "errors reported"  # which ones: check_fsck judges the findings
    what = f"exited {code}" + (f" with {len(lines)} lines on stderr" if code == 1 else "")
    raise run.fail(f"{cmd} {what}: stderr {err[-800:]!r} stdout {out[-300:]!r}")


def _kill_plan(
    rng: random.Random, steps: tuple[str, ...], *, always: bool
) -> tuple[tuple[str, ...], float | None]:
    """``(faults, kill_after_s)``: a SIGKILL at a named step, at a random moment, or (unless
    ``always``) none."""
    r = rng.random()
    if steps and r < (0.6 if always else 0.35):
        return (rng.choice(steps),), None
    if always or r < 0.5:
        return (), rng.uniform(0.3, 1.5)
    return (), None


def op_ingest(run: AdminRun, rng: random.Random) -> str:
    """More streaming data: the harness's writer goes on from its committed position, and is
    sometimes SIGKILLed at a step (new leftovers between admin commands)."""
    with open_store(run.store_url) as s:
        table = run.table()
        start = committed_next(s, table)
    per_txn = rng.randint(3, 30)
    run.events = max(run.events, start) + per_txn * rng.randint(1, 4)
    spec = connection_spec(
        run.store_url, table, events=run.events, rows_per_txn=per_txn,
        txns_per_batch=rng.randint(1, 4), memory_limit_bytes=rng.choice([200, 2000, 1 << 20]),
    )  # fmt: skip
    kill = rng.random() < 0.4
    steps = CONNECTION_STEPS + (PARTITION_STEPS if run.partitioned else ())
    faults = (rng.choice(steps),) if kill else ()
    p = start_child(spec, faults=faults)
    for _ in range(3):  # snapshots while it writes, each checked against the prefix
        if p.poll() is not None:
            break
        _snap_while_writing(run)
    _out, err = p.communicate(timeout=CLI_TIMEOUT_S)
    ok = (0, -signal.SIGKILL, EXIT_TXN_ABORTED, EXIT_STORAGE, EXIT_OTHER_TYPED)
    if p.returncode not in ok or "Traceback" in err:
        raise run.fail(f"ingest writer exited {p.returncode}: {err[-800:]}")
    what = "killed" if p.returncode == -signal.SIGKILL else f"exit {p.returncode}"
    return f"ingest to {run.events} ({what}{' at ' + faults[0] if faults else ''})"


def _snap_while_writing(run: AdminRun) -> None:
    """A snapshot while the writer runs shows a committed prefix ``0..k-1`` with ``k``
    between the committed positions read before and after it."""
    with open_store(run.store_url) as s:
        low = committed_next(s, run.table())
        got = read_by_name(run, "while a writer ran")
        high = committed_next(s, run.table())
    if got is None:
        return
    rows = sorted(got.elements())
    ids = [r[0] for r in rows]
    wrong_ds = [r for r in rows if run.partitioned and r[1] != PARTITION_VALUES[r[0] % 3]]
    if ids != list(range(len(ids))) or not low <= len(ids) <= high or wrong_ds:
        raise run.fail(
            f"while a writer ran, a snapshot showed {len(ids)} rows (committed {low}..{high}), "
            f"not a committed prefix (rows with a wrong ds: {wrong_ds[:3]})"
        )


def op_command(run: AdminRun, rng: random.Random, op: str) -> str:
    """One admin command through the CLI, perhaps SIGKILLed; returns its step-log entry."""
    name = f"default.{TABLE}"
    steps: tuple[str, ...] = ()
    if op in ("compact-major", "compact-minor"):
        args = ["compact", name, "--type", op.split("-")[1], "--wait"]
        steps = COMPACTION_STEPS
    elif op.startswith("compact-partition"):
        ds = rng.choice(PARTITION_VALUES)
        args = ["compact", name, "--partition", f"ds={ds}", "--type", op.split("-")[2], "--wait"]
        steps = COMPACTION_STEPS
    elif op == "compactor":  # initiator, workers, cleaner and the housekeeper's pass
        args = ["compactor", "--once"]
        steps = COMPACTION_STEPS
    elif op == "cleaner":  # a pass with no initiator: what is queued, then the Cleaner
        args = ["compactor", "--once", "--no-initiator", "--no-housekeeper"]
        steps = ("cleaner.before_delete",)
    elif op == "repair":
        # Every open txn counts as a dead writer's: in admin-live-writer the live writer's
        # too, which must then fail typed when it goes on, committing nothing more.
        args = ["repair", name, "--apply", "--txn-timeout", "0"]
    elif op == "set-location":
        run.moves += 1
        target = Path(run.warehouse) / f"moved_{run.moves}"
        args = ["set-location", name, str(target)]
    elif op == "fsck":
        args = ["fsck", name, "--format", "json"]
    else:
        raise ValueError(op)
    faults, kill_after = _kill_plan(rng, steps, always=run.kill_every)
    run.commands += 1
    if op == "fsck":
        faults, kill_after = (), None
    # `repair --txn-timeout 0` aborts every open txn, a reader's lease too: no reads then.
    code, out, err = acidstream(
        run, args, faults=faults, kill_after_s=kill_after, observe=op != "repair"
    )
    how = check_exit(run, args, code, out, err)
    if faults and how == "killed":
        how = f"killed at {faults[0]}"
    elif kill_after is not None and how == "killed":
        how = f"killed after {kill_after:.2f}s"
    shown = " ".join(a for a in args[:6] if a != name)
    return f"{shown} -> {how}"


# ---------------------------------------------------------------------------------------------
# leftovers and the scenario


def _dead_writer(run: AdminRun, rng: random.Random, table: TableDef, *, torn: bool) -> str:
    """Committed data and a killed writer's leftovers: a writer of several txns per batch,
    SIGKILLed at a random step and hit (open txns of a dead writer, a streaming file and its
    side file; the housekeeper may then abort them). With ``torn`` the kill comes inside a
    batch after at least one of its txns committed, so the open file holds committed rows
    behind a valid footer (the file whose side file is then cut)."""
    per_txn = rng.randint(3, 25)
    txns = rng.randint(3, 5) if torn else rng.randint(2, 5)
    batches = rng.randint(2, 4)
    run.events = per_txn * txns * batches
    if torn:
        step = "commit_txn.before_commit"
        # Not the batch's last txn: the file is closed (side file gone) before it commits.
        at = rng.randrange(batches) * txns + rng.randint(2, txns - 1)
    else:
        step = rng.choice(CONNECTION_STEPS + (PARTITION_STEPS if run.partitioned else ()))
        per_batch = step.startswith(("open_batch", "abort_txn"))
        at = rng.randint(1, batches if per_batch else batches * txns)
    spec = connection_spec(
        run.store_url, table, events=run.events, rows_per_txn=per_txn, txns_per_batch=txns,
        memory_limit_bytes=rng.choice([200, 2000, 1 << 20]),
        hook={"step": step, "at": at, "action": "kill"},
    )  # fmt: skip
    p = start_child(spec)
    _out, err = p.communicate(timeout=CLI_TIMEOUT_S)
    if p.returncode not in (0, -signal.SIGKILL):
        raise run.fail(f"the first writer exited {p.returncode}: {err[-800:]}")
    what = "killed" if p.returncode == -signal.SIGKILL else "finished"
    return f"writer(batch {txns}) {what} at {step}#{at}"


def _tear_side_file(run: AdminRun, table: TableDef, tear: random.Random) -> str:
    """Issue 28, item 2: a dead writer's side file cut to 0 bytes while its file holds
    committed txns (a valid footer), or (a third of the time) torn: 1-7 bytes of a length
    whose append never completed after its complete lengths. Returns the step-log entry
    ("" when no side file fits)."""
    assert table.location is not None
    with open_store(run.store_url) as s:
        if committed_next(s, table) == 0:
            return ""
    for side in sorted(Path(table.location).rglob("bucket_*_flush_length")):
        data = side.with_name(side.name.removesuffix("_flush_length"))
        if len(side.read_bytes()) >= 8 and data.exists():
            run.torn = TornSideFile(side, side.read_bytes())
            where = side.relative_to(table.location)
            if tear.random() < 1 / 3:
                tail = tear.randbytes(tear.randint(1, 7))
                side.write_bytes(run.torn.original + tail)
                return f"side file {where} torn ({len(tail)} bytes of a length appended)"
            side.write_bytes(b"")
            return f"side file {where} cut to 0 bytes"
    return ""


def _restore_torn(run: AdminRun) -> str:
    """The operator puts the torn side file's lengths back (from a backup, or read off the
    file's footers) once the commands are done; nothing may have deleted the file."""
    torn = run.torn
    if torn is None:
        return ""
    data = torn.path.with_name(torn.path.name.removesuffix("_flush_length"))
    run.torn = None
    if torn.path.exists() and data.exists():
        torn.path.write_bytes(torn.original)
        return "side file restored"
    return "side file gone"


def _live_writer(run: AdminRun, rng: random.Random) -> tuple[subprocess.Popen[str], str]:
    """A writer alive through the admin commands: held (its threads running, heartbeats
    going) before the commit of its batch's 2nd or 3rd txn, so that its batch has committed
    txns and an open one, and its streaming file and side file are open."""
    table = run.table()
    with open_store(run.store_url) as s:
        start = committed_next(s, table)
    per_txn = rng.randint(3, 20)
    run.events = max(run.events, start) + per_txn * 3 * 2
    at = rng.randint(2, 3)
    spec = connection_spec(
        run.store_url, table, events=run.events, rows_per_txn=per_txn, txns_per_batch=3,
        memory_limit_bytes=rng.choice([200, 2000, 1 << 20]),
        hook={"step": "batch.before_commit", "at": at, "action": "hold"},
    )  # fmt: skip
    p = start_child(spec, stdin=True)
    assert p.stdout is not None
    if not any(line.startswith("holding") for line in p.stdout):
        _out, err = p.communicate(timeout=CLI_TIMEOUT_S)
        raise run.fail(f"the live writer exited {p.returncode} before its hold: {err[-800:]}")
    return p, f"live writer held at batch.before_commit#{at}"


def _release(run: AdminRun, p: subprocess.Popen[str]) -> str:
    """Let the live writer go on: it finishes, or (when `repair --txn-timeout 0` aborted its
    txns meanwhile) fails typed without committing anything more."""
    assert p.stdin is not None
    p.stdin.write("go\n")
    p.stdin.flush()
    out, err = p.communicate(timeout=CLI_TIMEOUT_S)
    if p.returncode not in (0, EXIT_TXN_ABORTED, EXIT_OTHER_TYPED) or "Traceback" in err:
        raise run.fail(f"the live writer exited {p.returncode} once released: {err[-800:]}")
    last = (out.strip().splitlines() or [""])[-1]
    return f"live writer released: exit {p.returncode} ({last[:70]})"


def scenario_admin(
    store_url: str, warehouse: str, seed: int, *, partitioned: bool | None = None,
    torn: bool = False, kill_every: bool = False, live: bool = False,
) -> Result:  # fmt: skip
    """A table with committed data and a dead writer's leftovers, then a seeded sequence of
    admin commands (some SIGKILLed; with ``kill_every`` each one), every committed row
    checked after each. ``partitioned=None``: the seed decides. ``torn``: a dead writer's
    side file is cut to 0 bytes first (issue 28, item 2). ``live``: a writer stays alive,
    its batch half committed, through the commands (no other ingest meanwhile)."""
    rng = random.Random(seed)
    if partitioned is None:
        partitioned = rng.random() < 0.5
    buckets = rng.choice((None, 2))
    n_ops = rng.randint(4, 7)
    ops = OPS_PARTITIONED if partitioned else OPS_PLAIN
    weights = dict(WEIGHTS, repair=6) if torn else WEIGHTS
    plan = rng.choices(ops, weights=[weights[o] for o in ops], k=n_ops)
    what = ["partitioned" if partitioned else "plain"] + ["torn side file"] * torn
    what += ["live writer"] * live
    if live:  # one writer at a time: the model is the writer's committed position
        plan = [op for op in plan if op != "ingest"] or ["compact-major"]
    label = f"seed {seed} admin({', '.join(what)}; {n_ops} ops)"
    run = AdminRun(store_url, warehouse, partitioned, label, events=0, kill_every=kill_every)
    with open_store(store_url, warehouse=warehouse) as store:
        table = make_table(store, TABLE, partitioned=partitioned, buckets=buckets)
    run.steps.append(_dead_writer(run, rng, table, torn=torn))
    if rng.random() < 0.5:  # the dead writer's txns aborted (else they stay open, dead)
        with future_store(store_url) as keeper:
            run.steps.append(f"reaped txns {keeper.reap_timed_out(timeout_s=TXN_TIMEOUT_S)}")
    if torn:
        # Its own generator: the schedule drawn from the seed stays what it was.
        cut = _tear_side_file(run, table, random.Random(f"tear-{seed}"))
        if not cut:
            raise run.fail("the writer left no side file of committed txns to cut")
        run.steps.append(cut)
    held = None
    if live:
        held, step = _live_writer(run, rng)
        run.steps.append(step)
    try:
        check_rows(run, "before any admin command")
        for op in plan:
            step = op_ingest(run, rng) if op == "ingest" else op_command(run, rng, op)
            run.steps.append(step)
            check_rows(run, f"after {step}")
            check_fsck(run, f"after {step}")
        if held is not None:
            run.steps.append(_release(run, held))
            check_rows(run, "after the live writer went on")
            check_fsck(run, "after the live writer went on")
    finally:
        if held is not None and held.poll() is None:
            held.kill()  # a violation was found: the held writer must not outlive the run
            held.communicate()
    restored = _restore_torn(run)
    if restored:
        run.steps.append(restored)
        check_rows(run, "once the side file was restored")
    # The end: the writer finishes its events (rows committed after the commands must be
    # visible), then the harness's invariants: repair past the timeout, fsck clean.
    table = run.table()
    run.events += 7
    spec = connection_spec(store_url, table, events=run.events, rows_per_txn=7,
                           txns_per_batch=2)  # fmt: skip
    p = start_child(spec)
    _out, err = p.communicate(timeout=CLI_TIMEOUT_S)
    if p.returncode != 0:
        raise run.fail(f"the final writer exited {p.returncode}: {err[-800:]}")
    run.steps.append("final ingest")
    check_rows(run, "after the final ingest")
    with open_store(store_url) as s:
        n = committed_next(s, table)
    if n != run.events:
        raise run.fail(f"the writer's resume key says {n}, not {run.events}")
    repair(store_url, run.table(), label)
    check_rows(run, "after the final repair")
    check_no_open_txns(store_url, label)
    summary = f"{'; '.join(run.steps)}; {n} rows; {run.commands} admin commands checked"
    return summary, run.table()


SCENARIOS = {
    "admin-plain": lambda u, w, s: scenario_admin(u, w, s, partitioned=False),
    "admin-partitioned": lambda u, w, s: scenario_admin(u, w, s, partitioned=True),
    "admin-torn-side-file": lambda u, w, s: scenario_admin(u, w, s, torn=True),
    "admin-kill-every": lambda u, w, s: scenario_admin(u, w, s, kill_every=True),
    "admin-live-writer": lambda u, w, s: scenario_admin(u, w, s, live=True),
}
FAULTS = {
    "admin-plain": "admin commands (compact, compactor, cleaner, repair, set-location, fsck) "
    "via the CLI, some SIGKILLed at a step or moment; rows checked after each",
    "admin-partitioned": "the same on a partitioned table, compact with and without --partition",
    "admin-torn-side-file": "the same after a dead writer's side file (its file holding "
    "committed txns) is cut to 0 bytes",
    "admin-kill-every": "the same, every admin command SIGKILLed at a compaction/cleaner "
    "step or a random moment",
    "admin-live-writer": "the same while a writer is alive with a half-committed batch "
    "(held at a step, heartbeating), released at the end",
}

harness.SCENARIOS.update(SCENARIOS)
harness.FAULTS.update(FAULTS)
