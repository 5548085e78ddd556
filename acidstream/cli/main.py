"""The ``acidstream`` command line: one entry point, sub-commands registered by modules.

Each module in ``_COMMAND_MODULES`` exposes ``register(subparsers)``, which adds
its sub-commands and sets ``func`` (``args -> exit code``) on each. Heavy
dependencies (Spark, Kafka) are imported inside the command functions, so
``acidstream --help`` stays fast.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from acidstream.acid.errors import (
    AcidStreamError,
    CommitConflictError,
    CommitStateUnknownError,
    StorageError,
)
from acidstream.txn.storage_options import StorageOptions

__all__ = ["OneLineParser", "add_storage_option", "main", "storage_options_of"]

_COMMAND_MODULES = (
    "acidstream.cli.acid_cmds",
    "acidstream.cli.txn_cmds",
    "acidstream.cli.table_cmds",
    "acidstream.cli.ingest_cmds",
    "acidstream.cli.sink_cmds",
    "acidstream.cli.compaction_cmds",
    "acidstream.cli.housekeeping_cmds",
    "acidstream.cli.recovery_cmds",
    "acidstream.cli.serve_cmds",
    "acidstream.cli.namespace_cmds",
    "acidstream.cli.config_cmds",
    "acidstream.cli.mutation_cmds",
)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit code 2.

    argparse prints its whole usage block before the error; a script that parses the CLI's
    stderr, or a person reading it, wants the one line that says what is wrong (and
    ``--help`` for the rest). Sub-command parsers inherit the class.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="acidstream",
        description="Hive ACID tables: streaming ingest, reads and table tools. "
        "Add --debug anywhere to see the traceback of a failure.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    _add_storage_option(parser)
    return parser


def _add_storage_option(parser: argparse.ArgumentParser) -> None:
    """Give every command that takes ``--warehouse`` the global ``--storage-option k=v``
    (repeatable): the warehouse filesystem's options (endpoint, credentials, region), one
    flag for all commands as ``--warehouse`` and ``--metastore`` are. A command reading
    files without a warehouse (``dump``) adds it itself with :func:`add_storage_option`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _add_storage_option(child)
    options = parser._option_string_actions
    if "--warehouse" in options and "--storage-option" not in options:
        add_storage_option(parser)


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--storage-option NAME=VALUE`` (repeatable) to one command's parser."""
    parser.add_argument(
        "--storage-option",
        dest="storage_option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="the warehouse filesystem's option, repeatable (s3: endpoint_url=..., "
        "key=..., secret=..., client_kwargs.region_name=...); default: none, and "
        "the standard AWS_* environment",
    )


def storage_options_of(args: argparse.Namespace) -> StorageOptions:
    """The ``--storage-option`` flags of a parsed command line (none, or a parser built
    without the flag: empty), parsed once by :func:`main`."""
    given = getattr(args, "storage_options", None)
    if isinstance(given, StorageOptions):
        return given
    return StorageOptions.from_pairs(getattr(args, "storage_option", None) or [])


EXIT_OK = 0
EXIT_ERROR = 1  # a failure acidstream knows: configuration, missing table or file, metastore...
EXIT_USAGE = 2  # the command line itself is wrong (argparse)
EXIT_REJECTED = 3  # ingest: some records were rejected (the good ones are committed)
EXIT_STORAGE = 4  # writing failed: full disk, read-only file system, I/O error, name too long
EXIT_UNKNOWN_COMMIT = 5  # a commit's outcome is unknown: check the table before re-running
EXIT_INTERNAL = 70  # a bug: an exception nobody classified (run with --debug, report it)
EXIT_CONFLICT = 75  # a mutation lost a commit conflict (retries used up): nothing written, re-run

_STORAGE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.ENAMETOOLONG, errno.EFBIG}
)


def describe(e: BaseException) -> str:
    """One line for a failure: what failed and why, without a traceback."""
    if isinstance(e, OSError) and not isinstance(e, AcidStreamError) and e.errno is not None:
        code = errno.errorcode.get(e.errno, str(e.errno))
        where = f": {e.filename}" if e.filename else ""
        return f"{e.strerror or e} ({code}){where}"
    text = str(e).strip().splitlines()
    msg = text[0] if text else ""
    return msg or type(e).__name__


def exit_code(e: BaseException) -> int:
    """The exit code of a failure (documented in the README)."""
    if isinstance(e, CommitStateUnknownError):
        return EXIT_UNKNOWN_COMMIT
    if isinstance(e, CommitConflictError):
        return EXIT_CONFLICT
    if isinstance(e, StorageError) or (isinstance(e, OSError) and e.errno in _STORAGE_ERRNOS):
        return EXIT_STORAGE
    if isinstance(e, (AcidStreamError, OSError)):
        return EXIT_ERROR
    return EXIT_INTERNAL


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command; a failure becomes one clear line on stderr and a non-zero exit
    code (``--debug`` adds the traceback)."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_in
    args_in = [a for a in args_in if a != "--debug"]
    parser = build_parser()
    args, extra = parser.parse_known_args(args_in)
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
        # Parsed here, once, so a bad pair is the same one-line error for every command.
        args.storage_options = storage_options_of(args)
        code: int = args.func(args)
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        print("acidstream: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if debug:
            traceback.print_exc()
        code = exit_code(e)
        kind = "internal error" if code == EXIT_INTERNAL else "error"
        hint = " (a bug: run with --debug and report it)" if code == EXIT_INTERNAL else ""
        name = f"{type(e).__name__}: " if code == EXIT_INTERNAL else ""
        print(f"acidstream: {kind}: {name}{describe(e)}{hint}", file=sys.stderr)
        return code
    return code


if __name__ == "__main__":
    sys.exit(main())
