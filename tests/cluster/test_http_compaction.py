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
    """

    def __init__(self, index: int, url: str, compacted: threading.Event) -> None:
        super().__init__(name=f"sender-{index}", daemon=True)
        self.index = index
        self.url = url
        self.compacted = compacted
        self.acked: list[int] = []
        self.sent_batches = 0
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
                    self._send(client, body, key=f"s{self.index}-b{seq}")
                    self.sent_batches += 1
                    self.acked += ids
        except BaseException as e:  # reported by the test, in its own thread
            self.error = e

    def _send(self, client: Any, body: str, *, key: str) -> None:
        import httpx

        for _attempt in range(20):
            try:
                r = client.post(
                    self.url,
                    content=body.encode(),
                    headers={"Idempotency-Key": key, "Content-Type": "application/x-ndjson"},
                )
            except httpx.TransportError:
                time.sleep(0.2)
                continue
            if r.status_code == 200:
                return
            if r.status_code in (429, 503):
                time.sleep(float(r.headers.get("Retry-After", "0.2")))
                continue
            raise AssertionError(f"{self.url} answered {r.status_code}: {r.text[:500]}")
        raise AssertionError(f"{self.url}: batch {key} not acknowledged after 20 attempts")


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
        senders = [
            Sender(i, f"http://{c.hosts[h].ip}:{PORT}/v1/tables/default.events", compacted)
            for i, h in enumerate(["a", "b"] * SENDERS_PER_SERVER)
        ]
        for s in senders:
            s.start()
        # The compactor is another process on another host: the metastore's compaction
        # history is the only signal there is; poll it while the senders run.
        deadline = time.monotonic() + 240
        while not compacted.is_set() and any(s.is_alive() for s in senders):
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
    finally:
        for p in procs:
            with contextlib.suppress(Exception):
                p.stop()  # SIGTERM: a server drains (commits and answers) before exiting

    acked = sorted(i for s in senders for i in s.acked)
    assert len(acked) == len(set(acked))
    # Both servers took batches, and writes went on after the first compaction finished.
    assert all(s.sent_batches > AFTER_COMPACTION for s in senders), [
        s.sent_batches for s in senders
    ]
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
