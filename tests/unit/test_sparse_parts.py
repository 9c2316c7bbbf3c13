"""A level's fit in parts of whole parents (``auditlib.simulate.sparse_parts``): the parts cover
the variables in ranges of whole parents of about ``PART_VARIABLES`` each, and solved in other
processes they give the same fit, statistics and release, bit for bit, as solved here."""

from __future__ import annotations

import itertools
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from auditlib.simulate import sparse_parts
from auditlib.simulate.sparse_parts import ranges
from tests.unit._pl94_state import pl94_release, pl94_state

#: small parts, so that every level below the County is several
PART = 400


@pytest.fixture(scope="module")
def pool():  # type: ignore[no-untyped-def]
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as p:
        yield p


def test_parts_are_ranges_of_whole_parents_of_about_the_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sparse_parts, "PART_VARIABLES", 10)
    parent = np.repeat(np.arange(8), [3, 9, 2, 12, 1, 1, 4, 5])
    got = ranges(parent, parent.size)
    assert got[0][0] == 0 and got[-1][1] == parent.size
    assert all(b == c for (_, b), (c, _) in itertools.pairwise(got))  # contiguous
    starts = {0, *np.flatnonzero(np.diff(parent) != 0) + 1}
    assert all(a in starts for a, _ in got)  # each begins at a parent's first variable
    assert all(b - a >= 10 for a, b in got[:-1])
    assert got == [(0, 12), (12, 26), (26, 37)]
    assert ranges(None, parent.size) == [(0, parent.size)]  # no parents: one problem
    assert ranges(parent[::-1].copy(), parent.size) == [(0, parent.size)]  # not grouped


def test_a_release_with_its_parts_in_other_processes_is_the_same(
    pool: ProcessPoolExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = pl94_state(0.02, 6_000_000, counties=2)
    monkeypatch.setattr(sparse_parts, "PART_VARIABLES", PART)
    calls = []
    start = sparse_parts.start_parts

    def counted(fit, terms, parts, pool, **kw):  # type: ignore[no-untyped-def]
        calls.append((len(parts), pool is not None))
        return start(fit, terms, parts, pool, **kw)

    monkeypatch.setattr("auditlib.simulate.sparse_fit.start_parts", counted)
    here = pl94_release(state, tol=1e-2)
    assert calls and all(not p for _, p in calls) and max(n for n, _ in calls) >= 4
    calls.clear()
    there = pl94_release(state, tol=1e-2, pool=pool)
    assert calls and all(p for _, p in calls)  # the parts went to the pool
    for x, y in zip(here.dp, there.dp, strict=True):
        np.testing.assert_array_equal(x.indptr, y.indptr)
        np.testing.assert_array_equal(x.cells, y.cells)
        np.testing.assert_array_equal(x.counts, y.counts)
    assert here.iterations == there.iterations and here.variables == there.variables


#: small chunks, so that with a pool a level's next chunk is measured before the last is rounded
CHUNK = 500


def _same(a, b) -> None:  # type: ignore[no-untyped-def]
    for x, y in zip(a.dp, b.dp, strict=True):
        np.testing.assert_array_equal(x.indptr, y.indptr)
        np.testing.assert_array_equal(x.cells, y.cells)
        np.testing.assert_array_equal(x.counts, y.counts)
    assert a.iterations == b.iterations and a.variables == b.variables


def test_chunks_in_flight_together_release_the_same_and_resume_to_it(
    pool: ProcessPoolExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    # with a pool, chunk j + 1's noise is drawn before chunk j is finished: the release is the
    # same, and a run stopped after some chunks resumes from the generator's state after the
    # last kept chunk's noise (not after the next's), to the unbroken release
    from auditlib.simulate.sparse_progress import MemoryProgress, Stopped

    state = pl94_state(0.02, 6_000_000, counties=2)
    monkeypatch.setattr(sparse_parts, "PART_VARIABLES", PART)
    here = pl94_release(state, tol=1e-2, chunk_variables=CHUNK)
    there = pl94_release(state, tol=1e-2, chunk_variables=CHUNK, pool=pool)
    _same(here, there)
    for stop_after in (2, 9):
        kept = MemoryProgress(stop_after=stop_after)
        with pytest.raises(Stopped):
            pl94_release(state, tol=1e-2, chunk_variables=CHUNK, pool=pool, progress=kept)
        kept.stop_after = None
        resumed = pl94_release(state, tol=1e-2, chunk_variables=CHUNK, pool=pool, progress=kept)
        _same(here, resumed)
