"""Key terms of a DELETE's or UPDATE's predicate: the values its top-level ``AND``
conjuncts ``col = literal``, ``literal = col`` and ``col IN (literals)`` pin table columns
to, so that the statement finds its rows with the key lookup (``read_rows(keys=...)``,
:mod:`acidstream.acid.key_lookup`) instead of reading whole stripes. Runs on the driver.

The terms are taken from the compiled predicate (the Arrow expression the reader applies),
not from the SQL text: it is what decides which rows match, its literals are already of
the column's type (``d = '2024-01-02'`` is a date), and a predicate given as a
``pyarrow.compute`` expression is covered too. pyarrow lists no expression's parts, but
pickles an expression as an Arrow IPC file whose schema metadata spells the tree in prefix
order (``call``, ``field_ref``, ``literal``, ``options``, ``end``) and whose columns hold
the literals and function options; that is read here. Anything not recognised (another
function, an ``OR``, a ``NOT``, a cast that may change values, a NULL literal or a NULL in
an ``IN`` list, a column type the lookup does not handle, a change of that format) gives
no term: the statement then reads as before. The terms only prune: the full predicate is
still applied to the rows read, and each term is sound on its own (a row satisfying the
predicate holds one of its values).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Collection, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

__all__ = ["key_terms"]

log = logging.getLogger(__name__)

_AND = frozenset({"and", "and_kleene"})


@dataclass(frozen=True)
class _Field:
    name: str


@dataclass(frozen=True)
class _Literal:
    index: int


@dataclass(frozen=True)
class _Call:
    name: str
    args: tuple[_Node, ...]
    options: int | None


_Node = _Field | _Literal | _Call


def key_terms(
    where: pc.Expression | None, schema: pa.Schema, *, exclude: Collection[str] = ()
) -> dict[str, pa.Array]:
    """Column name -> the distinct values (of the column's type) that every row satisfying
    ``where`` holds one of, for the columns of ``schema`` (not in ``exclude``: partition
    columns, pruned by their directories) that top-level conjuncts of ``where`` pin;
    empty when none does. Of two terms on one column the one with fewer values is kept."""
    if where is None:
        return {}
    out: dict[str, pa.Array] = {}
    try:
        tree, literals = _decode(where)
        for conjunct in _conjuncts(tree):
            term = _term(conjunct, literals, schema, exclude)
            if term is None:
                continue
            name, values = term
            if name not in out or len(values) < len(out[name]):
                out[name] = values
    except Exception as e:  # any surprise (a change of the format) only means a full read
        log.debug("no key terms in %s: %s", where, e)
        return {}
    return out


# -- the expression's tree -------------------------------------------------------------


def _decode(expr: pc.Expression) -> tuple[_Node, list[pa.Scalar]]:
    """The tree of ``expr`` and its literals (by index), from its pickled form."""
    _, args = expr.__reduce__()
    buf = args[0]
    if not isinstance(buf, pa.Buffer):
        raise ValueError(f"unexpected pickled form {type(buf)}")
    reader = ipc.open_file(buf)
    literals: list[pa.Scalar] = []
    if reader.num_record_batches:
        batch = reader.get_batch(0)
        literals = [col[0] for col in batch.columns]
    tokens = _metadata(reader.schema.serialize().to_pybytes())
    node, end = _parse(tokens, 0)
    if end != len(tokens):
        raise ValueError("trailing tokens")
    return node, literals


def _parse(tokens: list[tuple[str, str]], i: int) -> tuple[_Node, int]:
    kind, value = tokens[i]
    if kind == "field_ref":
        return _Field(value), i + 1
    if kind == "literal":
        return _Literal(int(value)), i + 1
    if kind != "call":
        raise ValueError(f"unexpected token {kind!r}")
    args: list[_Node] = []
    options: int | None = None
    i += 1
    while tokens[i][0] != "end":
        if tokens[i][0] == "options":
            options = int(tokens[i][1])
            i += 1
            continue
        arg, i = _parse(tokens, i)
        args.append(arg)
    if tokens[i][1] != value:
        raise ValueError(f"call {value!r} ends as {tokens[i][1]!r}")
    return _Call(value, tuple(args), options), i + 1


def _metadata(message: bytes) -> list[tuple[str, str]]:
    """The schema's custom metadata, in order and with repeated keys (pyarrow's
    ``Schema.metadata`` is a dict and keeps one value per key), from the encapsulated IPC
    schema message (a ``Message`` flatbuffer whose header is a ``Schema``)."""
    start = 8 if message[:4] == b"\xff\xff\xff\xff" else 4
    fb = message[start:]
    msg = _root(fb)
    if _u8_field(fb, msg, 1) != 1:  # header_type: Schema
        raise ValueError("not a schema message")
    schema = _table_at(fb, _field_pos(fb, msg, 2))
    kvs = _field_pos(fb, schema, 2)  # custom_metadata: [KeyValue]
    if kvs is None:
        return []
    out: list[tuple[str, str]] = []
    for pos in _vector(fb, kvs):
        kv = _table_at(fb, pos)
        out.append((_string(fb, _field_pos(fb, kv, 0)), _string(fb, _field_pos(fb, kv, 1))))
    return out


# A minimal flatbuffer reader: a table is a position whose int32 points back to its
# vtable (uint16 sizes, then one uint16 offset per field, 0 for absent); references are
# uint32 offsets from where they are stored.


def _root(fb: bytes) -> int:
    return int(struct.unpack_from("<I", fb, 0)[0])


def _table_at(fb: bytes, pos: int | None) -> int:
    if pos is None:
        raise ValueError("missing table")
    return pos + int(struct.unpack_from("<I", fb, pos)[0])


def _field_pos(fb: bytes, table: int, i: int) -> int | None:
    vtable = table - int(struct.unpack_from("<i", fb, table)[0])
    size = int(struct.unpack_from("<H", fb, vtable)[0])
    at = 4 + 2 * i
    if at + 2 > size:
        return None
    off = int(struct.unpack_from("<H", fb, vtable + at)[0])
    return table + off if off else None


def _u8_field(fb: bytes, table: int, i: int) -> int:
    pos = _field_pos(fb, table, i)
    return 0 if pos is None else fb[pos]


def _vector(fb: bytes, pos: int) -> list[int]:
    vec = pos + int(struct.unpack_from("<I", fb, pos)[0])
    n = int(struct.unpack_from("<I", fb, vec)[0])
    return [vec + 4 + 4 * k for k in range(n)]


def _string(fb: bytes, pos: int | None) -> str:
    if pos is None:
        raise ValueError("missing string")
    s = pos + int(struct.unpack_from("<I", fb, pos)[0])
    n = int(struct.unpack_from("<I", fb, s)[0])
    return fb[s + 4 : s + 4 + n].decode()


# -- terms -----------------------------------------------------------------------------


def _conjuncts(node: _Node) -> Iterator[_Node]:
    if isinstance(node, _Call) and node.name in _AND and len(node.args) == 2:
        for a in node.args:
            yield from _conjuncts(a)
    else:
        yield node


def _key_type(t: pa.DataType) -> bool:
    """Column types whose values the lookup matches by ``is_in`` exactly as ``=`` does
    (not floating point: ``-0.0 = 0.0`` and NaN differ there)."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date32(t)
    )


def _term(
    node: _Node, literals: list[pa.Scalar], schema: pa.Schema, exclude: Collection[str]
) -> tuple[str, pa.Array] | None:
    if not isinstance(node, _Call):
        return None
    if node.name == "equal" and len(node.args) == 2:
        a, b = node.args
        if isinstance(a, _Literal):
            a, b = b, a
        if not isinstance(b, _Literal):
            return None
        col = _column(a, literals, schema, exclude)
        value = literals[b.index]
        if col is None or not value.is_valid:
            return None
        return _values(col, pa.array([value.as_py()], value.type))
    if node.name == "is_in" and len(node.args) == 1 and node.options is not None:
        col = _column(node.args[0], literals, schema, exclude)
        opts = literals[node.options]
        if col is None or not isinstance(opts, pa.StructScalar):
            return None
        if opts.type.get_field_index("value_set") < 0:
            return None
        value_set = opts["value_set"].values
        if value_set is None or value_set.null_count or not len(value_set):
            return None
        return _values(col, value_set)
    if node.name == "if_else" and len(node.args) == 3:
        # SQL's IN: if_else(is_null(x), NULL, is_in(x, ...)) is true where is_in is
        cond, then, other = node.args
        if (
            isinstance(cond, _Call)
            and cond.name == "is_null"
            and isinstance(then, _Literal)
            and not literals[then.index].is_valid
            and isinstance(other, _Call)
            and other.name == "is_in"
            and cond.args == other.args
        ):
            return _term(other, literals, schema, exclude)
    return None


def _column(
    node: _Node, literals: list[pa.Scalar], schema: pa.Schema, exclude: Collection[str]
) -> pa.Field | None:
    """The table column ``node`` is: a column of a key type, or such an integer column
    cast to another integer type (a checked cast: it never changes a value)."""
    if isinstance(node, _Call) and node.name == "cast" and len(node.args) == 1:
        inner = _column(node.args[0], literals, schema, exclude)
        if inner is None or node.options is None or not pa.types.is_integer(inner.type):
            return None
        opts = literals[node.options]
        if not isinstance(opts, pa.StructScalar) or opts.type.get_field_index("to_type") < 0:
            return None
        if opts["allow_int_overflow"].as_py() is not False:
            return None
        return inner if pa.types.is_integer(opts.type.field("to_type").type) else None
    if not isinstance(node, _Field) or node.name in exclude:
        return None
    i = schema.get_field_index(node.name)
    if i < 0 or not _key_type(schema.field(i).type):
        return None
    return schema.field(i)


def _values(col: pa.Field, values: pa.Array) -> tuple[str, pa.Array] | None:
    """``values`` as distinct values of ``col``'s type, when they are of its kind and each
    casts to it exactly; ``None`` otherwise (an integer out of the column's range, say)."""
    t, v = col.type, values.type
    same_kind = (
        (pa.types.is_integer(t) and pa.types.is_integer(v))
        or (pa.types.is_date32(t) and pa.types.is_date32(v))
        or (
            (pa.types.is_string(t) or pa.types.is_large_string(t))
            and (pa.types.is_string(v) or pa.types.is_large_string(v))
        )
    )
    if not same_kind:
        return None
    try:
        cast = pc.cast(values, t, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return col.name, pc.unique(cast)
