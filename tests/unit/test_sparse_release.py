"""Residual blocks of sparse production releases: the items are the query cells non-zero in the
truth or a replicate's release, with the dense residuals' values and order; the cells left out
are zero everywhere; the nation's sum; the capacity bound holds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography.schema import schema
from auditlib.geography.sparse_histograms import SparseHistograms, from_keys
from auditlib.simulate.sparse_release import (
    PART_ENTRIES,
    StreamedParts,
    capacity,
    sparse_level_residuals,
    sum_units,
    unit_parts,
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


@pytest.mark.parametrize("part_entries", [PART_ENTRIES, 1, 40])
def test_items_are_the_dense_residuals_non_zero_somewhere(level, part_entries) -> None:  # type: ignore[no-untyped-def]
    """Whatever the parts of the units the block is built in (all in one; a unit each; about
    three units each: 40 entries of the truth and three replicates, ~13 per unit)."""
    truth, dps = level
    ids = {q: i for i, q in enumerate(QUERIES)}
    n_parts = len(unit_parts([truth, *dps], part_entries))
    assert n_parts == {PART_ENTRIES: 1, 1: truth.n_units}.get(part_entries, n_parts)
    assert part_entries != 40 or 1 < n_parts < truth.n_units
    got = sparse_level_residuals(truth, dps, QUERIES, ids, part_entries)
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


def test_unit_parts_cover_the_units_within_their_bound(level) -> None:  # type: ignore[no-untyped-def]
    """Consecutive ranges from unit 0 to the last, each of at most ``limit`` entries of all the
    histograms together unless it is one unit, and no two neighbours that would fit together."""
    truth, dps = level
    hists = [truth, *dps]
    per_unit = sum(np.diff(h.indptr) for h in hists)
    for limit in (1, 13, 40, 10**6):
        parts = unit_parts(hists, limit)
        assert parts[0][0] == 0 and parts[-1][1] == truth.n_units
        assert all(b == c for (_, b), (c, _) in itertools.pairwise(parts))
        sizes = [int(per_unit[a:b].sum()) for a, b in parts]
        assert all(n <= limit or b - a == 1 for n, (a, b) in zip(sizes, parts, strict=True))
        assert all(
            n + int(per_unit[b]) > limit for n, (_, b) in zip(sizes, parts[:-1], strict=False)
        )


@pytest.mark.parametrize("piece", [1, 5, 64, 10_000])
def test_a_streamed_block_reads_as_the_block_holding_few_parts(level, piece) -> None:  # type: ignore[no-untyped-def]
    """Read forwards in pieces of ``piece`` items, a block computed part by part (parts of ~40
    entries: several per query) gives the block's items and values, holding no more parts than
    the piece spans."""
    truth, dps = level
    ids = {q: i for i, q in enumerate(QUERIES)}
    whole = sparse_level_residuals(truth, dps, QUERIES, ids)
    streamed = StreamedParts(truth, dps, QUERIES, ids, part_entries=40)
    assert (streamed.n_items, streamed.replicates) == (whole.n_items, len(dps))
    n_parts = len(QUERIES) * len(unit_parts([truth, *dps], 40))
    got, most = [], 0
    for a in range(0, whole.n_items, piece):
        got.append(streamed.items(a, min(a + piece, whole.n_items)))
        most = max(most, len(streamed._held))
    assert most <= (n_parts if piece >= whole.n_items else piece + 2)
    assert piece > 1 or most == 1
    np.testing.assert_array_equal(np.hstack([g.residual for g in got]), whole.residual)
    for name in ("truth", "query_index", "unit_index", "cell_index"):
        np.testing.assert_array_equal(
            np.concatenate([getattr(g, name) for g in got]), getattr(whole, name), name
        )
