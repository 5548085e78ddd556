"""``acidstream compact | compactions | compactor``: Hive's compaction from the shell.

* ``compact db.t [--partition k=v] --type major|minor [--wait]`` queues a request, like
  ``ALTER TABLE ... COMPACT``; ``--wait`` runs the queue (worker, then cleaner) in this
  process until the request is done.
* ``compactions`` prints the queue and history (SHOW COMPACTIONS columns).
* ``compactor`` runs the initiator, workers, cleaner and housekeeper as a daemon
  (``--once``: a single pass), printing one summary line per compaction.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from acidstream.acid.errors import (
    AcidStreamError,
    ConfigError,
    NamespaceError,
    SideFileError,
    StorageError,
)
from acidstream.acid.layout import parse_dir_name
from acidstream.cli.main import EXIT_STORAGE, describe, exit_code, storage_options_of
from acidstream.cli.output import print_table
from acidstream.cli.txn_cmds import _open
from acidstream.compaction.config import CompactorConfig
from acidstream.compaction.service import Compactor, PassReport
from acidstream.txn.compaction_sql import (
    FAILED,
    INITIATED,
    READY_FOR_CLEANING,
    REFUSED,
    STATE_NAMES,
    SUCCEEDED,
    WORKING,
    CompactionQueue,
    CompactionRecord,
)
from acidstream.txn.config import StoreConfig
from acidstream.txn.housekeeper import DEFAULT_INTERVAL_S, Housekeeper, HousekeepingReport
from acidstream.txn.namespaces import check_table_namespace, refuse_link, resolve_write
from acidstream.txn.store import TxnStore

__all__ = ["register"]

SHOW_COMPACTIONS_COLUMNS = (
    "compactionid", "dbname", "tabname", "partname", "type", "state", "workerhost", "workerid",
    "enqueuetime", "starttime", "duration", "hadoopjobid", "errormessage", "initiatorhost",
    "initiatorid", "poolname", "txnid", "nexttxnid", "committime", "hightestwriteid",
)  # fmt: skip
"""Hive 4's SHOW COMPACTIONS schema (``hightestwriteid`` sic)."""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metastore", metavar="URL", help="sqlite:///path or postgresql://...")
    p.add_argument("--warehouse", metavar="PATH", help="warehouse root directory")


def _ts(ms: int | None) -> str:
    if not ms:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _split(worker_id: str | None) -> tuple[str, str]:
    """``host-pid-...`` -> (host, rest), as SHOW COMPACTIONS splits Hive's worker id."""
    if not worker_id:
        return "", ""
    parts = worker_id.rsplit("-", 3)
    if len(parts) == 4:
        return parts[0], "-".join(parts[1:])
    host, _, rest = worker_id.rpartition("-")
    return (host, rest) if host else (worker_id, "")


def _spark(args: argparse.Namespace) -> Any:
    """The SparkSession for ``--engine spark`` (this process is the driver), else None."""
    if args.engine != "spark":
        return None
    import os
    import sys

    # Python workers must run this interpreter (the project's virtualenv).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(args.spark_master)
        .appName("acidstream-compactor")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=("local", "spark"),
        default="local",
        help="spark: major compactions run as one Spark task per bucket",
    )
    p.add_argument("--spark-master", default="local[2]", help="Spark master for --engine spark")


def _partitions_with_data(store: TxnStore, db: str, table: str) -> list[str]:
    """The registered partitions of a table whose directory holds anything to compact (a
    base or delta directory): what ``compact`` without ``--partition`` queues."""
    out = []
    for p in store.list_partitions(db, table):
        storage, path = store.storage(p.location)
        if storage.exists(path) and any(
            e.is_dir and parse_dir_name(e.name) is not None for e in storage.list_dir(path)
        ):
            out.append(p.name)
    return out


def _compact(args: argparse.Namespace) -> int:
    # Links are refused before the store is opened (docs/namespaces.md); the binding is
    # checked with the store (namespace mode).
    refuse_link(args.table, action="compact")
    with _open(args, existing=True) as store:
        name = resolve_write(store, args.table, namespace=args.namespace, action="compact")
        table = store.get_table(name.db, name.table)
        queue = CompactionQueue(store)
        if args.partition is None and table.is_partitioned:
            # Hive refuses a table-level request on a partitioned table; "compact the
            # table" means each of its partitions (the queue refuses the table itself).
            parts: list[str | None] = list(_partitions_with_data(store, name.db, name.table))
            if not parts:
                print(f"nothing to compact: no partition of {table.full_name} holds data")
                return 0
        else:
            parts = [args.partition]
        ids: list[int] = []
        for part in parts:
            cq_id, accepted = queue.request(name.db, name.table, part, major=args.type == "major")
            target = f"{table.full_name}/{part}" if part else table.full_name
            if accepted:
                print(f"compaction {cq_id} queued ({args.type}, {target})")
            else:
                print(f"compaction {cq_id} is already queued or working for {target}")
            ids.append(cq_id)
        if not args.wait:
            return 0
        # A failed cleaning is a line of this output, not a logged warning: stderr keeps to
        # the one error line.
        compactor = Compactor(
            store, initiator=False, on_event=print, on_warning=print, engine=args.engine,
            spark=_spark(args),
        )  # fmt: skip
        # A partition the user did not name that has nothing to compact (a minor request on
        # one delta) is refused by the worker: reported, but no failure of "the table".
        with _warnings_as_output(print):
            return _wait(compactor, queue, ids, refused_ok=args.partition is None and len(ids) > 1)


def _wait(compactor: Compactor, queue: CompactionQueue, ids: list[int], *, refused_ok: bool) -> int:
    """Run the queue here until each of ``ids`` is done; print each one's final state.

    ``refused_ok``: a refused request (Hive's "compaction thresholds not met") is no
    failure (else it is one, as Hive's ``COMPACT ... AND WAIT`` fails on it). A request
    whose compaction committed but whose cleaning failed (e.g. a read-only file system) is
    one: its rows are readable, its obsolete files stay until a cleaner pass succeeds.

    Raises:
        StorageError: one of them failed writing (full disk, read-only file system...).
        AcidStreamError: one of them failed or was refused (the first is named).
    """
    errors: dict[int, BaseException] = {}
    clean_errors: dict[int, BaseException] = {}
    final: dict[int, CompactionRecord | None] = {}
    pending = list(ids)
    while pending:
        report = compactor.run_once()
        errors.update({o.id: o.error for o in report.compactions if o.error is not None})
        clean_errors.update(
            {c.id: c.error for c in report.cleaned if c.id in pending and c.error is not None}
        )
        live: dict[int, CompactionRecord] = {}
        for i in pending:
            rec = queue.get(i)
            if (
                rec is None
                or rec.state not in (INITIATED, WORKING, READY_FOR_CLEANING)
                or i in clean_errors  # retried by the next cleaner pass, not by this wait
            ):
                final[i] = rec
            else:
                live[i] = rec
        pending = list(live)
        states = {r.state for r in live.values()}
        cleaned = [c for c in report.cleaned if c.error is None]
        if states == {READY_FOR_CLEANING} and not cleaned and not report.compactions:
            # Ready for cleaning but older readers are still open: cleaning waits for
            # them (the daemon does it later); the compactions themselves are done.
            for i, rec in live.items():
                print(f"compaction {i}: ready for cleaning (waiting for older readers)")
                final[i] = rec
            break
        if WORKING in states and not report.compactions:
            time.sleep(1.0)  # another process's worker has one: poll its progress
    bad: list[_Failed] = []
    for i in ids:
        rec = final[i]
        if i in clean_errors and rec is not None:
            print(f"compaction {i}: compacted, cleaning failed")
            bad.append(_cleaning_failed(i, rec.target, clean_errors[i]))
            continue
        if rec is not None and rec.state == READY_FOR_CLEANING:
            continue  # printed above
        print(f"compaction {i}: {STATE_NAMES.get(rec.state, rec.state) if rec else 'gone'}")
        if rec is None:
            bad.append(_Failed(f"compaction {i} is gone from the queue and its history", None))
        elif rec.state not in (SUCCEEDED, REFUSED if refused_ok else SUCCEEDED):
            state = STATE_NAMES.get(rec.state, rec.state)
            bad.append(_compaction_failed(i, rec.target, state, errors.get(i), rec.error_message))
    if not bad:
        return 0
    raise _one_error(bad)


@dataclass(frozen=True)
class _Failed:
    """One failure of a compaction pass: its message (without the count of the others)
    and the exception, if this process saw it (its type gives the exit code)."""

    message: str
    error: BaseException | None


def _one_error(failed: Sequence[_Failed]) -> AcidStreamError:
    """The one error a compaction command (``compact --wait``, ``compactor --once``) exits
    with: a storage failure first (exit 4, README), else the first failure (exit 1); the
    others are counted. Every committed row is still readable: a failed compaction's files
    are invisible (its txn aborted), a failed cleaning deleted nothing it still needs."""
    storage = [f for f in failed if _is_storage(f.error)]
    first = (storage or list(failed))[0]
    more = f" (and {len(failed) - 1} more: see `acidstream compactions`)" if len(failed) > 1 else ""
    if isinstance(first.error, OSError) and _is_storage(first.error):
        out = StorageError(first.message + more)
        out.errno = first.error.errno
        return out
    return AcidStreamError(first.message + more)


def _why(err: BaseException | None, recorded: str | None, target: str) -> str:
    """Why something failed: our own exception says it best (the errno's name); another
    process's failure, or one nobody classified (a bug: its type matters), by the recorded
    message. An unreadable side file says what to do about it."""
    known = isinstance(err, (AcidStreamError, OSError))
    why = describe(err) if err is not None and known else recorded or "no reason given"
    if isinstance(err, SideFileError):
        table = target.split("/", 1)[0]
        why += (
            f"; a writer's side file cannot be read: if that writer is dead, `acidstream "
            f"repair {table}` (a dry run, then --apply) recovers the file or reports it"
        )
    return why


def _compaction_failed(
    i: int, target: str, state: str, err: BaseException | None, recorded: str | None
) -> _Failed:
    msg = f"compaction {i} of {target} {state}: {_why(err, recorded, target)}"
    if _is_storage(err):
        msg += "; the request is marked failed, committed rows are untouched"
    return _Failed(msg, err)


def _cleaning_failed(i: int | None, target: str, err: BaseException) -> _Failed:
    why = _why(err, None, target)
    if i is None:
        return _Failed(
            f"cleaning the aborted data of {target} failed: {why}; nothing committed was "
            "touched, the next cleaner pass retries it",
            err,
        )
    return _Failed(
        f"compaction {i} of {target} succeeded, but cleaning failed: {why}; every committed "
        "row is readable, the obsolete files stay until a cleaner pass succeeds (the daemon, "
        "`acidstream compactor`, retries it)",
        err,
    )


def _pass_failures(report: PassReport) -> list[_Failed]:
    """The failed compactions, and failed cleanings of compactions, of one pass (a refusal
    is no failure). A failed pass over aborted data is not: it is a warning line of the
    output, as in the daemon (a live writer's side file may be unreadable for a moment)."""
    out = [
        _compaction_failed(c.id, c.target, "failed", c.error, c.message)
        for c in report.compactions
        if c.state == FAILED
    ]
    out += [
        _cleaning_failed(c.id, c.target, c.error)
        for c in report.cleaned
        if c.error is not None and c.id is not None
    ]
    return out


class _LineHandler(logging.Handler):
    """Log records as lines of a command's output (``say``)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        super().__init__(logging.WARNING)
        self._say = say

    def emit(self, record: logging.LogRecord) -> None:
        self._say(f"warning: {record.getMessage()}")


@contextlib.contextmanager
def _warnings_as_output(say: Callable[[str], None]) -> Iterator[None]:
    """The compaction library's warnings (initiator, worker, cleaner) as lines of this
    command's output while a one-shot command runs: its stderr keeps to the one error line
    it fails with. The daemon logs them as warnings."""
    logger = logging.getLogger("acidstream.compaction")
    handler = _LineHandler(say)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _is_storage(e: BaseException | None) -> bool:
    """Whether a compaction's exception is a storage failure (the CLI's exit code 4)."""
    return exit_code(e) == EXIT_STORAGE if e is not None else False


def _compactions(args: argparse.Namespace) -> int:
    with _open(args, read_only=True) as store:
        recs = CompactionQueue(store).show()
        # A bound client (--namespace, or any client in namespace mode) sees its own
        # namespace's compactions only, as it may name only its own tables.
        recs = [c for c in recs if _visible(store, c.db, args.namespace)]
    rows = []
    for c in recs:
        whost, wid = _split(c.worker_id)
        ihost, iid = _split(c.initiator_id)
        end = c.end_ms if c.end_ms else None
        duration = f"{(end - c.start_ms) / 1000:.1f}s" if end and c.start_ms else ""
        rows.append(
            (c.id, c.db, c.table, c.partition or "---", c.type_name, c.state_name, whost, wid,
             _ts(c.enqueue_time_ms), _ts(c.start_ms), duration, "", c.error_message or "",
             ihost, iid, c.pool_name or "default", c.txn_id or "", c.next_txn_id or "",
             _ts(c.commit_time_ms), c.highest_write_id if c.highest_write_id is not None else "")
        )  # fmt: skip
    print_table(SHOW_COMPACTIONS_COLUMNS, rows)
    return 0


def _visible(store: TxnStore, db: str, namespace: str | None) -> bool:
    try:
        check_table_namespace(store, db, namespace=namespace)
    except NamespaceError:
        return False
    return True


def _compactor(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise ConfigError("--workers must be >= 1")
    config = CompactorConfig(
        check_interval_s=args.check_interval,
        cleaner_interval_s=args.cleaner_interval,
        worker_poll_s=args.poll,
    )
    store_config = StoreConfig.resolve(
        metastore=args.metastore,
        warehouse=args.warehouse,
        storage_options=storage_options_of(args),
    )
    # The compactor works on tables that exist: a mistyped --metastore is "no metastore at
    # URL", not a new empty store compacted for ever.
    store_config.open(read_only=True).close()
    # The daemon keeps the metastore healthy too (Hive runs AcidHouseKeeperService in the
    # same metastore process as its compactor threads): dead writers' txns are aborted, so
    # their locks stop blocking compaction and cleaning.
    keeper = (
        None
        if args.no_housekeeper
        else Housekeeper(
            store_config.metastore_url,
            interval_s=args.housekeeping_interval,
            on_report=_print_housekeeping,
        )
    )
    with store_config.open() as store:
        compactor = Compactor(
            store,
            config=config,
            initiator=not args.no_initiator,
            cleaner=not args.no_cleaner,
            workers=args.workers,
            on_event=_say,
            # --once reports a failed pass in its one error line (stdout has the details);
            # the daemon logs each failed cleaning as a warning and retries it.
            on_warning=_say if args.once else None,
            engine=args.engine,
            spark=_spark(args),
        )
        if args.once:
            if keeper is not None:
                with keeper:
                    _print_housekeeping(keeper.run_once())
            with _warnings_as_output(_say):
                failed = _pass_failures(compactor.run_once())
            if failed:
                raise _one_error(failed)
            return 0
        done = threading.Event()

        def stop(signum: int, frame: FrameType | None) -> None:
            done.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        if keeper is not None:
            keeper.start()
        compactor.start()
        what = "compactor" if keeper is None else "compactor and housekeeper"
        _say(f"{what} running (Ctrl-C to stop)")
        done.wait()
        compactor.stop()
        if keeper is not None:
            keeper.stop()
    return 0


def _print_housekeeping(report: HousekeepingReport) -> None:
    """One line per pass that changed something (or failed): quiet when idle."""
    changed = [f"{step}: {result}" for step, result in report.rows() if result not in ("0", "")]
    if changed or report.errors:
        parts = changed + [f"failed: {e}" for e in report.errors]
        _say("housekeeping: " + "; ".join(parts))


_SAY_LOCK = threading.Lock()


def _say(line: str) -> None:
    """One whole line to stdout: the daemon's threads (workers, cleaner, housekeeper, main)
    print concurrently, and ``print`` writes the text and its newline separately, so two
    lines could merge into one."""
    with _SAY_LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the compaction sub-commands to the ``acidstream`` parser."""
    p = subparsers.add_parser(
        "compact", help="queue a compaction of a table or partition (ALTER TABLE ... COMPACT)"
    )
    _common(p)
    p.add_argument("table", help="[db.]table")
    p.add_argument(
        "--partition",
        metavar="K=V[/K=V]",
        help="one partition (default for a partitioned table: each partition holding data)",
    )
    p.add_argument("--namespace", help="bind to this namespace: TABLE is then T or <namespace>.T")
    p.add_argument("--type", choices=("major", "minor"), required=True)
    p.add_argument(
        "--wait", action="store_true", help="run the compaction here and wait for it to finish"
    )
    _engine_args(p)
    p.set_defaults(func=_compact)

    p = subparsers.add_parser("compactions", help="compaction queue and history (SHOW COMPACTIONS)")
    _common(p)
    p.add_argument("--namespace", help="bind to this namespace: only its tables' compactions")
    p.set_defaults(func=_compactions)

    p = subparsers.add_parser(
        "compactor",
        help="run the initiator, workers, cleaner and housekeeper (a daemon; --once: one pass)",
    )
    _common(p)
    p.add_argument("--once", action="store_true", help="one pass, then exit")
    p.add_argument("--workers", type=int, default=1, help="worker threads (default 1)")
    p.add_argument("--no-initiator", action="store_true", help="only run queued requests")
    p.add_argument("--no-cleaner", action="store_true", help="do not delete obsolete files")
    p.add_argument(
        "--check-interval", type=float, default=300.0, metavar="S",
        help="initiator interval (hive.compactor.check.interval, default 300)",
    )  # fmt: skip
    p.add_argument(
        "--cleaner-interval", type=float, default=5.0, metavar="S",
        help="cleaner interval (hive.compactor.cleaner.run.interval, default 5)",
    )  # fmt: skip
    p.add_argument("--poll", type=float, default=5.0, metavar="S", help="idle worker poll interval")
    p.add_argument(
        "--no-housekeeper", action="store_true",
        help="do not abort timed-out txns or purge metastore records here",
    )  # fmt: skip
    p.add_argument(
        "--housekeeping-interval", type=float, default=DEFAULT_INTERVAL_S, metavar="S",
        help=f"housekeeper interval (default {DEFAULT_INTERVAL_S:g})",
    )  # fmt: skip
    _engine_args(p)
    p.set_defaults(func=_compactor)
