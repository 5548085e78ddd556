"""ORC ``Type`` messages for a Hive schema, in the pre-order column numbering ORC uses.

Writers that do not know Hive's types (pyarrow has no char/varchar) produce
footers whose types are rewritten from these, so the files carry exactly the
Hive ORC types (trap 10 of the spec: ``varchar(n)`` must not become ``string``).
"""

from __future__ import annotations

import functools

from acidstream.acid.protobuf import encode_packed, encode_varint
from acidstream.acid.schema import (
    ACID_COLUMN_TYPES,
    ACID_COLUMNS,
    HiveType,
    TableSchema,
    parse_hive_type,
)

__all__ = ["event_type_messages"]

# orc_proto Type.Kind
_KIND = {
    "boolean": 0, "tinyint": 1, "smallint": 2, "int": 3, "bigint": 4, "float": 5, "double": 6,
    "string": 7, "binary": 8, "timestamp": 9, "array": 10, "map": 11, "struct": 12,
    "decimal": 14, "date": 15, "varchar": 16, "char": 17,
}  # fmt: skip


def _len_field(num: int, payload: bytes) -> bytes:
    return encode_varint((num << 3) | 2) + encode_varint(len(payload)) + payload


def _var_field(num: int, value: int) -> bytes:
    return encode_varint(num << 3) + encode_varint(value)


def event_type_messages(schema: TableSchema) -> list[bytes]:
    """Serialized ``Type`` messages of the ACID event schema, column 0 first."""
    return list(_event_type_messages(schema))


@functools.lru_cache(maxsize=256)
def _event_type_messages(schema: TableSchema) -> tuple[bytes, ...]:
    # Every file a writer opens asks (a small commit opens one per txn): built once
    # per schema, which is immutable.
    root = HiveType(
        "struct",
        children=(*(parse_hive_type(t) for t in ACID_COLUMN_TYPES), schema.row_type()),
        field_names=ACID_COLUMNS,
    )
    out: list[bytes] = []

    def visit(t: HiveType) -> int:
        my_id = len(out)
        out.append(b"")  # placeholder: children are numbered after their parent
        kids = [visit(c) for c in t.children]
        msg = _var_field(1, _KIND[t.kind])
        if kids:
            msg += _len_field(2, encode_packed(kids))
        for name in t.field_names:
            msg += _len_field(3, name.encode())
        if t.kind in ("varchar", "char"):
            msg += _var_field(4, t.params[0])
        if t.kind == "decimal":
            msg += _var_field(5, t.params[0]) + _var_field(6, t.params[1])
        out[my_id] = msg
        return my_id

    visit(root)
    return tuple(out)
