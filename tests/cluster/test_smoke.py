"""The cluster itself: a Spark job whose executors on both worker hosts reach PostgreSQL
and S3 by the services host's address."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cluster.conftest import ClusterTest, python_argv
from tests.cluster.spark_log import driver_conf, successful_task_hosts

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.slow]

SMOKE_JOB = Path(__file__).with_name("smoke_job.py")


def test_spark_job_runs_tasks_on_both_workers_that_reach_services_by_ip(
    cluster_test: ClusterTest,
) -> None:
    c = cluster_test.cluster
    a, b, svc = c.hosts["a"], c.hosts["b"], c.hosts["svc"]
    events = cluster_test.scratch / "events"
    events.mkdir()  # Spark wants the event log's directory to exist
    parts = 6
    conf = {
        "master": c.spark_master,
        "spark_conf": driver_conf(driver_ip=a.ip, work_dir=cluster_test.scratch),
        "s3_endpoint": c.s3_endpoint,
        "key": c.aws_env()["AWS_ACCESS_KEY_ID"],
        "secret": c.aws_env()["AWS_SECRET_ACCESS_KEY"],
        "bucket": cluster_test.bucket,
        "metastore": c.pg_root,
        "partitions": parts,
    }
    done = c.run("a", python_argv(str(SMOKE_JOB), json.dumps(conf)), timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])

    # Every task ran, and each reached PostgreSQL at the services host's address.
    assert sorted(r["partition"] for r in results) == list(range(parts))
    assert {r["pg_server"] for r in results} == {svc.ip}
    assert sum(r["rows"] for r in results) == parts * 10
    # The event log says executors on both worker hosts ran tasks (and only they did).
    hosts = successful_task_hosts(events)
    assert set(hosts) == {a.ip, b.ip}, hosts
    assert sum(hosts.values()) == parts
    # Every task's object is on the S3 server (read back from the test's side of the bridge).
    import s3fs  # type: ignore[import-untyped]

    fs = s3fs.S3FileSystem(**c.storage_options())
    objects = sorted(fs.ls(f"{cluster_test.bucket}/smoke"))
    assert objects == sorted(f"{cluster_test.bucket}/smoke/part-{i}" for i in range(parts))
    assert {fs.cat(f"{cluster_test.bucket}/smoke/part-{i}") for i in range(parts)} == {
        f"{i}:10".encode() for i in range(parts)
    }
