"""End to end against the real broker and local Spark: Kafka -> AcidSink -> table, exactly once,
including SIGKILL of the driver at each step of a micro-batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from acidstream.acid import faults
from acidstream.jobs.config import KafkaJobConfig
from acidstream.jobs.kafka_job import run_kafka_job
from acidstream.sinks.foreach_batch import CRASH_POINTS
from acidstream.txn.store import TxnState, open_store
from tests.ingest.conftest import snapshot_read

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

COLUMNS = "id bigint, user_name string, amount decimal(10,2), event_time timestamp"


def _config(tmp: Path, topic: str, **over: Any) -> KafkaJobConfig:
    flat = {
        "kafka.topic": topic, "kafka.bootstrap_servers": "set-by-test",
        "table.name": "default.events", "table.columns": COLUMNS, "table.partitioned_by": "ds string",
        "warehouse": str(tmp / "wh"), "checkpoint": str(tmp / "ckpt"), "sink.sink_id": "t1",
        "sink.dead_letter_path": str(tmp / "dead"), "spark.master": "local[2]",
    }  # fmt: skip
    flat.update(over)
    return KafkaJobConfig.load(None, overrides=flat, env={})


def _produce(kafka_broker: Any, topic: str, lo: int, hi: int) -> None:
    import random

    from acidstream.jobs.sample_events import sample_event

    rnd = random.Random(lo)
    kafka_broker.produce(topic, [sample_event(i, rnd) for i in range(lo, hi)])


def _table_ids(cfg: KafkaJobConfig) -> list[int]:
    store = open_store(f"sqlite:///{cfg.warehouse}/metastore.db", warehouse=cfg.warehouse)
    try:
        t = store.get_table("default", "events")
        return sorted(snapshot_read(store, t, columns=["id"]).column("id").to_pylist())
    finally:
        store.close()


def _topic(kafka_broker: Any, partitions: int = 3) -> str:
    name = f"ev_{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(name, partitions)
    return name


def test_available_now_writes_every_event_once_across_partitions(
    spark: Any, kafka_broker: Any, tmp_path: Path
) -> None:
    topic = _topic(kafka_broker)
    _produce(kafka_broker, topic, 0, 3000)
    cfg = _config(tmp_path, topic, **{"kafka.max_offsets_per_trigger": 1000})
    res = run_kafka_job(cfg, bootstrap=kafka_broker.bootstrap, spark=spark)
    assert res.batches_committed >= 3  # maxOffsetsPerTrigger split the backlog
    assert _table_ids(cfg) == list(range(3000))
    # More events, same checkpoint: only the new ones are added.
    _produce(kafka_broker, topic, 3000, 3500)
    res2 = run_kafka_job(cfg, bootstrap=kafka_broker.bootstrap, spark=spark)
    assert res2.rows == 500
    assert _table_ids(cfg) == list(range(3500))
    store = open_store(f"sqlite:///{cfg.warehouse}/metastore.db")
    try:
        parts = sorted(p.name for p in store.list_partitions("default", "events"))
    finally:
        store.close()
    assert parts == ["ds=2026-11-18", "ds=2026-11-19", "ds=2026-11-20"]


def test_min_partitions_splits_a_partition_over_tasks_exactly_once(
    spark: Any, kafka_broker: Any, tmp_path: Path
) -> None:
    """``kafka.min_partitions``: one topic-partition read and written by 3 tasks, each with
    files of its own; every event once, and the table records the partition's end (the
    furthest task's), so the next run adds only what is new."""
    from acidstream.sinks.foreach_batch import committed_offsets

    topic = _topic(kafka_broker, partitions=1)
    _produce(kafka_broker, topic, 0, 1500)
    cfg = _config(tmp_path, topic, **{"kafka.min_partitions": 3})
    files: list[int] = []
    res = run_kafka_job(
        cfg, bootstrap=kafka_broker.bootstrap, spark=spark,
        on_batch=lambda s: files.append(s.files),
    )  # fmt: skip
    assert res.rows == 1500
    assert files == [9]  # 3 tasks x 3 ds partitions
    assert _table_ids(cfg) == list(range(1500))
    meta = committed_offsets("default.events", sink_id="t1", warehouse=cfg.warehouse,
                             metastore=cfg.metastore)  # fmt: skip
    assert meta is not None and meta["offsets"] == {topic: {"0": 1500}}
    _produce(kafka_broker, topic, 1500, 1600)
    assert run_kafka_job(cfg, bootstrap=kafka_broker.bootstrap, spark=spark).rows == 100
    assert _table_ids(cfg) == list(range(1600))


def test_processing_time_trigger_writes_every_event_once(
    spark: Any, kafka_broker: Any, tmp_path: Path
) -> None:
    topic = _topic(kafka_broker, partitions=2)
    _produce(kafka_broker, topic, 0, 1200)
    cfg = _config(
        tmp_path, topic, **{"trigger.available_now": False, "trigger.processing_time": "1 second"}
    )
    run_kafka_job(cfg, bootstrap=kafka_broker.bootstrap, spark=spark, timeout_s=0.5)
    assert _table_ids(cfg) == list(range(1200))


def test_lost_checkpoint_restarts_from_the_offsets_recorded_in_the_table(
    spark: Any, kafka_broker: Any, tmp_path: Path
) -> None:
    import shutil

    topic = _topic(kafka_broker)
    _produce(kafka_broker, topic, 0, 900)
    cfg = _config(tmp_path, topic)
    run_kafka_job(cfg, bootstrap=kafka_broker.bootstrap, spark=spark)
    shutil.rmtree(cfg.checkpoint)
    _produce(kafka_broker, topic, 900, 1000)
    res = run_kafka_job(cfg, bootstrap=kafka_broker.bootstrap, spark=spark)
    assert res.started_from == "table"
    assert _table_ids(cfg) == list(range(1000))


_DRIVER = """
import json, sys
from acidstream.jobs.config import KafkaJobConfig
from acidstream.jobs.kafka_job import run_kafka_job
flat = json.loads(sys.argv[1])
cfg = KafkaJobConfig.load(None, overrides=flat, env={})
res = run_kafka_job(cfg, bootstrap=sys.argv[2])
print("RESULT", json.dumps({"committed": res.batches_committed, "skipped": res.batches_skipped, "rows": res.rows}))
"""


def _run_driver(
    flat: dict[str, Any], bootstrap: str, crash: str | None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop(faults.ENV, None)
    if crash:
        env[faults.ENV] = crash
    return subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(flat), bootstrap],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("crash", CRASH_POINTS)
def test_driver_killed_at_each_step_loses_and_duplicates_nothing(
    crash: str, kafka_broker: Any, tmp_path: Path
) -> None:
    topic = _topic(kafka_broker)
    _produce(kafka_broker, topic, 0, 600)
    flat = {
        "kafka.topic": topic, "table.name": "default.events", "table.columns": COLUMNS,
        "table.partitioned_by": "ds string", "warehouse": str(tmp_path / "wh"),
        "checkpoint": str(tmp_path / "ckpt"), "sink.sink_id": "crash", "spark.master": "local[2]",
        "kafka.max_offsets_per_trigger": 300,
        # Each micro-batch a transaction batch of 3 txns (their files a footer per txn).
        "sink.txns_per_batch": 3,
    }  # fmt: skip
    first = _run_driver(flat, kafka_broker.bootstrap, crash)
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    cfg = KafkaJobConfig.load(None, overrides=flat, env={})
    ids_after_crash = _table_ids(cfg)
    # Nothing uncommitted is visible: before the commit no row; after it, batch 0 whole
    # (300 events: maxOffsetsPerTrigger spread over the partitions), each once.
    assert len(set(ids_after_crash)) == len(ids_after_crash)
    assert set(ids_after_crash) <= set(range(600))
    if crash == "sink.after_commit":
        assert 0 < len(ids_after_crash) <= 300
    else:
        assert ids_after_crash == []
    second = _run_driver(flat, kafka_broker.bootstrap, None)
    assert second.returncode == 0, second.stderr[-3000:]
    result = json.loads(second.stdout.split("RESULT", 1)[1])
    assert _table_ids(cfg) == list(range(600))  # every event exactly once
    if crash == "sink.after_commit":
        assert result["skipped"] == 1  # Spark replayed the committed batch; the sink skipped it
    store = open_store(f"sqlite:///{cfg.warehouse}/metastore.db")
    try:
        states = {t.txn_id: t.state for t in store.show_txns()}
    finally:
        store.close()
    assert TxnState.OPEN not in states.values()  # the dead driver's txn was aborted at restart
    deltas = list(Path(cfg.warehouse).rglob("delta_*"))
    store = open_store(f"sqlite:///{cfg.warehouse}/metastore.db")
    try:
        aborted_wids = {
            store.write_id_for_txn(t, "default", "events")
            for t, s in states.items()
            if s == TxnState.ABORTED
        }
    finally:
        store.close()
    assert deltas
    for d in deltas:
        lo, hi = int(d.name.split("_")[1]), int(d.name.split("_")[2])
        assert hi - lo + 1 == 3  # one directory per task for the batch's 3 write ids
        assert not aborted_wids & set(range(lo, hi + 1)), f"aborted files not cleaned up: {d}"
    assert not list(Path(cfg.warehouse).rglob("*_flush_length"))  # closed files keep no side file


def test_poison_records_never_wedge_the_stream(
    spark: Any, kafka_broker: Any, tmp_path: Path
) -> None:
    """Records that used to fail the commit (and every restart after it) are dead-lettered
    with the reason; the good ones around them land, and the stream keeps going."""
    from acidstream.ingest.dead_letter import read_dead_letters
    from tests.poison_corpus import COLUMNS as POISON_COLUMNS
    from tests.poison_corpus import POISON, corpus, good

    topic = _topic(kafka_broker, partitions=2)
    records, ids = corpus()
    placed = kafka_broker.produce(topic, records)
    at = {r: f"{topic}/{p}@{o}" for r, (p, o) in zip(records, placed, strict=True)}
    cfg = _config(tmp_path, topic, **{"table.columns": POISON_COLUMNS})
    run_kafka_job(cfg, bootstrap=kafka_broker.bootstrap, spark=spark)
    assert _table_ids(cfg) == ids
    letters = list(read_dead_letters(cfg.sink.dead_letter_path or ""))
    assert sorted(d.record for d in letters) == sorted(p for _, p in POISON)
    assert all(d.reason and d.position == at[d.record] for d in letters)
    # the stream is not wedged: later events are written by the next run
    kafka_broker.produce(topic, [good(5000), good(5001)])
    run_kafka_job(cfg, bootstrap=kafka_broker.bootstrap, spark=spark)
    assert _table_ids(cfg) == sorted([*ids, 5000, 5001])
