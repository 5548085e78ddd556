"""Hive's whole timestamp and date range (0001-01-01 .. 9999-12-31) through both writer
engines and the reader, checked on disk by ORC Java (the reader Hive uses).

The arrow engine writes batches pyarrow would get wrong (timestamps before 1970 with a
fraction, nanoseconds with sub-microsecond digits) through its exact path; the write
plans below mix such batches with fast-path ones in one file, in one flush and across
flushes, so both kinds of stitched piece meet."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyorc
import pytest

from acidstream.acid.errors import AcidFormatError
from acidstream.acid.reader import read_path
from acidstream.acid.schema import TableSchema
from acidstream.acid.side_file import decode_flush_lengths
from acidstream.acid.storage import Storage
from acidstream.acid.writer import AcidFileWriter

SCHEMA = TableSchema.parse("id int, ts timestamp, d date, tss array<timestamp>")
D = dt.datetime
EDGE_ROWS: list[tuple[Any, ...]] = [
    (1, D(9999, 12, 31, 23, 59, 59), dt.date(9999, 12, 31), [D(9999, 12, 31)]),
    (2, D(9999, 12, 31, 23, 59, 59, 999999), dt.date(9999, 12, 31), []),
    (3, D(1, 1, 1), dt.date(1, 1, 1), [D(1, 1, 1, 0, 0, 1)]),
    (4, D(1582, 10, 10, 12, 0), dt.date(1582, 10, 10), None),  # Julian/Gregorian gap
    # Before 1970 with a fraction: the arrow engine's exact path. ORC rounds such seconds
    # toward zero when the fraction is >= 1 ms (rows 5, 8) and floors them below (row 9);
    # 1969-12-31 23:59:59.001.. is beyond the format itself (acid.timestamps), so unused.
    (5, D(1969, 12, 31, 23, 59, 58, 500000), dt.date(1969, 12, 31), [None]),
    (6, D(2024, 2, 29, 1, 2, 3, 456789), dt.date(2024, 2, 29), None),
    (7, None, None, None),
    (8, D(1969, 7, 20, 20, 17, 40, 500000), dt.date(1969, 7, 20), [D(1900, 1, 1, 0, 0, 0, 250000)]),
    (9, D(1, 1, 1, 0, 0, 0, 1), dt.date(1, 1, 1), [D(1960, 1, 1, 0, 0, 0, 999), D(1, 1, 1)]),
    (10, D(1970, 1, 1), dt.date(1970, 1, 1), [D(1969, 12, 31, 23, 59, 58, 1)]),
]
# Write plan: batches of row ids; a flush (streaming files) after the batches marked.
# Batches 2 and 4 need the exact path; 1, 3 and 5 take the fast one.
BATCHES = [[1, 2], [5, 10], [3, 4], [8, 9], [6, 7]]
FLUSH_AFTER = {0, 2}
ENGINES = ("pyorc", "arrow")
INPUTS = ("rows", "arrow")
_BY_ID = {r[0]: r for r in EDGE_ROWS}
ROWS = [_BY_ID[i] for b in BATCHES for i in b]


def _arrow(rows: list[tuple[Any, ...]]) -> pa.Table:
    ids, ts, days, tss = zip(*rows, strict=True)
    return pa.table(
        {
            "id": pa.array(ids, pa.int32()),
            "ts": pa.array(ts, pa.timestamp("us")),
            "d": pa.array(days, pa.date32()),
            "tss": pa.array(tss, pa.list_(pa.timestamp("us"))),
        }
    )


def _writer(tmp: Path, engine: str, *, streaming: bool, schema: TableSchema = SCHEMA) -> Any:
    storage, root = Storage.for_path(str(tmp))
    path = f"{root}/delta_0000001_0000001_0000/bucket_00000"
    return AcidFileWriter(
        storage,
        path,
        schema,
        kind="insert",
        bucket_id=0,
        engine=engine,  # type: ignore[arg-type]
        streaming=streaming,
        side_file=streaming,
    )


def _write(tmp: Path, engine: str, *, streaming: bool, via: str = "rows") -> Path:
    with _writer(tmp, engine, streaming=streaming) as w:
        for k, batch in enumerate(BATCHES):
            rows = [_BY_ID[i] for i in batch]
            if via == "arrow":
                w.insert_arrow(1, _arrow(rows))
            else:
                w.insert(1, rows)
            if streaming and k in FLUSH_AFTER:
                w.flush()
    return Path(w.path)


def _epoch_parts(value: dt.datetime) -> tuple[int, int]:
    """Floor seconds and nanoseconds since 1970-01-01 of a UTC wall-clock value (proleptic)."""
    delta = value - dt.datetime(1970, 1, 1)
    return delta.days * 86400 + delta.seconds, value.microsecond * 1000


@pytest.mark.parametrize("via", INPUTS)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("streaming", [False, True])
def test_full_hive_range_round_trips(
    tmp_path: Path, engine: str, streaming: bool, via: str
) -> None:
    _write(tmp_path, engine, streaming=streaming, via=via)
    t = read_path(tmp_path)
    assert t.schema.field("ts").type == pa.timestamp("us")
    assert t.schema.field("d").type == pa.date32()
    assert [tuple(r.values()) for r in t.to_pylist()] == ROWS
    # A projection without the wide timestamps takes pyarrow's fast path and agrees.
    assert read_path(tmp_path, columns=["id", "d"]).to_pylist() == [
        {"id": r[0], "d": r[2]} for r in ROWS
    ]


def _stripes(path: Path) -> int:
    return int(pyorc.Reader(io.BytesIO(path.read_bytes())).num_of_stripes)


def test_fast_path_batches_share_one_encoder_and_exact_ones_add_pieces(tmp_path: Path) -> None:
    fast = [_BY_ID[i] for i in (1, 2, 3, 4, 6, 7)]
    with _writer(tmp_path / "fast", "arrow", streaming=False) as w:
        for r in fast:
            w.insert_arrow(1, _arrow([r]))
    assert _stripes(Path(w.path)) == 1  # one pyarrow writer, never stitched
    # Fast, exact, fast, exact, fast: five runs, each its own piece (and stripe).
    assert _stripes(_write(tmp_path / "mixed", "arrow", streaming=False, via="arrow")) == 5
    assert [tuple(r.values()) for r in read_path(tmp_path / "mixed").to_pylist()] == ROWS


NS_SCHEMA = TableSchema.parse("id int, ts timestamp, tss array<timestamp>")
NS_VALUES = [
    1_577_934_245_123_456_789,  # 2020-01-02 03:04:05.123456789
    -1_000_000_001,  # 1969-12-31 23:59:58.999999999
    -8_520_336_000_000_000_000 + 1,  # 1700-01-01 00:00:00.000000001
    None,
    1_600_000_000_000_000_000,  # whole microseconds: would fit the fast path alone
]


def _ns_table(ids: list[int]) -> pa.Table:
    vals = [NS_VALUES[i] for i in ids]
    return pa.table(
        {
            "id": pa.array(ids, pa.int32()),
            "ts": pa.array(vals, pa.timestamp("ns")),
            "tss": pa.array([[v] for v in vals], pa.list_(pa.timestamp("ns"))),
        }
    )


@pytest.mark.parametrize("streaming", [False, True])
def test_arrow_engine_writes_nanosecond_input_exactly(tmp_path: Path, streaming: bool) -> None:
    with _writer(tmp_path, "arrow", streaming=streaming, schema=NS_SCHEMA) as w:
        w.insert_arrow(1, _ns_table([4]))  # fast path (cast to microseconds losslessly)
        w.insert_arrow(1, _ns_table([0, 1]))
        if streaming:
            w.flush()
        w.insert_arrow(1, _ns_table([2, 3]))
    ids = [4, 0, 1, 2, 3]
    ns = read_path(tmp_path, timestamp_unit="ns")
    assert ns.column("ts").cast(pa.int64()).to_pylist() == [NS_VALUES[i] for i in ids]
    tss = ns.column("tss").to_pylist()
    want = [[pa.scalar(NS_VALUES[i], pa.timestamp("ns")).as_py()] for i in ids]
    assert tss == want
    us = read_path(tmp_path).column("ts").cast(pa.int64()).to_pylist()
    assert us == [None if NS_VALUES[i] is None else NS_VALUES[i] // 1000 for i in ids]


def test_nanosecond_unit_is_exact_in_range_and_refuses_out_of_range(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas", reason="pandas carries nanosecond timestamps into pyorc")
    storage, root = Storage.for_path(str(tmp_path))
    schema = TableSchema.parse("id int, ts timestamp")
    value = pd.Timestamp("2020-01-02 03:04:05.123456789")
    path = f"{root}/delta_0000001_0000001_0000/bucket_00000"
    with AcidFileWriter(storage, path, schema, kind="insert", bucket_id=0, engine="pyorc") as w:
        w.insert(1, [(1, value), (2, pd.Timestamp("1969-12-31 23:59:58.999999999"))])
    ns = read_path(tmp_path, timestamp_unit="ns").column("ts").cast(pa.int64()).to_pylist()
    assert ns == [value.value, -1_000_000_001]
    us = read_path(tmp_path).column("ts").cast(pa.int64()).to_pylist()
    assert us == [value.value // 1000, -1_000_001]  # floored, as Spark reads Hive's nanoseconds
    wide = tmp_path / "wide"
    _write(wide, "arrow", streaming=False)
    with pytest.raises(AcidFormatError, match="timestamp_unit='us'"):
        read_path(wide, timestamp_unit="ns")


# ------------------------------------------------------------------- ORC Java
def _jvm_read(jvm_orc: Any, path: Path, max_length: int | None = None) -> list[tuple[Any, ...]]:
    """(id, (millis, nanos) of ts, [(millis, nanos) of tss...]) per row, as ORC Java reads
    them with Hive 3.1+/4's settings (UTC wall clock, proleptic Gregorian)."""
    from py4j.java_gateway import get_field

    jvm = jvm_orc.jvm
    orc = jvm.org.apache.orc.OrcFile
    opts = orc.readerOptions(jvm_orc.conf).useUTCTimestamp(True).convertToProlepticGregorian(True)
    if max_length is not None:
        opts = opts.maxLength(max_length)
    reader = orc.createReader(jvm.org.apache.hadoop.fs.Path(str(path)), opts)
    rows = reader.rows()
    batch = reader.getSchema().createRowBatch()
    out: list[tuple[Any, ...]] = []

    def null(vec: Any, i: int) -> bool:
        return bool(get_field(vec, "isNull")[i]) and not get_field(vec, "noNulls")

    while rows.nextBatch(batch):
        row = get_field(batch, "cols")[5]
        ids, ts, tss = (get_field(row, "fields")[i] for i in (0, 1, -1))
        child = get_field(tss, "child")
        for i in range(get_field(batch, "size")):
            one = None if null(ts, i) else (ts.getTime(i), ts.getNanos(i))
            many = None
            if not null(tss, i):
                start, n = get_field(tss, "offsets")[i], get_field(tss, "lengths")[i]
                many = [
                    None if null(child, j) else (child.getTime(j), child.getNanos(j))
                    for j in range(start, start + n)
                ]
            out.append((get_field(ids, "vector")[i], one, many))
    rows.close()
    return out


def _jvm_ts_stats(jvm_orc: Any, path: Path) -> tuple[Any, ...]:
    """ORC Java's file statistics of the ``ts`` column: count, minimum and maximum."""
    jvm = jvm_orc.jvm
    orc = jvm.org.apache.orc.OrcFile
    opts = orc.readerOptions(jvm_orc.conf).useUTCTimestamp(True)
    reader = orc.createReader(jvm.org.apache.hadoop.fs.Path(str(path)), opts)
    stats = reader.getStatistics()[8]  # root, 5 event columns, row, id, ts
    lo, hi = stats.getMinimumUTC(), stats.getMaximumUTC()
    return (
        stats.getNumberOfValues(),
        (lo.getTime(), lo.getNanos()),
        (hi.getTime(), hi.getNanos()),
    )


def _java(value: dt.datetime | None) -> tuple[int, int] | None:
    """``java.sql.Timestamp``'s (getTime, getNanos) of a UTC wall-clock value."""
    if value is None:
        return None
    secs, nanos = _epoch_parts(value)
    return secs * 1000 + nanos // 1_000_000, nanos


@pytest.mark.spark
@pytest.mark.parametrize("via", INPUTS)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("streaming", [False, True])
def test_jvm_reads_hive_values(
    tmp_path: Path, engine: str, streaming: bool, via: str, jvm_orc: Any
) -> None:
    path = _write(tmp_path, engine, streaming=streaming, via=via)
    expected = [
        (r[0], _java(r[1]), None if r[3] is None else [_java(v) for v in r[3]]) for r in ROWS
    ]
    assert _jvm_read(jvm_orc, path) == expected
    # The statistics of the stitched pieces merge into what one ORC C++ writer computes
    # over all the rows (pyorc, one file): ORC Java reads the same ts minimum and maximum.
    reference = _write(tmp_path / "reference", "pyorc", streaming=False)
    assert _jvm_ts_stats(jvm_orc, path) == _jvm_ts_stats(jvm_orc, reference)


@pytest.mark.spark
def test_jvm_reads_every_flush_of_a_mixed_streaming_file(tmp_path: Path, jvm_orc: Any) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    path = f"{root}/delta_0000001_0000003_0000/bucket_00000"
    side = Path(path + "_flush_length")
    with AcidFileWriter(
        storage, path, SCHEMA, kind="insert", bucket_id=0, engine="arrow",
        streaming=True, side_file=True,
    ) as w:  # fmt: skip
        counts: list[int] = []
        done = 0
        for k, batch in enumerate(BATCHES):
            w.insert_arrow(1 + min(k, 2), _arrow([_BY_ID[i] for i in batch]))
            done += len(batch)
            if k in FLUSH_AFTER or k == len(BATCHES) - 1:
                w.flush()
                counts.append(done)
        # The side file starts with a 0 entry (nothing committed yet), then one per flush.
        lengths = decode_flush_lengths(side.read_bytes())[1:]
    assert len(lengths) == len(counts)
    expected = [
        (r[0], _java(r[1]), None if r[3] is None else [_java(v) for v in r[3]]) for r in ROWS
    ]
    for length, n in zip(lengths, counts, strict=True):
        assert _jvm_read(jvm_orc, Path(path), max_length=length) == expected[:n]


@pytest.mark.spark
@pytest.mark.parametrize("streaming", [False, True])
def test_jvm_reads_nanosecond_input(tmp_path: Path, streaming: bool, jvm_orc: Any) -> None:
    with _writer(tmp_path, "arrow", streaming=streaming, schema=NS_SCHEMA) as w:
        w.insert_arrow(1, _ns_table([4, 0]))
        if streaming:
            w.flush()
        w.insert_arrow(1, _ns_table([1, 2, 3]))
    got = _jvm_read(jvm_orc, Path(w.path))
    want = []
    for i in (4, 0, 1, 2, 3):
        v = NS_VALUES[i]
        if v is None:
            want.append((i, None, [None]))
            continue
        secs, nanos = divmod(v, 1_000_000_000)
        java = (secs * 1000 + nanos // 1_000_000, nanos)
        want.append((i, java, [java]))
    assert got == want


def test_exact_path_takes_nested_and_sliced_arrow_input(tmp_path: Path) -> None:
    schema = TableSchema.parse(
        "id int, m map<string,timestamp>, s struct<a:timestamp,b:array<timestamp>>"
    )
    pre, y1, late = D(1969, 7, 20, 20, 17, 40, 500000), D(1, 1, 1, 0, 0, 0, 1), D(9999, 12, 31)
    rows = [
        {"id": 0, "m": [("x", late)], "s": {"a": late, "b": [late]}},
        {"id": 1, "m": [("p", pre), ("n", None)], "s": {"a": None, "b": [y1, None, pre]}},
        {"id": 2, "m": None, "s": None},
        {"id": 3, "m": [], "s": {"a": pre, "b": None}},
    ]
    typ = pa.struct(
        [
            ("id", pa.int32()),
            ("m", pa.map_(pa.string(), pa.timestamp("us"))),
            ("s", pa.struct([("a", pa.timestamp("us")), ("b", pa.list_(pa.timestamp("us")))])),
        ]
    )
    table = pa.Table.from_struct_array(pa.array(rows, typ))
    with _writer(tmp_path, "arrow", streaming=True, schema=schema) as w:
        w.insert_arrow(1, table.slice(0, 1))  # fast path
        w.insert_arrow(1, table.slice(1))  # sliced children with nulls: the exact path
        w.flush()
    got = read_path(tmp_path).to_pylist()
    assert got == [{**r, "m": None if r["m"] is None else list(r["m"])} for r in rows]
