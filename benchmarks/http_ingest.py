"""HTTP ingest benchmark: ``acidstream serve`` vs StreamingConnection in one process vs the HTTP floor.

Prints, in one run on this machine (embedded SQLite metastore, local warehouse):
  * 8 concurrent clients posting 1,000-line JSON requests to the server: records/s and
    p50/p99 acknowledgement latency;
  * the same records written directly through one StreamingConnection in one process
    (``write_block`` per 1,000 lines, a commit every 8 blocks: the txn size of a full group);
    target: the server >= 0.6x of this rate;
  * the same requests to a server that reads and splits the body and answers 200 without
    writing (uvicorn + Starlette alone: the HTTP floor);
  * 200 clients posting 10-line requests: commits/s (bounded by the group-commit window)
    and p99 latency (target: within the window + 250 ms), and the HTTP floor's latency
    under the same load (what the stack alone costs on this machine).

Latencies are steady-state: every client connects with one untimed request first.

The server runs in its own process (``python -m acidstream.cli.serve_cmds``), the clients
(httpx, asyncio) in this one; both share the machine's cores.

Usage: python benchmarks/http_ingest.py [--requests 40] [--small-requests 10] [--window-ms 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from acidstream.acid.schema import TableSchema
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = "id bigint, user_name string, amount double, ts string"
LISTENING = "acidstream serve: listening on "
NDJSON = {"Content-Type": "application/x-ndjson"}


def body(first: int, n: int) -> bytes:
    return b"".join(
        b'{"id":%d,"user_name":"user-%d","amount":%d.25,"ts":"2026-11-23T12:00:00"}\n'
        % (i, i % 997, i % 1000)
        for i in range(first, first + n)
    )


def make_table(store_url: str, warehouse: str, name: str) -> None:
    cols = tuple((n, str(t)) for n, t in TableSchema.parse(COLUMNS).columns)
    with open_store(store_url, warehouse=warehouse) as s:
        s.create_table(
            TableDef(db="default", name=name, columns=cols, parameters={"transactional": "true"})
        )


def start(cmd: list[str], log: Path) -> tuple[subprocess.Popen[str], str]:
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(LISTENING):
            url = line.strip()[len(LISTENING) :]
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return proc, url
    raise RuntimeError(f"server did not start: {log.read_text()[-2000:]}")


def start_server(tmp: Path, store_url: str, warehouse: str, window_ms: float, table: str) -> tuple[subprocess.Popen[str], str]:  # fmt: skip
    cfg = {
        "listen": {"host": "127.0.0.1", "port": 0},
        "metastore": store_url,
        "warehouse": warehouse,
        "tables": {f"default.{table}": {"format": "json"}},
        "commit": {"max_delay_ms": window_ms},
        "limits": {"max_queue_requests": 10_000},
        "log_level": "warning",
    }
    path = tmp / f"{table}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    cmd = [sys.executable, "-m", "acidstream.cli.serve_cmds", str(path)]
    return start(cmd, tmp / f"{table}.log")


def floor_app() -> Any:
    """Reads and splits the body, answers 200: the HTTP stack without any writing."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def post(request: Request) -> JSONResponse:
        data = await request.body()
        n = sum(1 for line in data.split(b"\n") if line)
        return JSONResponse({"accepted": n, "rejected": 0, "write_ids": [0]})

    return Starlette(routes=[Route("/v1/tables/{name}", post, methods=["POST"])])


def serve_floor() -> None:
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)  # connections queue until uvicorn accepts them
    print(f"{LISTENING}http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(floor_app(), log_level="warning")).run(sockets=[sock])


class RawClient:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams: the load generator.

    httpx's pool costs milliseconds per request with hundreds of connections on this
    machine, which would measure the client; this costs little and speaks plain
    HTTP/1.1 with Content-Length (the server is uvicorn, unchanged)."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, data: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\n"
            f"Content-Type: application/x-ndjson\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        await self.writer.drain()
        status_line = await self.reader.readline()
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            k, _, v = line.decode().partition(":")
            if k.strip().lower() == "content-length":
                length = int(v)
        payload = await self.reader.readexactly(length)
        return int(status_line.split()[1]), payload

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def drive(url: str, table: str, clients: int, requests: int, lines: int) -> dict[str, float]:
    """``clients`` concurrent clients, each posting ``requests`` requests of ``lines`` lines.

    Each client first opens its connection with one untimed request (its records are
    extra), and the timed run starts when every client is connected: the figures are
    steady-state keep-alive latencies, not a connection storm."""
    latencies: list[float] = []
    bodies = [[body((c * requests + r) * lines, lines) for r in range(requests)] for c in range(clients)]  # fmt: skip
    ready = 0
    go = asyncio.Event()
    path = f"/v1/tables/default.{table}"

    async def client(c: int) -> None:
        nonlocal ready
        http = RawClient(url)
        try:
            status, payload = await http.post(path, body(10**9 + c * lines, lines))
            if status != 200:
                raise RuntimeError(f"{status}: {payload[:300]!r}")
            ready += 1
            if ready == clients:
                go.set()
            await go.wait()
            for b in bodies[c]:
                t0 = time.perf_counter()
                status, payload = await http.post(path, b)
                latencies.append(time.perf_counter() - t0)
                if status != 200:
                    raise RuntimeError(f"{status}: {payload[:300]!r}")
        finally:
            await http.close()

    tasks = [asyncio.create_task(client(c)) for c in range(clients)]
    await go.wait()
    t0 = time.perf_counter()
    await asyncio.gather(*tasks)
    secs = time.perf_counter() - t0
    latencies.sort()
    return {
        "secs": secs,
        "records_per_s": clients * requests * lines / secs,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
    }


def commits(url: str, table: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    key = f'acidstream_http_commits_total{{result="committed",table="default.{table}"}}'
    for line in text.splitlines():
        if line.startswith(key):
            return float(line.split()[-1])
    return 0.0


def direct(store_url: str, warehouse: str, table: str, clients: int, requests: int, lines: int) -> dict[str, float]:  # fmt: skip
    blocks = [body(i * lines, lines).splitlines() for i in range(clients * requests)]
    store = open_store(store_url, warehouse=warehouse)
    opts = StreamingOptions(housekeeping_interval_s=None)
    t0 = time.perf_counter()
    with StreamingConnection(f"default.{table}", record_writer=StrictJsonWriter(), store=store, options=opts) as conn:  # fmt: skip
        for i, block in enumerate(blocks):
            if i % clients == 0:
                conn.begin_transaction()
            res = conn.write_block(block)
            assert not res.rejected
            if i % clients == clients - 1 or i == len(blocks) - 1:
                conn.commit_transaction()
    secs = time.perf_counter() - t0
    store.close()
    return {"secs": secs, "records_per_s": len(blocks) * lines / secs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--requests", type=int, default=40, help="1,000-line requests per client (8 clients)")  # fmt: skip
    ap.add_argument("--small-requests", type=int, default=10, help="10-line requests per client (200 clients)")  # fmt: skip
    ap.add_argument("--window-ms", type=float, default=100.0, help="group-commit window of the small-request run")  # fmt: skip
    ap.add_argument("--serve-floor", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_floor:
        serve_floor()
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="acid_http_bench_"))
    warehouse = str(tmp / "warehouse")
    store_url = f"sqlite:///{tmp}/metastore.db"
    procs: list[subprocess.Popen[str]] = []
    out: dict[str, Any] = {"cpus": os.cpu_count()}
    try:
        for t in ("direct", "big", "small"):
            make_table(store_url, warehouse, t)
        clients, lines = 8, 1000
        out["direct"] = direct(store_url, warehouse, "direct", clients, args.requests, lines)
        proc, url = start_server(tmp, store_url, warehouse, 20.0, "big")
        procs.append(proc)
        asyncio.run(drive(url, "big", clients, 2, lines))  # warm-up
        c0 = commits(url, "big")
        out["server"] = asyncio.run(drive(url, "big", clients, args.requests, lines))
        out["server"]["commits"] = commits(url, "big") - c0
        proc.terminate()
        proc.wait(60)
        fproc, furl = start([sys.executable, __file__, "--serve-floor"], tmp / "floor.log")
        procs.append(fproc)
        asyncio.run(drive(furl, "big", clients, 2, lines))
        out["floor"] = asyncio.run(drive(furl, "big", clients, args.requests, lines))
        out["floor_small"] = asyncio.run(drive(furl, "small", 200, args.small_requests, 10))
        fproc.terminate()
        fproc.wait(60)
        proc, url = start_server(tmp, store_url, warehouse, args.window_ms, "small")
        procs.append(proc)
        c0 = commits(url, "small")
        small = asyncio.run(drive(url, "small", 200, args.small_requests, 10))
        small["commits"] = commits(url, "small") - c0
        small["commits_per_s"] = small["commits"] / small["secs"]
        small["window_ms"] = args.window_ms
        out["small"] = small
        proc.terminate()
        proc.wait(60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    d, s, f, sm = out["direct"], out["server"], out["floor"], out["small"]
    print(f"8 clients x {args.requests} x 1,000-line JSON requests ({8 * args.requests * 1000:,} records)")  # fmt: skip
    print(f"  direct StreamingConnection : {d['records_per_s']:>10,.0f} records/s")
    print(f"  acidstream serve           : {s['records_per_s']:>10,.0f} records/s  p50 {s['p50_ms']:.0f} ms  p99 {s['p99_ms']:.0f} ms  ({s['commits']:.0f} commits)  = {s['records_per_s'] / d['records_per_s']:.2f}x direct (target >= 0.6x)")  # fmt: skip
    print(f"  HTTP floor (no writing)    : {f['records_per_s']:>10,.0f} records/s  p50 {f['p50_ms']:.0f} ms  p99 {f['p99_ms']:.0f} ms")  # fmt: skip
    fs = out["floor_small"]
    print(f"200 clients x {args.small_requests} x 10-line requests, window {args.window_ms:g} ms")
    print(f"  HTTP floor (no writing): {fs['records_per_s']:,.0f} records/s, p50 {fs['p50_ms']:.0f} ms, p99 {fs['p99_ms']:.0f} ms")  # fmt: skip
    print(f"  {sm['records_per_s']:,.0f} records/s, {sm['commits']:.0f} commits = {sm['commits_per_s']:.1f} commits/s (bound {1000 / args.window_ms:.1f}/s), p50 {sm['p50_ms']:.0f} ms, p99 {sm['p99_ms']:.0f} ms (target <= {args.window_ms + 250:.0f} ms)")  # fmt: skip
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
