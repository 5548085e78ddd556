"""UpsertSink on local Spark, both metastore backends: a random Debezium change log in
micro-batches against a model (last ordering wins, deletes remove, no key twice), replays
skipped, the exactly-once offsets, dead letters, the ordering guard, and a write conflict
with a concurrent ``Table.update`` retried."""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import acidstream
from acidstream.acid import faults
from acidstream.acid.errors import ConfigError
from acidstream.ingest.dead_letter import read_dead_letters
from acidstream.sinks.foreach_batch import SinkOptions, committed_offsets
from acidstream.sinks.upsert_sink import TASK_SCHEMA, UpsertSink
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore, open_store
from tests.ingest.conftest import snapshot_read

pytestmark = pytest.mark.spark

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
)
Event = dict[str, Any]


@pytest.fixture
def env(tmp_path: Path, store_url: str) -> Iterator[dict[str, Any]]:
    """Table ``cdc`` (id, v, lsn) in a metastore on each backend (SQLite, PostgreSQL)."""
    wh = tmp_path / "wh"
    store = open_store(store_url, warehouse=str(wh))
    store.create_table(
        TableDef(db="default", name="cdc", columns=(("id", "int"), ("v", "string"), ("lsn", "bigint")),
                 parameters={"transactional": "true"})
    )  # fmt: skip
    yield {"url": store_url, "wh": str(wh), "store": store, "tmp": tmp_path}
    store.close()


def _sink(env: dict[str, Any], **kw: Any) -> UpsertSink:
    opts = {"mode": "upsert", "format": "debezium", "key": ("id",), "ordering": "source.lsn",
            "sink_id": "cdc1", **kw}  # fmt: skip
    return UpsertSink(table="cdc", metastore=env["url"], warehouse=env["wh"],
                      options=SinkOptions(**opts), lineage="L1")  # fmt: skip


def _envelope(e: Event, *, schemas: bool) -> bytes | None:
    """A Debezium value for model event ``e`` (None: a tombstone)."""
    if e["op"] == "tombstone":
        return None
    row = {"id": e["id"], "v": e["v"]}
    payload = {
        "before": {"id": e["id"]} if e["op"] in ("u", "d") else None,
        "after": None if e["op"] == "d" else row,
        "op": e["op"],
        "source": {"lsn": e["lsn"], "ts_ms": 1_700_000_000_000 + e["lsn"]},
        "ts_ms": 1_700_000_000_500,
    }
    doc = (
        {"schema": {"type": "struct", "optional": False}, "payload": payload}
        if schemas
        else payload
    )
    return json.dumps(doc).encode()


def _key(e: Event, *, schemas: bool) -> bytes:
    k = {"id": e["id"]}
    return json.dumps({"schema": {"type": "struct"}, "payload": k} if schemas else k).encode()


def _df(
    spark: Any,
    events: list[Event],
    *,
    schemas: bool = False,
    extra: Sequence[tuple[Any, ...]] = (),
) -> Any:
    ts = dt.datetime(2026, 11, 27, 12, 0, 0)
    rows = [
        (
            _key(e, schemas=schemas),
            _envelope(e, schemas=schemas),
            "db.cdc",
            e["partition"],
            e["offset"],
            ts,
        )
        for e in events
    ] + list(extra)
    return spark.createDataFrame(rows, KAFKA_SCHEMA).repartition(3)


def _table(store: TxnStore) -> list[tuple[Any, ...]]:
    t = store.get_table("default", "cdc")
    got = snapshot_read(store, t)
    return sorted(zip(*(got.column(c).to_pylist() for c in ("id", "v", "lsn")), strict=True))


def _fold(model: dict[int, tuple[str | None, int]], batch: list[Event], *, guard: bool) -> int:
    """The batch applied to the model: per key the last event by (lsn, partition, offset)
    (a tombstone stands at its Kafka place: ``order_tombstones``); with ``guard`` an event
    older than the model's row is skipped. Returns the number of late events skipped."""
    last: dict[int, tuple[tuple[float, int, int], Event]] = {}
    for e in batch:
        lsn: float = e["lsn"]
        if e["op"] == "tombstone":
            # At its Kafka place: the newest event of its key before it in its partition,
            # else (alone in the batch) newer than anything, else first.
            key_events = [x for x in batch if x["id"] == e["id"] and x["op"] != "tombstone"]
            before = [x["lsn"] for x in key_events
                      if x["partition"] == e["partition"] and x["offset"] < e["offset"]]  # fmt: skip
            lsn = max(before) if before else -1 if key_events else float("inf")
        k = (lsn, e["partition"], e["offset"])
        if e["id"] not in last or k >= last[e["id"]][0]:
            last[e["id"]] = (k, e)
    late = 0
    for key, (k, e) in last.items():
        if guard and key in model and k[0] < model[key][1]:
            late += 1
            continue
        if e["op"] in ("d", "tombstone"):
            model.pop(key, None)
        else:
            model[key] = (e["v"], e["lsn"])
    return late


def _change_log(rng: random.Random, batches: int, per_batch: int, keys: int) -> list[list[Event]]:
    """Random Debezium events: inserts, updates, deletes (of present and absent keys),
    tombstones after deletes, duplicated events, and lsn order shuffled against Kafka
    order within each batch (out of order)."""
    lsn = 0
    offsets = [0, 0]
    out: list[list[Event]] = []
    for b in range(batches):
        batch: list[Event] = []
        for _ in range(per_batch):
            lsn += 1
            k = rng.randrange(keys)
            op = rng.choices(["c", "u", "d"], weights=[4, 4, 2])[0]
            batch.append({"id": k, "v": f"v{b}_{lsn}", "op": op, "lsn": lsn})
            if op == "d" and rng.random() < 0.5:
                batch.append({"id": k, "v": None, "op": "tombstone", "lsn": lsn})
            if rng.random() < 0.1:
                batch.append(dict(batch[-1]))  # a duplicate (Kafka at-least-once)
        rng.shuffle(batch)  # out of order: Kafka order is not lsn order
        for e in batch:
            e["partition"] = e["id"] % 2
            e["offset"] = offsets[e["partition"]]
            offsets[e["partition"]] += 1
        out.append(batch)
    return out


@pytest.mark.parametrize("schemas", [False, True])
def test_the_table_equals_the_fold_of_a_random_change_log_and_replays_are_skipped(
    spark: Any, env: dict[str, Any], schemas: bool
) -> None:
    rng = random.Random(31 + schemas)
    log = _change_log(rng, batches=4, per_batch=60, keys=25)
    sink = _sink(env)
    model: dict[int, tuple[str | None, int]] = {}
    for b, batch in enumerate(log):
        sink(_df(spark, batch, schemas=schemas), b)
        _fold(model, batch, guard=False)
        got = _table(env["store"])
        assert got == sorted((k, v, lsn) for k, (v, lsn) in model.items()), f"batch {b}"
        assert len({r[0] for r in got}) == len(got)  # no key twice
        stats = sink.last_batch_stats
        assert stats["batch_id"] == b and stats["rows"] == len(batch) and stats["bad_records"] == 0
        assert stats["events"] == len(batch)
        assert stats["upserts"] + stats["deletes"] + stats["absent_deletes"] == len(
            {e["id"] for e in batch}
        )
        assert len(stats["event_times_ms"]) == len({e["id"] for e in batch})
    # Spark replays the last batch (and an older one) after a restart: skipped.
    before = _table(env["store"])
    sink(_df(spark, log[-1], schemas=schemas), len(log) - 1)
    sink(_df(spark, log[0], schemas=schemas), 0)
    assert sink.batches_skipped == 2 and sink.batches_committed == len(log)
    assert _table(env["store"]) == before
    meta = committed_offsets("cdc", sink_id="cdc1", metastore=env["url"], warehouse=env["wh"])
    assert meta is not None and meta["batch_id"] == len(log) - 1 and meta["lineage"] == "L1"
    ends = {
        str(p): 1 + max(e["offset"] for bt in log for e in bt if e["partition"] == p)
        for p in (0, 1)
    }
    assert meta["offsets"] == {"db.cdc": ends}
    sink.close()


def test_bad_events_go_to_dead_letters_with_their_offsets_and_count_in_the_offsets(
    spark: Any, env: dict[str, Any]
) -> None:
    dl = str(env["tmp"] / "dead")
    sink = _sink(env, dead_letter_path=dl)
    good = [{"id": 1, "v": "a", "op": "c", "lsn": 1, "partition": 0, "offset": 0}]
    ts = dt.datetime(2026, 11, 27, 12, 0, 0)
    no_lsn = json.dumps({"op": "c", "after": {"id": 5, "v": "x"}, "source": {}}).encode()
    big = json.dumps({"op": "c", "after": {"id": 2**40, "v": "x"}, "source": {"lsn": 3}}).encode()
    null_key = json.dumps(
        {"op": "c", "after": {"id": None, "v": "x"}, "source": {"lsn": 4}}
    ).encode()
    bad = [
        (None, b"{not json", "db.cdc", 0, 7, ts),
        (None, no_lsn, "db.cdc", 0, 8, ts),
        (None, big, "db.cdc", 1, 9, ts),
        (None, null_key, "db.cdc", 1, 10, ts),
        (None, None, "db.cdc", 1, 11, ts),  # a tombstone without a Kafka key
    ]
    sink(_df(spark, good, extra=bad), 0)
    assert _table(env["store"]) == [(1, "a", 1)]
    stats = sink.last_batch_stats
    assert stats["bad_records"] == stats["dead_letters"] == 5 and stats["rows"] == 6
    letters = sorted(read_dead_letters(dl), key=lambda d: d.position)
    assert [d.position for d in letters] == [
        "db.cdc/0@7",
        "db.cdc/0@8",
        "db.cdc/1@10",
        "db.cdc/1@11",
        "db.cdc/1@9",
    ]
    reasons = {d.position: d.reason for d in letters}
    assert "malformed JSON" in reasons["db.cdc/0@7"]
    assert "missing ordering" in reasons["db.cdc/0@8"]
    assert "out of range for int" in reasons["db.cdc/1@9"]
    assert (
        "NULL or missing key" in reasons["db.cdc/1@10"]
        and "NULL or missing key" in reasons["db.cdc/1@11"]
    )
    assert letters[0].record == b"{not json"
    meta = committed_offsets("cdc", sink_id="cdc1", metastore=env["url"], warehouse=env["wh"])
    assert meta is not None and meta["offsets"] == {
        "db.cdc": {"0": 9, "1": 12}
    }  # bad ones included
    sink.close()


def test_without_a_dead_letter_path_a_bad_event_fails_the_batch_and_commits_nothing(
    spark: Any, env: dict[str, Any]
) -> None:
    sink = _sink(env)
    good = [{"id": 1, "v": "a", "op": "c", "lsn": 1, "partition": 0, "offset": 0}]
    ts = dt.datetime(2026, 11, 27, 12, 0, 0)
    with pytest.raises(Exception, match="no dead letter configured"):
        sink(_df(spark, good, extra=[(None, b"nope", "db.cdc", 0, 1, ts)]), 0)
    assert _table(env["store"]) == []
    assert (
        committed_offsets("cdc", sink_id="cdc1", metastore=env["url"], warehouse=env["wh"]) is None
    )
    skipping = _sink(env, skip_bad_records=True)
    skipping(_df(spark, good, extra=[(None, b"nope", "db.cdc", 0, 1, ts)]), 0)
    assert _table(env["store"]) == [(1, "a", 1)] and skipping.last_batch_stats["bad_records"] == 1
    sink.close()
    skipping.close()


def test_ordering_guard_skips_and_counts_late_events(spark: Any, env: dict[str, Any]) -> None:
    sink = _sink(env, ordering_guard=True)
    first = [{"id": 1, "v": "new", "op": "c", "lsn": 10, "partition": 0, "offset": 0},
             {"id": 2, "v": "b", "op": "c", "lsn": 11, "partition": 0, "offset": 1}]  # fmt: skip
    sink(_df(spark, first), 0)
    late: list[Event] = [{"id": 1, "v": "old", "op": "u", "lsn": 5, "partition": 0, "offset": 2},
            {"id": 2, "v": None, "op": "d", "lsn": 6, "partition": 0, "offset": 3},
            {"id": 3, "v": "c", "op": "c", "lsn": 7, "partition": 0, "offset": 4}]  # fmt: skip
    sink(_df(spark, late), 1)
    stats = sink.last_batch_stats
    assert (stats["skipped_late"], stats["inserted"], stats["deletes"]) == (2, 1, 0)
    assert _table(env["store"]) == [(1, "new", 10), (2, "b", 11), (3, "c", 7)]
    # A random log under the guard: the model skips what is older than its row.
    rng = random.Random(7)
    model: dict[int, tuple[str | None, int]] = {1: ("new", 10), 2: ("b", 11), 3: ("c", 7)}
    for b, batch in enumerate(_change_log(rng, batches=3, per_batch=40, keys=10), start=2):
        for e in batch:
            e["offset"] += 100
            e["lsn"] = rng.randrange(1, 200)  # arbitrary versions: many late ones
        sink(_df(spark, batch), b)
        expect_late = _fold(model, batch, guard=True)
        assert sink.last_batch_stats["skipped_late"] == expect_late
        assert _table(env["store"]) == sorted((k, v, lsn) for k, (v, lsn) in model.items())
    sink.close()


def test_a_write_conflict_with_a_concurrent_update_is_retried(
    spark: Any, env: dict[str, Any]
) -> None:
    """A ``Table.update`` holds SHARED_WRITE while the batch's txn opens: the batch's
    EXCL_WRITE waits, and once it holds the lock it finds the UPDATE committed after its txn
    opened, so it starts again in a new txn and snapshot (attempts == 2), the UPDATE's change kept where no event overrides it."""
    from tests.mutation.conftest import wait_for_a_waiting_lock

    sink = _sink(env)
    sink(_df(spark, [{"id": 1, "v": "a", "op": "c", "lsn": 1, "partition": 0, "offset": 0},
                     {"id": 2, "v": "b", "op": "c", "lsn": 2, "partition": 0, "offset": 1}]), 0)  # fmt: skip
    t = acidstream.table("default.cdc", metastore=env["url"], warehouse=env["wh"])
    errors: list[BaseException] = []
    waiting = threading.Event()
    df = _df(spark, [{"id": 1, "v": "u", "op": "u", "lsn": 3, "partition": 0, "offset": 2},
                     {"id": 3, "v": "c", "op": "c", "lsn": 4, "partition": 0, "offset": 3}])  # fmt: skip

    def run_batch() -> None:
        try:
            sink(df, 1)
        except BaseException as e:
            errors.append(e)

    th = threading.Thread(target=run_batch)

    def hook(point: str) -> None:
        if point == "mutation.after_find" and not th.is_alive() and not waiting.is_set():
            th.start()
            if wait_for_a_waiting_lock(env["url"], timeout_s=60):
                waiting.set()

    faults.set_hook(hook)
    try:
        t.update(set={"lsn": "lsn + 100"}, where="id = 2")
        th.join(120)
    finally:
        faults.set_hook(None)
    assert waiting.is_set() and not errors, errors
    assert sink.last_batch_stats["attempts"] == 2
    assert _table(env["store"]) == [(1, "u", 3), (2, "b", 102), (3, "c", 4)]
    sink.close()


@pytest.mark.parametrize("step", ["upsert.after_parse", "upsert.before_commit"])
def test_a_failure_before_the_commit_leaves_the_table_at_the_last_batch(
    spark: Any, env: dict[str, Any], step: str
) -> None:
    sink = _sink(env)
    sink(_df(spark, [{"id": 1, "v": "a", "op": "c", "lsn": 1, "partition": 0, "offset": 0}]), 0)
    batch: list[Event] = [{"id": 1, "v": None, "op": "d", "lsn": 2, "partition": 0, "offset": 1},
             {"id": 2, "v": "b", "op": "c", "lsn": 3, "partition": 0, "offset": 2}]  # fmt: skip

    def hook(point: str) -> None:
        if point == step:
            raise RuntimeError(f"injected at {point}")

    faults.set_hook(hook)
    try:
        with pytest.raises(RuntimeError, match="injected"):
            sink(_df(spark, batch), 1)
    finally:
        faults.set_hook(None)
    assert _table(env["store"]) == [(1, "a", 1)]
    meta = committed_offsets("cdc", sink_id="cdc1", metastore=env["url"], warehouse=env["wh"])
    assert meta is not None and meta["batch_id"] == 0
    sink(_df(spark, batch), 1)  # Spark retries the batch: applied once
    assert _table(env["store"]) == [(2, "b", 3)]
    sink.close()


def test_parsed_micro_batches_are_taken_only_from_the_sinks_own_fused_source(
    spark: Any, env: dict[str, Any]
) -> None:
    """A micro-batch of parse results (``TASK_SCHEMA``) not read by this sink's
    ``fused_source`` is refused before anything is applied; a bad key fails
    ``fused_source`` itself, before a query starts."""
    parsed = spark.createDataFrame([], TASK_SCHEMA)
    sink = _sink(env)
    with pytest.raises(ConfigError, match="not read by this sink's source"):
        sink(parsed, 0)
    assert sink.batches_committed == 0
    assert (
        committed_offsets("cdc", sink_id="cdc1", metastore=env["url"], warehouse=env["wh"]) is None
    )
    with pytest.raises(ConfigError, match="key: \\['nope'\\] not column"):
        _sink(env, key=("nope",)).fused_source(spark)
    name = sink.fused_source(spark)  # registered: acidkafka's options, the parse's schema
    assert name.startswith("acidkafka_upsert_")
    reader = spark.readStream.format(name).option("kafka.bootstrap.servers", "127.0.0.1:1")
    assert reader.option("subscribe", "t").load().columns == parsed.columns
    sink.close()


def test_bad_option_combinations_are_refused_naming_the_option(env: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="key: \\['nope'\\] not column"):
        _sink(env, key=("nope",))._bind(env["store"].get_table("default", "cdc"))
    with pytest.raises(ConfigError, match="ordering_guard"):
        _sink(env, ordering="source.scn", ordering_guard=True)._bind(
            env["store"].get_table("default", "cdc")
        )
    with pytest.raises(ConfigError, match="key: mode upsert needs key"):
        _sink(env, key=None)._bind(env["store"].get_table("default", "cdc"))
    with pytest.raises(ConfigError, match="delete_when"):
        SinkOptions(mode="upsert", format="debezium", key=("id",), delete_when="v = 'x'")
    with pytest.raises(ConfigError, match="ordering_guard needs ordering"):
        SinkOptions.from_options({"mode": "upsert", "key": "id", "orderingGuard": "true"})
    with pytest.raises(ConfigError, match="UpsertSink needs"):
        UpsertSink(table="cdc", metastore=env["url"], warehouse=env["wh"], options=SinkOptions())


def test_a_failure_after_the_commit_keeps_the_batch_and_its_replay_is_skipped(
    spark: Any, env: dict[str, Any]
) -> None:
    sink = _sink(env)
    batch: list[Event] = [{"id": 1, "v": "a", "op": "c", "lsn": 1, "partition": 0, "offset": 0}]

    def hook(point: str) -> None:
        if point == "upsert.after_commit":
            raise RuntimeError("injected after the commit")

    faults.set_hook(hook)
    try:
        with pytest.raises(RuntimeError, match="injected"):
            sink(_df(spark, batch), 0)
    finally:
        faults.set_hook(None)
    assert _table(env["store"]) == [(1, "a", 1)]
    again = _sink(env)  # the restarted driver: Spark replays the batch
    again(_df(spark, batch), 0)
    assert again.batches_skipped == 1 and again.batches_committed == 0
    assert _table(env["store"]) == [(1, "a", 1)]
    sink.close()
    again.close()


def test_plain_json_rows_with_delete_when_and_the_tables_key_property(
    spark: Any, env: dict[str, Any]
) -> None:
    """Format json: the key and ordering default to the table's ``acidstream.key`` and
    ``acidstream.ordering``; ``delete_when`` on the row makes deletes."""
    store: TxnStore = env["store"]
    store.create_table(
        TableDef(db="default", name="rows", columns=(("id", "int"), ("op", "string"), ("ver", "int")),
                 parameters={"transactional": "true", "acidstream.key": "id", "acidstream.ordering": "ver"})
    )  # fmt: skip
    sink = UpsertSink(table="rows", metastore=env["url"], warehouse=env["wh"], lineage="L",
                      options=SinkOptions(mode="upsert", format="json", delete_when="op = 'd'"))  # fmt: skip
    recs = [{"id": 1, "op": "c", "ver": 2}, {"id": 1, "op": "u", "ver": 1},  # older: loses
            {"id": 2, "op": "c", "ver": 1}, {"id": 2, "op": "d", "ver": 3}, {"id": 3, "op": "d", "ver": 1}]  # fmt: skip
    ts = dt.datetime(2026, 11, 27, 12, 0, 0)
    rows = [(None, json.dumps(r).encode(), "t", 0, i, ts) for i, r in enumerate(recs)]
    sink(spark.createDataFrame(rows, KAFKA_SCHEMA).repartition(2), 0)
    got = snapshot_read(store, store.get_table("default", "rows"))
    assert sorted(
        zip(got.column("id").to_pylist(), got.column("ver").to_pylist(), strict=True)
    ) == [(1, 2)]
    stats = sink.last_batch_stats
    assert (stats["inserted"], stats["deletes"], stats["absent_deletes"]) == (1, 0, 2)
    sink.close()


def test_the_append_sink_reports_its_commit_time_and_the_kafka_timestamps(
    spark: Any, env: dict[str, Any]
) -> None:
    import time

    from acidstream.sinks.foreach_batch import AcidSink

    store: TxnStore = env["store"]
    store.create_table(
        TableDef(db="default", name="log", columns=(("id", "int"),), parameters={"transactional": "true"})
    )  # fmt: skip
    sink = AcidSink(table="log", metastore=env["url"], warehouse=env["wh"],
                    options=SinkOptions(skip_bad_records=True))  # fmt: skip
    base = dt.datetime(2026, 11, 27, 12, 0, 0, tzinfo=dt.UTC)
    rows = [
        (None, json.dumps({"id": i}).encode(), "t", 0, i, base + dt.timedelta(seconds=i))
        for i in range(5)
    ]
    rows.append((None, b"bad", "t", 0, 5, base))
    before = time.time()
    sink(spark.createDataFrame(rows, KAFKA_SCHEMA).repartition(2), 0)
    stats = sink.last_batch_stats
    assert before <= stats["committed_at"] <= time.time()
    base_ms = int(base.timestamp() * 1000)
    # the rows written (the bad record is not one)
    assert sorted(stats["event_times_ms"].tolist()) == [base_ms + 1000 * i for i in range(5)]
    sink.close()


def test_a_partitioned_table_moves_a_row_whose_partition_value_changes(
    spark: Any, env: dict[str, Any]
) -> None:
    """The key need not hold the partition column: an update to another partition deletes
    the old version where it was and inserts the new one in its new partition."""
    store: TxnStore = env["store"]
    store.create_table(
        TableDef(db="default", name="parts", columns=(("id", "int"), ("v", "string")),
                 partition_keys=(("region", "string"),), parameters={"transactional": "true"})
    )  # fmt: skip
    sink = UpsertSink(table="parts", metastore=env["url"], warehouse=env["wh"], lineage="L",
                      options=SinkOptions(mode="upsert", format="debezium", key=("id",),
                                          ordering="source.lsn"))  # fmt: skip
    ts = dt.datetime(2026, 11, 27, 12, 0, 0)

    def rec(i: int, op: str, after: dict[str, Any] | None, lsn: int) -> tuple[Any, ...]:
        before = None if op == "c" else {"id": after["id"] if after else 2}
        v = {"op": op, "before": before, "after": after, "source": {"lsn": lsn}}
        return (None, json.dumps(v).encode(), "t", 0, i, ts)

    first = [rec(0, "c", {"id": 1, "v": "a", "region": "eu"}, 1),
             rec(1, "c", {"id": 2, "v": "b", "region": "us"}, 2)]  # fmt: skip
    sink(spark.createDataFrame(first, KAFKA_SCHEMA), 0)
    second = [rec(2, "u", {"id": 1, "v": "a2", "region": "us"}, 3), rec(3, "d", None, 4)]
    sink(spark.createDataFrame(second, KAFKA_SCHEMA).repartition(2), 1)
    got = snapshot_read(store, store.get_table("default", "parts"))
    cols = ("id", "v", "region")
    assert sorted(zip(*(got.column(c).to_pylist() for c in cols), strict=True)) == [(1, "a2", "us")]
    sink.close()


def test_a_tombstone_alone_deletes_its_key_also_under_the_ordering_guard(
    spark: Any, env: dict[str, Any]
) -> None:
    """A compacted topic keeps a deleted key's tombstone and drops its delete event: the
    tombstone alone must delete the key, whatever the row's ordering."""
    sink = _sink(env, ordering_guard=True)
    sink(_df(spark, [{"id": 1, "v": "a", "op": "c", "lsn": 10, "partition": 0, "offset": 0},
                     {"id": 2, "v": "b", "op": "c", "lsn": 11, "partition": 0, "offset": 1}]), 0)  # fmt: skip
    tomb: list[Event] = [
        {"id": 1, "v": None, "op": "tombstone", "lsn": 0, "partition": 0, "offset": 2}
    ]
    sink(_df(spark, tomb), 1)
    stats = sink.last_batch_stats
    assert (stats["deletes"], stats["skipped_late"]) == (1, 0)
    assert _table(env["store"]) == [(2, "b", 11)]
    sink.close()


def test_a_restarted_sink_aborts_the_txn_a_dead_driver_left_holding_the_lock(
    spark: Any, env: dict[str, Any]
) -> None:
    """A driver killed inside a batch leaves its txn open with the table's EXCL_WRITE
    lock. The next sink of that id (a new driver) finds the txn by its agent and aborts
    it at start, so its first batch does not wait out the metastore's txn timeout."""
    from acidstream.acid.table_name import TableName
    from acidstream.txn.batch import TransactionBatch
    from acidstream.txn.locks import DataOperationType
    from acidstream.txn.store import TxnState

    dead = _sink(env)
    store = env["store"]
    left = TransactionBatch(
        open_store(env["url"]), TableName("default", "cdc"), size=1,
        operation=DataOperationType.UPDATE, exclusive=True, agent_info=dead.agent,
    )  # fmt: skip
    left.begin_next()  # holds EXCL_WRITE; its process "dies" (never commits or aborts)
    sink = _sink(env, sink_id="cdc1")
    assert sink.agent == dead.agent
    sink(_df(spark, [{"id": 1, "v": "a", "op": "c", "lsn": 1, "partition": 0, "offset": 0}]), 0)
    assert _table(store) == [(1, "a", 1)]
    assert store.txn_state(left.txn_ids[0]) is TxnState.ABORTED
    assert sink.last_batch_stats["txn_ids"][0] > left.txn_ids[0]
    sink.close()
    left.close()
    left.store.close()
