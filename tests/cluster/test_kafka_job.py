"""Scenario 1: the Kafka-to-table job on the cluster, submitted as docs/deployment.md says.

``spark-submit --master spark://A:7077 --deploy-mode client <acidstream>/__main__.py
run-kafka job.yaml`` runs on host A (the job's driver); its executors on hosts A and B read
the topic from the Tansu broker on the services host and write the table's files to the
S3 warehouse there, and the driver commits each batch to the PostgreSQL metastore there -
every one of them by address over the bridge. The table is then read back from the test
process: every produced event exactly once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import acidstream
from tests.cluster.conftest import ClusterTest
from tests.cluster.services import spark_class
from tests.cluster.spark_log import driver_conf, successful_task_hosts

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

EVENTS = 3000
PARTITIONS = 3
WORKER_START_TIMEOUT = "to connect back"  # Spark: "... Python worker (failed) to connect back"


def _produce(bootstrap: str, topic: str, n: int) -> None:
    """``n`` JSON events ``{"id": i, "msg": ...}`` spread round-robin over the topic's
    partitions, all acknowledged by the broker before this returns."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    try:
        futures = [
            producer.send(
                topic,
                value=json.dumps({"id": i, "msg": f"event {i}"}).encode(),
                partition=i % PARTITIONS,
            )
            for i in range(n)
        ]
        producer.flush()
        for f in futures:
            f.get(timeout=30)
    finally:
        producer.close()


def _failure(stdout: str, stderr: str) -> str:
    """The job's output lines that say what failed (a JVM stack trace is mostly noise)."""
    said = [
        ln for ln in stderr.splitlines()
        if ("Error" in ln or "Exception" in ln or "Caused by" in ln) and not ln.startswith("\tat ")
    ]  # fmt: skip
    return "\n".join([stdout[-1500:], *said[-30:]])


def test_kafka_job_on_two_workers_writes_every_event_once_to_s3(
    cluster_test: ClusterTest,
) -> None:
    c = cluster_test.cluster
    a, b = c.hosts["a"], c.hosts["b"]
    topic = f"events-{cluster_test.bucket}"
    _produce(c.kafka_bootstrap, topic, EVENTS)

    events = cluster_test.scratch / "events"
    events.mkdir()  # Spark wants the event log's directory to exist
    spark_conf = driver_conf(driver_ip=a.ip, work_dir=cluster_test.scratch)
    config: dict[str, Any] = {
        "kafka": {
            "bootstrap_servers": c.kafka_bootstrap,
            "topic": topic,
            # Tansu's ListOffsets is wrong after multi-record batches (jobs/broker.py).
            "end_offsets_from": "fetch",
            "max_offsets_per_trigger": 1200,  # several batches: each one commits on its own
        },
        "table": {"name": "default.events", "columns": "id bigint, msg string"},
        "metastore": cluster_test.metastore,
        "warehouse": cluster_test.warehouse,
        "storage_options": c.storage_options(),
        "sink": {"format": "json", "sink_id": "cluster-events"},
        # The Spark checkpoint is the driver's own state: on the driver host's disk.
        "checkpoint": str(cluster_test.scratch / "checkpoint"),
        "compaction": "off",  # one compactor per warehouse, elsewhere (docs/deployment.md)
        # The job's session builder applies spark.master: the same master as spark-submit's.
        "spark": {"master": c.spark_master},
    }
    path = cluster_test.scratch / "job.yaml"
    path.write_text(yaml.safe_dump(config))

    # The driver's JVM settings must be spark-submit's: it starts the JVM before the job's
    # session builder runs.
    confs = [arg for k, v in spark_conf.items() for arg in ("--conf", f"{k}={v}")]
    submit = str(Path(spark_class()).with_name("spark-submit"))
    entry = str(Path(acidstream.__file__).with_name("__main__.py"))
    argv = [submit, "--master", c.spark_master, "--deploy-mode", "client", *confs,
            entry, "run-kafka", str(path)]  # fmt: skip
    env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = c.run("a", argv, timeout=420, env=env)
    if done.returncode != 0 and WORKER_START_TIMEOUT in done.stderr:
        # Spark gives a Python worker a fixed time to start and connect back; on a busy
        # 2-core machine the planner worker can miss it. Restart the job, as its
        # supervisor would: it resumes from its checkpoint, and the table must still hold
        # every event exactly once.
        print(f"run-kafka failed ({WORKER_START_TIMEOUT!r}): restarted once")
        done = c.run("a", argv, timeout=420, env=env)
    assert done.returncode == 0, _failure(done.stdout, done.stderr)
    print(done.stdout[-3000:])  # the job's batches and timings (pytest -s shows them)

    # Executors on both worker hosts ran tasks, and only executors on them.
    hosts = successful_task_hosts(events)
    assert set(hosts) == {a.ip, b.ip}, hosts
    # Every produced event is in the table once (read from the test's side, through the
    # same PostgreSQL and S3 servers).
    table = acidstream.read_table(
        "default.events",
        metastore=cluster_test.metastore,
        warehouse=cluster_test.warehouse,
        storage_options=c.storage_options(),
    )
    ids = sorted(table.column("id").to_pylist())
    assert ids == list(range(EVENTS))
    assert set(table.column("msg").to_pylist()) == {f"event {i}" for i in range(EVENTS)}
    # The files are in the bucket: the warehouse is on S3, not on the shared local disk.
    import s3fs  # type: ignore[import-untyped]

    fs = s3fs.S3FileSystem(**c.storage_options())
    files = fs.find(f"{cluster_test.bucket}/warehouse")
    assert any("/delta_" in f and "/bucket_" in f for f in files), files
