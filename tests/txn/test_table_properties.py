"""Table properties are validated by the catalog and resolved once for every writer.

A bad ``orc.*`` value (or a typo of an ``orc.*`` key, or a compactor flag that is not a
boolean) is refused by ``create_table`` before anything is stored, from Python and from
``acidstream create-table`` alike. The good ones reach the files the streaming
connection, the one-shot writer and the compactor write, read back from the files'
own postscript, index and stripe footers. A bad value stored by an older version
(behind the catalog's back) is a ``ConfigError`` naming the property at write time.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as pa_orc
import pyorc
import pytest

from acidstream.acid.errors import ConfigError, TableNotFoundError
from acidstream.acid.list_bucketing import SkewedInfo
from acidstream.acid.orc_options import ORC_TABLE_PROPERTIES, OrcWriterOptions
from acidstream.acid.orc_tail import decompress_chunks, parse_tail
from acidstream.acid.protobuf import decode_fields
from acidstream.acid.schema import TableSchema
from acidstream.acid.storage import Storage
from acidstream.acid.writer import AcidFileWriter, write_delta
from acidstream.cli.main import main
from acidstream.compaction import Worker
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import snapshot_read

COLUMNS = (("id", "bigint"), ("msg", "string"))
# ORC column ids of an ACID file of COLUMNS: 0 the event struct, 1-5 the event
# metadata, 6 the row struct, 7 row.id, 8 row.msg.
MSG_COLUMN_ID = 8

BAD = [
    ("orc.compress", "LZ5", "must be one of NONE, ZLIB, SNAPPY, ZSTD"),
    ("orc.compress", "LZ4", "LZ4 can be read but not written"),
    ("orc.stripe.size", "-1", "orc.stripe.size must be > 0"),
    ("orc.stripe.size", "64MB", "orc.stripe.size must be an integer"),
    ("orc.compress.size", "0", "orc.compress.size must be > 0"),
    ("orc.compress.size", str(16 << 20), "below 8 MiB"),
    ("orc.row.index.stride", "-1", "orc.row.index.stride must be >= 0"),
    ("orc.bloom.filter.columns", "nosuchcol", "'nosuchcol', which is not a data column"),
    ("orc.bloom.filter.fpp", "2", "between 0 and 1"),
    ("orc.bloom.filter.fpp", "often", "between 0 and 1"),
    ("orc.compres", "ZLIB", "did you mean orc.compress"),
    ("orc.create.index", "true", "not an ORC property acidstream applies"),
    ("NO_AUTO_COMPACTION", "ture", "must be true or false"),
    ("no_cleanup", "yes", "must be true or false"),
]
# The bad values (not keys) of a property the writers read.
BAD_VALUES = [b for b in BAD if b[0] in ORC_TABLE_PROPERTIES]
GOOD = {
    "orc.compress": "SNAPPY",
    "orc.compress.size": "1048576",
    "orc.stripe.size": "8388608",
    "orc.row.index.stride": "5000",
    "orc.bloom.filter.columns": "MSG",  # Hive's names are case-insensitive
    "orc.bloom.filter.fpp": "0.02",
}


def _table(name: str, props: dict[str, str]) -> TableDef:
    return TableDef("default", name, COLUMNS, parameters={"transactional": "true", **props})


@pytest.mark.parametrize(("key", "value", "message"), BAD, ids=[f"{k}={v}" for k, v, _ in BAD])
def test_python_create_table_refuses_a_bad_property(
    store: TxnStore, key: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        store.create_table(_table("t", {key: value}))
    assert key in str(e.value)
    with pytest.raises(TableNotFoundError):
        store.get_table("default", "t")
    assert not Path(store.warehouse, "t").exists()


@pytest.mark.parametrize(("key", "value", "message"), BAD, ids=[f"{k}={v}" for k, v, _ in BAD])
def test_cli_create_table_refuses_a_bad_property_in_one_line(
    store_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    key: str,
    value: str,
    message: str,
) -> None:
    wh = tmp_path / "wh"
    base = ["--metastore", store_url, "--warehouse", str(wh)]
    code = main(["create-table", "t", "id bigint, msg string", "--tblproperty", f"{key}={value}",
                 *base])  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("acidstream: error: "), err
    assert key in err and re.search(message, err), err
    assert main(["tables", *base]) == 0
    assert "default.t" not in capsys.readouterr().out
    assert not (wh / "t").exists()


def test_good_properties_are_stored_as_given(store: TxnStore) -> None:
    t = store.create_table(_table("t", {**GOOD, "no_auto_compaction": "TRUE"}))
    assert {k: t.parameters[k] for k in GOOD} == GOOD
    orc = OrcWriterOptions().for_table(t.parameters)
    assert orc.bloom_filter_columns == ("msg",) and orc.bloom_filter_fpp == 0.02


# ------------------------------------------------------------------ reading files back
def _bloom_filter_columns(path: Path) -> list[set[int]]:
    """Per stripe of the ORC file at ``path``, the column ids with a bloom filter stream
    (ORC's StripeFooter.streams of kind BLOOM_FILTER (7) or BLOOM_FILTER_UTF8 (8))."""
    data = path.read_bytes()
    tail = parse_tail(data)
    stripes: list[set[int]] = []
    for num, _, stripe in tail.footer_fields:
        if num != 3:  # Footer.stripes
            continue
        assert isinstance(stripe, bytes)
        info = {n: v for n, _, v in decode_fields(stripe)}
        start = int(info[1]) + int(info.get(2, 0)) + int(info.get(3, 0))
        footer = decompress_chunks(data[start : start + int(info[4])], tail.compression)
        found: set[int] = set()
        for fn, _, stream in decode_fields(footer):
            if fn != 1:  # StripeFooter.streams
                continue
            assert isinstance(stream, bytes)
            st = {n: v for n, _, v in decode_fields(stream)}
            if st.get(1) in (7, 8):
                found.add(int(st.get(2, 0)))
        stripes.append(found)
    return stripes


def _check_file(path: Path, *, block: int, stride: int) -> None:
    with path.open("rb") as f:
        r = pyorc.Reader(f)
        assert r.compression == pyorc.CompressionKind.SNAPPY
        assert r.compression_block_size == block
        assert r.row_index_stride == stride
    stripes = _bloom_filter_columns(path)
    assert stripes and all(found == {MSG_COLUMN_ID} for found in stripes), stripes


def _stream(store: TxnStore, name: str, n: int, *, block: bool) -> None:
    with StreamingConnection(
        name,
        record_writer=StrictJsonWriter(),
        store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as c:
        c.begin_transaction()
        lines = [json.dumps({"id": i, "msg": f"m{i}"}).encode() for i in range(n)]
        if block:
            assert not c.write_block(lines).rejected
        else:
            for line in lines:
                c.write(line)
        c.commit_transaction()


@pytest.mark.parametrize("block", [False, True], ids=["write", "write_block"])
def test_connection_files_take_the_tables_orc_properties(store: TxnStore, block: bool) -> None:
    t = store.create_table(_table("t", GOOD))
    _stream(store, "t", 300, block=block)
    (data,) = Path(t.location or "").glob("delta_*/bucket_00000")
    # An insert delta divides the block by orc.base.delta.ratio (8), as Hive does.
    # Streaming drops the row index, except that a table with bloom filters keeps it:
    # they live in it.
    _check_file(data, block=131072, stride=5000)
    assert sorted(snapshot_read(store, t).column("id").to_pylist()) == list(range(300))


def _stitched_file(tmp_path: Path) -> str:
    """A streaming file of the arrow engine with a ``GOOD`` table's options: a spliced
    piece pyarrow writes, then an exact piece pyorc writes (timestamps before 1970 with
    a fraction). Returns its path."""
    schema = TableSchema.of([("id", "bigint"), ("msg", "string"), ("ts", "timestamp")])
    opts = OrcWriterOptions().for_table(GOOD)
    storage, root = Storage.for_path(str(tmp_path))
    path = f"{root}/delta_0000001_0000002/bucket_00000"

    def batch(ids: range, ts: datetime.datetime) -> pa.Table:
        return pa.table({"id": pa.array(ids, pa.int64()), "msg": [f"m{i}" for i in ids],
                         "ts": pa.array([ts] * len(ids), pa.timestamp("us"))})  # fmt: skip

    with AcidFileWriter(storage, path, schema, kind="insert", bucket_id=0, engine="arrow",
                        streaming=True, side_file=True, options=opts) as w:  # fmt: skip
        w.insert_arrow(1, batch(range(100), datetime.datetime(2024, 1, 1, 0, 0, 0, 5)))
        w.flush()
        w.insert_arrow(2, batch(range(100, 150), datetime.datetime(1969, 12, 31, 0, 0, 0, 5)))
        w.flush()
    return path


def test_a_stitched_file_keeps_bloom_filters_in_every_piece(tmp_path: Path) -> None:
    """Each piece of a stitched streaming file carries the table's bloom filters."""
    path = _stitched_file(tmp_path)
    stripes = _bloom_filter_columns(Path(path))
    assert len(stripes) == 2 and all(found == {MSG_COLUMN_ID} for found in stripes), stripes
    assert pa_orc.ORCFile(path).read().num_rows == 150


@pytest.mark.spark
def test_orc_java_reads_files_with_bloom_filters(
    store: TxnStore, tmp_path: Path, jvm_orc: Any
) -> None:
    """ORC Java (Hive's reader) reads a stitched streaming file and a compacted base
    that carry bloom filter streams."""
    got = jvm_orc.read(_stitched_file(tmp_path))
    assert got["rows"] == got["rows_read"] == 150
    store.create_table(_table("t", GOOD))
    _stream(store, "t", 200, block=True)
    q = CompactionQueue(store)
    q.request("default", "t", None, major=True)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r", out
    (base,) = Path(out.output_dirs[0]).glob("bucket_*")
    got = jvm_orc.read(str(base))
    assert got["rows"] == got["rows_read"] == 200


@pytest.mark.parametrize("rows", ["tuples", "arrow"])
def test_one_shot_writer_takes_the_tables_orc_properties(
    store: TxnStore, tmp_path: Path, rows: str
) -> None:
    t = store.create_table(_table("t", GOOD))
    opts = OrcWriterOptions().for_table(t.parameters)
    data: list[tuple[int, str]] | pa.Table = [(i, f"m{i}") for i in range(300)]
    if rows == "arrow":
        data = pa.table({"id": pa.array(range(300), pa.int64()),
                         "msg": [f"m{i}" for i in range(300)]})  # fmt: skip
    path = write_delta(str(tmp_path / "t"), t.schema, 1, data, options=opts)
    _check_file(Path(path), block=131072, stride=5000)


def test_compactor_takes_the_tables_orc_properties(store: TxnStore) -> None:
    t = store.create_table(_table("t", GOOD))
    for _ in range(2):
        _stream(store, "t", 200, block=False)
    q = CompactionQueue(store)
    q.request("default", "t", None, major=True)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r", out
    (base,) = Path(out.output_dirs[0]).glob("bucket_*")
    # A base takes the table's settings as they are (no delta ratio).
    _check_file(base, block=1048576, stride=5000)
    assert sorted(snapshot_read(store, t).column("id").to_pylist()) == sorted([*range(200)] * 2)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    BAD_VALUES,
    ids=[f"{k}={v}" for k, v, _ in BAD_VALUES],
)
def test_a_bad_stored_value_is_a_config_error_at_write_time(
    store: TxnStore, key: str, value: str, message: str
) -> None:
    """A table stored by an older version, which did not check its properties."""
    store.create_table(_table("t", {}))
    store.set_table_param("default", "t", key, value)
    with pytest.raises(ConfigError, match=message):
        _stream(store, "t", 3, block=False)


def test_altering_the_skew_of_a_table_with_a_bad_stored_property_still_works(
    store: TxnStore,
) -> None:
    """The ALTER re-validates the table's definition but not its properties: an older
    version's stored property (which no command can change) must not block it."""
    store.create_table(
        TableDef("default", "t", COLUMNS, partition_keys=(("ds", "string"),),
                 parameters={"transactional": "true"})
    )  # fmt: skip
    store.set_table_param("default", "t", "orc.create.index", "true")
    skew = SkewedInfo(col_names=("msg",), col_values=(("a",),), stored_as_dirs=True)
    assert store.set_skewed("default", "t", skew).skewed == skew
