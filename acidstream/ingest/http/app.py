"""The HTTP ingest application (Starlette): routes, checks, backpressure, answers.

``POST /v1/tables/{db}.{table}`` takes newline-delimited records; ``POST /`` takes Flume's
``JSONHandler`` format; ``GET /healthz``, ``/readyz``, ``/metrics``. A request is checked
(table, token, media type, size, backpressure), its body read within the body timeout,
inflated, parsed on a worker thread, and handed to the table's
:class:`~acidstream.ingest.http.group_commit.TableWriter`; it is answered 200 only after the txn
holding its rows committed. Errors are RFC 9457 problem details
(``application/problem+json``). ``docs/http_ingest.md`` documents the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from acidstream.acid.errors import (
    AcidStreamError,
    CommitStateUnknownError,
    ConfigError,
    SerializationError,
    TableNotFoundError,
)
from acidstream.acid.placement import Placement
from acidstream.acid.table_name import TableName
from acidstream.ingest.http.body import (
    ROW_PATH_MAX_RECORDS,
    BodyTooLarge,
    PartitionValues,
    gunzip,
    media_type,
    parse_lines,
    parse_partition,
    split_lines,
)
from acidstream.ingest.http.changes import APPEND, request_mode
from acidstream.ingest.http.config import ServerConfig, TableSettings
from acidstream.ingest.http.group_commit import CommitResult, TableWriter, WriteRequest
from acidstream.ingest.http.idempotency import (
    MAX_KEY_CHARS,
    IdempotencyIndex,
    Outcome,
    body_hash,
    key_hash,
)
from acidstream.ingest.http.metrics import Metrics
from acidstream.ingest.http.problems import Problem
from acidstream.txn.config import StoreConfig
from acidstream.txn.housekeeper import Housekeeper, HousekeepingReport
from acidstream.txn.store import TxnStore

__all__ = ["IngestServer", "Problem", "create_app"]

log = logging.getLogger(__name__)

T = TypeVar("T")

REPLAY_HEADER = "Idempotent-Replayed"


@dataclass
class _Part:
    """The records of one request for one table (a Flume request may have several)."""

    writer: TableWriter
    records: list[bytes]
    numbers: list[int]  # line (or event) number of each record, 1-based
    static: PartitionValues | None
    partition_text: str | None
    digest: str  # what the request asks to write, for the Idempotency-Key check
    unit: str = "line"  # what ``numbers`` count: body lines, or Flume events
    mode: str = APPEND  # or upsert / delete (acidstream.ingest.http.changes)


def _warm_up_arrow() -> None:
    """Pay pyarrow's lazy imports before the server listens: its first ``pa.array`` of
    Python objects imports pandas (when installed), 1-3 s on a busy 2-core machine, which
    would otherwise stall the first group commit and every request waiting on it."""
    pa.array([(0,)], pa.struct([("x", pa.int32())]))


class IngestServer:
    """The state behind the routes: table writers, the idempotency index, in-flight bytes,
    the housekeeper, and whether the server is draining."""

    def __init__(self, config: ServerConfig, *, store_config: StoreConfig | None = None) -> None:
        self.config = config
        self.store_config = store_config or StoreConfig.resolve(
            metastore=config.metastore,
            warehouse=config.warehouse,
            storage_options=config.storage_options,
        )
        self.metrics = Metrics()
        self.inflight_bytes = 0
        self.draining = False
        self._writers: dict[str, TableWriter] = {}
        self._placements: dict[str, Placement] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self._index: IdempotencyIndex | None = None
        self._health: TxnStore | None = None
        self._health_lock = threading.Lock()
        self._housekeeper: Housekeeper | None = None
        self._started = False

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Open the stores, start the housekeeper and open each table's writer (once).

        Raises:
            ConfigError: a table's settings cannot serve it (its record writer refuses the
                table's columns): the server must not start and answer 503 forever.
        """
        if self._started:
            return
        self._started = True

        def open_stores() -> None:
            _warm_up_arrow()
            self._index = IdempotencyIndex(self.store_config.open())
            self._health = self.store_config.open()
            # The txn timeout is the metastore's: idempotency keys must outlive it.
            self.config.check_retention(self._health.txn_timeout_s())
            self._housekeeper = Housekeeper(
                self.store_config.metastore_url,
                interval_s=self.config.housekeeping_interval_s,
                on_report=self._after_housekeeping,
            )
            self._housekeeper.start()

        await run_in_threadpool(open_stores)
        for name, t in self.config.tables.items():
            try:
                await self.writer(name)
            except TableNotFoundError as e:
                # Not fatal: the table may be created later; its requests retry the open.
                log.warning("table %s is not ready: %s", name, e)
            except ConfigError as e:
                raise ConfigError(f"tables.{t.name}: {e}") from e
            except (AcidStreamError, OSError) as e:
                # Not fatal: the table may be created later; its requests retry the open.
                log.warning("table %s is not ready: %s", name, e)

    def _after_housekeeping(self, _report: HousekeepingReport) -> None:
        """On the housekeeper's thread, after each pass: expire idempotency keys older than
        ``idempotency_retention_s`` in every served table."""
        index = self._index
        if index is None:
            return
        older_than = time.time() - self.config.idempotency_retention_s
        for name, w in list(self._writers.items()):
            table = getattr(w, "table", None)
            if table is None:
                continue
            try:
                n = index.prune(name, (table.db, table.name), older_than=older_than)
            except (AcidStreamError, OSError) as e:  # the next pass tries again
                log.warning("expiring idempotency keys of %s failed: %s", name, e)
                continue
            if n:
                log.info("expired %d idempotency records of %s", n, name)

    def begin_drain(self) -> None:
        """SIGTERM: refuse new requests; groups commit without waiting for their window."""
        self.draining = True
        for w in self._writers.values():
            w.hurry()

    async def stop(self) -> None:
        def stop_all() -> None:
            for w in self._writers.values():
                w.stop(self.config.shutdown_timeout_s)
            if self._housekeeper is not None:
                self._housekeeper.stop()
            if self._index is not None:
                self._index.close()
            if self._health is not None:
                self._health.close()

        self.draining = True
        await run_in_threadpool(stop_all)

    @property
    def index(self) -> IdempotencyIndex:
        assert self._index is not None, "the server is not started"
        return self._index

    async def writer(self, name: str) -> TableWriter:
        """The table's writer, opened on first use (``TableNotFoundError`` if missing)."""
        w = self._writers.get(name)
        if w is not None:
            return w
        lock = self._opening.setdefault(name, asyncio.Lock())
        async with lock:
            w = self._writers.get(name)
            if w is None:
                w = TableWriter(
                    self.config.tables[name],
                    store_config=self.store_config,
                    window=self.config.commit,
                    max_queue=self.config.limits.max_queue_requests,
                    index=self.index,
                    metrics=self.metrics,
                )
                await run_in_threadpool(w.open)
                storage, _ = self.store_config.storage(w.layout.location)
                self._placements[name] = Placement(w.layout, storage=storage)
                if self.draining:
                    w.hurry()
                self._writers[name] = w
        return w

    def placement(self, name: str) -> Placement:
        return self._placements[name]

    def reserve(self, n: int) -> bool:
        """Admit ``n`` more bytes in flight (event loop only)."""
        if self.inflight_bytes + n > self.config.limits.max_inflight_bytes:
            return False
        self.inflight_bytes += n
        self.metrics.inflight_bytes.set(self.inflight_bytes)
        return True

    def release(self, n: int) -> None:
        self.inflight_bytes -= n
        self.metrics.inflight_bytes.set(self.inflight_bytes)

    def ready(self) -> list[str]:
        """What keeps the server from being ready (empty: ready). Blocking."""
        problems: list[str] = []
        if self.draining:
            problems.append("draining")
        try:
            assert self._health is not None
            with self._health_lock:  # one store connection, probes on worker threads
                self._health.list_databases()
        except Exception as e:  # any failure means: not ready, and say why
            problems.append(f"metastore: {e}")
        try:
            storage, root = self.store_config.storage()  # the warehouse, with its options
            storage.makedirs(root)
            probe = storage.join(root, f".acidstream-http-probe-{uuid.uuid4().hex}")
            with storage.create(probe) as f:
                f.write(b"ok")
            storage.delete(probe)
        except Exception as e:
            problems.append(f"warehouse: {e}")
        return problems


# ---------------------------------------------------------------------- helpers
def _retry_after(server: IngestServer) -> dict[str, str]:
    return {"Retry-After": str(server.config.limits.retry_after_s)}


def _overloaded(server: IngestServer, reason: str, status: int, detail: str) -> Problem:
    server.metrics.backpressure.labels(reason).inc()
    title = "Too Many Requests" if status == 429 else "Service Unavailable"
    return Problem(status, title, detail, headers=_retry_after(server))


def _table_settings(server: IngestServer, name: str) -> TableSettings:
    try:
        qualified = str(TableName.parse(name))
    except ConfigError as e:
        raise Problem(404, "Not Found", str(e)) from e
    t = server.config.tables.get(qualified)
    if t is None:
        raise Problem(404, "Not Found", f"table {qualified} is not served here")
    return t


def _authorize(request: Request, t: TableSettings) -> None:
    if not t.tokens:
        return
    challenge = {"WWW-Authenticate": 'Bearer realm="acidstream"'}
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Problem(401, "Unauthorized", f"{t.qualified} needs a bearer token", headers=challenge)
    given = token.strip().encode("utf-8")
    if not any(hmac.compare_digest(given, ok.encode("utf-8")) for ok in t.tokens):
        raise Problem(403, "Forbidden", f"the token may not write {t.qualified}")


def _check_media(request: Request, allowed: Sequence[str]) -> None:
    mt, charset = media_type(request.headers.get("content-type"))
    if mt not in allowed:
        raise Problem(
            415,
            "Unsupported Media Type",
            f"Content-Type {mt or '(none)'!r} is not accepted here; use one of {list(allowed)}",
        )
    if charset not in (None, "utf-8", "utf8"):
        raise Problem(415, "Unsupported Media Type", f"charset {charset!r}: only utf-8")
    enc = request.headers.get("content-encoding", "identity").strip().lower()
    if enc not in ("identity", "gzip", ""):
        raise Problem(
            415, "Unsupported Media Type", f"Content-Encoding {enc!r}: only gzip or identity"
        )


def _query_params(request: Request, allowed: Sequence[str]) -> dict[str, str]:
    """The query's parameters, each given at most once and each one of ``allowed``: a
    repeated ``?partition=`` must not let one of them win silently, and a misspelt one
    must not write elsewhere than the client meant."""
    seen: dict[str, str] = {}
    for k, v in request.query_params.multi_items():
        if k not in allowed:
            shown = ", ".join(f"?{a}=" for a in allowed) or "none"
            raise Problem(400, "Bad Request", f"unknown query parameter ?{k}= (accepted: {shown})")
        if k in seen:
            raise Problem(400, "Bad Request", f"query parameter ?{k}= given more than once")
        seen[k] = v
    return seen


def _content_length(request: Request, server: IngestServer) -> int:
    raw = request.headers.get("content-length")
    if raw is None:
        raise Problem(411, "Length Required", "send the body with a Content-Length")
    try:
        n = int(raw)
    except ValueError as e:
        raise Problem(400, "Bad Request", f"Content-Length {raw!r} is not a number") from e
    limit = server.config.limits.max_body_bytes
    if n > limit or n > server.config.limits.max_inflight_bytes:
        raise Problem(413, "Content Too Large", f"the body is {n:,} bytes, over {limit:,}")
    return n


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    key = key.strip().strip('"')
    if not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
        raise Problem(
            400, "Bad Request", f"Idempotency-Key must be 1..{MAX_KEY_CHARS} printable characters"
        )
    return key


async def _read_body(request: Request, server: IngestServer) -> bytes:
    """The body, inflated; at most ``body_timeout_s`` to receive it (slow clients get 408
    and never hold a txn: bodies are complete before they join a group)."""
    limits = server.config.limits
    chunks: list[bytes] = []
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            async for chunk in request.stream():
                chunks.append(chunk)
    except TimeoutError as e:
        raise Problem(
            408, "Request Timeout", f"the body did not arrive within {limits.body_timeout_s:g} s"
        ) from e
    body = b"".join(chunks)
    if request.headers.get("content-encoding", "").strip().lower() == "gzip":
        try:
            body = await run_in_threadpool(gunzip, body, limit=limits.max_decoded_bytes)
        except BodyTooLarge as e:
            raise Problem(413, "Content Too Large", str(e)) from e
        except ValueError as e:
            raise Problem(400, "Bad Request", str(e)) from e
    return body


def _rejections(
    part: _Part, rejected: Sequence[tuple[int, SerializationError]], limit: int
) -> dict[str, Any]:
    listed = [{part.unit: part.numbers[i], "reason": str(e)} for i, e in rejected[:limit]]
    return {
        "rejected": len(rejected),
        "rejections": listed,
        "rejections_truncated": len(rejected) > limit,
    }


INLINE_SPLIT_BYTES = 16 << 10  # bodies smaller than this are split on the event loop


async def _maybe_in_thread(inline: bool, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    """``fn`` on the event loop when ``inline`` (small, fast work), else on a worker thread."""
    if inline:
        return fn(*args, **kw)
    return await run_in_threadpool(fn, *args, **kw)


# ---------------------------------------------------------------------- the pipeline
async def _ingest(
    server: IngestServer, part: _Part, idem: str | None
) -> tuple[dict[str, Any], bool]:
    """Write one part; returns (response, replayed). Raises ``Problem``."""
    w = part.writer
    name = w.name
    claimed: tuple[str, str] | None = None
    if idem is not None:
        khash = key_hash(idem)
        found = await run_in_threadpool(
            server.index.claim, name, khash, part.digest, db_table=(w.table.db, w.table.name)
        )
        if found.outcome is Outcome.REPLAY:
            server.metrics.replays.labels(name).inc()
            assert found.response is not None
            return dict(found.response), True
        if found.outcome is Outcome.MISMATCH:
            raise Problem(
                422,
                "Unprocessable Content",
                f"Idempotency-Key {idem!r} was used for another request body on {name}",
            )
        if found.outcome is Outcome.IN_PROGRESS:
            raise Problem(
                409,
                "Conflict",
                f"a request with Idempotency-Key {idem!r} is in progress on {name}; retry later",
                headers=_retry_after(server),
            )
        claimed = (khash, part.digest)
    submitted = False
    try:
        # Small bodies are parsed on the loop: the per-record path takes ~10 µs a record,
        # less than handing the work to a thread and back.
        small = len(part.records) < ROW_PATH_MAX_RECORDS
        static_path = part.static is not None or w.dynamic_writer is None
        writer = w.static_writer if static_path else w.dynamic_writer
        if part.mode != APPEND:  # the same parse; a NULL key rejects the line
            writer = w.keyed_static_writer if static_path else w.keyed_dynamic_writer
        assert writer is not None
        parsed = await _maybe_in_thread(
            small,
            parse_lines,
            part.records,
            writer=writer,
            placement=server.placement(name),
            static=part.static,
            dynamic=part.static is None and w.dynamic_writer is not None,
        )
        limits = server.config.limits
        rej = _rejections(part, parsed.rejected, limits.max_reported_rejections)
        if parsed.rejected:
            server.metrics.records.labels(name, "rejected").inc(len(parsed.rejected))
            server.metrics.bytes.labels(name, "rejected").inc(
                sum(len(part.records[i]) for i, _ in parsed.rejected)
            )
        if not part.records:
            raise Problem(400, "Bad Request", "the body holds no records", extra={"table": name})
        if parsed.accepted == 0:
            raise Problem(
                400,
                "Bad Request",
                f"no valid record in the body for {name}",
                extra={"table": name, **rej},
            )
        if parsed.rejected and w.settings.all_or_nothing:
            raise Problem(
                400,
                "Bad Request",
                f"{len(parsed.rejected)} bad record(s); {name} takes all or nothing: nothing written",
                extra={"table": name, **rej},
            )
        loop = asyncio.get_running_loop()
        req = WriteRequest(
            groups=parsed.groups,
            accepted=parsed.accepted,
            nbytes=parsed.nbytes,
            rejected=[
                (part.records[i], f"http:{name}:{part.numbers[i]}", e) for i, e in parsed.rejected
            ],
            response={
                "table": name,
                "partition": part.partition_text,
                **({} if part.mode == APPEND else {"mode": part.mode}),
                "accepted": parsed.accepted,
                **rej,
            },
            idem=claimed,
            mode=part.mode,
            loop=loop,
            future=loop.create_future(),
        )
        if not w.submit(req):
            if server.draining:
                raise Problem(
                    503,
                    "Service Unavailable",
                    "the server is shutting down",
                    headers=_retry_after(server),
                )
            raise _overloaded(
                server,
                "commit_queue",
                429,
                f"{name} has {w.pending} requests waiting for a commit (limit "
                f"{limits.max_queue_requests})",
            )
        submitted = True
        try:
            result: CommitResult = await asyncio.shield(req.future)
        except CommitStateUnknownError as e:
            raise Problem(
                503,
                "Service Unavailable",
                f"the commit's outcome is unknown ({e}); retry with the same Idempotency-Key",
                headers=_retry_after(server),
            ) from e
        except Exception as e:
            raise Problem(
                503,
                "Service Unavailable",
                f"the commit failed, nothing was written: {e}",
                headers=_retry_after(server),
            ) from e
        server.metrics.ack_seconds.labels(name).observe(time.monotonic() - req.received)
        return dict(result.response), False
    finally:
        if claimed is not None and not submitted:
            server.index.release(name, claimed[0])


async def _writer_or_problem(server: IngestServer, t: TableSettings) -> TableWriter:
    try:
        return await server.writer(t.qualified)
    except TableNotFoundError as e:
        raise Problem(404, "Not Found", str(e)) from e
    except (AcidStreamError, OSError) as e:
        raise Problem(
            503, "Service Unavailable", f"{t.qualified}: {e}", headers=_retry_after(server)
        ) from e


@contextlib.asynccontextmanager
async def _admitted(server: IngestServer, n: int) -> AsyncIterator[None]:
    if server.draining:
        raise Problem(
            503, "Service Unavailable", "the server is shutting down", headers=_retry_after(server)
        )
    if not server.reserve(n):
        raise _overloaded(
            server,
            "inflight_bytes",
            503,
            f"{server.inflight_bytes:,} bytes in flight; the limit is "
            f"{server.config.limits.max_inflight_bytes:,}",
        )
    try:
        yield
    finally:
        server.release(n)


async def _answer(
    server: IngestServer, route: str, request: Request, run: Callable[[], Awaitable[Response]]
) -> Response:
    """Run a route's body: a ``Problem`` becomes its problem-details response; every
    answer is counted by route and status."""
    status = 500
    try:
        response = await run()
        status = response.status_code
        return response
    except Problem as p:
        status = p.status
        return p.response(request.url.path)
    except ClientDisconnect:
        status = 499  # nobody reads the answer
        return Response(status_code=400)
    finally:
        server.metrics.requests.labels(route, str(status)).inc()


# ---------------------------------------------------------------------- routes
async def _post_table(request: Request) -> Response:
    server: IngestServer = request.app.state.ingest

    async def run() -> Response:
        params = _query_params(request, ("partition", "mode"))
        t = _table_settings(server, request.path_params["name"])
        _authorize(request, t)
        _check_media(request, t.content_types)
        length = _content_length(request, server)
        idem = _idempotency_key(request)
        w = await _writer_or_problem(server, t)
        mode = request_mode(params, w.key, t.qualified)
        ptext = params.get("partition")
        static: PartitionValues | None = None
        if ptext is not None:
            try:
                static = parse_partition(ptext, w.table.partition_keys, table=t.qualified)
            except ConfigError as e:
                raise Problem(400, "Bad Request", str(e)) from e
        if w.pending >= server.config.limits.max_queue_requests:
            raise _overloaded(
                server,
                "commit_queue",
                429,
                f"{t.qualified} has {w.pending} requests waiting for a commit",
            )
        async with _admitted(server, length):
            body = await _read_body(request, server)
            extra = max(0, len(body) - length)
            async with _admitted(server, extra):
                records, numbers = await _maybe_in_thread(
                    len(body) < INLINE_SPLIT_BYTES, split_lines, body
                )
                # (An append's digest as before; a change's names its mode too.)
                modes = () if mode == APPEND else (mode.encode(),)
                digest = body_hash(t.qualified.encode(), (ptext or "").encode(), *modes, body)
                part = _Part(w, records, numbers, static, ptext, digest, mode=mode)
                del body
                resp, replayed = await _ingest(server, part, idem)
        headers = {REPLAY_HEADER: "true"} if replayed else {}
        return JSONResponse(resp, headers=headers)

    return await _answer(server, "table", request, run)


async def _post_flume(request: Request) -> Response:
    server: IngestServer = request.app.state.ingest

    async def run() -> Response:
        _query_params(request, ())
        _check_media(request, ("application/json",))
        length = _content_length(request, server)
        idem = _idempotency_key(request)
        async with _admitted(server, length):
            body = await _read_body(request, server)
            async with _admitted(server, max(0, len(body) - length)):
                events = await run_in_threadpool(_flume_events, body)
                by_table = _flume_tables(server, events)
                parts: list[_Part] = []
                for t, idx in by_table.items():
                    _authorize(request, t)
                    w = await _writer_or_problem(server, t)
                    records = [events[i][1] for i in idx]
                    digest = body_hash(b"flume", t.qualified.encode(), *records)
                    parts.append(
                        _Part(w, records, [i + 1 for i in idx], None, None, digest, unit="event")
                    )
                del body
                results = await asyncio.gather(
                    *(_ingest(server, p, idem) for p in parts), return_exceptions=True
                )
        problems = [r for r in results if isinstance(r, BaseException)]
        if problems:
            first = problems[0]
            if isinstance(first, Problem):
                done = [
                    p.writer.name
                    for p, r in zip(parts, results, strict=True)
                    if not isinstance(r, BaseException)
                ]
                first.extra.setdefault("committed_tables", done)
            raise first
        tables = {p.writer.name: r[0] for p, r in zip(parts, results, strict=True)}  # type: ignore[index]
        replayed = all(r[1] for r in results)  # type: ignore[index]
        return JSONResponse({"tables": tables}, headers={REPLAY_HEADER: "true"} if replayed else {})

    return await _answer(server, "flume", request, run)


FlumeEvent = tuple[dict[str, str], bytes]


def _flume_events(body: bytes) -> list[FlumeEvent]:
    """Flume ``JSONHandler`` events: ``[{"headers": {...}, "body": "..."}, ...]``."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Problem(400, "Bad Request", f"the body is not a JSON array of events: {e}") from e
    except RecursionError as e:
        # 100,000 '[' exhaust the parser's stack: malformed input like any other.
        raise Problem(
            400, "Bad Request", "the body is not a JSON array of events: nested too deeply"
        ) from e
    if not isinstance(data, list):
        raise Problem(400, "Bad Request", "the body must be a JSON array of events")
    out: list[FlumeEvent] = []
    for n, ev in enumerate(data, 1):
        if not isinstance(ev, dict) or not isinstance(ev.get("body", ""), str):
            raise Problem(
                400, "Bad Request", f"event {n}: expected {{'headers': {{}}, 'body': '...'}}"
            )
        headers = ev.get("headers") or {}
        if not isinstance(headers, dict):
            raise Problem(400, "Bad Request", f"event {n}: headers must be an object")
        if any(isinstance(v, list | dict) for v in headers.values()):
            # Flume's headers are a Map<String, String> (a number is taken as its text);
            # str() of a nested value would also recurse as deep as the parser let it.
            raise Problem(400, "Bad Request", f"event {n}: header values must be strings")
        try:
            body = ev.get("body", "").encode("utf-8")
        except UnicodeEncodeError as e:  # "\ud800": JSON escapes a lone surrogate
            raise Problem(400, "Bad Request", f"event {n}: the body is not valid text: {e}") from e
        out.append(({str(k): str(v) for k, v in headers.items()}, body))
    return out


def _flume_tables(server: IngestServer, events: list[FlumeEvent]) -> dict[TableSettings, list[int]]:
    """Event indices by target table (the table header, else the default table)."""
    cfg = server.config.flume
    out: dict[TableSettings, list[int]] = {}
    for i, (headers, _) in enumerate(events):
        name = headers.get(cfg.table_header) or cfg.default_table
        if not name:
            raise Problem(
                400,
                "Bad Request",
                f"event {i + 1} has no {cfg.table_header!r} header and there is no default table",
            )
        out.setdefault(_table_settings(server, name), []).append(i)
    return out


async def _healthz(request: Request) -> Response:
    return PlainTextResponse("ok\n")


async def _readyz(request: Request) -> Response:
    server: IngestServer = request.app.state.ingest
    problems = await run_in_threadpool(server.ready)
    if problems:
        return JSONResponse({"ready": False, "problems": problems}, 503)
    return JSONResponse({"ready": True})


async def _metrics(request: Request) -> Response:
    server: IngestServer = request.app.state.ingest
    return Response(generate_latest(server.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def create_app(server: IngestServer) -> Starlette:
    """The ASGI application around ``server`` (started and stopped by its lifespan)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await server.start()
        try:
            yield
        finally:
            await server.stop()

    app = Starlette(
        routes=[
            Route("/v1/tables/{name}", _post_table, methods=["POST"]),
            Route("/", _post_flume, methods=["POST"]),
            Route("/healthz", _healthz, methods=["GET"]),
            Route("/readyz", _readyz, methods=["GET"]),
            Route("/metrics", _metrics, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.ingest = server
    return app
