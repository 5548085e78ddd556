"""Which master the Kafka job's session uses: the YAML's, else spark-submit's, else local[2]."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from acidstream.jobs.config import KafkaJobConfig

pytestmark = pytest.mark.spark

_PROBE = textwrap.dedent(
    """
    import sys
    from acidstream.jobs.config import KafkaJobConfig
    from acidstream.jobs.kafka_job import spark_session

    spark = spark_session(KafkaJobConfig.load(sys.argv[1]))
    print("MASTER=" + spark.sparkContext.master)
    spark.stop()
    """
)


def _config(tmp_path: Path, spark_section: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(
        f"warehouse: {tmp_path / 'wh'}\ntable:\n  name: db.t\n  columns: id bigint\n{spark_section}"
    )
    return path


def test_a_config_without_a_master_leaves_it_unset(tmp_path: Path) -> None:
    assert KafkaJobConfig.load(_config(tmp_path, "")).spark_master is None
    with_master = _config(tmp_path, "spark:\n  master: local[3]\n")
    assert KafkaJobConfig.load(with_master).spark_master == "local[3]"


def _run(tmp_path: Path, config: Path, *, submit_master: str | None) -> str:
    script = tmp_path / "probe.py"
    script.write_text(_PROBE)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    if submit_master is None:
        argv = [sys.executable, str(script), str(config)]
    else:
        import pyspark

        submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        argv = [str(submit), "--master", submit_master, str(script), str(config)]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=True)
    masters = [line for line in out.stdout.splitlines() if line.startswith("MASTER=")]
    assert masters, out.stderr[-2000:]
    return masters[0].removeprefix("MASTER=")


def test_spark_submit_master_is_kept_when_the_yaml_names_none(tmp_path: Path) -> None:
    # Before the fix the builder's .master("local[2]") replaced spark-submit's --master:
    # a job submitted to a cluster ran locally.
    config = _config(tmp_path, "")
    assert _run(tmp_path, config, submit_master="local[1]") == "local[1]"


def test_the_yaml_master_wins_and_local_2_is_the_default(tmp_path: Path) -> None:
    assert _run(tmp_path, _config(tmp_path, ""), submit_master=None) == "local[2]"
    named = _config(tmp_path, "spark:\n  master: local[3]\n")
    assert _run(tmp_path, named, submit_master="local[1]") == "local[3]"
