"""The Flume-style HTTP ingest server: newline-delimited records over HTTP, a 200 only once
they are committed (group commit, idempotency keys). See ``docs/http_ingest.md``."""

from ingest.http.app import IngestServer, create_app
from ingest.http.config import CommitWindow, FlumeSettings, Limits, ServerConfig, TableSettings
from ingest.http.server import serve

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
