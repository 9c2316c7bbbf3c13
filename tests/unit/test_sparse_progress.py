"""Resume points inside a sparse TopDown run (``auditlib.simulate.sparse_progress``): a run stopped
after some chunks and resumed releases exactly what an unbroken run releases, and does not
release the kept chunks again."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.simulate import sparse_topdown as sparse_topdown_module
from auditlib.simulate.sparse_progress import Batch, Chunk, MemoryProgress, Stopped, kept_prefix
from tests.unit._pl94_state import pl94_release, pl94_state

#: small chunks, so that every level below the State is several
CHUNK = 500


@pytest.fixture(scope="module")
def state():  # type: ignore[no-untyped-def]
    return pl94_state(0.02, 6_000_000, counties=2)


def _run(state, progress=None):  # type: ignore[no-untyped-def]
    return pl94_release(state, tol=1e-2, progress=progress, chunk_variables=CHUNK)


@pytest.fixture(scope="module")
def unbroken(state):  # type: ignore[no-untyped-def]
    return _run(state)


def _same(a, b) -> None:  # type: ignore[no-untyped-def]
    assert len(a.dp) == len(b.dp)
    for x, y in zip(a.dp, b.dp, strict=True):
        np.testing.assert_array_equal(x.indptr, y.indptr)
        np.testing.assert_array_equal(x.cells, y.cells)
        np.testing.assert_array_equal(x.counts, y.counts)
    assert a.iterations == b.iterations and a.variables == b.variables


def test_the_levels_are_released_in_several_chunks(state) -> None:  # type: ignore[no-untyped-def]
    kept = MemoryProgress()
    _run(state, kept)
    per_level = {lv: sum(len(b.chunks) for b in bs) for lv, bs in kept.kept.items()}
    # the State and the County (children of the one State) are one chunk each
    assert per_level[0] == per_level[1] == 1 and per_level[3] >= 2 and per_level[4] >= 10
    assert kept.saves == kept.chunks()  # every = 0: each chunk saved as it finishes


@pytest.mark.parametrize("stop_after", [1, 3, 7, 12])
def test_a_stopped_run_resumes_to_the_unbroken_release(state, unbroken, stop_after) -> None:  # type: ignore[no-untyped-def]
    kept = MemoryProgress(stop_after=stop_after)
    with pytest.raises(Stopped):
        _run(state, kept)
    before = kept.chunks()
    assert before == stop_after
    kept.stop_after = None
    released = []
    orig = sparse_topdown_module._child_level

    def counting(level, up, parents, c0, c1):  # type: ignore[no-untyped-def]
        released.append((c0, c1))
        return orig(level, up, parents, c0, c1)

    sparse_topdown_module._child_level = counting
    try:
        resumed = _run(state, kept)
    finally:
        sparse_topdown_module._child_level = orig
    _same(resumed, unbroken)
    # the kept chunks (the State's among them) were not released again
    total = MemoryProgress()
    _run(state, total)
    assert len(released) == total.chunks() - before


def test_batches_keep_every_level_whole_before_the_next(state, unbroken) -> None:  # type: ignore[no-untyped-def]
    # saves at most once a minute: nothing kept for this small state, and the same release
    kept = MemoryProgress(every=60.0)
    _same(_run(state, kept), unbroken)
    assert kept.saves == 0


def test_kept_chunks_that_do_not_match_the_ranges_are_released_again() -> None:
    def chunk(c0: int, c1: int) -> Chunk:
        return Chunk(c0, c1, np.zeros(0, np.int64), np.zeros(0, np.int64), 1, 1)

    ranges = [(0, 3), (3, 5), (5, 9)]
    good = Batch(1, 0, [chunk(0, 3)], {"s": 1})
    stale = Batch(1, 1, [chunk(3, 6)], {"s": 2})  # cut at another size
    fresh = Batch(1, 1, [chunk(3, 5), chunk(5, 9)], {"s": 3})
    got, state = kept_prefix([stale, good], ranges)
    assert [(c.c0, c.c1) for c in got] == [(0, 3)] and state == {"s": 1}
    got, state = kept_prefix([stale, fresh, good], ranges)
    assert [(c.c0, c.c1) for c in got] == ranges and state == {"s": 3}
    assert kept_prefix([fresh], ranges) == ([], None)  # not from the first chunk
