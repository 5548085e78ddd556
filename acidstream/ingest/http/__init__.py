"""The Flume-style HTTP ingest server: newline-delimited records over HTTP, a 200 only once
they are committed (group commit, idempotency keys). See ``docs/http_ingest.md``."""

from acidstream.ingest.http.app import IngestServer, create_app
from acidstream.ingest.http.config import (
    CommitWindow,
    FlumeSettings,
    Limits,
    ServerConfig,
    TableSettings,
)
from acidstream.ingest.http.server import serve

__all__ = [
    "CommitWindow",
    "FlumeSettings",
    "IngestServer",
    "Limits",
    "ServerConfig",
    "TableSettings",
    "create_app",
    "serve",
]
