"""Table names: the one parser of ``db.table`` (``table`` alone is in ``default``), and the
one rule a new database or table name follows.

The rule is Hive's (``MetaStoreUtils.validateName``): ASCII letters, digits and ``_``, a
leading digit allowed, at most :data:`NAME_MAX_LENGTH` characters, compared lower-cased.
It is checked where a name is created (:func:`check_new_name`, called by the catalog for
every database and table, CLI and Python API alike), so every name that is accepted can be
read, listed and written by every entry point.

Lookups (``acidstream.txn.namespaces``, the read path) accept a wider syntax,
:data:`NAME_LOOKUP_PATTERN`: any word characters, as earlier acidstream versions accepted
at create (``str.isalnum``), so a table such a version created (``db.日本``, a 300-character
name) stays readable and writable instead of being bricked by a later, stricter rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from acidstream.acid.errors import ConfigError

__all__ = [
    "DEFAULT_DB",
    "NAME_LOOKUP_PATTERN",
    "NAME_MAX_LENGTH",
    "NAME_PATTERN",
    "TableName",
    "check_new_name",
]

DEFAULT_DB = "default"

NAME_MAX_LENGTH = 128
"""The longest database or table name Hive's metastore stores (its ``NAME`` columns)."""

NAME_PATTERN = rf"[A-Za-z0-9_]{{1,{NAME_MAX_LENGTH}}}"
"""A new database or table name (Hive's rule; ``re.ASCII`` is not needed: the class is
spelled out, so ``²`` or ``日`` never match as ``\\w`` would)."""

NAME_LOOKUP_PATTERN = r"\w+"
"""A name a lookup accepts: the new-name rule, or one an older acidstream created."""

_NEW = re.compile(NAME_PATTERN)


def check_new_name(name: str, what: str) -> str:
    """A new database or table name, lower-cased, or a ConfigError saying the rule.

    Args:
        name: the name as given.
        what: ``"database"`` or ``"table"``, for the message.
    """
    if not isinstance(name, str):
        raise ConfigError(f"invalid {what} name {name!r}: a name is a str")
    # Checked before lower-casing: the Kelvin sign (U+212A) lower-cases to an ASCII 'k'.
    n = name.strip()
    if _NEW.fullmatch(n) is None:
        why = (
            f"longer than {NAME_MAX_LENGTH} characters"
            if len(n) > NAME_MAX_LENGTH and _NEW.fullmatch(n[:NAME_MAX_LENGTH])
            else "use only ASCII letters, digits and '_'"
        )
        raise ConfigError(
            f"invalid {what} name {name!r}: {why} (Hive's rule: [A-Za-z0-9_], "
            f"1 to {NAME_MAX_LENGTH} characters)"
        )
    return n.lower()


@dataclass(frozen=True)
class TableName:
    """A lower-cased ``db.table`` pair, as Hive's metastore normalises names."""

    db: str
    table: str

    @classmethod
    def parse(cls, name: str, *, default_db: str = DEFAULT_DB) -> TableName:
        """``db.table`` or ``table``; anything else (empty parts, more dots) is a
        ConfigError. This splits a name for a lookup, which then finds the table or says
        there is none (a link name ``t1@b`` passes, for ``acidstream.txn.namespaces`` to refuse with
        its own reason); a new table's name is checked by the catalog
        (:func:`check_new_name`)."""
        parts = name.strip().lower().split(".")
        if len(parts) == 1:
            parts = [default_db.lower(), parts[0]]
        if len(parts) != 2 or not all(parts):
            raise ConfigError(f"bad table name {name!r}: expected db.table or table")
        return cls(parts[0], parts[1])

    def __str__(self) -> str:
        return f"{self.db}.{self.table}"
