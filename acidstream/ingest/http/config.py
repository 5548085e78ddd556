"""The HTTP ingest server's configuration: YAML < environment < arguments, parsed once.

``ServerConfig.load`` merges ``configs/http_ingest.yaml`` (or any file of that shape), the
environment (``ACIDSTREAM_METASTORE``, ``ACIDSTREAM_WAREHOUSE``, ``ACIDSTREAM_HTTP_HOST``,
``ACIDSTREAM_HTTP_PORT``) and the command line's overrides, and returns frozen dataclasses:
inner code never reads a raw mapping. An unknown key or a bad value raises ``ConfigError``
naming the key (``tables.default.events.formt``). ``docs/http_ingest.md`` lists every key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from acidstream.acid.errors import ConfigError
from acidstream.acid.table_name import TableName
from acidstream.ingest.record_writers import (
    RecordWriter,
    StrictDelimitedInputWriter,
    StrictJsonWriter,
    StrictRegexWriter,
)
from acidstream.txn.config_file import read_config_file
from acidstream.txn.namespaces import bind_write_name, refuse_link

__all__ = [
    "CommitWindow",
    "FlumeSettings",
    "Limits",
    "ServerConfig",
    "TableSettings",
    "record_writer",
]

ENV_METASTORE = "ACIDSTREAM_METASTORE"
ENV_WAREHOUSE = "ACIDSTREAM_WAREHOUSE"
ENV_HOST = "ACIDSTREAM_HTTP_HOST"
ENV_PORT = "ACIDSTREAM_HTTP_PORT"

FORMATS = ("json", "delimited", "regex")

#: Content types accepted per record format when a table names none.
DEFAULT_CONTENT_TYPES: Mapping[str, tuple[str, ...]] = {
    "json": ("application/x-ndjson", "application/jsonl", "application/json", "text/plain"),
    "delimited": ("text/plain", "text/csv", "text/tab-separated-values"),
    "regex": ("text/plain",),
}


@dataclass(frozen=True, kw_only=True)
class TableSettings:
    """One table the server writes.

    Attributes:
        name: ``db.table`` (the URL path names it so).
        format: ``json``, ``delimited`` or ``regex``: the record writer.
        delimiter: field delimiter of ``delimited`` (default ``\\x01``, Hive's).
        regex: the regular expression of ``regex`` (one group per column).
        all_or_nothing: refuse a whole request (400) when any line is bad, instead of
            committing the good lines and reporting the bad ones.
        tokens: bearer tokens allowed to write this table; empty: no token needed.
        content_types: accepted ``Content-Type`` media types (default: by format).
        dead_letter_path: a directory for rejected lines (``acidstream.ingest.dead_letter``), or
            ``None``: rejected lines are only reported in the response.
        max_record_bytes: longer lines are rejected before parsing.
        namespace: the namespace the table's writer is bound to (``docs/namespaces.md``);
            ``name`` may then be ``T`` (served as ``<namespace>.T``). Links are refused.
    """

    name: str
    format: str = "json"
    delimiter: str = "\x01"
    regex: str | None = None
    all_or_nothing: bool = False
    tokens: tuple[str, ...] = ()
    content_types: tuple[str, ...] = ()
    dead_letter_path: str | None = None
    max_record_bytes: int = 1 << 20
    namespace: str | None = None

    def __post_init__(self) -> None:
        key = f"tables.{self.name}"
        refuse_link(self.name, action="serve")
        if self.format not in FORMATS:
            raise ConfigError(f"{key}.format must be one of {FORMATS}, got {self.format!r}")
        if self.format == "regex" and not self.regex:
            raise ConfigError(f"{key}.regex is required for format regex")
        if self.max_record_bytes <= 0:
            raise ConfigError(f"{key}.max_record_bytes must be > 0")
        if any(not t for t in self.tokens):
            raise ConfigError(f"{key}.tokens must not hold empty tokens")
        if not self.content_types:
            object.__setattr__(self, "content_types", DEFAULT_CONTENT_TYPES[self.format])
        # Build the record writer once here: a setting it refuses (a regex that does not
        # compile, a delimiter of two characters) must stop the server at start, naming
        # the key, not turn every request into a 503.
        setting = {"regex": "regex", "delimited": "delimiter"}.get(self.format)
        try:
            record_writer(self)
        except ConfigError as e:
            raise ConfigError(f"{key}.{setting or 'format'}: {e}") from e

    @property
    def qualified(self) -> str:
        """``db.table`` with the default database filled in, lower-cased."""
        n = bind_write_name(self.name, namespace=self.namespace, action="serve")
        return f"{n.db}.{n.table}"


def record_writer(t: TableSettings) -> RecordWriter:
    """The table's configured record writer (``ConfigError`` for a setting it refuses)."""
    if t.format == "json":
        return StrictJsonWriter(max_record_bytes=t.max_record_bytes)
    if t.format == "delimited":
        return StrictDelimitedInputWriter(
            field_delimiter=t.delimiter, max_record_bytes=t.max_record_bytes
        )
    assert t.regex is not None  # TableSettings checks it
    return StrictRegexWriter(regex=t.regex, max_record_bytes=t.max_record_bytes)


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Body limits and backpressure.

    Attributes:
        max_body_bytes: a ``Content-Length`` above this is refused (413).
        max_decoded_bytes: a gzip body inflating past this is refused (413).
        max_inflight_bytes: bytes of all requests being handled (admitted, not yet
            answered); a request that would pass it gets 503 + ``Retry-After``.
        max_queue_requests: requests of one table waiting for a commit; past it, 429 +
            ``Retry-After``.
        body_timeout_s: a client must send its whole body within this (else 408): a slow
            or stalled client never holds a txn (bodies are read before they join one).
        max_reported_rejections: rejected lines listed one by one in a response.
        retry_after_s: the ``Retry-After`` sent with 429 and 503.
        max_header_bytes: bytes of a request's head (request line and headers); past it
            the request is answered 431 and its connection closed, before the head is
            held in memory (``acidstream.ingest.http.protocol``).
        max_headers: header fields of one request; past it, 431.
        header_timeout_s: a request's head must be complete within this of the
            connection being made (its first request) or of the head's first byte (the
            next ones): else 408 and the connection is closed; a connection that sends
            nothing for as long is closed. A slow client cannot hold a connection open
            (slowloris).
        max_connections: open connections; one more is answered 503 + ``Retry-After``
            and closed at once. With the head's bounds it caps what unfinished heads can
            hold (``max_connections`` x ``max_header_bytes``, plus a socket read each).
    """

    max_body_bytes: int = 16 << 20
    max_decoded_bytes: int = 64 << 20
    max_inflight_bytes: int = 256 << 20
    max_queue_requests: int = 1000
    body_timeout_s: float = 30.0
    max_reported_rejections: int = 100
    retry_after_s: int = 1
    max_header_bytes: int = 64 << 10
    max_headers: int = 100
    header_timeout_s: float = 10.0
    max_connections: int = 1000

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) <= 0:
                raise ConfigError(f"limits.{f.name} must be > 0")
        if self.max_decoded_bytes < self.max_body_bytes:
            raise ConfigError("limits.max_decoded_bytes must be >= limits.max_body_bytes")


@dataclass(frozen=True, kw_only=True)
class CommitWindow:
    """Group commit: requests for one table that arrive within the window share one txn.

    A group closes when ``max_delay_ms`` passed since its first request, or it holds
    ``max_rows`` rows or ``max_bytes`` bytes, whichever comes first; then it commits, and
    every request in it is answered. ``max_delay_ms: 0`` commits whatever is queued at once.
    """

    max_delay_ms: float = 50.0
    max_rows: int = 100_000
    max_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        if self.max_delay_ms < 0:
            raise ConfigError("commit.max_delay_ms must be >= 0")
        if self.max_rows <= 0 or self.max_bytes <= 0:
            raise ConfigError("commit.max_rows and commit.max_bytes must be > 0")


@dataclass(frozen=True, kw_only=True)
class FlumeSettings:
    """``POST /`` in Flume's ``JSONHandler`` format.

    Attributes:
        table_header: the event header naming the target table.
        default_table: the table of events without that header (``None``: such an event
            makes the request a 400).
    """

    table_header: str = "table"
    default_table: str | None = None


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """Everything ``acidstream serve`` needs; build it with :meth:`load`."""

    host: str = "127.0.0.1"
    port: int = 8080
    metastore: str | None = None
    warehouse: str | None = None
    tables: Mapping[str, TableSettings] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    commit: CommitWindow = field(default_factory=CommitWindow)
    flume: FlumeSettings = field(default_factory=FlumeSettings)
    # Deprecated: the txn timeout is the metastore's (``acidstream config set txn_timeout_s``);
    # a value here must equal it (checked when the server opens the metastore).
    txn_timeout_s: float | None = None
    housekeeping_interval_s: float = 60.0
    idempotency_retention_s: float = 86_400.0
    shutdown_timeout_s: float = 30.0
    log_level: str = "info"

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"listen.port must be 0..65535, got {self.port}")
        if (self.txn_timeout_s is not None and self.txn_timeout_s <= 0) or (
            self.housekeeping_interval_s <= 0
        ):
            raise ConfigError("txn_timeout_s and housekeeping_interval_s must be > 0")
        if self.shutdown_timeout_s <= 0:
            raise ConfigError("shutdown_timeout_s must be > 0")
        if self.txn_timeout_s is not None:
            self.check_retention(self.txn_timeout_s)
        ft = self.flume.default_table
        if ft is not None and str(TableName.parse(ft)) not in self.tables:
            raise ConfigError(f"flume.default_table {ft!r} is not one of tables")
        if not self.tables:
            # A server with no table can only answer 404: a wrong or empty file, not a
            # deliberate setup.
            raise ConfigError("no tables configured: tables must name at least one db.table")

    def check_retention(self, txn_timeout_s: float) -> None:
        """Refuse an ``idempotency_retention_s`` shorter than the txn timeout (the
        metastore's, checked again when the server opens it).

        Raises:
            ConfigError: names both values.
        """
        if self.idempotency_retention_s < txn_timeout_s:
            # A key must outlive the txn that may still commit it, or a retry could write
            # the same records twice.
            raise ConfigError(
                f"idempotency_retention_s ({self.idempotency_retention_s:g}) must be at "
                f"least txn_timeout_s ({txn_timeout_s:g})"
            )

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ServerConfig:
        """Merge the YAML file < environment < ``overrides`` (``host``, ``port``,
        ``metastore``, ``warehouse``; ``None`` values are ignored)."""
        raw = read_config_file(path) if path is not None else {}
        environ = os.environ if env is None else env
        listen = _section(raw, "listen", ("host", "port"))
        top: dict[str, Any] = {"host": listen.get("host"), "port": listen.get("port")}
        for key in ("metastore", "warehouse"):
            top[key] = raw.get(key)
        for key, var in (("metastore", ENV_METASTORE), ("warehouse", ENV_WAREHOUSE),
                         ("host", ENV_HOST), ("port", ENV_PORT)):  # fmt: skip
            if environ.get(var):
                top[key] = environ[var]
        for k, v in (overrides or {}).items():
            if k not in ("host", "port", "metastore", "warehouse"):
                raise ConfigError(f"unknown override {k!r}")
            if v is not None:
                top[k] = v
        allowed = {
            "listen", "metastore", "warehouse", "tables", "limits", "commit", "flume",
            "txn_timeout_s", "housekeeping_interval_s", "idempotency_retention_s",
            "shutdown_timeout_s", "log_level",
        }  # fmt: skip
        unknown = sorted(set(raw) - allowed)
        if unknown:
            raise ConfigError(f"unknown config key(s): {', '.join(unknown)}")
        tables = _tables(raw.get("tables"))
        kwargs: dict[str, Any] = {
            "tables": tables,
            "limits": _build(Limits, _section(raw, "limits", _names(Limits)), "limits"),
            "commit": _build(CommitWindow, _section(raw, "commit", _names(CommitWindow)), "commit"),
            "flume": _build(FlumeSettings, _section(raw, "flume", _names(FlumeSettings)), "flume"),
        }
        for key in ("txn_timeout_s", "housekeeping_interval_s", "idempotency_retention_s",
                    "shutdown_timeout_s"):  # fmt: skip
            if raw.get(key) is not None:
                kwargs[key] = _number(raw[key], key, float)
        if raw.get("log_level") is not None:
            kwargs["log_level"] = str(raw["log_level"]).lower()
        if top.get("host"):
            kwargs["host"] = str(top["host"])
        if top.get("port") is not None:
            kwargs["port"] = _number(top["port"], "listen.port", int)
        for key in ("metastore", "warehouse"):
            if top.get(key):
                kwargs[key] = str(top[key])
        return cls(**kwargs)


def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def _section(raw: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    value = raw.get(name)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name} must be a mapping")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise ConfigError(f"unknown config key(s): {', '.join(f'{name}.{k}' for k in unknown)}")
    return {k: v for k, v in value.items() if v is not None}


def _number(value: Any, key: str, kind: type[int] | type[float]) -> Any:
    if isinstance(value, bool):
        raise ConfigError(f"{key} must be a number, got {value!r}")
    try:
        return kind(value)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{key} must be a number, got {value!r}") from e


def _typed(cls: type, values: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Coerce YAML/env strings to each field's declared type, naming the key on failure."""
    out: dict[str, Any] = {}
    types = {f.name: str(f.type) for f in fields(cls)}
    for k, v in values.items():
        t = types[k]
        key = f"{prefix}.{k}"
        if t == "bool":
            if not isinstance(v, bool):
                raise ConfigError(f"{key} must be true or false, got {v!r}")
            out[k] = v
        elif t == "int":
            out[k] = _number(v, key, int)
        elif t == "float":
            out[k] = _number(v, key, float)
        elif t.startswith("tuple"):
            if isinstance(v, str) or not isinstance(v, list | tuple):
                raise ConfigError(f"{key} must be a list")
            out[k] = tuple(str(x) for x in v)
        else:
            out[k] = None if v is None else str(v)
    return out


def _build(cls: type, values: Mapping[str, Any], prefix: str) -> Any:
    return cls(**_typed(cls, values, prefix))


def _tables(raw: Any) -> dict[str, TableSettings]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("tables must be a mapping of db.table -> settings")
    allowed = tuple(n for n in _names(TableSettings) if n != "name")
    out: dict[str, TableSettings] = {}
    for name, settings in raw.items():
        prefix = f"tables.{name}"
        settings = settings or {}
        if not isinstance(settings, Mapping):
            raise ConfigError(f"{prefix} must be a mapping")
        unknown = sorted(set(settings) - set(allowed))
        if unknown:
            raise ConfigError(
                f"unknown config key(s): {', '.join(f'{prefix}.{k}' for k in unknown)}"
            )
        values = _typed(TableSettings, {k: v for k, v in settings.items() if v is not None}, prefix)
        t = TableSettings(name=str(name), **values)
        if t.qualified in out:
            raise ConfigError(f"{prefix}: table configured twice")
        out[t.qualified] = t
    return out
