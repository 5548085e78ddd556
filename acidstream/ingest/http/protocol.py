"""uvicorn's httptools protocol with bounds on a request's head (size, header count, time)
and on the number of connections.

uvicorn bounds nothing of a request's head when it parses with httptools:
``h11_max_incomplete_event_size`` is for h11 only, and llhttp (httptools' parser) gathers
a header's name and value in memory until the header ends, so one request with a 256 MiB
header was held whole (the server's peak RSS grew by 517 MB). Nor does uvicorn time a
connection out before its first request, or while a head trickles in.

:class:`BoundedHttpToolsProtocol` counts the bytes fed to the parser while a request's
head is incomplete and the header fields it reports, and answers a head past
``limits.max_header_bytes`` or ``limits.max_headers`` with 431 (problem details, as the
application's refusals) before parsing more of it; it answers 408 to a head that is not
complete within ``limits.header_timeout_s`` of the connection being made (its first
request) or of its first byte (the next ones), and closes a connection that sends nothing
for as long; a connection past ``limits.max_connections`` is answered 503 with
``Retry-After`` as soon as it is made. After such an answer the connection sends its FIN
and drops what still arrives for a moment (a lingering close, as nginx does), so the
client reads the answer instead of a reset, then closes. The body's bounds are the
application's (``Content-Length`` against ``limits.max_body_bytes``, the in-flight bytes,
``limits.body_timeout_s``): uvicorn pauses reading when 64 KiB of body wait unread.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from acidstream.ingest.http.config import Limits

__all__ = ["BoundedHttpToolsProtocol", "bounded_protocol"]

log = logging.getLogger(__name__)

#: How long a refused connection drops what still arrives before it closes: long enough
#: for the client to stop sending and read the answer, short enough to hold nothing.
LINGER_S = 2.0

_REASONS = {
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}


class _HeadRefused(Exception):
    """Raised from a parser callback to stop parsing a head that is over a limit."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, bounding each request's head (see the module
    docstring). ``limits`` is set on the subclass :func:`bounded_protocol` makes."""

    limits: Limits = Limits()
    on_refusal: Callable[[int], None] | None = None  # told each refusal's status

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = False  # a request's head has begun and is not complete
        self._fed_head_bytes = 0  # bytes fed to the parser while the head is incomplete
        self._head_bytes = 0  # the request line and header fields parsed so far
        self._header_count = 0
        self._refused = False  # answered 408/431: drop what arrives, then close
        self._head_timer: asyncio.TimerHandle | None = None
        self._linger_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ connection
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refuse(
                503,
                f"{self.limits.max_connections} connections are open "
                "(limits.max_connections); retry later",
                headers=((b"retry-after", str(self.limits.retry_after_s).encode()),),
            )
            return
        # A connection that never sends a request is closed like a slow head.
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def eof_received(self) -> None:
        if self._refused:
            self.transport.close()  # the client stopped sending: no need to linger
        super().eof_received()

    def data_received(self, data: bytes) -> None:
        # uvicorn's, but a parse stopped by a refusal of ours is not "invalid HTTP".
        if self._refused or self.parser is None:
            return  # lingering after a refusal (what arrives is dropped), or gone
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError:
            if not self._refused:
                msg = "Invalid HTTP request received."
                self.logger.warning(msg)
                self.send_400_response(msg)
            return
        if self._in_head and not self._refused:
            # Every byte fed while the head is incomplete is head: llhttp keeps a header
            # whole until it ends, so this count bounds what an unfinished head holds (the
            # limit plus one read from the socket).
            self._fed_head_bytes += len(data)
            if self._fed_head_bytes > self.limits.max_header_bytes:
                self._refuse_head_size()

    # ------------------------------------------------------------------ parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._fed_head_bytes = self._head_bytes = self._header_count = 0
        self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            self._refuse(
                431,
                f"the request has more than {self.limits.max_headers} header fields "
                "(limits.max_headers)",
            )
            raise _HeadRefused  # stops the parser (it raises HttpParserCallbackError)
        self._count_head(len(name) + len(value) + 4)  # "name: value\r\n"
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().on_headers_complete()

    # ------------------------------------------------------------------ refusals
    def _count_head(self, n: int) -> None:
        """A head that arrived in one read is counted here, exactly, as it is parsed."""
        self._head_bytes += n
        if self._head_bytes > self.limits.max_header_bytes:
            self._refuse_head_size()
            raise _HeadRefused

    def _refuse_head_size(self) -> None:
        self._refuse(
            431,
            f"the request head passes {self.limits.max_header_bytes:,} bytes "
            "(limits.max_header_bytes)",
        )

    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(
                self.limits.header_timeout_s, self._head_timed_out
            )

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._refused or self.transport.is_closing():
            return
        if self._in_head:
            self._refuse(
                408,
                f"the request head did not arrive within {self.limits.header_timeout_s:g} s "
                "(limits.header_timeout_s)",
            )
        elif self.cycle is None:
            # Connected and silent: nothing to answer.
            self.transport.close()

    def _refuse(
        self, status: int, detail: str, *, headers: tuple[tuple[bytes, bytes], ...] = ()
    ) -> None:
        """Answer ``status`` (problem details), send FIN, drop what still arrives for
        :data:`LINGER_S`, then close."""
        if self._refused:
            return
        self._refused = True
        self._in_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "?"
        log.warning("refused a request from %s: %d, %s", client, status, detail)
        if self.on_refusal is not None:
            self.on_refusal(status)
        title = _REASONS[status]
        body = json.dumps(
            {
                "type": f"urn:acidstream:http:{title.decode().lower().replace(' ', '-')}",
                "title": title.decode(),
                "status": status,
                "detail": detail,
            }
        ).encode()
        head = [b"HTTP/1.1 %d %s\r\n" % (status, title)]
        for name, value in self.server_state.default_headers:
            head.append(name + b": " + value + b"\r\n")
        for name, value in headers:
            head.append(name + b": " + value + b"\r\n")
        head.append(b"content-type: application/problem+json\r\n")
        head.append(b"content-length: %d\r\n" % len(body))
        head.append(b"connection: close\r\n\r\n")
        self.transport.write(b"".join(head) + body)
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self._linger_timer = self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()

    def _cancel_timers(self) -> None:
        for t in (self._head_timer, self._linger_timer):
            if t is not None:
                t.cancel()
        self._head_timer = self._linger_timer = None


def bounded_protocol(
    limits: Limits, *, on_refusal: Callable[[int], None] | None = None
) -> type[BoundedHttpToolsProtocol]:
    """The protocol class for uvicorn's ``http=`` with these limits; ``on_refusal`` is
    called with the status of each refusal (on the event loop), for the metrics."""
    attrs = {"limits": limits, "on_refusal": staticmethod(on_refusal) if on_refusal else None}
    return type("BoundedHttpToolsProtocol", (BoundedHttpToolsProtocol,), attrs)
