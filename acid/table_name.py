"""Table names: the one parser of ``db.table`` (``table`` alone is in ``default``)."""

from __future__ import annotations

from dataclasses import dataclass

from acid.errors import ConfigError

__all__ = ["DEFAULT_DB", "TableName"]

DEFAULT_DB = "default"


@dataclass(frozen=True)
class TableName:
    """A lower-cased ``db.table`` pair, as Hive's metastore normalises names."""

    db: str
    table: str

    @classmethod
    def parse(cls, name: str, *, default_db: str = DEFAULT_DB) -> TableName:
        """``db.table`` or ``table``; anything else (empty parts, more dots) is a ConfigError."""
        parts = name.strip().lower().split(".")
        if len(parts) == 1:
            parts = [default_db.lower(), parts[0]]
        if len(parts) != 2 or not all(parts):
            raise ConfigError(f"bad table name {name!r}: expected db.table or table")
        return cls(parts[0], parts[1])

    def __str__(self) -> str:
        return f"{self.db}.{self.table}"
