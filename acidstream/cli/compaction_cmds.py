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
import datetime as dt
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from acid.errors import ConfigError
from acid.table_name import TableName
from acidstream.cli.output import print_table
from compaction.config import CompactorConfig
from compaction.service import Compactor
from recovery.housekeeper import DEFAULT_INTERVAL_S, Housekeeper, HousekeepingReport
from txn.compaction_sql import STATE_NAMES, CompactionQueue
from txn.config import StoreConfig
from txn.namespaces import refuse_link
from txn.store import DEFAULT_TXN_TIMEOUT_S, TxnStore

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


def _open(args: argparse.Namespace) -> TxnStore:
    return StoreConfig.resolve(metastore=args.metastore, warehouse=args.warehouse).open()


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


def _compact(args: argparse.Namespace) -> int:
    refuse_link(args.table, action="compact")  # links are read-only (docs/namespaces.md)
    name = TableName.parse(args.table)
    with _open(args) as store:
        queue = CompactionQueue(store)
        cq_id, accepted = queue.request(
            name.db, name.table, args.partition, major=args.type == "major"
        )
        target = f"{name}/{args.partition}" if args.partition else str(name)
        if accepted:
            print(f"compaction {cq_id} queued ({args.type}, {target})")
        else:
            print(f"compaction {cq_id} is already queued or working for this target")
        if not args.wait:
            return 0
        compactor = Compactor(
            store, initiator=False, on_event=print, engine=args.engine, spark=_spark(args)
        )
        while True:
            report = compactor.run_once()
            rec = queue.get(cq_id)
            if rec is None or rec.state not in ("i", "w", "r"):
                break
            if rec.state == "r" and not report.cleaned and not report.compactions:
                # Ready for cleaning but older readers are still open: cleaning waits for
                # them (the daemon does it later); the compaction itself is done.
                print(f"compaction {cq_id}: ready for cleaning (waiting for older readers)")
                return 0
            if rec.state == "w" and not report.compactions:
                time.sleep(1.0)  # another process's worker has it: poll its progress
        state = STATE_NAMES.get(rec.state, rec.state) if rec else "gone"
        print(f"compaction {cq_id}: {state}")
        return 0 if rec is not None and rec.state in ("s", "r") else 1


def _compactions(args: argparse.Namespace) -> int:
    with _open(args) as store:
        recs = CompactionQueue(store).show()
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


def _compactor(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise ConfigError("--workers must be >= 1")
    config = CompactorConfig(
        check_interval_s=args.check_interval,
        cleaner_interval_s=args.cleaner_interval,
        worker_poll_s=args.poll,
    )
    store_config = StoreConfig.resolve(metastore=args.metastore, warehouse=args.warehouse)
    # The daemon keeps the metastore healthy too (Hive runs AcidHouseKeeperService in the
    # same metastore process as its compactor threads): dead writers' txns are aborted, so
    # their locks stop blocking compaction and cleaning.
    keeper = (
        None
        if args.no_housekeeper
        else Housekeeper(
            store_config.metastore_url,
            interval_s=args.housekeeping_interval,
            txn_timeout_s=args.txn_timeout,
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
            engine=args.engine,
            spark=_spark(args),
        )
        if args.once:
            if keeper is not None:
                with keeper:
                    _print_housekeeping(keeper.run_once())
            compactor.run_once()
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
    p.add_argument("--partition", metavar="K=V[/K=V]", help="one partition")
    p.add_argument("--type", choices=("major", "minor"), required=True)
    p.add_argument(
        "--wait", action="store_true", help="run the compaction here and wait for it to finish"
    )
    _engine_args(p)
    p.set_defaults(func=_compact)

    p = subparsers.add_parser("compactions", help="compaction queue and history (SHOW COMPACTIONS)")
    _common(p)
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
    p.add_argument(
        "--txn-timeout", type=float, default=DEFAULT_TXN_TIMEOUT_S, metavar="S",
        help=f"abort open txns without a heartbeat for this long (default {DEFAULT_TXN_TIMEOUT_S:g})",
    )  # fmt: skip
    _engine_args(p)
    p.set_defaults(func=_compactor)
