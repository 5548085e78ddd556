"""The mutation chaos scenario's own checks (``tests/chaos/scenarios_mutation.py``): every
``mutation.*`` fault step kills a statement where it says, the statement in flight is
decided from its txn's state, and the table check is not vacuous (it sees a killed
statement's files when the snapshot is ignored, a statement counted wrongly, a MERGE
applied twice). The scenario's seeded iterations run in ``test_chaos.py``'s fast tier."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from acidstream.acid.reader import read_path
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store
from tests.chaos.child_mutation import tag
from tests.chaos.harness import TXN_TIMEOUT_S, InvariantViolation, backend_url, future_store, repair
from tests.chaos.scenarios_mutation import (
    MUTATION_STEPS,
    TABLE,
    Progress,
    _run_child,
    apply_statement,
    check_table,
    parse_child,
    settle,
    where_sql,
)

pytestmark = pytest.mark.chaos

_DELETE = {"t": "vmod", "m": 4, "r": 1, "ds": "d1"}
_UPDATE = {"t": "range", "lo": 10, "hi": 16}
OPS: list[dict[str, Any]] = [
    {"kind": "insert", "txns_per_batch": 2, "memory_limit_bytes": 1 << 20,
     "chunks": [[0, 20], [20, 30]]},
    {"kind": "delete", "pred": _DELETE, "where": where_sql(_DELETE)},
    {"kind": "update", "by": "predicate", "pred": _UPDATE, "where": where_sql(_UPDATE),
     "move_to": "d3", "set": {"ds": "'d3'"}},
    {"kind": "merge", "clauses": ["delete", "update", "insert"], "on": ["id"], "move": False,
     "key": "chaos-merge-3",
     "source": [{"id": 2, "v": 0, "dv": 5, "ds": "d0", "op": "u"},
                {"id": 3, "v": 0, "dv": 1, "ds": "d0", "op": "d"},
                {"id": 100_000, "v": 7, "dv": 0, "ds": "d2", "op": "i"}]},
]  # fmt: skip
"""An insert of two chunks, a DELETE (ops.py), an UPDATE moving rows to a new partition,
a MERGE with all three clauses (merge.py; delete deltas and deltas)."""


def _progress(url: str, warehouse: str) -> Progress:
    with open_store(url, warehouse=warehouse) as store:
        store.create_table(
            TableDef(
                db="default", name=TABLE, columns=(("id", "int"), ("msg", "string"), ("v", "int")),
                partition_keys=(("ds", "string"),), bucket_cols=("id",), num_buckets=2,
                parameters={"transactional": "true"},
            )
        )  # fmt: skip
    return Progress(url, warehouse, "self-test", copy.deepcopy(OPS))


def _child(p: Progress, run: int, hook: dict[str, Any] | None) -> tuple[str, list[int]]:
    """One child run from where ``p`` is, settled from the metastore as the scenario does:
    its stdout and the txns that did not commit."""
    spec = {"writer": "mutation", "store_url": p.store_url, "warehouse": p.warehouse,
            "table": f"default.{TABLE}", "ops": p.ops, "start": p.op, "start_chunk": p.chunk,
            "run": run, "hook": hook}  # fmt: skip
    out = _run_child(p, run, spec, None)
    return out, settle(p, run, parse_child(out)[0])


def _recover(p: Progress, when: str) -> None:
    """The housekeeper past the timeout, ``repair --apply`` (fsck clean), the table check."""
    with future_store(p.store_url) as keeper:
        keeper.reap_timed_out(timeout_s=TXN_TIMEOUT_S)
    repair(p.store_url, p.table(), p.label)
    check_table(p, when)


# (step, hit, the statement it kills, whether that statement committed)
STEP_CASES = [
    ("mutation.after_open", 1, 1, False),
    ("mutation.after_find", 1, 1, False),  # DELETE (ops.py)
    ("mutation.after_find", 2, 2, False),  # UPDATE (ops.py)
    ("mutation.after_find", 3, 3, False),  # MERGE (merge.py)
    ("mutation.after_delete_delta", 1, 1, False),
    ("mutation.after_delta", 1, 2, False),  # the UPDATE's new versions
    ("mutation.before_commit", 3, 3, False),
    ("mutation.after_commit", 3, 3, True),
]


def test_every_mutation_step_is_covered() -> None:
    assert {s for s, *_ in STEP_CASES} == set(MUTATION_STEPS)


@pytest.mark.parametrize("case", STEP_CASES, ids=lambda c: f"{c[0]}#{c[1]}")
def test_mutation_step_kills_the_statement(
    case: tuple[str, int, int, bool], tmp_path: Path
) -> None:
    """The step is reached inside the statement the case names and SIGKILLs the writer
    there; the statement counts as committed exactly when its txn committed, and the table
    equals the model either way."""
    step, at, statement, committed = case
    with backend_url("sqlite", str(tmp_path)) as url:
        p = _progress(url, str(tmp_path / "warehouse"))
        out, failed = _child(p, 1, {"step": step, "at": at, "scope": "mutation"})
        assert f"kill {step}#{at}" in out.splitlines(), out
        seen = parse_child(out)[0]
        assert max(seen) == statement and seen[statement].done is None
        assert (tag(statement, 1) not in p.aborted_tags) is committed
        assert bool(failed) is not committed  # an open txn, aborted by the housekeeper
        # A killed MERGE runs again with its key; anything else goes on when it committed.
        again = statement == 3 and committed
        assert p.op == (statement if not committed or again else statement + 1)
        _recover(p, "after the kill")


def test_checks_catch_partial_double_and_wrong_statements(tmp_path: Path) -> None:
    """A MERGE killed before its commit: its files are on disk (a read ignoring the snapshot
    shows the killed attempt's rows), yet the table read by name equals the model, and a
    model counting that statement as committed fails the check. Then the MERGE commits and
    is killed right after; run again with its key it is a replay; run under another key (a
    second application) the check fails."""
    with backend_url("sqlite", str(tmp_path)) as url:
        p = _progress(url, str(tmp_path / "warehouse"))
        _out, failed = _child(
            p, 1, {"step": "mutation.before_commit", "at": 3, "scope": "mutation"}
        )
        assert failed and p.op == 3 and tag(3, 1) in p.aborted_tags
        table = p.table()
        assert table.location is not None
        raw = read_path(table.location, schema=table.schema)  # no snapshot: every file
        assert tag(3, 1) in set(raw.column("msg").to_pylist())
        check_table(p, "the killed MERGE's files on disk, its txn open")
        wrong = copy.deepcopy(p)
        apply_statement(wrong.model, OPS[3], tag(3, 1))
        with pytest.raises(InvariantViolation, match="read by name shows"):
            check_table(wrong, "the killed MERGE counted as committed")
        _recover(p, "after run 1")

        out, failed = _child(p, 2, {"step": "mutation.after_commit", "at": 1, "scope": "mutation"})
        assert "kill mutation.after_commit#1" in out and not failed
        assert p.op == 3 and 3 in p.merged  # committed: it runs again, with its key
        _recover(p, "after run 2")
        out, _ = _child(p, 3, None)
        assert p.op == len(OPS) and p.replays == 1 and '"replayed": true' in out
        _recover(p, "after run 3")

        twice = copy.deepcopy(p)
        twice.ops[3]["key"] = "another-key"
        twice.op, twice.merged = 3, set()
        _child(twice, 4, None)
        with pytest.raises(InvariantViolation, match="read by name shows"):
            check_table(p, "the MERGE applied twice")
