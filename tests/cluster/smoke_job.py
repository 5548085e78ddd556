"""The cluster smoke test's Spark driver (run as a script inside host A; not a test module).

``python smoke_job.py CONF_JSON``: CONF_JSON holds ``master``, ``spark_conf`` (the
settings of :func:`tests.cluster.spark_log.driver_conf`), ``s3_endpoint``, ``bucket``,
``metastore`` and ``partitions``. Each of ``partitions`` tasks runs on an executor and,
from there, writes one object to the S3 server and asks the PostgreSQL server for its
address, both by the services host's IP; the driver prints one JSON line with what the
tasks returned. The task function is defined in this ``__main__`` module so cloudpickle
ships it by value (executors cannot import ``tests``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any


def probe_services(conf: dict[str, Any], index: int, rows: Iterable[int]) -> Iterator[str]:
    """Executor side: one task's round trip to S3 and PostgreSQL; yields one JSON line."""
    import psycopg
    import s3fs  # type: ignore[import-untyped]

    import acidstream  # the package must be importable on every executor

    n = sum(1 for _ in rows)
    fs = s3fs.S3FileSystem(key=conf["key"], secret=conf["secret"], endpoint_url=conf["s3_endpoint"])
    with fs.open(f"{conf['bucket']}/smoke/part-{index}", "wb") as f:
        f.write(f"{index}:{n}".encode())
    with psycopg.connect(conf["metastore"], connect_timeout=5) as c:
        row = c.execute("select host(inet_server_addr())").fetchone()
    yield json.dumps(
        {"partition": index, "rows": n, "pg_server": row[0] if row else None,
         "acidstream": acidstream.__name__}
    )  # fmt: skip


def main(argv: list[str]) -> int:
    conf = json.loads(argv[1])
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    b = SparkSession.builder.master(conf["master"]).appName("acidstream-cluster-smoke")
    for k, v in conf["spark_conf"].items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    try:
        parts = int(conf["partitions"])
        rdd = spark.sparkContext.parallelize(range(parts * 10), parts)
        out = rdd.mapPartitionsWithIndex(lambda i, it: probe_services(conf, i, it)).collect()
    finally:
        spark.stop()
    print(json.dumps([json.loads(x) for x in out]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
