"""The server's Prometheus metrics (``GET /metrics``), on a registry of its own.

One :class:`Metrics` per application: tests start several servers in one process without
the global registry's duplicate-name errors.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0)
_GROUP_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Metrics:
    """Counters, gauges and histograms named ``acidstream_http_*``."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "acidstream_http_requests",
            "HTTP requests by route and status",
            ["route", "status"],
            registry=r,
        )
        self.records = Counter(
            "acidstream_http_records",
            "records by table and outcome (accepted: committed)",
            ["table", "outcome"],
            registry=r,
        )
        self.bytes = Counter(
            "acidstream_http_bytes",
            "record bytes by table and outcome",
            ["table", "outcome"],
            registry=r,
        )
        self.commit_seconds = Histogram(
            "acidstream_http_commit_seconds",
            "time to make a group durable and commit it",
            ["table"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.ack_seconds = Histogram(
            "acidstream_http_ack_seconds",
            "request received (body read) to acknowledgement",
            ["table"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.group_requests = Histogram(
            "acidstream_http_group_commit_requests",
            "requests sharing one commit",
            ["table"],
            buckets=_GROUP_BUCKETS,
            registry=r,
        )
        self.group_rows = Histogram(
            "acidstream_http_group_commit_rows",
            "rows in one commit",
            ["table"],
            buckets=tuple(float(4**i) for i in range(11)),
            registry=r,
        )
        self.early_rows = Counter(
            "acidstream_http_early_encoded_rows",
            "rows encoded into their txn's files while the group's window was still open",
            ["table"],
            registry=r,
        )
        self.inflight_bytes = Gauge(
            "acidstream_http_inflight_bytes",
            "bytes of requests admitted and not yet answered",
            registry=r,
        )
        self.queue_requests = Gauge(
            "acidstream_http_commit_queue_requests",
            "requests waiting for a commit",
            ["table"],
            registry=r,
        )
        self.backpressure = Counter(
            "acidstream_http_backpressure",
            "requests refused by backpressure",
            ["reason"],
            registry=r,
        )
        self.open_txns = Gauge("acidstream_http_open_txns", "txns this server has open", registry=r)
        self.commits = Counter(
            "acidstream_http_commits",
            "commits by table and result",
            ["table", "result"],
            registry=r,
        )
        self.changes = Counter(
            "acidstream_http_changes",
            "records of ?mode=upsert and ?mode=delete requests committed, by table and mode",
            ["table", "mode"],
            registry=r,
        )
        self.change_results = Counter(
            "acidstream_http_change_results",
            "what committed changes did, by table and result (inserted, updated, deleted, "
            "absent_deletes: deletes of keys not in the table)",
            ["table", "result"],
            registry=r,
        )
        self.replays = Counter(
            "acidstream_http_idempotent_replays",
            "retries answered with their first response",
            ["table"],
            registry=r,
        )
        self.connection_refusals = Counter(
            "acidstream_http_connection_refusals",
            "requests refused by the connection before any route (head too large or too "
            "slow, too many connections)",
            ["status"],
            registry=r,
        )
