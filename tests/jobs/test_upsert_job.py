"""The Kafka job in upsert mode end to end: a Debezium stream on the real broker, local
Spark, both store backends. The table must equal the fold of the change log (per key
the newest ``source.lsn`` wins, deletes and tombstones remove) after every run, through
restarts from the checkpoint and from the table's offsets, a SIGKILL of the job process,
duplicates, reordered and late events; Hive 2.3's reader reads the result; and the
metrics endpoint answers during a processing-time run (in append mode too)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from acidstream.ingest.dead_letter import read_dead_letters
from acidstream.jobs.config import KafkaJobConfig
from acidstream.jobs.kafka_job import JobResult, run_kafka_job
from acidstream.jobs.metrics import BatchSummary
from acidstream.txn.store import open_store
from tests.ingest.conftest import snapshot_read
from tests.jobs.cdc_stream import COLUMNS, DebeziumLog, Record

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

TABLE = "default.items"


def _flat(tmp: Path, topic: str, store_url: str, **over: Any) -> dict[str, Any]:
    flat = {
        "kafka.topic": topic, "kafka.bootstrap_servers": "set-by-test",
        "table.name": TABLE, "table.columns": COLUMNS, "metastore": store_url,
        "warehouse": str(tmp / "wh"), "checkpoint": str(tmp / "ckpt"),
        "sink.sink_id": "cdc", "sink.mode": "upsert", "sink.format": "debezium",
        "sink.key": ["id"], "sink.ordering": "source.lsn", "sink.ordering_guard": True,
        "sink.dead_letter_path": str(tmp / "dead"), "spark.master": "local[2]",
    }  # fmt: skip
    flat.update(over)
    return flat


def _config(tmp: Path, topic: str, store_url: str, **over: Any) -> KafkaJobConfig:
    return KafkaJobConfig.load(None, overrides=_flat(tmp, topic, store_url, **over), env={})


def _topic(kafka_broker: Any, partitions: int = 3) -> str:
    name = f"cdc_{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(name, partitions)
    return name


def _produce(kafka_broker: Any, topic: str, records: list[Record]) -> int:
    kafka_broker.produce(topic, [r.value for r in records], keys=[r.key for r in records])
    return len(records)


def _table(cfg: KafkaJobConfig) -> dict[int, dict[str, Any]]:
    """The table's rows by id; a key twice fails here."""
    assert cfg.metastore is not None
    store = open_store(cfg.metastore, warehouse=cfg.warehouse)
    try:
        t = store.get_table("default", "items")
        rows = snapshot_read(store, t, columns=["id", "name", "amount", "lsn"]).to_pylist()
    finally:
        store.close()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a key twice in the table"
    return {r["id"]: r for r in rows}


def _run(
    cfg: KafkaJobConfig, kafka_broker: Any, spark: Any
) -> tuple[JobResult, list[BatchSummary]]:
    seen: list[BatchSummary] = []
    res = run_kafka_job(cfg, bootstrap=kafka_broker.bootstrap, spark=spark, on_batch=seen.append)
    return res, seen


def _total(summaries: list[BatchSummary], key: str) -> int:
    return sum(s.counts[key] for s in summaries)


def test_upsert_job_keeps_the_table_equal_to_the_fold_through_restarts(
    spark: Any, kafka_broker: Any, tmp_path: Path, store_url: str
) -> None:
    topic = _topic(kafka_broker)
    log = DebeziumLog(31)
    # compaction off: Hive 2.3's reader (checked at the end) does not parse the compactor's
    # Hive 3 base directories (base_N_vM); every batch stays a delta and delete delta.
    over = {"kafka.max_offsets_per_trigger": 150, "compaction": "off"}
    cfg = _config(tmp_path, topic, store_url, **over)
    # 1. a snapshot and changes with duplicates, reorderings, absent deletes, bad records
    sent = _produce(kafka_broker, topic, log.snapshot(120) + log.changes(420) + log.bad_records())
    res, seen = _run(cfg, kafka_broker, spark)
    assert res.batches_committed >= 3 and res.started_from == "config"
    assert _table(cfg) == log.fold()
    assert sum(s.events for s in seen) == res.rows == sent  # every record read once
    assert _total(seen, "dead_letters") == log.bad == 2
    letters = list(read_dead_letters(cfg.sink.dead_letter_path or ""))
    assert len(letters) == 2 and all(d.position.startswith(f"{topic}/") for d in letters)
    # Parsed where they were fetched (the job's fused source): files named by range.
    files = sorted(os.listdir(cfg.sink.dead_letter_path or ""))
    assert files and all(
        re.fullmatch(rf"upsert_cdc_[0-9a-f]{{8}}_{topic}-[0-2]-\d+\.jsonl", f) for f in files
    ), files
    assert all(s.lag is not None for s in seen) and seen[-1].lag == 0
    # 2. the same checkpoint: more changes
    before = len(log.fold())
    sent = _produce(kafka_broker, topic, log.changes(250))
    k = next(iter(sorted(log.live)))
    newer_then_older = log.reordered_updates(k)
    sent += _produce(kafka_broker, topic, newer_then_older[:1])  # the newer update now ...
    res, seen = _run(cfg, kafka_broker, spark)
    assert res.started_from == "checkpoint" and res.rows == sent
    assert _table(cfg) == log.fold() and len(log.fold()) != before
    # 3. the checkpoint lost: the job restarts from the offsets the table recorded; the
    # older update of k arrives after the newer one was committed: late, skipped.
    shutil.rmtree(cfg.checkpoint)
    more = log.changes(200, exclude=frozenset([k]))  # k's last event: the late one
    sent = _produce(kafka_broker, topic, newer_then_older[1:] + more)
    one_batch = _config(tmp_path, topic, store_url, compaction="off")  # one batch: no maxOffsets
    res, seen = _run(one_batch, kafka_broker, spark)
    assert res.started_from == "table" and res.rows == sent  # nothing read twice
    assert len(seen) == 1 and seen[0].counts["skipped_late"] == 1
    table = _table(cfg)
    assert table == log.fold()
    assert table[k]["lsn"] == log.latest[k][0]
    # Hive 2.3's reader merges the same table to the same rows.
    assert _hive_23_rows(spark, cfg) == {(i, r["name"]) for i, r in table.items()}


@pytest.mark.parametrize("guard", [False, True])
def test_a_tombstone_alone_deletes_its_key(
    spark: Any, kafka_broker: Any, tmp_path: Path, guard: bool
) -> None:
    """A compacted topic keeps a deleted key's tombstone and drops its delete event: a
    job that was behind sees the tombstone alone, which must delete the key."""
    topic = _topic(kafka_broker)
    log = DebeziumLog(34)
    store_url = f"sqlite:///{tmp_path}/metastore.db"
    cfg = _config(tmp_path, topic, store_url, **{"sink.ordering_guard": guard})
    _produce(kafka_broker, topic, log.snapshot(40))
    _run(cfg, kafka_broker, spark)
    assert len(_table(cfg)) == 40
    _produce(kafka_broker, topic, log.orphan_tombstones(6))
    res, seen = _run(cfg, kafka_broker, spark)
    assert res.rows == 6 and _total(seen, "skipped_late") == 0
    assert _table(cfg) == log.fold() and len(log.fold()) == 34
    assert _total(seen, "deletes") == 6


def test_a_tombstone_after_an_update_of_its_key_in_one_batch_deletes_it(
    spark: Any, kafka_broker: Any, tmp_path: Path
) -> None:
    """A tombstone deletes its key at its Kafka position: after the update before it in
    its partition (Kafka's compaction keeps only the tombstone)."""
    topic = _topic(kafka_broker)
    log = DebeziumLog(35)
    cfg = _config(tmp_path, topic, f"sqlite:///{tmp_path}/metastore.db")
    _produce(kafka_broker, topic, log.snapshot(20))
    _run(cfg, kafka_broker, spark)
    _produce(kafka_broker, topic, log.orphan_tombstones(3, after_update=True))
    res, seen = _run(cfg, kafka_broker, spark)
    assert res.rows == 6 and len(seen) == 1
    assert _table(cfg) == log.fold() and len(log.fold()) == 17


def _hive_23_rows(spark: Any, cfg: KafkaJobConfig) -> set[tuple[int, str]]:
    """``(id, name)`` of every live row Hive 2.3's ``OrcRawRecordMerger`` returns, bucket
    by bucket (tests/mutation/test_hive_merger.py's harness)."""
    from tests.mutation.test_hive_merger import _hive_rows

    assert cfg.metastore is not None
    store = open_store(cfg.metastore, warehouse=cfg.warehouse)
    try:
        location = store.get_table("default", "items").location
    finally:
        store.close()
    assert location is not None
    root = Path(location.removeprefix("file:"))
    buckets = {int(f.name.split("_")[1]) for f in root.glob("*/bucket_*") if "_flush" not in f.name}
    rows: list[tuple[Any, ...]] = []
    for b in sorted(buckets):
        rows += _hive_rows(spark, root, b, "id,name,amount,lsn", "bigint:string:bigint:bigint")
    out = {(int(r[0]), r[1]) for r in rows}
    assert len(out) == len(rows), "Hive sees a row twice"
    return out


_CLI = "from acidstream.cli.main import main; raise SystemExit(main())"


@pytest.mark.slow
def test_upsert_job_killed_mid_run_restarts_without_losing_or_doubling_a_key(
    kafka_broker: Any, tmp_path: Path, store_url: str
) -> None:
    """``acidstream run-kafka`` (the CLI, its own process) is SIGKILLed after its second
    progress line, while it still has batches to go; a restart finishes the stream."""
    topic = _topic(kafka_broker)
    log = DebeziumLog(32, key_schemas=True)
    _produce(kafka_broker, topic, log.snapshot(150) + log.changes(650))
    flat = _flat(tmp_path, topic, store_url, **{"kafka.max_offsets_per_trigger": 80})
    yml = tmp_path / "job.yaml"
    tree: dict[str, Any] = {}
    for dotted, value in flat.items():
        if dotted in ("kafka.bootstrap_servers", "metastore", "warehouse"):
            continue  # given as flags
        head, _, rest = dotted.partition(".")
        if rest:
            tree.setdefault(head, {})[rest] = value
        else:
            tree[head] = value
    yml.write_text(json.dumps(tree))  # JSON is YAML
    argv = [sys.executable, "-c", _CLI, "run-kafka", str(yml), "--bootstrap", kafka_broker.bootstrap,
            "--metastore", store_url, "--warehouse", str(tmp_path / "wh")]  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)  # fmt: skip
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the event: the second committed batch's line
            lines.append(line)
            if sum(ln.startswith("batch ") for ln in lines) == 2:
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the job and the Spark JVM it started
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "".join(lines[-30:])
    cfg = KafkaJobConfig.load(
        yml, overrides={"metastore": store_url, "warehouse": str(tmp_path / "wh")}, env={}
    )
    partial = _table(cfg)  # a key at most once, whatever the kill interrupted
    assert partial != log.fold()  # the job was killed with the stream half done
    _produce(kafka_broker, topic, log.changes(150))  # more while it is down
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _table(cfg) == log.fold()
    progress = [ln for ln in done.stdout.splitlines() if ln.startswith("batch ")]
    assert progress and " | lag 0 | " in progress[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_metrics_endpoint_answers_during_a_processing_time_run(
    spark: Any, kafka_broker: Any, tmp_path: Path, store_url: str
) -> None:
    topic = _topic(kafka_broker)
    log = DebeziumLog(33)
    port = _free_port()
    cfg = _config(tmp_path, topic, store_url, **{
        "trigger.available_now": False, "trigger.processing_time": "1 second",
        "job.metrics_port": port,
    })  # fmt: skip
    # A: produced before the start, so the first batch reads all of it (nothing in the
    # table yet: every surviving key is an insert, every deleted one an absent delete).
    sent_a = _produce(kafka_broker, topic, log.snapshot(80) + log.changes(200) + log.bad_records())
    keys_a = len(log.latest)
    surviving_a = len(log.fold())
    seen: list[BatchSummary] = []
    caught_up = threading.Event()
    want = [sent_a]

    def on_batch(s: BatchSummary) -> None:
        seen.append(s)
        if sum(x.events for x in seen) >= want[0]:
            caught_up.set()

    result: list[JobResult | BaseException] = []

    def job() -> None:
        try:
            result.append(
                run_kafka_job(cfg, bootstrap=kafka_broker.bootstrap, spark=spark, on_batch=on_batch)
            )
        except BaseException as e:  # handed to the test thread
            result.append(e)
            caught_up.set()

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    try:
        assert caught_up.wait(600) and not result, result
        m = _scrape(port)
        assert m[("acidstream_job_events_total", ())] == sent_a
        assert m[("acidstream_job_inserted_total", ())] == surviving_a
        assert m[("acidstream_job_upserts_total", ())] == surviving_a
        assert m[("acidstream_job_deletes_total", ())] == 0
        assert m[("acidstream_job_absent_deletes_total", ())] == keys_a - surviving_a
        assert m[("acidstream_job_dead_letters_total", ())] == 2
        assert m[("acidstream_job_skipped_late_total", ())] == 0
        lag = {k: v for k, v in m.items() if k[0] == "acidstream_job_consumer_lag"}
        assert lag == {
            ("acidstream_job_consumer_lag", (("partition", str(p)), ("topic", topic))): 0
            for p in range(3)
        }
        assert m[("acidstream_job_freshness_seconds_count", ())] == keys_a  # one per key
        assert m[("acidstream_job_batch_duration_seconds_count", ())] == len(seen)
        assert m[("acidstream_job_events_per_second", ())] > 0
        # B: while the job runs; each key at most once, so the counts do not depend on
        # how the records split into batches (a delete's tombstone may land in the next
        # one, as an absent delete).
        live = sorted(log.live)
        b = [r for k in live[:20] for r in log.update(k)]
        b += [r for k in live[20:30] for r in log.delete(k)]
        b += [r for _ in range(15) for r in log.insert()]
        caught_up.clear()
        want[0] = sent_a + _produce(kafka_broker, topic, b)
        assert caught_up.wait(600) and not result, result
        m2 = _scrape(port)
        assert m2[("acidstream_job_events_total", ())] == want[0]
        assert m2[("acidstream_job_updated_total", ())] == 20
        assert m2[("acidstream_job_inserted_total", ())] == surviving_a + 15
        assert m2[("acidstream_job_deletes_total", ())] == 10
        assert 0 <= m2[("acidstream_job_absent_deletes_total", ())] - (keys_a - surviving_a) <= 10
        assert all(v == 0 for k, v in m2.items() if k[0] == "acidstream_job_consumer_lag")
        assert m2[("acidstream_job_batches_total", ())] == len(seen) >= 2
        assert 0 <= m2[("acidstream_job_seconds_since_last_commit", ())] < 600
    finally:
        for q in spark.streams.active:
            q.stop()
        thread.join(120)
    assert result and isinstance(result[0], JobResult), result
    assert _table(cfg) == log.fold()


def test_append_mode_metrics_count_rows_and_bad_records(
    spark: Any, kafka_broker: Any, tmp_path: Path
) -> None:
    """The default mode serves the same endpoint with its own counters: rows, bad records."""
    import random

    from acidstream.jobs.sample_events import sample_event

    topic = _topic(kafka_broker, partitions=2)
    rnd = random.Random(5)
    good = [sample_event(i, rnd) for i in range(300)]
    sent = _produce(kafka_broker, topic, [Record(None, v) for v in [*good, b"{oops", b"[1]"]])
    port = _free_port()
    cfg = KafkaJobConfig.load(None, overrides={
        "kafka.topic": topic, "kafka.bootstrap_servers": "set-by-test", "table.name": "default.ev",
        "table.columns": "id bigint, user_name string, amount decimal(10,2), event_time timestamp",
        "table.partitioned_by": "ds string", "warehouse": str(tmp_path / "wh"),
        "checkpoint": str(tmp_path / "ckpt"), "sink.dead_letter_path": str(tmp_path / "dead"),
        "trigger.available_now": False, "trigger.processing_time": "1 second",
        "job.metrics_port": port,
    }, env={})  # fmt: skip
    seen: list[BatchSummary] = []
    caught_up = threading.Event()
    result: list[JobResult | BaseException] = []

    def on_batch(s: BatchSummary) -> None:
        seen.append(s)
        if sum(x.events for x in seen) >= sent:
            caught_up.set()

    def job() -> None:
        try:
            result.append(
                run_kafka_job(cfg, bootstrap=kafka_broker.bootstrap, spark=spark, on_batch=on_batch)
            )
        except BaseException as e:  # handed to the test thread
            result.append(e)
            caught_up.set()

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    try:
        assert caught_up.wait(600) and not result, result
        m = _scrape(port)
    finally:
        for q in spark.streams.active:
            q.stop()
        thread.join(120)
    assert m[("acidstream_job_rows_total", ())] == 300
    assert m[("acidstream_job_bad_records_total", ())] == 2
    assert m[("acidstream_job_events_total", ())] == sent
    assert ("acidstream_job_upserts_total", ()) not in m
    assert m[("acidstream_job_freshness_seconds_count", ())] == 300  # a Kafka timestamp per row
    lag = {k[1]: v for k, v in m.items() if k[0] == "acidstream_job_consumer_lag"}
    assert lag == {
        (("partition", "0"), ("topic", topic)): 0,
        (("partition", "1"), ("topic", topic)): 0,
    }
    assert result and isinstance(result[0], JobResult) and result[0].rows == 300
