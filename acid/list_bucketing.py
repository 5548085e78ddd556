"""List bucketing: skewed column values stored as directories (Hive's ``SkewedInfo``).

A table (and each partition, which copies the table's definition when it is created)
may declare skewed columns and the value tuples that are frequent. With
``stored_as_dirs`` the rows whose skewed values match a declared tuple are written
under ``col1=v1/col2=v2`` and every other row under the default directory
(``HIVE_DEFAULT_LIST_BUCKETING_DIR_NAME`` once per skewed column). Names follow Hive's
``FileUtils.makeListBucketingDirName`` / ``makeDefaultListBucketingDirName`` (spec §8):
column names lower-cased, names and values escaped with ``escapePathName``, a NULL or
empty value written as ``__HIVE_DEFAULT_PARTITION__``.

For transactional tables the directories sit inside each delta or base
(``part/delta_5_5/x=6/bucket_00000``), as Hive places them for insert-only tables, so
directory selection (:mod:`acid.directory`) is unchanged.

This module is the one model and naming of list bucketing; the catalog persists
:class:`SkewedInfo`, :mod:`acid.placement` routes rows with it, readers prune with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from acid.errors import ConfigError
from acid.partition_name import DEFAULT_PARTITION_NAME, escape_path_name

__all__ = [
    "DEFAULT_DIR_NAME",
    "DEFAULT_KEY",
    "SkewedInfo",
    "default_dir_name",
    "list_bucketing_dir_name",
]

DEFAULT_DIR_NAME = "HIVE_DEFAULT_LIST_BUCKETING_DIR_NAME"
"""``ListBucketingPrunerUtils.HIVE_LIST_BUCKETING_DEFAULT_DIR_NAME``."""

DEFAULT_KEY = "HIVE_DEFAULT_LIST_BUCKETING_KEY"
"""The location-map key of the default directory (``HIVE_LIST_BUCKETING_DEFAULT_KEY``)."""


def list_bucketing_dir_name(col_names: Sequence[str], values: Sequence[str | None]) -> str:
    """Hive's ``makeListBucketingDirName``: ``col1=v1/col2=v2`` (relative), escaped."""
    if len(col_names) != len(values):
        raise ConfigError(f"{len(col_names)} skewed columns but {len(values)} values: {values}")
    return "/".join(
        f"{escape_path_name(c.lower())}="
        f"{DEFAULT_PARTITION_NAME if v is None or v == '' else escape_path_name(v)}"
        for c, v in zip(col_names, values, strict=True)
    )


def default_dir_name(num_cols: int) -> str:
    """Hive's ``makeDefaultListBucketingDirName``: the default name once per column."""
    return "/".join([DEFAULT_DIR_NAME] * num_cols)


@dataclass(frozen=True, kw_only=True)
class SkewedInfo:
    """Hive's ``SkewedInfo`` plus ``StorageDescriptor.storedAsSubDirectories``.

    Attributes:
        col_names: skewed column names (lower-case), in declaration order.
        col_values: the declared value tuples, each as Hive's text of the values
            (``standObj.toString()``), in ``col_names`` order.
        location_map: declared tuple -> directory, relative to the delta/base it sits in;
            a tuple missing here uses :func:`list_bucketing_dir_name`. The default
            directory's entry is keyed ``(DEFAULT_KEY,)``.
        stored_as_dirs: whether rows are stored as directories (else the skew is only
            declared, as Hive's optimizer hint, and files are laid out as usual).
    """

    col_names: tuple[str, ...]
    col_values: tuple[tuple[str, ...], ...]
    location_map: Mapping[tuple[str, ...], str] = field(default_factory=dict)
    stored_as_dirs: bool = False

    @property
    def is_list_bucketed(self) -> bool:
        """Whether rows go to directories (spec §8 rule 6: names and values non-empty)."""
        return self.stored_as_dirs and bool(self.col_names) and bool(self.col_values)

    def dir_of(self, values: tuple[str, ...]) -> str:
        """The directory of a declared tuple (its location-map entry or Hive's name)."""
        loc = self.location_map.get(values)
        return loc if loc is not None else list_bucketing_dir_name(self.col_names, values)

    @property
    def default_dir(self) -> str:
        """The directory of every row matching no declared tuple."""
        loc = self.location_map.get((DEFAULT_KEY,))
        return loc if loc is not None else default_dir_name(len(self.col_names))

    def all_dirs(self) -> tuple[str, ...]:
        """Every directory rows may be written to: the declared tuples', then the default."""
        return (*(self.dir_of(v) for v in self.col_values), self.default_dir)
