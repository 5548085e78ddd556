"""Open ORC files of an ACID table and tell what they are: ACID event files or original files.

Hive decides "original vs ACID" per file (``OrcInputFormat.isOriginal``): Hive 3
looks for the ``hive.acid.key.index`` user metadata, Hive 4 compares the
top-level field names with the six ACID names. We accept either, comparing
names case-insensitively because query-based compaction writes them
lower-cased. Files are opened through ``Storage`` and can be cut at a logical
length (a ``_flush_length`` side file or a ``--flush-length``), because a
streaming file is only valid up to its last intermediate footer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.orc as orc

from acidstream.acid.errors import AcidFormatError
from acidstream.acid.layout import side_file_name
from acidstream.acid.schema import ACID_COLUMNS
from acidstream.acid.side_file import decode_flush_lengths, last_flush_length
from acidstream.acid.storage import Storage

__all__ = [
    "ACID_KEY_INDEX",
    "ACID_STATS",
    "ACID_VERSION_KEY",
    "AcidKey",
    "OrcFileInfo",
    "acid_column_names",
    "compare_keys",
    "inspect_orc",
    "is_acid_schema",
    "open_orc",
    "parse_key_index",
    "read_flush_lengths",
    "require_acid",
]

ACID_KEY_INDEX = "hive.acid.key.index"
ACID_STATS = "hive.acid.stats"
ACID_VERSION_KEY = "hive.acid.version"

# (originalTransaction, bucket property as a signed int, rowId): Hive's RecordIdentifier order.
AcidKey = tuple[int, int, int]


def _signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def compare_keys(a: AcidKey, b: AcidKey) -> int:
    """-1, 0 or 1 as ``RecordIdentifier.compareToInternal`` (bucket compared as signed int)."""
    return (a > b) - (a < b)


def parse_key_index(text: str) -> tuple[AcidKey | None, ...]:
    """``ORU.parseKeyIndex``: ``"owid,bucket,rowid;..."``; an empty element is a null key."""
    parts = text.split(";")
    if parts and parts[-1] == "":
        parts.pop()  # the trailing ';' of every entry
    keys: list[AcidKey | None] = []
    for part in parts:
        if not part:
            keys.append(None)
            continue
        bits = part.split(",")
        if len(bits) != 3:
            raise AcidFormatError(f"bad {ACID_KEY_INDEX} entry {part!r}")
        try:
            keys.append((int(bits[0]), _signed32(int(bits[1])), int(bits[2])))
        except ValueError as e:
            raise AcidFormatError(f"bad {ACID_KEY_INDEX} entry {part!r}") from e
    return tuple(keys)


def acid_column_names(schema: pa.Schema) -> dict[str, str] | None:
    """Map each canonical ACID column name to the file's spelling, or ``None`` if the
    top-level names are not exactly the six ACID names (case-insensitively, any order)."""
    if len(schema.names) != len(ACID_COLUMNS):
        return None
    by_lower = {n.lower(): n for n in schema.names}
    out: dict[str, str] = {}
    for canonical in ACID_COLUMNS:
        actual = by_lower.get(canonical.lower())
        if actual is None:
            return None
        out[canonical] = actual
    return out


def is_acid_schema(schema: pa.Schema) -> bool:
    """Hive 4's ``isOriginal`` test, negated: the top-level names are the ACID names."""
    return acid_column_names(schema) is not None


@dataclass(frozen=True)
class OrcFileInfo:
    """What a reader needs to know about one ORC file, from its tail only.

    ``key_index`` is ``None`` when absent or when its entry count differs from
    the stripe count (``VOARBR.findMinMaxKeys`` ignores such an index).
    """

    path: str
    file_length: int
    logical_length: int
    nrows: int
    nstripes: int
    schema: pa.Schema
    user_metadata: Mapping[str, str]
    compression: str
    row_index_stride: int
    is_acid: bool
    acid_columns: Mapping[str, str] | None
    acid_version: int | None
    key_index: tuple[AcidKey | None, ...] | None
    acid_stats: tuple[int, int, int] | None

    @property
    def row_fields(self) -> tuple[str, ...]:
        """Names of the table columns stored in the file (inside ``row`` for ACID files)."""
        if self.acid_columns is not None:
            row_type = self.schema.field(self.acid_columns["row"]).type
            if pa.types.is_struct(row_type):
                return tuple(row_type.field(i).name for i in range(row_type.num_fields))
            return ()
        return tuple(self.schema.names)

    def row_schema(self) -> pa.Schema:
        """The table-column part of the schema as an Arrow schema."""
        if self.acid_columns is not None:
            row_type = self.schema.field(self.acid_columns["row"]).type
            return pa.schema([row_type.field(i) for i in range(row_type.num_fields)])
        return self.schema


def read_flush_lengths(storage: Storage, path: str) -> list[int] | None:
    """All lengths recorded in the ``_flush_length`` side file of ``path``; ``None`` if absent."""
    side = side_file_name(path)
    if not storage.exists(side):
        return None
    return decode_flush_lengths(storage.read_bytes(side), path=side)


def logical_length(storage: Storage, path: str, *, file_length: int, use_side_file: bool) -> int:
    """``AcidUtils.getLogicalLength``: the last side-file length, or the real length.

    Raises ``AcidFormatError`` for an unreadable side file, as Hive's
    ``getLastFlushLength`` raises "found but is not readable".
    """
    if not use_side_file:
        return file_length
    side = side_file_name(path)
    if not storage.exists(side):
        # The writer makes its side file before it writes any data, and removes it once
        # the file is whole: a file listed with bytes and no side file now was closed
        # since (the listing may have caught it between a piece and its footer), so its
        # length now is valid; one listed empty had no data yet.
        return file_length if file_length == 0 else storage.size(path)
    try:
        data = storage.read_bytes(side)
    except FileNotFoundError:
        # The writer closed the file (its last footer written) and removed the side file
        # after we listed: the whole file is valid now, and may have grown since the
        # listing (Hive's getLastFlushLength treats a missing side file the same way).
        return storage.size(path)
    last = last_flush_length(data, path=side)
    if last > file_length:
        # A live writer flushed again between our listing (which gave ``file_length``) and
        # this read of its side file: the data behind the new length is on disk before the
        # length is (footer first, then side file), so the file's size now covers it.
        file_length = storage.size(path)
    return last_flush_length(data, path=side, file_length=file_length)


def open_orc(storage: Storage, path: str, *, length: int | None = None) -> orc.ORCFile:
    """Open an ORC file, seeing only its first ``length`` bytes when given.

    Local files are memory-mapped (a prefix is a zero-copy slice); other
    filesystems read the bytes once into memory.
    """
    try:
        local = storage.local_path(path)
        if local is not None:
            mm = pa.memory_map(local, "r")
            if length is not None and length < mm.size():
                return orc.ORCFile(pa.BufferReader(mm.read_at(length, 0)))
            return orc.ORCFile(mm)
        return orc.ORCFile(pa.BufferReader(storage.read_bytes(path, length=length)))
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        cut = f" (first {length} bytes)" if length is not None else ""
        raise AcidFormatError(f"{path}{cut}: not a readable ORC file: {e}") from e


def _user_metadata(f: orc.ORCFile) -> dict[str, str]:
    out: dict[str, str] = {}
    md = f.metadata
    if md is None:
        return out
    # The JVM ORC reader keeps the last item of a repeated key (a map put); so do we.
    for k, v in md.items():
        key = k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k)
        out[key] = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
    return out


def inspect_orc(
    storage: Storage, path: str, *, length: int | None = None, file_length: int | None = None
) -> tuple[orc.ORCFile, OrcFileInfo]:
    """Open a file and describe it (tail only; no stripe is read)."""
    real = file_length if file_length is not None else storage.size(path)
    # Always the given length, even one equal to a listed size: a live writer may have
    # appended its next piece's stripes since (its footer comes at its commit), and the
    # file is a valid ORC file only up to the length.
    f = open_orc(storage, path, length=length)
    md = _user_metadata(f)
    schema = f.schema
    acid_cols = acid_column_names(schema)
    has_key_index = ACID_KEY_INDEX in md
    version: int | None = None
    if md.get(ACID_VERSION_KEY, "").strip():
        try:
            version = int(md[ACID_VERSION_KEY].strip())
        except ValueError as e:
            raise AcidFormatError(f"{path}: bad {ACID_VERSION_KEY} {md[ACID_VERSION_KEY]!r}") from e
    key_index: tuple[AcidKey | None, ...] | None = None
    if has_key_index:
        parsed = parse_key_index(md[ACID_KEY_INDEX])
        key_index = parsed if len(parsed) == f.nstripes else None
    stats: tuple[int, int, int] | None = None
    if md.get(ACID_STATS):
        bits = md[ACID_STATS].split(",")
        if len(bits) == 3 and all(b.strip().lstrip("-").isdigit() for b in bits):
            stats = (int(bits[0]), int(bits[1]), int(bits[2]))
    info = OrcFileInfo(
        path=path,
        file_length=real,
        logical_length=length if length is not None else real,
        nrows=f.nrows,
        nstripes=f.nstripes,
        schema=schema,
        user_metadata=md,
        compression=str(f.compression),
        row_index_stride=int(f.row_index_stride),
        # Hive 3: key index present; Hive 4: the six ACID names. Accept both, but a
        # key-index file must still have the event columns for us to read it.
        is_acid=acid_cols is not None,
        acid_columns=acid_cols,
        acid_version=version,
        key_index=key_index,
        acid_stats=stats,
    )
    if has_key_index and acid_cols is None:
        raise AcidFormatError(
            f"{path}: has {ACID_KEY_INDEX} metadata but its columns {schema.names} "
            "are not the ACID event columns"
        )
    return f, info


def require_acid(info: OrcFileInfo) -> None:
    """Reject a file that must be a full-ACID (Hive 3+) event file but is not.

    Mirrors the check of Trino's ``OrcPageSourceFactory`` (ACID version from the
    file metadata when no ``_orc_acid_version`` file vouches for it), relaxed as
    Impala is: a file with the ACID schema but no metadata is accepted.
    """
    if not info.is_acid:
        got = info.user_metadata.get(ACID_VERSION_KEY, "")
        raise AcidFormatError(
            f"{info.path}: not a Hive ACID (full transactional) ORC file: expected "
            f"{ACID_VERSION_KEY} >= 2 in ORC metadata but it is {got or 'empty'}, and the "
            f"schema {info.schema.names} lacks the ACID event columns. Hive transactional "
            "tables are supported since Hive 3.0; after upgrading from an older Hive, run a "
            "major compaction"
        )
    if info.acid_version is not None and info.acid_version < 2:
        raise AcidFormatError(
            f"{info.path}: expected {ACID_VERSION_KEY} >= 2 in ORC metadata but it is "
            f"{info.acid_version}; Hive transactional tables are supported since Hive 3.0 "
            "(run a major compaction after upgrading)"
        )
