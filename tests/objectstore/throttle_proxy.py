"""A small HTTP proxy, run as its own process, that throttles an S3 API server like S3 does.

It forwards every request to the upstream server (moto's) unchanged, except that it answers
``503 SlowDown`` (S3's throttling error, with S3's XML body) to the first ``fail_first``
requests, to every request while ``fail_always`` is set, and to requests whose target
contains ``fail_match`` (e.g. ``partNumber=2``: the second part of every multipart upload);
a request whose target contains ``die_match`` kills the proxy on the spot (its clients see
the store vanish mid-request); one whose target contains ``hold_match`` is held ``hold_s``
seconds before it is forwarded (a slow round trip, to see what waits for it).
Tests change the rules and read the counts through ``/__proxy/config`` and
``/__proxy/stats`` (JSON); :class:`ThrottleProxy` does both.

Run: ``python -m tests.objectstore.throttle_proxy UPSTREAM_URL [PORT]``; it prints
``READY <port>`` once it listens on 127.0.0.1 (PORT, or a free one). Killing the process
takes the store away from its clients while the server keeps its objects (moto's restart
would forget them).
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ThrottleProxy"]

_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message>"
    b"<RequestId>throttle-proxy</RequestId></Error>"
)
# Hop-by-hop headers are the proxy's own business, not forwarded.
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fail_first = 0
        self.fail_always = False
        self.fail_match = ""
        self.die_match = ""
        self.hold_match = ""
        self.hold_s = 0.0
        self.requests = 0
        self.throttled = 0
        self.forwarded = 0

    def decide(self, target: str) -> bool:
        """Count a request; whether it gets a 503."""
        with self.lock:
            if self.die_match and self.die_match in target:
                os._exit(1)  # no answer: the connection drops as when a server dies
            self.requests += 1
            throttle = self.fail_always or (bool(self.fail_match) and self.fail_match in target)
            if not throttle and self.fail_first > 0:
                self.fail_first -= 1
                throttle = True
            if throttle:
                self.throttled += 1
            else:
                self.forwarded += 1
            return throttle

    def hold(self, target: str) -> float:
        """How long to hold a request before forwarding it."""
        with self.lock:
            return self.hold_s if self.hold_match and self.hold_match in target else 0.0

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": self.requests,
                "throttled": self.throttled,
                "forwarded": self.forwarded,
                "fail_first": self.fail_first,
            }


def _handler(upstream: urllib.parse.SplitResult, state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return bytes(out)
                    out += self.rfile.read(size)
                    self.rfile.readline()
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _control(self, body: bytes) -> None:
            if self.path.startswith("/__proxy/config"):
                rules = json.loads(body or b"{}")
                with state.lock:
                    for k in (
                        "fail_first",
                        "fail_always",
                        "fail_match",
                        "die_match",
                        "hold_match",
                        "hold_s",
                    ):
                        if k in rules:
                            setattr(state, k, rules[k])
                    if rules.get("reset_counts"):
                        state.requests = state.throttled = state.forwarded = 0
            payload = json.dumps(state.stats()).encode()
            self._reply(200, [("Content-Type", "application/json")], payload)

        def _any(self) -> None:
            body = self._body()
            if self.path.startswith("/__proxy/"):
                self._control(body)
                return
            if state.decide(self.path):
                self._reply(503, [("Content-Type", "application/xml")], _SLOW_DOWN)
                return
            held = state.hold(self.path)
            if held:
                time.sleep(held)  # (this request's own thread: the others go on)
            conn = http.client.HTTPConnection(
                upstream.hostname or "127.0.0.1", upstream.port, timeout=60
            )
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                if body or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body))
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                out = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP]
                out = [(k, v) for k, v in out if k.lower() != "content-length"]
                if self.command == "HEAD":
                    out.append(("Content-Length", resp.getheader("Content-Length") or "0"))
                    self.send_response(resp.status)
                    for k, v in out:
                        self.send_header(k, v)
                    self.end_headers()
                    return
                self._reply(resp.status, out, data)
            finally:
                conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

    return Handler


def main(argv: list[str]) -> None:
    upstream = urllib.parse.urlsplit(argv[0])
    port = int(argv[1]) if len(argv) > 1 else 0
    ThreadingHTTPServer.allow_reuse_address = True  # a restart on the same port
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(upstream, _State()))
    server.daemon_threads = True
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


class ThrottleProxy:
    """The proxy as a child process of the test, in front of ``upstream``."""

    def __init__(self, upstream: str, *, port: int = 0) -> None:
        self.upstream = upstream
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.objectstore.throttle_proxy", upstream, str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()  # blocks until it listens
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"throttle proxy did not start: {line!r}")
        self.port = int(line.split()[1])

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def configure(self, **rules: Any) -> dict[str, Any]:
        """Set ``fail_first`` / ``fail_always`` / ``fail_match`` / ``die_match`` /
        ``hold_match`` and ``hold_s``; ``reset_counts=True`` zeroes the counters. Returns the
        counters."""
        req = urllib.request.Request(
            self.endpoint + "/__proxy/config", data=json.dumps(rules).encode(), method="POST"
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            out: dict[str, Any] = json.loads(r.read())
            return out

    def stats(self) -> dict[str, Any]:
        return self.configure()

    def stop(self) -> None:
        """SIGKILL the proxy (its clients see the store vanish)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


if __name__ == "__main__":
    main(sys.argv[1:])
