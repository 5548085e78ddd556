"""Scenario 1: the Kafka-to-table job on the cluster.

``acidstream run-kafka`` runs on host A as a client-mode driver of the standalone master
(``spark.master: spark://A:7077``); its executors on hosts A and B read the topic from the
Tansu broker on the services host and write the table's files to the S3 warehouse there,
and the driver commits each batch to the PostgreSQL metastore there - every one of them by
address over the bridge. The table is then read back from the test process: every produced
event exactly once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

import acidstream
from tests.cluster.conftest import ClusterTest, python_argv
from tests.cluster.spark_log import driver_conf, successful_task_hosts

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

EVENTS = 3000
PARTITIONS = 3


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


def test_kafka_job_on_two_workers_writes_every_event_once_to_s3(
    cluster_test: ClusterTest,
) -> None:
    c = cluster_test.cluster
    a, b = c.hosts["a"], c.hosts["b"]
    topic = f"events-{cluster_test.bucket}"
    _produce(c.kafka_bootstrap, topic, EVENTS)

    events = cluster_test.scratch / "events"
    events.mkdir()
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
        "spark": {
            "master": c.spark_master,
            "conf": driver_conf(driver_ip=a.ip, event_log_dir=events),
        },
    }
    path = cluster_test.scratch / "job.yaml"
    path.write_text(yaml.safe_dump(config))

    done = c.run("a", python_argv("-m", "acidstream", "run-kafka", str(path)), timeout=420)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])

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
