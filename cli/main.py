"""The ``acidstream`` command line: one entry point, sub-commands registered by modules.

Each module in ``_COMMAND_MODULES`` exposes ``register(subparsers)``, which adds
its sub-commands and sets ``func`` (``args -> exit code``) on each. Heavy
dependencies (Spark, Kafka) are imported inside the command functions, so
``acidstream --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from acid.errors import AcidStreamError

__all__ = ["main"]

_COMMAND_MODULES = (
    "cli.acid_cmds",
    "cli.txn_cmds",
    "cli.ingest_cmds",
    "cli.sink_cmds",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acidstream", description="Hive ACID tables: streaming ingest, reads and table tools."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command; errors become one clear line on stderr and a non-zero exit."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse cannot take positionals after options (``ingest T --format json a.jsonl``);
    # commands that read files collect the trailing ones themselves.
    if (
        extra
        and getattr(args, "trailing_files", False)
        and not any(x.startswith("-") for x in extra)
    ):
        args.files = [*args.files, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        code: int = args.func(args)
    except AcidStreamError as e:
        print(f"acidstream: error: {e}", file=sys.stderr)
        return 1
    except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError) as e:
        print(f"acidstream: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("acidstream: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
