"""``acidstream serve``: the Flume-style HTTP ingest server (``acidstream.ingest.http``).

``acidstream serve CONFIG [--host H] [--port P] [--metastore URL] [--warehouse PATH]``
reads ``configs/http_ingest.yaml`` (or another file of its shape), merged with the
environment and these arguments, and serves until SIGTERM (which drains: every request
received is committed and answered first). ``--port 0`` picks a free port; the address is
printed as ``acidstream serve: listening on http://HOST:PORT`` once the server accepts
requests. ``python -m acidstream.cli.serve_cmds`` runs the same command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["register"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", metavar="CONFIG", help="YAML configuration (configs/http_ingest.yaml)")
    p.add_argument("--host", help="listen address (overrides listen.host)")
    p.add_argument(
        "--port", type=int, help="listen port; 0 picks a free one (overrides listen.port)"
    )
    p.add_argument(
        "--metastore", help="metastore URL (default: $ACIDSTREAM_METASTORE or the embedded store)"
    )
    p.add_argument(
        "--warehouse", help="warehouse root (default: $ACIDSTREAM_WAREHOUSE or ./warehouse)"
    )
    from acidstream.cli.main import add_storage_option

    add_storage_option(p)  # here too for `python -m acidstream.cli.serve_cmds`


def register(subparsers: Any) -> None:
    """Add ``serve`` to the ``acidstream`` parser."""
    p = subparsers.add_parser(
        "serve", help="HTTP ingest server: POST newline-delimited records, 200 once committed"
    )
    add_arguments(p)
    p.set_defaults(func=_cmd_serve)


def _cmd_serve(args: argparse.Namespace) -> int:
    from acidstream.cli.main import storage_options_of
    from acidstream.ingest.http.config import ServerConfig
    from acidstream.ingest.http.server import serve

    config = ServerConfig.load(
        args.config,
        overrides={
            "host": args.host,
            "port": args.port,
            "metastore": args.metastore,
            "warehouse": args.warehouse,
            "storage_options": storage_options_of(args),  # over the file's storage_options
        },
    )
    return serve(config)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m acidstream.cli.serve_cmds CONFIG ...``: the command on its own."""
    from acidstream.acid.errors import AcidStreamError
    from acidstream.cli.main import OneLineParser

    parser = OneLineParser(prog="acidstream serve")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return _cmd_serve(args)
    except AcidStreamError as e:
        print(f"acidstream: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
