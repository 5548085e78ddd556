"""Request bodies: media types, gzip with a size cap, lines, and the columnar parse.

Everything here is pure (no I/O, no event loop): ``app`` calls the heavy parts on worker
threads. A body is split into lines at ``\\n`` (a trailing ``\\r`` is dropped, empty lines
are skipped but counted, so line numbers are what the client's editor shows), and the
lines are parsed in one columnar pass by the table's bound record writer
(``encode_block``): bad lines never fail the others.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import pyarrow as pa

from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.partition_name import parse_partition_name
from acidstream.acid.placement import Placement
from acidstream.ingest.record_writers import BoundRecordWriter
from acidstream.ingest.static_partition import canonical_partition_values

__all__ = [
    "BodyTooLarge",
    "Parsed",
    "gunzip",
    "media_type",
    "parse_lines",
    "parse_partition",
    "split_lines",
]

PartitionValues = tuple[str | None, ...]
Rows: TypeAlias = "pa.Table | list[tuple[object, ...]]"

#: Bodies with fewer records take the writer's per-record path (``encode``): the columnar
#: pass has a fixed cost of about a millisecond, ten times the per-record cost of ten
#: records, and many small requests are the group-commit case. Both paths accept and
#: reject exactly the same records with the same values (the record-writer contract).
ROW_PATH_MAX_RECORDS = 32


class BodyTooLarge(Exception):
    """A gzip body inflates past the limit."""


def media_type(header: str | None) -> tuple[str, str | None]:
    """``(media type, charset)`` of a ``Content-Type`` header, lower-cased."""
    if not header:
        return "", None
    parts = [p.strip() for p in header.split(";")]
    charset = None
    for p in parts[1:]:
        k, _, v = p.partition("=")
        if k.strip().lower() == "charset":
            charset = v.strip().strip('"').lower()
    return parts[0].lower(), charset


def gunzip(data: bytes, *, limit: int) -> bytes:
    """Inflate a gzip body, never holding more than ``limit`` bytes of output.

    Several gzip members one after the other are one body (RFC 1952, as ``gzip -c a b``
    writes them); anything else after the last member is refused, not ignored: a body
    that is not what the client meant to send is not written.

    Raises:
        BodyTooLarge: the body inflates past ``limit``.
        ValueError: not valid gzip data, truncated, or followed by other bytes.
    """
    parts: list[bytes] = []
    size = 0
    rest = data
    while True:
        d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out = d.decompress(rest, limit - size + 1)
            if size + len(out) > limit or d.unconsumed_tail:
                raise BodyTooLarge(f"the body inflates past {limit:,} bytes")
            out += d.flush()
        except zlib.error as e:
            what = "the body is not valid gzip" if not parts else "bytes after the gzip data"
            raise ValueError(f"{what}: {e}") from e
        size += len(out)
        if size > limit:
            raise BodyTooLarge(f"the body inflates past {limit:,} bytes")
        if not d.eof:
            raise ValueError("the gzip body is truncated")
        parts.append(out)
        rest = d.unused_data
        if not rest:
            return parts[0] if len(parts) == 1 else b"".join(parts)
        if not rest.startswith(b"\x1f\x8b"):
            raise ValueError(f"{len(rest):,} bytes after the gzip data are not another gzip member")


def split_lines(body: bytes) -> tuple[list[bytes], list[int]]:
    """Non-empty lines of a body and their 1-based line numbers."""
    lines = body.split(b"\n")
    if b"\r" not in body and b"" not in lines[:-1]:
        # The usual body: no CR, no empty line (a final newline aside), so each line is
        # a record and its number is its position.
        if lines[-1] == b"":
            lines.pop()
        return lines, list(range(1, len(lines) + 1))
    records: list[bytes] = []
    numbers: list[int] = []
    for i, line in enumerate(lines, 1):
        if line.endswith(b"\r"):
            line = line[:-1]
        if line:
            records.append(line)
            numbers.append(i)
    return records, numbers


def parse_partition(text: str, keys: Sequence[tuple[str, str]], *, table: str) -> PartitionValues:
    """``ds=2026-11-23[/k=v]`` (the ``?partition=`` parameter) as values in key order,
    each converted to its column's type and written back as a record's value would be
    (``h=007`` is ``h=7``; ``acidstream.ingest.static_partition``).

    Args:
        text: the parameter's value.
        keys: the table's ``(partition column, Hive type)`` pairs, in order.
        table: the table's name, for messages.

    Raises:
        ConfigError: malformed, a key named twice, not exactly the table's partition
            keys, or a value its column cannot hold (``h=notanint``).
    """
    names = [k for k, _ in keys]
    if not names:
        raise ConfigError("the table is not partitioned: ?partition= is not allowed")
    pairs = parse_partition_name(text)
    kv = dict(pairs)
    if len(kv) != len(pairs) or set(kv) != set(names):
        got = [k for k, _ in pairs]
        raise ConfigError(f"?partition= must name exactly {names} once each, got {got}")
    return canonical_partition_values(keys, [kv[k] for k in names], table)


@dataclass(frozen=True)
class Parsed:
    """A request's lines after the columnar parse.

    Attributes:
        groups: good rows by partition values (``()``: unpartitioned): an Arrow table,
            or row tuples in table column order (small bodies).
        accepted: good rows.
        nbytes: bytes of the good lines.
        rejected: ``(index into records, error)`` in index order.
    """

    groups: list[tuple[PartitionValues, Rows]]
    accepted: int
    nbytes: int
    rejected: list[tuple[int, SerializationError]]


def parse_lines(
    records: Sequence[bytes],
    *,
    writer: BoundRecordWriter,
    placement: Placement,
    static: PartitionValues | None,
    dynamic: bool,
) -> Parsed:
    """Parse records with ``writer`` (bound with the partition columns when ``dynamic``)
    and group the good rows by partition; rows whose partition values no directory can
    hold are rejected like bad records."""
    if len(records) < ROW_PATH_MAX_RECORDS:
        return _parse_rows(records, writer=writer, placement=placement, static=static)
    enc = writer.encode_block(records)
    rejected = list(enc.rejected)
    table = enc.table
    groups: list[tuple[PartitionValues, Rows]] = []
    good: list[int] = []
    if not table.num_rows:
        pass
    elif not dynamic or enc.partitions is None:
        values: PartitionValues = static if static is not None else ()
        try:
            placement.partition_dir(values)
            groups.append((values, table))
            good = enc.good_indices.to_pylist()
        except SerializationError as e:
            rejected.extend((i, e) for i in enc.good_indices.to_pylist())
    else:
        for vals, rows in placement.partition_groups(enc.partitions):
            idx = enc.good_indices.take(rows).to_pylist()
            try:
                placement.partition_dir(vals)
            except SerializationError as e:
                rejected.extend((i, e) for i in idx)
                continue
            groups.append((vals, table.take(rows)))
            good.extend(idx)
    rejected.sort(key=lambda r: r[0])
    return Parsed(
        groups=groups,
        accepted=len(good),
        nbytes=sum(len(records[i]) for i in good),
        rejected=rejected,
    )


def _parse_rows(
    records: Sequence[bytes],
    *,
    writer: BoundRecordWriter,
    placement: Placement,
    static: PartitionValues | None,
) -> Parsed:
    """The per-record path of :func:`parse_lines` (same results, for small bodies)."""
    by_part: dict[PartitionValues, list[tuple[object, ...]]] = {}
    rejected: list[tuple[int, SerializationError]] = []
    accepted = nbytes = 0
    for i, record in enumerate(records):
        try:
            row, pvals = writer.encode(record)
            values = static if static is not None else tuple(pvals)
            placement.partition_dir(values)
        except SerializationError as e:
            rejected.append((i, e))
            continue
        by_part.setdefault(values, []).append(tuple(row))
        accepted += 1
        nbytes += len(record)
    return Parsed(groups=list(by_part.items()), accepted=accepted, nbytes=nbytes, rejected=rejected)
