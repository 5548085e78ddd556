"""SQL text in Hive's syntax, parsed by sqlglot: one expression, or ``c = expr`` assignments.

What this is for: the mutations' predicates and SET expressions (issue 30) are SQL text;
this module turns the text into a sqlglot tree (acidstream never hand-writes a SQL parser)
and every syntax problem into a one-line :class:`~acidstream.acid.errors.ConfigError`.
``acid/sql_expr.py`` compiles the trees to Arrow. Format layer: runs wherever the text is
checked (the Python process, the CLI, the Spark driver).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from acidstream.acid.errors import ConfigError

__all__ = ["DIALECT", "parse_assignments", "parse_expression", "render"]

DIALECT = "hive"
_WORD = re.compile(r"^[A-Za-z_]\w*$")


def render(node: exp.Expr) -> str:
    """``node`` as Hive SQL text (for error messages)."""
    return node.sql(dialect=DIALECT)


def parse_expression(text: str, what: str) -> exp.Expr:
    """One expression parsed from ``text``; a syntax error is one line of sqlglot's."""
    if not isinstance(text, str):
        raise ConfigError(f"{what} must be SQL text (a str), not {type(text).__name__}")
    try:
        trees = sqlglot.parse(text, read=DIALECT)
    except sqlglot.errors.ParseError as e:
        first = e.errors[0] if e.errors else {}
        where = f" at line {first.get('line')}, column {first.get('col')}" if first else ""
        desc = first.get("description") or str(e).splitlines()[0]
        raise ConfigError(f"syntax error in {what} {text!r}{where}: {desc}") from e
    except sqlglot.errors.SqlglotError as e:
        raise ConfigError(f"syntax error in {what} {text!r}: {str(e).splitlines()[0]}") from e
    trees = [t for t in trees if t is not None]
    if not trees:
        raise ConfigError(f"{what} is empty: expected a SQL expression")
    if len(trees) > 1:
        raise ConfigError(f"{what} {text!r} holds {len(trees)} statements: expected one expression")
    tree = trees[0]
    assert tree is not None
    if isinstance(tree, exp.Alias):
        # sqlglot reads "a = 1 junk" as "a = 1 AS junk": in an expression that is junk.
        raise ConfigError(
            f"syntax error in {what} {text!r}: unexpected {tree.alias!r} after {render(tree.this)!r}"
        )
    return tree


def parse_assignments(items: Sequence[str] | Mapping[str, str]) -> dict[str, str]:
    """``{"column": "SQL expression"}`` from ``"c = expr"`` strings (the CLI's ``--set``)
    or a mapping (the Python API's ``set=``). The split is sqlglot's tokenizer's first
    top-level ``=``, so ``c = 'a=b'`` is one assignment; each expression is parsed now (a
    syntax error is a ``ConfigError``); names are lower-cased; that they are columns of
    the table is checked later, against its schema."""
    pairs: list[tuple[str, str]] = []
    if isinstance(items, Mapping):
        for key, value in items.items():
            if not isinstance(key, str) or not key.strip():
                raise ConfigError(f"SET column name {key!r} must be a non-empty string")
            pairs.append((key.strip(), value))
    else:
        if isinstance(items, str):
            raise ConfigError("SET assignments are a sequence of 'c = expr' strings, not one str")
        for item in items:
            pairs.append(_split_assignment(item))
    out: dict[str, str] = {}
    for key, value in pairs:
        parse_expression(value, f"SET expression for {key!r}")
        name = key.lower()
        if name in out:
            raise ConfigError(f"column {name!r} is set twice")
        out[name] = value.strip()
    return out


def _split_assignment(item: str) -> tuple[str, str]:
    if not isinstance(item, str):
        raise ConfigError(f"SET assignment must be a 'c = expr' string, not {type(item).__name__}")
    try:
        tokens = Dialect.get_or_raise(DIALECT).tokenize(item)
    except sqlglot.errors.SqlglotError as e:
        raise ConfigError(
            f"syntax error in SET assignment {item!r}: {str(e).splitlines()[0]}"
        ) from e
    if (
        len(tokens) < 3
        # A column may be named like a keyword (date, timestamp): any word is a name.
        or not (tokens[0].token_type == TokenType.IDENTIFIER or _WORD.match(tokens[0].text))
        or tokens[1].text != "="  # Hive also reads "==" as equality; not here
    ):
        raise ConfigError(f"SET assignment {item!r} is not of the form 'column = expression'")
    return tokens[0].text, item[tokens[1].end + 1 :]
