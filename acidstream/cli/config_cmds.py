"""``acidstream config get [KEY]`` / ``acidstream config set KEY VALUE``: metastore settings.

Settings every client of a metastore must agree on live in the metastore
(:mod:`acidstream.txn.settings`), the txn timeout first: writers heartbeat from it and housekeepers
abort by it, so it is set here once instead of in each client.
"""

from __future__ import annotations

import argparse

from acidstream.cli.output import print_table
from acidstream.cli.txn_cmds import _common, _open
from acidstream.txn.settings import SETTINGS, SettingValue, known_setting

__all__ = ["register"]


def _shown(v: SettingValue) -> str:
    return f"{v.setting.render(v.value)}{v.setting.unit}"


def _get(args: argparse.Namespace) -> int:
    if args.key is not None:
        known_setting(args.key)  # an unknown key is refused before the store is opened
    with _open(args, read_only=True) as store:
        values = store.settings() if args.key is None else [store.setting(args.key)]
    if args.key is not None:
        print(values[0].setting.render(values[0].value))  # bare, for scripts
        return 0
    print_table(
        ("setting", "value", "source", "default", "meaning"),
        [
            (
                v.key,
                _shown(v),
                "default" if v.is_default else "set",
                f"{v.setting.render(v.setting.default)}{v.setting.unit}",
                v.setting.help,
            )
            for v in values
        ],
    )
    return 0


def _set(args: argparse.Namespace) -> int:
    setting = known_setting(args.key)
    setting.parse(args.value)  # a bad value is refused before the store is opened
    # existing: a mistyped --metastore reports "no metastore at URL" instead of making one.
    with _open(args, existing=True) as store:
        value = store.set_setting(args.key, args.value)
    print(f"{value.key} = {_shown(value)}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``config get`` and ``config set`` to the ``acidstream`` parser."""
    p = subparsers.add_parser(
        "config", help="show or change the metastore's settings (txn_timeout_s...)"
    )
    sub = p.add_subparsers(dest="config_command", required=True, metavar="get|set")
    known = ", ".join(sorted(SETTINGS))
    g = sub.add_parser("get", help="print one setting, or a table of every setting")
    g.add_argument("key", nargs="?", metavar="KEY", help=f"one of: {known}")
    _common(g)
    g.set_defaults(func=_get)
    s = sub.add_parser("set", help="store a setting in the metastore (validated)")
    s.add_argument("key", metavar="KEY", help=f"one of: {known}")
    s.add_argument("value", metavar="VALUE")
    _common(s)
    s.set_defaults(func=_set)
