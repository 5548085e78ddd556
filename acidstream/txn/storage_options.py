"""Storage options: how the warehouse's filesystem is reached (endpoint, credentials, region).

They are fsspec's keyword arguments for the warehouse's filesystem (for S3, s3fs's:
``endpoint_url``, ``key``, ``secret``, ``token``, ``client_kwargs={"region_name": ...}``...).
They come from the CLI (``--storage-option k=v``, repeatable), from a config file's
``storage_options:`` mapping and from the Table handle's ``storage_options=``; the standard
AWS environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``...) is read by botocore itself
and needs nothing here.

:class:`StorageOptions` is the one frozen, picklable holder: it travels inside the resolved
``StoreConfig`` to every process that opens the warehouse (Spark executors, subprocesses),
and its ``repr``/``str`` mask the value of every secret-like key, so printing a config, a
log line or an error never shows a credential.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from acidstream.acid.config_fields import Sourced, Tree
from acidstream.acid.errors import ConfigError

__all__ = ["MASK", "SECTION", "StorageOptions", "from_config_tree", "is_secret_key"]

SECTION = "storage_options"
"""The config files' key (every file type: the Kafka job's, the HTTP server's)."""

MASK = "***"
"""What a secret's value prints as."""

_SECRET_WORDS = ("key", "secret", "token", "password", "passwd", "credential", "auth", "session")
"""Key names containing one of these are secrets (``key``, ``secret``, ``session_token``,
``aws_secret_access_key``, ``password``...): their values are never printed."""


def is_secret_key(name: str) -> bool:
    """Whether the value of option ``name`` is a secret (never printed or logged)."""
    low = name.lower()
    return any(w in low for w in _SECRET_WORDS)


def _parse_value(name: str, text: str) -> Any:
    """A command-line value typed as a YAML file would type it: ``true``/``false`` are
    booleans and a canonical integer or decimal number is a number. A secret stays the
    text given (an access key of digits is still a string), and so does anything else."""
    if is_secret_key(name):
        return text
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        number = int(text)
    except ValueError:
        pass
    else:
        if str(number) == text:  # "007" stays text: it is not how a number is written
            return number
    try:
        real = float(text)
    except ValueError:
        return text
    return real if repr(real) == text else text


def _plain(value: Any, where: str) -> Any:
    """A deep plain copy of a value (mappings become dicts with string keys)."""
    if isinstance(value, StorageOptions):
        return value.to_dict()
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str) or not k:
                raise ConfigError(f"{where}: option names must be non-empty text, got {k!r}")
            out[k] = _plain(v, f"{where}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise ConfigError(f"{where}: unsupported value of type {type(value).__name__}")


def _masked(value: Any, *, secret: bool) -> Any:
    if isinstance(value, dict):
        return {k: _masked(v, secret=secret or is_secret_key(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, secret=secret) for v in value]
    return MASK if secret and value is not None else value


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``, nested mappings merged key by key."""
    out = dict(base)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


class StorageOptions(Mapping[str, Any]):
    """The filesystem options of a warehouse: an immutable mapping whose printed form masks
    secrets.

    Reading an item gives a copy of nested values (``client_kwargs`` is a plain dict), so
    ``dict(options)`` is what fsspec's ``url_to_fs(url, **options)`` takes. Picklable
    (Spark ships it to executors inside the ``StoreConfig``), hashable and comparable.
    """

    __slots__ = ("_data", "_hash")

    def __init__(self, options: Mapping[str, Any] | None = None, *, where: str = "") -> None:
        self._data: dict[str, Any] = _plain(dict(options or {}), where or "storage_options")
        self._hash: int | None = None

    @classmethod
    def from_pairs(cls, pairs: Iterable[str], *, where: str = "--storage-option") -> StorageOptions:
        """Options from ``k=v`` texts (``--storage-option``, repeatable); a dotted name is
        nested (``client_kwargs.region_name=eu-west-1``). Later pairs win.

        Raises:
            ConfigError: a pair without ``=`` or with an empty name.
        """
        data: dict[str, Any] = {}
        for pair in pairs:
            name, sep, text = pair.partition("=")
            name = name.strip()
            parts = name.split(".")
            if not sep:
                # The text is not shown: it may be a secret typed in the wrong form.
                raise ConfigError(
                    f"{where}: expected NAME=VALUE, got a text without '=' "
                    "(not shown: it may be a secret)"
                )
            if not all(parts):
                raise ConfigError(f"{where}: empty option name in {name!r}=... (NAME=VALUE)")
            node = data
            for p in parts[:-1]:
                child = node.get(p)
                if not isinstance(child, dict):
                    child = node[p] = {}
                node = child
            node[parts[-1]] = _parse_value(parts[-1], text)
        return cls(data, where=where)

    @classmethod
    def of(cls, value: object, *, where: str = "storage_options") -> StorageOptions:
        """Options from a config value: ``None`` (none), a mapping (YAML ``storage_options:``,
        the Table handle's ``storage_options=``) or ``k=v`` texts (a list, or one text).

        Raises:
            ConfigError: anything else, or a bad pair.
        """
        if value is None:
            return cls()
        if isinstance(value, StorageOptions):
            return value
        if isinstance(value, Mapping):
            return cls(value, where=where)
        if isinstance(value, str):
            return cls.from_pairs([value], where=where)
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return cls.from_pairs(value, where=where)
        raise ConfigError(
            f"{where}: expected a mapping of option names to values, got {type(value).__name__}"
        )

    def merged(self, top: Mapping[str, Any] | None) -> StorageOptions:
        """These options with ``top``'s over them (nested mappings merged key by key): the
        precedence arguments > file."""
        if not top:
            return self
        return StorageOptions(_merge(self._data, _plain(dict(top), "storage_options")))

    def to_dict(self) -> dict[str, Any]:
        """A plain deep copy, for the filesystem's constructor (secrets included: never
        print it)."""
        out: dict[str, Any] = copy.deepcopy(self._data)
        return out

    def masked(self) -> dict[str, Any]:
        """A plain copy whose secret values are :data:`MASK` (what may be printed)."""
        out: dict[str, Any] = _masked(self._data, secret=False)
        return out

    # Mapping
    def __getitem__(self, key: str) -> Any:
        return copy.deepcopy(self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StorageOptions):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == _plain(dict(other), "storage_options")
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(json.dumps(self._data, sort_keys=True, default=str))
        return self._hash

    def __repr__(self) -> str:
        return f"StorageOptions({self.masked()!r})"

    __str__ = __repr__

    def __getstate__(self) -> dict[str, Any]:
        return {"_data": self._data}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._data = state["_data"]
        self._hash = None


def _unwrap(node: Tree | Sourced, where: str) -> Any:
    if isinstance(node, Sourced):
        return node.value
    return {k: _unwrap(v, f"{where}.{k}") for k, v in node.items()}


def from_config_tree(
    tree: Tree, *, over: Mapping[str, Any] | None = None, name: str = SECTION
) -> StorageOptions:
    """The ``storage_options:`` mapping of a loaded config (``load_layers``), taken out of
    ``tree`` (its fields are not typed keys: any filesystem option is accepted), with
    ``over`` (the command line's ``--storage-option``s) over it.

    Raises:
        ConfigError: ``storage_options`` is not a mapping.
    """
    node = tree.pop(name, None)
    if isinstance(node, Sourced):
        if node.value is not None and not isinstance(node.value, Mapping):
            raise ConfigError(f"{name} must be a mapping of option names to values ({node.source})")
        base = StorageOptions.of(node.value, where=name)
    else:
        base = StorageOptions({} if node is None else _unwrap(node, name), where=name)
    return base.merged(over)
