"""The Kafka job's Prometheus metrics (``job.metrics_port``) and its progress line.

Driver side only. :class:`JobMetrics` keeps the job's counters, gauges and histograms on
a registry of its own (as ``acidstream.ingest.http.metrics`` does: several jobs or tests
in one process never clash on names) and is fed once per committed micro-batch with the
sink's ``last_batch_stats``. :class:`MetricsServer` serves it as Prometheus text at
``GET /metrics`` on ``127.0.0.1``. :func:`progress_line` is the console line of a batch.

Consumer lag is the broker's end offset of each topic-partition minus the offset the
table recorded with its last commit (the sink's exactly-once key; the offsets Spark's
checkpoint holds may be ahead of what is committed). :class:`LagProbe` asks the broker
(``acidstream.sources.kafka.end_offsets``) after each batch and again at scrape time
(at most once a second), so lag is right whether or not the Spark query is busy.

Freshness is the time from an event's source timestamp (``event_times_ms``: Debezium's
``source.ts_ms``, else ``ts_ms``, else the Kafka timestamp) to its batch's commit
(``committed_at``); a batch adds all its events to the histogram at once with numpy
bucket counts (:class:`BulkHistogram`), not one ``observe`` per event.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "BatchSummary",
    "BulkHistogram",
    "JobMetrics",
    "LagProbe",
    "MetricsServer",
    "progress_line",
]

log = logging.getLogger(__name__)

FRESHNESS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
                     1800.0, 3600.0)  # fmt: skip
"""Seconds from an event's source timestamp to its commit (``le`` bounds; +Inf is added)."""
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
RATE_WINDOW_S = 60.0
"""``events_per_second`` is the events committed over this many seconds, at scrape time."""
LAG_MAX_AGE_S = 1.0
"""A scrape reuses lag looked up less than this long ago (a scraper cannot flood the broker)."""
LAG_CLIENT_OPTIONS = {
    "fetchOffset.numRetries": "1",
    "kafka.bootstrap.timeout.ms": "2000",
    "kafka.request.timeout.ms": "5000",
}
"""One short attempt per lookup: a scrape must answer within Prometheus' scrape timeout
(10 s by default) even when the broker is gone; the next lookup tries again."""
TopicPartition = tuple[str, int]


class BulkHistogram(Collector):
    """A Prometheus histogram that takes a whole array of observations at once.

    ``prometheus_client.Histogram`` observes one value per call; a batch of 100,000
    events would be 100,000 Python calls under a lock. Here a batch is one
    ``np.searchsorted`` + ``np.bincount``. Thread-safe (the batch thread adds, the
    server's thread collects).
    """

    def __init__(self, name: str, documentation: str, buckets: Sequence[float]) -> None:
        self.name, self.documentation = name, documentation
        self.bounds = np.asarray(sorted(buckets), dtype=np.float64)
        self._counts = np.zeros(len(self.bounds) + 1, dtype=np.int64)  # the last one: +Inf
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe_many(self, values: np.ndarray) -> None:
        """Add every value of ``values`` (NaNs are left out)."""
        v = np.asarray(values, dtype=np.float64)
        v = v[~np.isnan(v)]
        if not v.size:
            return
        # side="left": a value equal to a bound belongs to that bound's bucket (le).
        counts = np.bincount(np.searchsorted(self.bounds, v, side="left"),
                             minlength=len(self._counts))  # fmt: skip
        with self._lock:
            self._counts += counts
            self._sum += float(v.sum())

    @property
    def count(self) -> int:
        with self._lock:
            return int(self._counts.sum())

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            cumulative = np.cumsum(self._counts)
            total = self._sum
        labels = [_bound_text(b) for b in self.bounds] + ["+Inf"]
        yield HistogramMetricFamily(
            self.name,
            self.documentation,
            buckets=list(zip(labels, (int(c) for c in cumulative), strict=True)),
            sum_value=total,
        )


def _bound_text(b: float) -> str:
    return str(float(b))


class LagProbe:
    """Consumer lag of the job: the broker's end offsets minus the table's committed offsets.

    Driver side. ``committed`` is set by the job after each commit (and at start from
    the table); :meth:`refresh` asks the broker for end offsets. Thread-safe: the batch
    thread and the metrics server's threads both call :meth:`refresh`.

    Args:
        bootstrap: the broker's bootstrap servers.
        topic: the job's topic.
        method: ``listOffsets`` or ``fetch`` (the source's ``endOffsetsFrom``; ``fetch``
            for Tansu, see ``acidstream/jobs/broker.py``).
        clock: monotonic seconds (tests inject one).
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        method: str = "listOffsets",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bootstrap, self.topic, self.method = bootstrap, topic, method
        self._clock = clock
        self._lock = threading.Lock()
        self._committed: dict[TopicPartition, int] = {}
        self._lag: dict[TopicPartition, int] = {}
        self._at: float | None = None
        self.errors = 0
        self.ok = True  # whether the last lookup succeeded

    def set_committed(self, offsets: Mapping[str, Mapping[str, int]] | None) -> None:
        """The next offsets to read per topic and partition, as the sink records them
        (``{"topic": {"0": 12}}``); partitions absent have committed nothing (offset 0)."""
        mine = (offsets or {}).get(self.topic) or {}
        with self._lock:
            self._committed = {(self.topic, int(p)): int(o) for p, o in mine.items()}
            self._at = None  # the next read of lag asks the broker again

    def refresh(self, *, max_age_s: float = 0.0) -> dict[TopicPartition, int]:
        """Lag per topic-partition, looked up now unless the last lookup is younger than
        ``max_age_s``. A failed lookup keeps the last values (counted in ``errors``)."""
        from acidstream.acid.errors import AcidStreamError
        from acidstream.sources.kafka import end_offsets

        with self._lock:
            now = self._clock()
            if self._at is not None and now - self._at < max_age_s:
                return dict(self._lag)
            try:
                ends = end_offsets(
                    self.bootstrap, [self.topic], method=self.method,  # type: ignore[arg-type]
                    kafka_options=LAG_CLIENT_OPTIONS,
                )  # fmt: skip
            except AcidStreamError as e:
                self.errors += 1
                self.ok = False
                log.warning("consumer lag lookup failed: %s", e)
                return dict(self._lag)
            self._lag = {
                (self.topic, int(p)): max(
                    0, int(end) - self._committed.get((self.topic, int(p)), 0)
                )
                for p, end in (ends.get(self.topic) or {}).items()
            }
            self._at = now
            self.ok = True
            return dict(self._lag)


@dataclass(frozen=True, kw_only=True)
class BatchSummary:
    """What one committed micro-batch did, as the progress line and the metrics show it."""

    batch_id: int
    mode: str
    events: int
    counts: Mapping[str, int]  # upsert: upserts, inserted, deletes, ...; append: rows, bad_records
    write_ids: tuple[int, int]
    files: int
    lag: int | None  # total over the topic's partitions; None: the lookup failed
    freshness_p50: float | None
    freshness_p99: float | None
    seconds: float


def _count(stats: Mapping[str, Any], key: str) -> int:
    v = stats.get(key)
    return int(v) if v is not None else 0


class JobMetrics:
    """The job's metrics (``acidstream_job_*``) on a registry of its own.

    Driver side: :meth:`record_batch` runs in the batch thread after each commit (the
    job looks the lag up with :meth:`with_lag` on its progress thread);
    the metrics server collects from its own threads (prometheus_client is thread-safe,
    and the scrape-time values are computed under locks).

    Args:
        table / sink_id / mode: shown in ``acidstream_job_info``.
        lag: the job's :class:`LagProbe` (``None``: no lag metric).
        clock: wall-clock seconds (tests inject one); ``committed_at`` is on this clock.
    """

    def __init__(
        self,
        *,
        table: str,
        sink_id: str,
        mode: str,
        lag: LagProbe | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.mode, self.lag, self._clock = mode, lag, clock
        self.started_at = clock()
        self._last_commit: float | None = None
        self._recent: collections.deque[tuple[float, int]] = collections.deque()
        self._lock = threading.Lock()
        r = self.registry = CollectorRegistry(auto_describe=True)
        Gauge("acidstream_job_info", "the job: its table, sink id and sink mode",
              ["table", "sink_id", "mode"], registry=r).labels(table, sink_id, mode).set(1)  # fmt: skip
        self.batches = Counter("acidstream_job_batches", "micro-batches committed", registry=r)
        self.skipped = Counter(
            "acidstream_job_batches_skipped",
            "micro-batches skipped as already committed (replays after a restart)",
            registry=r,
        )
        self.events = Counter(
            "acidstream_job_events",
            "Kafka records read by committed batches (tombstones and bad records included)",
            registry=r,
        )
        names: Sequence[tuple[str, str]] = (
            [("upserts", "events applied as upserts (inserted + updated keys)"),
             ("inserted", "keys inserted"), ("updated", "keys updated"),
             ("deletes", "keys deleted"),
             ("absent_deletes", "deletes of keys not in the table (counted no-ops)"),
             ("skipped_late", "events older than the table's row (sink.ordering_guard)"),
             ("dead_letters", "bad events written to dead letters"),
             ("bad_records", "bad events (dead letters, or skipped with sink.skip_bad_records)")]
            if mode == "upsert"
            else [("rows", "rows appended"), ("bad_records", "bad records (dead letters or skipped)")]
        )  # fmt: skip
        self.counters = {
            key: Counter(f"acidstream_job_{key}", doc, registry=r) for key, doc in names
        }
        self.batch_seconds = Histogram(
            "acidstream_job_batch_duration_seconds",
            "a micro-batch's time in the sink (parse, write, commit)",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.freshness = BulkHistogram(
            "acidstream_job_freshness_seconds",
            "seconds from each event's source timestamp to its batch's commit",
            FRESHNESS_BUCKETS,
        )
        r.register(self.freshness)
        r.register(_ScrapeTime(self))

    # ------------------------------------------------------------------ per batch
    def record_batch(self, stats: Mapping[str, Any], *, lag: bool = True) -> BatchSummary:
        """Add one committed batch (the sink's ``last_batch_stats``) and summarise it
        (``lag``: with the consumer lag looked up now; else the summary's lag is None, for
        :meth:`with_lag` to fill in off the batch thread)."""
        committed_at = float(stats.get("committed_at") or self._clock())
        # The records read: upsert mode counts them as rows; in append mode every record
        # read is a row written or a bad record.
        events = (
            _count(stats, "rows")
            if self.mode == "upsert"
            else _count(stats, "rows") + _count(stats, "bad_records")
        )
        counts = {key: _count(stats, key) for key in self.counters}
        if self.mode == "upsert" and stats.get("upserts") is None:
            counts["upserts"] = counts["inserted"] + counts["updated"]
        self.batches.inc()
        self.events.inc(events)
        for key, n in counts.items():
            self.counters[key].inc(n)
        seconds = float(stats.get("seconds") or 0.0)
        self.batch_seconds.observe(seconds)
        p50 = p99 = None
        times = stats.get("event_times_ms")
        if times is not None and len(times):
            ms = np.asarray(times, dtype=np.float64)
            ages = committed_at - ms[ms > 0] / 1000.0  # <= 0: the record had no timestamp
            if ages.size:
                self.freshness.observe_many(ages)
                p50, p99 = (float(x) for x in np.percentile(ages, [50, 99]))
        with self._lock:
            self._last_commit = committed_at
            self._recent.append((committed_at, events))
        wids = stats.get("write_ids") or (0, 0)
        summary = BatchSummary(
            batch_id=int(stats.get("batch_id", -1)), mode=self.mode, events=events, counts=counts,
            write_ids=(int(wids[0]), int(wids[-1])), files=_count(stats, "files"), lag=None,
            freshness_p50=p50, freshness_p99=p99, seconds=seconds,
        )  # fmt: skip
        return self.with_lag(summary) if lag else summary

    def with_lag(self, summary: BatchSummary) -> BatchSummary:
        """``summary`` with the consumer lag looked up now (a broker round trip; None when
        there is no probe or the lookup failed)."""
        if self.lag is None:
            return summary
        total = sum(self.lag.refresh().values())
        return dataclasses.replace(summary, lag=total if self.lag.ok else None)

    # ------------------------------------------------------------- scrape time
    def seconds_since_last_commit(self) -> float:
        """Since this run's last commit (since the job started, before its first)."""
        with self._lock:
            base = self._last_commit if self._last_commit is not None else self.started_at
        return max(0.0, self._clock() - base)

    def events_per_second(self) -> float:
        """Events committed over the last ``RATE_WINDOW_S`` seconds (or since the start)."""
        now = self._clock()
        with self._lock:
            while self._recent and self._recent[0][0] < now - RATE_WINDOW_S:
                self._recent.popleft()
            events = sum(n for _, n in self._recent)
        window = min(RATE_WINDOW_S, now - self.started_at)
        return events / window if window > 0 else 0.0


class _ScrapeTime(Collector):
    """The values computed when Prometheus scrapes: seconds since the last commit,
    events/s and the consumer lag per topic-partition (asked of the broker now)."""

    def __init__(self, metrics: JobMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> Iterator[Metric]:
        """The names only: registering must not ask the broker (the registry calls
        ``collect`` to learn them otherwise)."""
        yield GaugeMetricFamily("acidstream_job_seconds_since_last_commit", "")
        yield GaugeMetricFamily("acidstream_job_events_per_second", "")
        if self.metrics.lag is not None:
            yield GaugeMetricFamily(
                "acidstream_job_consumer_lag", "", labels=["topic", "partition"]
            )
            yield GaugeMetricFamily("acidstream_job_consumer_lag_errors", "")

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        yield GaugeMetricFamily(
            "acidstream_job_seconds_since_last_commit",
            "seconds since the job's last commit (since its start, before the first)",
            value=m.seconds_since_last_commit(),
        )
        yield GaugeMetricFamily(
            "acidstream_job_events_per_second",
            f"events committed per second over the last {RATE_WINDOW_S:g} seconds",
            value=m.events_per_second(),
        )
        if m.lag is None:
            return
        lag = m.lag.refresh(max_age_s=LAG_MAX_AGE_S)
        g = GaugeMetricFamily(
            "acidstream_job_consumer_lag",
            "records of the topic-partition not yet committed to the table "
            "(the broker's end offset minus the offset the table recorded)",
            labels=["topic", "partition"],
        )
        for (topic, part), n in sorted(lag.items()):
            g.add_metric([topic, str(part)], n)
        yield g
        yield GaugeMetricFamily(
            "acidstream_job_consumer_lag_errors",
            "failed end-offset lookups (the lag shown is the last one looked up)",
            value=m.lag.errors,
        )


class MetricsServer:
    """``GET /metrics`` (Prometheus text) of a registry on ``127.0.0.1:port``, served by
    daemon threads of the driver until :meth:`stop`.

    Args:
        registry: what to serve.
        port: the TCP port (0: any free one; :attr:`port` says which).
    """

    def __init__(self, registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> None:
        from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404, "only /metrics is served")
                    return
                body = generate_latest(registry)
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("metrics: " + format, *args)

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="acidstream-job-metrics", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _secs(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "-"
    return f"{x:.2f}s" if x < 100 else f"{x:.0f}s"


def progress_line(s: BatchSummary) -> str:
    """The console line of one committed batch, e.g. ``batch 3: 1,000 events: 690 upserts
    (200 new), 100 deletes (5 absent), 2 late, 1 dead letters | write id 7 | lag 0 |
    freshness p50 0.81s p99 1.90s | 0.52s`` (events: the Kafka records the batch read;
    upserts and deletes: keys, after each key's events collapsed to its last)."""
    c = s.counts
    if s.mode == "upsert":
        skipped = c["bad_records"] - c["dead_letters"]
        what = (f"{s.events:,} events: {c['upserts']:,} upserts ({c['inserted']:,} new), "
                f"{c['deletes']:,} deletes ({c['absent_deletes']:,} absent), "
                f"{c['skipped_late']:,} late, {c['dead_letters']:,} dead letters"
                + (f" (+{skipped:,} bad skipped)" if skipped > 0 else ""))  # fmt: skip
    else:
        what = f"{c['rows']:,} rows, {c['bad_records']:,} bad, {s.files} files"
    lo, hi = s.write_ids
    wid = f"write id {lo}" if lo == hi else f"write ids {lo}..{hi}"
    lag = "?" if s.lag is None else f"{s.lag:,}"
    fresh = f"freshness p50 {_secs(s.freshness_p50)} p99 {_secs(s.freshness_p99)}"
    return f"batch {s.batch_id}: {what} | {wid} | lag {lag} | {fresh} | {s.seconds:.2f}s"
