"""``acidstream housekeeping``: one housekeeping pass over the metastore, with a summary.

Aborts txns whose heartbeat is older than the metastore's txn timeout (``acidstream config
get txn_timeout_s``: a setting of the metastore, not of this command, so it is the one
every writer heartbeats from) and purges obsolete records
(``docs/housekeeping.md``). Long-running processes run the same pass periodically with
:class:`acidstream.txn.housekeeper.Housekeeper`.
"""

from __future__ import annotations

import argparse

from acidstream.cli.main import storage_options_of
from acidstream.txn.config import StoreConfig
from acidstream.txn.housekeeper import Housekeeper
from acidstream.txn.housekeeping_sql import DEFAULT_HISTORY_RETENTION_S

__all__ = ["register"]


def _housekeeping(args: argparse.Namespace) -> int:
    config = StoreConfig.resolve(
        metastore=args.metastore,
        warehouse=args.warehouse,
        storage_options=storage_options_of(args),
    )
    # Listing first, read-only: a missing metastore is reported, not created.
    config.open(read_only=True).close()
    with Housekeeper(
        config.metastore_url,
        history_retention_s=args.retention,
    ) as keeper:
        report = keeper.run_once()
    timeout = "unknown" if report.txn_timeout_s is None else f"{report.txn_timeout_s:g} s"
    rows = [
        ("txn timeout (metastore)", timeout),
        *report.rows(),
        *(("failed", e) for e in report.errors),
    ]
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
        "--retention",
        metavar="SECONDS",
        type=float,
        help="keep records of committed txns this long, at least the metastore's txn timeout "
        f"(default {DEFAULT_HISTORY_RETENTION_S:g}, or the timeout if longer)",
    )
    p.set_defaults(func=_housekeeping)
