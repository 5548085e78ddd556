"""``write_many`` (the bulk path) against ``write`` on each record (the per-record path).

Differential: the same calls go to two tables of one metastore (SQLite and PostgreSQL), one
connection writing each call's records with ``write_many``, the other with ``write`` one
record at a time, which is what ``write_many`` did before it took the bulk path. Everything
a caller can see must be equal: the return value, the error raised (class, message, record),
the counters, the dead letters (byte for byte once the time and the table's name are
masked), the partitions in the catalog, the files and the rows read back in file order.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import acidstream.ingest.connection as connection_module
from acidstream.acid.errors import SerializationError
from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME
from acidstream.acid.schema import TableSchema
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_common import (
    BoundRecordWriter,
    Encoded,
    EncodedBlock,
    PartitionColumns,
)
from acidstream.ingest.record_writers import (
    RecordWriter,
    StrictDelimitedInputWriter,
    StrictJsonWriter,
    StrictRegexWriter,
)
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable, snapshot_read
from tests.list_bucketing_tables import SKEW

COLUMNS = "id int, msg string, amount double"
MAX_RECORD_BYTES = 90  # small, so that oversized records come up
WRITERS = ("json", "delimited", "regex")
_names = itertools.count()


def _writer(kind: str, partitioned: bool) -> RecordWriter:
    if kind == "json":
        return StrictJsonWriter(max_record_bytes=MAX_RECORD_BYTES)
    if kind == "delimited":
        return StrictDelimitedInputWriter(field_delimiter=",", max_record_bytes=MAX_RECORD_BYTES)
    groups = r"(-?\w*)\|([^|]*)\|([^|]*)" + (r"\|(.*)" if partitioned else "")
    return StrictRegexWriter(regex=groups, max_record_bytes=MAX_RECORD_BYTES)


# Field texts: valid values and ones that fail conversion (out of range, not a number...).
ids = st.one_of(
    st.integers(-(2**31), 2**31 - 1).map(str),
    st.sampled_from(["abc", "99999999999", "", "1.5", "-"]),
)
msgs = st.one_of(
    st.text(
        st.characters(codec="utf-8", exclude_characters=",|\r\n\x00", exclude_categories=["Cs"]),
        max_size=12,
    ),
    st.integers(60, 120).map(lambda k: "x" * k),  # oversized records
)
amounts = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["1e3", "x", "", "NaN", "1.5f"]),
)
# Partition values: ordinary ones, the default partition, a NUL (no directory can hold it).
part_values = st.sampled_from(["a", "b", "c", "", "7", "with space", "bad\x00"])


@st.composite
def records(draw: st.DrawFn, kind: str, partitioned: bool) -> object:
    """One record for ``kind``: usually a row of good or bad fields, sometimes garbage bytes
    (invalid UTF-8 among them), rarely not bytes at all."""
    shape = draw(st.sampled_from(["row"] * 12 + ["garbage", "not-bytes"]))
    if shape == "garbage":
        return draw(st.binary(max_size=20))
    if shape == "not-bytes":
        return draw(st.sampled_from([None, "text", 7]))
    i, m, a = draw(ids), draw(msgs), draw(amounts)
    p = draw(part_values) if partitioned else None
    if kind == "json":
        obj: dict[str, Any] = {
            "id": int(i) if re.fullmatch(r"-?\d+", i) and draw(st.booleans()) else i,
            "msg": m,
            "amount": a,
        }
        if p is not None:
            obj["p"] = p
        return json.dumps(obj).encode()
    sep = "," if kind == "delimited" else "|"
    return sep.join([i, m, a] + ([p] if p is not None else [])).encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Call:
    """One call: ``write_many(records)``, or ``write`` on each of them (``single``); the
    records as a list, or drawn from an iterator (which raises after ``fail_at`` records
    when set)."""

    records: list[object]
    single: bool
    as_iterator: bool
    fail_at: int | None

    def source(self) -> Iterable[object]:
        if not self.as_iterator:
            return self.records
        return self._drawn()

    def _drawn(self) -> Iterator[object]:
        for k, r in enumerate(self.records):
            if k == self.fail_at:
                raise SourceError("the source failed")
            yield r
        if self.fail_at is not None:
            raise SourceError("the source failed")


class SourceError(Exception):
    """What a failing source of records raises."""


def calls(kind: str, partitioned: bool) -> st.SearchStrategy[list[Call]]:
    call = st.builds(
        Call,
        st.lists(records(kind, partitioned), max_size=25),
        st.sampled_from([False, False, False, True]),
        st.booleans(),
        st.none() | st.integers(0, 25),
    )
    return st.lists(call, min_size=1, max_size=4)


@dataclass
class Outcome:
    """What a caller saw of the calls of one txn."""

    returned: list[object]  # per call: the count returned, or the error raised
    stats: Any
    dead_letters: bytes


def _error(e: Exception) -> tuple[str, str, object]:
    return (type(e).__name__, str(e), getattr(e, "record", None))


def _per_record(conn: StreamingConnection, recs: Iterable[object]) -> object:
    """The per-record path: ``write`` on each record (what ``write_many`` did)."""
    before = conn.stats().records_written
    try:
        for r in recs:
            conn.write(r)  # type: ignore[arg-type]
    except (SerializationError, SourceError) as e:
        return _error(e)
    return conn.stats().records_written - before


def _bulk(conn: StreamingConnection, call: Call) -> object:
    if call.single:
        return _per_record(conn, call.source())
    try:
        return conn.write_many(call.source())  # type: ignore[arg-type]
    except (SerializationError, SourceError) as e:
        return _error(e)


def _dead_letters(d: Path) -> bytes:
    """The dead-letter file's bytes, time and source (the table's name) masked."""
    files = sorted(d.glob("*.jsonl"))
    assert len(files) <= 1
    raw = files[0].read_bytes() if files else b""
    raw = re.sub(rb'"time": "[^"]*"', b'"time": "T"', raw)
    return re.sub(rb'"source": "[^"]*"', b'"source": "S"', raw)


def _run(
    store: TxnStore,
    make_table: MakeTable,
    tmp: Path,
    kind: str,
    partition: tuple[str, str] | None,
    txns: list[list[Call]],
    *,
    bulk: bool,
    dead_letters: bool,
    memory_limit: int,
    buckets: int | None,
) -> tuple[list[Outcome], list[str], list[str], list[dict[str, Any]]]:
    name = f"t{next(_names)}"
    table = make_table(
        name,
        COLUMNS,
        partitioned_by=[partition] if partition else (),
        buckets=("id", buckets) if buckets else None,
    )
    dl = tmp / f"dl-{name}"
    outcomes = []
    with StreamingConnection(
        name,
        record_writer=_writer(kind, partition is not None),
        store=store,
        options=StreamingOptions(
            dead_letter_path=str(dl) if dead_letters else None,
            memory_limit_bytes=memory_limit,
            txns_per_batch=2,
            housekeeping_interval_s=None,
        ),
    ) as conn:
        for txn in txns:
            conn.begin_transaction()
            returned = [_bulk(conn, c) if bulk else _per_record(conn, c.source()) for c in txn]
            conn.commit_transaction()
            outcomes.append(Outcome(returned, conn.stats(), _dead_letters(dl)))
    assert table.location is not None
    root = Path(table.location)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    parts = sorted(p.name for p in store.list_partitions("default", name))
    # Rows in file order (no directory: nothing was written).
    rows = snapshot_read(store, table).to_pylist() if root.exists() else []
    return outcomes, files, parts, rows


# WRITE_MANY_EXAMPLES=250 for a longer search than the suite's.
FAST = settings(
    max_examples=int(os.environ.get("WRITE_MANY_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.parametrize("kind", WRITERS)
@FAST
@given(data=st.data())
def test_write_many_has_the_outcome_of_write_on_each_record(
    store: TxnStore, make_table: MakeTable, tmp_path: Path, kind: str, data: st.DataObject
) -> None:
    partition = data.draw(st.sampled_from([None, ("p", "string"), ("p", "int")]), "partition")
    txns = data.draw(st.lists(calls(kind, partition is not None), min_size=1, max_size=3))
    opts = {
        "dead_letters": data.draw(st.booleans(), "dead_letters"),
        "memory_limit": data.draw(st.sampled_from([1, 60, 200, 1000, 10**8]), "memory_limit"),
        "buckets": data.draw(st.sampled_from([None, None, 3]), "buckets"),
    }
    # Chunks (one encode_block each) and the pieces drawn from an iterator end anywhere.
    chunk = data.draw(st.sampled_from([1, 2, 3, 10_000]), "chunk")
    piece = data.draw(st.sampled_from([1, 2, 1_000]), "piece")
    chunk_bytes = data.draw(st.sampled_from([1, 100, 8 << 20]), "chunk_bytes")
    per = _run(store, make_table, tmp_path, kind, partition, txns, bulk=False, **opts)
    sizes = {"_MANY_CHUNK_RECORDS": chunk, "_MANY_PIECE": piece, "_MANY_CHUNK_BYTES": chunk_bytes}
    old = {k: getattr(connection_module, k, None) for k in sizes}
    for k, v in sizes.items():
        setattr(connection_module, k, v)
    try:
        bulk = _run(store, make_table, tmp_path, kind, partition, txns, bulk=True, **opts)
    finally:
        for k, v in old.items():
            setattr(connection_module, k, v)
    (per_out, per_files, per_parts, per_rows) = per
    (bulk_out, bulk_files, bulk_parts, bulk_rows) = bulk
    for p, b in zip(per_out, bulk_out, strict=True):
        assert b.returned == p.returned
        assert b.stats == p.stats
        assert b.dead_letters == p.dead_letters
    assert bulk_parts == per_parts
    assert bulk_files == per_files
    assert repr(bulk_rows) == repr(per_rows)  # NaN equal to NaN, -0.0 not to 0.0


@pytest.mark.parametrize("bulk", ["write_many", "write_block"])
@pytest.mark.parametrize("first", ["bulk", "write"])
def test_rows_keep_their_call_order_when_write_and_a_bulk_write_share_a_txn(
    store: TxnStore, make_table: MakeTable, first: str, bulk: str
) -> None:
    """Rows ``write`` buffers and rows ``write_many``/``write_block`` buffer in one txn
    reach the file in call order (the rowIds follow the calls)."""
    make_table("t", COLUMNS)
    recs = [json.dumps({"id": i, "msg": f"m{i}", "amount": i}).encode() for i in range(6)]
    with StreamingConnection(
        "t", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as conn:  # fmt: skip
        conn.begin_transaction()
        for k in range(3):
            part = recs[2 * k : 2 * k + 2]
            if (k % 2 == 0) == (first == "bulk"):
                getattr(conn, bulk)(part)
            else:
                for r in part:
                    conn.write(r)
        conn.commit_transaction()
    rows = snapshot_read(store, store.get_table("default", "t")).to_pylist()
    assert [r["id"] for r in rows] == list(range(6))


def _lb_run(
    store: TxnStore, tmp: Path, recs: list[bytes], *, bulk: bool, dead_letters: bool, limit: int
) -> tuple[object, Any, bytes, list[str], list[str], str]:
    """``recs`` into a fresh list-bucketed table (``tests.list_bucketing_tables.SKEW``),
    partitioned by ``p``: by ``write_many`` (``bulk``) or ``write`` on each."""
    name = f"lb{next(_names)}"
    t = store.create_table(
        TableDef(
            db="default", name=name, columns=(("x", "int"), ("s", "string")),
            partition_keys=(("p", "string"),), parameters={"transactional": "true"}, skewed=SKEW,
        )
    )  # fmt: skip
    dl = tmp / f"dl-{name}"
    with StreamingConnection(
        name, record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(
            dead_letter_path=str(dl) if dead_letters else None, memory_limit_bytes=limit,
            txns_per_batch=2, housekeeping_interval_s=None,
        ),
    ) as conn:  # fmt: skip
        conn.begin_transaction()
        returned = (
            _bulk(conn, Call(list(recs), False, False, None)) if bulk else _per_record(conn, recs)
        )
        conn.commit_transaction()
        stats = conn.stats()
    root = Path(str(t.location))
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    parts = sorted(p.name for p in store.list_partitions("default", name))
    rows = repr(snapshot_read(store, t).to_pylist()) if root.exists() else "[]"
    return returned, stats, _dead_letters(dl), files, parts, rows


@pytest.mark.parametrize("dead_letters", [True, False])
@pytest.mark.parametrize("limit", [1, 70, 10**8])
def test_partitions_the_layout_refuses_reject_each_of_their_records_as_write_does(
    store: TxnStore, tmp_path: Path, dead_letters: bool, limit: int
) -> None:
    """A partition value named like the default list-bucketing directory: no directory
    can hold it, so each record naming it is rejected (``write`` asks again each time)."""
    plan = [(6, "a"), (1, DEFAULT_DIR_NAME), (20, "b"), (6, DEFAULT_DIR_NAME), (None, "a")]
    plan += [(3, "b"), (6, DEFAULT_DIR_NAME), (20, "c")]
    recs = [json.dumps({"x": x, "s": f"s{k}", "p": p}).encode() for k, (x, p) in enumerate(plan)]
    per = _lb_run(store, tmp_path, recs, bulk=False, dead_letters=dead_letters, limit=limit)
    bulk = _lb_run(store, tmp_path, recs, bulk=True, dead_letters=dead_letters, limit=limit)
    assert bulk == per
    assert per[1].bad_records == (3 if dead_letters else 1)


class CountingWriter:
    """A real record writer whose bound writer counts the connection's calls to it
    (``encode`` per record, ``encode_block`` per block); the work is the real writer's."""

    def __init__(self, inner: RecordWriter) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    @property
    def line_delimiter_pattern(self) -> str:
        return self.inner.line_delimiter_pattern

    def bind(self, schema: TableSchema, *, partition_columns: PartitionColumns = ()) -> Any:
        return _CountingBound(self.inner.bind(schema, partition_columns=partition_columns), self)


@dataclass
class _CountingBound:
    bound: BoundRecordWriter
    owner: CountingWriter

    def encode(self, record: bytes) -> Encoded:
        self.owner.calls["encode"] += 1
        return self.bound.encode(record)

    def encode_block(self, records: Sequence[bytes]) -> EncodedBlock:
        self.owner.calls["encode_block"] += 1
        return self.bound.encode_block(records)


@pytest.mark.parametrize("kind", WRITERS)
def test_write_many_parses_its_records_in_blocks_not_one_by_one(
    store: TxnStore, make_table: MakeTable, tmp_path: Path, kind: str
) -> None:
    """25,000 records (three of them bad) are parsed by three ``encode_block`` calls
    (chunks of 10,000), none by ``encode``; ``write`` stays per record."""
    make_table("t", COLUMNS)
    good = {
        "json": lambda i: json.dumps({"id": i, "msg": f"m{i}", "amount": i / 4}).encode(),
        "delimited": lambda i: f"{i},m{i},{i / 4}".encode(),
        "regex": lambda i: f"{i}|m{i}|{i / 4}".encode(),
    }[kind]
    recs = [good(i) if i % 10_000 != 5 else b"bad" for i in range(25_000)]
    writer = CountingWriter(_writer(kind, False))
    with StreamingConnection(
        "t", record_writer=writer, store=store,
        options=StreamingOptions(dead_letter_path=str(tmp_path / "dl")),
    ) as conn:  # fmt: skip
        conn.begin_transaction()
        assert conn.write_many(recs) == 25_000 - 3
        assert writer.calls == {"encode_block": 3}
        conn.write(good(25_000))
        assert writer.calls == {"encode_block": 3, "encode": 1}
        conn.commit_transaction()
        assert conn.stats().bad_records == 3
    ids = snapshot_read(store, store.get_table("default", "t")).column("id").to_pylist()
    assert ids == [i for i in range(25_001) if i % 10_000 != 5]
