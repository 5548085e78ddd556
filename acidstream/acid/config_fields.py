"""One config loader and one typed-field parser for every config file and option map.

Used by the HTTP server's config (``acidstream.ingest.http.config``), the Kafka job's
(``acidstream.jobs.config``) and the Spark sink's string options
(``SinkOptions.from_options``), so a key is typed, bounded and refused the same way
everywhere. It lives in ``acid`` (the lowest layer) because those three users sit in
three different layers.

- :func:`load_layers` merges a YAML file < environment variables < flags into one tree
  whose leaves remember where each value came from (:class:`Sourced`): an error then
  names the key, the value and its source (``config file c.yaml``, ``environment
  variable ACIDSTREAM_HTTP_PORT``, ``flag --port``, ``sink option``).
- :class:`Field` is one key's spec (type, default, bounds, choices), usually taken from
  a frozen option dataclass by :func:`fields_of`; :func:`parse_section` turns one section
  of the tree into that dataclass's keyword arguments, refusing unknown keys with the
  close matches (``difflib``), and :func:`check_fields` re-checks bounds and choices
  when the dataclass is built directly from Python.

Typing rules, the same for every source (where the two former loaders disagreed, the
stricter one was kept):

- ``bool``: a YAML boolean, or exactly ``true/false/1/0/yes/no/on/off`` (any case);
  anything else (``ture``, ``2``, ``""``) is refused.
- ``int``: an integer, or the text of one; ``1.5``, ``1e3`` and booleans are refused
  (a float was once truncated silently).
- ``float``: a number, or the text of one; NaN, infinities and booleans are refused.
- ``str``: text, or a YAML number (kept as its text); booleans, lists and mappings are
  refused.
- ``strs`` (``tuple[str, ...]``): a YAML list of scalars; a single string is refused.
- choices are matched exactly (``JSON`` is not ``json``).
- ``null`` in a file, an empty environment variable or a ``None`` flag means "not set":
  the default applies.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

from acidstream.acid.errors import ConfigError

__all__ = [
    "BOOL_FALSE",
    "BOOL_TRUE",
    "Field",
    "Sourced",
    "Tree",
    "check_fields",
    "fields_of",
    "load_layers",
    "parse_section",
    "read_config_file",
    "section",
    "txn_timeout_removed",
]

BOOL_TRUE = ("true", "1", "yes", "on")
BOOL_FALSE = ("false", "0", "no", "off")

Kind = Literal["str", "int", "float", "bool", "strs", "removed"]

_KINDS: Mapping[str, Kind] = {
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "tuple[str, ...]": "strs",
}
_INT = re.compile(r"[+-]?\d+")


@dataclass(frozen=True, slots=True)
class Sourced:
    """One configured value and where it came from (for error messages)."""

    value: Any
    source: str


Tree: TypeAlias = dict[str, "Tree | Sourced"]
"""A merged configuration: sections are nested dicts, values are :class:`Sourced`."""


@dataclass(frozen=True, kw_only=True)
class Field:
    """The spec of one configuration key.

    Attributes:
        name: the key (and the dataclass field it fills).
        kind: how its text is typed (see the module docstring); ``removed``: the key is
            no longer accepted and naming it raises ``ConfigError(removed)``.
        optional: ``None`` is a valid value (``x: int | None``).
        default: the dataclass's default (documentation and messages only: an unset key
            is simply not passed, so the dataclass applies it).
        min, max: inclusive bounds of a number.
        above: an exclusive lower bound (``above=0``: must be > 0).
        choices: the only accepted values of a string (matched exactly).
        removed: the message for a removed key.
    """

    name: str
    kind: Kind = "str"
    optional: bool = False
    default: Any = None
    min: float | None = None
    max: float | None = None
    above: float | None = None
    choices: tuple[str, ...] = ()
    removed: str = ""

    def parse(self, value: Any, *, key: str, source: str) -> Any:
        """``value`` (from YAML, an environment variable or a flag) as this field's type,
        checked against its bounds and choices.

        Raises:
            ConfigError: names ``key``, the value and ``source``.
        """
        if self.kind == "removed":
            raise ConfigError(f"{key} ({source}): {self.removed}")
        typed = _PARSERS[self.kind](value)
        if typed is _BAD:
            raise ConfigError(f"{key} must be {_WANTED[self.kind]}, got {value!r} ({source})")
        self.check(typed, key=key, source=source)
        return typed

    def check(self, value: Any, *, key: str, source: str = "") -> None:
        """Refuse a typed ``value`` outside the bounds or choices (``ConfigError``)."""
        if value is None or self.kind in ("bool", "strs", "removed"):
            return
        where = f" ({source})" if source else ""
        if self.choices and value not in self.choices:
            raise ConfigError(
                f"{key} must be one of {', '.join(self.choices)}, got {value!r}{where}"
            )
        if self.kind not in ("int", "float"):
            return
        low_ok = (self.min is None or value >= self.min) and (
            self.above is None or value > self.above
        )
        if low_ok and (self.max is None or value <= self.max):
            return
        if self.min is not None and self.max is not None:
            rule = f"{_num(self.min)}..{_num(self.max)}"
        else:
            parts = [f">= {_num(self.min)}"] if self.min is not None else []
            parts += [f"> {_num(self.above)}"] if self.above is not None else []
            parts += [f"<= {_num(self.max)}"] if self.max is not None else []
            rule = " and ".join(parts)
        raise ConfigError(f"{key} must be {rule}, got {value!r}{where}")


def _num(x: float) -> str:
    return f"{x:g}"


_BAD = object()


def _as_bool(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in BOOL_TRUE:
            return True
        if s in BOOL_FALSE:
            return False
    return _BAD


def _as_int(v: Any) -> Any:
    if isinstance(v, bool):
        return _BAD
    if isinstance(v, int):
        return v
    if isinstance(v, str) and _INT.fullmatch(v.strip()):
        return int(v.strip())
    return _BAD


def _as_float(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        return _BAD
    try:
        f = float(v)
    except ValueError:
        return _BAD
    return f if math.isfinite(f) else _BAD


def _as_str(v: Any) -> Any:
    if isinstance(v, str):
        return v
    if isinstance(v, int | float) and not isinstance(v, bool):
        return str(v)
    return _BAD


def _as_strs(v: Any) -> Any:
    if not isinstance(v, list | tuple):
        return _BAD
    out = tuple(_as_str(x) for x in v)
    return _BAD if any(x is _BAD for x in out) else out


_PARSERS = {
    "bool": _as_bool,
    "int": _as_int,
    "float": _as_float,
    "str": _as_str,
    "strs": _as_strs,
}
_WANTED = {
    "bool": "true or false (or 1/0, yes/no, on/off)",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "strs": "a list",
}


def txn_timeout_removed(key: str = "txn_timeout_s") -> Field:
    """The removed per-client txn timeout (``key``: its name in this config)."""
    return Field(
        name=key,
        kind="removed",
        removed="txn_timeout_s is a metastore setting now: acidstream config set txn_timeout_s N",
    )


def fields_of(
    cls: type, *specs: Field, skip: Iterable[str] = (), extra: Iterable[Field] = ()
) -> dict[str, Field]:
    """The fields of frozen dataclass ``cls`` as specs, keyed by name.

    Each field's kind and default come from the dataclass (``int``, ``float | None``,
    ``tuple[str, ...]``...); ``specs`` add bounds or choices to fields of the same name
    (their kind and default are filled in). Fields of another type (a nested dataclass, a
    mapping) must be in ``skip``. ``extra`` adds keys that are no field (removed keys).
    """
    given = {s.name: s for s in specs}
    out: dict[str, Field] = {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        text = str(f.type).strip()
        optional = text.endswith("| None")
        base = text.removesuffix("| None").strip()
        kind = _KINDS.get(base)
        if kind is None:
            raise TypeError(f"{cls.__name__}.{f.name}: no config kind for {f.type!r}")
        default = f.default if f.default is not dataclasses.MISSING else None
        spec = given.pop(f.name, None) or Field(name=f.name)
        out[f.name] = dataclasses.replace(spec, kind=kind, optional=optional, default=default)
    if given:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(given)}")
    for e in extra:
        out[e.name] = e
    return out


def check_fields(obj: Any, specs: Mapping[str, Field], *, prefix: str = "") -> None:
    """Check a built dataclass against its specs' bounds and choices (``__post_init__``:
    the same rules whether it was built from a config or directly in Python)."""
    for name, spec in specs.items():
        if spec.kind != "removed":
            spec.check(getattr(obj, name), key=f"{prefix}{name}")


# --------------------------------------------------------------------- the loader


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The mapping a YAML config file holds (``{}`` for an empty file); a missing file,
    invalid YAML or a non-mapping is a ``ConfigError`` naming the file."""
    import yaml

    try:
        loaded = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError as e:
        raise ConfigError(f"config file {path} not found") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} is not valid YAML: {e}") from e
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must hold a mapping")
    return loaded


def load_layers(
    path: str | os.PathLike[str] | None,
    *,
    env: Mapping[str, str],
    env_vars: Mapping[tuple[str, ...], str] = {},
    flags: Mapping[tuple[str, ...], Any] = {},
    flag_names: Mapping[tuple[str, ...], str] = {},
) -> Tree:
    """The merged configuration: the YAML file < ``env`` < ``flags``.

    Args:
        path: the YAML file (``None``: none).
        env: the environment (``os.environ`` or a test's mapping).
        env_vars: key path -> environment variable (e.g. ``("listen", "port")`` ->
            ``ACIDSTREAM_HTTP_PORT``); an unset or empty variable is skipped.
        flags: key path -> value from the command line or a Python caller; ``None`` is
            skipped.
        flag_names: key path -> the flag's name for messages (``--port``); a flag
            without one is named ``override <dotted key>``.
    """
    raw = read_config_file(path) if path is not None else {}
    tree = _wrap(raw, f"config file {path}")
    for keys, var in env_vars.items():
        if env.get(var):
            _put(tree, keys, Sourced(env[var], f"environment variable {var}"))
    for keys, value in flags.items():
        if value is not None:
            flag = flag_names.get(keys)
            source = f"flag {flag}" if flag else f"override {'.'.join(keys)}"
            _put(tree, keys, Sourced(value, source))
    return tree


def _wrap(value: Mapping[Any, Any], source: str) -> Tree:
    return {
        str(k): _wrap(v, source) if isinstance(v, Mapping) else Sourced(v, source)
        for k, v in value.items()
    }


def _put(tree: Tree, keys: tuple[str, ...], value: Sourced) -> None:
    node = tree
    for i, k in enumerate(keys[:-1]):
        child = node.get(k)
        if isinstance(child, Sourced) and child.value is not None:
            raise ConfigError(
                f"{'.'.join(keys[: i + 1])} must be a mapping, got {child.value!r} ({child.source})"
            )
        if not isinstance(child, dict):
            child = node[k] = {}
        node = child
    node[keys[-1]] = value


def section(tree: Tree, name: str, *, prefix: str = "") -> Tree:
    """Sub-mapping ``name`` of ``tree`` (``{}`` when absent or null).

    Raises:
        ConfigError: the key holds a value, not a mapping.
    """
    node = tree.get(name)
    if node is None:
        return {}
    if isinstance(node, Sourced):
        if node.value is None:
            return {}
        raise ConfigError(f"{prefix}{name} must be a mapping, got {node.value!r} ({node.source})")
    return node


def parse_section(
    tree: Mapping[str, Tree | Sourced],
    specs: Mapping[str, Field],
    *,
    prefix: str = "",
    sections: Iterable[str] = (),
    names: Mapping[str, str] | None = None,
    fold_case: bool = False,
    what: str = "config key",
) -> dict[str, Any]:
    """The typed values of one section: ``{field name: value}`` for each key set.

    Args:
        tree: the section (from :func:`load_layers` or :func:`section`).
        specs: its fields (:func:`fields_of`).
        prefix: the section's dotted name with a trailing dot, for messages.
        sections: keys that are sub-sections (parsed by the caller, skipped here).
        names: the accepted spellings -> field names, when the keys are not the field
            names (the sink's Spark options: ``sinkId`` -> ``sink_id``).
        fold_case: keys match whatever their case (Spark options).
        what: what a key is called in messages (``sink option``).

    Raises:
        ConfigError: an unknown key (with its close matches), a section given a value, a
            value given a mapping, or a bad value.
    """
    spelled = dict(names) if names is not None else {n: n for n in specs}
    lookup = {(k.lower() if fold_case else k): v for k, v in spelled.items()}
    subs = set(sections)
    out: dict[str, Any] = {}
    for key, node in tree.items():
        full = f"{prefix}{key}"
        if key in subs:
            continue
        name = lookup.get(key.lower() if fold_case else key)
        if name is None:
            raise unknown_key(full, [*spelled, *subs], prefix=prefix, what=what, node=node)
        spec = specs[name]
        if not isinstance(node, Sourced):
            raise ConfigError(f"{full} must be a value, not a mapping")
        if node.value is None and spec.kind != "removed":
            continue
        out[name] = spec.parse(node.value, key=full, source=node.source)
    return out


def unknown_key(
    key: str,
    known: Sequence[str],
    *,
    prefix: str = "",
    what: str = "config key",
    node: Tree | Sourced | None = None,
) -> ConfigError:
    """The error for an unknown ``key``: its source and the known keys closest to it."""
    where = f" ({node.source})" if isinstance(node, Sourced) else ""
    short = key.removeprefix(prefix)
    close = difflib.get_close_matches(short, list(known), n=3, cutoff=0.6)
    hint = (
        f"; did you mean {' or '.join(prefix + c for c in close)}?"
        if close
        else f"; known: {', '.join(sorted(prefix + k for k in known))}"
    )
    return ConfigError(f"unknown {what} {key}{where}{hint}")
