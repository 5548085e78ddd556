"""The Kafka-to-table job's configuration: YAML < environment < arguments, parsed once.

Strings stay at the edge: ``KafkaJobConfig.load`` merges the sources with
``acidstream.acid.config_fields`` (the same loader and typing rules as the HTTP server's
config and the sink's options) and returns frozen dataclasses; an unknown key or a bad
value raises ``ConfigError`` naming the key, the value and where it came from (the file,
an environment variable or a flag).

The job's state follows its warehouse: a relative ``checkpoint`` or ``sink.dead_letter_path``
is inside the warehouse (so ``--warehouse W`` moves the table, the checkpoint and the dead
letters together), and a relative warehouse is made absolute once, against the working
directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from acidstream.acid.config_fields import (
    Field,
    Sourced,
    Tree,
    check_fields,
    fields_of,
    load_layers,
    parse_section,
    section,
)
from acidstream.acid.errors import ConfigError
from acidstream.sinks.foreach_batch import SINK_FIELDS, SinkOptions
from acidstream.txn.namespaces import refuse_link
from acidstream.txn.storage_options import StorageOptions, from_config_tree

__all__ = ["JobSettings", "KafkaJobConfig", "KafkaSettings", "TableSettings", "TriggerSettings"]

ENV_BOOTSTRAP = "ACIDSTREAM_KAFKA_BOOTSTRAP"


@dataclass(frozen=True, kw_only=True)
class KafkaSettings:
    bootstrap_servers: str = "embedded"
    topic: str = "events"
    partitions: int = 3
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    # The source's minPartitions: the least number of tasks a micro-batch is read (and
    # written) in; ranges are split when the topic has fewer partitions (None: one task
    # per topic-partition).
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    end_offsets_from: str | None = None  # the source's endOffsetsFrom (fetch: for Tansu)
    client: str = "auto"  # the source's kafka.client: auto | confluent | kafka-python

    def __post_init__(self) -> None:
        check_fields(self, KAFKA_FIELDS, prefix="kafka.")

    @property
    def embedded(self) -> bool:
        return self.bootstrap_servers == "embedded"


@dataclass(frozen=True, kw_only=True)
class TableSettings:
    name: str = "default.events"
    columns: str = ""
    partitioned_by: str | None = None
    buckets: str | None = None
    create_if_missing: bool = True
    namespace: str | None = None  # the job's namespace binding (docs/namespaces.md)

    def __post_init__(self) -> None:
        refuse_link(self.name, action="run the Kafka job into")


@dataclass(frozen=True, kw_only=True)
class TriggerSettings:
    available_now: bool = True
    processing_time: str = "5 seconds"


@dataclass(frozen=True, kw_only=True)
class JobSettings:
    """The job process's own settings (YAML section ``job:``).

    Attributes:
        metrics_port: serve Prometheus metrics (``GET /metrics``) on ``127.0.0.1`` at this
            port (``acidstream.jobs.metrics``); 0: no metrics server.
    """

    metrics_port: int = 0

    def __post_init__(self) -> None:
        check_fields(self, JOB_FIELDS, prefix="job.")


@dataclass(frozen=True, kw_only=True)
class KafkaJobConfig:
    """Everything the job needs; build it with :meth:`load`."""

    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    table: TableSettings = field(default_factory=TableSettings)
    sink: SinkOptions = field(default_factory=SinkOptions)
    trigger: TriggerSettings = field(default_factory=TriggerSettings)
    job: JobSettings = field(default_factory=JobSettings)
    metastore: str | None = None
    warehouse: str = "./warehouse"
    # The warehouse filesystem's options (YAML ``storage_options:``, then --storage-option);
    # printed masked.
    storage_options: StorageOptions = field(default_factory=StorageOptions)
    checkpoint: str = "./warehouse/_checkpoints/job"
    recover_offsets_from_table: bool = True
    compaction: str = "auto"  # "auto": the driver runs the compactor; "off": another process does
    housekeeping_interval_s: float = 60.0  # the driver's housekeeper thread
    # None: spark-submit's --master when the job runs under it, else local[2]
    # (kafka_job.spark_session); a YAML ``spark: master:`` wins over both.
    spark_master: str | None = None
    spark_conf: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> KafkaJobConfig:
        """Merge the YAML file < environment (``ACIDSTREAM_METASTORE``, ``ACIDSTREAM_WAREHOUSE``,
        ``ACIDSTREAM_KAFKA_BOOTSTRAP``) < ``overrides`` (dotted keys, e.g. ``kafka.topic``;
        ``None`` values are ignored; ``storage_options``, a mapping, is merged key by key
        over the file's)."""
        over = dict(overrides or {})
        storage_over = over.pop("storage_options", None)
        tree = load_layers(
            path,
            env=os.environ if env is None else env,
            env_vars=_ENV_VARS,
            flags={_path(k): v for k, v in over.items()},
            flag_names={_path(k): flag for k, flag in FLAGS.items()},
        )
        return cls._from_tree(tree, storage_over=storage_over)

    @classmethod
    def _from_tree(
        cls, tree: Tree, *, storage_over: Mapping[str, Any] | None = None
    ) -> KafkaJobConfig:
        storage_options = from_config_tree(tree, over=storage_over)
        top = parse_section(tree, TOP_FIELDS, sections=_SECTIONS)
        kafka = KafkaSettings(**_parsed(tree, "kafka", KAFKA_FIELDS))
        table = TableSettings(**_parsed(tree, "table", TABLE_FIELDS))
        trigger = TriggerSettings(**_parsed(tree, "trigger", TRIGGER_FIELDS))
        sink = SinkOptions(**_parsed(tree, "sink", SINK_FIELDS))
        job = JobSettings(**_parsed(tree, "job", JOB_FIELDS))
        spark = _parsed(tree, "spark", SPARK_FIELDS, sections=("conf",))
        conf = {
            k: _conf_value(f"spark.conf.{k}", v)
            for k, v in section(section(tree, "spark"), "conf", prefix="spark.").items()
        }
        if not table.columns:
            raise ConfigError("table.columns is required (e.g. 'id bigint, msg string')")
        warehouse = _absolute(top.pop("warehouse", "./warehouse"))
        # Job state follows the warehouse: relative paths are inside it.
        checkpoint = _under(warehouse, top.pop("checkpoint", f"_checkpoints/{sink.sink_id}"))
        if sink.dead_letter_path:
            sink = replace(sink, dead_letter_path=_under(warehouse, sink.dead_letter_path))
        return cls(
            kafka=kafka,
            table=table,
            sink=sink,
            trigger=trigger,
            job=job,
            warehouse=warehouse,
            storage_options=storage_options,
            checkpoint=checkpoint,
            spark_master=spark.get("master"),
            spark_conf=conf,
            **top,
        )

    def __post_init__(self) -> None:
        check_fields(self, TOP_FIELDS)
        object.__setattr__(self, "storage_options", StorageOptions.of(self.storage_options))


# The keys of each section, typed and bounded once (acidstream.acid.config_fields).
KAFKA_FIELDS = fields_of(
    KafkaSettings,
    Field(name="partitions", min=1),
    Field(name="max_offsets_per_trigger", min=1),
    Field(name="min_partitions", min=1),
    Field(name="client", choices=("auto", "confluent", "kafka-python")),
)
TABLE_FIELDS = fields_of(TableSettings)
TRIGGER_FIELDS = fields_of(TriggerSettings)
JOB_FIELDS = fields_of(JobSettings, Field(name="metrics_port", min=0, max=65535))
TOP_FIELDS = fields_of(
    KafkaJobConfig,
    Field(name="compaction", choices=("auto", "off")),
    Field(name="housekeeping_interval_s", above=0),
    skip=(
        "kafka",
        "table",
        "sink",
        "trigger",
        "job",
        "spark_master",
        "spark_conf",
        "storage_options",
    ),
)
SPARK_FIELDS = {"master": Field(name="master", kind="str", default=None)}
_SECTIONS = ("kafka", "table", "sink", "trigger", "job", "spark")
_ENV_VARS = {
    ("metastore",): "ACIDSTREAM_METASTORE",
    ("warehouse",): "ACIDSTREAM_WAREHOUSE",
    ("kafka", "bootstrap_servers"): ENV_BOOTSTRAP,
}
FLAGS = {
    "kafka.bootstrap_servers": "--bootstrap",
    "kafka.topic": "--topic",
    "metastore": "--metastore",
    "warehouse": "--warehouse",
    "trigger.available_now": "--continuous",
    "job.metrics_port": "--metrics-port",
}
"""The ``run-kafka`` flag of each override key (named in messages)."""


def _path(key: str) -> tuple[str, ...]:
    """A dotted override key as a path: ``kafka.topic``, ``spark.conf.<a Spark key>``."""
    head, _, rest = key.partition(".")
    if head == "spark" and rest.startswith("conf."):
        return ("spark", "conf", rest[5:])
    return (head, rest) if rest else (head,)


def _parsed(
    tree: Tree, name: str, specs: Mapping[str, Field], *, sections: tuple[str, ...] = ()
) -> dict[str, Any]:
    return parse_section(section(tree, name), specs, prefix=f"{name}.", sections=sections)


def _conf_value(key: str, node: Tree | Sourced) -> str:
    """A Spark conf value: a scalar, given to Spark as text."""
    if isinstance(node, Sourced) and isinstance(node.value, str | int | float | bool):
        return str(node.value).lower() if isinstance(node.value, bool) else str(node.value)
    shown = node.value if isinstance(node, Sourced) else node
    where = f" ({node.source})" if isinstance(node, Sourced) else ""
    raise ConfigError(f"{key} must be a string, got {shown!r}{where}")


def _is_url(path: str) -> bool:
    return "://" in path


def _absolute(path: str) -> str:
    """A local path made absolute once (against the working directory); URLs stay."""
    return path if _is_url(path) else os.path.abspath(os.path.expanduser(path))


def _under(warehouse: str, path: str) -> str:
    """``path`` if absolute (or a URL), else inside the warehouse."""
    if _is_url(path) or os.path.isabs(os.path.expanduser(path)):
        return _absolute(path)
    return (
        f"{warehouse.rstrip('/')}/{path}" if _is_url(warehouse) else os.path.join(warehouse, path)
    )
