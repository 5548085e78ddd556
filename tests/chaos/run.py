"""The chaos suite's full tier (``make chaos``) and the replay of one iteration.

``python -m tests.chaos.run --iterations 200 --report docs/chaos.md`` runs seeded
iterations round-robin over every scenario and both metastore backends (PostgreSQL when
reachable), checks the JVM ORC reader on every file left (when PySpark and Java are
there), and writes the report: scenario x fault x iterations x result, the seeds, and the
replay command. ``--replay SCENARIO:SEED:BACKEND`` runs one iteration and prints it.

``--durability flush`` runs the connection writer with durability ``flush`` (Hive's
hflush: bytes handed to the OS, the metastore commit not synced) and only the scenarios
of ``FLUSH_SCENARIOS`` (process kills and metastore faults: what ``flush`` must survive);
``make chaos`` runs the suite once per mode.

Exit code 0 when every iteration kept every invariant, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import re
import sys
import tempfile
import threading
import time
from collections import defaultdict
from typing import Any

from tests.chaos.harness import (
    DURABILITY_ENV,
    FAULTS,
    FLUSH_SCENARIOS,
    KAFKA,
    SCENARIOS,
    Outcome,
    backend_url,
    pg_unreachable,
    run_iteration,
)

PG_ONLY = {"connection-pg-terminate"}
PRIVATE_PG = {"connection-pg-restart"}
"""Scenarios that restart the PostgreSQL server: on a private cluster (backend ``pg-private``)."""
KAFKA_SCENARIOS = {
    "kafka-driver-kill", "kafka-task-retry", "kafka-broker-restart", "kafka-upsert-kill",
}  # fmt: skip


def _jvm_reader() -> Any:
    """ORC Java through PySpark's JVM, or ``None`` (and why) when it cannot start."""
    try:
        from pyspark.sql import SparkSession

        from tests.plugins.spark_fixture import JvmOrcReader

        spark = (
            SparkSession.builder.master("local[1]")
            .appName("acidstream-chaos")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        return JvmOrcReader(spark)
    except Exception as e:  # no Java, no PySpark: the check is reported as not run
        print(f"JVM ORC reader unavailable: {e}", file=sys.stderr)
        return None


def _check_jvm(jvm: Any, outcome: Outcome) -> Outcome:
    for path, length in outcome.files:
        try:
            got = jvm.read(path, max_length=length)
        except Exception as e:  # py4j surfaces Java exceptions as Py4JJavaError
            return Outcome(
                outcome.scenario, outcome.fault, outcome.seed, False,
                f"JVM ORC reader failed on {path} at {length}: {str(e)[:300]}",
                outcome.seconds, outcome.files,
            )  # fmt: skip
        if got["rows_read"] != got["rows"]:
            return Outcome(
                outcome.scenario, outcome.fault, outcome.seed, False,
                f"JVM ORC read {got['rows_read']} of {got['rows']} rows of {path}",
                outcome.seconds, outcome.files,
            )  # fmt: skip
    return outcome


def _start_broker() -> None:
    """The embedded Kafka broker for the Kafka scenarios (stopped at exit)."""
    import atexit

    try:
        from acidstream.jobs.broker import EmbeddedBroker

        broker = EmbeddedBroker().start()
    except Exception as e:  # no broker binary: the Kafka scenarios report themselves skipped
        print(f"Kafka scenarios skipped: {e}", file=sys.stderr)
        return
    atexit.register(broker.stop)
    KAFKA["broker"] = broker


def plan(
    iterations: int,
    base_seed: int,
    backends: list[str],
    *,
    private_pg: bool = True,
    only: frozenset[str] | None = None,
) -> list[tuple[str, int, str]]:
    """Round-robin over scenarios (``only`` these when given), alternating backends; seeds
    ``base_seed + i``."""
    cases: list[tuple[str, int, str]] = []
    names = [n for n in SCENARIOS if n not in KAFKA_SCENARIOS and (only is None or n in only)]
    i = 0
    while names and len(cases) < iterations:
        name = names[i % len(names)]
        backend = backends[(i // len(names)) % len(backends)]
        if name in PG_ONLY:
            backend = "postgres" if "postgres" in backends else ""
        if name in PRIVATE_PG:
            backend = "pg-private" if private_pg else ""
        if backend:
            cases.append((name, base_seed + i, backend))
        i += 1
    return cases


def run_one(
    scenario: str, seed: int, backend: str, jvm: Any = None, *, jvm_lock: Any = None
) -> Outcome:
    """One iteration in a fresh metastore and warehouse; the JVM check runs before the
    warehouse is removed."""
    with tempfile.TemporaryDirectory(prefix="acidchaos-") as d, backend_url(backend, d) as url:
        o = run_iteration(scenario, seed, url, f"{d}/warehouse")
        if o.ok and jvm is not None:
            with jvm_lock or contextlib.nullcontext():
                o = _check_jvm(jvm, o)
        return o


def _private_pg_ok() -> bool:
    from tests.chaos.services import private_postgres

    pg = private_postgres()  # started here, before any worker thread
    if isinstance(pg, str):
        print(f"PostgreSQL restart scenario skipped: {pg}", file=sys.stderr)
        return False
    return True


def _group(case: tuple[str, int, str]) -> str | None:
    """Cases of one group run one at a time: the Kafka jobs (a Spark driver each) and the
    scenario that restarts the private PostgreSQL server (any other user of it would
    see the restart)."""
    if case[0] in KAFKA_SCENARIOS:
        return "kafka"
    if case[2] == "pg-private":
        return "pg-private"
    return None


def run_cases(
    cases: list[tuple[str, int, str]], jvm: Any, *, jobs: int
) -> list[tuple[Outcome, str]]:
    """Run ``cases`` on ``jobs`` threads (each iteration's writers are child processes):
    a Kafka case is taken whenever no other runs, so the long ones overlap the rest.
    Outcomes come back in the order of ``cases``."""
    pending = list(cases)
    busy: set[str] = set()
    cv = threading.Condition()
    jvm_lock = threading.Lock()
    done: dict[int, tuple[Outcome, str]] = {}
    index = {id(c): i for i, c in enumerate(cases)}
    n_done = 0

    def take() -> tuple[str, int, str] | None:
        with cv:
            while pending:
                order = sorted(pending, key=lambda c: _group(c) != "kafka")  # kafka first
                for c in order:
                    g = _group(c)
                    if g is None or g not in busy:
                        pending.remove(c)
                        if g is not None:
                            busy.add(g)
                        return c
                cv.wait()
            return None

    def worker() -> None:
        nonlocal n_done
        while (case := take()) is not None:
            scenario, seed, backend = case
            try:
                o = run_one(scenario, seed, backend, jvm, jvm_lock=jvm_lock)
            except Exception as e:  # the harness itself broke: a failed iteration, reported
                o = Outcome(scenario, FAULTS[scenario], seed, False,
                            f"seed {seed} {scenario}: harness error {type(e).__name__}: {e}", 0.0)  # fmt: skip
            finally:
                with cv:
                    g = _group(case)
                    if g is not None:
                        busy.discard(g)
                    cv.notify_all()
            with cv:
                done[index[id(case)]] = (o, backend)
                n_done += 1
                print(
                    f"[{n_done}/{len(cases)}] {'ok  ' if o.ok else 'FAIL'} {scenario} seed "
                    f"{seed} {backend} {o.seconds:.1f}s: {o.detail[:160]}",
                    flush=True,
                )

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [done[i] for i in sorted(done)]


def _fast_tier_size() -> int:
    from tests.chaos.test_chaos import FAST_TIER

    return len(FAST_TIER)


def _admin_commands(detail: str) -> int:
    """How many admin commands an ``admin-*`` iteration ran (the end of its summary)."""
    m = re.search(r"(\d+) admin commands checked", detail)
    return int(m.group(1)) if m else 0


def _upsert_lines(outcomes: list[tuple[Outcome, str]]) -> list[str]:
    """The report's upsert paragraph: iterations of ``upsert-kill`` and
    ``kafka-upsert-kill`` that passed, with the kills, skipped replays, compactions and
    changes their summaries count."""
    upsert = [o for o, _ in outcomes if o.scenario == "upsert-kill" and o.ok]
    kafka = [o for o, _ in outcomes if o.scenario == "kafka-upsert-kill" and o.ok]
    if not upsert and not kafka:
        return []
    keys = ("kills", "batch replays skipped", "compactions", "inserted", "updated", "deleted",
            "absent deletes", "late")  # fmt: skip
    n = {k: sum(int(m.group(1)) for o in upsert if (m := re.search(rf"(\d+) {k}\b", o.detail)))
         for k in keys}  # fmt: skip
    killed = sum(o.detail.startswith("killed") for o in kafka)
    return [
        "",
        f"Upserts: {len(upsert)} iterations of `upsert-kill` passed, with {n['kills']} writer "
        f"kills, {n['batch replays skipped']} re-delivered batches skipped and "
        f"{n['compactions']} compactions, over {n['inserted']} inserts, {n['updated']} updates, "
        f"{n['deleted']} deletes, {n['absent deletes']} deletes of absent keys and {n['late']} "
        "late events, the table checked against the fold of the committed batches after each "
        f"run; {len(kafka)} iterations of `kafka-upsert-kill` passed ({killed} with the driver "
        "killed).",
    ]


def report_markdown(
    outcomes: list[tuple[Outcome, str]],
    *,
    base_seed: int,
    seconds: float,
    jvm: bool,
    durability: str = "fsync",
) -> str:
    by: dict[tuple[str, str], list[tuple[Outcome, str]]] = defaultdict(list)
    for o, backend in outcomes:
        by[(o.scenario, backend)].append((o, backend))
    ok = sum(o.ok for o, _ in outcomes)
    seeds = [o.seed for o, _ in outcomes] or [base_seed]
    lines = [
        "# Chaos suite",
        "",
        "<!-- generated by `make chaos` (tests/chaos/run.py); do not edit by hand -->",
        "",
        f"Last full run: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {platform.node() or '?'} "
        f"({platform.machine()}, Python {platform.python_version()}): **{len(outcomes)} "
        f"iterations, {ok} passed, {len(outcomes) - ok} failed** in {seconds / 60:.1f} min; "
        f"seeds {min(seeds)}..{max(seeds)}; JVM ORC reader check "
        f"{'on every file left' if jvm else 'NOT run (no Java/PySpark)'}; writer "
        f"durability **{durability}** (`--durability {durability}`).",
        "",
        "Each iteration: a seeded schedule (step, hit, events, txns per batch, memory limit",
        "forcing auto-flushes) drives one writer in a child process into its fault; the",
        "operator's recovery runs (housekeeper past the txn timeout, `acidstream repair",
        "--apply`), the writer restarts, and the invariants are checked: every event exactly",
        "once; every snapshot taken during the run (under a read txn, as readers take it)",
        "shows exactly the committed prefix; no",
        "txn or lock open after the timeout; every file readable at its flush length (JVM",
        "ORC reader); `acidstream fsck` clean after `repair --apply`.",
        "",
        "| scenario | fault | backend | iterations | passed | failed | seeds |",
        "|---|---|---|---|---|---|---|",
    ]
    for (scenario, backend), items in sorted(by.items()):
        seeds = [o.seed for o, _ in items]
        passed = sum(o.ok for o, _ in items)
        seed_text = ", ".join(str(s) for s in seeds[:8]) + (" ..." if len(seeds) > 8 else "")
        lines.append(
            f"| {scenario} | {FAULTS[scenario]} | {backend} | {len(items)} | {passed} | "
            f"{len(items) - passed} | {seed_text} |"
        )
    admin = [o for o, _ in outcomes if o.scenario.startswith("admin-")]
    if admin:
        commands = sum(_admin_commands(o.detail) for o in admin if o.ok)
        lines += [
            "",
            f"Admin commands: {len(admin)} iterations of the `admin-*` scenarios ran "
            f"{commands} admin commands through the CLI in the iterations that passed, the "
            "table's committed rows read by name and fsck checked after each.",
        ]
    mutation = [o for o, _ in outcomes if o.scenario == "mutation-kill" and o.ok]
    if mutation:
        n = {k: sum(int(m.group(1)) for o in mutation if (m := re.search(rf"(\d+) {k}", o.detail)))
             for k in ("kills", "MERGE replays", "compactions")}  # fmt: skip
        lines += [
            "",
            f"Mutations: {len(mutation)} iterations of `mutation-kill` passed, with "
            f"{n['kills']} writer kills, {n['MERGE replays']} MERGE replays and "
            f"{n['compactions']} compactions, the table checked against the model after each.",
        ]
    lines += _upsert_lines(outcomes)
    failed = [(o, b) for o, b in outcomes if not o.ok]
    lines += ["", "## Failures", ""]
    if not failed:
        lines.append("None.")
    for o, b in failed:
        lines.append(f"- `{o.scenario}` seed {o.seed} ({b}): {o.detail}")
    lines += [
        "",
        "## Replay one seed",
        "",
        "```",
        ".venv/bin/python -m tests.chaos.run --replay SCENARIO:SEED:BACKEND",
        "# e.g.",
        ".venv/bin/python -m tests.chaos.run --replay connection-batchN-kill:"
        f"{base_seed + 1}:sqlite",
        "```",
        "",
        "The seed fixes the whole schedule, so a replay meets the same fault at the same",
        "step and hit. The fast tier (`tests/chaos/test_chaos.py`, inside `make test`) runs",
        f"{_fast_tier_size()} fixed seeds of the non-Spark scenarios.",
        "",
        "## Scenarios",
        "",
    ]
    for name, fault in FAULTS.items():
        lines.append(f"- `{name}`: {fault}.")
    lines += [
        "",
        "How the infrastructure faults are made:",
        "",
        "- `kafka-task-retry`: the step `sink.task_after_flush` (after each flush of a sink",
        "  task's file) is armed in the job's Python workers with `ACIDSTREAM_FAULTS_ONCE`: the",
        "  first attempt to reach it is SIGKILLed (a Python worker crash, a task failure to",
        "  Spark), the retry (`local[2,N]`: local mode ignores `spark.task.maxFailures`) passes;",
        "  the job must end normally with each event once, before any repair.",
        "- `kafka-broker-restart`: Tansu's static build has only `memory://` and `s3://`",
        "  storage; the scenario runs it on `s3://` against moto's S3 server (standing in for",
        "  object storage), SIGKILLs it after the job committed a micro-batch, restarts it on",
        "  the same port and bucket after a seeded outage, and produces the rest of the events",
        "  afterwards. Readers use `endOffsetsFrom=fetch` (Tansu's ListOffsets under-reports the",
        "  end on S3 storage).",
        "- `connection-pg-restart`: never the shared server on 5432: a private cluster",
        "  (`initdb` in a temporary directory, its own port) restarted with `pg_ctl -m",
        "  immediate` (crash, WAL recovery) or `-m fast` at a random step, inside or outside",
        "  a metastore transaction.",
        "- `connection-clock-jump`: the writer's and the housekeeper's wall clock is",
        "  `time.time()` plus an offset file the harness rewrites while the writer is held",
        "  alive at a step between heartbeats.",
        "",
        "The admin-command scenarios (`tests/chaos/scenarios_admin.py`, issue 28):",
        "",
        "- a table (partitioned or not, bucketed or not) gets committed streaming data and a",
        "  writer SIGKILLed at a random step (its txns left open, or aborted by the",
        "  housekeeper); `admin-torn-side-file` also cuts that dead writer's side file to 0",
        "  bytes while its file holds committed txns. Then 4-7 admin commands run through the",
        "  real `acidstream` command: `compact --type major|minor --wait` with and without",
        "  `--partition`, `compactor --once`, the cleaner (`compactor --once --no-initiator",
        "  --no-housekeeper`), `repair --apply --txn-timeout 0`, `set-location` to a new",
        "  directory, `fsck`, with more streaming ingest (sometimes SIGKILLed) between them.",
        "  Compaction commands are SIGKILLed at a named step (`compaction.after_bucket`,",
        "  `compaction.after_files`, `compaction.after_commit`, `cleaner.before_delete`) or at",
        "  a random moment; `admin-kill-every` kills every command; in `admin-live-writer`",
        "  a writer stays alive through the commands (held before the commit of its batch's",
        "  2nd or 3rd txn, heartbeating) and is released at the end: it finishes, or fails",
        "  typed when `repair --txn-timeout 0` aborted its txns.",
        "- after every command: it ended with 0, a one-line refusal (exit 1), fsck's 6, or",
        "  the SIGKILL sent (never a traceback, never 70); the table read by name holds",
        "  exactly the committed rows (`id`, and `ds` when partitioned), none twice, none of",
        "  an aborted or open txn (also checked by reads while the command runs); fsck",
        "  reports no data loss (`partition_missing_on_disk`, `unknown_file`, an unreadable",
        "  file). A read refusing the torn side file is accepted until the operator puts its",
        "  lengths back at the end; then the writer finishes and the writers' invariants run.",
        "",
        "The mutation scenario (`tests/chaos/scenarios_mutation.py`, issue 30 item 7):",
        "",
        "- a partitioned (`ds`), bucketed (on `id`) table and 8-14 seeded statements:",
        "  streaming inserts (a txn per chunk, 1-3 txns per batch), DELETE by predicate,",
        "  UPDATE by key and by predicate (half of those move rows to another partition),",
        "  MERGE with WHEN MATCHED DELETE / UPDATE (some moving rows) and WHEN NOT MATCHED",
        "  INSERT in a seeded order, each MERGE with an idempotency key. A writer child runs",
        "  them; its first 2-4 runs are each SIGKILLed once (when the drawn hit comes) at a step",
        "  inside a statement (`mutation.after_open`, `mutation.after_find`,",
        "  `mutation.after_delete_delta`, `mutation.after_delta`, `mutation.before_commit`,",
        "  `mutation.after_commit`, or the statement's own `open_batch` /",
        "  `lock` / `add_dynamic_partitions` / `commit_txn.*` / `batch.*` step, hits counted",
        "  inside statements only; a fifth of the kills just after a MERGE's commit) or at a",
        "  random moment; then it runs unfaulted until every statement ran.",
        "- after each kill the statement in flight is decided by its txn's state in the",
        "  metastore (asked before the housekeeper runs): committed, all of it; otherwise",
        "  nothing, and it runs again. A killed MERGE always runs again with its key and must",
        "  be a replay (no txn, `replayed=True`) when its first run committed. Then fsck shows",
        "  no data loss, the housekeeper and `repair --apply` run (fsck clean), and the table",
        "  read by name equals a Python model of the committed statements: no row twice, no",
        "  row of an attempt whose txn did not commit (each attempt writes its own `msg`).",
        "  Sometimes `acidstream compact --partition ds=.. --type major|minor --wait` runs",
        "  and the table still equals the model. Reads while the writer runs must show a",
        "  state between statements (or an insert's chunks), never a statement in part.",
        "",
        "Not covered: a SIGSTOP inside a metastore DB transaction (a frozen process holding",
        "SQLite's write lock stops every other client), and a heartbeat inside an iteration",
        "(the writer's heartbeat thread stamps with the same jumped clock, but beats only every",
        "half timeout, so no beat falls inside an iteration).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tests.chaos.run", description=__doc__)
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--seed", type=int, default=10_000, help="first seed (default 10000)")
    p.add_argument("--report", help="write the Markdown report here (e.g. docs/chaos.md)")
    p.add_argument("--replay", metavar="SCENARIO:SEED:BACKEND")
    p.add_argument("--no-jvm", action="store_true", help="skip the JVM ORC reader check")
    p.add_argument(
        "--kafka-iterations", type=int, default=6,
        help="Kafka job iterations on the embedded broker (about a minute each; default 6)",
    )  # fmt: skip
    p.add_argument(
        "--jobs", type=int, default=2,
        help="iterations run at once (each in its own metastore and warehouse; default 2)",
    )  # fmt: skip
    p.add_argument(
        "--scenarios", "--only", metavar="NAME,...",
        help="run only these scenarios (comma-separated; default: every one)",
    )  # fmt: skip
    p.add_argument(
        "--durability", choices=("fsync", "flush"), default="fsync",
        help="the connection writer's durability (flush: only the process-kill scenarios)",
    )  # fmt: skip
    args = p.parse_args(argv)
    only = frozenset(args.scenarios.split(",")) if args.scenarios else None
    if only is not None and not only <= set(SCENARIOS):
        p.error(f"unknown scenarios: {sorted(only - set(SCENARIOS))}")
    # Inherited by every writer process of the run (and read by the inline ones).
    os.environ[DURABILITY_ENV] = args.durability
    if args.durability == "flush":
        only = FLUSH_SCENARIOS if only is None else only & FLUSH_SCENARIOS
        if not only:
            p.error("--durability flush runs only " + ", ".join(sorted(FLUSH_SCENARIOS)))
        args.kafka_iterations = 0  # (the Kafka job's writers are not connection writers)
    reason = pg_unreachable()
    backends = ["sqlite"] + ([] if reason else ["postgres"])
    if reason:
        print(f"PostgreSQL scenarios skipped: {reason}", file=sys.stderr)
    jvm = None if args.no_jvm else _jvm_reader()
    needs_kafka = args.kafka_iterations > 0 or (
        args.replay is not None and args.replay.split(":")[0] in KAFKA_SCENARIOS
    )
    if needs_kafka:
        _start_broker()
    if args.replay:
        scenario, seed, backend = args.replay.split(":")
        o = run_one(scenario, int(seed), backend, jvm)
        print(f"{'ok  ' if o.ok else 'FAIL'} {scenario} seed {seed} {backend}: {o.detail}")
        return 0 if o.ok else 1
    start = time.monotonic()
    cases = plan(args.iterations, args.seed, backends, private_pg=_private_pg_ok(), only=only)
    if KAFKA.get("broker") is not None and (only is None or only & KAFKA_SCENARIOS):
        base = args.seed + 100_000
        kafka = sorted(KAFKA_SCENARIOS if only is None else KAFKA_SCENARIOS & only)
        cases += [
            (kafka[i % len(kafka)], base + i, backends[i % len(backends)])
            for i in range(args.kafka_iterations)
        ]
    outcomes = run_cases(cases, jvm, jobs=args.jobs)
    total = time.monotonic() - start
    if args.report:
        with open(args.report, "w") as f:
            f.write(
                report_markdown(
                    outcomes,
                    base_seed=args.seed,
                    seconds=total,
                    jvm=jvm is not None,
                    durability=args.durability,
                )
            )
    failed = sum(not o.ok for o, _ in outcomes)
    print(f"{len(outcomes) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
