"""Issue 28's refusals of the HTTP ingest server: a request head too large, with too many
fields or too slow (431/408, the memory it holds bounded); a Flume body nested too deeply,
a repeated or unknown query parameter, a gzip body with trailing bytes, a static partition
value its column cannot hold (400, nothing written); settings that can never serve (an
invalid regex or delimiter, no tables) refused at start in one line."""

from __future__ import annotations

import gzip
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from acidstream.txn.store import open_store
from tests.http.conftest import (
    ROOT,
    ServerProcess,
    base_config,
    create_table,
    jsonl,
    problem,
    read_ids,
    write_config,
)

NDJSON = {"Content-Type": "application/x-ndjson"}


class Env:
    def __init__(self, proc: ServerProcess, store_url: str, warehouse: str) -> None:
        self.proc, self.store_url, self.warehouse = proc, store_url, warehouse
        self.url = proc.url
        host, _, port = proc.url.removeprefix("http://").rpartition(":")
        self.addr = (host, int(port))
        self.client = httpx.Client(base_url=proc.url, timeout=60)

    def post(self, table: str, body: bytes, **kw: Any) -> httpx.Response:
        headers = {**NDJSON, **kw.pop("headers", {})}
        return self.client.post(f"/v1/tables/{table}", content=body, headers=headers, **kw)

    def ids(self, table: str) -> list[int]:
        return read_ids(self.store_url, self.warehouse, table)

    def peak_rss_kib(self) -> int:
        """The server process's peak resident set (``VmHWM``)."""
        assert self.proc.proc is not None
        status = Path(f"/proc/{self.proc.proc.pid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
        return int(line.split()[1])

    def log(self) -> str:
        return self.proc.log_path.read_text()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """One server with the default limits (so the same test runs against older code)."""
    tmp: Path = tmp_path_factory.mktemp("http_hardening")
    warehouse = str(tmp / "warehouse")
    store_url = f"sqlite:///{tmp}/metastore.db"
    with open_store(store_url, warehouse=warehouse) as s:
        for name in ("plain", "gz", "flume"):
            create_table(s, name)
        create_table(s, "parted", partitioned_by=[("ds", "string")])
        create_table(s, "hourly", partitioned_by=[("h", "int")])
    tables = {
        f"default.{n}": {"format": "json"} for n in ("plain", "gz", "flume", "parted", "hourly")
    }
    cfg = base_config(store_url, warehouse, tables, flume={"default_table": "default.flume"})
    proc = ServerProcess(write_config(tmp / "cfg.yaml", cfg), tmp / "server.log", None)
    proc.start()
    e = Env(proc, store_url, warehouse)
    try:
        yield e
    finally:
        e.client.close()
        proc.kill()


def raw_exchange(addr: tuple[str, int], head: bytes, *, timeout_s: float = 60.0) -> bytes:
    """Send ``head`` on a new connection and read the answer until the server closes."""
    with socket.create_connection(addr, timeout=timeout_s) as s:
        s.sendall(head)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


# ---------------------------------------------------------------------- item 5: the head
def test_a_header_over_the_size_limit_is_431_and_nothing_is_written(env: Env) -> None:
    r = env.post("default.plain", jsonl([1]), headers={"X-Big": "a" * (70 << 10)})
    body = problem(r, 431)
    assert "limits.max_header_bytes" in body["detail"]
    assert r.headers.get("connection") == "close"
    assert env.ids("plain") == []
    # The server goes on serving.
    assert env.post("default.plain", jsonl([2])).status_code == 200
    assert env.ids("plain") == [2]
    assert "refused a request from" in env.log() and "431" in env.log()
    metrics = env.client.get("/metrics").text
    assert 'acidstream_http_connection_refusals_total{status="431"}' in metrics


def test_more_header_fields_than_the_limit_is_431(env: Env) -> None:
    many = {f"X-H{i}": "v" for i in range(120)}
    body = problem(env.post("default.plain", jsonl([3]), headers=many), 431)
    assert "limits.max_headers" in body["detail"]
    assert 3 not in env.ids("plain")


def test_a_256_mib_header_is_refused_without_holding_it(env: Env) -> None:
    """The issue's request: one 256 MiB header was held whole (peak RSS +400 MB) and
    answered 200. Now the head is refused at 64 KiB, and the server's peak resident set
    grows by less than 16 MiB."""
    env.post("default.plain", jsonl([4]))  # warm: the first request's allocations
    before = env.peak_rss_kib()
    head = (
        b"POST /v1/tables/default.plain HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/x-ndjson\r\nContent-Length: 19\r\nX-Big: "
    )
    chunk = b"a" * (1 << 20)
    with socket.create_connection(env.addr, timeout=60) as s:
        stop = threading.Event()

        def send() -> None:
            try:
                s.sendall(head)
                for _ in range(256):
                    if stop.is_set():
                        return
                    s.sendall(chunk)
                s.sendall(b"\r\n\r\n" + jsonl([5]))
            except OSError:
                pass  # the server closed the connection after its answer

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        answer = b""
        try:
            while part := s.recv(65536):
                answer += part
        finally:
            stop.set()
            sender.join(60)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    grown_mib = (env.peak_rss_kib() - before) / 1024
    assert grown_mib < 16, f"peak RSS grew by {grown_mib:.0f} MiB"
    assert 5 not in env.ids("plain")


def test_a_head_that_trickles_in_is_408_and_a_silent_connection_is_closed(
    tmp_path: Path, server_factory: Callable[..., ServerProcess]
) -> None:
    warehouse = str(tmp_path / "warehouse")
    store_url = f"sqlite:///{tmp_path}/metastore.db"
    with open_store(store_url, warehouse=warehouse) as s:
        create_table(s, "t")
    cfg = base_config(store_url, warehouse, {"default.t": {}}, limits={"header_timeout_s": 1})
    proc = server_factory(cfg)
    host, _, port = proc.url.removeprefix("http://").rpartition(":")
    addr = (host, int(port))
    # Part of a head, then nothing: answered 408 and closed (the socket timeout only
    # guards the test; the server answers after header_timeout_s).
    answer = raw_exchange(addr, b"POST /v1/tables/default.t HTTP/1.1\r\nHost: x\r\n", timeout_s=30)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"limits.header_timeout_s" in answer
    # Connected, nothing sent: closed.
    with socket.create_connection(addr, timeout=30) as s:
        assert s.recv(1024) == b""
    assert read_ids(store_url, warehouse, "t") == []


def test_a_connection_past_the_limit_is_503_at_once(
    tmp_path: Path, server_factory: Callable[..., ServerProcess]
) -> None:
    """Connections are bounded too: with the head's bounds, what unfinished heads can
    hold is bounded (connections x max_header_bytes)."""
    cfg = base_config(
        f"sqlite:///{tmp_path}/metastore.db",
        str(tmp_path / "warehouse"),
        {"default.t": {}},
        limits={"max_connections": 2},
    )
    proc = server_factory(cfg)
    host, _, port = proc.url.removeprefix("http://").rpartition(":")
    addr = (host, int(port))
    held = [socket.create_connection(addr, timeout=30) for _ in range(2)]
    try:
        held[0].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert held[0].recv(65536).startswith(b"HTTP/1.1 200 ")  # both are served
        answer = raw_exchange(addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", timeout_s=30)
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        assert b"retry-after: 1\r\n" in answer.lower() and b"limits.max_connections" in answer
    finally:
        for s in held:
            s.close()


# ---------------------------------------------------------------------- item 6: Flume nesting
def test_flume_body_nested_too_deeply_is_400_without_a_traceback(env: Env) -> None:
    before = env.ids("flume")
    r = env.client.post("/", content=b"[" * 100_000, headers={"Content-Type": "application/json"})
    body = problem(r, 400)
    assert "nested too deeply" in body["detail"]
    assert env.ids("flume") == before
    log = env.log()
    assert "RecursionError" not in log and "Traceback" not in log
    # A nested header value is refused the same way (Flume's headers are strings).
    deep = '[{"headers": {"x": ' + "[" * 500 + "]" * 500 + '}, "body": "{\\"id\\": 6}"}]'
    problem(env.client.post("/", content=deep, headers={"Content-Type": "application/json"}), 400)
    # A lone surrogate escaped in JSON is no text to write (it was a 500 with a traceback).
    lone = b'[{"body": "\\ud800"}]'
    r = env.client.post("/", content=lone, headers={"Content-Type": "application/json"})
    assert "not valid text" in problem(r, 400)["detail"]
    assert env.ids("flume") == before
    assert "Traceback" not in env.log()


# ---------------------------------------------------------------------- items 10 and 13
def test_a_repeated_or_unknown_query_parameter_is_400(env: Env) -> None:
    r = env.client.post(
        "/v1/tables/default.parted?partition=ds%3Da&partition=ds%3Db",
        content=jsonl([7]),
        headers=NDJSON,
    )
    assert "?partition=" in problem(r, 400)["detail"]
    r = env.post("default.parted", jsonl([8]), params={"partiton": "ds=a"})
    assert "partiton" in problem(r, 400)["detail"]
    problem(env.client.post("/?table=x", json=[{"body": "{}"}]), 400)
    assert env.ids("parted") == []


def test_a_static_partition_value_is_converted_as_a_records_is(env: Env) -> None:
    """``?partition=h=notanint`` for an int column is 400 (it made a directory
    ``h=notanint``), ``h=007`` is the partition ``h=7`` the dynamic path writes (it was a
    partition apart), and a key named twice is 400 (the last one won)."""
    for value in ("h=notanint", "h=1.5", "h=99999999999", "h=1/h=2"):
        r = env.post("default.hourly", jsonl([9]), params={"partition": value})
        assert "h" in problem(r, 400)["detail"]
    assert env.ids("hourly") == []
    r = env.post("default.hourly", jsonl([10]), params={"partition": "h=007"})
    assert r.status_code == 200, r.text
    assert env.post("default.hourly", b'{"id":11,"msg":"m","h":7}\n').status_code == 200
    with open_store(env.store_url, warehouse=env.warehouse) as s:
        parts = sorted(p.name for p in s.list_partitions("default", "hourly"))
    assert parts == ["h=7"]
    assert env.ids("hourly") == [10, 11]


def test_a_gzip_body_with_trailing_bytes_is_400_and_nothing_written(env: Env) -> None:
    gz = {"Content-Encoding": "gzip"}
    for tail in (b"garbage", b"\0\0\0\0", b"\x1f\x8bnot gzip"):
        r = env.post("default.gz", gzip.compress(jsonl([11])) + tail, headers=gz)
        assert "gzip" in problem(r, 400)["detail"]
    assert env.ids("gz") == []
    # Two members one after the other are one body (RFC 1952).
    two = gzip.compress(jsonl([12])) + gzip.compress(jsonl([13]))
    assert env.post("default.gz", two, headers=gz).status_code == 200
    assert env.ids("gz") == [12, 13]


# ---------------------------------------------------------------------- item 7 and 13: start
def _serve(config: Path) -> subprocess.CompletedProcess[str]:
    """``acidstream serve CONFIG --port 0``, expected to refuse at start."""
    return subprocess.run(
        [sys.executable, "-m", "acidstream.cli.main", "serve", str(config), "--port", "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"format": "regex", "regex": "(("}, "tables.default.t.regex"),
        ({"format": "regex", "regex": "([0-9]+)"}, "tables.default.t"),  # 1 group, 2 columns
        ({"format": "delimited", "delimiter": "ab"}, "tables.default.t.delimiter"),
        ({"format": "delimited", "delimiter": "\n"}, "tables.default.t.delimiter"),
        ({"format": "delimited", "delimiter": "\x02"}, "tables.default.t.delimiter"),
        ({"format": "xml"}, "tables.default.t.format"),
    ],
)
def test_settings_that_cannot_serve_refuse_the_start_in_one_line(
    tmp_path: Path, settings: dict[str, Any], named: str
) -> None:
    warehouse = str(tmp_path / "warehouse")
    store_url = f"sqlite:///{tmp_path}/metastore.db"
    with open_store(store_url, warehouse=warehouse) as s:
        create_table(s, "t")
    cfg = base_config(store_url, warehouse, {"default.t": settings})
    r = _serve(write_config(tmp_path / "c.yaml", cfg))
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("acidstream: error: ") and named in lines[0], lines[0]
    assert "listening" not in r.stdout


def test_a_config_without_tables_refuses_the_start(tmp_path: Path) -> None:
    cfg = base_config(f"sqlite:///{tmp_path}/m.db", str(tmp_path / "wh"), {})
    r = _serve(write_config(tmp_path / "c.yaml", cfg))
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines() == [
        "acidstream: error: no tables configured: tables must name at least one db.table"
    ]
