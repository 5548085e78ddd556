"""Hive's ``AcidUtils.getAcidState``: which base, deltas and original files make up a snapshot.

Given a partition (or unpartitioned table) directory, a ``ValidWriteIdList``
and the mandatory ``ValidTxnList``, ``get_acid_state`` classifies every child
as Hive does (original files and directories, bases, deltas, delete deltas),
applies the visibility (``_v``) rule, keeps the best base, picks the working
deltas wide-first with statement-id grouping, and reports obsolete and
aborted directories. It also resolves what a reader needs next: the logical
length of every data file (``_flush_length`` side files) and the synthetic
ROW__ID start of every original file.

List bucketing (``acidstream.acid.list_bucketing``) leaves directory selection alone: its
directories sit inside each delta or base (``delta_5_5/x=6/bucket_00000``, the default
one ``HIVE_DEFAULT_LIST_BUCKETING_DIR_NAME`` once per skewed column), and the files of a
chosen directory include those of its list-bucketing subdirectories, each
:class:`DataFile` naming its own (``lb_dir``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from acidstream.acid.errors import AcidFormatError, NotEnoughHistoryError
from acidstream.acid.layout import (
    BASE_PREFIX,
    DELETE_DELTA_PREFIX,
    DELTA_PREFIX,
    METADATA_FILE,
    SIDE_FILE_SUFFIX,
    ParsedBase,
    ParsedDelta,
    is_hidden,
    parse_bucket_file,
    parse_dir_name,
    parse_original_file,
)
from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME
from acidstream.acid.orc_inspect import OrcFileInfo, inspect_orc, logical_length
from acidstream.acid.snapshot import LONG_MAX, RangeResponse, ValidTxnList, ValidWriteIdList
from acidstream.acid.storage import FileInfo, Storage

__all__ = [
    "LONG_MIN",
    "AcidDir",
    "AcidState",
    "DataFile",
    "OriginalFile",
    "find_best_working_deltas",
    "get_acid_state",
    "is_lb_dir_name",
    "is_valid_base",
    "lb_dir_names",
]

LONG_MIN = -9223372036854775808


@dataclass(frozen=True)
class DataFile:
    """One data file of a base or delta directory.

    ``bucket_id`` comes from ``bucket_N[_A]`` (or ``N_M`` in raw directories) and
    is ``None`` for other names (Hive's ``parseBucketId`` gives -1).
    ``logical_length`` is the side-file length when one applies, else the size.
    ``lb_dir`` is the list-bucketing directory holding the file, relative to its
    delta/base (``x=6``, ``HIVE_DEFAULT_LIST_BUCKETING_DIR_NAME/...``); ``""`` for a file
    directly in the delta/base.
    """

    path: str
    name: str
    bucket_id: int | None
    attempt_id: int | None
    length: int
    logical_length: int
    lb_dir: str = ""


@dataclass(frozen=True)
class AcidDir:
    """A chosen base or delta directory with its data files (sorted by name)."""

    path: str
    name: str
    parsed: ParsedBase | ParsedDelta
    files: tuple[DataFile, ...]
    is_raw: bool = False
    is_compacted: bool = False

    @property
    def is_delete(self) -> bool:
        return isinstance(self.parsed, ParsedDelta) and self.parsed.is_delete

    @property
    def is_base(self) -> bool:
        return isinstance(self.parsed, ParsedBase)


@dataclass(frozen=True)
class OriginalFile:
    """A pre-ACID file with the synthetic ROW__ID numbering Hive gives it.

    ``write_id`` is 0 at the partition root (and in original sub-directories) and
    the directory's write id in a raw ``base_x`` / ``delta_x_x``; ``start_row_id`` is
    the row count of the preceding same-bucket files of the same group, in path order.
    """

    path: str
    name: str
    bucket_id: int | None
    statement_id: int
    write_id: int
    length: int
    row_count: int
    start_row_id: int
    dir_name: str | None = None


@dataclass(frozen=True)
class AcidState:
    """The result of ``get_acid_state`` (Hive's ``AcidDirectory``).

    ``deltas`` holds insert and delete deltas in Hive's order; ``original_files``
    holds root/original-directory files, plus the files of a raw base or raw
    delta (LOAD DATA), all with synthetic ROW__ID numbering.
    """

    path: str
    base: AcidDir | None
    deltas: tuple[AcidDir, ...]
    original_files: tuple[OriginalFile, ...]
    obsolete: tuple[str, ...]
    aborted: tuple[str, ...]
    aborted_write_ids: tuple[int, ...]
    uncompacted_aborts: bool

    @property
    def insert_deltas(self) -> tuple[AcidDir, ...]:
        return tuple(d for d in self.deltas if not d.is_delete)

    @property
    def delete_deltas(self) -> tuple[AcidDir, ...]:
        return tuple(d for d in self.deltas if d.is_delete)

    def logical_lengths(self) -> dict[str, int]:
        """Logical length of every data file the snapshot reads, by path."""
        out = {f.path: f.logical_length for d in self._dirs() for f in d.files}
        out.update({o.path: o.length for o in self.original_files})
        return out

    def _dirs(self) -> tuple[AcidDir, ...]:
        return ((self.base,) if self.base else ()) + self.deltas


# ---------------------------------------------------------------------------------------------
# pure rules (no I/O): unit-tested one by one and by hypothesis


def _min_open(write_ids: ValidWriteIdList) -> int | None:
    # ValidReaderWriteIdList.getMinOpenWriteId returns null for Long.MAX_VALUE.
    m = write_ids.min_open_write_id
    return None if m == LONG_MAX else m


def is_valid_base(write_id: int, *, compacted: bool, write_ids: ValidWriteIdList) -> bool:
    """``AcidUtils.isValidBase``."""
    if write_id == LONG_MIN:
        return True  # the first compaction after a non-ACID to ACID conversion
    min_open = _min_open(write_ids)
    if min_open is not None and write_id <= min_open:
        return True
    if compacted:
        return write_ids.is_valid_base(write_id)
    return write_ids.is_write_id_valid(write_id)  # an INSERT OVERWRITE base


def _hive_path_order(d: ParsedDelta, name: str) -> tuple[int, int, int, str]:
    return (*d.sort_key(), name)


def find_best_working_deltas(
    candidates: list[tuple[ParsedDelta, str]],
    *,
    base_write_id: int | None,
    write_ids: ValidWriteIdList,
) -> tuple[list[tuple[ParsedDelta, str]], list[str]]:
    """``AcidUtils.findBestWorkingDeltas``: (chosen deltas in order, obsolete names).

    ``candidates`` are ``(parsed, name)`` pairs of usable, not-aborted deltas.
    """
    ordered = sorted(candidates, key=lambda c: _hive_path_order(*c))
    chosen: list[tuple[ParsedDelta, str]] = []
    obsolete: list[str] = []
    current = base_write_id if base_write_id is not None else 0
    last_stmt = -1
    prev: ParsedDelta | None = None
    for nxt, name in ordered:
        if nxt.max_write_id > current:
            # Are any of the new write ids ones we care about? If not, the delta is
            # neither taken nor obsolete (Hive leaves it alone).
            if (
                write_ids.is_write_id_range_valid(current + 1, nxt.max_write_id)
                != RangeResponse.NONE
            ):
                chosen.append((nxt, name))
                current = nxt.max_write_id
                last_stmt = nxt.statement_id
                prev = nxt
        elif nxt.max_write_id == current and last_stmt >= 0:
            # The other statements of a multi-statement transaction.
            chosen.append((nxt, name))
            prev = nxt
        elif (
            prev is not None
            and nxt.max_write_id == prev.max_write_id
            and nxt.min_write_id == prev.min_write_id
            and nxt.statement_id == prev.statement_id
        ):
            # delta_x_y and delete_delta_x_y of the same range.
            chosen.append((nxt, name))
            prev = nxt
        else:
            obsolete.append(name)
    return chosen, obsolete


# ---------------------------------------------------------------------------------------------
# the directory walk


def _is_compacted_base(storage: Storage, path: str, parsed: ParsedBase) -> bool:
    """``isCompactedBase``: a ``_v`` suffix, or ``_metadata_acid`` saying ``compacted``."""
    if parsed.visibility_txn_id > 0:
        return True
    meta = storage.join(path, METADATA_FILE)
    if not storage.exists(meta):
        return False
    try:
        doc = json.loads(storage.read_bytes(meta).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise AcidFormatError(f"{meta}: not a JSON map: {e}") from e
    if not isinstance(doc, dict):
        raise AcidFormatError(f"{meta}: not a JSON map")
    version = str(doc.get("thisFileVersion", ""))
    if version != "0":
        raise AcidFormatError(f"{meta}: unsupported thisFileVersion {version!r} (expected '0')")
    return str(doc.get("dataFormat", "")).lower() == "compacted"


def _is_dir_usable(
    path: str, visibility_txn_id: int, txns: ValidTxnList, aborted: list[str]
) -> bool:
    """``isDirUsable``: the visibility (compactor) txn must be valid; aborted ones are recorded."""
    if not txns.is_txn_valid(visibility_txn_id):
        if txns.is_txn_aborted(visibility_txn_id):
            aborted.append(path)
        return False
    return True


def lb_dir_names(location_dirs: Collection[str] = ()) -> frozenset[str]:
    """The names of directories that are list-bucketing directories besides ``k=v`` and
    the default directory: every component of the location map's directories."""
    return frozenset(c for d in location_dirs for c in d.split("/") if c)


def is_lb_dir_name(name: str, extra: Collection[str] = ()) -> bool:
    """Whether a subdirectory of a delta/base is a list-bucketing directory (``k=v``, the
    default directory, or a component of a location-map directory)."""
    return (not is_hidden(name)) and ("=" in name or name == DEFAULT_DIR_NAME or name in extra)


# A data file of a delta/base and its list-bucketing directory ("" directly in the delta).
_Listed = tuple[FileInfo, str]


def _list_data_files(
    storage: Storage,
    path: str,
    lb_names: Collection[str],
    rel: str = "",
    out: list[_Listed] | None = None,
) -> list[_Listed]:
    """The data files of a delta/base (``rel`` ""), then those of its list-bucketing
    directories at any depth (one level per skewed column; ``rel`` is the directory
    inside the delta/base).

    The common case (no subdirectory) costs one listing, as before; side files are
    matched per file later, in whichever directory the file sits.
    """
    out = [] if out is None else out
    subdirs: list[FileInfo] = []
    for e in storage.list_dir(path):
        if is_hidden(e.name):
            continue
        if e.is_dir:
            if is_lb_dir_name(e.name, lb_names):
                subdirs.append(e)
        elif not e.name.endswith(SIDE_FILE_SUFFIX):
            out.append((e, rel))
    for d in subdirs:
        _list_data_files(storage, d.path, lb_names, f"{rel}/{d.name}" if rel else d.name, out)
    return out


def _list_originals_recursive(storage: Storage, path: str) -> list[FileInfo]:
    out: list[FileInfo] = []
    for e in storage.list_dir(path):
        if is_hidden(e.name):
            continue
        if e.is_dir:
            out.extend(_list_originals_recursive(storage, e.path))
        else:
            out.append(e)
    return out


def _original_bucket(name: str) -> int | None:
    o = parse_original_file(name)
    if o is not None:
        return o.bucket
    b = parse_bucket_file(name)
    return b[0] if b is not None else None


def _is_raw_dir(
    storage: Storage,
    parsed: ParsedBase | ParsedDelta,
    compacted: bool,
    files: list[_Listed],
    infos: dict[tuple[str, int], OrcFileInfo],
) -> bool:
    """``MetaDataFile.isRawFormat``: only base_x / delta_x_x may hold raw (LOAD DATA) files.

    As Hive's ``chooseFile``, only a file named like an original file (``N_M`` or
    ``N_M_copy_K``, ``originalBucketFilter``) is inspected: a directory of ``bucket_N``
    files (every ACID writer's output) is never raw and no file of it is opened. The
    inspected file's tail goes into ``infos`` for the row counts that follow.
    """
    if isinstance(parsed, ParsedDelta):
        if parsed.is_delete or parsed.min_write_id != parsed.max_write_id:
            return False
    elif compacted:
        return False
    chosen = next((f for f, _ in files if parse_original_file(f.name) is not None), None)
    if chosen is None:
        return False  # "directory is empty or doesn't have any that could have been produced by load data"
    try:
        info = _inspect(storage, chosen, infos)
    except AcidFormatError:
        return True  # "it's not ORC so must be a raw file"
    return not info.is_acid


def _inspect(
    storage: Storage, f: FileInfo, infos: dict[tuple[str, int], OrcFileInfo]
) -> OrcFileInfo:
    """The tail of ``f``, read once per path and size within one ``get_acid_state`` call."""
    key = (f.path, f.size)
    info = infos.get(key)
    if info is None:
        info = inspect_orc(storage, f.path, file_length=f.size)[1]
        infos[key] = info
    return info


def _row_counts_and_offsets(
    storage: Storage,
    files: list[FileInfo],
    infos: dict[tuple[str, int], OrcFileInfo],
    *,
    write_id: int,
    statement_id: int,
    dir_name: str | None,
) -> list[OriginalFile]:
    """Synthetic ROW__ID starts: per bucket, the rows of the preceding files in path order."""
    out: list[OriginalFile] = []
    next_start: dict[int | None, int] = {}
    for f in sorted(files, key=lambda e: e.path):
        bucket = _original_bucket(f.name)
        info = _inspect(storage, f, infos)
        start = next_start.get(bucket, 0)
        next_start[bucket] = start + info.nrows
        out.append(
            OriginalFile(
                path=f.path,
                name=f.name,
                bucket_id=bucket,
                statement_id=statement_id,
                write_id=write_id,
                length=f.size,
                row_count=info.nrows,
                start_row_id=start,
                dir_name=dir_name,
            )
        )
    return out


def _acid_dir(
    storage: Storage,
    path: str,
    name: str,
    parsed: ParsedBase | ParsedDelta,
    *,
    compacted: bool,
    raw: bool,
    listing: list[_Listed],
) -> AcidDir:
    use_side = isinstance(parsed, ParsedDelta) and parsed.may_contain_side_file
    files: list[DataFile] = []
    for e, lb_dir in listing:
        b = parse_bucket_file(e.name)
        bucket, attempt = (b[0], b[1]) if b is not None else (_original_bucket(e.name), None)
        files.append(
            DataFile(
                path=e.path,
                name=e.name,
                bucket_id=bucket,
                attempt_id=attempt,
                length=e.size,
                logical_length=logical_length(
                    storage, e.path, file_length=e.size, use_side_file=use_side
                ),
                lb_dir=lb_dir,
            )
        )
    return AcidDir(path, name, parsed, tuple(files), is_raw=raw, is_compacted=compacted)


def get_acid_state(
    path: str,
    *,
    write_ids: ValidWriteIdList | None,
    txns: ValidTxnList | None,
    storage: Storage | None = None,
    ignore_empty_files: bool = True,
    lb_location_dirs: Collection[str] = (),
    storage_options: Mapping[str, Any] | None = None,
) -> AcidState:
    """Hive's ``getAcidState`` for one partition (or unpartitioned table) directory.

    Args:
        path: the directory, a local path or any fsspec URL.
        write_ids: the table's ``ValidWriteIdList`` (``ValidCompactorWriteIdList`` is
            accepted too); ``None`` means every write id is valid, as in Hive.
        txns: the ``ValidTxnList``. Mandatory, as in Hive (``isDirUsable`` throws
            without one): ``None`` raises ``AcidFormatError``.
        storage: the filesystem; derived from ``path`` (with ``storage_options``: the
            filesystem's endpoint, credentials...) when omitted.
        ignore_empty_files: skip 0-byte original files, as Hive's readers do.
        lb_location_dirs: list-bucketing directories of a location map (relative to a
            delta/base) whose names are neither ``k=v`` nor the default directory's
            (``SkewedInfo.all_dirs()``); those two kinds are always recognised.

    Raises:
        NotEnoughHistoryError: only compacted bases newer than the snapshot exist.
        AcidFormatError: unparsable base/delta names, bad ``_metadata_acid`` or side files.
        FileNotFoundError: ``path`` does not exist.
    """
    if storage is None:
        storage, path = Storage.for_path(path, storage_options=storage_options)
    if txns is None:
        raise AcidFormatError(f"No ValidTxnList for {path}")
    wids = write_ids if write_ids is not None else ValidWriteIdList()
    lb_names = lb_dir_names(lb_location_dirs)

    originals: list[FileInfo] = []
    original_dirs: list[str] = []
    obsolete: list[str] = []
    aborted: list[str] = []
    aborted_wids: list[int] = []
    uncompacted_aborts = False
    base: tuple[ParsedBase, str, str, bool] | None = None  # parsed, path, name, compacted
    oldest: tuple[ParsedBase, str, bool] | None = None
    candidates: list[tuple[ParsedDelta, str]] = []
    delta_paths: dict[str, str] = {}

    for child in storage.list_dir(path):
        name = child.name
        if is_hidden(name):
            continue
        if not child.is_dir:
            if not (ignore_empty_files and child.size == 0):
                originals.append(child)
            continue
        if name.startswith(BASE_PREFIX):
            parsed = parse_dir_name(name)
            if not isinstance(parsed, ParsedBase):
                raise AcidFormatError(f"{child.path}: unparsable base directory name")
            if not _is_dir_usable(child.path, parsed.visibility_txn_id, txns, aborted):
                continue
            w = parsed.write_id
            compacted = _is_compacted_base(storage, child.path, parsed)
            if oldest is None or oldest[0].write_id > w:
                oldest = (parsed, child.path, compacted)
            if wids.is_write_id_aborted(w) and not compacted:
                aborted.append(child.path)  # an aborted INSERT OVERWRITE
                aborted_wids.append(w)
                continue
            if (
                base is None
                or base[0].write_id < w
                or (
                    base[0].write_id == w
                    and compacted
                    and txns.is_txn_valid(parsed.visibility_txn_id)
                )
            ):
                if is_valid_base(w, compacted=compacted, write_ids=wids):
                    if base is not None:
                        obsolete.append(base[1])
                    base = (parsed, child.path, name, compacted)
            else:
                obsolete.append(child.path)
        elif name.startswith((DELTA_PREFIX, DELETE_DELTA_PREFIX)):
            parsed_d = parse_dir_name(name)
            if not isinstance(parsed_d, ParsedDelta):
                raise AcidFormatError(f"{child.path}: unparsable delta directory name")
            if not _is_dir_usable(child.path, parsed_d.visibility_txn_id, txns, aborted):
                continue
            lo, hi = parsed_d.min_write_id, parsed_d.max_write_id
            abort_range = wids.is_write_id_range_aborted(lo, hi)
            if abort_range == RangeResponse.ALL:
                aborted.append(child.path)
                aborted_wids.extend(range(lo, hi + 1))
                continue
            if abort_range == RangeResponse.SOME:
                uncompacted_aborts = True
            if wids.is_write_id_range_valid(lo, hi) != RangeResponse.NONE:
                candidates.append((parsed_d, name))
                delta_paths[name] = child.path
        else:
            original_dirs.append(child.path)

    if base is not None:
        obsolete.extend(sorted(o.path for o in originals))
        obsolete.extend(original_dirs)
        originals = []
    else:
        for d in original_dirs:
            originals.extend(
                f
                for f in _list_originals_recursive(storage, d)
                if not (ignore_empty_files and f.size == 0)
            )

    chosen, obsolete_names = find_best_working_deltas(
        candidates, base_write_id=base[0].write_id if base else None, write_ids=wids
    )
    obsolete.extend(delta_paths[n] for n in obsolete_names)

    if oldest is not None and base is None and oldest[2]:
        exc = wids.invalid_write_ids
        min_open = str(exc[0]) if exc else "x"
        raise NotEnoughHistoryError(
            f"Not enough history available for ({wids.high_watermark},{min_open}). "
            f"Oldest available base: {oldest[1]}"
        )

    base_dir: AcidDir | None = None
    original_files: list[OriginalFile] = []
    # ORC tails read by this call (raw-format checks, row counts), by path and size.
    infos: dict[tuple[str, int], OrcFileInfo] = {}
    if base is not None:
        parsed_b, bpath, bname, bcompacted = base
        listing = _list_data_files(storage, bpath, lb_names)
        raw = _is_raw_dir(storage, parsed_b, bcompacted, listing, infos)
        base_dir = _acid_dir(
            storage, bpath, bname, parsed_b, compacted=bcompacted, raw=raw, listing=listing
        )
        if raw:
            original_files.extend(
                _row_counts_and_offsets(
                    storage,
                    [f for f, _ in listing],
                    infos,
                    write_id=parsed_b.write_id,
                    statement_id=0,
                    dir_name=bname,
                )
            )
    else:
        original_files.extend(
            _row_counts_and_offsets(
                storage, originals, infos, write_id=0, statement_id=0, dir_name=None
            )
        )

    deltas: list[AcidDir] = []
    for parsed_d, name in chosen:
        dpath = delta_paths[name]
        listing = _list_data_files(storage, dpath, lb_names)
        raw = _is_raw_dir(storage, parsed_d, False, listing, infos)
        deltas.append(
            _acid_dir(storage, dpath, name, parsed_d, compacted=False, raw=raw, listing=listing)
        )
        if raw:
            original_files.extend(
                _row_counts_and_offsets(
                    storage,
                    [f for f, _ in listing],
                    infos,
                    write_id=parsed_d.min_write_id,
                    statement_id=parsed_d.statement_id,
                    dir_name=name,
                )
            )

    return AcidState(
        path=path,
        base=base_dir,
        deltas=tuple(deltas),
        original_files=tuple(original_files),
        obsolete=tuple(obsolete),
        aborted=tuple(aborted),
        aborted_write_ids=tuple(aborted_wids),
        uncompacted_aborts=uncompacted_aborts,
    )
