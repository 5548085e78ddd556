"""The one table printer of the ``acidstream`` command: aligned columns, a dashed line under
the header, no trailing spaces; ``None`` prints as an empty cell."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

__all__ = ["print_table"]


def print_table(
    header: Sequence[str], rows: Iterable[Sequence[object]], out: TextIO | None = None
) -> None:
    """Print ``rows`` under ``header`` in aligned columns to ``out`` (stdout by default)."""
    out = out or sys.stdout
    body = [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max([len(h), *(len(r[i]) for r in body)]) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() + "\n"

    out.write(line(list(header)))
    out.write(line(["-" * w for w in widths]))
    for r in body:
        out.write(line(r))
