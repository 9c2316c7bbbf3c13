"""Residual blocks of sparse production releases: the items are the query cells non-zero in the
truth or a replicate's release, with the dense residuals' values and order; the cells left out
are zero everywhere; the nation's sum; the capacity bound holds."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography.schema import schema
from auditlib.geography.sparse_histograms import SparseHistograms, from_keys
from auditlib.simulate.sparse_release import (
    capacity,
    sparse_level_residuals,
    sum_units,
    unstored_cells,
)
from auditlib.simulate.topdown_residuals import level_residuals

NAME = "pl94_production"
SCH = schema(NAME)
QUERIES = ("total", "hhgq", "votingage * hispanic", "detailed")


def _random(rng: np.random.Generator, n_units: int, people: int) -> SparseHistograms:
    """``people`` people over a few cells of each of ``n_units`` units (some units empty)."""
    unit = rng.integers(0, n_units, people)
    cell = rng.choice(rng.integers(0, SCH.n_cells, 12), people)  # few distinct cells
    keys, counts = np.unique(unit * SCH.n_cells + cell, return_counts=True)
    return from_keys(NAME, keys, counts, n_units)


@pytest.fixture(scope="module")
def level() -> tuple[SparseHistograms, list[SparseHistograms]]:
    rng = np.random.default_rng(3)
    return _random(rng, 9, 60), [_random(rng, 9, 60) for _ in range(3)]


def test_items_are_the_dense_residuals_non_zero_somewhere(level) -> None:  # type: ignore[no-untyped-def]
    truth, dps = level
    ids = {q: i for i, q in enumerate(QUERIES)}
    got = sparse_level_residuals(truth, dps, QUERIES, ids)
    matrices = {q: SCH.query_matrix(q) for q in QUERIES}
    dense = level_residuals(truth.dense(), [d.dense() for d in dps], matrices, QUERIES, ids)
    released = dense.residual.astype(np.int64) + dense.truth  # (replicates, items)
    keep = (dense.truth != 0) | (released != 0).any(axis=0)
    assert 0 < keep.sum() < keep.size  # some cells are left out, some kept
    np.testing.assert_array_equal(got.residual, dense.residual[:, keep])
    for name in ("truth", "query_index", "unit_index", "cell_index"):
        np.testing.assert_array_equal(getattr(got, name), getattr(dense, name)[keep], name)
    # the cells left out, per query: zero in the truth and in every replicate
    cells = {ids[q]: truth.n_units * SCH.n_query_cells(q) for q in QUERIES}
    left = unstored_cells(got, cells)
    for q in QUERIES:
        cols = dense.query_index == ids[q]
        assert left[ids[q]] == int((cols & ~keep).sum())
    assert left[ids["detailed"]] > 0


def test_the_nation_sums_the_states_and_bad_input(level) -> None:  # type: ignore[no-untyped-def]
    truth, dps = level
    states = [truth.aggregate(np.zeros(truth.n_units, np.int64), 1)] + [
        d.aggregate(np.zeros(d.n_units, np.int64), 1) for d in dps
    ]
    nation = sum_units(states)
    np.testing.assert_array_equal(nation.dense()[0], sum(s.dense()[0] for s in states))
    with pytest.raises(InvalidParameterError, match="one-unit"):
        sum_units([truth])
    with pytest.raises(InvalidParameterError, match="same units"):
        sparse_level_residuals(truth, [states[0]], QUERIES, {q: 0 for q in QUERIES})
    with pytest.raises(UnknownNameError, match="'hhgq'"):
        sparse_level_residuals(truth, dps, ("hhgq",), {"total": 0})


def test_capacity_bounds_the_items(level) -> None:  # type: ignore[no-untyped-def]
    truth, dps = level
    ids = {q: i for i, q in enumerate(QUERIES)}
    got = sparse_level_residuals(truth, dps, QUERIES, ids)
    cap = capacity(truth.n_units, [SCH.n_query_cells(q) for q in QUERIES], 60, len(dps))
    assert got.n_items <= cap
    # per query the fewer of its cells and (replicates + 1) × people: total has 9 cells here
    assert cap == 9 + 9 * 8 + 9 * 4 + 4 * 60  # detailed: 4 × 60 < 9 × 2,016
