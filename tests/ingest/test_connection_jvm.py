"""Files written by a StreamingConnection are read by ORC Java (Hive's reader) at every flush length."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acidstream.acid.side_file import decode_flush_lengths
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable

pytestmark = pytest.mark.spark


def test_every_flush_length_is_a_valid_orc_file_for_the_jvm_reader(
    store: TxnStore, make_table: MakeTable, jvm_orc: Any
) -> None:
    t = make_table("t", "id bigint, msg varchar(10), amount decimal(8,2), day date")
    rows_per_txn = [5, 0, 3000, 7]
    lengths: list[int] = []
    data_file = Path(t.location or "") / "delta_0000001_0000004" / "bucket_00000"
    with StreamingConnection(
        "t",
        record_writer=StrictJsonWriter(),
        store=store,
        options=StreamingOptions(txns_per_batch=4),
    ) as c:
        for k, n in enumerate(rows_per_txn):
            c.begin_transaction()
            c.write_many(
                json.dumps(
                    {"id": k * 10_000 + i, "msg": f"m{i}", "amount": "1.50", "day": "2024-02-29"}
                ).encode()
                for i in range(n)
            )
            c.commit_transaction()
            if k < len(rows_per_txn) - 1:
                side = data_file.with_name(data_file.name + "_flush_length")
                lengths = decode_flush_lengths(side.read_bytes())[1:]
                # Check while the file is still open: this is what a concurrent Hive reader sees.
                got = jvm_orc.read(str(data_file), max_length=lengths[-1])
                assert got["rows"] == sum(rows_per_txn[: k + 1])
                assert got["rows_read"] == got["rows"]
                assert set(got["metadata"]) == {
                    "hive.acid.key.index",
                    "hive.acid.stats",
                    "hive.acid.version",
                }
                if got["rows"]:
                    assert got["metadata"]["hive.acid.key.index"].count(";") == got["stripes"]
    final = jvm_orc.read(str(data_file))
    assert final["rows"] == sum(rows_per_txn)
    assert final["schema"].endswith(
        "row:struct<id:bigint,msg:varchar(10),amount:decimal(8,2),day:date>>"
    )
    for length in lengths:
        assert jvm_orc.read(str(data_file), max_length=length)["rows"] <= final["rows"]
