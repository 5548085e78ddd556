"""MERGE with a Spark DataFrame source (``acidstream.sinks.spark_merge``): the join on Spark,
the files written by executor tasks, one txn committed by the driver.

The oracle is the Python engine (``acidstream.mutation``) run on a twin table with the same
history and the same source rows, plus a plain-Python model of the MERGE for the counts
and the rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import acidstream
from acidstream import CardinalityViolationError, ConfigError, Table
from acidstream.acid.schema import TableSchema
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnState, TxnStore

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = "id bigint, v string, d decimal(10,2)"


def _create(store: TxnStore, name: str) -> TableDef:
    """``id bigint, v string, d decimal(10,2)``, partitioned by ``ds``, 2 buckets on id."""
    cols = tuple((n, str(t)) for n, t in TableSchema.parse(COLUMNS).columns)
    return store.create_table(
        TableDef(
            db="default", name=name, columns=cols, partition_keys=(("ds", "string"),),
            bucket_cols=("id",), num_buckets=2,
            parameters={"transactional": "true", "bucketing_version": "2"},
        )
    )  # fmt: skip


def _insert(store: TxnStore, name: str, rows: list[dict[str, Any]]) -> None:
    with StreamingConnection(
        f"default.{name}", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        c.begin_transaction()
        c.write_many(json.dumps(r).encode() for r in rows)
        c.commit_transaction()


def _ds(i: int) -> str:
    return "a" if i % 2 == 0 else "b"


TARGET: list[dict[str, Any]] = [
    {"id": i, "v": f"v{i}", "d": f"{i}.25", "ds": _ds(i)} for i in range(40)
]
SOURCE = pa.table(
    {
        "id": [1, 2, 3, 8, 10, 11, 12, 100, 101, 103, 200, 20],
        "v": ["u1", "u2", "u3", "u8", "x", "x", "x", "n100", "n101", "n103", "gone", "keep"],
        "op": ["u", "u", "u", "u", "d", "d", "d", "i", "i", "i", "d", "x"],
    }
)
SOURCE = SOURCE.append_column(
    "ds", pa.array([_ds(i) if i < 100 else "c" for i in SOURCE.column("id").to_pylist()])
)


def _model() -> tuple[dict[int, tuple[Any, ...]], dict[str, int]]:
    """The MERGE below on plain Python values: the rows after it and its counts."""
    from decimal import Decimal

    rows: dict[int, tuple[Any, ...]] = {
        int(r["id"]): (r["id"], r["v"], Decimal(str(r["d"])), r["ds"]) for r in TARGET
    }
    counts = {"rows_inserted": 0, "rows_updated": 0, "rows_deleted": 0}
    for s in SOURCE.to_pylist():
        old = rows.get(s["id"])
        if old is not None and old[3] == s["ds"]:
            if s["op"] == "d":
                del rows[s["id"]]
                counts["rows_deleted"] += 1
            elif s["op"] == "u":
                rows[s["id"]] = (s["id"], s["v"], old[2], old[3])
                counts["rows_updated"] += 1
        elif old is None and s["op"] != "d":
            rows[s["id"]] = (s["id"], s["v"], None, s["ds"])
            counts["rows_inserted"] += 1
    return rows, counts


def _merge(t: Table, source: Any) -> Any:
    return (
        t.merge(source, on=["id", "ds"])
        .when_matched_delete(condition="src.op = 'd'")
        .when_matched_update(set={"v": "src.v"}, condition="src.op = 'u'")
        .when_not_matched_insert_all(condition="src.op <> 'd'")
    )


def _rows(t: Table) -> dict[int, tuple[Any, ...]]:
    got = t.read().to_pylist()
    return {r["id"]: tuple(r.get(c) for c in ("id", "v", "d", "ds") if c in r) for r in got}


def _files(root: str) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = Path(p).read_bytes()
    return out


@pytest.fixture
def twins(store: TxnStore, store_url: str, warehouse: str) -> Iterator[tuple[Table, Table]]:
    """Two tables with the same history (``py`` and ``sp``), as Table handles."""
    for name in ("py", "sp"):
        _create(store, name)
        _insert(store, name, TARGET)
    yield tuple(  # type: ignore[misc]
        acidstream.table(f"default.{n}", metastore=store_url, warehouse=warehouse)
        for n in ("py", "sp")
    )


def test_spark_merge_equals_the_python_engine_file_for_file(
    twins: tuple[Table, Table], store: TxnStore, spark: Any, jvm_orc: Any
) -> None:
    py, sp = twins
    expected_rows, expected_counts = _model()
    got_py = _merge(py, SOURCE).execute()
    builder = _merge(sp, spark.createDataFrame(SOURCE.to_pandas()))
    assert "Spark DataFrame" in repr(builder)
    got_sp = builder.execute()
    for got in (got_py, got_sp):
        counts = {k: getattr(got, k) for k in expected_counts}
        assert counts == expected_counts
    assert got_sp.write_id == got_py.write_id == 2
    assert got_sp.partitions == got_py.partitions == ("ds=a", "ds=b", "ds=c")
    assert _rows(sp) == _rows(py) == expected_rows
    # The same directory layout, and the MERGE's files byte for byte.
    root_py, root_sp = (store.get_table("default", n).location or "" for n in ("py", "sp"))
    files_py, files_sp = _files(root_py), _files(root_sp)
    assert sorted(files_sp) == sorted(files_py)
    merged = [p for p in files_py if "_0000002_0000002_" in p]
    assert {p.split("/")[1].rsplit("_", 1)[0] for p in merged if "bucket_" in p} == {
        "delta_0000002_0000002", "delete_delta_0000002_0000002"
    }  # fmt: skip
    for p in merged:
        assert files_sp[p] == files_py[p], p
    written = sorted(os.path.relpath(f, root_sp) for f in got_sp.files_written)
    assert written == sorted(p for p in merged if "bucket_" in p and "flush_length" not in p)
    # ORC Java (Hive's reader) reads every file the executors wrote.
    for f in got_sp.files_written:
        info = jvm_orc.read(f)
        assert info["rows"] == info["rows_read"] > 0
        assert "hive.acid.key.index" in info["metadata"]
    assert not [t for t in store.show_txns() if t.state == TxnState.OPEN]


def test_a_target_row_matched_twice_commits_nothing(
    twins: tuple[Table, Table], store: TxnStore, store_url: str, warehouse: str, spark: Any
) -> None:
    """Also through ``acidstream.spark.merge`` (the facade), by table name."""
    import acidstream.spark

    _py, sp = twins
    before = _rows(sp)
    root = store.get_table("default", "sp").location or ""
    files_before = sorted(_files(root))
    committed = {t.txn_id for t in store.show_txns() if t.state == TxnState.COMMITTED}
    dup = pa.table({"id": [4, 4, 6], "v": ["p", "q", "r"], "op": ["u", "u", "u"],
                    "ds": ["a", "a", "a"]})  # fmt: skip
    with pytest.raises(ConfigError, match="takes a Spark DataFrame source, not Table"):
        acidstream.spark.merge(sp, dup, on=["id", "ds"])
    builder = acidstream.spark.merge(
        "default.sp", spark.createDataFrame(dup.to_pandas()), on=["id", "ds"],
        metastore=store_url, warehouse=warehouse,
    ).when_matched_update(set={"v": "src.v"})  # fmt: skip
    with pytest.raises(CardinalityViolationError, match="matched by 2 source rows"):
        builder.execute()
    assert _rows(sp) == before
    assert sorted(_files(root)) == files_before  # the tasks' files were removed
    txns = store.show_txns()
    assert not [t for t in txns if t.state == TxnState.OPEN]
    # Commits since (the reads' lease txns) wrote nothing to the table.
    later = [t.txn_id for t in txns if t.state == TxnState.COMMITTED and t.txn_id not in committed]
    assert all(store.write_id_for_txn(t, "default", "sp") is None for t in later)


def test_unpartitioned_unbucketed_table_with_a_join_condition(
    store: TxnStore, store_url: str, warehouse: str, spark: Any
) -> None:
    """No partition or bucket to prune (one read task for the table), keys named
    differently on each side (``on`` as SQL), UPDATE SET * and INSERT *: the Spark MERGE
    leaves the same rows and the same files as the Python engine."""
    cols = tuple((n, str(t)) for n, t in TableSchema.parse(COLUMNS).columns)
    handles = []
    for name in ("upy", "usp"):
        store.create_table(
            TableDef(db="default", name=name, columns=cols, parameters={"transactional": "true"})
        )
        _insert(store, name, [{"id": i, "v": f"v{i}", "d": "1.50"} for i in range(10)])
        handles.append(
            acidstream.table(f"default.{name}", metastore=store_url, warehouse=warehouse)
        )
    src = pa.table({"key": [3, 4, 50, 51], "v": ["a", "b", "c", "d"], "id": [0, 0, 0, 0]})
    results = []
    for h, source in zip(handles, (src, spark.createDataFrame(src.to_pandas())), strict=True):
        results.append(
            h.merge(source, on="src.key = tgt.id")
            .when_matched_update_all(except_columns=["id"])
            .when_not_matched_insert(values={"id": "src.key", "v": "src.v"})
            .execute()
        )
    py, sp = results
    assert (sp.rows_updated, sp.rows_inserted) == (py.rows_updated, py.rows_inserted) == (2, 2)
    assert _rows(handles[1]) == _rows(handles[0])
    assert _rows(handles[1])[4][1] == "b" and _rows(handles[1])[51][2] is None
    root_py, root_sp = (store.get_table("default", n).location or "" for n in ("upy", "usp"))
    files_py, files_sp = _files(root_py), _files(root_sp)
    assert files_sp == files_py  # same names, same bytes


CHILD = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession
    import acidstream
    from tests.sinks.test_spark_merge import SOURCE, _merge

    spark = (
        SparkSession.builder.master("local[2,2]")  # up to 2 attempts per task
        .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    t = acidstream.table("default.sp", metastore=sys.argv[1], warehouse=sys.argv[2])
    r = _merge(t, spark.createDataFrame(SOURCE.to_pandas())).execute()
    print(json.dumps({"rows_inserted": r.rows_inserted, "rows_updated": r.rows_updated,
                      "rows_deleted": r.rows_deleted, "files": list(r.files_written)}))
    spark.stop()
    """
)


@pytest.mark.slow  # a JVM of its own: local[2,2] lets a task run twice
def test_a_write_task_killed_once_is_retried_and_commits_once(
    twins: tuple[Table, Table], store: TxnStore, store_url: str, warehouse: str, tmp_path: Path
) -> None:
    if not store_url.startswith("sqlite"):
        pytest.skip("the task retry is Spark's: one metastore backend is enough (saves a JVM)")
    pytest.importorskip("pyspark", reason="pyspark is not installed")
    _py, sp = twins
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable,
           "ACIDSTREAM_FAULTS": "merge.task_after_files", "ACIDSTREAM_FAULTS_ONCE": str(marks)}  # fmt: skip
    p = subprocess.run(
        [sys.executable, "-c", CHILD, store_url, warehouse],
        env=env, capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert (marks / "merge.task_after_files").exists()  # an attempt died at the step
    assert "Python worker exited unexpectedly" in p.stderr or "crashed" in p.stderr.lower()
    got = json.loads(p.stdout.strip().splitlines()[-1])
    expected_rows, expected_counts = _model()
    assert {k: got[k] for k in expected_counts} == expected_counts
    assert _rows(sp) == expected_rows  # every row once
    # One commit wrote to the table (write id 2), and its directories hold exactly the
    # files it reported: the dead attempt's files were rewritten, not left beside them.
    root = store.get_table("default", "sp").location or ""
    on_disk = sorted(
        os.path.join(root, p) for p in _files(root) if "_0000002_0000002_" in p and "bucket_" in p
    )
    assert on_disk == sorted(got["files"])
    assert not [p for p in _files(root) if "_0000003" in p]
    assert not [t for t in store.show_txns() if t.state == TxnState.OPEN]
