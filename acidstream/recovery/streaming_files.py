"""What recovery does with a streaming file whose writer is gone: the one decision.

A streaming writer (``acidstream.acid.file_writer``) ends each flush with an intermediate ORC footer,
makes it durable, then appends the footer's end to the ``_flush_length`` side file, and
only then commits the txn. So every committed row is followed, in the file, by a durable
footer: the *last readable footer* of the file covers every committed row, whatever
became of the side file.

:func:`judge_dead_writer_file` reads the side file and the file and says what ``repair``
may do, and :mod:`acidstream.recovery.fsck` reports its verdict as a finding. ``repair`` plans from
that finding and, right before it acts, asks again and acts only on the same answer: one
code path decides, so the dry run lists exactly what ``--apply`` does. The rules:

* the side file's last length decodes, and no row past it (up to the last readable
  footer) belongs to a committed write id: cut the file there (``orcfiledump --recover``);
* otherwise, if the file has a readable footer (the side file is empty, torn, garbage or
  short of a committed txn): the side file is bad (``bad_side_file``), and the safe cut is
  the last readable footer, which keeps every committed row;
* no readable footer and a whole side file with no length past 0: the file was never
  flushed, nothing in it can be read; it is moved to the table's quarantine, never
  deleted;
* no readable footer and a side file that is torn or points at nothing readable: left to
  the operator.

A file is never deleted here, and a cut never goes below a committed row.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass

from acidstream.acid.errors import AcidStreamError
from acidstream.acid.layout import side_file_name
from acidstream.acid.orc_inspect import acid_column_names, inspect_orc
from acidstream.acid.side_file import decode_flush_lengths
from acidstream.acid.storage import Storage

__all__ = [
    "SideFileState",
    "Verdict",
    "judge_dead_writer_file",
    "last_readable_footer",
    "read_side_file",
    "write_ids_past",
]

# The end of every ORC tail: the PostScript's last field is its magic (field 8000, "ORC"),
# then one byte, the PostScript's length. A footer ends 4 bytes after an "ORC".
_MAGIC = b"ORC"


@dataclass(frozen=True)
class SideFileState:
    """A side file as recovery sees it: its complete lengths, and whether it is torn."""

    lengths: tuple[int, ...]
    torn: bool

    @property
    def last(self) -> int:
        """The last complete flush length (0 when none: nothing was ever flushed)."""
        return self.lengths[-1] if self.lengths else 0


def read_side_file(storage: Storage, data_path: str) -> SideFileState | None:
    """The side file of ``data_path``, tolerating a torn last entry (recovery reads what a
    dead writer left; readers refuse it). ``None`` when there is no side file."""
    side = side_file_name(data_path)
    if not storage.exists(side):
        return None
    raw = storage.read_bytes(side)
    whole = len(raw) - len(raw) % 8
    return SideFileState(tuple(decode_flush_lengths(raw[:whole], path=side)), whole != len(raw))


@dataclass(frozen=True)
class Verdict:
    """What recovery makes of one dead writer's streaming file.

    Attributes:
        kind: The fsck finding: ``dead_writer_side_file`` (the side file is right) or
            ``bad_side_file`` (it is empty, torn, garbage, or short of committed rows).
        detail: One line saying why.
        cut_to: Repair cuts the file to this length (a readable footer) and removes the
            side file; ``None``: no cut.
        quarantine: Repair moves the file and its side file to the quarantine (nothing in
            the file can be read).
    """

    kind: str
    detail: str
    cut_to: int | None = None
    quarantine: bool = False

    @property
    def remedy(self) -> str:
        """What repair does, comparable between the plan and the re-check before acting."""
        if self.cut_to is not None:
            return f"cut:{self.cut_to}"
        return "quarantine" if self.quarantine else "none"


def _decodes_at(storage: Storage, path: str, length: int, size: int) -> bool:
    """Whether the first ``length`` bytes of ``path`` are a whole ORC file (tail and every
    stripe)."""
    try:
        orc_file, _info = inspect_orc(storage, path, length=length, file_length=size)
        orc_file.read()
    except Exception:  # any decoder failure means: not a readable footer there
        return False
    return True


def last_readable_footer(storage: Storage, path: str, *, size: int, above: int = 0) -> int | None:
    """The end of the last footer of ``path`` (within its first ``size`` bytes) at which the
    file decodes whole, looking only past ``above``; ``None`` when there is none.

    Candidates are the ends of the ORC magic ``ORC`` that closes every tail; each is
    verified by decoding, from the end backwards, so the first that decodes is the last.
    """
    if size <= above + 4:
        return None
    with storage.open_read(path) as f:
        if storage.local_path(path) is not None:  # a real file: map it, no copy
            try:
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # emptied since it was listed: no footer in it
                return None
            with mm:
                return _scan(storage, path, mm, size=size, above=above)
        buf: bytes = f.read(size)
        return _scan(storage, path, buf, size=size, above=above)


def _scan(
    storage: Storage, path: str, buf: bytes | mmap.mmap, *, size: int, above: int
) -> int | None:
    end = min(size, len(buf))
    # The magic at offset 0 is the file's header, not a tail: start the search at 1.
    lo = max(1, above - 3)
    while True:
        i = buf.rfind(_MAGIC, lo, end)
        if i < 0:
            return None
        length = i + len(_MAGIC) + 1
        if above < length <= size and _decodes_at(storage, path, length, size):
            return length
        end = i + len(_MAGIC) - 1  # the next candidate ends before this one


def write_ids_past(storage: Storage, path: str, *, cut: int, end: int, size: int) -> set[int]:
    """The write ids (``currentTransaction``) of the rows of ``path`` that the footer at
    ``end`` holds and the footer at ``cut`` does not.

    Raises:
        AcidStreamError: the file is not an ACID event file at ``end``.
    """
    _f, at_cut = inspect_orc(storage, path, length=cut, file_length=size)
    orc_file, at_end = inspect_orc(storage, path, length=end, file_length=size)
    if at_end.acid_columns is None:
        raise AcidStreamError(f"{path}: not an ACID event file; its rows carry no write id")
    column = acid_column_names(orc_file.schema)
    assert column is not None
    ids = orc_file.read(columns=[column["currentTransaction"]]).column(0)
    return {int(w) for w in ids.slice(at_cut.nrows).to_pylist() if w is not None}


def judge_dead_writer_file(
    storage: Storage,
    path: str,
    *,
    size: int,
    state_of: Callable[[int], str],
) -> Verdict:
    """What repair may do with ``path``, a streaming file whose writer is gone (no write id
    of its directory is open); see the module doc.

    Args:
        storage: The table's storage.
        path: The data file (it has a side file).
        size: The file's size.
        state_of: A write id's state at the snapshot (``committed``, ``aborted``, ``open``
            or ``unknown``; anything but ``aborted`` counts as possibly committed).
    """
    problem: str | None = None
    side: SideFileState | None = None
    try:
        side = read_side_file(storage, path)
    except (OSError, AcidStreamError) as e:
        problem = f"side file cannot be read: {e}"
    if side is None and problem is None:
        problem = "side file is gone"
    cut: int | None = None
    if side is not None:
        if side.last == 0:
            # A flush with no rows yet records 0: nothing was flushed.
            problem = "side file holds no flush length past 0" + (
                " (a torn entry)" if side.torn else ""
            )
        elif not 0 < side.last <= size:
            problem = f"side file's last flush {side.last} is outside the {size}-byte file"
        elif not _decodes_at(storage, path, side.last, size):
            problem = f"the file does not decode at the side file's last flush {side.last}"
        else:
            cut = side.last
    torn = ", side file torn" if side is not None and side.torn else ""
    if cut is not None:
        later = last_readable_footer(storage, path, size=size, above=cut)
        if later is None:
            return Verdict(
                "dead_writer_side_file",
                f"last flush {cut} of {size} bytes ({size - cut} unflushed){torn}",
                cut_to=cut,
            )
        try:
            kept = sorted(
                w
                for w in write_ids_past(storage, path, cut=cut, end=later, size=size)
                if state_of(w) != "aborted"
            )
        except (OSError, AcidStreamError) as e:
            kept = []
            problem = f"rows past the last flush {cut} cannot be told apart: {e}"
        if not kept and problem is None:
            return Verdict(
                "dead_writer_side_file",
                f"last flush {cut} of {size} bytes ({size - cut} unflushed; the footer at "
                f"{later} past it holds aborted rows only){torn}",
                cut_to=cut,
            )
        return Verdict(
            "bad_side_file",
            problem
            or f"side file's last flush {cut} is short of committed rows: the footer at "
            f"{later} holds rows of write ids {kept}; the safe cut is {later}",
            cut_to=later,
        )
    assert problem is not None
    footer = last_readable_footer(storage, path, size=size)
    if footer is not None:
        return Verdict(
            "bad_side_file",
            f"{problem}; the last readable footer ends at {footer} of {size} bytes (the "
            "safe cut: every committed row is before a durable footer)",
            cut_to=footer,
        )
    if side is not None and side.last == 0 and not side.torn:
        return Verdict(
            "dead_writer_side_file",
            f"never flushed: no flush length and no readable footer in {size} bytes",
            quarantine=True,
        )
    return Verdict(
        "bad_side_file",
        f"{problem}; no readable footer in {size} bytes: left for the operator",
    )
