"""``acidstream housekeeping``: one housekeeping pass over the metastore, with a summary.

Aborts txns whose heartbeat is older than ``--txn-timeout`` and purges obsolete records
(``docs/housekeeping.md``). Long-running processes run the same pass periodically with
:class:`recovery.housekeeper.Housekeeper`.
"""

from __future__ import annotations

import argparse

from recovery.housekeeper import Housekeeper
from txn.config import StoreConfig
from txn.housekeeping_sql import DEFAULT_HISTORY_RETENTION_S
from txn.store import DEFAULT_TXN_TIMEOUT_S

__all__ = ["register"]


def _housekeeping(args: argparse.Namespace) -> int:
    config = StoreConfig.resolve(metastore=args.metastore, warehouse=args.warehouse)
    # Listing first, read-only: a missing metastore is reported, not created.
    config.open(read_only=True).close()
    with Housekeeper(
        config.metastore_url,
        txn_timeout_s=args.txn_timeout,
        history_retention_s=args.retention,
    ) as keeper:
        report = keeper.run_once()
    rows = [*report.rows(), *(("failed", e) for e in report.errors)]
    width = max(len(step) for step, _ in rows)
    print(f"{'step'.ljust(width)}  result")
    print(f"{'-' * width}  ------")
    for step, result in rows:
        print(f"{step.ljust(width)}  {result}")
    print(f"pass took {report.duration_s * 1000:.0f} ms")
    return 1 if report.errors else 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``housekeeping`` to the ``acidstream`` parser."""
    p = subparsers.add_parser(
        "housekeeping",
        help="abort timed-out txns and purge obsolete metastore records (one pass)",
    )
    p.add_argument("--metastore", metavar="URL", help="sqlite:///path or postgresql://...")
    p.add_argument("--warehouse", metavar="PATH", help="warehouse root directory")
    p.add_argument(
        "--txn-timeout",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_TXN_TIMEOUT_S,
        help="abort open txns without a heartbeat for this long "
        f"(default {DEFAULT_TXN_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--retention",
        metavar="SECONDS",
        type=float,
        help="keep records of committed txns this long, at least the txn timeout "
        f"(default {DEFAULT_HISTORY_RETENTION_S:g}, or the timeout if longer)",
    )
    p.set_defaults(func=_housekeeping)
