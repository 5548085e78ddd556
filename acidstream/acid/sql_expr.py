"""SQL text in Hive's syntax compiled to Arrow compute expressions.

What this is for: the row-level mutations (issue 30: DELETE's ``where``, UPDATE's ``set``,
MERGE's conditions) take predicates and SET expressions as SQL text, as Hive does. The text
is parsed by sqlglot (Hive's dialect; acidstream never hand-writes a SQL parser) and
compiled to a :class:`pyarrow.compute.Expression` over the Arrow schema of the rows being
filtered or updated. Every check runs here, before any transaction is opened: unknown or
ambiguous columns, type errors (each node is bound against an empty table of the schema,
so Arrow's own kernel resolution decides, and its error becomes a ``ConfigError`` naming
the SQL), syntax errors, a WHERE that is not boolean and anything outside the supported
subset are all :class:`~acidstream.acid.errors.ConfigError`.

NULLs follow SQL's three-valued logic: comparisons with NULL are NULL, ``AND``/``OR`` are
Kleene's, ``NOT NULL`` is NULL. A predicate's result is NULL for such rows; the *caller*
drops them by filtering with the expression (``Table.filter`` and ``Dataset.to_table(
filter=...)`` treat NULL as not selected, as SQL's WHERE does). Code that computes a mask
itself must do the same (``pc.fill_null(mask, False)``), never ``pc.invert`` a raw mask.

A pure library (format layer): imports only pyarrow, sqlglot and ``acidstream.acid``; it
runs wherever the mutation runs (the Python process, or the Spark driver that checks the
text before planning). The text is parsed in ``acid/sql_text.py`` (which also splits
``c = expr`` assignments); Hive's type rules are ``acid/sql_types.py``.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc
from sqlglot import exp

from acidstream.acid.errors import ConfigError
from acidstream.acid.schema import parse_hive_type
from acidstream.acid.sql_text import DIALECT, parse_assignments, parse_expression, render
from acidstream.acid.sql_types import (
    CASTABLE,
    INT_DIGITS,
    INT_ORDER,
    common_numeric,
    hive_name,
    is_integer,
    parses_from_string,
    widens,
)
from acidstream.acid.timestamps import DEFAULT_TIMESTAMP_UNIT

__all__ = ["compile_predicate", "compile_value", "parse_assignments"]

_NULL = pa.null()
_BOOL = pa.bool_()
_INT_TEXT = re.compile(r"^\d+$")
_DECIMAL_TEXT = re.compile(r"^(\d*)\.(\d*)$")


@dataclass(frozen=True, slots=True)
class _Node:
    """A compiled sub-expression: the Arrow expression, its bound type and, for a constant
    (a literal, or an expression of literals folded here), its value."""

    expr: pc.Expression
    type: pa.DataType
    value: pa.Scalar | None = None

    @property
    def const(self) -> bool:
        return self.value is not None


def _const(value: pa.Scalar) -> _Node:
    return _Node(pc.scalar(value), value.type, value)


class _Compiler:
    """Compiles one sqlglot tree over one schema; each method returns a bound ``_Node``."""

    def __init__(
        self,
        schema: pa.Schema,
        text: str,
        qualifiers: Mapping[str, str] | None,
        default_qualifier: str | None,
    ) -> None:
        self.schema = schema
        self.text = text
        self.empty = schema.empty_table()
        self.one_row = pa.table({"_": [0]})
        ts_units = [f.type.unit for f in schema if pa.types.is_timestamp(f.type)]
        self.ts_unit = ts_units[0] if ts_units else DEFAULT_TIMESTAMP_UNIT
        self.qualifiers = {a.lower(): p for a, p in (qualifiers or {}).items()}
        if default_qualifier is not None and default_qualifier.lower() not in self.qualifiers:
            raise ConfigError(
                f"default_qualifier {default_qualifier!r} is not one of the qualifiers "
                f"{sorted(self.qualifiers)}"
            )
        self.default = None if default_qualifier is None else default_qualifier.lower()
        # Each field belongs to the longest prefix it starts with, so with {"src": "src.",
        # "tgt": ""} the field "src.op" is src's op and not a target column named "src.op".
        prefixes = sorted(set(self.qualifiers.values()) | ({""} if not qualifiers else set()))
        self.columns: dict[str, dict[str, str]] = {p: {} for p in prefixes}
        for name in schema.names:
            owners = [p for p in prefixes if name.lower().startswith(p.lower())]
            if owners:
                p = max(owners, key=len)
                self.columns[p].setdefault(name[len(p) :].lower(), name)

    # -- binding ----------------------------------------------------------------------

    def bind(self, expr: pc.Expression, node: exp.Expr) -> pa.DataType:
        """The type ``expr`` has over the schema: Arrow binds it on an empty table; its
        error (no kernel for these types, a bad cast) is a ``ConfigError`` naming the SQL."""
        try:
            return self._project(self.empty, expr).type
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as e:
            msg = str(e).strip().splitlines()[0]
            raise ConfigError(f"type error in {render(node)!r} (in {self.text!r}): {msg}") from e

    def fold(self, expr: pc.Expression) -> pa.Scalar:
        """The value of a constant expression (raises Arrow's error)."""
        return self._project(self.one_row, expr)[0]

    @staticmethod
    def _project(table: pa.Table, expr: pc.Expression) -> pa.ChunkedArray:
        decl = acero.Declaration.from_sequence(
            [
                acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
                acero.Declaration("project", acero.ProjectNodeOptions([expr], ["v"])),
            ]
        )
        return decl.to_table()["v"]

    def node(self, expr: pc.Expression, node: exp.Expr) -> _Node:
        return _Node(expr, self.bind(expr, node))

    # -- dispatch ---------------------------------------------------------------------

    def compile(self, node: exp.Expr) -> _Node:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise _unsupported(node)
        return handler(self, node)

    def boolean(self, node: exp.Expr, role: str) -> _Node:
        """``node`` compiled where SQL wants a boolean (an operand of AND, a WHEN)."""
        n = self.compile(node)
        if n.type == _NULL:
            return _const(pa.scalar(None, _BOOL))
        if n.type != _BOOL:
            raise ConfigError(
                f"{role} {render(node)!r} (in {self.text!r}) is {hive_name(n.type)}, not boolean"
            )
        return n

    # -- leaves -----------------------------------------------------------------------

    def column(self, node: exp.Column) -> _Node:
        if isinstance(node.this, exp.Star) or node.args.get("db") or node.args.get("catalog"):
            raise _unsupported(node)
        name = node.name
        alias = node.table
        if alias:
            if alias.lower() not in self.qualifiers:
                known = ", ".join(sorted(self.qualifiers)) or "none (write the bare column name)"
                raise ConfigError(
                    f"unknown table alias {alias!r} in {render(node)!r} (in {self.text!r}); "
                    f"aliases: {known}"
                )
            prefixes = [self.qualifiers[alias.lower()]]
        elif self.default is not None:
            prefixes = [self.qualifiers[self.default]]
        else:
            prefixes = list(self.columns)
        hits = [self.columns[p][name.lower()] for p in prefixes if name.lower() in self.columns[p]]
        if not hits:
            listed = sorted({c for p in prefixes for c in self.columns[p]})
            raise ConfigError(
                f"unknown column {render(node)!r} in {self.text!r}; the columns are: "
                f"{', '.join(listed) or '(none)'}"
            )
        if len(hits) > 1:
            owners = sorted(
                a for a, p in self.qualifiers.items() if name.lower() in self.columns[p]
            )
            raise ConfigError(
                f"ambiguous column {name!r} in {self.text!r}: it is a column of "
                f"{' and '.join(owners)}; qualify it ({owners[0]}.{name})"
            )
        field = hits[0]
        return _Node(pc.field(field), self.schema.field(field).type)

    def literal(self, node: exp.Literal) -> _Node:
        text = node.this
        if node.is_string:
            return _const(pa.scalar(text, pa.string()))
        if _INT_TEXT.match(text):
            v = int(text)
            # Hive's integer literal is INT, or BIGINT when it does not fit.
            for t in (pa.int32(), pa.int64()):
                if v < 2 ** (t.bit_width - 1):
                    return _const(pa.scalar(v, t))
            if len(text) <= 38:
                return _const(pa.scalar(decimal.Decimal(text), pa.decimal128(len(text), 0)))
            raise ConfigError(f"integer literal {text} (in {self.text!r}) has more than 38 digits")
        m = _DECIMAL_TEXT.match(text)
        if m:
            # An exact decimal, as DuckDB and standard SQL read "1.5" (Hive reads DOUBLE but
            # converts back for decimal columns): "price = 0.1" must compare exactly.
            whole, frac = m.group(1).lstrip("0"), m.group(2)
            precision = max(len(whole) + len(frac), 1)
            if precision <= 38:
                t = pa.decimal128(precision, len(frac))
                return _const(pa.scalar(decimal.Decimal(text), t))
        try:
            return _const(pa.scalar(float(text), pa.float64()))
        except ValueError as e:
            raise ConfigError(f"bad number {text!r} in {self.text!r}") from e

    def boolean_literal(self, node: exp.Boolean) -> _Node:
        return _const(pa.scalar(bool(node.this), _BOOL))

    def null(self, node: exp.Null) -> _Node:
        return _const(pa.scalar(None, _NULL))

    def paren(self, node: exp.Paren) -> _Node:
        return self.compile(node.this)

    # -- types ------------------------------------------------------------------------

    def arrow_type(self, node: exp.DataType) -> pa.DataType:
        hive = node.sql(dialect=DIALECT)
        try:
            ht = parse_hive_type(hive.lower())
        except ConfigError as e:
            raise _unsupported(node, f"type {hive}") from e
        if ht.kind not in CASTABLE:
            raise _unsupported(node, f"type {hive}")
        return ht.to_arrow(timestamp_unit=self.ts_unit)

    def cast(self, node: exp.Cast) -> _Node:
        target = self.arrow_type(node.to)
        inner = self.compile(node.this)
        expr = inner.expr
        if is_integer(target) and (
            pa.types.is_floating(inner.type) or pa.types.is_decimal(inner.type)
        ):
            expr = pc.trunc(expr)  # Hive's CAST(1.9 AS INT) is 1: truncate, then a checked cast
        expr = expr.cast(target)
        if inner.const:
            try:
                return _const(self.fold(expr))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                if type(node) is exp.TryCast:
                    # Hive's CAST of a value that does not convert is NULL.
                    return _const(pa.scalar(None, target))
                # A typed literal (DATE '2020-13-01') that does not parse is an error.
                raise ConfigError(
                    f"{render(node)!r} (in {self.text!r}) is not a valid {hive_name(target)}: "
                    f"{str(e).splitlines()[0]}"
                ) from e
        return self.node(expr, node)

    def unify(self, nodes: list[_Node], sql: exp.Expr) -> list[_Node]:
        """Operands that SQL compares or chooses between, brought to one type where Hive
        converts implicitly: NULL takes the others' type; a string literal next to a date,
        timestamp or decimal is parsed as one (a bad one is an error now); a date next to a
        timestamp becomes a timestamp. Numbers are left to Arrow's own promotion."""
        typed = [n.type for n in nodes if n.type != _NULL and not _is_string_const(n)]
        temporal = [t for t in typed if pa.types.is_timestamp(t)]
        anchor = temporal[0] if temporal else (typed[0] if typed else None)
        if anchor is None and any(_is_string_const(n) for n in nodes):
            anchor = pa.string()
        out: list[_Node] = []
        for n in nodes:
            if anchor is None:
                out.append(n)
            elif n.type == _NULL:
                out.append(
                    _const(pa.scalar(None, anchor))
                    if n.const
                    else self.node(n.expr.cast(anchor), sql)
                )
            elif _is_string_const(n) and parses_from_string(anchor):
                out.append(self._parse_literal(n, anchor, sql))
            elif pa.types.is_date(n.type) and pa.types.is_timestamp(anchor):
                out.append(_Node(n.expr.cast(anchor), anchor))
            else:
                out.append(n)
        # Arrow compares a decimal with an integer or another decimal through a decimal
        # that may be too narrow (and fails): bring the numbers to one type that holds all.
        if any(pa.types.is_decimal(n.type) for n in out):
            target = common_numeric([n.type for n in out if n.type != _NULL])
            if target is not None:
                out = [self.cast_to(n, target) for n in out]
        return out

    def cast_to(self, n: _Node, target: pa.DataType) -> _Node:
        """``n`` as ``target`` (a widening: the value is kept)."""
        if n.type == target:
            return n
        return _Node(n.expr.cast(target), target, _cast_value(n.value, target))

    def common(self, nodes: list[_Node], sql: exp.Expr) -> list[_Node]:
        """``unify``, then every operand cast to one type (Arrow's promotion for coalesce)
        for functions whose kernels want equal types (CASE, IF, IN's value set)."""
        nodes = self.unify(nodes, sql)
        if all(n.type == _NULL for n in nodes):
            return nodes
        target = common_numeric([n.type for n in nodes if n.type != _NULL])
        if target is None:
            target = self.bind(pc.coalesce(*[n.expr for n in nodes]), sql)
        return [
            n
            if n.type == target
            else _Node(n.expr.cast(target), target, _cast_value(n.value, target))
            for n in nodes
        ]

    def _parse_literal(self, n: _Node, target: pa.DataType, sql: exp.Expr) -> _Node:
        assert n.value is not None
        try:
            return _const(n.value.cast(target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise ConfigError(
                f"{n.value.as_py()!r} in {render(sql)!r} (in {self.text!r}) is not a "
                f"{hive_name(target)}: {str(e).splitlines()[0]}"
            ) from e

    # -- predicates -------------------------------------------------------------------

    def compare(self, node: exp.Binary) -> _Node:
        fn = _COMPARISONS[type(node)]
        a, b = self.unify([self.compile(node.this), self.compile(node.expression)], node)
        return self.node(fn(a.expr, b.expr), node)

    def null_safe_eq(self, node: exp.NullSafeEQ) -> _Node:
        a, b = self.unify([self.compile(node.this), self.compile(node.expression)], node)
        na, nb = pc.is_null(a.expr), pc.is_null(b.expr)
        # and_kleene/or_kleene: pyarrow cannot put its plain "and"/"or" in an expression,
        # and is_null is never NULL, so Kleene's logic is the plain one here.
        expr = pc.if_else(
            pc.or_kleene(na, nb),
            pc.and_kleene(na, nb),
            pc.coalesce(pc.equal(a.expr, b.expr), False),
        )
        return self.node(expr, node)

    def and_(self, node: exp.And) -> _Node:
        a, b = self.boolean(node.this, "AND operand"), self.boolean(node.expression, "AND operand")
        return self.node(pc.and_kleene(a.expr, b.expr), node)

    def or_(self, node: exp.Or) -> _Node:
        a, b = self.boolean(node.this, "OR operand"), self.boolean(node.expression, "OR operand")
        return self.node(pc.or_kleene(a.expr, b.expr), node)

    def not_(self, node: exp.Not) -> _Node:
        return self.node(pc.invert(self.boolean(node.this, "NOT operand").expr), node)

    def in_(self, node: exp.In) -> _Node:
        for key in ("query", "unnest", "field"):
            if node.args.get(key):
                raise _unsupported(node, "IN (subquery)")
        x = self.compile(node.this)
        items = [self.compile(e) for e in node.expressions]
        if not items:
            raise ConfigError(f"empty IN list in {self.text!r}")
        if not all(i.const for i in items):
            # Column operands: SQL's IN is the OR of equalities (same NULL semantics).
            x_and_items = self.unify([x, *items], node)
            x2 = x_and_items[0]
            ors = [pc.equal(x2.expr, i.expr) for i in x_and_items[1:]]
            expr = ors[0]
            for o in ors[1:]:
                expr = pc.or_kleene(expr, o)
            return self.node(expr, node)
        unified = self.common([x, *items], node)
        x2, values = unified[0], unified[1:]
        present = [v.value for v in values if v.value is not None and v.value.is_valid]
        value_set = pa.array([v.as_py() for v in present], type=x2.type)
        expr = pc.is_in(x2.expr, value_set=value_set)
        null_bool = pc.scalar(pa.scalar(None, _BOOL))
        # is_in says false for a NULL x and for "no match" with a NULL in the list; SQL
        # says NULL (unknown) in both.
        expr = pc.if_else(pc.is_null(x2.expr), null_bool, expr)
        if len(present) < len(values):
            expr = pc.or_kleene(expr, null_bool)
        return self.node(expr, node)

    def between(self, node: exp.Between) -> _Node:
        x, lo, hi = self.unify(
            [
                self.compile(node.this),
                self.compile(node.args["low"]),
                self.compile(node.args["high"]),
            ],
            node,
        )
        expr = pc.and_kleene(pc.greater_equal(x.expr, lo.expr), pc.less_equal(x.expr, hi.expr))
        return self.node(expr, node)

    def is_(self, node: exp.Is) -> _Node:
        what = node.expression
        x = self.compile(node.this)
        if isinstance(what, exp.Null):
            return self.node(pc.is_null(x.expr), node)
        if isinstance(what, exp.Boolean):
            b = self.boolean(node.this, "IS operand")
            expr = b.expr if what.this else pc.invert(b.expr)
            return self.node(pc.coalesce(expr, False), node)
        raise _unsupported(node, "IS " + render(what))

    def like(self, node: exp.Like) -> _Node:
        x = self.compile(node.this)
        pattern = self.compile(node.expression)
        if not (pattern.const and pattern.type == pa.string()):
            raise _unsupported(node, "LIKE with a pattern that is not a string literal")
        assert pattern.value is not None
        if not pattern.value.is_valid:
            return _const(pa.scalar(None, _BOOL))
        # Arrow's LIKE has Hive's wildcards (% and _) and Hive's escape (backslash).
        expr = pc.match_like(x.expr, pattern=pattern.value.as_py())
        if node.args.get("negate"):
            expr = pc.invert(expr)
        return self.node(expr, node)

    # -- arithmetic -------------------------------------------------------------------

    def arith(self, node: exp.Binary) -> _Node:
        fn = _ARITHMETIC[type(node)]
        a, b = self.numeric_operands(self.compile(node.this), self.compile(node.expression))
        # Checked kernels: an overflow is an error, never a silently wrapped value.
        return self.node(fn(a.expr, b.expr), node)

    def numeric_operands(self, a: _Node, b: _Node) -> tuple[_Node, _Node]:
        """Operands of arithmetic brought to Hive's result type: integers to the wider of
        the two; with a decimal, an integer as the exact decimal(digits, 0) (Arrow would
        cast it to the other decimal's precision, which may not hold it); a floating
        operand with a decimal makes both doubles."""
        if any(pa.types.is_floating(t) for t in (a.type, b.type)) and any(
            pa.types.is_decimal(t) for t in (a.type, b.type)
        ):
            # Hive: decimal with double is double (Arrow may instead cast the double to a
            # narrow decimal and fail on the data).
            return self.cast_to(a, pa.float64()), self.cast_to(b, pa.float64())
        if is_integer(a.type) and is_integer(b.type) and a.type != b.type:
            # Hive: tinyint + int is int. Arrow would cast the literal 1 in "ti + 1" down
            # to the column's int8 and overflow where Hive does not.
            wider = max(a.type, b.type, key=INT_ORDER.index)
            return self.cast_to(a, wider), self.cast_to(b, wider)
        if pa.types.is_decimal(a.type) and is_integer(b.type):
            b = self.cast_to(b, pa.decimal128(INT_DIGITS[b.type], 0))
        elif pa.types.is_decimal(b.type) and is_integer(a.type):
            a = self.cast_to(a, pa.decimal128(INT_DIGITS[a.type], 0))
        return a, b

    def _nonzero(self, b: _Node) -> pc.Expression:
        # Hive's x / 0 and x % 0 are NULL: a zero divisor is replaced by NULL first.
        null = pc.scalar(pa.scalar(None, b.type))
        zero = pc.scalar(pa.scalar(0, pa.int8()).cast(b.type))  # of b's type: see unify
        return pc.if_else(pc.equal(b.expr, zero), null, b.expr)

    def div(self, node: exp.Div) -> _Node:
        a, b = self.numeric_operands(self.compile(node.this), self.compile(node.expression))
        ea, eb = a.expr, b.expr
        if is_integer(a.type) and is_integer(b.type):
            # Hive's "/" of two integers is a DOUBLE ("div" is integer division).
            ea, eb = ea.cast(pa.float64()), eb.cast(pa.float64())
            b = _Node(eb, pa.float64())
        return self.node(pc.divide(ea, self._nonzero(b)), node)

    def mod(self, node: exp.Mod) -> _Node:
        a, b = self.numeric_operands(self.compile(node.this), self.compile(node.expression))
        # remainder: the sign of the dividend, as Java's and Hive's %.
        return self.node(pc.remainder_checked(a.expr, self._nonzero(b)), node)

    def neg(self, node: exp.Neg) -> _Node:
        x = self.compile(node.this)
        expr = pc.negate_checked(x.expr)
        if x.const:
            try:
                return _const(self.fold(expr))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise ConfigError(f"{render(node)!r} in {self.text!r}: {e}") from e
        return self.node(expr, node)

    # -- conditionals -----------------------------------------------------------------

    def case(self, node: exp.Case) -> _Node:
        subject = node.args.get("this")
        conds: list[pc.Expression] = []
        for arm in node.args["ifs"]:
            if subject is not None:
                s, w = self.unify([self.compile(subject), self.compile(arm.this)], arm)
                conds.append(self.node(pc.equal(s.expr, w.expr), arm).expr)
            else:
                conds.append(self.boolean(arm.this, "WHEN condition").expr)
        default = node.args.get("default")
        results = [self.compile(arm.args["true"]) for arm in node.args["ifs"]]
        results.append(self.compile(default) if default is not None else self.null(exp.Null()))
        results = self.common(results, node)
        if results[0].type == _NULL:
            return _const(pa.scalar(None, _NULL))
        # case_when takes the first arm whose condition is true; NULL counts as not true,
        # as SQL's CASE says.
        names = [str(i) for i in range(len(conds))]
        expr = pc.case_when(pc.make_struct(*conds, field_names=names), *[r.expr for r in results])
        return self.node(expr, node)

    def if_(self, node: exp.If) -> _Node:
        cond = self.boolean(node.this, "IF condition")
        other = node.args.get("false")
        a, b = self.common(
            [
                self.compile(node.args["true"]),
                self.compile(other) if other is not None else self.null(exp.Null()),
            ],
            node,
        )
        if a.type == _NULL:
            return _const(pa.scalar(None, _NULL))
        # Hive's IF(NULL, a, b) is b: only a true condition picks a.
        return self.node(pc.if_else(pc.coalesce(cond.expr, False), a.expr, b.expr), node)

    def coalesce(self, node: exp.Coalesce) -> _Node:
        args = [self.compile(node.this), *[self.compile(e) for e in node.expressions]]
        args = self.common(args, node)
        if args[0].type == _NULL:
            return _const(pa.scalar(None, _NULL))
        return self.node(pc.coalesce(*[a.expr for a in args]), node)

    # -- functions --------------------------------------------------------------------

    def as_string(self, n: _Node) -> pc.Expression:
        """Hive's implicit conversion of a function's argument to STRING."""
        if n.type in (pa.string(), _NULL):
            return n.expr.cast(pa.string()) if n.type == _NULL else n.expr
        return n.expr.cast(pa.string())

    def lower(self, node: exp.Lower) -> _Node:
        return self.node(pc.utf8_lower(self.as_string(self.compile(node.this))), node)

    def upper(self, node: exp.Upper) -> _Node:
        return self.node(pc.utf8_upper(self.as_string(self.compile(node.this))), node)

    def length(self, node: exp.Length) -> _Node:
        x = self.compile(node.this)
        if x.type == pa.binary():
            return self.node(pc.binary_length(x.expr), node)
        return self.node(pc.utf8_length(self.as_string(x)), node)

    def concat(self, node: exp.Concat | exp.DPipe) -> _Node:
        parts = node.expressions if isinstance(node, exp.Concat) else [node.this, node.expression]
        args = [self.compile(p) for p in parts]
        if args and all(a.const and a.type == pa.string() for a in args):
            # Adjacent string literals ('it''s' is "it" "s" to Hive): one literal.
            values = [a.value.as_py() for a in args if a.value is not None]
            return _const(pa.scalar("".join(values), pa.string()))
        # Hive's concat is NULL when any argument is NULL (emit_null).
        expr = pc.binary_join_element_wise(*[self.as_string(a) for a in args], "")
        return self.node(expr, node)

    def int_const(self, node: exp.Expr | None, role: str, default: int) -> int:
        if node is None:
            return default
        n = self.compile(node)
        if not (n.const and is_integer(n.type) and n.value is not None and n.value.is_valid):
            raise _unsupported(node, f"{role} that is not an integer literal")
        return int(n.value.as_py())

    def substring(self, node: exp.Substring) -> _Node:
        x = self.as_string(self.compile(node.this))
        pos = self.int_const(node.args.get("start"), "substr position", 1)
        length = node.args.get("length")
        n = None if length is None else self.int_const(length, "substr length", 0)
        # Hive's UDFSubstr: positions are 1-based, 0 is the start, a negative one counts
        # from the end, a length <= 0 or a position beyond either end gives ''.
        if n is not None and n <= 0:
            return self.node(pc.utf8_slice_codeunits(x, start=0, stop=0), node)
        if pos >= 0:
            start = max(pos - 1, 0)
            stop = None if n is None else start + n
            return self.node(pc.utf8_slice_codeunits(x, start=start, stop=stop), node)
        stop = None if n is None or pos + n >= 0 else pos + n
        sliced = pc.utf8_slice_codeunits(x, start=pos, stop=stop)
        too_far = pc.less(pc.utf8_length(x), pc.scalar(-pos))
        return self.node(pc.if_else(too_far, pc.scalar(""), sliced), node)

    def trim(self, node: exp.Trim) -> _Node:
        if node.args.get("expression") is not None or node.args.get("collation") is not None:
            raise _unsupported(node, "TRIM(... FROM ...)")
        x = self.as_string(self.compile(node.this))
        position = (node.args.get("position") or "BOTH").upper()
        fn = {"BOTH": pc.utf8_trim, "LEADING": pc.utf8_ltrim, "TRAILING": pc.utf8_rtrim}[position]
        # Hive's trim strips spaces only, not all white space.
        return self.node(fn(x, characters=" "), node)

    def abs_(self, node: exp.Abs) -> _Node:
        return self.node(pc.abs_checked(self.compile(node.this).expr), node)

    def round_(self, node: exp.Round) -> _Node:
        if node.args.get("truncate") is not None:
            raise _unsupported(node)
        x = self.compile(node.this)
        digits = self.int_const(node.args.get("decimals"), "round digits", 0)
        expr = x.expr
        if pa.types.is_decimal(x.type) and x.type.precision < 38:
            # Rounding may carry into a new digit (99.99 -> 100.00): one more digit of
            # precision, or Arrow's round overflows to a wrong value without an error.
            expr = expr.cast(pa.decimal128(x.type.precision + 1, x.type.scale))
        # Hive rounds HALF_UP: halves away from zero.
        expr = pc.round(expr, ndigits=digits, round_mode="half_towards_infinity")
        return self.node(expr, node)

    # -- assignment -------------------------------------------------------------------

    def assign(self, n: _Node, target: pa.DataType, sql: exp.Expr) -> pc.Expression:
        """A SET expression's value as the column's type (Hive's implicit conversions
        where they lose nothing; a literal may also narrow when its value fits)."""
        src = n.type
        if src == target:
            return n.expr
        if src == _NULL:
            return pc.scalar(pa.scalar(None, target)) if n.const else n.expr.cast(target)
        what = f"SET value {render(sql)!r} (in {self.text!r})"
        if n.const and n.value is not None:
            if _is_string_const(n) and not parses_from_string(target):
                raise ConfigError(
                    f"{what} is a string; the column is {hive_name(target)}: write CAST(... AS "
                    f"{hive_name(target)}) if that is meant"
                )
            try:
                return pc.scalar(n.value.cast(target))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise ConfigError(
                    f"{what} does not fit the column's type {hive_name(target)}: "
                    f"{str(e).splitlines()[0]}"
                ) from e
        if widens(src, target):
            return n.expr.cast(target)
        raise ConfigError(
            f"{what} is {hive_name(src)}; converting it to the column's type "
            f"{hive_name(target)} could lose information or is impossible: write an explicit "
            f"CAST(... AS {hive_name(target)})"
        )


def _unsupported(node: exp.Expr, name: str | None = None) -> ConfigError:
    if name is None:
        if isinstance(node, exp.Anonymous):
            name = f"function {node.name}"
        elif isinstance(node, exp.Func):
            name = f"function {node.sql_name()}"
        else:
            name = node.key.upper()
    return ConfigError(f"{render(node)!r} is not supported in acidstream's SQL: {name}")


def _is_string_const(n: _Node) -> bool:
    return n.const and n.type == pa.string()


def _cast_value(value: pa.Scalar | None, t: pa.DataType) -> pa.Scalar | None:
    return None if value is None else value.cast(t)


_COMPARISONS: dict[type[exp.Expr], Callable[..., pc.Expression]] = {
    exp.EQ: pc.equal,
    exp.NEQ: pc.not_equal,
    exp.LT: pc.less,
    exp.LTE: pc.less_equal,
    exp.GT: pc.greater,
    exp.GTE: pc.greater_equal,
}
_ARITHMETIC: dict[type[exp.Expr], Callable[..., pc.Expression]] = {
    exp.Add: pc.add_checked,
    exp.Sub: pc.subtract_checked,
    exp.Mul: pc.multiply_checked,
}
_HANDLERS: dict[type[exp.Expr], Callable[[_Compiler, Any], _Node]] = {
    exp.Column: _Compiler.column,
    exp.Literal: _Compiler.literal,
    exp.Boolean: _Compiler.boolean_literal,
    exp.Null: _Compiler.null,
    exp.Paren: _Compiler.paren,
    exp.Cast: _Compiler.cast,
    exp.TryCast: _Compiler.cast,
    **dict.fromkeys(_COMPARISONS, _Compiler.compare),
    exp.NullSafeEQ: _Compiler.null_safe_eq,
    exp.And: _Compiler.and_,
    exp.Or: _Compiler.or_,
    exp.Not: _Compiler.not_,
    exp.In: _Compiler.in_,
    exp.Between: _Compiler.between,
    exp.Is: _Compiler.is_,
    exp.Like: _Compiler.like,
    **dict.fromkeys(_ARITHMETIC, _Compiler.arith),
    exp.Div: _Compiler.div,
    exp.Mod: _Compiler.mod,
    exp.Neg: _Compiler.neg,
    exp.Case: _Compiler.case,
    exp.If: _Compiler.if_,
    exp.Coalesce: _Compiler.coalesce,
    exp.Lower: _Compiler.lower,
    exp.Upper: _Compiler.upper,
    exp.Length: _Compiler.length,
    exp.Concat: _Compiler.concat,
    exp.DPipe: _Compiler.concat,
    exp.Substring: _Compiler.substring,
    exp.Trim: _Compiler.trim,
    exp.Abs: _Compiler.abs_,
    exp.Round: _Compiler.round_,
}


def compile_predicate(
    text: str,
    schema: pa.Schema,
    *,
    qualifiers: Mapping[str, str] | None = None,
    default_qualifier: str | None = None,
) -> pc.Expression:
    """A boolean SQL condition in Hive's syntax (a WHERE, a MERGE ON or WHEN condition)
    as an Arrow expression over ``schema``.

    ``qualifiers`` maps a table alias to the prefix of its fields in ``schema`` (a MERGE's
    joined rows: ``{"src": "src.", "tgt": ""}``); unqualified names resolve under
    ``default_qualifier``, or, without one, under whichever alias has the column (two is
    ambiguous). Names are case-insensitive. The result is NULL where SQL's is unknown: the
    caller filters with it (NULL is not selected). Every error is a ``ConfigError`` raised
    here, before anything runs.
    """
    tree = parse_expression(text, "predicate")
    c = _Compiler(schema, text, qualifiers, default_qualifier)
    n = c.compile(tree)
    if n.type == _NULL:
        return pc.scalar(pa.scalar(None, _BOOL))
    if n.type != _BOOL:
        raise ConfigError(f"predicate {text!r} is {hive_name(n.type)}, not boolean")
    return n.expr


def compile_value(
    text: str,
    schema: pa.Schema,
    *,
    target: pa.DataType,
    qualifiers: Mapping[str, str] | None = None,
    default_qualifier: str | None = None,
) -> pc.Expression:
    """A SET expression (the right side of ``c = <expr>``) as an Arrow expression of the
    column's type ``target``: Hive's implicit conversions where nothing is lost (int ->
    bigint, decimal or double; a string literal -> date, timestamp or decimal; a literal
    whose value fits a narrower type); anything lossy or impossible is a ``ConfigError``."""
    tree = parse_expression(text, "SET expression")
    c = _Compiler(schema, text, qualifiers, default_qualifier)
    n = c.compile(tree)
    expr = c.assign(n, target, tree)
    got = c.bind(expr, tree)
    if got != target:  # a bug here, not the user's: say so rather than write a wrong type
        raise ConfigError(f"SET value {text!r} compiled to {got}, not {target}")
    return expr
