"""Read snapshots: Hive's ``ValidTxnList`` and ``ValidWriteIdList`` with their exact string forms.

Sources: ``storage-api/.../common/ValidReadTxnList.java``,
``ValidReaderWriteIdList.java``, ``ValidCompactorWriteIdList.java`` and
``ValidTxnWriteIdList.java``. ``Long.MAX_VALUE`` stands for "nothing open".
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from acidstream.acid.errors import AcidFormatError

__all__ = [
    "LONG_MAX",
    "RangeResponse",
    "ValidCompactorWriteIdList",
    "ValidTxnList",
    "ValidTxnWriteIdList",
    "ValidWriteIdList",
]

LONG_MAX = 9223372036854775807


class RangeResponse(enum.Enum):
    """How much of a range of ids is valid (or aborted)."""

    NONE = "NONE"
    SOME = "SOME"
    ALL = "ALL"


def _parse_ids(text: str, what: str) -> list[int]:
    if not text:
        return []
    try:
        return [int(x) for x in text.split(",")]
    except ValueError as e:
        raise AcidFormatError(f"bad {what} id list {text!r}") from e


def _range_valid(hwm: int, exceptions: tuple[int, ...], lo: int, hi: int) -> RangeResponse:
    if hwm < lo:
        return RangeResponse.NONE
    if exceptions and exceptions[0] > hi:
        return RangeResponse.ALL
    count = max(0, hi - hwm)
    count += bisect.bisect_right(exceptions, hi) - bisect.bisect_left(exceptions, lo)
    if count == 0:
        return RangeResponse.ALL
    if count == hi - lo + 1:
        return RangeResponse.NONE
    return RangeResponse.SOME


def _range_aborted(hwm: int, aborted: tuple[int, ...], lo: int, hi: int) -> RangeResponse:
    if hwm < lo:
        return RangeResponse.NONE
    count = bisect.bisect_right(aborted, hi) - bisect.bisect_left(aborted, lo)
    if count == 0:
        return RangeResponse.NONE
    if count == hi - lo + 1:
        return RangeResponse.ALL
    return RangeResponse.SOME


def _contains(sorted_ids: tuple[int, ...], x: int) -> bool:
    i = bisect.bisect_left(sorted_ids, x)
    return i < len(sorted_ids) and sorted_ids[i] == x


def _join(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


@dataclass(frozen=True)
class ValidTxnList:
    """Hive's ``ValidReadTxnList``: the global txn snapshot ``hwm:minOpen:open:aborted``.

    The default instance treats every transaction as valid, like Hive's default constructor.
    """

    high_watermark: int = LONG_MAX
    open_txns: tuple[int, ...] = ()
    aborted_txns: tuple[int, ...] = ()
    min_open_txn: int = LONG_MAX
    _exceptions: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "open_txns", tuple(sorted(self.open_txns)))
        object.__setattr__(self, "aborted_txns", tuple(sorted(self.aborted_txns)))
        object.__setattr__(self, "_exceptions", tuple(sorted(self.open_txns + self.aborted_txns)))

    @classmethod
    def from_string(cls, text: str | None) -> ValidTxnList:
        """Parse ``writeToString`` output; empty or ``None`` means everything valid."""
        if not text:
            return cls()
        values = text.split(":")
        try:
            hwm, min_open = int(values[0]), int(values[1])
        except (ValueError, IndexError) as e:
            raise AcidFormatError(f"bad ValidTxnList {text!r}") from e
        open_ids = _parse_ids(values[2], "open txn") if len(values) > 2 else []
        aborted = _parse_ids(values[3], "aborted txn") if len(values) > 3 else []
        return cls(hwm, tuple(open_ids), tuple(aborted), min_open)

    def to_string(self) -> str:
        """Hive's ``writeToString``."""
        return f"{self.high_watermark}:{self.min_open_txn}:{_join(self.open_txns)}:{_join(self.aborted_txns)}"

    __str__ = to_string

    def is_txn_valid(self, txn_id: int) -> bool:
        return txn_id <= self.high_watermark and not _contains(self._exceptions, txn_id)

    def is_txn_aborted(self, txn_id: int) -> bool:
        return _contains(self.aborted_txns, txn_id)

    def is_txn_range_valid(self, lo: int, hi: int) -> RangeResponse:
        return _range_valid(self.high_watermark, self._exceptions, lo, hi)

    def is_txn_range_aborted(self, lo: int, hi: int) -> RangeResponse:
        return _range_aborted(self.high_watermark, self.aborted_txns, lo, hi)

    @property
    def invalid_txns(self) -> tuple[int, ...]:
        return self._exceptions


@dataclass(frozen=True)
class ValidWriteIdList:
    """Hive's ``ValidReaderWriteIdList`` for one table: ``db.table:hwm:minOpen:open:aborted``.

    ``min_open_write_id`` is forced to ``LONG_MAX`` when there are no exceptions,
    as Hive's constructor does. The default instance treats every write id as valid.
    """

    table_name: str | None = None
    high_watermark: int = LONG_MAX
    open_write_ids: tuple[int, ...] = ()
    aborted_write_ids: tuple[int, ...] = ()
    min_open_write_id: int = LONG_MAX
    _exceptions: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "open_write_ids", tuple(sorted(self.open_write_ids)))
        object.__setattr__(self, "aborted_write_ids", tuple(sorted(self.aborted_write_ids)))
        exc = tuple(sorted(self.open_write_ids + self.aborted_write_ids))
        object.__setattr__(self, "_exceptions", exc)
        if not exc:
            object.__setattr__(self, "min_open_write_id", LONG_MAX)

    @classmethod
    def from_string(cls, text: str | None) -> ValidWriteIdList:
        """Parse ``writeToString`` output; empty or ``None`` means everything valid."""
        if not text:
            return cls()
        values = text.split(":")
        try:
            table = None if values[0].lower() == "null" else values[0]
            hwm, min_open = int(values[1]), int(values[2])
        except (ValueError, IndexError) as e:
            raise AcidFormatError(f"bad ValidWriteIdList {text!r}") from e
        open_ids = _parse_ids(values[3], "open write") if len(values) > 3 else []
        aborted = _parse_ids(values[4], "aborted write") if len(values) > 4 else []
        return cls(table, hwm, tuple(open_ids), tuple(aborted), min_open)

    def to_string(self) -> str:
        """Hive's ``writeToString``."""
        table = self.table_name if self.table_name is not None else "null"
        return (
            f"{table}:{self.high_watermark}:{self.min_open_write_id}:"
            f"{_join(self.open_write_ids)}:{_join(self.aborted_write_ids)}"
        )

    __str__ = to_string

    @property
    def invalid_write_ids(self) -> tuple[int, ...]:
        return self._exceptions

    def capped(self, hwm: int | None) -> ValidWriteIdList:
        """This list as it was when ``hwm`` was the table's last write id (its high
        watermark lowered, later exceptions dropped); itself when ``hwm`` is ``None`` or
        not lower. Time travel to a write id, and the cleaner's view of a compaction."""
        if hwm is None or hwm >= self.high_watermark:
            return self
        opens = tuple(x for x in self.open_write_ids if x <= hwm)
        return ValidWriteIdList(
            self.table_name,
            hwm,
            opens,
            tuple(x for x in self.aborted_write_ids if x <= hwm),
            min(opens) if opens else LONG_MAX,
        )

    def is_write_id_valid(self, write_id: int) -> bool:
        return write_id <= self.high_watermark and not _contains(self._exceptions, write_id)

    def is_write_id_aborted(self, write_id: int) -> bool:
        return _contains(self.aborted_write_ids, write_id)

    def is_valid_base(self, write_id: int) -> bool:
        """``isValidBase``: ``write_id < minOpenWriteId and write_id <= hwm``."""
        return write_id < self.min_open_write_id and write_id <= self.high_watermark

    def is_write_id_range_valid(self, lo: int, hi: int) -> RangeResponse:
        return _range_valid(self.high_watermark, self._exceptions, lo, hi)

    def is_write_id_range_aborted(self, lo: int, hi: int) -> RangeResponse:
        return _range_aborted(self.high_watermark, self.aborted_write_ids, lo, hi)

    def is_compactor(self) -> bool:
        return False


@dataclass(frozen=True)
class ValidCompactorWriteIdList(ValidWriteIdList):
    """Hive's ``ValidCompactorWriteIdList``: the compactor's view of a table.

    Its hwm is the lowest open write id minus 1 (exceptions above it are dropped);
    every remaining exception is aborted, and a range is valid only when it is
    entirely at or below the hwm.
    """

    @classmethod
    def from_table_state(
        cls,
        table_name: str | None,
        high_watermark: int,
        open_write_ids: Iterable[int],
        aborted_write_ids: Iterable[int],
    ) -> ValidCompactorWriteIdList:
        """Build it as ``TxnUtils.createValidCompactWriteIdList`` does."""
        opens = sorted(open_write_ids)
        hwm = high_watermark
        if opens and opens[0] <= hwm:
            hwm = opens[0] - 1
        aborted = tuple(a for a in sorted(aborted_write_ids) if a <= hwm)
        return cls(table_name, hwm, (), aborted)

    def is_write_id_range_valid(self, lo: int, hi: int) -> RangeResponse:
        return RangeResponse.ALL if self.high_watermark >= hi else RangeResponse.NONE

    def is_write_id_aborted(self, write_id: int) -> bool:
        return _contains(self.invalid_write_ids, write_id)

    def is_compactor(self) -> bool:
        return True


@dataclass(frozen=True)
class ValidTxnWriteIdList:
    """Hive's ``ValidTxnWriteIdList``: ``<txnId>$<tableList>$<tableList>...``."""

    txn_id: int
    tables: Mapping[str, ValidWriteIdList]

    def to_string(self) -> str:
        parts = [str(self.txn_id)] + [w.to_string() for w in self.tables.values()]
        return "$".join(parts)

    @classmethod
    def from_string(cls, text: str) -> ValidTxnWriteIdList:
        parts = text.split("$")
        try:
            txn = int(parts[0])
        except ValueError as e:
            raise AcidFormatError(f"bad ValidTxnWriteIdList {text!r}") from e
        lists = [ValidWriteIdList.from_string(p) for p in parts[1:] if p]
        return cls(txn, {(w.table_name or ""): w for w in lists})

    def table(self, full_name: str) -> ValidWriteIdList | None:
        return self.tables.get(full_name)
