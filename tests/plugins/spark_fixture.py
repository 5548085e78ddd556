"""A session-scoped local[2] SparkSession, and the JVM ORC reader inside PySpark's jars."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """Local Spark (driver in this process). Skips with a reason if Java or PySpark is missing."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime found (PySpark needs Java 17)")
    pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (
        pyspark.sql.SparkSession.builder.master("local[2]")
        .appName("acidstream-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


class JvmOrcReader:
    """ORC Java (``org.apache.orc.OrcFile`` in PySpark's jars): the reader Hive uses.

    An independent check that our files, cut at any flush length, are valid ORC.
    """

    def __init__(self, spark: Any) -> None:
        self.jvm = spark._jvm
        self.conf = self.jvm.org.apache.hadoop.conf.Configuration()
        from py4j.java_gateway import get_field

        self._get_field = get_field

    def read(self, path: str, max_length: int | None = None) -> dict[str, Any]:
        """Open ``path`` (optionally as its first ``max_length`` bytes) and read every row."""
        orc = self.jvm.org.apache.orc.OrcFile
        opts = orc.readerOptions(self.conf)
        if max_length is not None:
            opts = opts.maxLength(max_length)
        reader = orc.createReader(self.jvm.org.apache.hadoop.fs.Path(path), opts)
        charset = self.jvm.java.nio.charset.StandardCharsets.UTF_8
        metadata = {
            str(k): str(charset.decode(reader.getMetadataValue(k)).toString())
            for k in reader.getMetadataKeys()
        }
        rows = reader.rows()
        batch = reader.getSchema().createRowBatch()
        read = 0
        while rows.nextBatch(batch):
            read += self._get_field(batch, "size")
        rows.close()
        return {
            "rows": int(reader.getNumberOfRows()),
            "rows_read": read,
            "stripes": int(reader.getStripes().size()),
            "schema": str(reader.getSchema()),
            "metadata": metadata,
            "metadata_items": len(list(reader.getMetadataKeys())),
        }


@pytest.fixture(scope="session")
def jvm_orc(spark: Any) -> JvmOrcReader:
    """The JVM ORC reader bound to the session's JVM."""
    return JvmOrcReader(spark)
