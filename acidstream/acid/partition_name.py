"""Hive's partition-name codec: ``k1=v1/k2=v2`` directory names, escaped as Hive escapes them.

The one codec every writer, reader and the catalog use (``FileUtils.makePartName``,
``escapePathName`` / ``unescapePathName``; spec §8). A NULL or empty value is Hive's
default partition ``__HIVE_DEFAULT_PARTITION__``.
"""

from __future__ import annotations

from collections.abc import Sequence

from acidstream.acid.errors import ConfigError, SerializationError

__all__ = [
    "DEFAULT_PARTITION_NAME",
    "MAX_COMPONENT_BYTES",
    "check_partition_value",
    "escape_path_name",
    "make_partition_name",
    "parse_partition_component",
    "parse_partition_name",
    "unescape_path_name",
]

DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"

MAX_COMPONENT_BYTES = 255
"""The longest directory name (``key=escaped value``, UTF-8) local and HDFS paths take."""

# FileUtils.charToEscape: 0x01-0x1F, '"', '#', '%', '\'', '*', '/', ':', '=', '?', '\\',
# 0x7F, '{', '[', ']', '^' (the Windows-only extras are not escaped, as on Linux).
_ESCAPED = frozenset([chr(c) for c in range(1, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))


def escape_path_name(text: str) -> str:
    """Hive's ``FileUtils.escapePathName``: ``%`` plus two upper-case hex digits."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def unescape_path_name(text: str) -> str:
    """Hive's ``FileUtils.unescapePathName``: the inverse of :func:`escape_path_name`."""
    if "%" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%" and _is_hex(text[i + 1 : i + 3]):
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _is_hex(s: str) -> bool:
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


def check_partition_value(key: str, value: str | None) -> str:
    """The escaped ``key=value`` directory name of one partition value, or a
    ``SerializationError`` for a value no file system can hold as a directory name.

    Hive's ``escapePathName`` leaves NUL and lone surrogates alone, and neither can be a
    path on disk; a name over 255 UTF-8 bytes fails with ENAMETOOLONG. Checking here lets a
    writer reject the record at ``write`` instead of failing the commit.
    """
    if value is None or value == "":
        return f"{escape_path_name(key.lower())}={DEFAULT_PARTITION_NAME}"
    if "\x00" in value:
        raise SerializationError(f"partition value of {key!r} contains a NUL character")
    name = f"{escape_path_name(key.lower())}={escape_path_name(value)}"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise SerializationError(
            f"partition value of {key!r} is not valid Unicode (lone surrogate)"
        ) from e
    if size > MAX_COMPONENT_BYTES:
        raise SerializationError(
            f"partition directory name for {key!r} is {size} bytes escaped "
            f"(the limit is {MAX_COMPONENT_BYTES})"
        )
    return name


def make_partition_name(keys: Sequence[str], values: Sequence[str | None]) -> str:
    """Hive's ``makePartName``: ``k1=v1/k2=v2``, escaped; NULL or empty values become
    ``__HIVE_DEFAULT_PARTITION__``. Values no directory can hold raise
    ``SerializationError`` (see :func:`check_partition_value`)."""
    if len(keys) != len(values):
        raise ConfigError(
            f"partition needs {len(keys)} values ({', '.join(keys)}), got {len(values)}"
        )
    return "/".join(check_partition_value(k, v) for k, v in zip(keys, values, strict=True))


def parse_partition_component(name: str) -> tuple[str, str | None] | None:
    """One ``k=v`` directory name as ``(lower-case key, value)``, the value ``None`` for
    the default partition; ``None`` when the name is not a partition directory."""
    key, sep, value = name.partition("=")
    if not sep or not key or name.startswith((".", "_")):
        return None
    v = unescape_path_name(value)
    return unescape_path_name(key).lower(), (None if v == DEFAULT_PARTITION_NAME else v)


def parse_partition_name(name: str) -> list[tuple[str, str]]:
    """Split ``k1=v1/k2=v2`` into unescaped ``(key, value)`` pairs (the default partition
    stays ``__HIVE_DEFAULT_PARTITION__``)."""
    out = []
    for part in name.split("/"):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ConfigError(f"bad partition name {name!r}: expected k1=v1/k2=v2")
        out.append((unescape_path_name(key), unescape_path_name(value)))
    return out
