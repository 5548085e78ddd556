"""Metastore-wide settings: the registry of known keys and the store's get/set.

Some settings belong to the metastore, not to any one client: every writer and every
housekeeper of a metastore must agree on them. The txn timeout is the first
(Hive's ``hive.txn.timeout``): writers heartbeat at a fraction of it
(:func:`heartbeat_interval_s`) and the housekeeper aborts open txns silent for longer.
When each client carried its own copy, a writer with a short value was never reaped by a
default housekeeper and a writer with a long one was aborted while healthy.

Values live in the ``METASTORE_SETTINGS`` table (migration 4, one row per key, as text);
a key without a row has its registered default. Set one with
``acidstream config set KEY VALUE`` or :meth:`SettingsOps.set_setting`. A new setting is
one more :class:`Setting` in :data:`SETTINGS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from acidstream.acid.errors import ConfigError
from acidstream.txn.db import Tx
from acidstream.txn.store_ops import StoreOps

__all__ = [
    "HEARTBEAT_FRACTION",
    "SETTINGS",
    "TXN_TIMEOUT_S",
    "Setting",
    "SettingValue",
    "SettingsOps",
    "heartbeat_interval_s",
    "known_setting",
    "read_setting",
    "setting_value",
    "write_setting",
]

TXN_TIMEOUT_S = "txn_timeout_s"
"""``hive.txn.timeout``: open txns without a heartbeat for this long are aborted."""

HEARTBEAT_FRACTION = 0.5
"""Writers heartbeat every this fraction of the txn timeout (Hive: half of it), so one
late or failed beat still leaves a second chance before the timeout."""


@dataclass(frozen=True)
class Setting:
    """One known metastore setting: its type, default and bounds.

    Attributes:
        key: The name (``txn_timeout_s``).
        default: The value when the metastore has none stored.
        minimum / maximum: Inclusive bounds.
        unit: Shown after the value (``s``).
        help: What it is for, one line (``acidstream config get``).
    """

    key: str
    default: float
    minimum: float
    maximum: float
    unit: str
    help: str

    def parse(self, value: str | float) -> float:
        """``value`` (text from the CLI or the database, or a number) checked and typed.

        Raises:
            ConfigError: not a finite number, or out of bounds; the message names the key.
        """
        try:
            number = float(value)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{self.key} must be a number of seconds, not {value!r}") from e
        if not math.isfinite(number) or not self.minimum <= number <= self.maximum:
            raise ConfigError(
                f"{self.key} must be between {self.minimum:g} and {self.maximum:g}"
                f"{self.unit}, not {value!r}"
            )
        return number

    def render(self, value: float) -> str:
        """The value as stored and printed (``300``, ``2.5``)."""
        return f"{value:g}"


SETTINGS: dict[str, Setting] = {
    s.key: s
    for s in (
        Setting(
            key=TXN_TIMEOUT_S,
            default=300.0,
            # Below a second a heartbeat (every half of it) would race the
            # reaper on any loaded host; above a day a dead writer's locks block too long.
            minimum=1.0,
            maximum=86400.0,
            unit="s",
            help="open txns without a heartbeat for this long are aborted "
            "(hive.txn.timeout); writers heartbeat every half of it",
        ),
    )
}
"""Every known setting by key. Add new ones here, with their defaults beside them."""


@dataclass(frozen=True)
class SettingValue:
    """A setting's current value in one metastore (``acidstream config get``)."""

    setting: Setting
    value: float
    is_default: bool

    @property
    def key(self) -> str:
        return self.setting.key


def known_setting(key: str) -> Setting:
    """The registry entry of ``key``.

    Raises:
        ConfigError: an unknown key; the message lists the known ones.
    """
    try:
        return SETTINGS[key]
    except KeyError:
        raise ConfigError(
            f"unknown metastore setting {key!r}; known settings: {', '.join(sorted(SETTINGS))}"
        ) from None


def heartbeat_interval_s(txn_timeout_s: float) -> float:
    """How often a writer heartbeats under a metastore timeout of ``txn_timeout_s``."""
    return txn_timeout_s * HEARTBEAT_FRACTION


def read_setting(tx: Tx, key: str) -> str | None:
    """The raw stored text of ``key`` (``None``: no row, or a schema before version 4,
    opened read-only, which has no settings table)."""
    if not tx.has_table("METASTORE_SETTINGS"):
        return None
    row = tx.one("SELECT SETTING_VALUE FROM METASTORE_SETTINGS WHERE SETTING_KEY = ?", key)
    return None if row is None else str(row[0])


def write_setting(tx: Tx, key: str, value: str) -> None:
    """Store the raw text of ``key`` (insert or replace)."""
    tx.x(
        "INSERT INTO METASTORE_SETTINGS (SETTING_KEY, SETTING_VALUE) VALUES (?, ?) "
        "ON CONFLICT (SETTING_KEY) DO UPDATE SET SETTING_VALUE = excluded.SETTING_VALUE",
        key,
        value,
    )


def setting_value(tx: Tx, key: str) -> SettingValue:
    """The typed value of ``key`` in this DB transaction (its default when unset).

    Raises:
        ConfigError: unknown key, or a stored value that is not valid (edited by hand).
    """
    setting = known_setting(key)
    raw = read_setting(tx, key)
    if raw is None:
        return SettingValue(setting, setting.default, True)
    try:
        value = setting.parse(raw)
    except ConfigError as e:
        raise ConfigError(
            f"the metastore's stored {key} is invalid ({e}); "
            f"fix it with `acidstream config set {key} VALUE`"
        ) from e
    return SettingValue(setting, value, False)


class SettingsOps(StoreOps):
    """Metastore settings, the :class:`~acidstream.txn.store.TxnStore` methods (one DB transaction
    each)."""

    def setting(self, key: str) -> SettingValue:
        """The current value of ``key`` (its default when never set).

        Raises:
            ConfigError: unknown key (the message lists the known ones).
        """
        known_setting(key)
        return self._db.run(
            "setting", lambda tx: setting_value(tx, key), write=False, idempotent=True
        )

    def settings(self) -> list[SettingValue]:
        """Every known setting's current value, by key."""
        return self._db.run(
            "settings",
            lambda tx: [setting_value(tx, k) for k in sorted(SETTINGS)],
            write=False,
            idempotent=True,
        )

    def set_setting(self, key: str, value: str | float) -> SettingValue:
        """Validate and store ``value`` for ``key``; returns the stored value.

        Takes effect for running writers at their next heartbeat and for housekeepers at
        their next pass (both read it from the metastore each time).

        Raises:
            ConfigError: unknown key, or a value of the wrong type or out of bounds.
        """
        setting = known_setting(key)
        number = setting.parse(value)
        self._db.run(
            "set_setting",
            lambda tx: write_setting(tx, key, setting.render(number)),
            idempotent=True,
        )
        return SettingValue(setting, number, False)

    def txn_timeout_s(self) -> float:
        """The metastore's txn timeout (``hive.txn.timeout``), in seconds."""
        return self.setting(TXN_TIMEOUT_S).value
