"""The public facade: what ``import acidstream`` gives a user, and what it costs."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

import acidstream
from acidstream import ConfigError, SinkOptions, StreamingOptions


def test_every_exported_name_resolves() -> None:
    for name in acidstream.__all__:
        assert getattr(acidstream, name) is not None, name
    with pytest.raises(AttributeError):
        _ = acidstream.NoSuchThing  # type: ignore[attr-defined]


def test_import_reads_and_loads_nothing_heavy() -> None:
    # The facade and acidstream.acid share one lazy-exports helper, so importing the facade
    # loads the (lazy, import-free) acidstream.acid package and that helper, and nothing else of
    # ours: no format module, no transaction manager, no writer, no pyarrow, no pyspark.
    code = "import sys, acidstream; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    ours = {m for m in loaded if m == "acidstream" or m.startswith("acidstream.")}
    assert ours == {"acidstream", "acidstream.acid", "acidstream.acid.lazy_exports"}
    assert not {m for m in loaded if m.split(".")[0] in ("pyarrow", "pyspark", "pyorc")}


def test_errors_share_one_root_and_config_error_is_a_value_error() -> None:
    for name in acidstream.__all__:
        obj = getattr(acidstream, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, acidstream.AcidStreamError), name
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize("cls", [StreamingOptions, SinkOptions])
def test_option_dataclasses_are_frozen_and_keyword_only(cls: type) -> None:
    with pytest.raises(TypeError):
        cls(1)
    opts = cls()
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.txns_per_batch = 2  # type: ignore[misc]
    # one vocabulary across the writers
    names = {f.name for f in dataclasses.fields(cls)}
    assert {"txns_per_batch", "dead_letter_path", "orc"} <= names
    # the txn timeout is the metastore's setting, no writer's option (issue 29)
    assert "txn_timeout_s" not in names


def test_bad_option_values_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="txns_per_batch"):
        StreamingOptions(txns_per_batch=1001)
    with pytest.raises(ValueError, match="txns_per_batch"):
        SinkOptions(txns_per_batch=0)
