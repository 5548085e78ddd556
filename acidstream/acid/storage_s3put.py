"""A whole-object PUT to an S3-compatible store without aiobotocore's request pipeline.

Why: a commit on S3 is two small PUTs (the delta's ``bucket_N`` and its
``_orc_acid_version`` marker). Through s3fs each costs about 5 ms of client CPU in
aiobotocore (endpoint ruleset, event hooks, serialisation, a CRC32 of the body), all of it
on s3fs's one event-loop thread, so the two PUTs of a commit queue behind each other. The
same request, signed by botocore's own SigV4 signer and sent on a pooled ``http.client``
connection from the caller's thread, costs about 1 ms (``benchmarks/object_store.py``).

When: only where s3fs would send the same request to the same URL, so nothing about the
store's semantics changes. :meth:`DirectPut.for_fs` answers ``None`` (s3fs does the PUT)
unless the filesystem has an explicit endpoint that is not AWS's (botocore addresses such
an endpoint path-style, ``endpoint/bucket/key``; AWS's own endpoints are addressed by
virtual host, left to botocore), static credentials (no refreshing provider), signing on,
and no option that adds request parameters or changes the connection (server-side
encryption, ACLs, requester pays, ``verify``, proxies, a client certificate...).

Semantics kept: ``If-None-Match: *`` for a conditional put (``412`` is
``FileExistsError``, as s3fs translates it); an object appears whole or not at all (one
PUT); the store's error answers become botocore ``ClientError``\\ s with S3's code and
status, and dropped connections ``ConnectionError``\\ s, so :mod:`storage_errors` types and
retries them as it does s3fs's. This module never retries: its caller decides.
"""

from __future__ import annotations

import http.client
import os
import re
import select
import ssl
import threading
import urllib.parse
import weakref
from typing import Any

__all__ = ["DirectPut"]

# s3fs options under which a PUT is the plain request this module sends (anything else,
# e.g. s3_additional_kwargs, requester_pays, anon, is checked on the filesystem itself).
_PLAIN_CLIENT_KWARGS = frozenset(
    {"region_name", "endpoint_url", "aws_access_key_id", "aws_secret_access_key"}
)
_PLAIN_CONFIG_KWARGS = frozenset(
    {
        "retries",
        "connect_timeout",
        "read_timeout",
        "max_pool_connections",
        "request_checksum_calculation",
        "response_checksum_validation",
        "user_agent",
        "user_agent_extra",
    }
)
_AWS_HOSTS = re.compile(r"(^|\.)amazonaws\.com(\.cn)?$", re.IGNORECASE)
_ERROR_CODE = re.compile(rb"<Code>([^<]*)</Code>")
_ERROR_MESSAGE = re.compile(rb"<Message>([^<]*)</Message>")
_IDLE_KEPT = 8  # idle connections kept per endpoint (one per writer thread is plenty)

_by_fs: weakref.WeakKeyDictionary[Any, DirectPut | None] = weakref.WeakKeyDictionary()
_by_fs_lock = threading.Lock()


class DirectPut:
    """PUTs whole objects to one S3-compatible endpoint, path-style, with static credentials.

    Thread-safe: any thread may call :meth:`put` (the writer's, for a file it closes; a PUT
    thread, for a marker started ahead); each call takes an idle connection or opens one."""

    def __init__(
        self,
        endpoint_url: str,
        region: str,
        credentials: Any,
        *,
        connect_timeout: float = 60.0,
        read_timeout: float = 60.0,
        ca_bundle: str | None = None,
    ) -> None:
        parts = urllib.parse.urlsplit(endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) endpoint: {endpoint_url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._base = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        self._prefix = parts.path.rstrip("/")
        self._region = region
        self._credentials = credentials  # botocore ReadOnlyCredentials / Credentials
        self._timeout = max(connect_timeout, read_timeout)
        # (https) botocore's verification: its CA bundle (certifi's, or AWS_CA_BUNDLE).
        self._ssl = ssl.create_default_context(cafile=ca_bundle) if self._https else None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()  # whose connections _idle holds

    @classmethod
    def for_fs(cls, fs: Any) -> DirectPut | None:
        """The direct PUT for an s3fs filesystem, or ``None`` where s3fs must send the PUT
        itself (see the module's doc). Decided once per filesystem (connects it)."""
        with _by_fs_lock:
            try:
                return _by_fs[fs]
            except KeyError:
                pass
            except TypeError:  # not weakly referenceable: decide each time
                return _direct_for(fs)
            found = _direct_for(fs)
            _by_fs[fs] = found
            return found

    def put(self, bucket: str, key: str, data: bytes, *, if_absent: bool) -> None:
        """PUT ``data`` as ``bucket/key``; ``if_absent``: a conditional put
        (``If-None-Match: *``), ``FileExistsError`` when the object exists. Failures:
        ``ClientError`` (the store's answer), ``ConnectionError`` / ``TimeoutError`` (no
        answer). Not retried here."""
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest

        target = f"{self._prefix}/{bucket}/{urllib.parse.quote(key, safe='/~')}"
        headers = {"Content-Length": str(len(data))}
        if if_absent:
            headers["If-None-Match"] = "*"
        request = AWSRequest(
            method="PUT", url=self._base + target[len(self._prefix) :], headers=headers, data=data
        )
        S3SigV4Auth(self._credentials, "s3", self._region).add_auth(request)
        status, reason, body = self._send(target, data, dict(request.headers.items()))
        if 200 <= status < 300:
            return
        if status == 412 and if_absent:
            raise FileExistsError(f"{bucket}/{key}")
        raise _client_error(status, reason, body)

    # -- connections ------------------------------------------------------------------------

    def _send(self, target: str, data: bytes, headers: dict[str, str]) -> tuple[int, str, bytes]:
        conn = self._take()
        try:
            conn.request("PUT", target, body=data, headers=headers)
            response = conn.getresponse()
            body = response.read()
        except http.client.HTTPException as e:  # IncompleteRead, BadStatusLine...
            conn.close()
            raise ConnectionError(f"PUT {target}: {type(e).__name__}: {e}") from e
        except BaseException:
            conn.close()
            raise
        if response.will_close:  # (moto's server closes every connection)
            conn.close()
        else:
            self._give_back(conn)
        return response.status, response.reason, body

    def _take(self) -> http.client.HTTPConnection:
        if self._pid != os.getpid():
            # A forked child: the kept sockets are shared with the parent, whose requests
            # on them would interleave with this process's. Forget them (not closed: a
            # TLS close would end the parent's session).
            self._idle, self._lock, self._pid = [], threading.Lock(), os.getpid()
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if not _dropped(conn):
                    return conn
                conn.close()
        if self._ssl is not None:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=self._timeout, context=self._ssl
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < _IDLE_KEPT:
                self._idle.append(conn)
                return
        conn.close()


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle kept-alive connection was closed by the server (its socket reads
    as ready: an EOF, or bytes nobody asked for), as urllib3 checks before reusing one."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _client_error(status: int, reason: str, body: bytes) -> Exception:
    """The store's error answer as botocore's ``ClientError`` (code, message, status), as
    s3fs would have raised it; throttling keeps its code (``SlowDown``) and status."""
    from botocore.exceptions import ClientError

    code_match = _ERROR_CODE.search(body)
    message_match = _ERROR_MESSAGE.search(body)
    code = code_match.group(1).decode("utf-8", "replace") if code_match else str(status)
    message = message_match.group(1).decode("utf-8", "replace") if message_match else reason
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "PutObject",
    )


def _direct_for(fs: Any) -> DirectPut | None:
    """(See :meth:`DirectPut.for_fs`.) Every condition under which s3fs's PutObject is the
    request :meth:`DirectPut.put` sends; any doubt answers ``None``."""
    if type(fs).__module__.split(".", 1)[0] != "s3fs":
        return None
    if getattr(fs, "anon", True) or getattr(fs, "requester_pays", True):
        return None
    if getattr(fs, "s3_additional_kwargs", None) or getattr(fs, "version_aware", False):
        return None
    if set(getattr(fs, "client_kwargs", None) or {}) - _PLAIN_CLIENT_KWARGS:
        return None
    if set(getattr(fs, "config_kwargs", None) or {}) - _PLAIN_CONFIG_KWARGS:
        return None
    if getattr(fs, "kwargs", None):  # AioSession arguments (a profile...)
        return None
    try:
        client = fs.s3  # connects (botocore resolves endpoint, region and credentials)
        meta = client.meta
        credentials = client._request_signer._credentials
        config = meta.config
        verify = client._endpoint.http_session._verify
    except Exception:
        return None
    if verify is False:
        return None  # unverified TLS stays botocore's (and the user's) decision
    from aiobotocore.credentials import AioCredentials  # type: ignore[import-untyped]

    if type(credentials) is not AioCredentials or not credentials.access_key:
        return None  # refreshing providers resolve asynchronously: s3fs's path
    if config.signature_version not in (None, "s3v4") or config.proxies or config.client_cert:
        return None
    s3_config = config.s3 or {}
    if s3_config.get("addressing_style") not in (None, "auto", "path"):
        return None
    if any(s3_config.get(k) for k in ("use_accelerate_endpoint", "use_dualstack_endpoint")):
        return None
    endpoint = str(meta.endpoint_url or "")
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    if not host or _AWS_HOSTS.search(host) or not meta.region_name:
        return None  # AWS's own endpoints: virtual-host addressing, botocore's business
    from botocore.credentials import ReadOnlyCredentials
    from botocore.httpsession import get_cert_path

    frozen = ReadOnlyCredentials(
        credentials.access_key, credentials.secret_key, credentials.token, None
    )
    try:
        return DirectPut(
            endpoint,
            meta.region_name,
            frozen,
            connect_timeout=float(config.connect_timeout or 60),
            read_timeout=float(config.read_timeout or 60),
            ca_bundle=get_cert_path(verify) if endpoint.startswith("https") else None,
        )
    except ValueError:
        return None
