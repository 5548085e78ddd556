"""sort_events: ROW__ID order, and the already-sorted input returned as it is."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream.compaction.rewrite import sort_events


def _events(o: list[int], b: list[int], r: list[int], c: list[int]) -> pa.Table:
    n = len(o)
    return pa.table(
        {
            "op": pa.array(np.zeros(n, np.int32)),
            "o": pa.array(o, pa.int64()),
            "b": pa.array(b, pa.int32()),
            "r": pa.array(r, pa.int64()),
            "c": pa.array(c, pa.int64()),
            "row": pa.array([{"x": i} for i in range(n)], pa.struct([("x", pa.int64())])),
        }
    )


def _full_sort(t: pa.Table, newest_first: bool) -> pa.Table:
    keys = [("o", "ascending"), ("b", "ascending"), ("r", "ascending")]
    if newest_first:
        keys.append(("c", "descending"))
    return t.take(pc.sort_indices(t, sort_keys=keys))


@pytest.mark.parametrize("newest_first", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_sort_events_equals_the_full_stable_sort(seed: int, newest_first: bool) -> None:
    """Random events (small ranges, so ties and nearly sorted runs are common), some
    already sorted: the result is exactly the stable sort's, rows and order."""
    rnd = np.random.default_rng(seed)
    n = int(rnd.integers(0, 60))
    cols = [rnd.integers(0, 3, n).tolist() for _ in range(4)]
    cols[1] = [536870912 + 65536 * x for x in cols[1]]  # V1 bucket properties
    t = _events(*cols)
    if seed % 3 == 0:
        t = _full_sort(t, newest_first)  # the sorted input of the common case
    assert sort_events(t, newest_first=newest_first).equals(_full_sort(t, newest_first))


def test_sorted_input_is_returned_without_a_copy() -> None:
    """Events already in ROW__ID order (deltas read in write-id order) skip the take."""
    t = _events([1, 1, 2, 2], [536870912] * 4, [0, 1, 0, 0], [1, 1, 3, 2])
    assert sort_events(t) is t
    assert sort_events(t, newest_first=True) is t  # c descending within the tied key


def test_unsorted_key_after_a_tie_is_sorted() -> None:
    """A later key out of order after equal earlier keys is caught (r after equal o, b;
    c ascending where delete events want it descending)."""
    t = _events([1, 1], [536870912] * 2, [1, 0], [1, 1])
    assert sort_events(t).column("r").to_pylist() == [0, 1]
    d = _events([1, 1], [536870912] * 2, [0, 0], [2, 3])
    assert sort_events(d, newest_first=True).column("c").to_pylist() == [3, 2]
    assert sort_events(d).column("c").to_pylist() == [2, 3]  # inserts: stable, as they were


def test_null_keys_go_through_the_sort() -> None:
    """Null keys are left to Arrow's sort (nulls last) rather than compared in numpy."""
    t = pa.table(
        {
            "o": pa.array([None, 1], pa.int64()),
            "b": pa.array([1, 1], pa.int32()),
            "r": pa.array([0, 0], pa.int64()),
        }
    )
    assert sort_events(t).column("o").to_pylist() == [1, None]
