"""The upsert chaos scenarios (``tests/chaos/scenarios_upsert.py``) in the normal suite: a
few seeded iterations of ``upsert-kill`` on both backends (``apply_changes`` with and
without the ordering guard, the upsert connection, partitioned and bucketed tables), one
``kafka-upsert-kill`` per backend on the embedded broker, and the checks shown not to be
vacuous: the fold rules on a hand-made batch, a killed batch's files on disk while the
table equals the fold without it, a model counting it committed failing, and a batch
said committed twice failing."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from acidstream.acid.reader import read_path
from acidstream.sinks.upsert_sink import CRASH_POINTS
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store
from tests.chaos.harness import (
    KAFKA,
    TXN_TIMEOUT_S,
    InvariantViolation,
    backend_url,
    future_store,
    pg_unreachable,
    repair,
    run_iteration,
)
from tests.chaos.scenarios_upsert import (
    KAFKA_UPSERT_STEPS,
    TABLE,
    Counts,
    Model,
    Progress,
    _run_child,
    check_table,
    fold_batch,
    kafka_fold,
    kafka_log,
    plan_log,
    settle,
)

pytestmark = pytest.mark.chaos

# Seeds drawn to cover both paths and table shapes (what each seed draws):
UPSERT_CASES = [
    (1, "sqlite"),  # apply_changes, no guard; a kill after a delete delta, replays skipped
    (10004, "sqlite"),  # the upsert connection, unpartitioned; a re-delivery from batch 0
    # the upsert connection, partitioned, 4 buckets (rows moving partitions); its kills are
    # all at named steps (a seed whose only kill is timed may finish first on a fast machine)
    (10017, "postgres"),
    (10003, "postgres"),  # apply_changes with ordering_guard, partitioned, 2 buckets
]


def _backend(backend: str) -> None:
    if backend == "postgres":
        reason = pg_unreachable()
        if reason is not None:
            pytest.skip(reason)


@pytest.mark.parametrize("case", UPSERT_CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_upsert_kill_iteration_keeps_every_invariant(case: tuple[int, str], tmp_path: Path) -> None:
    seed, backend = case
    _backend(backend)
    with backend_url(backend, str(tmp_path)) as url:
        o = run_iteration("upsert-kill", seed, url, str(tmp_path / "warehouse"))
    print(f"upsert-kill seed {seed} {backend}: {o.detail} ({o.seconds:.1f}s)")
    assert o.ok, (
        f"{o.detail}\nreplay: .venv/bin/python -m tests.chaos.run --replay upsert-kill:{seed}:{backend}"
    )
    assert "kills" in o.detail and " 0 kills" not in o.detail  # the faults were met


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_kafka_upsert_kill_iteration_keeps_every_invariant(
    backend: str, tmp_path: Path, kafka_broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _backend(backend)
    monkeypatch.setitem(KAFKA, "broker", kafka_broker.broker)
    # Two micro-batches each: killed before the first commit (sqlite), after it (postgres:
    # the restarted job replays the batch from its checkpoint and the sink skips it).
    seed = {"sqlite": 110_015, "postgres": 110_046}[backend]
    with backend_url(backend, str(tmp_path)) as url:
        o = run_iteration("kafka-upsert-kill", seed, url, str(tmp_path / "warehouse"))
    print(f"kafka-upsert-kill seed {seed} {backend}: {o.detail} ({o.seconds:.1f}s)")
    assert o.ok, o.detail
    assert o.detail.startswith("killed"), o.detail


def test_every_upsert_sink_crash_point_is_a_kafka_step() -> None:
    assert set(CRASH_POINTS) <= set(KAFKA_UPSERT_STEPS)


def test_fold_of_a_batch_by_lsn_with_and_without_the_guard() -> None:
    """Hand-made: key 1 updated twice out of order (lsn 5 arrives after lsn 7), key 2
    deleted then re-inserted, key 3 a duplicate delete of an absent key, key 4 an event
    older than the table's row."""
    batch = [[1, "u", 70, 7, None], [2, "d", 0, 8, None], [1, "u", 50, 5, None],
             [3, "d", 0, 9, None], [2, "u", 20, 10, None], [3, "d", 0, 9, None],
             [4, "u", 40, 2, None]]  # fmt: skip
    start: Model = {1: (1, 1, None), 2: (2, 2, None), 4: (4, 3, None)}
    model = dict(start)
    c = fold_batch(model, batch, by_lsn=True, guard=True)
    assert model == {1: (70, 7, None), 2: (20, 10, None), 4: (4, 3, None)}
    assert c == Counts(updated=2, absent_deletes=1, skipped_late=1)
    model = dict(start)
    c = fold_batch(model, batch, by_lsn=False, guard=False)  # arrival order: lsn 5 last
    assert model == {1: (50, 5, None), 2: (20, 10, None), 4: (40, 2, None)}
    assert c == Counts(updated=3, absent_deletes=1)


def test_kafka_log_folds_alike_wherever_batches_cut_it() -> None:
    """The Kafka model needs the fold to be the same whatever the micro-batches are: with
    the guard's rules, applying the log cut at random points equals the global fold."""
    for seed in range(30):
        rng = random.Random(seed)
        records = kafka_log(rng, rng.randint(1, 3))
        assert len({(r.partition, r.offset) for r in records}) == len(records)
        for _ in range(5):
            model: dict[int, tuple[int, int]] = {}
            cuts = sorted(rng.sample(range(len(records)), 4))
            for lo, hi in zip([0, *cuts], [*cuts, len(records)], strict=True):
                last: dict[int, Any] = {}
                for r in records[lo:hi]:  # the engine's collapse: (lsn, partition, offset)
                    order = (-1 if r.op == "t" else r.lsn, r.partition, r.offset)
                    if r.id not in last or order >= last[r.id][0]:
                        last[r.id] = (order, r)
                for k, (order, r) in last.items():
                    if k in model and order[0] < model[k][1]:
                        continue  # late (a tombstone's NULL lsn too)
                    if r.op in "dt":
                        model.pop(k, None)
                    else:
                        model[k] = (r.v, r.lsn)
            assert model == kafka_fold(records), seed


def _progress(url: str, warehouse: str) -> Progress:
    batches = plan_log(random.Random(7), partitioned=True)
    with open_store(url, warehouse=warehouse) as store:
        store.create_table(
            TableDef(
                db="default", name=TABLE, columns=(("id", "int"), ("v", "int"), ("lsn", "bigint")),
                partition_keys=(("ds", "string"),), bucket_cols=("id",), num_buckets=2,
                parameters={"transactional": "true", "acidstream.key": "id"},
            )
        )  # fmt: skip
    return Progress(url, warehouse, "self-test", batches, "engine", True, True)


def test_checks_catch_a_killed_batch_counted_and_a_batch_applied_twice(tmp_path: Path) -> None:
    """Batch 2 killed before its commit: its files are on disk (a read ignoring the snapshot
    shows more rows), yet the table equals the fold of batches 0-1; a model counting batch
    2 fails the check; a run saying a committed batch committed again fails settle."""
    with backend_url("sqlite", str(tmp_path)) as url:
        p = _progress(url, str(tmp_path / "warehouse"))
        spec = {"store_url": url, "warehouse": p.warehouse, "table": f"default.{TABLE}",
                "batches": p.batches, "path": "engine", "guard": True, "partitioned": True,
                "start": 0, "hook": {"step": "mutation.before_commit", "at": 3}}  # fmt: skip
        out = _run_child(p, 1, spec, None)
        assert "kill mutation.before_commit#3" in out.splitlines()
        settle(p, 1, 0, out, finished=False)
        assert p.committed == 2
        table = p.table()
        raw = read_path(table.location or "", schema=table.schema)  # no snapshot: every file
        assert raw.num_rows > sum(p.states[2].values())
        check_table(p, "batch 2's files on disk, its txn open")
        p.committed = 3
        with pytest.raises(InvariantViolation, match="not the fold"):
            check_table(p, "the killed batch counted as committed")
        p.committed = 2
        with future_store(url) as keeper:
            keeper.reap_timed_out(timeout_s=TXN_TIMEOUT_S)
        repair(url, table, p.label)
        check_table(p, "after recovery")
        again = 'batch 1 committed {"inserted": 0}\ndone'
        with pytest.raises(InvariantViolation, match="batch 1 said committed"):
            settle(p, 2, 1, again, finished=True)
