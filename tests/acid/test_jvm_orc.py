"""Every file shape the writer produces is read by ORC Java (the reader Hive uses),
at every flush length, with the right rows, stripes, schema and ACID metadata."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pyorc
import pytest

from tests.acid.writer_cases import BUILDERS

pytestmark = pytest.mark.spark

ACID_KEYS = {"hive.acid.key.index", "hive.acid.stats", "hive.acid.version"}


@pytest.mark.parametrize("case", sorted(BUILDERS))
def test_jvm_reader_accepts_every_flush_length(case: str, tmp_path: Path, jvm_orc: Any) -> None:
    wf = BUILDERS[case](tmp_path)
    assert wf.prefixes
    for length, nrows in wf.prefixes.items():
        got = jvm_orc.read(wf.path, max_length=length)
        data = Path(wf.path).read_bytes()
        py = pyorc.Reader(io.BytesIO(data if length is None else data[:length]))
        assert got["rows"] == nrows
        assert got["rows_read"] == nrows
        assert got["stripes"] == py.num_of_stripes
        assert got["schema"] == wf.schema.orc_event_schema()
        assert set(got["metadata"]) == ACID_KEYS
        assert got["metadata_items"] == 3
        assert got["metadata"]["hive.acid.version"] == "2"
        if nrows:
            assert got["metadata"]["hive.acid.key.index"].count(";") == got["stripes"]
