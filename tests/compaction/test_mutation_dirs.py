"""Compaction and cleaning of the directories Hive 3 mutations leave (issue 30 item 7).

Minor compaction folds ``delta_W_W_SSSS`` and ``delete_delta_W_W_SSSS`` of every statement
into ``delta_<min>_<hwm>_v<ctxn>`` / ``delete_delta_<min>_<hwm>_v<ctxn>`` (no statement id
in the names; every event keeps its ROW__ID, the statement id in its bucket property
included, as Hive's compactor copies ``ROW__ID``). Major compaction writes
``base_<hwm>_v<ctxn>`` without the deleted rows, every surviving row under its ROW__ID
(the ones updates wrote too). The table reads the same before and after each, and the
Cleaner removes exactly the directories the compaction made obsolete.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc
import pytest

from acidstream.acid import bucket_codec, layout
from acidstream.acid.errors import NotEnoughHistoryError
from acidstream.compaction import Cleaner, Worker
from acidstream.compaction.worker import CompactionOutcome
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.locks import DataOperationType
from acidstream.txn.store import TxnStore
from tests.acid.test_mutation_read import build_history
from tests.mutation_tables import MutationTable, create_table, row, rows_of


def _compact(
    store: TxnStore, *, major: bool, partition: str | None = None, **worker: Any
) -> CompactionOutcome:
    q = CompactionQueue(store)
    cq_id, accepted = q.request("default", "t", partition, major=major)
    assert accepted
    out = Worker(store, queue=q, **worker).run_once()
    assert out is not None and out.id == cq_id
    assert out.state == "r", out.message
    return out


def _events(d: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in sorted(Path(d).glob("bucket_*")):
        t = orc.ORCFile(str(f)).read()
        for e in t.to_pylist():
            e["file"] = f.name
            out.append(e)
    return out


def _names(t: MutationTable, partition: str = "") -> set[str]:
    return {p.name for p in Path(t.dir(partition)).iterdir()}


@pytest.mark.parametrize("buckets", [0, 3], ids=["unbucketed", "bucketed"])
def test_minor_compaction_merges_every_statement(store: TxnStore, buckets: int) -> None:
    t = MutationTable(store, create_table(store, buckets=buckets))
    w = build_history(t)
    before = rows_of(t.read())
    assert before == t.expected()
    out = _compact(store, major=False)
    hwm = out.highest_write_id
    assert hwm == w["multi"] and out.txn_id is not None
    names = [Path(d).name for d in out.output_dirs]
    assert names == [
        layout.delta_dir_name(1, hwm, visibility_txn_id=out.txn_id),
        layout.delta_dir_name(1, hwm, visibility_txn_id=out.txn_id, delete=True),
    ]
    ins, dels = _events(out.output_dirs[0]), _events(out.output_dirs[1])
    # Every insert event of every statement, its ROW__ID (statement id in the bucket
    # property) unchanged: the rows of the MERGE's update clause keep statement 1. Rows
    # the multi-statement txn inserted and deleted itself are left out with their delete
    # events (no snapshot saw them).
    self_deleted = {k for k, by in t.deleted.items() if by == k[0]}
    assert len(self_deleted) == 2
    got_ins = {(e["originalTransaction"], e["bucket"], e["rowId"]) for e in ins}
    assert got_ins == t.inserted - self_deleted
    m = w["merge"]
    assert {bucket_codec.decode(b)[1] for o, b, _ in got_ins if o == m} == {0, 1}
    assert all(e["currentTransaction"] == e["originalTransaction"] for e in ins)
    # Every delete event, each in the file of the deleted row's writer id.
    got_del = [(e["originalTransaction"], e["bucket"], e["rowId"], e["currentTransaction"])
               for e in dels]  # fmt: skip
    assert sorted(got_del) == sorted(
        (*k, by) for k, by in t.deleted.items() if k not in self_deleted
    )
    assert all(e["file"] == layout.bucket_file_name(bucket_codec.decode_writer_id(e["bucket"]))
               for e in dels)  # fmt: skip
    assert all(e["operation"] == 2 and e["row"] is None for e in dels)
    assert rows_of(t.read()) == before
    Cleaner(store).run_once()
    assert _names(t) == set(names)
    assert rows_of(t.read()) == before


@pytest.mark.parametrize("buckets", [0, 3], ids=["unbucketed", "bucketed"])
def test_major_compaction_drops_deleted_rows_and_keeps_row_ids(
    store: TxnStore, buckets: int
) -> None:
    t = MutationTable(store, create_table(store, buckets=buckets))
    build_history(t)
    before = rows_of(t.read())
    out = _compact(store, major=True)
    assert out.txn_id is not None and out.highest_write_id is not None
    (base,) = out.output_dirs
    assert Path(base).name == layout.base_dir_name(
        out.highest_write_id, visibility_txn_id=out.txn_id
    )
    ev = _events(base)
    model = t.expected()
    assert sorted(((e["originalTransaction"], e["bucket"], e["rowId"]),
                   *e["row"].values()) for e in ev) == model  # fmt: skip
    assert all(e["operation"] == 0 for e in ev)
    assert all(e["currentTransaction"] == e["originalTransaction"] for e in ev)
    assert rows_of(t.read()) == before == model
    Cleaner(store).run_once()
    assert _names(t) == {Path(base).name}
    assert rows_of(t.read()) == before


def test_a_second_minor_compaction_of_the_same_pair_is_refused(store: TxnStore) -> None:
    """Minor compaction again with nothing new: the earlier output (a delta and a delete
    delta of one range, no statement id) is all there is to merge. Rewriting it would
    give a second pair of the same range, which readers take together with the first
    (the same-range rule): every row twice. It is refused, and the table reads the same."""
    t = MutationTable(store, create_table(store))
    build_history(t)
    first = _compact(store, major=False)
    expected = t.expected()
    q = CompactionQueue(store)
    q.request("default", "t", None, major=False)
    again = Worker(store, queue=q).run_once()
    assert again is not None
    assert rows_of(t.read()) == expected
    # Nothing written; the first compaction's inputs still await the Cleaner, so the
    # request goes to it ("ready for cleaning", Hive's needsCleaning) instead of refused.
    assert again.output_dirs == () and "thresholds" in (again.message or ""), again
    assert again.state == "r"
    Cleaner(store).run_once()
    assert _names(t) == {Path(d).name for d in first.output_dirs}
    assert rows_of(t.read()) == expected
    # Something new to merge: a minor compaction runs again, over a wider range.
    w = t.delete([0])
    out = _compact(store, major=False)
    assert [Path(d).name for d in out.output_dirs] == [
        layout.delta_dir_name(1, w, visibility_txn_id=out.txn_id or 0),
        layout.delta_dir_name(1, w, visibility_txn_id=out.txn_id or 0, delete=True),
    ]
    assert rows_of(t.read()) == t.expected()


@pytest.mark.parametrize("buckets", [0, 2], ids=["unbucketed", "bucketed"])
def test_minor_compaction_of_one_write_id_keeps_its_own_deletes(
    store: TxnStore, buckets: int
) -> None:
    """A txn whose later statements delete rows an earlier one inserted, compacted alone
    (after a major compaction): ``delta_W_W_vT`` + ``delete_delta_W_W_vT`` have no statement
    ids, so that delete delta no longer applies to that delta (Hive's qualification rule);
    the compactor leaves such rows and their delete events out, so they stay gone."""
    t = MutationTable(store, create_table(store, buckets=buckets))
    t.insert([row(i) for i in range(10)])
    _compact(store, major=True)
    Cleaner(store).run_once()
    with t.txn(DataOperationType.UPDATE) as tx:
        new = tx.insert([row(i) for i in range(100, 106)], stmt=0)
        tx.delete([new[0], t.keys_of([3])[0]], stmt=1)
        tx.update({new[1]: row(101, 7), t.keys_of([4])[0]: row(4, 44)}, stmt=2)
    w = tx.write_id
    expected = t.expected()
    assert rows_of(t.read()) == expected
    out = _compact(store, major=False)
    assert [Path(d).name for d in out.output_dirs] == [
        layout.delta_dir_name(w, w, visibility_txn_id=out.txn_id or 0),
        layout.delta_dir_name(w, w, visibility_txn_id=out.txn_id or 0, delete=True),
    ]
    assert rows_of(t.read()) == expected
    assert rows_of(t.read(as_of=w - 1)) == t.expected(as_of=w - 1)
    ins = {(e["originalTransaction"], e["bucket"], e["rowId"]) for e in _events(out.output_dirs[0])}
    dels = {
        (e["originalTransaction"], e["bucket"], e["rowId"]) for e in _events(out.output_dirs[1])
    }
    assert new[0] not in ins and new[1] not in ins and new[2] in ins
    # Only the delete events naming older rows (ids 3 and 4 of the first insert) remain.
    assert dels == {k for k, by in t.deleted.items() if by == w and k[0] != w}
    assert len(dels) == 2
    Cleaner(store).run_once()
    assert rows_of(t.read()) == expected


def test_time_travel_before_each_mutation_after_a_minor_compaction(store: TxnStore) -> None:
    """The minor compaction's deltas keep every event with its currentTransaction, so a
    read as of ``W-1`` still drops the mutation's events, before and after cleaning."""
    t = MutationTable(store, create_table(store, buckets=2))
    w = build_history(t)
    _compact(store, major=False)
    for cleaned in (False, True):
        if cleaned:
            Cleaner(store).run_once()
        for name in ("update", "split_update", "delete", "merge", "multi"):
            before = w[name] - 1
            assert rows_of(t.read(as_of=before)) == t.expected(as_of=before), (name, cleaned)


def test_mutations_of_original_files_compact_major(store: TxnStore) -> None:
    """A table converted to ACID: pre-ACID files at the root with synthetic ROW__IDs
    (write id 0, rowIds counted per bucket in path order), updated, deleted and merged;
    major compaction (the reader path) keeps the survivors' synthetic ROW__IDs."""
    t = MutationTable(store, create_table(store))
    root = Path(t.dir())
    root.mkdir(parents=True, exist_ok=True)
    originals: dict[tuple[int, int, int], tuple[Any, ...]] = {}
    next_row = {0: 0, 1: 0}
    for name, lo in (("000000_0", 0), ("000000_0_copy_1", 10), ("000001_0", 20)):
        data = [row(i) for i in range(lo, lo + 10)]
        orc.write_table(
            pa.table(
                {
                    "id": pa.array([r[0] for r in data], pa.int64()),
                    "name": [r[1] for r in data],
                    "salary": pa.array([r[2] for r in data], pa.int32()),
                }
            ),
            str(root / name),
        )
        b = int(name[:6])
        for r in data:
            originals[(0, bucket_codec.encode(b, 0), next_row[b])] = r
            next_row[b] += 1
    t.model = {"": dict(originals)}
    t.history[0] = {"": dict(originals)}
    t.inserted.update(originals)
    assert rows_of(t.read()) == t.expected()
    w = t.update({3: row(3, 333), 25: row(25, 2525)})  # rows of writer 0 and writer 1
    t.delete([12, 21])
    t.merge(inserts=[row(100)], updates={15: row(15, 1515)}, deletes=[29])
    assert rows_of(t.read()) == t.expected()
    assert rows_of(t.read(as_of=w - 1)) == t.expected(as_of=w - 1)
    out = _compact(store, major=True)
    ev = _events(out.output_dirs[0])
    assert sorted(((e["originalTransaction"], e["bucket"], e["rowId"]),
                   *e["row"].values()) for e in ev) == t.expected()  # fmt: skip
    Cleaner(store).run_once()
    assert _names(t) == {Path(out.output_dirs[0]).name}
    assert rows_of(t.read()) == t.expected()


def test_mutations_after_compactions_read_the_same_throughout(store: TxnStore) -> None:
    """Minor, then mutations of rows the minor compaction holds (and a MERGE deleting a
    row its own insert clause wrote), minor again, more, major: equal to the model at
    every step, before and after each Cleaner pass."""
    t = MutationTable(store, create_table(store, buckets=2))
    build_history(t)

    def check() -> None:
        assert rows_of(t.read()) == t.expected()

    for step in ("minor", "mutate", "minor", "mutate", "major", "mutate", "minor", "major"):
        if step == "mutate":
            live = sorted({r[0] for r in t.visible().values()})
            t.update({live[0]: row(live[0], -live[0]), live[-1]: row(live[-1], 7)})
            t.delete([live[1]])
            with t.txn(DataOperationType.UPDATE) as tx:
                new = tx.insert([row(live[-1] + 1), row(live[-1] + 2)], stmt=0)
                tx.update({t.keys_of([live[2]])[0]: row(live[2], 42)}, stmt=1)
                tx.delete([new[0], t.keys_of([live[3]])[0]], stmt=2)
            check()
            continue
        _compact(store, major=step == "major")
        check()
        Cleaner(store).run_once()
        check()
    names = _names(t)
    assert len(names) == 1 and next(iter(names)).startswith("base_")


def test_compaction_leaves_a_later_mutation_alone_and_cleaner_keeps_it(
    store: TxnStore,
) -> None:
    """A mutation that commits after the compactor's snapshot (its write id above the
    hwm) keeps every statement's directory through compaction and cleaning; the one
    still open when the Cleaner runs too."""
    t = MutationTable(store, create_table(store))
    build_history(t)
    q = CompactionQueue(store)
    q.request("default", "t", None, major=True)
    with t.txn(DataOperationType.UPDATE) as open_tx:
        open_tx.insert([row(300)], stmt=0)
        open_tx.update({t.keys_of([0])[0]: row(0, 1)}, stmt=1)
        open_tx.write()
        # The compactor runs while this mutation is open: its write id is above the hwm.
        out = Worker(store, queue=q).run_once()
        assert out is not None and out.state == "r", out and out.message
        assert out.highest_write_id == open_tx.write_id - 1
        Cleaner(store).run_once()
        mine = {
            layout.delta_dir_name(open_tx.write_id, open_tx.write_id, statement_id=s, delete=dl)
            for s, dl in ((0, False), (1, False), (1, True))
        }
        assert mine <= _names(t)
    later = t.merge(inserts=[row(400)], updates={300: row(300, 3)}, deletes=[6])
    assert rows_of(t.read()) == t.expected()
    Cleaner(store).run_once()  # the compaction's Cleaner wait is over now
    left = _names(t)
    base = Path(out.output_dirs[0]).name
    assert left == mine | {base} | {
        layout.delta_dir_name(later, later, statement_id=s, delete=dl)
        for s, dl in ((0, False), (1, False), (1, True), (2, True))
    }
    assert rows_of(t.read()) == t.expected()


def test_cleaner_removes_an_aborted_mutations_directories(store: TxnStore) -> None:
    t = MutationTable(store, create_table(store))
    t.insert([row(i) for i in range(10)])
    before = _names(t)
    w = t.merge(inserts=[row(50)], updates={1: row(1, 0)}, deletes=[2], outcome="abort")
    aborted = _names(t) - before
    assert aborted == {
        layout.delta_dir_name(w, w, statement_id=s, delete=dl)
        for s, dl in ((0, False), (1, False), (1, True), (2, True))
    }
    assert rows_of(t.read()) == t.expected()
    Cleaner(store).run_once()
    assert _names(t) == before
    assert rows_of(t.read()) == t.expected()


@pytest.mark.spark
def test_spark_engine_major_compaction_of_mutations(store: TxnStore, spark: Any) -> None:
    t = MutationTable(store, create_table(store, buckets=3))
    build_history(t)
    before = rows_of(t.read())
    out = _compact(store, major=True, engine="spark", spark=spark)
    ev = _events(out.output_dirs[0])
    assert sorted(((e["originalTransaction"], e["bucket"], e["rowId"]),
                   *e["row"].values()) for e in ev) == t.expected() == before  # fmt: skip
    Cleaner(store).run_once()
    assert rows_of(t.read()) == before


@pytest.mark.spark
@pytest.mark.parametrize("major", [True, False], ids=["major", "minor"])
def test_jvm_orc_reads_compacted_mutations(store: TxnStore, major: bool, jvm_orc: Any) -> None:
    t = MutationTable(store, create_table(store, buckets=2))
    build_history(t)
    out = _compact(store, major=major)
    files = [f for d in out.output_dirs for f in sorted(Path(d).glob("bucket_*"))]
    assert len(files) >= 2
    for f in files:
        got = jvm_orc.read(str(f))
        py = orc.ORCFile(str(f))
        assert got["rows"] == got["rows_read"] == py.nrows > 0
        assert got["schema"] == t.schema.orc_event_schema()
        assert got["metadata"]["hive.acid.key.index"].count(";") == got["stripes"]


def _random_mutation(t: MutationTable, rng: random.Random, next_id: list[int]) -> None:
    """One random statement (or multi-statement txn), committed or aborted."""
    live = sorted({r[0] for r in t.visible().values()})
    outcome = "abort" if rng.random() < 0.15 else "commit"

    def fresh(n: int) -> list[Any]:
        ids = range(next_id[0], next_id[0] + n)
        next_id[0] += n
        return [row(i) for i in ids]

    def pick(k: int) -> list[int]:
        return rng.sample(live, min(k, len(live)))

    kind = rng.choice(["insert", "update", "split", "delete", "merge", "multi"])
    if kind == "insert" or len(live) < 6:
        t.insert(fresh(rng.randint(1, 6)))
        return
    if kind == "update":
        t.update({i: row(i, rng.randint(0, 999)) for i in pick(3)}, outcome=outcome)
    elif kind == "delete":
        t.delete(pick(2), outcome=outcome)
    elif kind == "merge":
        ids = pick(4)
        t.merge(
            inserts=fresh(rng.randint(0, 3)),
            updates={i: row(i, -i) for i in ids[:2]},
            deletes=ids[2:],
            outcome=outcome,
        )
    else:
        with t.txn(DataOperationType.UPDATE, outcome=outcome) as tx:
            ids = pick(3)
            if kind == "split":
                tx.delete(t.keys_of(ids), stmt=0)
                tx.insert([row(i, i + 1) for i in ids], stmt=1)
            else:
                new = tx.insert(fresh(3), stmt=0)
                tx.delete([new[rng.randrange(3)], *t.keys_of(ids[:1])], stmt=1)
                tx.update({t.keys_of([ids[1]])[0]: row(ids[1], 5)}, stmt=2)


@pytest.mark.parametrize("seed", range(8))
def test_random_mutations_and_compactions_equal_the_model(store: TxnStore, seed: int) -> None:
    """Random mutations (committed and aborted), minor and major compactions and Cleaner
    passes: the table equals the model after each step, and a read as of any earlier
    write id equals the model then, or (older than every base left, the newest a major
    compaction's) fails with ``NotEnoughHistoryError`` as Hive's ``ACID_NOT_ENOUGH_HISTORY``."""
    rng = random.Random(seed)
    t = MutationTable(store, create_table(store, buckets=2))
    next_id = [0]
    t.insert([row(i) for i in range(10)])
    next_id[0] = 10
    base_hwm = 0
    for _ in range(25):
        r = rng.random()
        if r < 0.12:
            q = CompactionQueue(store)
            major = rng.random() < 0.5
            q.request("default", "t", None, major=major)
            out = Worker(store, queue=q).run_once()
            assert out is not None and out.state in ("r", "c"), out and out.message
            if major and out.state == "r" and out.highest_write_id is not None:
                base_hwm = out.highest_write_id
        elif r < 0.2:
            Cleaner(store).run_once()
        else:
            _random_mutation(t, rng, next_id)
        assert rows_of(t.read()) == t.expected()
        as_of = rng.choice(sorted(t.history))
        try:
            got = rows_of(t.read(as_of=as_of))
        except NotEnoughHistoryError:
            # Only older than the newest compacted base, with no older base left to read.
            assert as_of < base_hwm
            bases = [p.name for p in Path(t.dir()).iterdir() if p.name.startswith("base_")]
            usable = [b for b in bases if layout.parse_dir_name(b).write_id <= as_of]  # type: ignore[union-attr]
            assert usable == [], (as_of, bases)
        else:
            assert got == t.expected(as_of=as_of), as_of
