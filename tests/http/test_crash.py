"""Crashes: kill -9 of the server under load while clients retry with idempotency keys, and
crashes injected just before and just after a commit. After a restart every acknowledged
record is in the table exactly once and nothing unacknowledged is visible."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from acidstream.acid import faults
from acidstream.txn.store import open_store
from tests.http.conftest import (
    ServerProcess,
    base_config,
    create_table,
    jsonl,
    open_txns,
    read_ids,
    write_config,
)

NDJSON = {"Content-Type": "application/x-ndjson"}
RETRYABLE = {409, 429, 503}
pytestmark = pytest.mark.chaos
Factory = Callable[..., ServerProcess]
TXN_TIMEOUT_S = 2  # the killed server's txns are aborted within this plus one interval


def _config(store_url: str, warehouse: str, tables: list[str]) -> dict[str, object]:
    return base_config(
        store_url,
        warehouse,
        {f"default.{t}": {} for t in tables},
        txn_timeout_s=TXN_TIMEOUT_S,
        housekeeping_interval_s=0.5,
    )


class Target:
    """Where the clients send requests; changes when the server is restarted."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.lock = threading.Lock()


async def _post_until_acked(
    target: Target, table: str, body: bytes, key: str, give_up_s: float = 60.0
) -> httpx.Response:
    """A client that retries (connection errors, 409/429/503) with the same key."""
    deadline = time.monotonic() + give_up_s
    while True:
        assert time.monotonic() < deadline, f"request {key} was never acknowledged"
        try:
            async with httpx.AsyncClient(base_url=target.url, timeout=30) as http:
                r = await http.post(
                    f"/v1/tables/default.{table}",
                    content=body,
                    headers={**NDJSON, "Idempotency-Key": key},
                )
        except httpx.TransportError:
            await asyncio.sleep(0.1)
            continue
        if r.status_code in RETRYABLE:
            await asyncio.sleep(min(float(r.headers.get("retry-after", "1")), 0.3))
            continue
        assert r.status_code == 200, r.text
        return r


@pytest.mark.slow
def test_kill9_under_load_then_restart_every_acked_record_once(
    store_url: str, warehouse: str, tmp_path: Path, server_factory: Factory
) -> None:
    tables = ["k1", "k2"]
    with open_store(store_url, warehouse=warehouse) as s:
        for t in tables:
            create_table(s, t)
    cfg = _config(store_url, warehouse, tables)
    first = server_factory(cfg)
    target = Target(first.url)
    clients, requests, lines = 6, 12, 25
    acked: dict[str, list[int]] = {t: [] for t in tables}
    sent: dict[str, list[int]] = {t: [] for t in tables}
    replays = 0
    enough = threading.Event()  # set once some requests were acknowledged

    async def client(c: int) -> None:
        nonlocal replays
        table = tables[c % 2]
        for r in range(requests):
            base = (c * requests + r) * lines
            ids = list(range(base, base + lines))
            sent[table].extend(ids)
            resp = await _post_until_acked(target, table, jsonl(ids), f"c{c}-r{r}")
            acked[table].extend(ids)
            replays += resp.headers.get("idempotent-replayed") == "true"
            if sum(len(v) for v in acked.values()) >= clients * lines * 2:
                enough.set()

    def chaos() -> None:
        assert enough.wait(60)
        first.kill()  # SIGKILL under load: no drain, txns left open
        seen = {t: read_ids(store_url, warehouse, t) for t in tables}
        for t in tables:
            # Nothing but what was sent; every acknowledged record is there, once.
            assert set(seen[t]) <= set(sent[t])
            assert len(seen[t]) == len(set(seen[t]))
        second = ServerProcess(
            write_config(tmp_path / "restart.yaml", cfg), tmp_path / "restart.log", None
        )
        target.url = second.start()
        restarted.append(second)

    restarted: list[ServerProcess] = []

    async def run_all() -> None:
        chaos_task = asyncio.create_task(asyncio.to_thread(chaos))
        await asyncio.gather(*(client(c) for c in range(clients)))
        await chaos_task

    try:
        asyncio.run(run_all())
        for t in tables:
            got = read_ids(store_url, warehouse, t)
            assert got == sorted(acked[t]) == sorted(sent[t])  # each exactly once
        # The killed server's open txns are aborted by the new server's housekeeper.
        deadline = time.monotonic() + TXN_TIMEOUT_S * 10
        while open_txns(store_url, warehouse):
            assert time.monotonic() < deadline, "the dead server's txns were never aborted"
            time.sleep(0.2)
    finally:
        for s in restarted:
            s.kill()


def _one_table(store_url: str, warehouse: str, name: str) -> None:
    with open_store(store_url, warehouse=warehouse) as s:
        create_table(s, name)


def test_crash_before_commit_leaves_nothing_visible_and_the_retry_lands_once(
    store_url: str, warehouse: str, server_factory: Factory
) -> None:
    _one_table(store_url, warehouse, "b")
    cfg = _config(store_url, warehouse, ["b"])
    doomed = server_factory(cfg, env={faults.ENV: "batch.before_commit"})
    body = jsonl(range(10))
    with pytest.raises(httpx.TransportError):  # the server dies before it commits
        httpx.post(
            f"{doomed.url}/v1/tables/default.b",
            content=body,
            headers={**NDJSON, "Idempotency-Key": "once"},
            timeout=30,
        )
    doomed.wait_dead()
    assert read_ids(store_url, warehouse, "b") == []  # written, not committed: not visible
    assert open_txns(store_url, warehouse)  # left open by the dead server
    srv = server_factory(cfg)
    r = asyncio.run(_post_until_acked(Target(srv.url), "b", body, "once"))
    assert r.headers.get("idempotent-replayed") is None  # written now, for the first time
    assert read_ids(store_url, warehouse, "b") == list(range(10))


def test_crash_after_commit_the_retry_is_answered_from_the_commit(
    store_url: str, warehouse: str, server_factory: Factory
) -> None:
    _one_table(store_url, warehouse, "a")
    cfg = _config(store_url, warehouse, ["a"])
    doomed = server_factory(cfg, env={faults.ENV: "batch.after_commit"})
    body = jsonl(range(10))
    with pytest.raises(httpx.TransportError):  # committed, then dead before answering
        httpx.post(
            f"{doomed.url}/v1/tables/default.a",
            content=body,
            headers={**NDJSON, "Idempotency-Key": "k"},
            timeout=30,
        )
    doomed.wait_dead()
    assert read_ids(store_url, warehouse, "a") == list(range(10))
    srv = server_factory(cfg)  # a new process: the answer comes from the metastore
    r = httpx.post(
        f"{srv.url}/v1/tables/default.a",
        content=body,
        headers={**NDJSON, "Idempotency-Key": "k"},
        timeout=30,
    )
    assert r.status_code == 200 and r.headers["idempotent-replayed"] == "true"
    assert r.json()["accepted"] == 10
    assert read_ids(store_url, warehouse, "a") == list(range(10))  # not written again
    other = httpx.post(
        f"{srv.url}/v1/tables/default.a",
        content=jsonl([99]),
        headers={**NDJSON, "Idempotency-Key": "k"},
        timeout=30,
    )
    assert other.status_code == 422
