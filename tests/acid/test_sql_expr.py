"""SQL text (Hive's syntax) compiled to Arrow expressions: acidstream/acid/sql_expr.py.

Each construct is evaluated by pyarrow on a small table and compared with DuckDB running
the same SQL text over the same rows (an oracle with its own parser and evaluator; it is
a dev-extra test dependency only). Where Hive's semantics differ from DuckDB's (IF with a
NULL condition, x / 0, negative substr positions, CAST of a bad string...), the test states
Hive's rule and the rows it selects. Hypothesis then compares random predicates and value
expressions over random rows with DuckDB.
"""

from __future__ import annotations

import datetime
import functools
import importlib.util
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from acidstream.acid.errors import AcidStreamError, ConfigError
from acidstream.acid.sql_expr import compile_predicate, compile_value, parse_assignments

_HAVE_DUCKDB = importlib.util.find_spec("duckdb") is not None
needs_duckdb = pytest.mark.skipif(
    not _HAVE_DUCKDB, reason="duckdb (the dev extra's SQL oracle) is not installed"
)

SCHEMA = pa.schema(
    [
        ("rid", pa.int64()),
        ("id", pa.int64()),
        ("n", pa.int32()),
        ("ti", pa.int8()),
        ("s", pa.string()),
        ("p", pa.decimal128(10, 2)),
        ("f", pa.float64()),
        ("b", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us")),
    ]
)

ROWS: list[dict[str, Any]] = [
    {"rid": 0, "id": 1, "n": 10, "ti": 1, "s": "apple", "p": Decimal("1.50"), "f": 0.5,
     "b": True, "d": datetime.date(2020, 1, 1), "ts": datetime.datetime(2020, 1, 1, 12, 0)},
    {"rid": 1, "id": 2, "n": -3, "ti": 2, "s": "Banana", "p": Decimal("2.25"), "f": -1.25,
     "b": False, "d": datetime.date(2021, 6, 30), "ts": datetime.datetime(2021, 6, 30, 0, 0, 1)},
    {"rid": 2, "id": 3, "n": None, "ti": 3, "s": None, "p": None, "f": None,
     "b": None, "d": None, "ts": None},
    {"rid": 3, "id": None, "n": 7, "ti": None, "s": "a_b%c", "p": Decimal("-7.00"), "f": 2.0,
     "b": True, "d": datetime.date(1999, 12, 31), "ts": datetime.datetime(1999, 12, 31, 23, 59)},
    {"rid": 4, "id": 5, "n": 0, "ti": 127, "s": "  pad ", "p": Decimal("0.00"), "f": 0.0,
     "b": False, "d": datetime.date(2020, 1, 1), "ts": datetime.datetime(2020, 1, 1, 0, 0)},
]  # fmt: skip


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return pa.Table.from_pylist(ROWS, schema=SCHEMA)


def selected(table: pa.Table, where: str, **kw: Any) -> list[int]:
    """The rids a WHERE selects: pyarrow's filter drops rows whose predicate is NULL."""
    expr = compile_predicate(where, table.schema, **kw)
    return sorted(table.filter(expr)["rid"].to_pylist())


def values(table: pa.Table, text: str, target: pa.DataType) -> list[Any]:
    expr = compile_value(text, table.schema, target=target)
    out = ds.dataset(table).to_table(columns={"rid": pc.field("rid"), "v": expr})
    assert out.schema.field("v").type == target
    return [v for _, v in sorted(zip(out["rid"].to_pylist(), out["v"].to_pylist(), strict=True))]


@functools.cache
def _duck_connection() -> Any:
    import duckdb

    con = duckdb.connect()  # one per test process: connecting costs ~50 ms
    # Hive's x / 0 is NULL; DuckDB 2 raises unless told otherwise.
    con.execute("SET error_on_division_by_zero = false")
    return con


def duck(table: pa.Table, sql: str) -> list[Any]:
    con = _duck_connection()
    con.register("t", table)
    try:
        return list(con.execute(sql).fetchall())
    finally:
        con.unregister("t")


def duck_selected(table: pa.Table, where: str) -> list[int]:
    return [r[0] for r in duck(table, f"SELECT rid FROM t WHERE {where} ORDER BY rid")]


# Constructs both Hive and DuckDB read with the same meaning: the oracle decides.
SHARED = [
    "id = 1", "id <> 1", "id != 1", "id < 3", "id <= 3", "id > 2", "id >= 2",
    "n = -3", "1 = id", "id = n",
    "id = 1 AND n = 10", "id = 1 OR n = 7", "NOT id = 1", "NOT (id = 1 OR n IS NULL)",
    "b", "NOT b", "b AND id > 1", "b OR id > 2", "b = TRUE", "b = FALSE",
    "id IN (1, 3)", "id NOT IN (1, 3)", "id IN (1, NULL)", "id NOT IN (1, NULL)", "n IN (n, 1)",
    "s IN ('apple', 'x')", "id BETWEEN 2 AND 3", "id NOT BETWEEN 2 AND 3", "p BETWEEN 0 AND 2",
    "s IS NULL", "s IS NOT NULL", "n IS NULL OR id IS NULL",
    "s LIKE 'a%'", "s LIKE '_anana'", "s NOT LIKE '%a%'", "s LIKE '%b_c'",
    "id + n > 5", "id - n < 0", "id * n = 30", "-id < -2", "n % 3 = 1", "n % -3 = -1",
    "id / 2 = 1.5", "(id + 1) * 2 = 6", "id + 1 * 2 = 5",
    "p = 1.5", "p = 1.50", "p > 1", "p * 2 = 3", "p + id > 3", "p < f", "f > 0.25", "f = 2",
    "d = DATE '2020-01-01'", "d > DATE '2020-01-01'", "ts >= TIMESTAMP '2020-01-01 12:00:00'",
    "CAST(id AS STRING) = '2'", "CAST(n AS DOUBLE) = -3.0",
    "CAST('5' AS INT) = id", "CAST(d AS TIMESTAMP) = ts",
    "CASE WHEN id > 2 THEN 'big' WHEN id > 1 THEN 'mid' ELSE 'small' END = 'small'",
    "CASE WHEN id > 2 THEN 'big' END IS NULL", "CASE id WHEN 1 THEN 10 WHEN 2 THEN 20 END = 20",
    "CASE WHEN n > 0 THEN 1 ELSE 2.5 END > 2", "COALESCE(n, 99) = 99", "COALESCE(s, 'none') = 'none'",
    "COALESCE(NULL, id) = 1", "lower(s) = 'banana'", "upper(s) = 'APPLE'", "length(s) = 5",
    "s || '!' = 'apple!'", "substr(s, 2) = 'pple'", "substr(s, 2, 2) = 'an'", "substring(s, 1, 3) = 'app'",
    "trim(s) = 'pad'", "abs(n) = 3", "abs(p) = 7", "round(p) = 2", "round(f, 1) = -1.3",
    "id = 1 OR NULL", "id = 1 AND NULL", "NOT (id = NULL)", "n = NULL",
    "ID = 1", "S = 'apple'",
]  # fmt: skip


@needs_duckdb
@pytest.mark.parametrize("where", SHARED)
def test_each_shared_construct_selects_what_duckdb_selects(table: pa.Table, where: str) -> None:
    assert selected(table, where) == duck_selected(table, where)


def test_the_shared_constructs_select_different_rows(table: pa.Table) -> None:
    """The oracle comparison above is not vacuous: the predicates are not all empty or all
    full, so they discriminate between rows."""
    sizes = {len(selected(table, w)) for w in SHARED}
    assert len(sizes) >= 4
    assert 0 < sum(1 for w in SHARED if selected(table, w)) < len(SHARED)


# -- Hive's rules where DuckDB's differ (the rows follow from the rule stated) --------


def test_three_valued_logic_null_comparisons_select_nothing(table: pa.Table) -> None:
    # n is NULL in rid 2: n = 1, n <> 1 and NOT (n = 1) are all NULL there, so no WHERE
    # selects rid 2 and n = 1 with its negation cover only the non-NULL rows.
    assert 2 not in selected(table, "n = 1") + selected(table, "n <> 1")
    assert 2 not in selected(table, "NOT (n = 1)")
    assert sorted(selected(table, "n = 10") + selected(table, "NOT (n = 10)")) == [0, 1, 3, 4]
    # 2 NOT IN (1, NULL) is NULL: nothing is selected.
    assert selected(table, "id NOT IN (1, NULL)") == []
    # NULL OR TRUE is TRUE; NULL AND FALSE is FALSE (Kleene).
    assert selected(table, "n = 1 OR TRUE") == [0, 1, 2, 3, 4]
    assert selected(table, "NOT (n = 1 AND FALSE)") == [0, 1, 2, 3, 4]


def test_the_predicate_itself_is_null_where_sql_is_unknown(table: pa.Table) -> None:
    """The caller drops NULL rows by filtering; the mask keeps the NULL (not a False)."""
    expr = compile_predicate("n > 0", table.schema)
    mask = ds.dataset(table).to_table(columns={"m": expr})["m"].to_pylist()
    assert mask == [True, False, None, True, False]


def test_if_with_a_null_condition_takes_the_else_branch(table: pa.Table) -> None:
    # Hive: IF(c, a, b) is a only when c is TRUE; b is NULL in rid 2, so b's else wins.
    assert selected(table, "IF(b, 1, 2) = 2") == [1, 2, 4]
    assert values(table, "IF(b, 'y', 'n')", pa.string()) == ["y", "n", "n", "y", "n"]


def test_hive_only_operators_and_literals(table: pa.Table) -> None:
    # <=> is TRUE for two NULLs and FALSE (not NULL) for one: n is NULL only in rid 2.
    assert selected(table, "n <=> NULL") == [2]
    assert selected(table, "NOT (n <=> 10)") == [1, 2, 3, 4]
    # IS TRUE / IS FALSE are never NULL: b is NULL in rid 2, which neither selects.
    assert selected(table, "b IS TRUE") == [0, 3]
    assert selected(table, "b IS FALSE") == [1, 4]
    assert selected(table, "id == 2") == [1]
    # 10L is a BIGINT, 2S a SMALLINT, 1Y a TINYINT, 1e1 a DOUBLE.
    assert selected(table, "n = 10L AND ti = 1Y AND id < 2S AND f < 1e1") == [0]
    assert values(table, "1e1", pa.float64())[0] == 10.0


def test_nvl_is_coalesce(table: pa.Table) -> None:
    assert values(table, "NVL(n, 0)", pa.int32()) == [10, -3, 0, 7, 0]


def test_division_by_zero_is_null_and_integer_division_is_double(table: pa.Table) -> None:
    # Hive: "/" gives a DOUBLE (5 / 2 = 2.5); x / 0 and x % 0 are NULL, never an error.
    assert values(table, "id / 2", pa.float64()) == [0.5, 1.0, 1.5, None, 2.5]
    assert values(table, "id / n", pa.float64())[4] is None  # n = 0 in rid 4
    assert values(table, "id % n", pa.int64())[4] is None
    assert values(table, "p / 0", pa.float64()) == [None] * 5
    assert values(table, "f / 0", pa.float64()) == [None] * 5


def test_integer_arithmetic_takes_the_wider_type(table: pa.Table) -> None:
    # Hive: tinyint + int is int, so 127 + 1 is 128 (not a tinyint overflow).
    assert values(table, "ti + 1", pa.int32()) == [2, 3, 4, None, 128]
    assert values(table, "ti * 2", pa.int64()) == [2, 4, 6, None, 254]


def test_modulo_has_the_sign_of_the_dividend(table: pa.Table) -> None:
    # Java's and Hive's %: -3 % 2 = -1, 7 % -2 = 1.
    assert values(table, "n % 2", pa.int32()) == [0, -1, None, 1, 0]
    assert values(table, "n % -2", pa.int32()) == [0, -1, None, 1, 0]


def test_round_is_half_up_away_from_zero_and_keeps_decimal_digits(table: pa.Table) -> None:
    assert values(table, "round(2.5)", pa.decimal128(10, 1))[0] == Decimal("3.0")
    assert values(table, "round(-2.5)", pa.decimal128(10, 1))[0] == Decimal("-3.0")
    assert values(table, "round(p, 1)", pa.decimal128(12, 2))[1] == Decimal("2.30")


def test_round_carrying_into_a_new_digit_is_not_an_overflow() -> None:
    t = pa.table({"p": pa.array([Decimal("99999999.99")], pa.decimal128(10, 2))})
    assert values_of(t, "round(p)", pa.decimal128(12, 2)) == [Decimal("100000000.00")]


def values_of(t: pa.Table, text: str, target: pa.DataType) -> list[Any]:
    expr = compile_value(text, t.schema, target=target)
    return ds.dataset(t).to_table(columns={"v": expr})["v"].to_pylist()


def test_substr_follows_hive_for_zero_and_negative_positions(table: pa.Table) -> None:
    # UDFSubstr: 1-based; 0 is the start; negative counts from the end; a position past
    # either end, or a length <= 0, gives ''.
    assert values(table, "substr(s, 0, 2)", pa.string())[0] == "ap"
    assert values(table, "substr(s, -3)", pa.string())[0] == "ple"
    assert values(table, "substr(s, -3, 2)", pa.string())[0] == "pl"
    assert values(table, "substr(s, -9)", pa.string())[0] == ""
    assert values(table, "substr(s, 9)", pa.string())[0] == ""
    assert values(table, "substr(s, 2, 0)", pa.string())[0] == ""
    assert values(table, "substr(s, 2, 0)", pa.string())[2] is None  # NULL stays NULL


def test_trim_strips_spaces_only() -> None:
    t = pa.table({"s": [" \ta ", "  b  "]})
    assert values_of(t, "trim(s)", pa.string()) == ["\ta", "b"]
    assert values_of(t, "ltrim(s)", pa.string()) == ["\ta ", "b  "]
    assert values_of(t, "rtrim(s)", pa.string()) == [" \ta", "  b"]


def test_concat_is_null_when_an_argument_is_null(table: pa.Table) -> None:
    # Hive's concat (DuckDB's concat skips NULLs instead); numbers are converted to text.
    assert values(table, "concat(s, '-', id)", pa.string()) == [
        "apple-1", "Banana-2", None, None, "  pad -5",
    ]  # fmt: skip


def test_hive_cast_of_a_bad_literal_is_null_and_cast_truncates(table: pa.Table) -> None:
    assert selected(table, "CAST('abc' AS INT) IS NULL") == [0, 1, 2, 3, 4]
    assert values(table, "CAST(1.9 AS INT)", pa.int32())[0] == 1
    assert values(table, "CAST(-1.9 AS BIGINT)", pa.int64())[0] == -1
    assert values(table, "CAST(p AS INT)", pa.int32()) == [1, 2, None, -7, 0]


def test_string_literals_compare_with_dates_timestamps_and_decimals(table: pa.Table) -> None:
    assert selected(table, "d = '2020-01-01'") == [0, 4]
    assert selected(table, "ts < '2000-01-01 00:00:00'") == [3]
    assert selected(table, "p = '2.25'") == [1]
    assert selected(table, "d IN ('2021-06-30', '1999-12-31')") == [1, 3]


def test_like_uses_backslash_to_escape_wildcards(table: pa.Table) -> None:
    # Hive's LIKE escape is a backslash: 'a\_b\%c' matches only the literal "a_b%c".
    assert selected(table, r"s LIKE 'a\_b\%c'") == [3]
    assert selected(table, "s LIKE 'a_b%c'") == [3]
    assert selected(table, r"s LIKE 'a\_%'") == [3]


def test_adjacent_string_literals_are_one_literal(table: pa.Table) -> None:
    assert values(table, "'it' 's'", pa.string())[0] == "its"


def test_names_are_case_insensitive_and_quoted_names_work() -> None:
    t = pa.table({"weird col": [1, 2], "x": [3, 4]})
    assert values_of(t, "`Weird Col` + X", pa.int64()) == [4, 6]


# -- MERGE's qualified names ---------------------------------------------------------

MERGE_SCHEMA = pa.schema(
    [("id", pa.int64()), ("v", pa.string()), ("src.id", pa.int64()), ("src.op", pa.string())]
)
MERGE_ROWS = pa.Table.from_pylist(
    [
        {"id": 1, "v": "a", "src.id": 1, "src.op": "d"},
        {"id": 2, "v": "b", "src.id": 2, "src.op": "u"},
        {"id": None, "v": None, "src.id": 3, "src.op": "i"},
    ],
    schema=MERGE_SCHEMA,
)
QUALIFIERS = {"src": "src.", "tgt": ""}


def merge_selected(where: str, **kw: Any) -> list[int | None]:
    expr = compile_predicate(where, MERGE_SCHEMA, qualifiers=QUALIFIERS, **kw)
    return MERGE_ROWS.filter(expr)["src.id"].to_pylist()


def test_qualified_names_resolve_through_the_prefixes() -> None:
    assert merge_selected("src.op = 'd'") == [1]
    assert merge_selected("tgt.id = src.id AND src.op <> 'd'") == [2]
    assert merge_selected("SRC.OP = 'i' AND tgt.id IS NULL") == [3]


def test_unqualified_names_resolve_when_only_one_alias_has_them() -> None:
    assert merge_selected("op = 'u'") == [2]  # only src has op
    assert merge_selected("v = 'a'") == [1]  # only tgt has v


def test_an_unqualified_name_both_aliases_have_is_ambiguous() -> None:
    with pytest.raises(ConfigError, match=r"ambiguous column 'id'.*src and tgt.*src\.id"):
        merge_selected("id = 1")


def test_default_qualifier_resolves_unqualified_names() -> None:
    assert merge_selected("id = 2", default_qualifier="tgt") == [2]
    assert merge_selected("id = 3", default_qualifier="src") == [3]
    with pytest.raises(ConfigError, match=r"unknown column 'op'.*id, v"):
        merge_selected("op = 'd'", default_qualifier="tgt")
    with pytest.raises(ConfigError, match="default_qualifier 'nope'"):
        merge_selected("id = 1", default_qualifier="nope")


def test_merge_values_read_the_source_through_its_alias() -> None:
    expr = compile_value(
        "concat(src.op, '-', COALESCE(v, 'new'))", MERGE_SCHEMA, target=pa.string(),
        qualifiers=QUALIFIERS,
    )  # fmt: skip
    got = ds.dataset(MERGE_ROWS).to_table(columns={"v": expr})["v"].to_pylist()
    assert got == ["d-a", "u-b", "i-new"]


def test_timestamp_literals_follow_a_nanosecond_schema() -> None:
    t = pa.table({"ts": pa.array([1_000_000_001, 2_000_000_000], pa.timestamp("ns"))})
    # The literal takes the schema's unit, so a nanosecond is neither lost nor rejected.
    expr = compile_predicate("ts = TIMESTAMP '1970-01-01 00:00:01.000000001'", t.schema)
    assert pc.cast(t.filter(expr)["ts"], pa.int64()).to_pylist() == [1_000_000_001]


def test_an_unknown_alias_is_an_error_naming_the_aliases() -> None:
    with pytest.raises(ConfigError, match=r"unknown table alias 'x'.*src, tgt"):
        merge_selected("x.id = 1")


# -- errors: all ConfigError, before anything runs -----------------------------------


def test_unknown_column_names_it_and_lists_the_columns(table: pa.Table) -> None:
    with pytest.raises(
        ConfigError, match=r"unknown column 'nope'.*b, d, f, id, n, p, rid, s, ti, ts"
    ):
        compile_predicate("nope = 1", table.schema)


def test_a_type_mismatch_is_an_error_naming_the_expression(table: pa.Table) -> None:
    with pytest.raises(ConfigError, match=r"type error in \"id = 'abc'\""):
        compile_predicate("id = 'abc'", table.schema)
    with pytest.raises(ConfigError, match=r"type error in .*s \+ 1"):
        compile_predicate("s + 1 > 0", table.schema)
    with pytest.raises(ConfigError, match="type error"):
        compile_predicate("s LIKE 'a%' AND id LIKE 'a'", table.schema)


def test_a_bad_typed_literal_is_an_error(table: pa.Table) -> None:
    with pytest.raises(ConfigError, match="not a valid date"):
        compile_predicate("d = DATE '2020-13-01'", table.schema)
    with pytest.raises(ConfigError, match=r"'2020-02-30'.*is not a date"):
        compile_predicate("d = '2020-02-30'", table.schema)


def test_a_syntax_error_is_one_line_of_sqlglots_message(table: pa.Table) -> None:
    with pytest.raises(ConfigError) as e:
        compile_predicate("id = (1", table.schema)
    assert "syntax error in predicate 'id = (1'" in str(e.value)
    assert "\n" not in str(e.value)
    for bad in ("id = 1 AND", "id = 1 junk", "id = 1; DROP TABLE t", "", "   "):
        with pytest.raises(ConfigError):
            compile_predicate(bad, table.schema)


def test_a_non_boolean_where_is_an_error(table: pa.Table) -> None:
    with pytest.raises(ConfigError, match=r"predicate 'id \+ 1' is bigint, not boolean"):
        compile_predicate("id + 1", table.schema)
    with pytest.raises(ConfigError, match=r"AND operand 'n' .* is int, not boolean"):
        compile_predicate("n AND b", table.schema)


def test_a_null_where_selects_nothing(table: pa.Table) -> None:
    assert selected(table, "NULL") == []


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("foo(id) = 1", "function foo"),
        ("s RLIKE 'a'", "function REGEXP_LIKE"),
        ("id IN (SELECT 1)", "IN (subquery)"),
        ("SELECT 1", "SELECT"),
        ("substr(s, id) = 'a'", "substr position that is not an integer literal"),
        ("s LIKE s", "LIKE with a pattern that is not a string literal"),
        ("CAST(id AS ARRAY<INT>) IS NULL", "type ARRAY<INT>"),
    ],
)
def test_anything_else_is_not_supported(table: pa.Table, text: str, name: str) -> None:
    with pytest.raises(ConfigError, match="not supported in acidstream's SQL: " + re.escape(name)):
        compile_predicate(text, table.schema)


def test_errors_are_config_errors_and_value_errors(table: pa.Table) -> None:
    with pytest.raises(ValueError) as e:
        compile_predicate("nope = 1", table.schema)
    assert isinstance(e.value, ConfigError) and isinstance(e.value, AcidStreamError)


# -- SET values ------------------------------------------------------------------------


def test_set_values_widen_as_hive_converts_implicitly(table: pa.Table) -> None:
    assert values(table, "n + 1", pa.int64()) == [11, -2, None, 8, 1]
    assert values(table, "n", pa.decimal128(12, 2))[0] == Decimal("10.00")
    assert values(table, "n", pa.float64())[1] == -3.0
    assert values(table, "'2020-02-02'", pa.date32())[0] == datetime.date(2020, 2, 2)
    assert values(table, "'2020-02-02 01:02:03'", pa.timestamp("us"))[0] == datetime.datetime(
        2020, 2, 2, 1, 2, 3
    )
    assert values(table, "'1.5'", pa.decimal128(10, 2))[0] == Decimal("1.50")
    assert values(table, "5", pa.int8())[0] == 5  # a literal that fits narrows
    assert values(table, "NULL", pa.int64()) == [None] * 5
    assert values(table, "d", pa.timestamp("us"))[0] == datetime.datetime(2020, 1, 1)
    assert values(table, "p", pa.float64())[1] == 2.25
    assert values(table, "CAST(id AS INT)", pa.int32())[0] == 1


@pytest.mark.parametrize(
    ("text", "target", "message"),
    [
        ("id", pa.int32(), "is bigint; converting it to the column's type int could lose"),
        ("f", pa.decimal128(10, 2), "is double; converting it"),
        ("p", pa.decimal128(10, 1), "is decimal\\(10,2\\); converting it"),
        ("n", pa.decimal128(5, 0), "is int; converting it"),
        ("300", pa.int8(), "does not fit the column's type tinyint"),
        ("1.555", pa.decimal128(10, 2), "does not fit the column's type decimal\\(10,2\\)"),
        ("'abc'", pa.int64(), "is a string; the column is bigint"),
        ("'x'", pa.date32(), "does not fit the column's type date"),
        ("s", pa.int64(), "is string; converting it"),
        ("ts", pa.date32(), "is timestamp; converting it"),
    ],
)
def test_lossy_or_impossible_set_values_are_errors(
    table: pa.Table, text: str, target: pa.DataType, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        compile_value(text, table.schema, target=target)


def test_set_value_errors_name_unknown_columns(table: pa.Table) -> None:
    with pytest.raises(ConfigError, match="unknown column 'nope'"):
        compile_value("nope + 1", table.schema, target=pa.int64())


# -- parse_assignments -----------------------------------------------------------------


def test_assignments_split_at_the_first_top_level_equals() -> None:
    got = parse_assignments(
        ["c = 'a=b'", "D= d = 1", "`Weird Col` = x + 1", "date = DATE '2020-01-01'"]
    )
    assert got == {"c": "'a=b'", "d": "d = 1", "weird col": "x + 1", "date": "DATE '2020-01-01'"}


def test_assignments_from_a_mapping_are_checked_and_lower_cased() -> None:
    assert parse_assignments({"Price": "price * 2"}) == {"price": "price * 2"}
    with pytest.raises(ConfigError, match="syntax error in SET expression for 'c'"):
        parse_assignments({"c": "(1"})


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["c"], "not of the form 'column = expression'"),
        (["1 = 2"], "not of the form"),
        (["c == 1"], "not of the form"),
        (["c = (1"], "syntax error in SET expression for 'c'"),
        (["c ="], "not of the form"),
        (["c = "], "not of the form"),
        (["c = 1", "C = 2"], "column 'c' is set twice"),
        ("c = 1", "a sequence of 'c = expr' strings, not one str"),
    ],
)
def test_bad_assignments_are_errors(items: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_assignments(items)


def test_assigned_expressions_compile_as_values(table: pa.Table) -> None:
    sets = parse_assignments(["n = n * 2", "s = 'x=y'"])
    assert values(table, sets["n"], pa.int32()) == [20, -6, None, 14, 0]
    assert values(table, sets["s"], pa.string()) == ["x=y"] * 5


# -- random predicates against DuckDB --------------------------------------------------

RAND_SCHEMA = pa.schema(
    [("rid", pa.int64()), ("a", pa.int32()), ("c", pa.int64()), ("s", pa.string()),
     ("p", pa.decimal128(10, 2)), ("flag", pa.bool_())]
)  # fmt: skip

_small = st.integers(-50, 50)
_text = st.text(alphabet="ab_% ", max_size=4)


def _rows() -> st.SearchStrategy[pa.Table]:
    row = st.fixed_dictionaries(
        {
            "a": st.none() | _small,
            "c": st.none() | _small,
            "s": st.none() | _text,
            "p": st.none() | st.integers(-5000, 5000).map(lambda v: Decimal(v).scaleb(-2)),
            "flag": st.none() | st.booleans(),
        }
    )
    return st.lists(row, min_size=1, max_size=12).map(
        lambda rs: pa.Table.from_pylist(
            [{"rid": i, **r} for i, r in enumerate(rs)], schema=RAND_SCHEMA
        )
    )


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _int_lit() -> st.SearchStrategy[str]:
    return st.integers(-20, 20).map(str)


def _ints(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(["a", "c"]) | _int_lit()
    if depth == 0:
        return leaf
    sub = _ints(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(["+", "-", "*"]), sub).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(sub, st.integers(1, 7), st.booleans()).map(
            lambda t: f"({t[0]} % {t[1] if t[2] else -t[1]})"
        ),
        sub.map(lambda x: f"-({x})"),
        sub.map(lambda x: f"abs({x})"),
        _strs(0).map(lambda x: f"length({x})"),
        st.tuples(_bools(depth - 1), sub, sub).map(
            lambda t: f"CASE WHEN {t[0]} THEN {t[1]} ELSE {t[2]} END"
        ),
        st.tuples(sub, sub).map(lambda t: f"COALESCE({t[0]}, {t[1]})"),
    )


def _strs(depth: int) -> st.SearchStrategy[str]:
    leaf = st.just("s") | _text.map(_quote)
    if depth == 0:
        return leaf
    sub = _strs(depth - 1)
    return st.one_of(
        leaf,
        sub.map(lambda x: f"lower({x})"),
        sub.map(lambda x: f"upper({x})"),
        sub.map(lambda x: f"trim({x})"),
        st.tuples(sub, sub).map(lambda t: f"({t[0]} || {t[1]})"),
        st.tuples(sub, st.integers(1, 5), st.integers(0, 4)).map(
            lambda t: f"substr({t[0]}, {t[1]}, {t[2]})"
        ),
        st.tuples(sub, sub).map(lambda t: f"COALESCE({t[0]}, {t[1]})"),
    )


def _decs() -> st.SearchStrategy[str]:
    lit = st.integers(-5000, 5000).map(lambda v: str(Decimal(v).scaleb(-2)))
    return st.one_of(
        st.just("p"), lit,
        st.tuples(st.just("p"), st.sampled_from(["+", "-", "*"]), lit | st.sampled_from(["a", "c"])).map(" ".join),
    )  # fmt: skip


_CMP = st.sampled_from(["=", "<>", "!=", "<", "<=", ">", ">="])


def _bools(depth: int) -> st.SearchStrategy[str]:
    ints, strs = _ints(min(depth, 2)), _strs(min(depth, 1))
    int_list = st.lists(_int_lit() | st.just("NULL"), min_size=1, max_size=4).map(", ".join)
    str_list = st.lists(_text.map(_quote) | st.just("NULL"), min_size=1, max_size=3).map(", ".join)
    leaf = st.one_of(
        st.tuples(ints, _CMP, ints).map(" ".join),
        st.tuples(strs, _CMP, strs).map(" ".join),
        st.tuples(_decs(), _CMP, _decs() | ints).map(" ".join),
        st.tuples(ints, st.sampled_from(["IN", "NOT IN"]), int_list).map(lambda t: f"{t[0]} {t[1]} ({t[2]})"),
        st.tuples(strs, st.sampled_from(["IN", "NOT IN"]), str_list).map(lambda t: f"{t[0]} {t[1]} ({t[2]})"),
        st.tuples(ints, st.sampled_from(["BETWEEN", "NOT BETWEEN"]), ints, ints).map(
            lambda t: f"{t[0]} {t[1]} {t[2]} AND {t[3]}"
        ),
        st.tuples(st.sampled_from(["a", "c", "s", "p", "flag"]), st.sampled_from(["IS NULL", "IS NOT NULL"])).map(" ".join),
        st.tuples(strs, st.sampled_from(["LIKE", "NOT LIKE"]), st.text(alphabet="ab_% ", max_size=4)).map(
            lambda t: f"{t[0]} {t[1]} {_quote(t[2])}"
        ),
        st.tuples(ints, st.integers(1, 5), ints).map(lambda t: f"{t[0]} / {t[1]} > {t[2]}"),
        st.sampled_from(["flag", "TRUE", "FALSE", "NULL"]),
    )  # fmt: skip
    if depth == 0:
        return leaf
    sub = _bools(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(["AND", "OR"]), sub).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        sub.map(lambda x: f"NOT ({x})"),
    )


_HYPOTHESIS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@needs_duckdb
@_HYPOTHESIS
@given(rows=_rows(), where=_bools(3))
def test_random_predicates_select_what_duckdb_selects(rows: pa.Table, where: str) -> None:
    ours = selected(rows, where)
    # Visible with --hypothesis-show-statistics: the predicates are not all trivial.
    event(
        "selects none" if not ours else "selects all" if len(ours) == len(rows) else "selects some"
    )
    assert ours == duck_selected(rows, where), where


@needs_duckdb
@_HYPOTHESIS
@given(rows=_rows(), expr=_ints(3))
def test_random_integer_values_equal_duckdbs(rows: pa.Table, expr: str) -> None:
    ours = values(rows, expr, pa.int64())
    theirs = [r[1] for r in duck(rows, f"SELECT rid, {expr} FROM t ORDER BY rid")]
    assert ours == theirs, expr


@needs_duckdb
@_HYPOTHESIS
@given(rows=_rows(), expr=_strs(3))
def test_random_string_values_equal_duckdbs(rows: pa.Table, expr: str) -> None:
    ours = values(rows, expr, pa.string())
    theirs = [r[1] for r in duck(rows, f"SELECT rid, {expr} FROM t ORDER BY rid")]
    assert ours == theirs, expr
