"""The table's ``orc.compress`` (and sibling ORC properties) reach every writer, as in Hive.

Streaming files are stitched from pieces and get a footer rewritten per commit, so each
codec the writers accept must survive that rewrite: read at every flush length by our
reader, pyarrow, and (spark marker) ORC Java, the reader Hive uses.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pyarrow.orc as pa_orc
import pytest

from acidstream.acid.errors import AcidFormatError, ConfigError
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.orc_tail import compress_chunks, decompress_chunks
from acidstream.acid.side_file import decode_flush_lengths
from acidstream.cli.main import main
from acidstream.compaction import Worker
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import snapshot_read

WRITABLE = ["NONE", "SNAPPY", "ZSTD", "ZLIB"]
# PostScript.compression of each codec, and pyarrow's name of it.
KIND = {"NONE": 0, "ZLIB": 1, "SNAPPY": 2, "ZSTD": 5}
ARROW_NAME = {"NONE": "UNCOMPRESSED", "ZLIB": "ZLIB", "SNAPPY": "SNAPPY", "ZSTD": "ZSTD"}


def test_table_properties_win_over_the_writers_options() -> None:
    base = OrcWriterOptions()
    assert base.for_table({}) is base
    got = base.for_table(
        {
            "orc.compress": "snappy",
            "orc.compress.size": "131072",
            "orc.stripe.size": "1048576",
            "orc.row.index.stride": "5000",
            "transactional": "true",
        }
    )
    assert (got.compression, got.compression_block_size) == ("SNAPPY", 131072)
    assert (got.stripe_size, got.row_index_stride) == (1048576, 5000)
    assert got.arrow_kwargs()["compression"] == "snappy"
    # The writer's own choice stands where the table says nothing.
    assert (
        OrcWriterOptions(compression="NONE").for_table({"orc.stripe.size": "65536"}).compression
        == "NONE"
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"orc.compress": "LZ4"}, "LZ4 can be read but not written"),
        ({"orc.compress": "LZO"}, "LZO can be read but not written"),
        ({"orc.compress": "BROTLI"}, "must be one of"),
        ({"orc.stripe.size": "big"}, "orc.stripe.size must be an integer"),
        ({"orc.compress.size": "0"}, "must be > 0"),
        ({"orc.compress.size": str(16 << 20)}, "below 8 MiB"),
        ({"orc.row.index.stride": "-1"}, "orc.row.index.stride must be >= 0"),
    ],
)
def test_bad_table_orc_properties_are_config_errors(params: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        OrcWriterOptions().for_table(params)


@pytest.mark.parametrize("codec", ["ZLIB", "SNAPPY", "ZSTD"])
def test_chunked_compression_round_trips(codec: str) -> None:
    kind = KIND[codec]
    text = b"".join(b"column statistics %d;" % i for i in range(20_000))  # compressible
    noise = os.urandom(70_000)  # stored as "original" chunks
    for data in (b"", b"x", text, noise, text + noise):
        packed = compress_chunks(data, kind, 65536)
        assert decompress_chunks(packed, kind) == data
        if data:
            chunks = -(-len(data) // 65536)
            assert len(packed) >= 3 * chunks
    assert len(compress_chunks(text, kind, 65536)) < len(text) // 4


@pytest.mark.parametrize("codec", ["ZLIB", "SNAPPY", "ZSTD"])
def test_a_corrupt_chunk_is_a_format_error(codec: str) -> None:
    """A damaged compressed footer chunk fails typed (AcidFormatError), not with the
    codec library's own error; a damaged length preamble or frame header too."""
    kind = KIND[codec]
    text = b"".join(b"column statistics %d;" % i for i in range(2_000))
    packed = bytearray(compress_chunks(text, kind, 65536))
    assert not packed[0] & 1  # compressed, not stored as it is
    body = bytes(packed[3:])
    for bad in (body[: len(body) // 2], bytes(b ^ 0x5A for b in body), b"\xff" * 8):
        header = len(bad) << 1
        chunk = bytes((header & 0xFF, (header >> 8) & 0xFF, header >> 16)) + bad
        with pytest.raises(AcidFormatError):
            decompress_chunks(chunk, kind)


def _make(store: TxnStore, name: str, codec: str) -> TableDef:
    return store.create_table(
        TableDef(
            db="default",
            name=name,
            columns=(("id", "bigint"), ("msg", "string")),
            parameters={"transactional": "true", "orc.compress": codec},
        )
    )


def _stream(store: TxnStore, name: str, sizes: list[int], jvm_orc: Any = None) -> Path:
    """Write one txn per entry of ``sizes`` in one batch; check each flush length is a
    readable ORC file holding the rows committed so far. Returns the data file."""
    table = store.get_table("default", name)
    data = Path(table.location or "") / f"delta_0000001_{len(sizes):07d}" / "bucket_00000"
    with StreamingConnection(
        name,
        record_writer=StrictJsonWriter(),
        store=store,
        options=StreamingOptions(txns_per_batch=len(sizes), housekeeping_interval_s=None),
    ) as c:
        done = 0
        for k, n in enumerate(sizes):
            c.begin_transaction()
            res = c.write_block(
                [json.dumps({"id": done + i, "msg": f"m{k}-{i}" * 3}).encode() for i in range(n)]
            )
            assert not res.rejected
            c.commit_transaction()
            done += n
            if k < len(sizes) - 1:
                side = data.with_name(data.name + "_flush_length")
                length = decode_flush_lengths(side.read_bytes())[-1]
                prefix = data.read_bytes()[:length]
                assert pa_orc.ORCFile(io.BytesIO(prefix)).nrows == done
                if jvm_orc is not None:
                    got = jvm_orc.read(str(data), max_length=length)
                    assert got["rows"] == got["rows_read"] == done
    return data


@pytest.mark.parametrize("codec", WRITABLE)
def test_streaming_files_use_the_tables_codec(store: TxnStore, codec: str) -> None:
    table = _make(store, "t", codec)
    data = _stream(store, "t", [300, 0, 5000, 7])
    f = pa_orc.ORCFile(str(data))
    assert f.compression == ARROW_NAME[codec]
    assert f.nrows == 5307
    ids = snapshot_read(store, table).column("id").to_pylist()
    assert sorted(ids) == list(range(5307))


@pytest.mark.parametrize("codec", ["SNAPPY", "ZSTD"])
def test_major_compaction_writes_the_tables_codec(store: TxnStore, codec: str) -> None:
    table = _make(store, "t", codec)
    for k in range(3):
        _stream(store, "t", [100 * (k + 1)])
    before = snapshot_read(store, table).column("id").to_pylist()
    q = CompactionQueue(store)
    q.request("default", "t", None, major=True)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r", out
    files = sorted(Path(out.output_dirs[0]).glob("bucket_*"))
    assert files and all(pa_orc.ORCFile(str(p)).compression == ARROW_NAME[codec] for p in files)
    assert snapshot_read(store, table).column("id").to_pylist() == before


def test_a_bad_codec_fails_the_writer_at_open_and_the_cli_at_create(
    store: TxnStore, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _make(store, "t", "ZLIB")
    # e.g. a table Hive created (readable, not writable here); the catalog refuses LZ4 at
    # create, so it is stored behind the catalog's back.
    store.set_table_param("default", "t", "orc.compress", "LZ4")
    with pytest.raises(ConfigError, match="LZ4 can be read but not written"):
        StreamingConnection("t", record_writer=StrictJsonWriter(), store=store)
    base = ["--metastore", store_url, "--warehouse", str(tmp_path / "wh")]
    code = main(["create-table", "u", "id int", "--tblproperty", "orc.compress=brotli", *base])
    assert code != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "orc.compress=BROTLI: must be one of" in err
    assert "Traceback" not in err


@pytest.mark.spark
@pytest.mark.parametrize("codec", ["SNAPPY", "ZSTD"])
def test_orc_java_reads_every_flush_length_of_each_codec(
    store: TxnStore, codec: str, jvm_orc: Any
) -> None:
    _make(store, "t", codec)
    data = _stream(store, "t", [50, 3000, 0, 9], jvm_orc=jvm_orc)
    final = jvm_orc.read(str(data))
    assert final["rows"] == final["rows_read"] == 3059
    assert set(final["metadata"]) == {"hive.acid.key.index", "hive.acid.stats", "hive.acid.version"}
