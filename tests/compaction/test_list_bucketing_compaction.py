"""Compaction of list-bucketed partitions: major and minor keep every row in the
list-bucketing directory it was written to, inside the new base/delta, with its ROW__ID."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as pa_orc

from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME
from acidstream.acid.reader import read_path
from acidstream.compaction import Worker
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.compaction_sql import READY_FOR_CLEANING, CompactionQueue
from acidstream.txn.store import TxnStore
from tests.acid.orc_builders import write_original
from tests.compaction.conftest import Tbl
from tests.list_bucketing_tables import make_lb_table

DIRS = {"x=6", "x=20", DEFAULT_DIR_NAME}


def lb_table(store: TxnStore) -> TableDef:
    return make_lb_table(store)


def stream(store: TxnStore, batches: list[list[int]], tag: str) -> None:
    """One connection, one transaction batch of ``len(batches)`` txns into p=a."""
    with StreamingConnection(
        "t",
        record_writer=StrictJsonWriter(),
        store=store,
        options=StreamingOptions(txns_per_batch=len(batches)),
    ) as c:
        for k, xs in enumerate(batches):
            c.begin_transaction()
            c.write_block(
                [
                    json.dumps({"x": x, "s": f"{tag}{k}-{i}", "p": "a"}).encode()
                    for i, x in enumerate(xs)
                ]
            )
            c.commit_transaction()


def read(store: TxnStore, t: TableDef) -> dict[tuple[int, int, int], tuple[Any, ...]]:
    """ROW__ID -> (x, s) of every visible row of p=a."""
    txns = store.get_valid_txns()
    wids = store.get_valid_write_ids(t.db, t.name, txns)
    got = read_path(
        f"{t.location}/p=a", write_ids=wids, txns=txns, include_row_id=True, schema=t.schema
    )
    rid = got.column("row__id").combine_chunks()
    keys = zip(*(rid.field(i).to_pylist() for i in range(3)), strict=True)
    vals = zip(got.column("x").to_pylist(), got.column("s").to_pylist(), strict=True)
    out = dict(zip(keys, vals, strict=True))
    assert len(out) == got.num_rows  # ROW__IDs unique
    return out


def compact(store: TxnStore, *, major: bool) -> Any:
    q = CompactionQueue(store)
    _, accepted = q.request("default", "t", "p=a", major=major)
    assert accepted
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == READY_FOR_CLEANING, out
    return out


def files_of(directory: Path) -> dict[str, pa.Table]:
    return {
        str(f.relative_to(directory).parent): pa_orc.read_table(str(f))
        for f in sorted(directory.rglob("bucket_*"))
    }


def check_dirs(files: dict[str, pa.Table]) -> int:
    """Every row sits in the directory of its x; returns the row count."""
    n = 0
    for d, ev in files.items():
        xs = [r["x"] for r in ev.column("row").to_pylist()]
        if d == "x=6":
            assert set(xs) == {6}
        elif d == "x=20":
            assert set(xs) == {20}
        else:
            assert d == DEFAULT_DIR_NAME and not {6, 20} & set(xs)
        n += len(xs)
    return n


def populate(store: TxnStore, t: TableDef) -> None:
    stream(store, [[6, 7, 20, 6], [None, 6]], "a")  # a batch of two txns
    stream(store, [[20, 1, 2]], "b")
    stream(store, [[6, 6, 9]], "c")
    # Delete one row of x=6 and one of the default directory (split-update deletes).
    before = read(store, t)
    victims = sorted(k for k, (x, s) in before.items() if s in ("a0-0", "b0-1"))
    assert len(victims) == 2
    Tbl(store, t).delete(victims, partition="p=a")


def test_major_compaction_keeps_list_bucketing_dirs_and_row_ids(store: TxnStore) -> None:
    t = lb_table(store)
    populate(store, t)
    before = read(store, t)
    out = compact(store, major=True)
    [base] = out.output_dirs
    assert Path(base).name.startswith("base_0000005_v")
    files = files_of(Path(base))
    assert set(files) == DIRS  # nothing at the base's top level
    assert check_dirs(files) == len(before) == out.inserts == 10
    assert (Path(base) / "_orc_acid_version").read_text() == "2"
    # Rows keep their ROW__IDs; the snapshot after equals the one before.
    keys = [
        k
        for ev in files.values()
        for k in zip(
            *(ev.column(c).to_pylist() for c in ("originalTransaction", "bucket", "rowId")),
            strict=True,
        )
    ]
    assert sorted(keys) == sorted(before)
    assert read(store, t) == before


def test_minor_compaction_keeps_list_bucketing_dirs(store: TxnStore) -> None:
    t = lb_table(store)
    populate(store, t)
    before = read(store, t)
    out = compact(store, major=False)
    ins, dele = (Path(d) for d in out.output_dirs)
    assert ins.name.startswith("delta_0000001_0000005_v")
    assert dele.name.startswith("delete_delta_0000001_0000005_v")
    files = files_of(ins)
    assert set(files) == DIRS
    assert check_dirs(files) == 12 == out.inserts  # deletes are not applied by a minor
    assert set(files_of(dele)) == {"."} and out.deletes == 2
    assert read(store, t) == before
    # A major compaction after the minor one still keeps them.
    out2 = compact(store, major=True)
    assert set(files_of(Path(out2.output_dirs[0]))) == DIRS
    assert read(store, t) == before


def test_major_compaction_with_original_files_places_their_rows_by_value(
    store: TxnStore,
) -> None:
    # Pre-ACID files at the partition root get synthetic ROW__IDs through the reader, which
    # does not tell directories apart: every row is placed by value with the partition's skew.
    t = lb_table(store)
    stream(store, [[6, 7, 20]], "a")
    write_original(
        Path(str(t.location)) / "p=a" / "000000_0",
        {"x": [6, 5, None, 20], "s": ["o0", "o1", "o2", "o3"]},
        types={"x": pa.int32(), "s": pa.string()},
    )
    before = read(store, t)
    assert len(before) == 7
    out = compact(store, major=True)
    files = files_of(Path(out.output_dirs[0]))
    assert set(files) == DIRS
    assert check_dirs(files) == 7
    xs = {d: sorted(str(r["x"]) for r in ev.column("row").to_pylist()) for d, ev in files.items()}
    assert xs == {"x=6": ["6", "6"], "x=20": ["20", "20"], DEFAULT_DIR_NAME: ["5", "7", "None"]}
    assert read(store, t) == before
