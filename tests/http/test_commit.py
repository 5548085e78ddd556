"""Group commit, acknowledgements, backpressure and drain, against a real server process on
both metastore backends."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from acidstream.txn.store import open_store
from tests.http.conftest import (
    ServerProcess,
    base_config,
    create_table,
    jsonl,
    open_txns,
    read_ids,
)

NDJSON = {"Content-Type": "application/x-ndjson"}
Factory = Callable[..., ServerProcess]


def test_concurrent_clients_on_several_tables_every_acked_record_once(
    store_url: str, warehouse: str, server_factory: Factory
) -> None:
    tables = ["a", "b", "c"]
    with open_store(store_url, warehouse=warehouse) as s:
        for t in tables:
            create_table(s, t)
    cfg = base_config(store_url, warehouse, {f"default.{t}": {"format": "json"} for t in tables})
    srv = server_factory(cfg)
    clients, requests, lines = 9, 8, 40
    acked: dict[str, list[int]] = {t: [] for t in tables}
    write_ids: dict[str, set[int]] = {t: set() for t in tables}

    async def client(c: int) -> None:
        table = tables[c % len(tables)]
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as http:
            for r in range(requests):
                first = (c * requests + r) * lines
                ids = list(range(first, first + lines))
                resp = await http.post(
                    f"/v1/tables/default.{table}", content=jsonl(ids), headers=NDJSON
                )
                assert resp.status_code == 200, resp.text
                assert resp.json()["accepted"] == lines
                acked[table].extend(ids)
                write_ids[table].update(resp.json()["write_ids"])

    async def run_all() -> None:
        await asyncio.gather(*(client(c) for c in range(clients)))

    asyncio.run(run_all())
    for t in tables:
        got = read_ids(store_url, warehouse, t)
        assert got == sorted(acked[t])  # every acknowledged record, exactly once
        assert len(got) == len(set(got)) == clients // len(tables) * requests * lines
    assert open_txns(store_url, warehouse) == []


def _windowed_server(
    store_url: str, warehouse: str, server_factory: Factory, table: str, window_ms: float
) -> ServerProcess:
    """A server for a new table ``default.<table>`` whose groups wait ``window_ms``."""
    with open_store(store_url, warehouse=warehouse) as s:
        create_table(s, table)
    commit = {"max_delay_ms": window_ms}
    return server_factory(
        base_config(store_url, warehouse, {f"default.{table}": {}}, commit=commit)
    )


def test_requests_within_the_window_share_one_txn(
    store_url: str, warehouse: str, server_factory: Factory
) -> None:
    window_ms = 1500
    srv = _windowed_server(store_url, warehouse, server_factory, "g", window_ms)

    async def run_all() -> list[tuple[httpx.Response, float]]:
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as http:

            async def one(i: int) -> tuple[httpx.Response, float]:
                t0 = time.monotonic()
                r = await http.post("/v1/tables/default.g", content=jsonl([i]), headers=NDJSON)
                return r, time.monotonic() - t0

            return await asyncio.gather(*(one(i) for i in range(5)))

    results = asyncio.run(run_all())
    assert all(r.status_code == 200 for r, _ in results)
    assert len({tuple(r.json()["write_ids"]) for r, _ in results}) == 1  # one txn for all five
    # Acknowledged only when the group committed: after the window, not before.
    assert min(dt for _, dt in results) >= window_ms / 1000 * 0.8
    assert read_ids(store_url, warehouse, "g") == [0, 1, 2, 3, 4]
    metrics = httpx.get(f"{srv.url}/metrics").text
    assert 'acidstream_http_commits_total{result="committed",table="default.g"} 1.0' in metrics


def test_rows_that_come_within_the_window_are_encoded_before_it_closes(
    store_url: str, warehouse: str, server_factory: Factory
) -> None:
    window_ms = 1500
    srv = _windowed_server(store_url, warehouse, server_factory, "e", window_ms)
    per, n = 3000, 3  # 9,000 rows: past the early mark (4,096) while the window is open

    async def run_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as http:
            ids = [list(range(i * per, (i + 1) * per)) for i in range(n)]
            return await asyncio.gather(
                *(http.post("/v1/tables/default.e", content=jsonl(x), headers=NDJSON) for x in ids)
            )

    t0 = time.monotonic()
    results = asyncio.run(run_all())
    assert all(r.status_code == 200 for r in results)
    assert len({tuple(r.json()["write_ids"]) for r in results}) == 1  # still one txn
    assert time.monotonic() - t0 >= window_ms / 1000 * 0.8  # answered after the window
    metrics = httpx.get(f"{srv.url}/metrics").text
    assert 'acidstream_http_early_encoded_rows_total{table="default.e"} 9000.0' in metrics
    assert read_ids(store_url, warehouse, "e") == list(range(per * n))


def test_commit_queue_full_is_429_with_retry_after(tmp_path: Path, server_factory: Factory) -> None:
    store_url, warehouse = f"sqlite:///{tmp_path}/m.db", str(tmp_path / "wh")
    with open_store(store_url, warehouse=warehouse) as s:
        create_table(s, "q")
    cfg = base_config(
        store_url,
        warehouse,
        {"default.q": {}},
        commit={"max_delay_ms": 2000},
        limits={"max_queue_requests": 2, "retry_after_s": 3},
    )
    srv = server_factory(cfg)

    async def run_all() -> tuple[list[httpx.Response], httpx.Response]:
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as http:
            waiting = [
                asyncio.create_task(
                    http.post("/v1/tables/default.q", content=jsonl([i]), headers=NDJSON)
                )
                for i in range(2)
            ]
            # Both are queued once the gauge says so (they wait out the 2 s window).
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                m = (await http.get("/metrics")).text
                if 'acidstream_http_commit_queue_requests{table="default.q"} 2.0' in m:
                    break
                await asyncio.sleep(0.02)
            third = await http.post("/v1/tables/default.q", content=jsonl([9]), headers=NDJSON)
            return list(await asyncio.gather(*waiting)), third

    firsts, third = asyncio.run(run_all())
    assert third.status_code == 429 and third.headers["retry-after"] == "3"
    assert third.headers["content-type"].startswith("application/problem+json")
    assert [r.status_code for r in firsts] == [200, 200]
    assert read_ids(store_url, warehouse, "q") == [0, 1]


def _stalled_request(url: str, *, length: int, sent: bytes) -> socket.socket:
    """A client that announces ``length`` body bytes, sends ``sent`` and stalls."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    head = (
        f"POST /v1/tables/default.s HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/x-ndjson\r\nContent-Length: {length}\r\n\r\n"
    )
    sock.sendall(head.encode() + sent)
    return sock


def test_inflight_bytes_limit_is_503_and_a_stalled_client_times_out_holding_no_txn(
    tmp_path: Path, server_factory: Factory
) -> None:
    store_url, warehouse = f"sqlite:///{tmp_path}/m.db", str(tmp_path / "wh")
    with open_store(store_url, warehouse=warehouse) as s:
        create_table(s, "s")
    cfg = base_config(
        store_url,
        warehouse,
        {"default.s": {}},
        limits={"max_body_bytes": 900, "max_inflight_bytes": 1000, "body_timeout_s": 2},
    )
    srv = server_factory(cfg)
    stalled = _stalled_request(srv.url, length=800, sent=b'{"id":1,')
    http = httpx.Client(base_url=srv.url, timeout=30)
    try:
        # The stalled request holds 800 of the 1000 bytes: 300 more do not fit.
        deadline = time.monotonic() + 10
        while "acidstream_http_inflight_bytes 800.0" not in http.get("/metrics").text:
            assert time.monotonic() < deadline
        body = jsonl(range(20))[:300]
        body = body[: body.rfind(b"\n") + 1]
        r = http.post("/v1/tables/default.s", content=body, headers=NDJSON)
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        assert open_txns(store_url, warehouse) == []  # the slow client holds no txn
        stalled.settimeout(30)
        answer = stalled.recv(4096).decode()  # the server gives up on it: 408
        assert answer.startswith("HTTP/1.1 408"), answer
        r = http.post("/v1/tables/default.s", content=body, headers=NDJSON)
        assert r.status_code == 200, r.text
        assert "acidstream_http_inflight_bytes 0.0" in http.get("/metrics").text
        assert (
            'acidstream_http_backpressure_total{reason="inflight_bytes"} 1.0'
            in http.get("/metrics").text
        )
    finally:
        stalled.close()
        http.close()
    assert read_ids(store_url, warehouse, "s") == list(range(len(body.splitlines())))


def test_sigterm_commits_and_answers_pending_requests_then_exits(
    store_url: str, warehouse: str, server_factory: Factory
) -> None:
    with open_store(store_url, warehouse=warehouse) as s:
        create_table(s, "d")
    window_s = 20.0  # far longer than the test: only the drain can close the group
    cfg = base_config(
        store_url, warehouse, {"default.d": {}}, commit={"max_delay_ms": window_s * 1000}
    )
    srv = server_factory(cfg)

    async def run_all() -> list[Any]:
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as http:
            t0 = time.monotonic()
            tasks = [
                asyncio.create_task(
                    http.post("/v1/tables/default.d", content=jsonl([i]), headers=NDJSON)
                )
                for i in range(4)
            ]
            deadline = time.monotonic() + 10
            while (
                'acidstream_http_commit_queue_requests{table="default.d"} 4.0'
                not in (await http.get("/metrics")).text
            ):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            code = await asyncio.to_thread(srv.terminate)
            results = await asyncio.gather(*tasks)
            return [code, results, time.monotonic() - t0]

    code, results, took = asyncio.run(run_all())
    assert code == 0
    assert [r.status_code for r in results] == [200] * 4
    assert took < window_s / 2
    assert read_ids(store_url, warehouse, "d") == [0, 1, 2, 3]
    assert open_txns(store_url, warehouse) == []
