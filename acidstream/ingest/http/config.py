"""The HTTP ingest server's configuration: YAML < environment < arguments, parsed once.

``ServerConfig.load`` merges ``configs/http_ingest.yaml`` (or any file of that shape), the
environment (``ACIDSTREAM_METASTORE``, ``ACIDSTREAM_WAREHOUSE``, ``ACIDSTREAM_HTTP_HOST``,
``ACIDSTREAM_HTTP_PORT``) and the command line's overrides, and returns frozen dataclasses:
inner code never reads a raw mapping. The merge and the typing are
``acidstream.acid.config_fields``' (the same rules as the Kafka job's config and the sink's
options): an unknown key or a bad value raises ``ConfigError`` naming the key, the value
and where it came from (``tables.default.events.formt (config file c.yaml); did you mean
tables.default.events.format?``). ``docs/http_ingest.md`` lists every key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
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
    txn_timeout_removed,
)
from acidstream.acid.errors import ConfigError
from acidstream.acid.table_name import TableName
from acidstream.ingest.record_writers import RECORD_FORMATS, RecordWriter, record_writer_for
from acidstream.txn.namespaces import bind_write_name, refuse_link
from acidstream.txn.storage_options import StorageOptions, from_config_tree

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

FORMATS = RECORD_FORMATS
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")  # uvicorn's

#: Content types accepted per record format when a table names none.
DEFAULT_CONTENT_TYPES: Mapping[str, tuple[str, ...]] = {
    "json": ("application/x-ndjson", "application/jsonl", "application/json", "text/plain"),
    "delimited": ("text/plain", "text/csv", "text/tab-separated-values"),
    "regex": ("text/plain",),
    "raw": ("text/plain", "application/octet-stream"),
}


@dataclass(frozen=True, kw_only=True)
class TableSettings:
    """One table the server writes.

    Attributes:
        name: ``db.table`` (the URL path names it so).
        format: ``json``, ``delimited``, ``regex`` or ``raw`` (each line whole into the
            table's one string or binary column): the record writer.
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
        check_fields(self, TABLE_FIELDS, prefix=f"{key}.")
        if any(not t for t in self.tokens):
            raise ConfigError(f"{key}.tokens must not hold empty tokens")
        if not self.content_types:
            object.__setattr__(self, "content_types", DEFAULT_CONTENT_TYPES[self.format])
        # Build the record writer once here: a setting it refuses (a regex that does not
        # compile, a delimiter of two characters) must stop the server at start, naming
        # the key, not turn every request into a 503.
        if self.format == "regex" and not self.regex:
            raise ConfigError(f"{key}.format regex needs {key}.regex")
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
    """The table's configured record writer (``acidstream.ingest.record_writers``' one
    factory; ``ConfigError`` for a setting it refuses)."""
    return record_writer_for(
        t.format, delimiter=t.delimiter, regex=t.regex, max_record_bytes=t.max_record_bytes
    )


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
        check_fields(self, LIMIT_FIELDS, prefix="limits.")
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
        check_fields(self, COMMIT_FIELDS, prefix="commit.")


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
    # The warehouse filesystem's options (YAML ``storage_options:``, then --storage-option);
    # printed masked.
    storage_options: StorageOptions = field(default_factory=StorageOptions)
    tables: Mapping[str, TableSettings] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    commit: CommitWindow = field(default_factory=CommitWindow)
    flume: FlumeSettings = field(default_factory=FlumeSettings)
    # No txn_timeout_s: the txn timeout is the metastore's (``acidstream config set
    # txn_timeout_s``); a config file naming it is refused (SERVER_FIELDS).
    housekeeping_interval_s: float = 60.0
    idempotency_retention_s: float = 86_400.0
    shutdown_timeout_s: float = 30.0
    log_level: str = "info"

    def __post_init__(self) -> None:
        check_fields(self, LISTEN_FIELDS, prefix="listen.")
        check_fields(self, SERVER_FIELDS)
        object.__setattr__(self, "storage_options", StorageOptions.of(self.storage_options))
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
        """Merge the YAML file < environment < ``overrides`` (the command line's: ``host``,
        ``port``, ``metastore``, ``warehouse``, ``storage_options`` (merged key by key over
        the file's); ``None`` values are ignored)."""
        flags: dict[tuple[str, ...], Any] = {}
        over = dict(overrides or {})
        storage_over = over.pop("storage_options", None)
        for k, v in over.items():
            if k not in _OVERRIDES:
                raise ConfigError(f"unknown override {k!r} (known: {', '.join(_OVERRIDES)})")
            flags[_OVERRIDES[k]] = v
        tree = load_layers(
            path,
            env=os.environ if env is None else env,
            env_vars=_ENV_VARS,
            flags=flags,
            flag_names={keys: f"--{k}" for k, keys in _OVERRIDES.items()},
        )
        storage_options = from_config_tree(tree, over=storage_over)
        kwargs = parse_section(tree, SERVER_FIELDS, sections=_SECTIONS)
        kwargs.update(parse_section(section(tree, "listen"), LISTEN_FIELDS, prefix="listen."))
        return cls(
            **kwargs,
            storage_options=storage_options,
            tables=_tables(tree),
            limits=Limits(**_parsed(tree, "limits", LIMIT_FIELDS)),
            commit=CommitWindow(**_parsed(tree, "commit", COMMIT_FIELDS)),
            flume=FlumeSettings(**_parsed(tree, "flume", FLUME_FIELDS)),
        )


# The keys of each section, typed and bounded once (acidstream.acid.config_fields); the
# dataclasses' __post_init__ re-check the bounds for objects built in Python.
TABLE_FIELDS = fields_of(
    TableSettings,
    Field(name="format", choices=FORMATS),
    Field(name="max_record_bytes", above=0),
    skip=("name",),
)
LIMIT_FIELDS = fields_of(Limits, *(Field(name=n, above=0) for n in Limits.__dataclass_fields__))
COMMIT_FIELDS = fields_of(
    CommitWindow,
    Field(name="max_delay_ms", min=0),
    Field(name="max_rows", above=0),
    Field(name="max_bytes", above=0),
)
FLUME_FIELDS = fields_of(FlumeSettings)
LISTEN_FIELDS = {
    k: v
    for k, v in fields_of(
        ServerConfig,
        Field(name="port", min=0, max=65535),
        skip=("tables", "limits", "commit", "flume", "storage_options"),
    ).items()
    if k in ("host", "port")
}
SERVER_FIELDS = {
    k: v
    for k, v in fields_of(
        ServerConfig,
        Field(name="housekeeping_interval_s", above=0),
        Field(name="idempotency_retention_s", above=0),
        Field(name="shutdown_timeout_s", above=0),
        Field(name="log_level", choices=LOG_LEVELS),
        skip=("tables", "limits", "commit", "flume", "storage_options"),
        extra=(txn_timeout_removed(),),
    ).items()
    if k not in LISTEN_FIELDS
}
_SECTIONS = ("listen", "tables", "limits", "commit", "flume")
_ENV_VARS = {
    ("metastore",): ENV_METASTORE,
    ("warehouse",): ENV_WAREHOUSE,
    ("listen", "host"): ENV_HOST,
    ("listen", "port"): ENV_PORT,
}
_OVERRIDES = {
    "host": ("listen", "host"),
    "port": ("listen", "port"),
    "metastore": ("metastore",),
    "warehouse": ("warehouse",),
}


def _parsed(tree: Tree, name: str, specs: Mapping[str, Field]) -> dict[str, Any]:
    return parse_section(section(tree, name), specs, prefix=f"{name}.")


def _tables(tree: Tree) -> dict[str, TableSettings]:
    out: dict[str, TableSettings] = {}
    for name, node in section(tree, "tables").items():
        prefix = f"tables.{name}."
        if isinstance(node, Sourced) and node.value is not None:
            raise ConfigError(
                f"tables.{name} must be a mapping of settings, got {node.value!r} ({node.source})"
            )
        settings: Tree = node if isinstance(node, dict) else {}
        t = TableSettings(name=name, **parse_section(settings, TABLE_FIELDS, prefix=prefix))
        if t.qualified in out:
            raise ConfigError(f"tables.{name}: table configured twice")
        out[t.qualified] = t
    return out
