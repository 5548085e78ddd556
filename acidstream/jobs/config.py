"""The Kafka-to-table job's configuration: YAML < environment < arguments, parsed once.

Strings stay at the edge: ``KafkaJobConfig.load`` merges the sources and returns frozen
dataclasses; an unknown key or a bad value raises ``ConfigError`` naming the key.

The job's state follows its warehouse: a relative ``checkpoint`` or ``sink.dead_letter_path``
is inside the warehouse (so ``--warehouse W`` moves the table, the checkpoint and the dead
letters together), and a relative warehouse is made absolute once, against the working
directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from acidstream.acid.errors import ConfigError
from acidstream.sinks.foreach_batch import SinkOptions
from acidstream.txn.config_file import read_config_file
from acidstream.txn.namespaces import refuse_link

__all__ = ["KafkaJobConfig", "KafkaSettings", "TableSettings", "TriggerSettings"]

ENV_BOOTSTRAP = "ACIDSTREAM_KAFKA_BOOTSTRAP"


@dataclass(frozen=True, kw_only=True)
class KafkaSettings:
    bootstrap_servers: str = "embedded"
    topic: str = "events"
    partitions: int = 3
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    end_offsets_from: str | None = None  # the source's endOffsetsFrom (fetch: for Tansu)

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
class KafkaJobConfig:
    """Everything the job needs; build it with :meth:`load`."""

    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    table: TableSettings = field(default_factory=TableSettings)
    sink: SinkOptions = field(default_factory=SinkOptions)
    trigger: TriggerSettings = field(default_factory=TriggerSettings)
    metastore: str | None = None
    warehouse: str = "./warehouse"
    checkpoint: str = "./warehouse/_checkpoints/job"
    recover_offsets_from_table: bool = True
    compaction: str = "auto"  # "auto": the driver runs the compactor; "off": another process does
    housekeeping_interval_s: float = 60.0  # the driver's housekeeper thread
    spark_master: str = "local[2]"
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
        ``ACIDSTREAM_KAFKA_BOOTSTRAP``) < ``overrides`` (dotted keys, e.g. ``kafka.topic``)."""
        raw = read_config_file(path) if path is not None else {}
        environ = os.environ if env is None else env
        flat = _flatten(raw)
        for key, var in (("metastore", "ACIDSTREAM_METASTORE"), ("warehouse", "ACIDSTREAM_WAREHOUSE"),
                         ("kafka.bootstrap_servers", ENV_BOOTSTRAP)):  # fmt: skip
            if environ.get(var):
                flat[key] = environ[var]
        for k, v in (overrides or {}).items():
            if v is not None:
                flat[k] = v
        return cls._from_flat(flat)

    @classmethod
    def _from_flat(cls, flat: Mapping[str, Any]) -> KafkaJobConfig:
        sections: dict[str, dict[str, Any]] = {
            "kafka": {},
            "table": {},
            "sink": {},
            "trigger": {},
            "spark": {},
        }
        top: dict[str, Any] = {}
        for key, value in flat.items():
            head, _, rest = key.partition(".")
            if head in sections and rest:
                if head == "spark" and rest.startswith("conf."):
                    sections["spark"].setdefault("conf", {})[rest[5:]] = str(value)
                else:
                    sections[head][rest] = value
            elif head == "spark" and not rest:
                continue
            else:
                top[key] = value
        try:
            kafka = KafkaSettings(**_typed(KafkaSettings, sections["kafka"], "kafka"))
            table = TableSettings(**_typed(TableSettings, sections["table"], "table"))
            trigger = TriggerSettings(**_typed(TriggerSettings, sections["trigger"], "trigger"))
            sink = SinkOptions(**_typed(SinkOptions, sections["sink"], "sink"))
        except TypeError as e:
            raise ConfigError(str(e)) from e
        spark = sections["spark"]
        unknown_spark = set(spark) - {"master", "conf"}
        if unknown_spark:
            raise ConfigError(f"unknown config key(s) spark.{sorted(unknown_spark)}")
        allowed = {
            "metastore", "warehouse", "checkpoint", "recover_offsets_from_table", "compaction",
            "housekeeping_interval_s",
        }  # fmt: skip
        unknown = set(top) - allowed
        if unknown:
            raise ConfigError(f"unknown config key(s) {sorted(unknown)}")
        if not table.columns:
            raise ConfigError("table.columns is required (e.g. 'id bigint, msg string')")
        compaction = str(top.get("compaction") or "auto").lower()
        if compaction not in ("auto", "off"):
            raise ConfigError(f"compaction must be auto or off, got {compaction!r}")
        try:
            housekeeping = float(top.get("housekeeping_interval_s") or 60.0)
        except ValueError as e:
            raise ConfigError("housekeeping_interval_s must be a number of seconds") from e
        if housekeeping <= 0:
            raise ConfigError("housekeeping_interval_s must be > 0")
        warehouse = _absolute(str(top.get("warehouse") or "./warehouse"))
        # Job state follows the warehouse: relative paths are inside it.
        checkpoint = _under(warehouse, str(top.get("checkpoint") or f"_checkpoints/{sink.sink_id}"))
        if sink.dead_letter_path:
            sink = replace(sink, dead_letter_path=_under(warehouse, sink.dead_letter_path))
        return cls(
            kafka=kafka,
            table=table,
            sink=sink,
            trigger=trigger,
            metastore=top.get("metastore"),
            warehouse=warehouse,
            checkpoint=checkpoint,
            compaction=compaction,
            housekeeping_interval_s=housekeeping,
            recover_offsets_from_table=_bool(
                top.get("recover_offsets_from_table", True), "recover_offsets_from_table"
            ),
            spark_master=str(spark.get("master") or "local[2]"),
            spark_conf=dict(spark.get("conf") or {}),
        )


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


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and not (key == "spark.conf"):
            out.update(_flatten(v, key + "."))
        elif isinstance(v, Mapping):
            for ck, cv in v.items():
                out[f"spark.conf.{ck}"] = cv
        else:
            out[key] = v
    return out


def _bool(v: Any, key: str) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{key} must be true or false, got {v!r}")


def _typed(klass: type, values: Mapping[str, Any], section: str) -> dict[str, Any]:
    known = {f.name: f for f in fields(klass)}
    out: dict[str, Any] = {}
    for k, v in values.items():
        f = known.get(k)
        if f is None or k == "orc":
            raise ConfigError(
                f"unknown config key {section}.{k} (known: {sorted(n for n in known if n != 'orc')})"
            )
        if v is None:
            out[k] = None
            continue
        t = str(f.type)
        try:
            if "bool" in t:
                out[k] = _bool(v, f"{section}.{k}")
            elif "int" in t:
                out[k] = int(v)
            elif "float" in t:
                out[k] = float(v)
            else:
                out[k] = str(v)
        except ValueError as e:
            raise ConfigError(f"{section}.{k}: bad value {v!r}") from e
    return out
