"""The Kafka job's metrics without Spark: the vectorised freshness histogram against
prometheus_client's own, the counters of a batch, the scrape-time gauges, the progress
line, the ``/metrics`` server, the lag probe against the real broker, and the config."""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, Histogram

from acidstream.acid.errors import ConfigError
from acidstream.jobs.config import KafkaJobConfig
from acidstream.jobs.metrics import (
    FRESHNESS_BUCKETS,
    BulkHistogram,
    JobMetrics,
    LagProbe,
    MetricsServer,
    progress_line,
)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, str], float]:
    """``{(sample name, le): value}`` of one histogram."""
    out = {}
    for metric in registry.collect():
        if metric.name == name:
            for s in metric.samples:
                out[(s.name, s.labels.get("le", ""))] = s.value
    return out


def test_bulk_histogram_equals_prometheus_histogram_observed_one_by_one() -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate(
        [
            rng.exponential(20.0, 5000),
            np.asarray(FRESHNESS_BUCKETS),  # exactly on each bound: belongs to it (le)
            [0.0, 1e6, -0.5],  # below every bound, above every bound, clock skew
        ]
    )
    bulk_reg, ref_reg = CollectorRegistry(), CollectorRegistry()
    bulk = BulkHistogram("f_seconds", "x", FRESHNESS_BUCKETS)
    bulk_reg.register(bulk)
    ref = Histogram("f_seconds", "x", buckets=FRESHNESS_BUCKETS, registry=ref_reg)
    half = len(values) // 2
    bulk.observe_many(values[:half])  # two batches add up
    bulk.observe_many(np.append(values[half:], np.nan))  # NaN: no timestamp, left out
    for v in values:
        ref.observe(float(v))
    got, want = _samples(bulk_reg, "f_seconds"), _samples(ref_reg, "f_seconds")
    want = {k: v for k, v in want.items() if k[0] != "f_seconds_created"}
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k] == pytest.approx(v), k
    assert bulk.count == len(values)


def _upsert_stats(batch_id: int, committed_at: float, ages: list[float]) -> dict[str, Any]:
    times = np.asarray([(committed_at - a) * 1000 for a in ages], dtype=np.int64)
    return {
        "batch_id": batch_id, "write_ids": [batch_id + 1, batch_id + 1], "rows": len(ages) + 1,
        "events": len(ages), "inserted": 3, "updated": 2, "upserts": 5, "deletes": 4,
        "absent_deletes": 1, "skipped_late": 2, "dead_letters": 1, "bad_records": 1, "files": 2,
        "seconds": 0.7, "committed_at": committed_at, "event_times_ms": times,
    }  # fmt: skip


def test_upsert_batches_feed_the_counters_histograms_and_scrape_time_gauges() -> None:
    clock = Clock(1_000_000.0)
    m = JobMetrics(table="default.t", sink_id="s", mode="upsert", clock=clock)
    clock.now += 10
    ages1 = [float(a) for a in range(1, 101)]  # 1..100 s old at the commit
    s1 = m.record_batch(_upsert_stats(0, clock.now, ages1))
    clock.now += 20
    s2 = m.record_batch(_upsert_stats(1, clock.now, [0.5] * 12))
    r = m.registry
    assert r.get_sample_value("acidstream_job_batches_total") == 2
    assert r.get_sample_value("acidstream_job_events_total") == 114  # records read: one bad each
    expected = {"upserts": 10, "inserted": 6, "updated": 4, "deletes": 8, "absent_deletes": 2,
                "skipped_late": 4, "dead_letters": 2, "bad_records": 2}  # fmt: skip
    for key, n in expected.items():
        assert r.get_sample_value(f"acidstream_job_{key}_total") == n, key
    assert r.get_sample_value("acidstream_job_rows_total") is None  # append mode's only
    assert r.get_sample_value("acidstream_job_freshness_seconds_count") == 112
    assert r.get_sample_value("acidstream_job_freshness_seconds_sum") == pytest.approx(
        sum(ages1) + 12 * 0.5, abs=0.05
    )
    # 1..100 s: 50 at or under 50 s, 60 at or under 60 s; the second batch's 12 at 0.5 s.
    le = {"le": "60.0"}
    assert r.get_sample_value("acidstream_job_freshness_seconds_bucket", le) == 60 + 12
    assert r.get_sample_value("acidstream_job_batch_duration_seconds_count") == 2
    assert s1.freshness_p50 == pytest.approx(np.percentile(ages1, 50), abs=0.01)
    assert s1.freshness_p99 == pytest.approx(np.percentile(ages1, 99), abs=0.01)
    assert s2.freshness_p50 == pytest.approx(0.5, abs=0.01)
    clock.now += 7
    assert r.get_sample_value("acidstream_job_seconds_since_last_commit") == pytest.approx(7)
    # 114 events over the 37 s since the start (less than the 60 s window).
    assert r.get_sample_value("acidstream_job_events_per_second") == pytest.approx(114 / 37)
    clock.now += 45  # the first batch, committed 72 s ago now, left the window
    assert r.get_sample_value("acidstream_job_events_per_second") == pytest.approx(13 / 60)


def test_seconds_since_last_commit_counts_from_the_start_before_any_commit() -> None:
    clock = Clock(5000.0)
    m = JobMetrics(table="default.t", sink_id="s", mode="append", clock=clock)
    clock.now += 12.5
    assert m.registry.get_sample_value("acidstream_job_seconds_since_last_commit") == pytest.approx(
        12.5
    )


def test_append_batches_count_rows_and_bad_records() -> None:
    clock = Clock(2000.0)
    m = JobMetrics(table="default.t", sink_id="s", mode="append", clock=clock)
    stats = {"batch_id": 4, "write_ids": [7, 9], "rows": 990, "bad_records": 10, "files": 3,
             "seconds": 1.25, "committed_at": clock.now,
             # -1: a record without a Kafka timestamp, left out of the freshness figures
             "event_times_ms": np.append(np.full(990, (clock.now - 2.0) * 1000, dtype=np.int64), -1)}  # fmt: skip
    s = m.record_batch(stats)
    r = m.registry
    assert r.get_sample_value("acidstream_job_rows_total") == 990
    assert r.get_sample_value("acidstream_job_bad_records_total") == 10
    assert r.get_sample_value("acidstream_job_events_total") == 1000  # every record read
    assert r.get_sample_value("acidstream_job_upserts_total") is None
    assert r.get_sample_value("acidstream_job_freshness_seconds_count") == 990
    line = progress_line(s)
    assert line.startswith("batch 4: 990 rows, 10 bad, 3 files | write ids 7..9 | lag ? |")
    assert "freshness p50 2.00s p99 2.00s" in line and line.endswith("| 1.25s")


def test_progress_line_of_an_upsert_batch() -> None:
    clock = Clock(3000.0)
    m = JobMetrics(table="default.t", sink_id="s", mode="upsert", clock=clock)
    line = progress_line(m.record_batch(_upsert_stats(12, clock.now, [1.0] * 1500)))
    assert line == (
        "batch 12: 1,501 events: 5 upserts (3 new), 4 deletes (1 absent), 2 late, "
        "1 dead letters | write id 13 | lag ? | freshness p50 1.00s p99 1.00s | 0.70s"
    )
    # a batch without event times (nothing applied) shows no freshness
    empty = {**_upsert_stats(13, clock.now, []), "event_times_ms": None}
    assert "freshness p50 - p99 -" in progress_line(m.record_batch(empty))
    # bad events skipped without a dead-letter path are shown apart
    skipping = {**_upsert_stats(14, clock.now, [1.0]), "bad_records": 3, "dead_letters": 0}
    assert "0 dead letters (+3 bad skipped) |" in progress_line(m.record_batch(skipping))


def test_metrics_server_serves_only_metrics() -> None:
    m = JobMetrics(table="default.t", sink_id="s", mode="upsert")
    server = MetricsServer(m.registry, 0)
    try:
        url = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
            body = resp.read().decode()
            assert resp.headers["Content-Type"].startswith("text/plain")
        assert 'acidstream_job_info{mode="upsert",sink_id="s",table="default.t"} 1.0' in body
        assert "acidstream_job_deletes_total 0.0" in body
        assert "acidstream_job_seconds_since_last_commit " in body
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{url}/other", timeout=10)
        assert e.value.code == 404
    finally:
        server.stop()


@pytest.mark.kafka
def test_lag_probe_is_end_offsets_minus_the_committed_offsets(kafka_broker: Any) -> None:
    topic = f"lag_{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 2)
    kafka_broker.produce(topic, [b"a"] * 5, partition=0)
    kafka_broker.produce(topic, [b"b"] * 3, partition=1)
    probe = LagProbe(kafka_broker.bootstrap, topic, method="fetch")
    assert probe.refresh() == {(topic, 0): 5, (topic, 1): 3}  # nothing committed yet
    probe.set_committed({topic: {"0": 2}, "other": {"0": 100}})
    assert probe.refresh() == {(topic, 0): 3, (topic, 1): 3}
    kafka_broker.produce(topic, [b"c"] * 4, partition=1)
    assert probe.refresh(max_age_s=3600) == {(topic, 0): 3, (topic, 1): 3}  # the cached lookup
    assert probe.refresh() == {(topic, 0): 3, (topic, 1): 7}  # asked again
    probe.set_committed({topic: {"0": 5, "1": 7}})
    assert probe.refresh(max_age_s=3600) == {(topic, 0): 0, (topic, 1): 0}  # a commit re-asks
    assert probe.ok and probe.errors == 0


@pytest.mark.kafka
def test_lag_probe_keeps_the_last_lag_when_the_broker_is_gone(kafka_broker: Any) -> None:
    import socket
    import time

    topic = f"lag_{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 1)
    kafka_broker.produce(topic, [b"a"] * 4)
    probe = LagProbe(kafka_broker.bootstrap, topic, method="fetch")
    assert probe.refresh() == {(topic, 0): 4}
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        probe.bootstrap = f"127.0.0.1:{s.getsockname()[1]}"
    t0 = time.monotonic()
    assert probe.refresh() == {(topic, 0): 4}
    assert time.monotonic() - t0 < 8  # within a scrape timeout: one short attempt
    assert not probe.ok and probe.errors == 1
    m = JobMetrics(table="default.t", sink_id="s", mode="append", lag=probe)
    assert m.registry.get_sample_value("acidstream_job_consumer_lag_errors") == 2
    lag = m.registry.get_sample_value(
        "acidstream_job_consumer_lag", {"topic": topic, "partition": "0"}
    )
    assert lag == 4


def test_metrics_port_from_the_file_and_the_flag(tmp_path: Path) -> None:
    yml = tmp_path / "job.yaml"
    yml.write_text("table:\n  columns: 'id bigint'\njob:\n  metrics_port: 9108\n")
    assert KafkaJobConfig.load(yml, env={}).job.metrics_port == 9108
    flagged = KafkaJobConfig.load(yml, overrides={"job.metrics_port": 0}, env={})
    assert flagged.job.metrics_port == 0  # the flag wins; 0: off
    assert (
        KafkaJobConfig.load(None, overrides={"table.columns": "id bigint"}, env={}).job.metrics_port
        == 0
    )
    with pytest.raises(
        ConfigError, match=r"job.metrics_port must be 0..65535, got 70000 \(flag --metrics-port\)"
    ):
        KafkaJobConfig.load(yml, overrides={"job.metrics_port": 70000}, env={})
    yml.write_text("table:\n  columns: 'id bigint'\njob:\n  metrics_prot: 9108\n")
    with pytest.raises(ConfigError, match="metrics_prot"):
        KafkaJobConfig.load(yml, env={})
