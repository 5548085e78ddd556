"""The exception hierarchy shared by every acidstream package.

Errors are classified by what the caller should do next, not by where they
were raised. ``acid`` is the root package of the dependency graph, so the
hierarchy lives here and ``txn``, ``ingest`` and ``sinks`` import it.
"""

from __future__ import annotations

__all__ = [
    "AcidFormatError",
    "AcidStreamError",
    "CommitConflictError",
    "CommitStateUnknownError",
    "ConfigError",
    "LockTimeoutError",
    "NotEnoughHistoryError",
    "SerializationError",
    "TableNotFoundError",
    "TransactionError",
    "TxnAbortedError",
]


class AcidStreamError(Exception):
    """Root of every error acidstream raises on purpose."""


class ConfigError(AcidStreamError):
    """A configuration key is unknown or its value is invalid."""


class AcidFormatError(AcidStreamError):
    """Data on disk does not follow the Hive ACID format.

    Raised for corrupt ``_flush_length`` side files, non-ACID files where ACID
    files are required, unparsable directory names and malformed metadata.
    """


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


class TransactionError(AcidStreamError):
    """A transaction could not be opened, used or committed."""


class TxnAbortedError(TransactionError):
    """The transaction was aborted (by the caller, the reaper or a conflict)."""


class CommitConflictError(TxnAbortedError):
    """Write-write conflict at commit: the commit surely did not land.

    The transaction is aborted; it is safe to retry from scratch, and its
    staged files may be deleted.
    """


class CommitStateUnknownError(TransactionError):
    """The commit may or may not have landed (the store went away mid-commit).

    Never delete the transaction's files; recovery decides from the store.
    """


class LockTimeoutError(TransactionError):
    """A lock was not acquired within the allowed wait."""
