"""Parsing the next block while the current one commits (``acidstream.ingest.parse_ahead``): the
same rows, rejections and dead letters as ``write_block(records)``, really ahead of the
caller, and ``acidstream ingest``'s guesses never changing what a txn holds."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pytest

from acidstream.acid.errors import ConfigError
from acidstream.cli.main import EXIT_REJECTED, main
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.parse_ahead import AheadParser, parse_block, parse_stream
from acidstream.ingest.record_common import EncodedBlock
from acidstream.ingest.record_json import StrictJsonWriter
from acidstream.ingest.record_writers import BoundRecordWriter
from acidstream.txn.config import StoreConfig
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable, snapshot_read


def _blocks(n_blocks: int, size: int) -> list[list[bytes]]:
    """JSON lines with a bad record (not JSON, a string id, an int overflow) now and then."""
    out = []
    for b in range(n_blocks):
        block = []
        for i in range(size):
            k = b * size + i
            if k % 97 == 5:
                block.append(b"{not json")
            elif k % 89 == 7:
                block.append(b'{"id": "x%d", "msg": "bad"}' % k)
            elif k % 83 == 3:
                block.append(b'{"id": 99999999999, "msg": "overflow"}')
            else:
                block.append(json.dumps({"id": k, "msg": f"m{k}"}).encode())
        out.append(block)
    return out


def _write(
    store: TxnStore, table: str, blocks: list[list[bytes]], dead: Path, *, ahead: bool
) -> list[str]:
    """Each block in its own txn; returns the rejections as "block:index:class:message"."""
    rejected = []
    with StreamingConnection(
        table, record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(txns_per_batch=3, dead_letter_path=str(dead)),
    ) as conn:  # fmt: skip
        source = conn.parse_ahead(blocks) if ahead else blocks
        for b, block in enumerate(source):
            conn.begin_transaction()
            res = conn.write_block(block)
            conn.commit_transaction()
            rejected += [f"{b}:{i}:{type(e).__name__}:{e}" for i, e in res.rejected]
    return rejected


def _dead_letters(dead: Path) -> list[tuple[str, str]]:
    rows = [json.loads(x) for f in sorted(dead.glob("*.jsonl")) for x in f.read_text().splitlines()]
    return sorted((r["record"], r["reason"]) for r in rows)


def test_parsed_ahead_writes_what_write_block_writes(
    store: TxnStore, make_table: MakeTable, tmp_path: Path
) -> None:
    blocks = _blocks(6, 700)
    got = {}
    for ahead in (False, True):
        table = make_table(f"t{int(ahead)}", "id int, msg string")
        dead = tmp_path / f"dead{int(ahead)}"
        rejected = _write(store, table.name, blocks, dead, ahead=ahead)
        rows = snapshot_read(store, table, include_row_id=True)
        got[ahead] = (
            sorted(zip(rows.column("id").to_pylist(), rows.column("msg").to_pylist(), strict=True)),
            sorted(Counter(pc.struct_field(rows.column("row__id"), 0).to_pylist()).values()),
            rejected,
            _dead_letters(dead),
        )
    plain, parsed = got[False], got[True]
    assert plain[2], "the blocks hold bad records: the comparison must cover rejections"
    assert len(plain[1]) == len(blocks)  # one txn per block
    assert parsed[0] == plain[0]  # the same rows
    assert parsed[1] == plain[1]  # the same rows per txn
    assert parsed[2] == plain[2]  # the same rejections, errors and order
    assert parsed[3] == plain[3]  # the same dead letters


@dataclass(frozen=True)
class _Watched:
    """A real bound writer whose ``encode_block`` reports which block it is parsing."""

    inner: BoundRecordWriter
    started: dict[int, threading.Event]

    def encode_block(self, records: Sequence[bytes]) -> EncodedBlock:
        self.started[int(json.loads(records[0])["id"]) // 100].set()
        return self.inner.encode_block(records)

    def encode(self, record: bytes) -> object:  # pragma: no cover - not used here
        raise AssertionError


def test_the_next_block_is_parsed_while_the_caller_holds_this_one() -> None:
    from acidstream.acid.schema import TableSchema

    inner = StrictJsonWriter().bind(TableSchema.parse("id int, msg string"))
    started = {k: threading.Event() for k in range(4)}
    watched = _Watched(inner, started)
    blocks = [
        [json.dumps({"id": k * 100 + i, "msg": "m"}).encode() for i in range(50)] for k in range(4)
    ]
    seen = []
    for k, parsed in enumerate(parse_stream(watched, blocks)):  # type: ignore[arg-type]
        # Block k+1's parse starts while this loop body still holds block k.
        if k + 1 < len(blocks):
            assert started[k + 1].wait(timeout=30), f"block {k + 1} was not parsed ahead"
        else:
            assert all(e.is_set() for e in started.values())
        seen.append(parsed.encoded.table.column("id").to_pylist())
    assert seen == [[k * 100 + i for i in range(50)] for k in range(4)]


def test_a_wrong_guess_parses_the_records_taken() -> None:
    from acidstream.acid.schema import TableSchema

    bound = StrictJsonWriter().bind(TableSchema.parse("id int, msg string"))
    guessed = [b'{"id": 1, "msg": "guess"}']
    actual = [b'{"id": 2, "msg": "taken"}', b"bad"]
    with AheadParser(bound) as parser:
        parser.ahead(("b", 0, 1), guessed)
        block = parser.take(("b", 0, 2), actual)
        assert block.records == actual
        assert block.encoded.table.column("msg").to_pylist() == ["taken"]
        assert [i for i, _ in block.encoded.rejected] == [1]
        parser.ahead("next", guessed)
        assert parser.take("next", guessed).encoded.table.column("id").to_pylist() == [1]


def test_a_block_parsed_for_another_connection_is_refused(
    store: TxnStore, make_table: MakeTable
) -> None:
    from acidstream.acid.schema import TableSchema

    make_table("t", "id int, msg string")
    other = parse_block(
        StrictJsonWriter().bind(TableSchema.parse("id int, msg string")), [b'{"id": 1}']
    )
    with StreamingConnection("t", record_writer=StrictJsonWriter(), store=store) as conn:
        conn.begin_transaction()
        with pytest.raises(ConfigError, match="another connection"):
            conn.write_block(other)
        conn.abort_transaction()


def test_ingest_txns_hold_txn_rows_good_records_across_blocks_and_bad_records(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """25,000 lines read in 10,000-line blocks, 3,000-row txns, bad records here and there:
    the parse-ahead guesses (a txn's records all good) are wrong around every bad record,
    and every txn still holds exactly 3,000 good records (the last one the rest)."""
    assert main(["create-table", "t", "id int, msg string"]) == 0
    src = tmp_path / "in.jsonl"
    lines = [x for block in _blocks(5, 5000) for x in block]
    src.write_bytes(b"\n".join(lines) + b"\n")
    good = [json.loads(x)["id"] for x in lines if _is_good(x)]
    capsys.readouterr()
    assert main(["ingest", "t", "--format", "json", "--txn-rows", "3000", str(src)]) == (
        EXIT_REJECTED
    )
    store = StoreConfig.resolve(warehouse=str(env)).open()
    try:
        table = store.get_table("default", "t")
        rows = snapshot_read(store, table, include_row_id=True)
    finally:
        store.close()
    assert sorted(rows.column("id").to_pylist()) == good
    per_txn = sorted(Counter(pc.struct_field(rows.column("row__id"), 0).to_pylist()).items())
    sizes = [n for _, n in per_txn]
    assert len(good) % 3000 and sizes[:-1] == [3000] * (len(sizes) - 1)
    assert sizes[-1] == len(good) % 3000


def _is_good(line: bytes) -> bool:
    try:
        v = json.loads(line)
    except ValueError:
        return False
    return isinstance(v["id"], int) and v["id"] < 2**31


@dataclass(frozen=True)
class _Breaks:
    """A real bound writer whose parse of one block fails (as a bug or MemoryError would:
    not a bad record, which ``encode_block`` reports without raising)."""

    inner: BoundRecordWriter
    bad_first_id: int

    def encode_block(self, records: Sequence[bytes]) -> EncodedBlock:
        if int(json.loads(records[0])["id"]) == self.bad_first_id:
            raise MemoryError("parse failed")
        return self.inner.encode_block(records)

    def encode(self, record: bytes) -> object:  # pragma: no cover - not used here
        raise AssertionError


def test_a_parse_that_fails_ahead_fails_where_the_block_is_taken() -> None:
    """The error of a block parsed ahead reaches the caller when it takes that block (not
    before, not lost), the blocks before it arrive whole, and the thread ends."""
    from acidstream.acid.schema import TableSchema

    inner = StrictJsonWriter().bind(TableSchema.parse("id int, msg string"))
    blocks = [[json.dumps({"id": k, "msg": "m"}).encode()] for k in range(4)]
    got = []
    stream = parse_stream(_Breaks(inner, 2), blocks)  # type: ignore[arg-type]
    with pytest.raises(MemoryError, match="parse failed"):
        for parsed in stream:
            got.append(parsed.encoded.table.column("id").to_pylist())
    assert got == [[0], [1]]
    assert not [t for t in threading.enumerate() if t.name.startswith("acidstream-parse")]


def test_ingest_positions_are_formatted_on_demand() -> None:
    from acidstream.cli.ingest_cmds import _Positions

    pos = _Positions("in.jsonl", [0, 17, 40])
    assert len(pos) == 3 and pos[1] == "in.jsonl:17" and pos[-1] == "in.jsonl:40"
    assert list(pos[1:]) == ["in.jsonl:17", "in.jsonl:40"] and list(pos) == [
        "in.jsonl:0", "in.jsonl:17", "in.jsonl:40"
    ]  # fmt: skip


def test_an_error_of_the_block_source_reaches_the_caller_where_it_takes_that_block() -> None:
    """The parse thread draws the blocks: an error the caller's iterable raises (a file
    that cannot be read, say) reaches the caller at the block it stands for, after every
    block before it, and the thread ends."""
    from acidstream.acid.schema import TableSchema

    bound = StrictJsonWriter().bind(TableSchema.parse("id int, msg string"))

    def source() -> Iterator[list[bytes]]:
        for k in range(2):
            yield [json.dumps({"id": k, "msg": "m"}).encode()]
        raise OSError("input went away")

    got = []
    with pytest.raises(OSError, match="input went away"):
        for parsed in parse_stream(bound, source()):
            got.append(parsed.encoded.table.column("id").to_pylist())
    assert got == [[0], [1]]
    assert not [t for t in threading.enumerate() if t.name.startswith("acidstream-parse")]
