"""``acidstream.acid.config_fields``: the one typed-field parser and config loader that the
HTTP server's config, the Kafka job's config and the sink's options share (issue 29)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from acidstream.acid.config_fields import (
    Field,
    Sourced,
    check_fields,
    fields_of,
    load_layers,
    parse_section,
    section,
    txn_timeout_removed,
)
from acidstream.acid.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class Opts:
    """A stand-in option dataclass, one field per kind."""

    flag: bool = False
    count: int = 3
    ratio: float = 0.5
    name: str = "x"
    mode: str = "auto"
    tags: tuple[str, ...] = ()
    limit: int | None = None


SPECS = fields_of(
    Opts,
    Field(name="count", min=1, max=10),
    Field(name="ratio", above=0),
    Field(name="mode", choices=("auto", "off")),
    extra=(txn_timeout_removed(),),
)


def _parse(key: str, value: Any, source: str = "config file c.yaml") -> dict[str, Any]:
    return parse_section({key: Sourced(value, source)}, SPECS, prefix="s.")


def test_specs_take_kind_and_default_from_the_dataclass() -> None:
    assert {n: (f.kind, f.optional, f.default) for n, f in SPECS.items()} == {
        "flag": ("bool", False, False),
        "count": ("int", False, 3),
        "ratio": ("float", False, 0.5),
        "name": ("str", False, "x"),
        "mode": ("str", False, "auto"),
        "tags": ("strs", False, ()),
        "limit": ("int", True, None),
        "txn_timeout_s": ("removed", False, None),
    }
    assert SPECS["count"].min == 1 and SPECS["mode"].choices == ("auto", "off")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        *((t, True) for t in ("true", "TRUE", "True", "1", "yes", "YES", "on", " On ")),
        *((f, False) for f in ("false", "False", "0", "no", "NO", "off", "OFF")),
        (True, True),
        (False, False),
        (1, True),
        (0, False),
    ],
)
def test_booleans_accept_exactly_the_eight_words(text: Any, expected: bool) -> None:
    assert _parse("flag", text) == {"flag": expected}


@pytest.mark.parametrize("text", ["ture", "flase", "", "y", "n", "2", 2, -1, "truee", 1.0, [1]])
def test_any_other_boolean_is_refused_naming_key_value_and_source(text: Any) -> None:
    with pytest.raises(ConfigError) as e:
        _parse("flag", text, source="environment variable X_FLAG")
    msg = str(e.value)
    assert msg.startswith("s.flag must be true or false"), msg
    assert repr(text) in msg and "(environment variable X_FLAG)" in msg


@pytest.mark.parametrize(
    ("key", "value", "typed"),
    [
        ("count", "7", 7),
        ("count", 7, 7),
        ("count", " +4 ", 4),
        ("ratio", "0.25", 0.25),
        ("ratio", 2, 2.0),
        ("name", 123, "123"),
        ("tags", ["a", 1], ("a", "1")),
        ("limit", "12", 12),
    ],
)
def test_values_are_typed(key: str, value: Any, typed: Any) -> None:
    got = _parse(key, value)
    assert got == {key: typed} and type(got[key]) is type(typed)


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("count", "1.5", "must be an integer"),  # once truncated to 1 by int(float)
        ("count", 1.5, "must be an integer"),
        ("count", True, "must be an integer"),
        ("count", "1e3", "must be an integer"),
        ("count", "0", "must be 1..10"),
        ("count", 11, "must be 1..10"),
        ("ratio", "nan", "must be a number"),
        ("ratio", "inf", "must be a number"),
        ("ratio", "lots", "must be a number"),
        ("ratio", 0, "must be > 0"),
        ("name", True, "must be a string"),
        ("name", ["a"], "must be a string"),
        ("mode", "AUTO", "must be one of auto, off"),  # choices match exactly
        ("tags", "a,b", "must be a list"),
        ("tags", [None], "must be a list"),
    ],
)
def test_bad_values_are_refused_naming_the_key(key: str, value: Any, why: str) -> None:
    with pytest.raises(ConfigError) as e:
        _parse(key, value, source="flag --x")
    msg = str(e.value)
    assert msg.startswith(f"s.{key} {why}"), msg
    assert msg.endswith("(flag --x)"), msg


def test_null_means_not_set_and_the_default_applies() -> None:
    assert _parse("count", None) == {}
    assert Opts(**_parse("count", None)).count == 3


def test_unknown_keys_are_refused_with_close_matches() -> None:
    with pytest.raises(ConfigError) as e:
        _parse("cuont", 1)
    assert str(e.value) == "unknown config key s.cuont (config file c.yaml); did you mean s.count?"
    with pytest.raises(ConfigError) as e:
        _parse("zzz", 1)
    assert str(e.value) == (
        "unknown config key s.zzz (config file c.yaml); known: s.count, s.flag, s.limit, "
        "s.mode, s.name, s.ratio, s.tags, s.txn_timeout_s"
    )


def test_the_removed_txn_timeout_says_where_it_lives_now() -> None:
    with pytest.raises(ConfigError) as e:
        _parse("txn_timeout_s", 300)
    assert str(e.value) == (
        "s.txn_timeout_s (config file c.yaml): txn_timeout_s is a metastore setting now: "
        "acidstream config set txn_timeout_s N"
    )
    with pytest.raises(ConfigError, match="metastore setting now"):
        _parse("txn_timeout_s", None)  # even empty: the key itself is stale


def test_other_spellings_and_case_folding() -> None:
    names = {"flagOption": "flag", "countOption": "count"}
    tree = {"FLAGOPTION": Sourced("on", "sink option"), "countoption": Sourced("2", "sink option")}
    got = parse_section(tree, SPECS, names=names, fold_case=True, what="sink option")
    assert got == {"flag": True, "count": 2}
    with pytest.raises(ConfigError) as e:
        parse_section({"flagOpton": Sourced("1", "sink option")}, SPECS, names=names,
                      fold_case=True, what="sink option")  # fmt: skip
    assert str(e.value) == "unknown sink option flagOpton (sink option); did you mean flagOption?"
    with pytest.raises(ConfigError, match="unknown config key flagOption"):
        parse_section({"flagOption": Sourced("1", "f")}, SPECS)  # field names only by default


def test_check_fields_applies_the_same_bounds_to_objects_built_in_python() -> None:
    check_fields(Opts(count=10), SPECS, prefix="s.")
    with pytest.raises(ConfigError, match=r"^s\.count must be 1\.\.10, got 0$"):
        check_fields(Opts(count=0), SPECS, prefix="s.")
    with pytest.raises(ConfigError, match=r"^s\.mode must be one of auto, off, got 'of'$"):
        check_fields(Opts(mode="of"), SPECS, prefix="s.")


def test_fields_of_refuses_fields_it_cannot_type() -> None:
    @dataclass(frozen=True)
    class Nested:
        inner: Opts

    with pytest.raises(TypeError, match="inner"):
        fields_of(Nested)
    assert fields_of(Nested, skip=("inner",)) == {}
    with pytest.raises(TypeError, match="nope"):
        fields_of(Opts, Field(name="nope"))


def test_layers_file_then_environment_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("listen: {host: a, port: 1}\nwarehouse: /file\nkept: 5\n")
    env_vars = {("listen", "port"): "X_PORT", ("warehouse",): "X_WH"}
    flags_names = {("listen", "port"): "--port"}
    tree = load_layers(path, env={"X_PORT": "2", "X_WH": ""}, env_vars=env_vars)
    listen = section(tree, "listen")
    assert listen["port"] == Sourced("2", "environment variable X_PORT")
    assert listen["host"] == Sourced("a", f"config file {path}")
    assert tree["warehouse"] == Sourced("/file", f"config file {path}")  # empty variable: unset
    tree = load_layers(
        path,
        env={"X_PORT": "2"},
        env_vars=env_vars,
        flags={("listen", "port"): 3, ("warehouse",): None, ("a", "b"): "c"},
        flag_names=flags_names,
    )
    assert section(tree, "listen")["port"] == Sourced(3, "flag --port")
    assert tree["warehouse"] == Sourced("/file", f"config file {path}")  # None flag: unset
    assert section(tree, "a")["b"] == Sourced("c", "override a.b")
    assert tree["kept"] == Sourced(5, f"config file {path}")


def test_a_value_where_a_section_belongs_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("listen: 8080\nempty: null\n")
    tree = load_layers(path, env={})
    with pytest.raises(ConfigError) as e:
        section(tree, "listen")
    assert str(e.value) == f"listen must be a mapping, got 8080 (config file {path})"
    assert section(tree, "empty") == {} and section(tree, "absent") == {}
    with pytest.raises(ConfigError, match=r"^listen must be a mapping, got 8080"):
        load_layers(path, env={}, flags={("listen", "port"): 1})
    path.write_text("listen: {port: {deep: 1}}\n")
    with pytest.raises(ConfigError, match=r"^port must be a value, not a mapping$"):
        parse_section(section(load_layers(path, env={}), "listen"), fields_of(Port))


@dataclass(frozen=True, kw_only=True)
class Port:
    port: int = 0


def test_missing_or_bad_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_layers(tmp_path / "nope.yaml", env={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_layers(bad, env={})
    bad.write_text("- a\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_layers(bad, env={})
