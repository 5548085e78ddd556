"""``acidstream run-kafka --warehouse s3://... --sample-events N``: the main job with the
embedded broker on an S3 warehouse (moto's server). The table, its dead letters and the
job's commits are on S3; the run's local state (Spark checkpoint) goes to a temporary
directory; every sample event lands exactly once; the secret is never printed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import acidstream
from acidstream.ingest.dead_letter import read_dead_letters
from tests.objectstore.s3_helpers import ROOT, clean_env
from tests.plugins.s3_fixture import SECRET_KEY, S3Warehouse

pytestmark = [pytest.mark.s3, pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]


def _need_broker() -> None:
    from acidstream.jobs.broker import find_broker_binary
    from acidstream.jobs.errors import BrokerError

    try:
        find_broker_binary()
    except BrokerError as e:
        pytest.skip(f"Kafka broker unavailable: {e}")


def test_the_embedded_kafka_job_runs_on_an_s3_warehouse(
    s3_warehouse: S3Warehouse, tmp_path: Path
) -> None:
    _need_broker()
    wh = s3_warehouse
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    metastore = f"sqlite:///{run_dir}/m.db"
    p = _run_kafka(wh, metastore, run_dir)
    if p.returncode != 0 and SPARK_CONNECT_BACK in p.stderr:
        # Spark's Python planner worker has a fixed time to connect back, which a busy
        # machine can miss before anything is written; a supervisor would restart the job.
        # The restart gets a new bucket and metastore: the embedded broker starts empty.
        wh = _new_bucket(wh)
        shutil.rmtree(run_dir)
        run_dir.mkdir()
        p = _run_kafka(wh, metastore, run_dir)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    assert "(exactly once)" in p.stdout, p.stdout
    assert f"warehouse    {wh.url}" in p.stdout
    assert SECRET_KEY not in p.stdout and SECRET_KEY not in p.stderr
    # Nothing of the run stays on the local disk but the metastore file.
    assert sorted(x.name for x in run_dir.iterdir()) == ["m.db"]
    t = acidstream.table(
        _table_name(),
        metastore=metastore,
        warehouse=wh.url,
        storage_options=wh.storage_options,
    )
    assert t.read(columns=["id"]).num_rows == 3000
    # The bad sample records (one after every 1000) are dead letters on S3.
    letters = list(
        read_dead_letters(f"{wh.url}/_dead_letters/events", storage_options=wh.storage_options)
    )
    assert len(letters) == 3, letters


SPARK_CONNECT_BACK = "Python worker failed to connect back"


def _run_kafka(wh: S3Warehouse, metastore: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable, "-m", "acidstream", "run-kafka",
        str(ROOT / "configs" / "kafka_to_table.yaml"),
        "--sample-events", "3000", "--bad-every", "1000",
        "--warehouse", wh.url, "--metastore", metastore, *wh.cli_options(),
    ]  # fmt: skip
    return subprocess.run(
        argv, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=900
    )


def _new_bucket(wh: S3Warehouse) -> S3Warehouse:
    import dataclasses

    from acidstream.acid.storage import Storage

    bucket = f"{wh.bucket}-again"
    storage, _ = Storage.for_path(f"s3://{bucket}", storage_options=wh.storage_options)
    storage.fs.call_s3("create_bucket", Bucket=bucket)  # a new bucket (no region constraint)
    return dataclasses.replace(wh, bucket=bucket, url=f"s3://{bucket}/warehouse")


def _table_name() -> str:
    from acidstream.jobs.config import KafkaJobConfig

    return KafkaJobConfig.load(ROOT / "configs" / "kafka_to_table.yaml", env={}).table.name
