"""The Python API of row-level mutations on the Table handle: arguments checked before any
txn, the cardinality check (nothing written, txn aborted), idempotency keys, time travel
before a mutation, MERGE sources and clause semantics. Both metastore backends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import acidstream
from acidstream import Table
from acidstream.acid.errors import CardinalityViolationError, ConfigError, LinkReadOnlyError
from acidstream.mutation import MergeResult, MutationResult
from acidstream.txn.store import TxnState, TxnStore
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert, rows_of


@pytest.fixture
def kv(make_table: MakeTable, insert: Insert, handle: Callable[[str], Table]) -> Table:
    """``default.kv (id int, v string, n bigint)``: ids 0..9, ``v = "v<i>"``, ``n = i``."""
    make_table("kv", "id int, v string, n bigint")
    insert("kv", [{"id": i, "v": f"v{i}", "n": i} for i in range(10)])
    return handle("kv")


def _txn_count(store: TxnStore) -> int:
    return len(store.show_txns())


def test_cardinality_violation_writes_nothing_and_aborts_the_txn(
    kv: Table, store: TxnStore, warehouse: str
) -> None:
    before = sorted(p.name for p in (Path(warehouse) / "kv").iterdir())
    src = pa.table({"id": [3, 3, 50], "v": ["a", "b", "c"]})
    with pytest.raises(CardinalityViolationError, match="matched by 2 source rows"):
        kv.merge(src, on=["id"]).when_matched_update(set={"v": pc.field("src.v")}).execute()
    assert sorted(p.name for p in (Path(warehouse) / "kv").iterdir()) == before
    last = max(store.show_txns(), key=lambda x: x.txn_id)
    assert last.state is TxnState.ABORTED
    assert rows_of(kv.read(), ["id", "v"]) == [(i, f"v{i}") for i in range(10)]
    assert isinstance(CardinalityViolationError("x"), acidstream.AcidStreamError)
    assert acidstream.CardinalityViolationError is CardinalityViolationError


def test_an_insert_only_merge_has_no_cardinality_check(kv: Table) -> None:
    """Hive skips the check when no WHEN MATCHED clause exists: a duplicate source key
    matching a target row just is not inserted."""
    src = pa.table({"id": [3, 3, 50], "v": ["a", "b", "c"], "n": [1, 2, 3]})
    res = kv.merge(src, on="id").when_not_matched_insert_all().execute()
    assert (res.rows_inserted, res.rows_updated, res.rows_deleted) == (1, 0, 0)
    assert rows_of(kv.read(), ["id", "v"])[-1] == (50, "c")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.delete(pc.field("nope") == 1), "nope"),
        (lambda t: t.delete(pc.field("v") + 1), "predicate"),
        (lambda t: t.update({"nope": pc.scalar(1)}), "unknown column 'nope'"),
        (lambda t: t.update({}), "at least one column"),
        (lambda t: t.update({"id": pc.scalar("not a number")}), "'id'"),
        (
            lambda t: t.merge(pa.table({"x": [1]}), on=["id"]).when_matched_delete().execute(),
            "source",
        ),
        (lambda t: t.merge(pa.table({"id": [1]}), on=["id"]).execute(), "at least one WHEN"),
        (lambda t: t.merge([1, 2], on=["id"]), "pyarrow Table"),
        (
            lambda t: (
                t.merge(pa.table({"id": [1]}), on=["id"])
                .when_matched_update(set={"v": pc.field("src.nope")})
                .execute()
            ),
            "'v'",
        ),
        (lambda t: t.delete(None, retries=-1), "retries"),
    ],
)
def test_bad_arguments_are_config_errors_before_any_txn(
    kv: Table, store: TxnStore, call: Callable[[Table], object], message: str
) -> None:
    n = _txn_count(store)
    with pytest.raises(ConfigError, match=message):
        call(kv)
    assert _txn_count(store) == n  # no txn was opened
    assert kv.read().num_rows == 10


def test_idempotency_key_returns_the_first_result_without_writing(
    kv: Table, store: TxnStore, warehouse: str
) -> None:
    src = pa.table({"id": [1, 77], "v": ["x", "y"], "n": [0, 0]})

    def merge() -> MergeResult:
        return (
            kv.merge(src, on=["id"])
            .when_matched_update_all(except_columns=["n"])
            .when_not_matched_insert_all()
            .execute(idempotency_key="batch-1")
        )

    first = merge()
    assert not first.replayed and (first.rows_updated, first.rows_inserted) == (1, 1)
    dirs = sorted(p.name for p in (Path(warehouse) / "kv").iterdir())
    txns = _txn_count(store)
    again = merge()
    assert again.replayed
    assert (again.write_id, again.rows_updated, again.rows_inserted) == (first.write_id, 1, 1)
    assert again.files_written == first.files_written
    assert sorted(p.name for p in (Path(warehouse) / "kv").iterdir()) == dirs
    assert _txn_count(store) == txns
    got = rows_of(kv.read(), ["id", "v", "n"])
    assert (1, "x", 1) in got and (77, "y", 0) in got and len(got) == 11
    # the key is the table's: another mutation kind under it is refused
    with pytest.raises(ConfigError, match="another kind"):
        kv.delete(None, idempotency_key="batch-1")


def test_time_travel_before_a_delete_shows_the_row(kv: Table) -> None:
    res = kv.delete(pc.field("id") == 4)
    assert 4 not in kv.read().column("id").to_pylist()
    before = kv.read(as_of_write_id=res.write_id - 1)
    assert 4 in before.column("id").to_pylist() and before.num_rows == 10
    upd = kv.update({"v": pc.scalar("new")}, pc.field("id") == 5)
    old = kv.read(as_of_write_id=upd.write_id - 1)
    assert rows_of(old, ["id", "v"])[4] == (5, "v5")
    assert dict(rows_of(kv.read(), ["id", "v"]))[5] == "new"


def test_update_set_expressions_see_the_old_row(kv: Table) -> None:
    res = kv.update({"n": pc.field("n") * 10, "v": pc.field("v")}, pc.field("id") >= 8)
    assert isinstance(res, MutationResult) and res.rows_updated == 2
    assert rows_of(kv.read(), ["id", "n"])[-2:] == [(8, 80), (9, 90)]


def test_delete_without_where_deletes_every_row(kv: Table) -> None:
    assert kv.delete(None).rows_deleted == 10
    assert kv.read().num_rows == 0


def test_merge_sources_pandas_and_record_batch_reader(kv: Table) -> None:
    df = pd.DataFrame({"ID": [1, 2], "V": ["p1", "p2"], "extra": [True, False]})
    res = kv.merge(df, on=["id"]).when_matched_update_all().execute()
    assert res.rows_updated == 2
    reader = pa.RecordBatchReader.from_batches(
        pa.schema([("id", pa.int32()), ("v", pa.string())]),
        [
            pa.record_batch(
                [pa.array([2, 30], pa.int32()), pa.array(["r2", "r30"])], names=["id", "v"]
            )
        ],
    )
    res = kv.merge(reader, on=["id"]).when_matched_delete().when_not_matched_insert_all().execute()
    assert (res.rows_deleted, res.rows_inserted) == (1, 1)
    got = dict(rows_of(kv.read(), ["id", "v"]))
    assert got[1] == "p1" and 2 not in got and got[30] == "r30"
    assert rows_of(kv.read(), ["id", "n"])[-1] == (30, None)  # not in the source: NULL


def test_first_matching_clause_wins_and_conditions_see_both_sides(kv: Table) -> None:
    src = pa.table({"id": [1, 2, 3, 40, 41], "op": ["d", "u", "x", "i", "skip"]})
    res = (
        kv.merge(src, on=["id"], source_alias="s", target_alias="t")
        .when_matched_delete(condition=pc.field("s.op") == "d")
        .when_matched_update(
            set={"v": pc.binary_join_element_wise(pc.field("t.v"), pc.scalar("!"), "")},
            condition=(pc.field("s.op") == "u") | (pc.field("t.n") == 1),
        )
        .when_not_matched_insert(
            values={"id": pc.field("s.id"), "v": pc.field("s.op")},
            condition=pc.field("s.op") == "i",
        )
        .execute()
    )
    assert (res.rows_deleted, res.rows_updated, res.rows_inserted) == (1, 1, 1)
    got = dict(rows_of(kv.read(), ["id", "v"]))
    assert 1 not in got  # id 1 matched both the delete and the update: the first clause won
    assert got[2] == "v2!" and got[3] == "v3" and got[40] == "i" and 41 not in got


def test_null_keys_never_match(kv: Table) -> None:
    src = pa.table({"id": pa.array([None, 1], pa.int32()), "v": ["n", "one"]})
    res = kv.merge(src, on=["id"]).when_matched_update_all().when_not_matched_insert_all().execute()
    assert (res.rows_updated, res.rows_inserted) == (1, 1)
    assert (None, "n") in rows_of(kv.read(), ["id", "v"])


def test_a_link_is_read_only_for_mutations(store: TxnStore, store_url: str) -> None:
    from tests.txn.links_helpers import make_namespaces
    from tests.txn.links_helpers import write as write_b

    make_namespaces(store)
    write_b(store, [("1", range(0, 3))])
    store.create_link("a", "b", "t1")
    store.alter_link_partition("a", "b", "t1", "ds=1", add=True)
    t = acidstream.table("t1@b", namespace="a", metastore=store_url, warehouse=store.warehouse)
    n = _txn_count(store)
    with pytest.raises(LinkReadOnlyError):
        t.delete(None)
    with pytest.raises(LinkReadOnlyError):
        t.merge(pa.table({"id": [1]}), on="id").when_matched_delete().execute()
    assert _txn_count(store) == n and t.read().num_rows == 3


def test_two_runs_racing_with_one_idempotency_key_apply_once(
    kv: Table, store: TxnStore, warehouse: str
) -> None:
    """The second run starts while the first is about to commit (a hook at its
    ``mutation.before_commit``) and commits first; the first's commit finds the key taken:
    its txn is aborted, its files removed, and it reports the other run's result. Before,
    the key was checked only at the start: the loser's commit conflict was retried and the
    update applied twice (n rose by 2, not 1)."""
    from acidstream.acid import faults

    raced: list[MutationResult] = []
    started: list[bool] = []

    def hook(step: str) -> None:
        if step == "mutation.before_commit" and not started:
            started.append(True)  # the racing run passes this step too: run it once
            raced.append(kv.update({"n": "n + 1"}, "id < 5", idempotency_key="bump"))

    faults.set_hook(hook)
    try:
        first = kv.update({"n": "n + 1"}, "id < 5", idempotency_key="bump", retries=1)
    finally:
        faults.set_hook(None)
    (second,) = raced
    assert not second.replayed and first.replayed
    assert (
        (first.write_id, first.rows_updated)
        == (second.write_id, second.rows_updated)
        == (
            second.write_id,
            5,
        )
    )
    assert rows_of(kv.read(), ["id", "n"]) == [(i, i + 1 if i < 5 else i) for i in range(10)]
    states = sorted(t.state.name for t in store.show_txns() if t.txn_id > second.write_id - 5)
    assert "ABORTED" in states  # the loser's txn
    # Only the winner's files exist: the loser removed its own.
    files = {str(p) for p in (Path(warehouse) / "kv").rglob("bucket_*")}
    assert set(second.files_written) <= files
    assert not [f for f in files if f"_{second.write_id - 1:07d}_" in f], sorted(files)


def test_a_once_only_commit_key_is_stored_by_one_commit(store: TxnStore) -> None:
    from acidstream.acid.errors import CommitKeyExistsError
    from acidstream.txn.catalog import TableDef

    store.create_table(
        TableDef("default", "k", (("id", "int"),), parameters={"transactional": "true"})
    )
    a, b = store.open_txns(2, user="u", host="h")
    store.commit_txn(b, key="_meta.k", value="b", db="default", table="k", key_once=True)
    with pytest.raises(CommitKeyExistsError, match="stored already"):
        store.commit_txn(a, key="_meta.k", value="a", db="default", table="k", key_once=True)
    assert store.txn_state(a) is TxnState.ABORTED
    assert store.get_table_param("default", "k", "_meta.k") == "b"
    # Committing the winner again is still a no-op (an unknown outcome is re-checked).
    store.commit_txn(b, key="_meta.k", value="b", db="default", table="k", key_once=True)
