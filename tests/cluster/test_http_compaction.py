"""Scenario 2: two HTTP ingest servers and one compactor on three hosts, one table.

``acidstream serve`` runs on hosts A and B, both writing ``default.events`` (PostgreSQL
metastore and S3 warehouse on the services host, by address); ``acidstream compactor``
runs on host C and compacts the table while the servers commit to it. Clients in the test
process send batches to both servers, each with an ``Idempotency-Key`` so a retried batch
is never written twice; the clients keep sending until the compactor has finished a
compaction and a little after. At the end every acknowledged record is in the table
exactly once.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
import yaml

import acidstream
from tests.cluster.conftest import Cluster, ClusterTest, python_argv
from tests.cluster.services import Proc, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.postgres, pytest.mark.slow]

PORT = 8000
BATCH = 50
SENDERS_PER_SERVER = 2
MAX_BATCHES_PER_SENDER = 400  # a bound on the loop; the compaction normally ends it sooner
REPLAY_EVERY = 10
AFTER_COMPACTION = 5  # batches each sender still sends once a compaction has finished
DELTA_THRESHOLD = 4  # compactorthreshold.hive.compactor.delta.num.threshold of the table


def _storage_flags(c: Cluster) -> list[str]:
    opts = c.storage_options()
    return [
        "--storage-option", f"endpoint_url={opts['endpoint_url']}",
        "--storage-option", f"key={opts['key']}",
        "--storage-option", f"secret={opts['secret']}",
        "--storage-option", "client_kwargs.region_name=us-east-1",
    ]  # fmt: skip


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class Sender(threading.Thread):
    """One client: batches of ``BATCH`` JSON records with ids of its own to one server.

    A batch is retried with its ``Idempotency-Key`` on 429/503 or a connection error, as
    a client of the HTTP source must; ``acked`` holds the ids of batches answered 200.
    Every ``REPLAY_EVERY``-th acknowledged batch is sent again, same key and body, to the
    *other* server (a client whose server went away retries elsewhere): the keys live in
    the shared metastore, so that server must answer it as a replay and write nothing.
    """

    def __init__(self, index: int, url: str, other: str, compacted: threading.Event) -> None:
        super().__init__(name=f"sender-{index}", daemon=True)
        self.index = index
        self.url = url
        self.other = other
        self.compacted = compacted
        self.acked: list[int] = []
        self.sent_batches = 0
        self.replayed = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        import httpx

        try:
            with httpx.Client(timeout=60) as client:
                after = 0
                for seq in range(MAX_BATCHES_PER_SENDER):
                    if self.compacted.is_set():
                        if after == AFTER_COMPACTION:
                            break
                        after += 1
                    first = self.index * 1_000_000 + seq * BATCH
                    ids = list(range(first, first + BATCH))
                    body = "\n".join(json.dumps({"id": i, "msg": f"m{i}"}) for i in ids)
                    key = f"s{self.index}-b{seq}"
                    self._send(client, self.url, body, key=key)
                    self.sent_batches += 1
                    self.acked += ids
                    if seq % REPLAY_EVERY == 0:
                        r = self._send(client, self.other, body, key=key)
                        assert r.headers.get("Idempotent-Replayed") == "true", r.headers
                        self.replayed += 1
        except BaseException as e:  # reported by the test, in its own thread
            self.error = e

    def _send(self, client: Any, url: str, body: str, *, key: str) -> Any:
        """POST until answered 200 (bounded); returns that response."""
        import httpx

        for _attempt in range(20):
            try:
                r = client.post(
                    url,
                    content=body.encode(),
                    headers={"Idempotency-Key": key, "Content-Type": "application/x-ndjson"},
                )
            except httpx.TransportError:
                time.sleep(0.2)
                continue
            if r.status_code == 200:
                return r
            if r.status_code in (409, 429, 503):  # 409: the same key still in flight
                time.sleep(float(r.headers.get("Retry-After", "0.2")))
                continue
            raise AssertionError(f"{url} answered {r.status_code}: {r.text[:500]}")
        raise AssertionError(f"{url}: batch {key} not acknowledged after 20 attempts")


def _finished_compactions(metastore: str) -> list[Any]:
    """The table's compactions that wrote their result (ready for cleaning or succeeded)."""
    from acidstream.txn.compaction_sql import READY_FOR_CLEANING, SUCCEEDED, CompactionQueue
    from acidstream.txn.store import open_store

    store = open_store(metastore, read_only=True)
    try:
        return [
            r
            for r in CompactionQueue(store).show()
            if r.table == "events" and r.state in (READY_FOR_CLEANING, SUCCEEDED)
        ]
    finally:
        store.close()


def _metastore_connections(c: Cluster) -> int:
    """Client connections to the metastore database right now (sizing figure)."""
    import psycopg

    with psycopg.connect(c.pg_root, connect_timeout=5) as conn:
        row = conn.execute(
            "select count(*) from pg_stat_activity where datname = 'metastore'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_two_ingest_servers_and_a_compactor_keep_every_acknowledged_record_once(
    cluster_test: ClusterTest,
) -> None:
    c = cluster_test.cluster
    common = ["--metastore", cluster_test.metastore, "--warehouse", cluster_test.warehouse]
    done = c.run(
        "c",
        python_argv(
            "-m", "acidstream", "create-table", "default.events", "id bigint, msg string",
            "--tblproperty", f"compactorthreshold.hive.compactor.delta.num.threshold={DELTA_THRESHOLD}",
            *common, *_storage_flags(c),
        ),
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    server_config: dict[str, Any] = {
        "listen": {"port": PORT},
        "metastore": cluster_test.metastore,
        "warehouse": cluster_test.warehouse,
        "storage_options": c.storage_options(),
        "tables": {"default.events": {"format": "json"}},
        "commit": {"max_delay_ms": 20},
    }
    cfg = cluster_test.scratch / "http.yaml"
    cfg.write_text(yaml.safe_dump(server_config))
    procs: list[Proc] = []
    try:
        for h in ("a", "b"):
            ip = c.hosts[h].ip
            procs.append(
                Proc(
                    c.hosts[h],
                    f"serve-{h}",
                    python_argv("-m", "acidstream", "serve", str(cfg), "--host", ip),
                    log_dir=cluster_test.scratch,
                )
            )
        procs.append(
            Proc(
                c.hosts["c"],
                "compactor",
                python_argv(
                    "-m", "acidstream", "compactor", *common, *_storage_flags(c),
                    "--check-interval", "1", "--cleaner-interval", "1", "--poll", "0.5",
                ),
                log_dir=cluster_test.scratch,
            )
        )  # fmt: skip
        for p in procs[:2]:
            ready = functools.partial(_ready, f"http://{p.host.ip}:{PORT}/readyz")
            wait_for(f"HTTP ingest server on {p.host.name}", ready, timeout=120, proc=p)

        compacted = threading.Event()
        url = {h: f"http://{c.hosts[h].ip}:{PORT}/v1/tables/default.events" for h in "ab"}
        senders = [
            Sender(i, url[h], url["b" if h == "a" else "a"], compacted)
            for i, h in enumerate(["a", "b"] * SENDERS_PER_SERVER)
        ]
        for s in senders:
            s.start()
        # The compactor is another process on another host: the metastore's compaction
        # history is the only signal there is; poll it while the senders run.
        deadline = time.monotonic() + 240
        t0 = time.monotonic()
        connections = 0
        while not compacted.is_set() and any(s.is_alive() for s in senders):
            connections = max(connections, _metastore_connections(c))
            if _finished_compactions(cluster_test.metastore):
                compacted.set()
            elif time.monotonic() > deadline:
                break
            else:
                time.sleep(0.5)
        compacted.set()  # the senders stop after AFTER_COMPACTION more batches either way
        for s in senders:
            s.join(timeout=300)
        for s in senders:
            assert not s.is_alive(), f"{s.name} still sending"
            assert s.error is None, f"{s.name}: {s.error!r}"
        compactions = _finished_compactions(cluster_test.metastore)
        assert compactions, "the compactor on host C finished no compaction: " + procs[2].tail()
        print(
            f"{sum(s.sent_batches for s in senders)} batches of {BATCH} acknowledged "
            f"({[s.sent_batches for s in senders]} per sender, "
            f"{sum(s.replayed for s in senders)} replays on the other server) in "
            f"{time.monotonic() - t0:.1f}s; {len(compactions)} compaction(s) finished; "
            f"at most {connections} metastore connections seen (the test's poll included)"
        )
    finally:
        for p in procs:
            with contextlib.suppress(Exception):
                p.stop()  # SIGTERM: a server drains (commits and answers) before exiting

    # The compaction is host C's: the servers run no compactor, and C's process said so.
    compactor_log = procs[2].log_path.read_text(errors="replace")
    assert re.search(r"compaction \d+ (major|minor) default\.events: ", compactor_log), (
        compactor_log[-2000:]
    )
    print("compactor on host c:", compactor_log.strip().splitlines()[-3:])
    acked = sorted(i for s in senders for i in s.acked)
    assert len(acked) == len(set(acked))
    # Every sender's batches were acknowledged (writes went on after the first compaction
    # finished) and its replays on the other server were answered as replays.
    assert all(s.sent_batches > AFTER_COMPACTION for s in senders), [
        s.sent_batches for s in senders
    ]
    assert all(s.replayed >= 1 for s in senders)
    table = acidstream.read_table(
        "default.events",
        metastore=cluster_test.metastore,
        warehouse=cluster_test.warehouse,
        storage_options=c.storage_options(),
    )
    ids = sorted(table.column("id").to_pylist())
    assert ids == acked  # every acknowledged record once, and nothing else
    import s3fs  # type: ignore[import-untyped]

    files = s3fs.S3FileSystem(**c.storage_options()).find(f"{cluster_test.bucket}/warehouse")
    assert any("/base_" in f for f in files), files  # the major compaction's result is on S3
