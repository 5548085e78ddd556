"""Configuration files: one YAML mapping, read once, with typed errors.

Every long-running command (the Kafka job, the HTTP server) reads its YAML through
:func:`read_config_file`, then merges environment and arguments over it and parses the
result into frozen dataclasses.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from acidstream.acid.errors import ConfigError

__all__ = ["read_config_file"]


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
