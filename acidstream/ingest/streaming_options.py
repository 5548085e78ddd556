"""``StreamingOptions`` (a ``StreamingConnection``'s settings, parsed once) and
``BlockResult`` (what ``write_block`` did); split from :mod:`acidstream.ingest.connection`,
which re-exports both."""

from __future__ import annotations

from dataclasses import dataclass, field

from acidstream.acid import layout
from acidstream.acid.durability import parse_durability
from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.writer import OrcWriterOptions
from acidstream.txn.batch import MAX_TXNS_PER_BATCH

__all__ = ["MODES", "BlockResult", "StreamingOptions"]

MODES = ("append", "upsert")
"""A connection's modes: rows appended, or changes applied by key."""


@dataclass(frozen=True, kw_only=True)
class StreamingOptions:
    """Connection settings, parsed once.

    Attributes:
        txns_per_batch: txns per transaction batch (Hive's default 1; at most 1000).
        heartbeat_interval_s: heartbeat at least this often (it can only shorten the
            interval, never stretch it past half the metastore's timeout, which is the
            metastore's setting: ``acidstream config set txn_timeout_s S``).
        memory_limit_bytes: buffered record bytes that trigger an auto-flush (rows handed to
            the ORC writers and, in a multi-txn batch, an intermediate footer) without commit.
        statement_id: Hive's ``withStatementId``; -1 writes directories without ``_stmt``.
        orc: ORC writer settings.
        dead_letter_path: a directory: records that fail conversion go to a JSON-lines file
            of this connection in it (with the reason) instead of raising
            ``SerializationError`` (``acidstream.ingest.dead_letter``).
        lock_wait_s: how long ``begin_transaction`` waits for the table lock.
        housekeeping_interval_s: run the housekeeper (``acidstream.txn.housekeeper``: abort txns
            of dead writers whose heartbeat is older than the metastore's txn timeout, purge
            what Hive purges) on its own thread every this many seconds while the
            connection is open; ``None``: not in this process.
        user, host, agent_info: recorded with txns and locks.
        namespace: the namespace the connection is bound to (``docs/namespaces.md``):
            ``table`` is then ``T`` or ``<namespace>.T``; links and other namespaces' tables
            are refused.
        mode: ``"append"`` (the default: ``write``... insert rows) or ``"upsert"``: the
            table must be keyed (``acidstream.txn.table_key``; else ``ConfigError`` at
            open) and the connection takes ``upsert``/``upsert_block``/``delete`` instead
            of ``write`` (:mod:`acidstream.ingest.upserts`). An upsert connection runs
            one txn per batch (``txns_per_batch`` must be 1).
        durability: ``"fsync"`` (a commit returns once its files and the metastore commit
            are on the disk: it survives a power loss) or ``"flush"`` (Hive's hflush:
            handed to the OS, survives the writer's crash, not a power loss); ``None``:
            the table property ``acidstream.durability``, else ``fsync``. See
            ``docs/durability.md``.
    """

    txns_per_batch: int = 1
    heartbeat_interval_s: float | None = None
    memory_limit_bytes: int = 100 * 1024 * 1024
    statement_id: int = -1
    orc: OrcWriterOptions = field(default_factory=OrcWriterOptions)
    dead_letter_path: str | None = None
    lock_wait_s: float = 60.0
    housekeeping_interval_s: float | None = 60.0
    user: str = ""
    host: str = ""
    agent_info: str = ""
    namespace: str | None = None
    mode: str = "append"
    durability: str | None = None

    def __post_init__(self) -> None:
        if self.durability is not None:
            parse_durability(self.durability)  # a bad value is refused here, by name
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.mode == "upsert" and self.txns_per_batch != 1:
            # A batch's txns are opened together: each later one would lose the write-set
            # check to the one committed before it (both update the same partitions).
            raise ConfigError("mode='upsert' runs one txn per batch: txns_per_batch must be 1")
        if not 1 <= self.txns_per_batch <= MAX_TXNS_PER_BATCH:
            raise ConfigError(f"txns_per_batch must be 1..{MAX_TXNS_PER_BATCH}")
        if self.heartbeat_interval_s is not None and self.heartbeat_interval_s <= 0:
            raise ConfigError("heartbeat_interval_s must be > 0")
        if self.memory_limit_bytes <= 0:
            raise ConfigError("memory_limit_bytes must be > 0")
        if self.housekeeping_interval_s is not None and self.housekeeping_interval_s <= 0:
            raise ConfigError("housekeeping_interval_s must be > 0 (or None)")
        if not -1 <= self.statement_id < layout.MAX_STATEMENTS_PER_TXN:
            raise ConfigError("statement_id must be in [-1, 10000)")


@dataclass(frozen=True)
class BlockResult:
    """What ``write_block`` did: how many records were accepted, and each rejected one
    (its index in the block and the error it got)."""

    accepted: int
    rejected: tuple[tuple[int, SerializationError], ...] = ()
