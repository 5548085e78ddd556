"""Running the HTTP ingest server: uvicorn on a socket bound here, SIGTERM drains.

The socket is bound before uvicorn starts so that ``port: 0`` can print the port it got
(``acidstream serve: listening on http://127.0.0.1:PORT``, flushed: tests and scripts
read it). SIGTERM or SIGINT: uvicorn stops accepting and waits for the requests in
flight; the writers close their groups at once instead of waiting for the window (so
every request received is committed and answered), then the lifespan's shutdown stops
the writers (their open txns are aborted) and the housekeeper.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TextIO

import uvicorn

from acidstream.ingest.http.app import IngestServer, create_app
from acidstream.ingest.http.config import ServerConfig
from acidstream.ingest.http.protocol import bounded_protocol

__all__ = ["LISTENING", "serve"]

LISTENING = "acidstream serve: listening on "


class _DrainingServer(uvicorn.Server):
    """uvicorn's server, telling the ingest server to drain when a signal arrives."""

    def __init__(
        self, config: uvicorn.Config, ingest: IngestServer, *, announce: str, out: TextIO
    ) -> None:
        super().__init__(config)
        self._ingest = ingest
        self._announce = announce
        self._out = out

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            # Only now: the application started and the socket accepts connections.
            print(self._announce, file=self._out, flush=True)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        loop = getattr(self, "_loop", None)
        if loop is not None:
            # Signal handlers run between bytecodes: hand the work to the loop.
            loop.call_soon_threadsafe(self._ingest.begin_drain)
        else:
            self._ingest.begin_drain()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's, without re-raising the signal at the end: a drained SIGTERM is a
        clean exit (code 0), not a death by signal."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        sigs = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in sigs}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        import asyncio

        self._loop = asyncio.get_running_loop()
        # Start the ingest server here, before uvicorn, rather than in the lifespan: a
        # setting that can never serve (a regex with the wrong number of groups for its
        # table) then leaves ``run`` as its ConfigError, one line from the CLI, where
        # uvicorn would log the lifespan's traceback and exit.
        try:
            await self._ingest.start()
        except BaseException:
            await self._ingest.stop()
            raise
        await super().serve(sockets=sockets)


def serve(config: ServerConfig, *, out: TextIO | None = None) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit code.

    Raises:
        ConfigError: a table's settings cannot serve it (its record writer refuses the
            table's columns); nothing was served.
    """
    out = out or sys.stdout
    logging.basicConfig(
        level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    ingest = IngestServer(config)
    app = create_app(ingest)
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host, config.port))
    sock.set_inheritable(True)
    host, port = sock.getsockname()[:2]
    uv = uvicorn.Config(
        app,
        log_level=config.log_level,
        access_log=False,
        timeout_graceful_shutdown=int(config.shutdown_timeout_s),
        lifespan="on",
        # The head's bounds (size, header count, time): uvicorn has none with httptools.
        http=bounded_protocol(
            config.limits,
            on_refusal=lambda status: ingest.metrics.connection_refusals.labels(str(status)).inc(),
        ),
    )
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    server = _DrainingServer(uv, ingest, announce=f"{LISTENING}http://{shown}:{port}", out=out)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0 if server.started else 1
