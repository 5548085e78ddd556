"""Compactor settings: Hive's defaults, and the per-table ``compactorthreshold.*`` overrides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from acidstream.acid.errors import ConfigError
from acidstream.acid.writer import OrcWriterOptions

__all__ = ["CompactorConfig", "table_thresholds"]

THRESHOLD_PREFIX = "compactorthreshold."
"""Table properties ``compactorthreshold.<hive conf name>`` override a threshold."""

# Hive conf name -> CompactorConfig field, for the per-table overrides.
_HIVE_NAMES = {
    "hive.compactor.delta.num.threshold": "delta_num_threshold",
    "hive.compactor.delta.pct.threshold": "delta_pct_threshold",
    "hive.compactor.abortedtxn.threshold": "aborted_txn_threshold",
    "hive.compactor.aborted.txn.time.threshold": "aborted_txn_time_threshold_s",
}


@dataclass(frozen=True, kw_only=True)
class CompactorConfig:
    """What the initiator, workers and cleaner do, with Hive's defaults (spec §5.2).

    Attributes:
        delta_num_threshold: ``hive.compactor.delta.num.threshold``: more deltas than this
            (strictly) start a compaction.
        delta_pct_threshold: ``hive.compactor.delta.pct.threshold``: delta size over base
            size above this starts a major compaction.
        aborted_txn_threshold: ``hive.compactor.abortedtxn.threshold``: this many aborted
            txns on a target start a major compaction.
        aborted_txn_time_threshold_s: ``hive.compactor.aborted.txn.time.threshold``: an
            abort older than this starts a minor compaction.
        failed_compacts_threshold: ``...initiator.failed.compacts.threshold``: after this
            many consecutive failures the initiator stops queueing the target...
        failed_retry_time_s: ...until this long after the last failure.
        check_interval_s: ``hive.compactor.check.interval`` (initiator loop).
        cleaner_interval_s: ``hive.compactor.cleaner.run.interval``.
        worker_poll_s: how often an idle worker looks at the queue.
        worker_timeout_s: ``hive.compactor.worker.timeout``: a ``working`` request older
            than this whose txn is gone goes back to ``initiated``.
        heartbeat_s: how often a worker heartbeats its compactor txn (Hive: txn timeout/2).
        forget_aborted_after_s: the cleaner forgets an aborted txn whose data is gone only
            this long after it aborted (``hive.txn.timeout``; see ``Cleaner``).
        orc: ORC settings of the files the worker writes.
    """

    delta_num_threshold: int = 10
    delta_pct_threshold: float = 0.1
    aborted_txn_threshold: int = 1000
    aborted_txn_time_threshold_s: float = 12 * 3600.0
    failed_compacts_threshold: int = 2
    failed_retry_time_s: float = 7 * 24 * 3600.0
    check_interval_s: float = 300.0
    cleaner_interval_s: float = 5.0
    worker_poll_s: float = 5.0
    worker_timeout_s: float = 86400.0
    heartbeat_s: float = 150.0
    forget_aborted_after_s: float = 300.0
    orc: OrcWriterOptions = field(default_factory=OrcWriterOptions)

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, int | float) and not isinstance(v, bool) and v < 0:
                raise ConfigError(f"compactor setting {f.name} must be >= 0, got {v}")
        for name in ("check_interval_s", "cleaner_interval_s", "worker_poll_s", "heartbeat_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"compactor setting {name} must be > 0")


def table_thresholds(config: CompactorConfig, params: Mapping[str, str]) -> CompactorConfig:
    """``config`` with a table's ``compactorthreshold.<hive name>`` properties applied.

    Raises:
        ConfigError: an override that is not a number, naming the property.
    """
    changes: dict[str, Any] = {}
    for key, value in params.items():
        k = key.lower()
        if not k.startswith(THRESHOLD_PREFIX):
            continue
        name = _HIVE_NAMES.get(k[len(THRESHOLD_PREFIX) :])
        if name is None:
            continue
        current = getattr(config, name)
        try:
            if name == "aborted_txn_time_threshold_s":
                changes[name] = _seconds(value)
            else:
                changes[name] = type(current)(value.strip())
        except ValueError as e:
            raise ConfigError(f"table property {key}={value!r} is not a number") from e
    return replace(config, **changes) if changes else config


def _seconds(text: str) -> float:
    """A Hive time value: a number of seconds, or with a unit suffix (``12h``, ``30m``)."""
    t = text.strip().lower()
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    for suffix in ("ms", "s", "m", "h", "d"):
        if t.endswith(suffix):
            return float(t[: -len(suffix)]) * units[suffix]
    return float(t)
