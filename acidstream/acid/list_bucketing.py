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
directory selection (:mod:`acidstream.acid.directory`) is unchanged.

This module is the one model and naming of list bucketing; the catalog persists
:class:`SkewedInfo`, :mod:`acidstream.acid.placement` routes rows with it, readers prune with it.
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.hive_text import java_float_text
from acidstream.acid.partition_name import (
    DEFAULT_PARTITION_NAME,
    check_partition_value,
    escape_path_name,
)
from acidstream.acid.schema import HiveType

__all__ = [
    "DEFAULT_DIR_NAME",
    "DEFAULT_KEY",
    "SkewedInfo",
    "check_skewed_info",
    "check_skewed_location",
    "declared_value_text",
    "default_dir_name",
    "format_skewed_values",
    "list_bucketing_dir_name",
    "parse_skewed_location",
    "parse_skewed_values",
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


# -- the value-list syntax and validation (the catalog's and the CLI's) --------------------------

_PUNCT = "(),="


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """``(kind, text, end offset)`` tokens: ``p`` punctuation, ``s`` quoted, ``w`` bare word.

    Quoted literals follow Hive's ``unescapeSQLString``: ``'...'`` or ``"..."``, a
    backslash escapes the next character (``\\n``, ``\\t``, ``\\0`` as in SQL), a doubled
    quote is one quote.
    """
    out: list[tuple[str, str, int]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in _PUNCT:
            out.append(("p", c, i + 1))
            i += 1
        elif c in "'\"":
            buf: list[str] = []
            i += 1
            while True:
                if i >= n:
                    raise ConfigError(f"unterminated quoted value in {text!r}")
                ch = text[i]
                if ch == "\\" and i + 1 < n:
                    nxt = text[i + 1]
                    buf.append({"n": "\n", "t": "\t", "r": "\r", "0": "\0"}.get(nxt, nxt))
                    i += 2
                elif ch == c and i + 1 < n and text[i + 1] == c:
                    buf.append(c)
                    i += 2
                elif ch == c:
                    i += 1
                    break
                else:
                    buf.append(ch)
                    i += 1
            out.append(("s", "".join(buf), i))
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in _PUNCT + "'\"":
                j += 1
            out.append(("w", text[i:j], j))
            i = j
    return out


def _group(toks: list[tuple[str, str, int]], pos: int, text: str) -> tuple[list[str], int]:
    """One ``(v1, v2, ...)`` group starting at ``toks[pos] == '('``: its values, next pos."""
    values: list[str] = []
    pos += 1
    while True:
        if pos >= len(toks) or toks[pos][0] == "p":
            raise ConfigError(f"expected a value at offset {_at(toks, pos)} of {text!r}")
        values.append(toks[pos][1])
        pos += 1
        if pos < len(toks) and toks[pos][:2] == ("p", ")"):
            return values, pos + 1
        if pos >= len(toks) or toks[pos][:2] != ("p", ","):
            raise ConfigError(f"expected ',' or ')' at offset {_at(toks, pos)} of {text!r}")
        pos += 1


def _at(toks: list[tuple[str, str, int]], pos: int) -> int:
    return toks[pos][2] - len(toks[pos][1]) if pos < len(toks) else (toks[-1][2] if toks else 0)


def _item(toks: list[tuple[str, str, int]], pos: int, text: str) -> tuple[list[str], bool, int]:
    """A value or a group: ``(values, was a group, next pos)``."""
    if pos < len(toks) and toks[pos][:2] == ("p", "("):
        values, pos = _group(toks, pos, text)
        return values, True, pos
    if pos >= len(toks) or toks[pos][0] == "p":
        raise ConfigError(f"expected a value or '(' at offset {_at(toks, pos)} of {text!r}")
    return [toks[pos][1]], False, pos + 1


def parse_skewed_values(text: str, num_cols: int) -> tuple[tuple[str, ...], ...]:
    """Parse the value list of ``SKEWED BY (...) ON <values>`` into value tuples.

    Accepted, as Hive's DDL writes it or without its outer parentheses:
    ``(6),(20)``; ``6,20`` and ``(6,20)`` for one skewed column; ``('a',1),('b',2)`` and
    ``(('a',1),('b',2))`` for two. Quoted values are unquoted as Hive's
    ``unescapeSQLString`` does; bare values are kept as written (``6``, ``-1.5``, ``true``),
    which must be the text Hive writes for the column's value to match it.

    Raises:
        ConfigError: a syntax error, naming the offset.
    """
    toks = _tokens(text)
    if not toks:
        raise ConfigError("the skewed value list is empty: e.g. (6),(20)")
    # Hive's full form wraps the list in one more pair of parentheses: ((6),(20)).
    if (
        len(toks) >= 2
        and toks[0][:2] == ("p", "(")
        and toks[1][:2] == ("p", "(")
        and toks[-1][:2] == ("p", ")")
    ):
        toks = toks[1:-1]
    items: list[tuple[list[str], bool]] = []
    pos = 0
    while True:
        values, grouped, pos = _item(toks, pos, text)
        items.append((values, grouped))
        if pos >= len(toks):
            break
        if toks[pos][:2] != ("p", ","):
            raise ConfigError(f"expected ',' at offset {_at(toks, pos)} of {text!r}")
        pos += 1
    # Hive's one-column form: ON (1,5,6) lists three values, not one 3-tuple.
    if num_cols == 1 and len(items) == 1 and items[0][1] and len(items[0][0]) > 1:
        return tuple((v,) for v in items[0][0])
    return tuple(tuple(values) for values, _ in items)


def parse_skewed_location(text: str, num_cols: int) -> tuple[tuple[str, ...], str]:
    """Parse one ``SET SKEWED LOCATION`` element, ``(6)=dir`` or ``('a',1)='dir'``:
    ``(value tuple, location)``. The location is the rest after ``=`` (unquoted if quoted).

    Raises:
        ConfigError: a syntax error.
    """
    toks = _tokens(text)
    values, grouped, pos = _item(toks, 0, text)
    if pos >= len(toks) or toks[pos][:2] != ("p", "="):
        raise ConfigError(f"expected VALUES=LOCATION, e.g. (6)=dir, not {text!r}")
    rest = text[toks[pos][2] :].strip()
    if len(rest) >= 2 and rest[0] in "'\"" and rest[-1] == rest[0]:
        rest = rest[1:-1]
    if not rest:
        raise ConfigError(f"no location after '=' in {text!r}")
    if num_cols == 1 and not grouped:
        return (values[0],), rest
    return tuple(values), rest


# Names a reader or the directory selection would take for something else: ACID
# directories (AcidUtils), bucket files, and hidden names (Hive's HIDDEN_FILES_PATH_FILTER).
_RESERVED_PREFIXES = ("delta_", "delete_delta_", "base_", "bucket_", ".", "_")


def check_skewed_location(location: str) -> str:
    """A location-map directory, checked and normalised (no trailing ``/``).

    List-bucketing directories of a transactional table sit inside each delta and base,
    so a location is a directory relative to them, never an absolute path or URL as
    Hive's ``SET SKEWED LOCATION`` takes for non-transactional tables.

    Raises:
        ConfigError: an absolute path or URL, ``.`` / ``..`` / empty components, or a
            component named like an ACID directory, a bucket file or a hidden file.
    """
    loc = location.strip().rstrip("/")
    if not loc:
        raise ConfigError("a skewed location must name a directory")
    if loc.startswith("/") or "://" in loc or ":" in loc.split("/")[0]:
        raise ConfigError(
            f"skewed location {location!r} is absolute: list-bucketing directories of a "
            "transactional table sit inside each delta and base, so give a relative "
            "directory (e.g. x=6 or hot/6)"
        )
    for part in loc.split("/"):
        if part in ("", ".", ".."):
            raise ConfigError(f"skewed location {location!r} has an empty, '.' or '..' part")
        if part.startswith(_RESERVED_PREFIXES):
            raise ConfigError(
                f"skewed location {location!r}: {part!r} would be taken for an ACID "
                "directory, a bucket file or a hidden file (names starting with "
                f"{', '.join(_RESERVED_PREFIXES)} are reserved)"
            )
        if "\x00" in part:
            raise ConfigError(f"skewed location {location!r} contains a NUL character")
    return loc


def check_skewed_info(info: SkewedInfo) -> SkewedInfo:
    """Check a skew definition on its own and return it normalised (column names
    lower-case, locations without a trailing ``/``). Table-level rules (columns exist,
    no hash bucketing, partitioned) are :func:`acidstream.txn.catalog.validate_table`'s.

    Raises:
        ConfigError: no columns or no values, a repeated column or tuple, a tuple with
            the wrong number of values, a value no directory name can hold, a location
            key that is not a declared tuple, a bad or repeated directory.
    """
    cols = tuple(c.strip().lower() for c in info.col_names)
    if not cols:
        raise ConfigError("SKEWED BY needs at least one column")
    for c in cols:
        if not c or not all(ch.isalnum() or ch == "_" for ch in c):
            raise ConfigError(f"invalid skewed column name {c!r}")
        if c.startswith("_"):
            # Its directories (_x=6) would be hidden files to Hive's and our readers.
            raise ConfigError(
                f"skewed column {c!r} starts with '_': its directories ({c}=...) would be "
                "taken for hidden files and skipped by readers"
            )
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise ConfigError(f"skewed column {dup[0]!r} is listed twice")
    if not info.col_values:
        raise ConfigError("SKEWED BY needs at least one value tuple (ON ...)")
    seen: set[tuple[str, ...]] = set()
    for values in info.col_values:
        if len(values) != len(cols):
            raise ConfigError(
                f"skewed value tuple {_show(values)} has {len(values)} values; "
                f"SKEWED BY ({', '.join(cols)}) needs {len(cols)}"
            )
        if values in seen:
            raise ConfigError(f"skewed value tuple {_show(values)} is listed twice")
        seen.add(values)
        for c, v in zip(cols, values, strict=True):
            try:
                check_partition_value(c, v)
            except SerializationError as e:
                raise ConfigError(f"skewed value {v!r} of {c!r}: {e}") from e
    locations: dict[tuple[str, ...], str] = {}
    for key, loc in info.location_map.items():
        if key != (DEFAULT_KEY,) and key not in seen:
            raise ConfigError(
                f"skewed location for {_show(key)}: not a declared skewed value tuple"
            )
        locations[tuple(key)] = check_skewed_location(loc)
    out = SkewedInfo(
        col_names=cols,
        col_values=tuple(tuple(v) for v in info.col_values),
        location_map=locations,
        stored_as_dirs=info.stored_as_dirs,
    )
    dirs = out.all_dirs()
    for d in dirs:
        if dirs.count(d) > 1:
            raise ConfigError(f"two skewed value tuples would share the directory {d!r}")
        # A directory inside another would mix their rows for whoever lists the outer one.
        inner = next((e for e in dirs if e.startswith(d + "/")), None)
        if inner is not None:
            raise ConfigError(f"skewed directory {inner!r} would sit inside {d!r}")
    return out


def _show(values: Sequence[str]) -> str:
    return "(" + ", ".join(repr(v) for v in values) + ")"


def format_skewed_values(col_values: Sequence[Sequence[str]]) -> str:
    """The value tuples as ``('a', '1'), ('b', '2')`` (the inverse of
    :func:`parse_skewed_values`, every value quoted)."""
    return ", ".join(
        "(" + ", ".join("'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'" for v in t) + ")"
        for t in col_values
    )


_INT_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}


def declared_value_text(value: str, hive: HiveType) -> str | None:
    """The text Hive prints for a value of type ``hive`` written as ``value`` in
    ``ON (...)``, or ``None`` when no value of that type is written so.

    A row matches a declared tuple when its values print as the tuple's
    (:mod:`acidstream.acid.hive_text`), so ``06`` for an ``int`` or ``6`` for a ``double`` would never
    match: the catalog refuses them, naming the text to declare (``6``, ``6.0``). Types
    whose text is not checked here (``timestamp``, ``binary``) keep the value as written.
    """
    k = hive.kind
    if k in _INT_BITS:
        if not re.fullmatch(r"[+-]?[0-9]+", value):
            return None
        n, bits = int(value), _INT_BITS[k]
        return str(n) if -(2 ** (bits - 1)) <= n < 2 ** (bits - 1) else None
    if k == "boolean":
        return value.lower() if value.lower() in ("true", "false") else None
    if k in ("float", "double"):
        try:
            return java_float_text(float(value.strip()), single=k == "float")
        except ValueError:
            return None
    if k == "decimal":
        try:
            d = decimal.Decimal(value.strip())
        except decimal.InvalidOperation:
            return None
        precision, scale = hive.params
        if not d.is_finite():
            return None
        # Stored at the column's scale (HALF_UP); more integer digits than fit is NULL.
        d = d.quantize(decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)
        if d.adjusted() >= precision - scale:
            return None
        text = format(d, "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    if k == "date":
        if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value.strip()):
            return None
        try:
            return datetime.date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            return None
    if k == "varchar":
        return value[: hive.params[0]]
    if k == "char":
        return value[: hive.params[0]].ljust(hive.params[0])
    return value
