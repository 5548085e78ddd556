"""The change-event parser (``acidstream.ingest.change_events``): every Debezium shape
(schemas enabled and disabled, c/r/u/d, tombstones, the key from ``before`` or the Kafka
key), plain JSON rows with ``delete_when``, the ordering column, the table's types, and
bad events returned with their rows (the sink dead-letters them with their offsets)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from acidstream.acid.errors import ConfigError
from acidstream.acid.schema import TableSchema
from acidstream.ingest.change_events import (
    EVENT_TIME_COLUMN,
    ORDERING_COLUMN,
    ChangeParser,
    ChangeSpec,
    ParsedChanges,
    order_tombstones,
)
from acidstream.ingest.record_json import StrictJsonWriter
from acidstream.mutation.changes import DELETE_COLUMN, OFFSET_COLUMN, PARTITION_COLUMN

SCHEMA = TableSchema.of(
    [("id", "int"), ("name", "varchar(5)"), ("amount", "decimal(10,2)"), ("at", "timestamp"), ("lsn", "bigint")]
)  # fmt: skip
KAFKA_MS = 1_800_000_000_000


def dbz(
    op: str, *, before: Any = None, after: Any = None, lsn: Any = None, schemas: bool = False,
    ts_ms: int | None = None, source_ts: int | None = None,
) -> bytes:  # fmt: skip
    source: dict[str, Any] = {"connector": "postgresql", "lsn": lsn}
    if source_ts is not None:
        source["ts_ms"] = source_ts
    payload = {"before": before, "after": after, "source": source, "op": op, "ts_ms": ts_ms}
    doc = (
        {"schema": {"type": "struct", "fields": [{"field": "before"}]}, "payload": payload}
        if schemas
        else payload
    )
    return json.dumps(doc).encode()


def kafka(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    *,
    partition: int = 3,
) -> pa.Table:
    n = len(values)
    return pa.table({
        "key": pa.array(keys if keys is not None else [None] * n, pa.binary()),
        "value": pa.array(values, pa.binary()),
        "topic": pa.array(["pg.public.t"] * n),
        "partition": pa.array([partition] * n, pa.int32()),
        "offset": pa.array(range(100, 100 + n), pa.int64()),
        "timestamp": pa.array([KAFKA_MS + i for i in range(n)], pa.timestamp("ms")),
    })  # fmt: skip


def parser(**kw: Any) -> ChangeParser:
    spec = {"format": "debezium", "key": ("id",), **kw}
    return ChangeParser(ChangeSpec(**spec), SCHEMA)


def rows(parsed: ParsedChanges, *cols: str) -> list[tuple[Any, ...]]:
    t = parsed.events
    return list(zip(*(t.column(c).to_pylist() for c in cols), strict=True))


@pytest.mark.parametrize("schemas", [False, True])
def test_debezium_create_read_update_delete_with_schemas_on_and_off(schemas: bool) -> None:
    after = {"id": 1, "name": "ab", "amount": 12.5, "at": "2026-11-27 10:00:00", "lsn": 999}
    values = [
        dbz("r", after=after, lsn=10, schemas=schemas, source_ts=5_000),
        dbz("c", after={**after, "id": 2}, lsn=11, schemas=schemas, ts_ms=6_000),
        dbz("u", before={"id": 1}, after={**after, "name": "xy"}, lsn=12, schemas=schemas),
        dbz("d", before={"id": 2, "name": "ab"}, lsn=13, schemas=schemas, source_ts=7_000),
    ]
    got = parser(ordering="source.lsn").parse(kafka(values))
    assert got.rejected == () and got.rows == 4
    # lsn is a table column: the envelope's source.lsn is what the table keeps.
    assert rows(got, "id", "name", "amount", "lsn", DELETE_COLUMN) == [
        (1, "ab", decimal.Decimal("12.50"), 10, False),
        (2, "ab", decimal.Decimal("12.50"), 11, False),
        (1, "xy", decimal.Decimal("12.50"), 12, False),
        (2, "ab", None, 13, True),
    ]
    assert rows(got, "at")[0] == (dt.datetime(2026, 11, 27, 10, 0),)
    assert rows(got, PARTITION_COLUMN, OFFSET_COLUMN) == [(3, 100), (3, 101), (3, 102), (3, 103)]
    # source.ts_ms, else ts_ms, else the Kafka timestamp.
    assert [r[0] for r in rows(got, EVENT_TIME_COLUMN)] == [5_000, 6_000, KAFKA_MS + 2, 7_000]


def test_an_ordering_that_is_no_table_column_gets_its_own_column() -> None:
    got = parser(ordering="source.scn").parse(
        kafka([b'{"op": "c", "after": {"id": 1}, "source": {"scn": 77}}'])
    )
    assert rows(got, "id", ORDERING_COLUMN, "lsn") == [(1, 77, None)]
    p = parser(ordering="after.lsn")
    assert p.ordering_column == "lsn"
    assert rows(p.parse(kafka([dbz("c", after={"id": 1, "lsn": 5}, lsn=99)])), "lsn") == [(5,)]


@pytest.mark.parametrize("schemas", [False, True])
def test_tombstones_and_deletes_without_before_take_the_kafka_key(schemas: bool) -> None:
    def key(k: int) -> bytes:
        return json.dumps(
            {"schema": {"type": "struct"}, "payload": {"id": k}} if schemas else {"id": k}
        ).encode()

    values = [dbz("d", before={"id": 5}, lsn=1), None, dbz("d", before=None, lsn=2), None]
    keys = [key(5), key(5), key(6), None]
    got = parser(ordering="source.lsn").parse(kafka(values, keys))
    assert rows(got, "id", DELETE_COLUMN, "lsn") == [(5, True, 1), (5, True, None), (6, True, 2)]
    assert got.rejected == ((3, "NULL or missing key column 'id'"),)


def test_bad_events_are_returned_with_their_rows_and_reasons() -> None:
    values = [
        b"{not json",
        dbz("c", after={"id": 1, "name": "toolong"}, lsn=1),  # varchar(5) truncates: fine
        dbz("c", after={"id": 2**40}, lsn=2),
        dbz("c", after={"id": None, "name": "a"}, lsn=3),
        dbz("c", after={"name": "no id"}, lsn=4),
        dbz("c", after={"id": 3}),  # no ordering
        dbz("t", lsn=5),  # a truncate: no row to apply
        b'["an", "array"]',
        dbz("c", after={"id": 4, "amount": "12.3.4"}, lsn=6),
        dbz("c", after={"id": 5, "at": "not a time"}, lsn=7),
        dbz("c", after={"id": 6}, lsn="12x"),
        dbz("u", after=None, lsn=8),
    ]
    got = parser(ordering="source.lsn").parse(kafka(values))
    assert rows(got, "id", "name") == [(1, "toolo")]
    reasons = dict(got.rejected)
    assert sorted(reasons) == [0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert "malformed JSON" in reasons[0]
    assert "out of range for int" in reasons[2]
    assert reasons[3] == reasons[4] == "NULL or missing key column 'id'"
    assert reasons[5] == "missing ordering 'source.lsn'"
    assert "unknown Debezium op 't'" in reasons[6]
    assert "not a Debezium envelope" in reasons[7]
    assert "column 'amount'" in reasons[8] and "column 'at'" in reasons[9]
    assert "is not an integer" in reasons[10]
    assert "no 'after'" in reasons[11]


def test_the_row_path_gives_the_values_of_the_bulk_path() -> None:
    """Records the bulk read cannot take as they are (a key in another case, escapes)
    go through the JSON writer's row path: the same typed values, in input order."""
    after = {"id": 1, "name": "é", "amount": "3.145", "at": "2026-01-02 03:04:05.123456"}
    plain = dbz("c", after=after, lsn=1)
    upper = dbz("c", after={k.upper(): v for k, v in after.items()}, lsn=1)
    escaped = plain.replace(b'"name"', b'"n\\u0061me"')
    got = parser(ordering="source.lsn").parse(kafka([plain, upper, escaped, plain]))
    assert got.rejected == ()
    cols = ("id", "name", "amount", "at", "lsn")
    first, *others = rows(got, *cols)
    assert others == [first] * 3
    assert first == (1, "é", decimal.Decimal("3.15"), dt.datetime(2026, 1, 2, 3, 4, 5, 123456), 1)
    # and the values the JSON writer gives the same row
    w = StrictJsonWriter().bind(SCHEMA)
    expect = w.encode_block([json.dumps({**after, "lsn": 1}).encode()]).table.to_pylist()[0]
    assert first == tuple(expect[c] for c in cols)


def test_plain_json_rows_with_delete_when_and_an_ordering_column() -> None:
    schema = TableSchema.of([("id", "bigint"), ("op", "string"), ("v", "int"), ("ver", "int")])
    p = ChangeParser(
        ChangeSpec(format="json", key=("id",), ordering="ver", delete_when="op = 'd'"), schema
    )
    values = [
        b'{"id": 1, "op": "c", "v": 10, "ver": 1}',
        b'{"id": 1, "op": "d", "ver": 2}',
        b'{"id": 2, "op": null, "v": 3, "ver": 1}',
        b'{"id": 3, "op": "c", "v": 3}',
        None,
    ]
    got = p.parse(kafka(values))
    assert p.ordering_column == "ver"
    assert rows(got, "id", "v", "ver", DELETE_COLUMN) == [
        (1, 10, 1, False), (1, None, 2, True), (2, 3, 1, False)
    ]  # fmt: skip
    assert dict(got.rejected) == {
        3: "missing ordering 'ver'",
        4: "NULL value (a tombstone) in format json",
    }


def test_a_partitioned_table_gets_its_partition_columns() -> None:
    p = ChangeParser(
        ChangeSpec(format="debezium", key=("id",)),
        TableSchema.of([("id", "int"), ("v", "string")]),
        partition_columns=(("ds", "string"),),
    )
    got = p.parse(kafka([dbz("c", after={"id": 1, "v": "a", "ds": "2026-11-27"})]))
    assert rows(got, "id", "v", "ds") == [(1, "a", "2026-11-27")]


def test_configuration_errors_name_the_option() -> None:
    with pytest.raises(ConfigError, match="key"):
        parser(key=("nope",))
    with pytest.raises(ConfigError, match="key"):
        ChangeSpec(format="json")
    with pytest.raises(ConfigError, match="delete_when"):
        ChangeSpec(format="debezium", key=("id",), delete_when="op = 'd'")
    with pytest.raises(ConfigError, match="ordering"):
        ChangeParser(ChangeSpec(format="json", key=("id",), ordering="nope"), SCHEMA)
    with pytest.raises(ConfigError, match="ordering"):
        parser(ordering="after.nope")
    with pytest.raises(ConfigError, match="must be an integer"):
        parser(ordering="source.name")  # the table's 'name' is a string
    with pytest.raises(ConfigError):
        ChangeParser(ChangeSpec(format="json", key=("id",), delete_when="nope = 1"), SCHEMA)


def test_a_tombstone_takes_the_ordering_of_its_place_in_its_partition() -> None:
    """After its key's events in its partition: their greatest ordering (it then wins on
    its offset); alone in the batch (a compacted topic dropped its delete): the largest
    value, so it deletes under ordering_guard too; before its key's later events: NULL,
    so they decide."""
    p = parser(ordering="source.lsn")
    values = [
        dbz("u", after={"id": 1}, lsn=7),
        dbz("d", before={"id": 1}, lsn=5),  # out of order: 7 is the newest before it
        None,  # id 1's tombstone
        None,  # id 2: a tombstone alone
        None,  # id 3: a tombstone, then a re-insert
        dbz("c", after={"id": 3}, lsn=9),
    ]
    keys = [b'{"id": 1}', b'{"id": 1}', b'{"id": 1}', b'{"id": 2}', b'{"id": 3}', b'{"id": 3}']
    got = p.parse(kafka(values, keys))
    assert rows(got, "id", "lsn") == [(1, 7), (1, 5), (1, None), (2, None), (3, None), (3, 9)]
    top = 2**63 - 1
    filled = order_tombstones(got.events, ("id",), "lsn")
    assert rows(ParsedChanges(filled, (), 6), "id", "lsn", DELETE_COLUMN) == [
        (1, 7, False), (1, 5, True), (1, 7, True), (2, top, True), (3, None, True), (3, 9, False)
    ]  # fmt: skip
    # A task (alone=False) leaves the lone tombstone to the driver, which sees the batch.
    task = order_tombstones(got.events, ("id",), "lsn", alone=False)
    assert task.column("lsn").to_pylist()[2:4] == [7, None]
    # Events of the key in another partition are not before it.
    other = p.parse(kafka([None], [b'{"id": 3}'], partition=4)).events
    both = order_tombstones(pa.concat_tables([got.events, other]), ("id",), "lsn")
    assert both.column("lsn").to_pylist()[-1] is None
    # ORDERING_COLUMN (an ordering that is no table column) alike
    q = parser(ordering="source.scn")
    alone = order_tombstones(
        q.parse(kafka([None], [b'{"id": 7}'])).events, ("id",), ORDERING_COLUMN
    )
    assert alone.column(ORDERING_COLUMN).to_pylist() == [top]
