"""The exception hierarchy shared by every acidstream package.

Errors are classified by what the caller should do next, not by where they
were raised. ``acid`` is the root package of the dependency graph, so the
hierarchy's root and the errors of the format, metastore and writers live here. Errors of
a higher layer live with it and derive from :class:`AcidStreamError`: the Kafka source's in
``sources/errors.py``, the embedded broker's and the jobs' in ``acidstream/jobs/errors.py``.
"""

from __future__ import annotations

import errno
import os
import re

__all__ = [
    "AcidFormatError",
    "AcidStreamError",
    "CardinalityViolationError",
    "CommitConflictError",
    "CommitStateUnknownError",
    "ConfigError",
    "LinkReadOnlyError",
    "LockTimeoutError",
    "NamespaceError",
    "NotEnoughHistoryError",
    "SerializationError",
    "SideFileError",
    "StorageAccessError",
    "StorageError",
    "StorageUnavailableError",
    "TableNotFoundError",
    "TransactionError",
    "TxnAbortedError",
    "storage_error",
]


class AcidStreamError(Exception):
    """Root of every error acidstream raises on purpose."""


class ConfigError(AcidStreamError, ValueError):
    """A configuration key is unknown or its value is invalid (also a ``ValueError``, so
    callers that validate arguments the standard way catch it)."""


class NamespaceError(ConfigError):
    """A client bound to a namespace named something outside it (``B.T`` from namespace
    ``A``): fix the name or the binding (``txn/namespaces.py``)."""


class LinkReadOnlyError(NamespaceError):
    """A write (stream, sink, HTTP, compaction, repair) named a link (``T1@B``): links are
    read-only; write to the owner's table from its own namespace."""


class AcidFormatError(AcidStreamError):
    """Data on disk does not follow the Hive ACID format.

    Raised for corrupt ``_flush_length`` side files, non-ACID files where ACID
    files are required, unparsable directory names and malformed metadata.
    """


class SideFileError(AcidFormatError):
    """A ``_flush_length`` side file holds no complete length, or a torn one: its writer is
    still writing it (wait), or died (``acidstream repair`` recovers or reports the file)."""


class NotEnoughHistoryError(AcidFormatError):
    """Hive's ``ACID_NOT_ENOUGH_HISTORY``: only a compacted base newer than the
    snapshot exists, so the snapshot cannot be reconstructed."""


class TableNotFoundError(AcidStreamError):
    """The table (or its directory) does not exist."""


class SerializationError(AcidStreamError):
    """One record could not be converted to the table's row type.

    The batch it belongs to is still usable: callers may skip or divert the
    record and go on.
    """

    def __init__(self, message: str, *, record: bytes | None = None) -> None:
        super().__init__(message)
        self.record = record


class CardinalityViolationError(AcidStreamError):
    """A MERGE matched one target row with more than one source row (Hive's
    ``hive.merge.cardinality.check``): which source row should win is undefined, so nothing
    was written and the mutation's txn is aborted. De-duplicate the source on the ``on``
    keys and run it again."""


class TransactionError(AcidStreamError):
    """A transaction could not be opened, used or committed."""


class TxnAbortedError(TransactionError):
    """The transaction was aborted (by the caller, the reaper or a conflict)."""


class CommitConflictError(TxnAbortedError):
    """Write-write conflict at commit: the commit surely did not land.

    The transaction is aborted; it is safe to retry from scratch, and its
    staged files may be deleted.
    """


class CommitKeyExistsError(TxnAbortedError):
    """A commit whose key may be stored once found it stored by another txn's commit.

    The transaction is aborted (nothing of it is visible); the key's value is the other
    commit's. An idempotent writer reads it and reports that commit as its own.
    """


class CommitStateUnknownError(TransactionError):
    """The commit may or may not have landed (the store went away mid-commit).

    Never delete the transaction's files; recovery decides from the store.
    """


class LockTimeoutError(TransactionError):
    """A lock was not acquired within the allowed wait."""


class StorageError(AcidStreamError, OSError):
    """Writing to the warehouse failed (full disk, read-only file system, I/O error, name
    too long). The transaction being written is aborted; everything committed before it
    stays readable. ``errno`` is the operating system's code when there was one."""


class StorageAccessError(StorageError, PermissionError):
    """The store refused the credentials or the access (an unknown key, a wrong secret, no
    permission on the bucket): fix the storage options or the policy; retrying will not
    help. Also a ``PermissionError``. Its message never holds the secret."""


class StorageUnavailableError(StorageError):
    """The store stayed unavailable past the retries (throttling such as S3's ``503
    SlowDown``, timeouts, refused or dropped connections): the call did not take effect,
    or, for a write, its object is not visible; try again later."""


_ERRNO_IN_TEXT = re.compile(r"\[Errno (\d+)\]")


def storage_error(cause: OSError, doing: str, outcome: str) -> StorageError:
    """A ``StorageError`` for a failed file operation: ``"<doing> failed: <reason>
    (<ERRNO>); <outcome>"``, with the operating system's ``errno`` kept (also when Arrow's
    writers report it only in their message)."""
    code = cause.errno
    if code is None:
        m = _ERRNO_IN_TEXT.search(str(cause))
        code = int(m.group(1)) if m else None
    reason = os.strerror(code) if code is not None else str(cause).strip().splitlines()[0]
    name = f" ({errno.errorcode.get(code, code)})" if code is not None else ""
    err = StorageError(f"{doing} failed: {reason}{name}; {outcome}")
    err.errno = code
    return err
