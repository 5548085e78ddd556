"""The Kafka source with the upsert sink's parse fused into its read.

The upsert sink (``acidstream.sinks.upsert_sink``) parses each micro-batch's change events
on the executors and brings one small result per task to the driver. Reading
``acidkafka`` and parsing in a ``mapInArrow`` costs a second Python worker per task: the
JVM copies every record from the worker that fetched it to the one that parses it (in
``benchmarks/cdc.py``, 1,000,000 Debezium events in 10 micro-batches on ``local[2]``, the
batches' Spark jobs took 21.8 s that way and 16.4 s fused). Here the worker that
fetched a range parses it: the source's ``read`` hands its Arrow batches straight to the
sink's parse task and yields the task's result (``TASK_SCHEMA``), so the query's
micro-batches reach the sink parsed.

Each sink registers its own source class (a subclass made at run time, carrying the
sink's parse plan: pickled with the class to the Python workers, never shown in the query
plan as an option would be). The Kafka options and semantics are the ``acidkafka``
source's, unchanged: offsets, ``failOnDataLoss``, ``maxOffsetsPerTrigger``,
``minPartitions``, both clients. A task's dead letters go to a file named by the range it
reads (``<prefix>_<topic>-<partition>-<start>.jsonl``): a retried task, or the same batch
replayed after a crash, rewrites it whole.

Runs on the driver (``register_upsert_source``) and in the Python workers (``read``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, ClassVar

from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from acidstream.sinks.upsert_sink import TASK_COLUMNS, _parse_task, _ParsePlan
from acidstream.sources.kafka import KafkaSource, KafkaStreamReader, _schema
from acidstream.sources.kafka_common import KafkaInputPartition
from acidstream.sources.kafka_options import KafkaSourceOptions

__all__ = ["register_upsert_source"]

_names = itertools.count()


class _UpsertReader(KafkaStreamReader):
    """``acidkafka``'s reader whose executor side parses what it read (one task per
    range, as ``acidkafka``'s)."""

    def __init__(self, options: KafkaSourceOptions, plan: _ParsePlan) -> None:
        super().__init__(options, _schema())  # what ``KafkaStreamReader.read`` yields
        self.plan = plan

    def read(self, partition: Any) -> Iterator[Any]:
        """Executor: the range's records, parsed by the upsert sink's parse task."""
        assert isinstance(partition, KafkaInputPartition)
        name = (
            f"{self.plan.file_prefix}_{partition.topic}-{partition.partition}-"
            f"{partition.start}.jsonl"
        )
        return _parse_task(self.plan, super().read(partition), dead_letter_name=name)


class _UpsertSource(KafkaSource):
    """Base of the per-sink classes :func:`register_upsert_source` makes."""

    NAME: ClassVar[str] = ""
    PLAN: ClassVar[_ParsePlan | None] = None

    @classmethod
    def name(cls) -> str:
        return cls.NAME

    def schema(self) -> StructType:
        """The parse tasks' results (``TASK_SCHEMA``); parsing the options here makes bad
        ones fail at ``load()``."""
        KafkaSourceOptions.parse(self.options)
        # Built by hand, as acidkafka's: the Python workers have no SparkContext to parse
        # a DDL string with.
        types = (BinaryType(), LongType(), LongType(), LongType(), StringType(), StringType())
        return StructType([StructField(n, t) for n, t in zip(TASK_COLUMNS, types, strict=True)])

    def streamReader(self, schema: Any) -> _UpsertReader:
        plan = type(self).PLAN
        assert plan is not None
        return _UpsertReader(KafkaSourceOptions.parse(self.options), plan)


def register_upsert_source(spark: Any, plan: _ParsePlan) -> str:
    """Driver side: register a source reading Kafka as ``acidkafka`` does and parsing with
    ``plan``; returns the name to pass to ``spark.readStream.format``."""
    name = f"acidkafka_upsert_{next(_names)}"
    cls = type(f"UpsertSource_{name}", (_UpsertSource,), {"NAME": name, "PLAN": plan})
    spark.dataSource.register(cls)
    return name
