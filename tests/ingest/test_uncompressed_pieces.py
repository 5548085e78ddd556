"""Uncompressed streaming files: pieces encoded with a large block, the file as declared.

pyarrow encodes a piece of an uncompressed stitched file with a 4 MiB compression block
and a stripe size it never reaches (``OrcWriterOptions.arrow_encode_kwargs``: its fixed
cost per file is lower). The file must still be what the table declares: every tail (at
each flush length) names the block ``arrow_kwargs`` gives, each stripe holds at most a
stripe of rows' bytes (the writer cuts the pieces itself), and every reader reads it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from acidstream.acid.errors import AcidFormatError
from acidstream.acid.orc_options import UNCOMPRESSED_ENCODE_BLOCK, OrcWriterOptions
from acidstream.acid.orc_stitch import StripeStitcher
from acidstream.acid.orc_tail import parse_tail
from acidstream.acid.protobuf import decode_fields, fields_dict
from acidstream.acid.side_file import decode_flush_lengths
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import snapshot_read

STRIPE = 2 * 1024 * 1024  # orc.stripe.size: a delta's stripe is an eighth, 256 KiB
SIZES = [3, 20_000, 0, 60_000, 1]


def _declared_block() -> int:
    opts = OrcWriterOptions().for_table({"orc.compress": "NONE", "orc.stripe.size": str(STRIPE)})
    return int(opts.delta_options(streaming=True).arrow_kwargs()["compression_block_size"])


def _stream(store: TxnStore, jvm_orc: Any = None) -> tuple[Path, list[dict[str, Any]]]:
    """One txn per entry of ``SIZES`` in one batch of an uncompressed table; at each
    flush length, the tail's block and the rows pyarrow (and ORC Java) read are checked."""
    table = store.create_table(
        TableDef(
            db="default",
            name="t",
            columns=(("id", "bigint"), ("msg", "string")),
            parameters={
                "transactional": "true",
                "orc.compress": "NONE",
                "orc.stripe.size": str(STRIPE),
            },
        )
    )
    data = Path(table.location or "") / f"delta_0000001_{len(SIZES):07d}" / "bucket_00000"
    written: list[dict[str, Any]] = []
    with StreamingConnection(
        "t",
        record_writer=StrictJsonWriter(),
        store=store,
        options=StreamingOptions(txns_per_batch=len(SIZES), housekeeping_interval_s=None),
    ) as c:
        for k, n in enumerate(SIZES):
            rows = [{"id": len(written) + i, "msg": f"m{k}-{i}" * 3} for i in range(n)]
            c.begin_transaction()
            assert c.write_many([json.dumps(r).encode() for r in rows]) == n
            c.commit_transaction()
            written += rows
            if k < len(SIZES) - 1:
                side = data.with_name(data.name + "_flush_length")
                length = decode_flush_lengths(side.read_bytes())[-1]
                prefix = data.read_bytes()[:length]
                tail = parse_tail(prefix)
                assert (tail.compression, tail.block_size) == (0, _declared_block())
                assert pa_orc.ORCFile(io.BytesIO(prefix)).nrows == len(written)
                if jvm_orc is not None:
                    got = jvm_orc.read(str(data), max_length=length)
                    assert got["rows"] == got["rows_read"] == len(written)
    return data, written


def test_uncompressed_streaming_file_declares_the_tables_block_and_cuts_its_stripes(
    store: TxnStore,
) -> None:
    data, written = _stream(store)
    raw = data.read_bytes()
    tail = parse_tail(raw)
    assert (tail.compression, tail.block_size) == (0, _declared_block())
    assert _declared_block() < UNCOMPRESSED_ENCODE_BLOCK  # the encoder's block differs
    stripes = [
        fields_dict(decode_fields(v))
        for n, _, v in tail.footer_fields
        if n == 3 and isinstance(v, bytes)
    ]
    rows = [int(s[5]) for s in stripes]
    assert sum(rows) == len(written)
    delta_stripe = STRIPE // 8
    # The 60,000-row txn (some 2 MB of rows) is cut into stripes of at most a stripe's
    # bytes (the encoder alone would have written one), the small txns are a stripe each.
    for s in stripes:
        assert int(s[2]) + int(s[3]) + int(s[4]) <= delta_stripe  # index + data + footer
    assert len(stripes) >= 2 + 2_000_000 // delta_stripe
    got = snapshot_read(store, store.get_table("default", "t"))
    assert got.column("id").to_pylist() == [r["id"] for r in written]
    assert got.column("msg").to_pylist() == [r["msg"] for r in written]


@pytest.mark.spark
def test_orc_java_reads_every_flush_length_of_an_uncompressed_streaming_file(
    store: TxnStore, jvm_orc: Any
) -> None:
    data, written = _stream(store, jvm_orc=jvm_orc)
    final = jvm_orc.read(str(data))
    assert final["rows"] == final["rows_read"] == len(written)


def test_encoder_settings_differ_from_the_files_only_when_uncompressed() -> None:
    plain = OrcWriterOptions(compression="NONE")
    enc = plain.arrow_encode_kwargs()
    assert enc["compression_block_size"] == UNCOMPRESSED_ENCODE_BLOCK
    assert enc["stripe_size"] > plain.stripe_size
    assert {k: v for k, v in enc.items() if k not in ("compression_block_size", "stripe_size")} == {
        k: v
        for k, v in plain.arrow_kwargs().items()
        if k not in ("compression_block_size", "stripe_size")
    }
    for codec in ("ZLIB", "SNAPPY", "ZSTD"):
        opts = OrcWriterOptions(compression=codec)
        assert opts.arrow_encode_kwargs() == opts.arrow_kwargs()


def _piece(block: int, compression: str = "uncompressed") -> bytes:
    buf = io.BytesIO()
    pa_orc.write_table(
        pa.table({"a": [1, 2]}), buf, compression=compression, compression_block_size=block
    )
    return buf.getvalue()


def test_stitcher_declares_the_block_of_an_uncompressed_file() -> None:
    st = StripeStitcher(declared_block_size=65536)
    for block in (1 << 20, 4 << 20, 65536):  # pieces may differ: no byte depends on it
        p = _piece(block)
        t = parse_tail(p)
        start = st.next_body_start
        st.add_piece(t, body_start=start, body_length=len(p) - 3 - t.tail_length)
    assert parse_tail(st.tail(metadata={})).block_size == 65536


def test_stitcher_refuses_compressed_pieces_of_another_block() -> None:
    st = StripeStitcher(declared_block_size=65536)
    first = _piece(65536, "zlib")
    t = parse_tail(first)
    st.add_piece(t, body_start=3, body_length=len(first) - 3 - t.tail_length)
    with pytest.raises(AcidFormatError, match="compression"):
        st.add_piece(parse_tail(_piece(1 << 20, "zlib")), body_start=st.position, body_length=0)
    # A compressed file's tail declares the block its chunks were cut with.
    assert parse_tail(st.tail(metadata={})).block_size == 65536
