"""StreamingConnection into list-bucketed tables: rows routed to ``col=value`` directories
or the default one inside each delta, every path (write, write_many, write_block,
write_rows, write_arrow), ROW__IDs unique per (write id, bucket), side files beside each
streaming file, partitions keeping the layout they were created with."""

from __future__ import annotations

import errno
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from acidstream.acid.errors import ConfigError, SerializationError, StorageError
from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.placement import Placement, TableLayout
from acidstream.acid.row_keys import RowIdSequence
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.recovery.fsck import fsck_table
from acidstream.recovery.repair import repair_table
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore
from tests.http.conftest import ServerProcess, base_config, write_config
from tests.ingest.conftest import snapshot_read
from tests.list_bucketing_tables import SKEW, make_lb_table
from tests.plugins.faulty_fs import FaultPlan, install


def rec(x: int | None, s: str, p: str = "a") -> bytes:
    return json.dumps({"x": x, "s": s, "p": p}).encode()


def files_under(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Every bucket file below ``root`` (relative path -> its rows, in file order)."""
    out = {}
    for f in sorted(root.rglob("bucket_*")):
        if f.name.endswith("_flush_length"):
            continue
        ev = pa_orc.read_table(str(f))
        out[str(f.relative_to(root))] = [
            {"o": o, "b": b, "r": r, **row}
            for o, b, r, row in zip(
                *(ev.column(c).to_pylist() for c in ("originalTransaction", "bucket", "rowId")),
                ev.column("row").to_pylist(),
                strict=True,
            )
        ]
    return out


def assert_row_ids_unique(files: dict[str, list[dict[str, Any]]]) -> None:
    keys = Counter((r["o"], r["b"], r["r"]) for rows in files.values() for r in rows)
    assert keys and max(keys.values()) == 1


def test_every_write_path_routes_rows_into_list_bucketing_dirs(store: TxnStore) -> None:
    t = make_lb_table(store)
    with StreamingConnection(
        "t", record_writer=StrictJsonWriter(), store=store, options=StreamingOptions()
    ) as c:
        c.begin_transaction()
        c.write(rec(6, "w"))
        c.write_many([rec(7, "m"), rec(20, "m")])
        res = c.write_block([rec(6, "b"), rec(None, "b"), rec(20, "b"), b"{bad"])
        assert res.accepted == 3 and [i for i, _ in res.rejected] == [3]
        c.write_rows([(20, "r"), (8, "r")], partition=["a"])
        c.write_arrow(pa.table({"x": [6, 9], "s": ["arrow", "arrow"]}), partition=["a"])
        c.commit_transaction()
    part = Path(str(t.location)) / "p=a"
    files = files_under(part)
    xs = {path: sorted((r["x"] is None, r["x"] or 0, r["s"]) for r in rows)
          for path, rows in files.items()}  # fmt: skip
    assert xs == {
        "delta_0000001_0000001/x=6/bucket_00000": [
            (False, 6, "arrow"), (False, 6, "b"), (False, 6, "w")],
        "delta_0000001_0000001/x=20/bucket_00000": [
            (False, 20, "b"), (False, 20, "m"), (False, 20, "r")],
        f"delta_0000001_0000001/{DEFAULT_DIR_NAME}/bucket_00000": [
            (False, 7, "m"), (False, 8, "r"), (False, 9, "arrow"), (True, 0, "b")],
    }  # fmt: skip
    assert_row_ids_unique(files)
    # rowIds of the write id are dense across the bucket's three files.
    assert sorted(r["r"] for rows in files.values() for r in rows) == list(range(10))
    # Each file is in ROW__ID order (Hive's merge needs it).
    for rows in files.values():
        assert [r["r"] for r in rows] == sorted(r["r"] for r in rows)
    got = snapshot_read(store, t)
    assert got.num_rows == 10
    assert sorted(got.column("s").to_pylist()).count("arrow") == 2


def test_batch_of_txns_keeps_row_ids_unique_and_side_files_beside_each_file(
    store: TxnStore,
) -> None:
    t = make_lb_table(store)
    delta = Path(str(t.location)) / "p=a" / "delta_0000001_0000003"
    with StreamingConnection(
        "t",
        record_writer=StrictJsonWriter(),
        store=store,
        options=StreamingOptions(txns_per_batch=3),
    ) as c:
        for k in range(3):
            c.begin_transaction()
            c.write_block([rec(6, f"{k}"), rec(1, f"{k}"), rec(6, f"{k}"), rec(20, f"{k}")])
            c.commit_transaction()
            if k == 0:
                sides = sorted(str(p.relative_to(delta)) for p in delta.rglob("*_flush_length"))
                assert sides == [
                    f"{DEFAULT_DIR_NAME}/bucket_00000_flush_length",
                    "x=20/bucket_00000_flush_length",
                    "x=6/bucket_00000_flush_length",
                ]
                # A reader sees the first txn through the files cut at their side files.
                assert snapshot_read(store, t).num_rows == 4
    assert not list(delta.rglob("*_flush_length"))  # deleted at close
    files = files_under(delta)
    assert set(files) == {"x=6/bucket_00000", "x=20/bucket_00000",
                          f"{DEFAULT_DIR_NAME}/bucket_00000"}  # fmt: skip
    assert_row_ids_unique(files)
    for wid in (1, 2, 3):
        assert sorted(r["r"] for rows in files.values() for r in rows if r["o"] == wid) == [
            0, 1, 2, 3]  # fmt: skip
    assert snapshot_read(store, t).num_rows == 12


def test_partition_created_before_the_skew_keeps_plain_layout(store: TxnStore) -> None:
    t = make_lb_table(store, skewed=None)

    def write(part: str) -> None:
        with StreamingConnection("t", record_writer=StrictJsonWriter(), store=store) as c:
            c.begin_transaction()
            c.write_block([rec(6, "s", part), rec(7, "s", part)])
            c.commit_transaction()

    write("old")
    store.set_skewed("default", "t", SKEW)
    write("old")
    write("new")
    root = Path(str(t.location))
    assert sorted(files_under(root / "p=old")) == [
        "delta_0000001_0000001/bucket_00000",
        "delta_0000002_0000002/bucket_00000",
    ]
    assert sorted(files_under(root / "p=new")) == [
        f"delta_0000003_0000003/{DEFAULT_DIR_NAME}/bucket_00000",
        "delta_0000003_0000003/x=6/bucket_00000",
    ]
    # And a partition created while skewed keeps its directories once the table is not.
    store.set_skewed("default", "t", None)
    write("new")
    assert "delta_0000004_0000004/x=6/bucket_00000" in files_under(root / "p=new")
    assert snapshot_read(store, t).num_rows == 8


def test_connection_learns_each_partitions_layout_without_listing_the_partitions(
    store: TxnStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a connection costs the same for 30,000 partitions as for one: it never
    lists them, yet rows still follow the layout each partition was created with."""
    t = make_lb_table(store, skewed=None)
    store.add_partition("default", "t", ["old"])  # created plain
    store.set_skewed("default", "t", SKEW)

    def no_listing(*_: object) -> None:
        raise AssertionError("the connection listed the table's partitions")

    monkeypatch.setattr(store, "list_partitions", no_listing)
    with StreamingConnection("t", record_writer=StrictJsonWriter(), store=store) as c:
        c.begin_transaction()
        c.write_block([rec(6, "a", "old"), rec(6, "b", "new")])
        c.commit_transaction()
    root = Path(str(t.location))
    assert sorted(files_under(root / "p=old")) == ["delta_0000001_0000001/bucket_00000"]
    assert sorted(files_under(root / "p=new")) == ["delta_0000001_0000001/x=6/bucket_00000"]
    monkeypatch.undo()
    assert snapshot_read(store, t).num_rows == 2


def test_default_dir_name_as_partition_value_goes_to_the_dead_letters(
    store: TxnStore, tmp_path: Path
) -> None:
    t = make_lb_table(store)
    dead = tmp_path / "dead"
    with StreamingConnection(
        "t",
        record_writer=StrictJsonWriter(),
        store=store,
        options=StreamingOptions(dead_letter_path=str(dead)),
    ) as c:
        c.begin_transaction()
        c.write(rec(6, "one", DEFAULT_DIR_NAME))
        res = c.write_block([rec(6, "two", DEFAULT_DIR_NAME), rec(6, "ok")])
        assert res.accepted == 1 and isinstance(res.rejected[0][1], SerializationError)
        c.commit_transaction()
        assert c.stats().bad_records == 2
    letters = [json.loads(line) for f in dead.iterdir() for line in f.read_text().splitlines()]
    assert len(letters) == 2 and all(DEFAULT_DIR_NAME in d["reason"] for d in letters)
    assert [p.name for p in Path(str(t.location)).iterdir() if p.is_dir()] == ["p=a"]
    assert snapshot_read(store, t).column("s").to_pylist() == ["ok"]


def test_default_dir_name_as_partition_value_raises_without_dead_letters(
    store: TxnStore,
) -> None:
    make_lb_table(store)
    with StreamingConnection("t", record_writer=StrictJsonWriter(), store=store) as c:
        c.begin_transaction()
        with pytest.raises(SerializationError):
            c.write(rec(6, "one", DEFAULT_DIR_NAME))
        c.write(rec(6, "ok"))  # the txn goes on
        c.commit_transaction()


def test_abort_after_auto_flush_keeps_files_of_every_dir_readable(store: TxnStore) -> None:
    t = make_lb_table(store)
    with StreamingConnection(
        "t",
        record_writer=StrictJsonWriter(),
        store=store,
        options=StreamingOptions(txns_per_batch=2, memory_limit_bytes=1),
    ) as c:
        c.begin_transaction()
        c.write_many([rec(6, "kept"), rec(1, "kept")])
        c.commit_transaction()
        c.begin_transaction()
        c.write_many([rec(6, "gone"), rec(20, "gone")])  # auto-flushed into the files
        c.abort_transaction()
    assert sorted(snapshot_read(store, t).column("s").to_pylist()) == ["kept", "kept"]
    delta = Path(str(t.location)) / "p=a" / "delta_0000001_0000002"
    assert not list(delta.rglob("*_flush_length"))
    assert {str(p.relative_to(delta)) for p in delta.rglob("bucket_*")} == {
        "x=6/bucket_00000", "x=20/bucket_00000", f"{DEFAULT_DIR_NAME}/bucket_00000"}  # fmt: skip


def test_fsck_and_repair_treat_list_bucketing_dirs_as_part_of_the_delta(
    store: TxnStore,
) -> None:
    """A writer that died inside list-bucketing directories: fsck finds its side files
    (not unknown directories), repair finishes each file where it sits."""
    t = make_lb_table(store)
    store.add_partition("default", "t", ["a"])
    txn = store.open_txns(1, user="test", host="h")[0]
    wid = store.allocate_write_ids([txn], "default", "t")[txn]
    place = Placement(TableLayout.of(t, partitions=store.list_partitions("default", "t")))
    seq = RowIdSequence()
    for lb, rows in place.lb_groups("p=a", pa.table({"x": [6, 1, 20], "s": ["a", "b", "c"]})):
        w = place.insert_writer(
            "p=a", 0, min_write_id=wid, max_write_id=wid + 1, statement_id=-1,
            streaming=True, options=OrcWriterOptions(), lb_dir=lb, row_ids=seq,
        )  # fmt: skip
        w.insert_arrow(wid, rows)
        w.flush()  # ...and the writer dies here: its side file stays
    store.commit_txn(txn)
    txn2 = store.open_txns(1, user="test", host="h")[0]
    store.allocate_write_ids([txn2], "default", "t")
    store.abort_txn(txn2)
    report = fsck_table(store, store.get_table("default", "t"))
    kinds = Counter(f.kind for f in report.findings)
    assert kinds["unknown_file"] == 0, report.findings
    assert kinds["dead_writer_side_file"] == 3
    repaired = repair_table(store, store.get_table("default", "t"), apply=True)
    recovered = [a for a in repaired.actions if a.action == "recover_file" and a.done]
    assert len(recovered) == 3, repaired.actions
    delta = Path(str(t.location)) / "p=a" / f"delta_{wid:07d}_{wid + 1:07d}"
    assert not list(delta.rglob("*_flush_length"))
    assert len(list(delta.rglob("bucket_00000"))) == 3
    assert sorted(snapshot_read(store, t).column("x").to_pylist()) == [1, 6, 20]


def test_http_server_routes_rows_and_rejects_the_default_dir_partition_value(
    store: TxnStore, store_url: str, warehouse: str, tmp_path: Path
) -> None:
    """The HTTP server writes through the connection (same placement) and refuses the
    reserved partition value per line, at parse time, as a bad record."""
    t = make_lb_table(store)
    cfg = base_config(store_url, warehouse, {"default.t": {"format": "json"}})
    proc = ServerProcess(write_config(tmp_path / "cfg.yaml", cfg), tmp_path / "log", None)
    url = proc.start()
    try:
        body = b"\n".join(
            [rec(6, "h"), rec(7, "h"), rec(20, "h"), rec(6, "bad", DEFAULT_DIR_NAME), rec(6, "h")]
        )
        with httpx.Client(base_url=url, timeout=30) as client:
            r = client.post(
                "/v1/tables/default.t",
                content=body,
                headers={"Content-Type": "application/x-ndjson"},
            )
    finally:
        proc.kill()
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["accepted"] == 4 and out["rejected"] == 1
    assert out["rejections"][0]["line"] == 4
    assert DEFAULT_DIR_NAME in out["rejections"][0]["reason"]
    files = files_under(Path(str(t.location)) / "p=a")
    assert {str(Path(p).parent.name) for p in files} == {"x=6", "x=20", DEFAULT_DIR_NAME}
    assert sum(len(rows) for rows in files.values()) == 4
    assert_row_ids_unique(files)


@pytest.fixture
def fault_plan() -> Iterator[FaultPlan]:
    p = install()
    yield p
    p.disarm()


@pytest.mark.parametrize("op", ["write", "hflush"])
def test_disk_failure_mid_batch_keeps_committed_rows_of_every_dir(
    store: TxnStore, tmp_path: Path, fault_plan: FaultPlan, op: str
) -> None:
    """A storage failure aborts the txn and abandons the files of every list-bucketing
    directory (each cut back to its last flush): what was committed reads back exactly."""

    def stream(name: str, txns: int) -> tuple[list[str], StorageError | None]:
        committed: list[str] = []
        with StreamingConnection(
            name,
            record_writer=StrictJsonWriter(),
            store=store,
            options=StreamingOptions(txns_per_batch=4),
        ) as c:
            for k in range(txns):
                c.begin_transaction()
                msgs = [f"{name}-{k}-{i}" for i in range(300)]
                c.write_block([rec((6, 20, i)[i % 3], m) for i, m in enumerate(msgs)])
                try:
                    c.commit_transaction()
                except StorageError as e:
                    return committed, e
                committed += msgs
        return committed, None

    def table(name: str) -> TableDef:
        return store.create_table(
            TableDef(
                db="default", name=name, columns=(("x", "int"), ("s", "string")),
                partition_keys=(("p", "string"),), parameters={"transactional": "true"},
                skewed=SKEW, location=f"faulty://{tmp_path}/{name}",
            )
        )  # fmt: skip

    table("dry")
    stream("dry", 8)
    t = table("t")
    fault_plan.arm(op, fault_plan.counts[op] // 2, errno.EIO)
    committed, failure = stream("t", 8)
    fault_plan.disarm()
    assert failure is not None and "committed data is intact" in str(failure)
    assert committed  # some txns committed before the failure
    assert sorted(snapshot_read(store, t).column("s").to_pylist()) == sorted(committed)
    more, failure = stream("t", 1)
    assert failure is None
    got = snapshot_read(store, t).column("s").to_pylist()
    assert sorted(got) == sorted(committed + more)


def test_static_partition_named_like_the_default_dir_is_refused_at_connect(
    store: TxnStore,
) -> None:
    make_lb_table(store)
    with pytest.raises(ConfigError, match=DEFAULT_DIR_NAME):
        StreamingConnection(
            "t",
            record_writer=StrictJsonWriter(),
            store=store,
            static_partition=[DEFAULT_DIR_NAME],
        )
    assert store.list_partitions("default", "t") == []
