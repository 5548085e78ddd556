"""Retries and typed errors for calls to a remote store (the backends' one call path).

A call that failed for a passing reason (throttling, a timeout, a dropped connection) is
retried with capped exponential backoff and jitter (tenacity), but only when the backend
says the call is idempotent; any failure left over becomes a one-line
:class:`~acidstream.acid.errors.StorageError` naming the path and what was being done,
with secrets from the storage options blanked out. ``FileNotFoundError`` and
``FileExistsError`` pass unchanged: they are answers, not failures.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import tenacity

from acidstream.acid.errors import (
    AcidStreamError,
    StorageAccessError,
    StorageError,
    StorageUnavailableError,
)

if TYPE_CHECKING:
    from acidstream.acid.storage import RetryPolicy, Storage

__all__ = ["call_store", "is_transient", "store_error"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Error codes of S3 (and S3-compatible stores) that mean "later": throttling, a server
# that is busy or restarting, a request that timed out on the server side.
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequests",
        "RequestTimeout",
        "ServiceUnavailable",
        "InternalError",
        "503",
        "500",
    }
)
_TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
_ACCESS_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "AllAccessDisabled",
        "403",
    }
)
# Network failures of the client libraries, by class name: the acid layer depends on no
# particular store's client (botocore, aiohttp, google-auth...), only fsspec.
_TRANSIENT_NAMES = frozenset(
    {
        "HTTPClientError",  # botocore: EndpointConnectionError, ReadTimeoutError, ...
        "EndpointConnectionError",
        "ConnectionClosedError",
        "ReadTimeoutError",
        "ConnectTimeoutError",
        "ResponseParserError",  # a throttling answer with broken XML (s3fs issue 484)
        "IncompleteRead",
        "ClientConnectionError",  # aiohttp
        "ClientPayloadError",
        "ServerDisconnectedError",
        "FSTimeoutError",  # fsspec
    }
)
_ACCESS_NAMES = frozenset({"NoCredentialsError", "PartialCredentialsError"})
# Exceptions from these packages are store failures even when they are not OSErrors.
_CLIENT_PACKAGES = frozenset(
    {"botocore", "aiobotocore", "aiohttp", "s3fs", "gcsfs", "adlfs", "azure", "google", "fsspec"}
)
# Secrets among fsspec storage options (s3fs, gcsfs, adlfs spellings).
_SECRET_OPTIONS = frozenset(
    {
        "secret",
        "token",
        "password",
        "aws_secret_access_key",
        "aws_session_token",
        "account_key",
        "sas_token",
        "client_secret",
        "connection_string",
    }
)


def _chain(e: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _names(e: BaseException) -> set[str]:
    return {c.__name__ for c in type(e).__mro__}


def _response_code(e: BaseException) -> tuple[str | None, int | None]:
    """The error code and HTTP status of a botocore ``ClientError`` (``None`` otherwise)."""
    response = getattr(e, "response", None)
    if not isinstance(response, dict):
        return None, None
    code = response.get("Error", {}).get("Code")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return (str(code) if code is not None else None), (
        int(status) if isinstance(status, int) else None
    )


def is_transient(e: BaseException) -> bool:
    """Whether ``e`` (or what caused it) is a failure that may pass: throttling, a server
    error, a timeout, a refused or dropped connection."""
    for c in _chain(e):
        if isinstance(c, FileNotFoundError | FileExistsError | PermissionError):
            return False
        code, status = _response_code(c)
        if code in _ACCESS_CODES:
            return False
        if code in _TRANSIENT_CODES or status in _TRANSIENT_STATUS:
            return True
        if _names(c) & _TRANSIENT_NAMES:
            return True
        if isinstance(c, TimeoutError | ConnectionError):
            return True
    return False


def _is_access(e: BaseException) -> bool:
    for c in _chain(e):
        if isinstance(c, PermissionError) or _names(c) & _ACCESS_NAMES:
            return True
        code, _ = _response_code(c)
        if code in _ACCESS_CODES:
            return True
    return False


def _is_store_failure(e: BaseException) -> bool:
    if isinstance(e, AcidStreamError):
        return False
    if isinstance(e, OSError):
        return True
    return type(e).__module__.split(".", 1)[0] in _CLIENT_PACKAGES


def _secrets(storage: Storage) -> list[str]:
    options = getattr(storage.fs, "storage_options", None) or {}
    found = [str(v) for k, v in options.items() if k in _SECRET_OPTIONS and v]
    return sorted(found, key=len, reverse=True)


def _reason(e: BaseException) -> str:
    """The first line of what the store said (the translated error's message, else the
    client library's)."""
    for c in _chain(e):
        text = str(c).strip()
        if text and not text.startswith("[Errno"):
            return text.splitlines()[0]
        if text:
            return text.splitlines()[0]
    return type(e).__name__


def store_error(storage: Storage, doing: str, path: str, e: BaseException) -> StorageError:
    """The typed, one-line error for a failed call: ``"<proto>://<path>: <doing> failed:
    <reason>"``, a :class:`StorageAccessError` for refused credentials, a
    :class:`StorageUnavailableError` for a store that stayed unavailable, and never a
    secret of the storage options in the text."""
    reason = _reason(e)
    for secret in _secrets(storage):
        reason = reason.replace(secret, "***")
    where = (
        path
        if "://" in path or storage.protocol in ("file", "local")
        else (f"{storage.protocol}://{path}")
    )
    message = f"{where}: {doing} failed: {reason}"
    cls: type[StorageError]
    if _is_access(e):
        cls = StorageAccessError
    elif is_transient(e):
        cls = StorageUnavailableError
    else:
        cls = StorageError
    err = cls(message)
    code = getattr(e, "errno", None)
    err.errno = (
        code if isinstance(code, int) else (errno.EACCES if cls is StorageAccessError else None)
    )
    return err


def call_store(
    storage: Storage, doing: str, path: str, fn: Callable[[], T], *, retry: RetryPolicy
) -> T:
    """Run ``fn`` (one call to ``storage``'s filesystem), retried per ``retry`` on a
    transient failure; a failure left over becomes a :class:`StorageError` (``raise ...
    from`` the original), but ``FileNotFoundError`` / ``FileExistsError`` pass as they are."""
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(retry.attempts)
        | tenacity.stop_after_delay(retry.deadline_s),
        wait=tenacity.wait_exponential_jitter(
            multiplier=retry.first_wait_s, max=retry.max_wait_s, jitter=retry.first_wait_s
        ),
        retry=tenacity.retry_if_exception(is_transient),
        before_sleep=_log_retry(storage, doing, path),
        reraise=True,
    )
    try:
        return retrying(fn)
    except (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError):
        raise
    except Exception as e:
        if not _is_store_failure(e):
            raise
        raise store_error(storage, doing, path, e) from e


def _log_retry(storage: Storage, doing: str, path: str) -> Callable[[Any], None]:
    def before_sleep(state: Any) -> None:
        outcome = state.outcome
        e = outcome.exception() if outcome is not None else None
        log.info(
            "%s %s://%s: attempt %d failed (%s); retrying",
            doing,
            storage.protocol,
            path,
            state.attempt_number,
            _reason(e) if e is not None else "?",
        )

    return before_sleep
