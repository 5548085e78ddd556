"""Directory and file names of a Hive ACID table, formatted and parsed as Hive does.

Sources: ``AcidUtils`` (``deltaSubdir``, ``baseDir``, ``parsedDelta``,
``BUCKET_PATTERN``, ``ORIGINAL_PATTERN``) and ``AcidConstants``. The ``%0Nd``
widths are minimum widths, so the parsers accept wider numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ACID_FORMAT_FILE",
    "ACID_VERSION",
    "BASE_PREFIX",
    "DELETE_DELTA_PREFIX",
    "DELTA_PREFIX",
    "METADATA_FILE",
    "ORIGINALS_BASE_WRITE_ID",
    "SIDE_FILE_SUFFIX",
    "OriginalFileName",
    "ParsedBase",
    "ParsedDelta",
    "base_dir_name",
    "bucket_file_name",
    "delta_dir_name",
    "is_acid_hidden_ok",
    "is_hidden",
    "parse_bucket_file",
    "parse_dir_name",
    "parse_original_file",
    "side_file_name",
]

BASE_PREFIX = "base_"
DELTA_PREFIX = "delta_"
DELETE_DELTA_PREFIX = "delete_delta_"
VISIBILITY_PREFIX = "_v"
BUCKET_PREFIX = "bucket_"
SIDE_FILE_SUFFIX = "_flush_length"
ACID_FORMAT_FILE = "_orc_acid_version"
METADATA_FILE = "_metadata_acid"
ACID_VERSION = 2
ORIGINALS_BASE_WRITE_ID = -9223372036854775808  # Long.MIN_VALUE: Hive 2's originals-only base
MAX_STATEMENTS_PER_TXN = 10000

_NUM = r"[0-9]+"
# Hive 2's first major compaction of a table holding only original files writes
# base_-9223372036854775808 (Long.MIN_VALUE); AcidUtils.parseBase takes any long.
_BASE_RE = re.compile(rf"^base_(-?{_NUM})(?:_v({_NUM}))?$")
_DELTA_RE = re.compile(rf"^(delete_delta|delta)_({_NUM})_({_NUM})(?:_({_NUM}))?(?:_v({_NUM}))?$")
_BUCKET_RE = re.compile(rf"^bucket_({_NUM})(?:_({_NUM}))?$")
_ORIGINAL_RE = re.compile(rf"^({_NUM})_({_NUM})(?:_copy_({_NUM}))?$")


@dataclass(frozen=True, slots=True)
class ParsedBase:
    """A ``base_N[_vT]`` directory name."""

    write_id: int
    visibility_txn_id: int = 0

    @property
    def name(self) -> str:
        return base_dir_name(self.write_id, visibility_txn_id=self.visibility_txn_id)


@dataclass(frozen=True, slots=True)
class ParsedDelta:
    """A ``[delete_]delta_min_max[_stmt][_vT]`` directory name.

    ``statement_id`` is -1 when the name has no statement suffix, and
    ``visibility_txn_id`` is 0 when it has no ``_v`` suffix, as in Hive.
    """

    min_write_id: int
    max_write_id: int
    statement_id: int = -1
    visibility_txn_id: int = 0
    is_delete: bool = False

    @property
    def name(self) -> str:
        return delta_dir_name(
            self.min_write_id,
            self.max_write_id,
            statement_id=self.statement_id,
            visibility_txn_id=self.visibility_txn_id,
            delete=self.is_delete,
        )

    @property
    def may_contain_side_file(self) -> bool:
        """Hive's ``ParsedDeltaLight.mayContainSideFile``: only streaming insert deltas."""
        return (
            not self.is_delete
            and self.min_write_id != self.max_write_id
            and self.visibility_txn_id <= 0
        )

    def sort_key(self) -> tuple[int, int, int]:
        """Hive's ``ParsedDeltaLight.compareTo`` without the path tie-break:
        min ascending, max descending (wider first), statement id ascending."""
        return (self.min_write_id, -self.max_write_id, self.statement_id)


@dataclass(frozen=True, slots=True)
class OriginalFileName:
    """A pre-ACID file name ``N_M[_copy_K]``; ``bucket`` is N."""

    bucket: int
    task: int
    copy: int = 0


def _check_id(value: int, what: str) -> None:
    if value < 0:
        raise ValueError(f"{what} must be >= 0, got {value}")


def base_dir_name(write_id: int, *, visibility_txn_id: int = 0) -> str:
    """``base_%07d`` plus ``_v%07d`` when the visibility txn id is not 0 (write id
    ``ORIGINALS_BASE_WRITE_ID`` gives Hive 2's ``base_-9223372036854775808``)."""
    if write_id != ORIGINALS_BASE_WRITE_ID:
        _check_id(write_id, "write id")
    name = f"{BASE_PREFIX}{write_id:07d}"
    return _add_visibility(name, visibility_txn_id)


def delta_dir_name(
    min_write_id: int,
    max_write_id: int,
    *,
    statement_id: int = -1,
    visibility_txn_id: int = 0,
    delete: bool = False,
) -> str:
    """``[delete_]delta_%07d_%07d[_%04d][_v%07d]``, in the order of ``baseOrDeltaSubdirPath``."""
    _check_id(min_write_id, "min write id")
    if max_write_id < min_write_id:
        raise ValueError(f"max write id {max_write_id} < min write id {min_write_id}")
    if statement_id < -1 or statement_id >= MAX_STATEMENTS_PER_TXN:
        raise ValueError(
            f"statement id must be in [-1, {MAX_STATEMENTS_PER_TXN}), got {statement_id}"
        )
    prefix = DELETE_DELTA_PREFIX if delete else DELTA_PREFIX
    name = f"{prefix}{min_write_id:07d}_{max_write_id:07d}"
    if statement_id != -1:
        name += f"_{statement_id:04d}"
    return _add_visibility(name, visibility_txn_id)


def _add_visibility(name: str, visibility_txn_id: int) -> str:
    _check_id(visibility_txn_id, "visibility txn id")
    if visibility_txn_id == 0:
        return name
    return f"{name}{VISIBILITY_PREFIX}{visibility_txn_id:07d}"


def parse_dir_name(name: str) -> ParsedBase | ParsedDelta | None:
    """Parse a base or delta directory name; ``None`` for any other name."""
    m = _BASE_RE.match(name)
    if m:
        return ParsedBase(int(m.group(1)), int(m.group(2) or 0))
    m = _DELTA_RE.match(name)
    if m:
        lo, hi = int(m.group(2)), int(m.group(3))
        if hi < lo:
            return None
        return ParsedDelta(
            min_write_id=lo,
            max_write_id=hi,
            statement_id=int(m.group(4)) if m.group(4) is not None else -1,
            visibility_txn_id=int(m.group(5) or 0),
            is_delete=m.group(1) == "delete_delta",
        )
    return None


def bucket_file_name(bucket_id: int, *, attempt_id: int | None = None) -> str:
    """``bucket_%05d`` with the optional ``_attempt`` suffix of direct inserts."""
    _check_id(bucket_id, "bucket id")
    name = f"{BUCKET_PREFIX}{bucket_id:05d}"
    if attempt_id is not None:
        _check_id(attempt_id, "attempt id")
        name += f"_{attempt_id}"
    return name


def parse_bucket_file(name: str) -> tuple[int, int | None] | None:
    """``(bucket_id, attempt_id)`` of a ``bucket_N[_A]`` file; ``None`` otherwise.

    Side files (``..._flush_length``) are not bucket files, as in ``bucketFileFilter``.
    """
    m = _BUCKET_RE.match(name)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)) if m.group(2) is not None else None


def parse_original_file(name: str) -> OriginalFileName | None:
    """Parse ``N_M`` / ``N_M_copy_K`` (``ORIGINAL_PATTERN[_COPY]``); ``None`` otherwise."""
    m = _ORIGINAL_RE.match(name)
    if not m:
        return None
    return OriginalFileName(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def side_file_name(bucket_file: str) -> str:
    """The ``_flush_length`` side file that belongs to a bucket file path or name."""
    return bucket_file + SIDE_FILE_SUFFIX


def is_hidden(name: str) -> bool:
    """Hive's ``hiddenFileFilter``: names starting with ``_`` or ``.``."""
    return name.startswith(("_", "."))


def is_acid_hidden_ok(name: str) -> bool:
    """``acidHiddenFileFilter``: not hidden, or one of the ACID marker files."""
    return not is_hidden(name) or name in (ACID_FORMAT_FILE, METADATA_FILE)
